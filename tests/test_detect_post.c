/* The detection pipeline's backend entries (odl/backend.h letterbox_u8, yolo_nms):
 *   test_detect_post cpu   the CPU entries against the library's reference paths, bitwise:
 *                          yolo_nms = odl_yolo_nms image by image on the real Detect output of bus.jpg
 *                          and zidane.jpg (val.py's multi-label settings, detect.py's, agnostic, a tiny
 *                          max_det), an overflowing candidate buffer reports -1; letterbox_u8 (every EXIF
 *                          orientation, down- and upscaling, a copy, pitched rows) = odl_image_letterbox of
 *                          the oriented image + odl_image_to_chw; yolo_candidates = the rows odl_yolo_nms
 *                          takes (odl_yolo_nms on them = on all rows, with a class filter too) and
 *                          odl_yolo_nonfinite_rows' count.
 *   test_detect_post cuda  the CUDA entries against the CPU entries on the same inputs, bitwise
 *                          (label gpu; exit 77 without a GPU). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "odl/backend.h"
#include "odl/device.h"
#include "odl/image.h"
#include "odl/nms.h"
#include "odl/yolov5.h"
#include "yolov5_test_util.h"

enum { S = 640, NIMG = 2 };

/* Device copy of n bytes (the CPU "device" is host memory). */
static void *to_dev(odl_device dev, const void *h, size_t n) {
    void *d = NULL;
    if (odl_mem_alloc(dev, n ? n : 1, &d) != ODL_OK) return NULL;
    if (odl_memcpy_async(d, dev, h, odl_cpu(), n, odl_stream_current()) != ODL_OK) return NULL;
    return d;
}
static void to_host_bytes(odl_device dev, void *h, const void *d, size_t n) {
    TOK(odl_memcpy_async(h, odl_cpu(), d, dev, n, odl_stream_current()));
    TOK(odl_stream_synchronize(odl_stream_current()));
}

typedef struct nms_case {
    const char *name;
    float conf, iou;
    int multi, agnostic, max_det;
} nms_case;

/* letterbox_u8 on every EXIF orientation, for a downscale (square and rectangular 640), an upscale
 * (square 1024) and a copy (the image's own size): the CPU entry from the stored image equals
 * odl_image_letterbox of the oriented image + odl_image_to_chw, bitwise; the device entry equals the CPU
 * entry. The stored images sit at odd offsets with row padding (as nvJPEG's pitched output may). */
static void letterbox_cases(odl_device dev, const odl_backend *cpu, const odl_backend *be) {
    const char *names[NIMG] = {"yolov5/images/bus.jpg", "yolov5/images/zidane.jpg"};
    odl_image im[NIMG];
    for (int i = 0; i < NIMG; i++) TOK(odl_image_load(odl_test_data_path(names[i]), &im[i]));
    if (!im[0].data || !im[1].data) return;
    enum { NB = NIMG * 8 };
    /* the stored images, each twice (pitch 3 w + 5, at offset 7 + ...), shared by every target */
    odl_letterbox_src src[NB];
    size_t tot = 7;
    for (int i = 0; i < NIMG; i++) tot += ((size_t)3 * im[i].width + 5) * im[i].height + 3;
    uint8_t *packed = calloc(tot, 1);
    int64_t at = 7, off[NIMG];
    for (int i = 0; i < NIMG; i++) {
        off[i] = at;
        for (int y = 0; y < im[i].height; y++)
            memcpy(packed + at + (size_t)y * (3 * im[i].width + 5), im[i].data + (size_t)y * 3 * im[i].width,
                   (size_t)3 * im[i].width);
        at += ((int64_t)3 * im[i].width + 5) * im[i].height + 3;
    }
    uint8_t *d_packed = to_dev(dev, packed, tot);
    const struct { const char *name; int size, auto_pad, own; } targets[] = {
        {"square 640", 640, 0, 0}, {"rect 640", 640, 1, 0}, {"square 1024", 1024, 0, 0}, {"own size", 0, 0, 1}};
    for (size_t t = 0; t < sizeof targets / sizeof *targets; t++) {
        /* one letterbox size per call: the largest of the batch's (rect and own-size boxes differ by image) */
        odl_letterbox g[NB];
        int H = 0, W = 0;
        for (int k = 0; k < NB; k++) {
            const int i = k % NIMG, o = k / NIMG + 1, swap = o >= 5;
            const int ow = swap ? im[i].height : im[i].width, oh = swap ? im[i].width : im[i].height;
            if (targets[t].own) TOK(odl_letterbox_geometry_hw(ow, oh, ow, oh, 0, 1, 1, &g[k]));
            else TOK(odl_letterbox_geometry(ow, oh, targets[t].size, targets[t].auto_pad, 32, &g[k]));
            if (g[k].out_w > W) W = g[k].out_w;
            if (g[k].out_h > H) H = g[k].out_h;
        }
        const size_t per = (size_t)3 * H * W;
        float *ref = malloc(sizeof(float) * per * NB), *got = malloc(sizeof(float) * per * NB),
              *dgot = malloc(sizeof(float) * per * NB);
        for (int k = 0; k < NB; k++) {
            const int i = k % NIMG, o = k / NIMG + 1;
            /* the reference: orient a copy on the CPU, letterbox it into H x W (its box placed at its own
             * offsets, the rest of the H x W plane padded) */
            odl_image c, lb;
            TOK(odl_image_alloc(&c, im[i].width, im[i].height, 0, 0, 0));
            memcpy(c.data, im[i].data, (size_t)3 * im[i].width * im[i].height);
            TOK(odl_image_apply_orientation(&c, o));
            odl_letterbox gg = g[k];
            gg.out_w = W;
            gg.out_h = H;
            TOK(odl_image_letterbox_apply(&c, &gg, 114, &lb));
            odl_image_to_chw(&lb, ref + per * k);
            odl_image_free(&c);
            odl_image_free(&lb);
            src[k] = (odl_letterbox_src){off[i], 3 * im[i].width + 5, im[i].width, im[i].height, o,
                                         g[k].unpad_w, g[k].unpad_h, g[k].left, g[k].top, 0};
        }
        TOK(cpu->letterbox_u8(NB, H, W, packed, src, 114, got));
        int64_t bad = 0;
        for (size_t e = 0; e < per * NB; e++) bad += got[e] != ref[e];
        TCHECK(bad == 0, "%s: the CPU letterbox_u8 differs from odl_image_letterbox in %lld of %zu values", targets[t].name,
               (long long)bad, per * NB);
        odl_letterbox_src *d_src = to_dev(dev, src, sizeof src);
        float *d_y = NULL;
        TOK(odl_mem_alloc(dev, sizeof(float) * per * NB, (void **)&d_y));
        TOK(be->letterbox_u8(NB, H, W, d_packed, d_src, 114, d_y));
        to_host_bytes(dev, dgot, d_y, sizeof(float) * per * NB);
        bad = 0;
        for (size_t e = 0; e < per * NB; e++) bad += dgot[e] != got[e];
        TCHECK(bad == 0, "%s: %s letterbox_u8 differs from the CPU's in %lld of %zu values", targets[t].name,
               odl_device_name(dev), (long long)bad, per * NB);
        printf("letterbox_u8 %s, 8 orientations x %d images, %dx%d: %s equals the CPU path\n", targets[t].name, NIMG, W, H,
               odl_device_name(dev));
        odl_mem_free(dev, d_src);
        odl_mem_free(dev, d_y);
        free(ref);
        free(got);
        free(dgot);
    }
    odl_mem_free(dev, d_packed);
    free(packed);
    for (int i = 0; i < NIMG; i++) odl_image_free(&im[i]);
}

int main(int argc, char **argv) {
    /* the data first: a skip after the device is set up would leave its pool allocated (yolo_test_start) */
    if (!odl_test_have_data("yolov5/images/bus.jpg")) return ODL_TEST_SKIP;
    odl_device dev;
    int r = yolo_test_device(argc, argv, &dev);
    if (r) return r;
    const odl_backend *cpu = odl_backend_cpu(), *be = odl_backend_for(dev);
    TCHECK(be && be->yolo_nms && be->letterbox_u8 && be->yolo_candidates, "backend has the detection entries");
    if (!be) return odl_test_finish("detect_post");
    letterbox_cases(dev, cpu, be);
    const char *wpath = yolo_weights_path(argc, argv);
    if (!wpath) return odl_test_finish_skipped("detect_post");

    /* The network input of two images, letterboxed to a 640 square. */
    const char *names[NIMG] = {"yolov5/images/bus.jpg", "yolov5/images/zidane.jpg"};
    float *ref_in = malloc(sizeof(float) * 3 * S * S * NIMG);
    for (int i = 0; i < NIMG; i++) {
        odl_image im, lb;
        odl_letterbox g;
        TOK(odl_image_load(odl_test_data_path(names[i]), &im));
        TOK(odl_image_letterbox(&im, S, 0, 32, 114, &lb, &g));
        odl_image_to_chw(&lb, ref_in + (size_t)3 * S * S * i);
        odl_image_free(&im);
        odl_image_free(&lb);
    }

    /* The Detect output of both images, from the CPU model (the same input on every backend). */
    odl_yolov5 *net = NULL;
    TOK(odl_yolov5_load(wpath, odl_cpu(), &net));
    if (!net) return odl_test_finish("detect_post");
    odl_tensor *x;
    const odl_tensor *y;
    TOK(odl_yolov5_input(net, NIMG, S, S, &x));
    TOK(odl_tensor_copy_from_host(x, ref_in, sizeof(float) * 3 * S * S * NIMG));
    TOK(odl_yolov5_forward(net, x, &y));
    const int64_t rows = y->shape[1];
    const int nc = (int)y->shape[2] - 5;
    const size_t pn = (size_t)NIMG * rows * (5 + nc);
    float *pred = malloc(sizeof(float) * pn);
    TOK(odl_tensor_copy_to_host(y, pred, sizeof(float) * pn));
    float *d_pred = to_dev(dev, pred, sizeof(float) * pn);

    const nms_case cases[] = {{"val.py", 0.001f, 0.6f, 1, 0, 300},
                              {"detect.py", 0.25f, 0.45f, 0, 0, 1000},
                              {"agnostic", 0.01f, 0.5f, 1, 1, 300},
                              {"max_det 3", 0.001f, 0.6f, 1, 0, 3}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        const nms_case *k = &cases[c];
        odl_yolo_nms_args a = {.N = NIMG, .rows = rows, .nc = nc, .pred = pred, .conf_thres = k->conf,
                               .iou_thres = k->iou, .max_wh = 7680.f, .multi_label = k->multi, .agnostic = k->agnostic,
                               .max_nms = 30000, .max_det = k->max_det, .cand_cap = 1 << 17};
        float *out_cpu = calloc((size_t)NIMG * k->max_det * 6, sizeof(float));
        float *out_dev = calloc((size_t)NIMG * k->max_det * 6, sizeof(float));
        int32_t cnt_cpu[NIMG], cnt_dev[NIMG];
        a.out = out_cpu;
        a.count = cnt_cpu;
        TOK(cpu->yolo_nms(&a));
        odl_nms_params p = odl_nms_defaults();
        p.conf_thres = k->conf;
        p.iou_thres = k->iou;
        p.max_det = k->max_det;
        p.multi_label = k->multi;
        p.agnostic = k->agnostic;
        odl_detection *det = malloc(sizeof *det * (size_t)k->max_det);
        for (int i = 0; i < NIMG; i++) {
            int nd = 0;
            TOK(odl_yolo_nms(pred + (size_t)i * rows * (5 + nc), rows, nc, &p, det, k->max_det, &nd));
            int bad = nd != cnt_cpu[i];
            for (int d = 0; !bad && d < nd; d++) {
                const float *o = out_cpu + ((size_t)i * k->max_det + d) * 6;
                bad = o[0] != det[d].x1 || o[1] != det[d].y1 || o[2] != det[d].x2 || o[3] != det[d].y2 ||
                      o[4] != det[d].conf || o[5] != (float)det[d].class_id;
            }
            TCHECK(!bad && nd > 0, "%s, image %d: CPU entry %d boxes, odl_yolo_nms %d (or a box differs)", k->name, i,
                   cnt_cpu[i], nd);
        }
        free(det);
        /* the device entry against the CPU entry */
        float *d_out = NULL;
        int32_t *d_cnt = NULL;
        TOK(odl_mem_alloc(dev, sizeof(float) * NIMG * k->max_det * 6, (void **)&d_out));
        TOK(odl_mem_alloc(dev, sizeof(int32_t) * NIMG, (void **)&d_cnt));
        a.pred = d_pred;
        a.out = d_out;
        a.count = d_cnt;
        TOK(be->yolo_nms(&a));
        to_host_bytes(dev, cnt_dev, d_cnt, sizeof cnt_dev);
        to_host_bytes(dev, out_dev, d_out, sizeof(float) * NIMG * k->max_det * 6);
        for (int i = 0; i < NIMG; i++) {
            int bad = cnt_dev[i] != cnt_cpu[i];
            if (!bad)
                bad = memcmp(out_dev + (size_t)i * k->max_det * 6, out_cpu + (size_t)i * k->max_det * 6,
                             sizeof(float) * 6 * (size_t)cnt_cpu[i]) != 0;
            TCHECK(!bad, "%s, image %d on %s: %d boxes, CPU %d (or a box differs)", k->name, i, odl_device_name(dev), cnt_dev[i],
                   cnt_cpu[i]);
        }
        /* a candidate buffer too small: -1, for the caller to fall back to odl_yolo_nms */
        a.cand_cap = 64;
        TOK(be->yolo_nms(&a));
        to_host_bytes(dev, cnt_dev, d_cnt, sizeof cnt_dev);
        if (k->conf < 0.1f) TCHECK(cnt_dev[0] == -1 && cnt_dev[1] == -1, "%s overflow: %d %d", k->name, cnt_dev[0], cnt_dev[1]);
        odl_mem_free(dev, d_out);
        odl_mem_free(dev, d_cnt);
        free(out_cpu);
        free(out_dev);
    }
    odl_mem_free(dev, d_pred);

    /* yolo_candidates: the candidate rows and the non-finite count; odl_yolo_nms on them = on all rows */
    {
        const int no = 5 + nc, cap = 4096;
        float *bad_pred = malloc(sizeof(float) * pn);
        memcpy(bad_pred, pred, sizeof(float) * pn);
        bad_pred[(size_t)17 * no + 2] = NAN;                        /* image 0: a NaN width */
        bad_pred[((size_t)rows + 5) * no + 4] = INFINITY;           /* image 1: an infinite objectness */
        bad_pred[((size_t)rows + 9) * no + 7] = -INFINITY;          /* image 1: a score */
        const float *inputs[2] = {pred, bad_pred};
        for (int v = 0; v < 2; v++)
            for (int cc = 0; cc < 2; cc++) {
                const float conf = cc ? 0.001f : 0.25f;
                float *out_c = calloc((size_t)NIMG * cap * no, sizeof(float)), *out_d = calloc((size_t)NIMG * cap * no, sizeof(float));
                int32_t cnt_c[NIMG], bad_c[NIMG], cnt_d[NIMG], bad_d[NIMG];
                odl_yolo_cand_args a = {.N = NIMG, .rows = rows, .nc = nc, .pred = inputs[v], .conf_thres = conf, .cap = cap,
                                        .out = out_c, .count = cnt_c, .nonfinite = bad_c};
                TOK(cpu->yolo_candidates(&a));
                float *dp = to_dev(dev, inputs[v], sizeof(float) * pn), *dout = NULL;
                int32_t *dcnt = NULL, *dbad = NULL;
                TOK(odl_mem_alloc(dev, sizeof(float) * NIMG * cap * no, (void **)&dout));
                TOK(odl_mem_alloc(dev, sizeof(int32_t) * NIMG, (void **)&dcnt));
                TOK(odl_mem_alloc(dev, sizeof(int32_t) * NIMG, (void **)&dbad));
                odl_yolo_cand_args ad = a;
                ad.pred = dp;
                ad.out = dout;
                ad.count = dcnt;
                ad.nonfinite = dbad;
                TOK(be->yolo_candidates(&ad));
                to_host_bytes(dev, cnt_d, dcnt, sizeof cnt_d);
                to_host_bytes(dev, bad_d, dbad, sizeof bad_d);
                to_host_bytes(dev, out_d, dout, sizeof(float) * NIMG * cap * no);
                for (int i = 0; i < NIMG; i++) {
                    const float *img = inputs[v] + (size_t)i * rows * no;
                    const int64_t want_bad = odl_yolo_nonfinite_rows(img, rows, nc);
                    TCHECK(bad_c[i] == want_bad && bad_d[i] == want_bad, "candidates %d/%d image %d: non-finite rows cpu %d, "
                           "%s %d, odl_yolo_nonfinite_rows %lld", v, cc, i, bad_c[i], odl_device_name(dev), bad_d[i],
                           (long long)want_bad);
                    const int m = cnt_c[i] < cap ? cnt_c[i] : cap;
                    TCHECK(cnt_d[i] == cnt_c[i] && !memcmp(out_d + (size_t)i * cap * no, out_c + (size_t)i * cap * no,
                                                           sizeof(float) * no * (size_t)m),
                           "candidates image %d: %s %d rows, CPU %d (or a row differs)", i, odl_device_name(dev), cnt_d[i], cnt_c[i]);
                    if (cnt_c[i] > cap) continue; /* the caller copies all rows then */
                    odl_nms_params p = odl_nms_defaults();
                    p.conf_thres = conf;
                    p.multi_label = cc;
                    const int classes[2] = {0, 5};
                    for (int f = 0; f < 2; f++) {
                        p.classes = f ? classes : NULL;
                        p.n_classes = f ? 2 : 0;
                        odl_detection d_all[1000], d_c[1000];
                        int n_all = 0, n_c = 0;
                        TOK(odl_yolo_nms(img, rows, nc, &p, d_all, 1000, &n_all));
                        TOK(odl_yolo_nms(out_c + (size_t)i * cap * no, m, nc, &p, d_c, 1000, &n_c));
                        TCHECK(n_all == n_c && !memcmp(d_all, d_c, sizeof(odl_detection) * (size_t)n_all) && (v || n_all > 0),
                               "NMS on the %d candidate rows of image %d (conf %g, classes %d): %d boxes, on all rows %d", m, i,
                               conf, f, n_c, n_all);
                    }
                }
                odl_mem_free(dev, dp);
                odl_mem_free(dev, dout);
                odl_mem_free(dev, dcnt);
                odl_mem_free(dev, dbad);
                free(out_c);
                free(out_d);
            }
        free(bad_pred);
    }
    odl_yolov5_free(net);
    free(ref_in);
    free(pred);
    if (dev.type == ODL_DEV_CUDA) TOK(odl_cuda_shutdown()); /* no device memory left in use */
    return odl_test_finish("detect_post");
}
