/* The detection pipeline's backend entries (odl/backend.h letterbox_u8_to_chw, yolo_nms):
 *   test_detect_post cpu   the CPU entries against the library's reference paths, bitwise:
 *                          yolo_nms = odl_yolo_nms image by image on the real Detect output of bus.jpg
 *                          and zidane.jpg (val.py's multi-label settings, detect.py's, agnostic, a tiny
 *                          max_det), an overflowing candidate buffer reports -1; letterbox_u8_to_chw =
 *                          odl_image_letterbox + odl_image_to_chw.
 *   test_detect_post cuda  the CUDA entries against the CPU entries on the same inputs, bitwise
 *                          (label gpu; exit 77 without a GPU). */
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

int main(int argc, char **argv) {
    odl_device dev;
    int r = yolo_test_device(argc, argv, &dev);
    if (r) return r;
    const char *wpath = yolo_weights_path(argc, argv);
    if (!wpath) return ODL_TEST_SKIP;
    const odl_backend *cpu = odl_backend_cpu(), *be = odl_backend_for(dev);
    TCHECK(be && be->yolo_nms && be->letterbox_u8_to_chw, "backend has the detection entries");
    if (!be) return odl_test_finish("detect_post");

    /* Inputs: two letterboxed images (uint8, unpadded, and their geometry) and the CPU model's output. */
    const char *names[NIMG] = {"yolov5/images/bus.jpg", "yolov5/images/zidane.jpg"};
    odl_image rs[NIMG];
    odl_letterbox g[NIMG];
    int64_t off[NIMG], tot = 0;
    int32_t geo[4 * NIMG];
    float *ref_in = malloc(sizeof(float) * 3 * S * S * NIMG);
    for (int i = 0; i < NIMG; i++) {
        odl_image im, lb;
        TOK(odl_image_load(odl_test_data_path(names[i]), &im));
        TOK(odl_letterbox_geometry(im.width, im.height, S, 0, 32, &g[i]));
        TOK(odl_image_alloc(&rs[i], g[i].unpad_w, g[i].unpad_h, 0, 0, 0));
        TOK(odl_image_resize_linear(im.data, im.width, im.height, 3, rs[i].data, g[i].unpad_w, g[i].unpad_h));
        TOK(odl_image_letterbox(&im, S, 0, 32, 114, &lb, &g[i]));
        odl_image_to_chw(&lb, ref_in + (size_t)3 * S * S * i);
        off[i] = tot;
        tot += (int64_t)rs[i].width * rs[i].height * 3;
        geo[4 * i] = g[i].unpad_w;
        geo[4 * i + 1] = g[i].unpad_h;
        geo[4 * i + 2] = g[i].left;
        geo[4 * i + 3] = g[i].top;
        odl_image_free(&im);
        odl_image_free(&lb);
    }
    uint8_t *packed = malloc((size_t)tot);
    for (int i = 0; i < NIMG; i++) memcpy(packed + off[i], rs[i].data, (size_t)rs[i].width * rs[i].height * 3);

    /* letterbox: the CPU entry equals the image functions; the device entry equals the CPU entry */
    float *lb_cpu = malloc(sizeof(float) * 3 * S * S * NIMG), *lb_dev = malloc(sizeof(float) * 3 * S * S * NIMG);
    TOK(cpu->letterbox_u8_to_chw(NIMG, S, S, packed, off, geo, 114, lb_cpu));
    TCHECK(memcmp(lb_cpu, ref_in, sizeof(float) * 3 * S * S * NIMG) == 0, "CPU letterbox entry differs from odl_image_letterbox");
    {
        uint8_t *d_src = to_dev(dev, packed, (size_t)tot);
        int64_t *d_off = to_dev(dev, off, sizeof off);
        int32_t *d_geo = to_dev(dev, geo, sizeof geo);
        float *d_y = NULL;
        TOK(odl_mem_alloc(dev, sizeof(float) * 3 * S * S * NIMG, (void **)&d_y));
        TOK(be->letterbox_u8_to_chw(NIMG, S, S, d_src, d_off, d_geo, 114, d_y));
        to_host_bytes(dev, lb_dev, d_y, sizeof(float) * 3 * S * S * NIMG);
        TCHECK(memcmp(lb_dev, lb_cpu, sizeof(float) * 3 * S * S * NIMG) == 0, "%s letterbox differs from the CPU's", odl_device_name(dev));
        odl_mem_free(dev, d_src);
        odl_mem_free(dev, d_off);
        odl_mem_free(dev, d_geo);
        odl_mem_free(dev, d_y);
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
    odl_yolov5_free(net);
    for (int i = 0; i < NIMG; i++) odl_image_free(&rs[i]);
    free(packed);
    free(ref_in);
    free(lb_cpu);
    free(lb_dev);
    free(pred);
    return odl_test_finish("detect_post");
}
