/* CPU reference of the detection pipeline's backend entries (odl/backend.h): the letterbox (EXIF
 * orientation, cv2's INTER_LINEAR resize, placement, normalisation; kernels/resize_linear.h), and batched
 * YOLOv5 NMS. The CUDA twins are kernels/cuda/detect_post.cu; both
 * give bitwise the same output.
 *
 * yolo_nms sorts candidates by a 64-bit key, (~score bits) << 32 | anchor * nc + class: scores are
 * positive floats, whose bit patterns order as the values, so ascending keys are decreasing scores with
 * ties in (anchor, class) order, i.e. odl_yolo_nms's stable order. The greedy pass stops at max_det
 * kept boxes: a box after them cannot change which boxes come first. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu.h"
#include "kernels/resize_linear.h"

odl_status odl_cpu_letterbox_u8(int N, int H, int W, const uint8_t *src, const odl_letterbox_src *img, uint8_t pad,
                                float *y) {
    const size_t hw = (size_t)H * W;
    const float fill = (float)pad / 255.0f;
    for (int n = 0; n < N; n++) {
        const odl_letterbox_src *g = &img[n];
        const int swap = g->orient >= 5 && g->orient <= 8, ow = swap ? g->h : g->w, oh = swap ? g->w : g->h;
        const double sx = odl_rl_scale(g->unpad_w, ow), sy = odl_rl_scale(g->unpad_h, oh);
        const uint8_t *s = src + g->off;
        float *o = y + (size_t)n * 3 * hw;
        int *xc = malloc(sizeof(int) * 4 * (size_t)(g->unpad_w > 0 ? g->unpad_w : 1)); /* the columns' taps, once */
        if (!xc) return ODL_ERR(ODL_E_NOMEM, "letterbox_u8: %d columns", g->unpad_w);
        for (int dx = 0; dx < g->unpad_w; dx++) odl_rl_coef(dx, sx, ow, &xc[4 * dx], &xc[4 * dx + 1], &xc[4 * dx + 2], &xc[4 * dx + 3]);
        for (int yy = 0; yy < H; yy++) {
            const int dy = yy - g->top;
            int y0 = 0, y1 = 0, b0 = 0, b1 = 0;
            if (dy >= 0 && dy < g->unpad_h) odl_rl_coef(dy, sy, oh, &y0, &y1, &b0, &b1);
            for (int xx = 0; xx < W; xx++) {
                const int dx = xx - g->left;
                const size_t at = (size_t)yy * W + xx;
                if (dx < 0 || dx >= g->unpad_w || dy < 0 || dy >= g->unpad_h) {
                    o[at] = o[hw + at] = o[2 * hw + at] = fill;
                    continue;
                }
                const int x0 = xc[4 * dx], x1 = xc[4 * dx + 1], a0 = xc[4 * dx + 2], a1 = xc[4 * dx + 3];
                const uint8_t *p[4];
                const int tx[4] = {x0, x1, x0, x1}, ty[4] = {y0, y0, y1, y1};
                for (int t = 0; t < 4; t++) {
                    int px, py;
                    odl_orient_src(g->orient, g->w, g->h, tx[t], ty[t], &px, &py);
                    p[t] = s + (size_t)py * g->pitch + (size_t)px * 3;
                }
                for (int c = 0; c < 3; c++)
                    o[c * hw + at] = (float)odl_rl_value(p[0][c], p[1][c], p[2][c], p[3][c], a0, a1, b0, b1) / 255.0f;
            }
        }
        free(xc);
    }
    return ODL_OK;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t nms_key(float score, uint32_t idx) {
    uint32_t bits;
    memcpy(&bits, &score, sizeof bits);
    return ((uint64_t)(0xFFFFFFFFu - bits) << 32) | idx;
}

/* Candidate idx's box (xyxy, input pixels) and score, recomputed from its prediction row. */
static void nms_cand(const float *pred, int nc, uint64_t key, float box[4], float *score, int *cls) {
    uint32_t idx = (uint32_t)key, bits = 0xFFFFFFFFu - (uint32_t)(key >> 32);
    const float *r = pred + (size_t)(idx / (uint32_t)nc) * (5 + nc);
    *cls = (int)(idx % (uint32_t)nc);
    memcpy(score, &bits, sizeof bits);
    box[0] = r[0] - r[2] / 2;
    box[1] = r[1] - r[3] / 2;
    box[2] = r[0] + r[2] / 2;
    box[3] = r[1] + r[3] / 2;
}

odl_status odl_cpu_yolo_nms(const odl_yolo_nms_args *a) {
    const int nc = a->nc, no = 5 + nc;
    uint64_t *keys = malloc(sizeof(uint64_t) * (size_t)a->cand_cap);
    float *ob = malloc(sizeof(float) * 4 * (size_t)a->cand_cap), *area = malloc(sizeof(float) * (size_t)a->cand_cap);
    uint8_t *sup = malloc((size_t)a->cand_cap);
    if (!keys || !ob || !area || !sup) {
        free(keys);
        free(ob);
        free(area);
        free(sup);
        return ODL_ERR(ODL_E_NOMEM, "yolo_nms: workspace for %d candidates", a->cand_cap);
    }
    for (int n = 0; n < a->N; n++) {
        const float *pred = a->pred + (size_t)n * a->rows * no;
        float *out = a->out + (size_t)n * a->max_det * 6;
        int cnt = 0, over = 0;
        for (int64_t r = 0; r < a->rows && !over; r++) {
            const float *p = pred + r * no;
            const float obj = p[4];
            if (!(obj > a->conf_thres)) continue;
            int best = 0;
            float bestc = -INFINITY;
            for (int j = 0; j < nc; j++) {
                float c = p[5 + j] * obj;
                if (a->multi_label) {
                    if (!(c > a->conf_thres)) continue;
                    if (cnt == a->cand_cap) {
                        over = 1;
                        break;
                    }
                    keys[cnt++] = nms_key(c, (uint32_t)(r * nc + j));
                } else if (c > bestc) {
                    bestc = c;
                    best = j;
                }
            }
            if (!a->multi_label && bestc > a->conf_thres) {
                if (cnt == a->cand_cap) over = 1;
                else keys[cnt++] = nms_key(bestc, (uint32_t)(r * nc + best));
            }
        }
        if (over) {
            a->count[n] = -1;
            continue;
        }
        qsort(keys, (size_t)cnt, sizeof *keys, cmp_u64);
        const int m = cnt < a->max_nms ? cnt : a->max_nms;
        for (int k = 0; k < m; k++) {
            float b[4], s;
            int c;
            nms_cand(pred, nc, keys[k], b, &s, &c);
            const float off = a->agnostic ? 0.f : (float)c * a->max_wh;
            for (int q = 0; q < 4; q++) ob[4 * k + q] = b[q] + off;
            area[k] = (ob[4 * k + 2] - ob[4 * k]) * (ob[4 * k + 3] - ob[4 * k + 1]);
            sup[k] = 0;
        }
        int kept = 0;
        for (int i = 0; i < m && kept < a->max_det; i++) {
            if (sup[i]) continue;
            float b[4], s;
            int c;
            nms_cand(pred, nc, keys[i], b, &s, &c);
            float *o = out + (size_t)kept * 6;
            memcpy(o, b, sizeof b);
            o[4] = s;
            o[5] = (float)c;
            if (++kept == a->max_det) break;
            const float *bi = ob + 4 * i;
            for (int j = i + 1; j < m; j++) {
                if (sup[j]) continue;
                const float *bj = ob + 4 * j;
                float w = fmaxf(0.f, fminf(bi[2], bj[2]) - fmaxf(bi[0], bj[0]));
                float h = fmaxf(0.f, fminf(bi[3], bj[3]) - fmaxf(bi[1], bj[1]));
                float inter = w * h;
                if (inter / (area[i] + area[j] - inter) > a->iou_thres) sup[j] = 1;
            }
        }
        a->count[n] = kept;
    }
    free(keys);
    free(ob);
    free(area);
    free(sup);
    return ODL_OK;
}

odl_status odl_cpu_yolo_candidates(const odl_yolo_cand_args *a) {
    const int no = 5 + a->nc;
    for (int n = 0; n < a->N; n++) {
        const float *pred = a->pred + (size_t)n * a->rows * no;
        float *out = a->out + (size_t)n * a->cap * no;
        int32_t cnt = 0, bad = 0;
        for (int64_t r = 0; r < a->rows; r++) {
            const float *p = pred + r * no;
            for (int j = 0; j < no; j++)
                if (!isfinite(p[j])) {
                    bad++;
                    break;
                }
            if (!(p[4] > a->conf_thres)) continue;
            if (cnt < a->cap) memcpy(out + (size_t)cnt * no, p, sizeof(float) * no);
            cnt++;
        }
        a->count[n] = cnt;
        a->nonfinite[n] = bad;
    }
    return ODL_OK;
}
