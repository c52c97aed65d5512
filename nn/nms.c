/* CPU NMS: torchvision.ops.nms and YOLOv5's non_max_suppression. See include/odl/nms.h. */
#include "odl/nms.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

odl_nms_params odl_nms_defaults(void) {
    odl_nms_params p;
    p.conf_thres = 0.25f;
    p.iou_thres = 0.45f;
    p.max_det = 1000;
    p.multi_label = 0;
    p.agnostic = 0;
    p.max_nms = 30000;
    p.max_wh = 7680.f;
    p.classes = NULL;
    p.n_classes = 0;
    return p;
}

float odl_box_iou(const float a[4], const float b[4]) {
    float iw = fminf(a[2], b[2]) - fmaxf(a[0], b[0]);
    float ih = fminf(a[3], b[3]) - fmaxf(a[1], b[1]);
    float inter = fmaxf(iw, 0.f) * fmaxf(ih, 0.f);
    float u = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter;
    return u > 0 ? inter / u : 0.f;
}

/* Sort indices by decreasing score, stable (merge sort, so equal scores keep their order). */
typedef struct { float s; int i; } scored;

static void merge_sort_desc(scored *a, scored *tmp, int n) {
    if (n < 2) return;
    int h = n / 2;
    merge_sort_desc(a, tmp, h);
    merge_sort_desc(a + h, tmp, n - h);
    int i = 0, j = h, k = 0;
    while (i < h && j < n) tmp[k++] = (a[j].s > a[i].s) ? a[j++] : a[i++];
    while (i < h) tmp[k++] = a[i++];
    while (j < n) tmp[k++] = a[j++];
    memcpy(a, tmp, sizeof(scored) * n);
}

static odl_status sort_desc(const float *scores, int n, int *order) {
    scored *a = malloc(sizeof(scored) * (n ? n : 1)), *t = malloc(sizeof(scored) * (n ? n : 1));
    if (!a || !t) {
        free(a);
        free(t);
        return ODL_ERR(ODL_E_NOMEM, "nms: cannot sort %d scores", n);
    }
    for (int i = 0; i < n; i++) {
        a[i].s = scores[i];
        a[i].i = i;
    }
    merge_sort_desc(a, t, n);
    for (int i = 0; i < n; i++) order[i] = a[i].i;
    free(a);
    free(t);
    return ODL_OK;
}

odl_status odl_nms(const float *boxes, const float *scores, int n, float iou_thres, int *keep, int *n_keep) {
    if (n < 0 || (n > 0 && (!boxes || !scores || !keep)) || !n_keep)
        return ODL_ERR(ODL_E_INVAL, "odl_nms: bad arguments (n = %d)", n);
    *n_keep = 0;
    if (n == 0) return ODL_OK;
    int *order = malloc(sizeof(int) * n);
    unsigned char *sup = calloc((size_t)n, 1);
    float *area = malloc(sizeof(float) * n);
    if (!order || !sup || !area) {
        free(order);
        free(sup);
        free(area);
        return ODL_ERR(ODL_E_NOMEM, "odl_nms: cannot allocate for %d boxes", n);
    }
    odl_status st = sort_desc(scores, n, order);
    if (st != ODL_OK) {
        free(order);
        free(sup);
        free(area);
        return st;
    }
    for (int i = 0; i < n; i++) area[i] = (boxes[4 * i + 2] - boxes[4 * i]) * (boxes[4 * i + 3] - boxes[4 * i + 1]);
    int nk = 0;
    for (int a = 0; a < n; a++) {
        int i = order[a];
        if (sup[i]) continue;
        keep[nk++] = i;
        const float *bi = boxes + 4 * i;
        for (int b = a + 1; b < n; b++) {
            int j = order[b];
            if (sup[j]) continue;
            const float *bj = boxes + 4 * j;
            float w = fmaxf(0.f, fminf(bi[2], bj[2]) - fmaxf(bi[0], bj[0]));
            float h = fmaxf(0.f, fminf(bi[3], bj[3]) - fmaxf(bi[1], bj[1]));
            float inter = w * h;
            float iou = inter / (area[i] + area[j] - inter);
            if (iou > iou_thres) sup[j] = 1;
        }
    }
    *n_keep = nk;
    free(order);
    free(sup);
    free(area);
    return ODL_OK;
}

static int class_wanted(const odl_nms_params *p, int j) {
    if (!p->classes) return 1;
    for (int k = 0; k < p->n_classes; k++)
        if (p->classes[k] == j) return 1;
    return 0;
}

odl_status odl_yolo_nms(const float *pred, int64_t n_anchors, int nc, const odl_nms_params *p, odl_detection *out,
                        int cap, int *n_out) {
    if (!pred || n_anchors < 0 || nc <= 0 || !p || !n_out || (cap > 0 && !out) || cap < 0)
        return ODL_ERR(ODL_E_INVAL, "odl_yolo_nms: bad arguments (anchors %lld, classes %d, cap %d)",
                       (long long)n_anchors, nc, cap);
    *n_out = 0;
    const int no = 5 + nc;
    /* Candidates: (box xyxy, conf, class). */
    int64_t ccap = 1024, n = 0;
    float *cb = malloc(sizeof(float) * 4 * ccap), *cs = malloc(sizeof(float) * ccap);
    int *cc = malloc(sizeof(int) * ccap);
    odl_status st = ODL_OK;
    int *order = NULL, *keep = NULL;
    float *ob = NULL, *os = NULL;
    if (!cb || !cs || !cc) goto nomem;
    for (int64_t a = 0; a < n_anchors; a++) {
        const float *r = pred + a * no;
        float obj = r[4];
        if (!(obj > p->conf_thres) || !isfinite(obj)) continue;
        /* xywh2xyxy in float32, as YOLOv5 */
        float box[4] = {r[0] - r[2] / 2, r[1] - r[3] / 2, r[0] + r[2] / 2, r[1] + r[3] / 2};
        /* A NaN or infinite box would compare false against every other box and survive NMS. */
        if (!isfinite(box[0]) || !isfinite(box[1]) || !isfinite(box[2]) || !isfinite(box[3])) continue;
        int first = 0, last = nc; /* classes to emit */
        int best = 0;
        float bestc = -INFINITY;
        if (!p->multi_label) {
            for (int j = 0; j < nc; j++) {
                float c = r[5 + j] * obj;
                if (c > bestc) { /* torch.max returns the first maximum */
                    bestc = c;
                    best = j;
                }
            }
            if (!(bestc > p->conf_thres)) continue;
            first = best;
            last = best + 1;
        }
        for (int j = first; j < last; j++) {
            float c = r[5 + j] * obj;
            if (!(c > p->conf_thres) || !isfinite(c) || !class_wanted(p, j)) continue;
            if (n == ccap) {
                ccap *= 2;
                float *nb = realloc(cb, sizeof(float) * 4 * ccap);
                if (nb) cb = nb;
                float *ns = realloc(cs, sizeof(float) * ccap);
                if (ns) cs = ns;
                int *nci = realloc(cc, sizeof(int) * ccap);
                if (nci) cc = nci;
                if (!nb || !ns || !nci) goto nomem;
            }
            memcpy(cb + 4 * n, box, sizeof box);
            cs[n] = c;
            cc[n] = j;
            n++;
        }
    }
    if (n == 0) goto done;
    order = malloc(sizeof(int) * n);
    if (!order) goto nomem;
    if (n > INT32_MAX) {
        st = ODL_ERR(ODL_E_INVAL, "odl_yolo_nms: %lld candidates", (long long)n);
        goto done;
    }
    ODL_CHECK_GOTO(sort_desc(cs, (int)n, order), st, done);
    int m = (int)(n < p->max_nms ? n : p->max_nms);
    ob = malloc(sizeof(float) * 4 * m);
    os = malloc(sizeof(float) * m);
    keep = malloc(sizeof(int) * m);
    if (!ob || !os || !keep) goto nomem;
    /* The batched-NMS offset keeps classes apart only while it exceeds the span of the coordinates;
     * YOLOv5's fixed max_wh = 7680 does not at --img-size 8192 (or for boxes reaching past the image).
     * Widen it to the span then, so that classes never touch; below max_wh it is YOLOv5's offset. */
    float lo = INFINITY, hi = -INFINITY;
    for (int k = 0; k < m; k++)
        for (int c = 0; c < 4; c++) {
            lo = fminf(lo, cb[4 * order[k] + c]);
            hi = fmaxf(hi, cb[4 * order[k] + c]);
        }
    const float offset = fmaxf(p->max_wh, ceilf((hi - lo) * 1.25f) + 1.f);
    for (int k = 0; k < m; k++) {
        int i = order[k];
        float off = p->agnostic ? 0.f : (float)cc[i] * offset;
        for (int c = 0; c < 4; c++) ob[4 * k + c] = cb[4 * i + c] + off;
        os[k] = cs[i];
    }
    int nk = 0;
    ODL_CHECK_GOTO(odl_nms(ob, os, m, p->iou_thres, keep, &nk), st, done);
    if (nk > p->max_det) nk = p->max_det;
    if (nk > cap) nk = cap;
    for (int k = 0; k < nk; k++) {
        int i = order[keep[k]];
        out[k].x1 = cb[4 * i];
        out[k].y1 = cb[4 * i + 1];
        out[k].x2 = cb[4 * i + 2];
        out[k].y2 = cb[4 * i + 3];
        out[k].conf = cs[i];
        out[k].class_id = cc[i];
    }
    *n_out = nk;
    goto done;
nomem:
    st = ODL_ERR(ODL_E_NOMEM, "odl_yolo_nms: cannot allocate candidate buffers (%lld candidates)", (long long)n);
done:
    free(cb);
    free(cs);
    free(cc);
    free(order);
    free(keep);
    free(ob);
    free(os);
    return st;
}

int64_t odl_yolo_nonfinite_rows(const float *pred, int64_t n_anchors, int nc) {
    const int no = 5 + nc;
    int64_t bad = 0;
    for (int64_t a = 0; pred && a < n_anchors; a++) {
        const float *r = pred + a * no;
        for (int j = 0; j < no; j++)
            if (!isfinite(r[j])) {
                bad++;
                break;
            }
    }
    return bad;
}
