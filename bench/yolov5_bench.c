/* YOLOv5 inference benchmark: forward latency at batch 1, throughput at batch 32 (640x640, float32 and,
 * on CUDA, float16: odl_yolov5_set_half), and end to end on one image (decode + letterbox + forward + NMS,
 * as detect.py) on odl_worker's device path (nvJPEG, letterbox on the device, candidate rows) and on the
 * CPU image path, with a table of where the time goes stage by stage, printed beside PyTorch measured in
 * the same call: --torch OUT.json is the output of
 * `../shared/bench/torch_baselines.py OUT.json yolov5n yolov5n_compiled` (the official v7.0 model, Conv+BN
 * fused, cudnn.benchmark, median of 50; torch.compile reduce-overhead fp16 channels_last). Without
 * --torch no PyTorch figure and no ratio is printed: a ratio is only taken against a run on the same
 * machine at the same time, never against a stored one.
 *
 *   yolov5_bench [--weights W.h5] [--image bus.jpg] [--device cuda|cpu] [--iters 50] [--warmup 10]
 *                [--batch 32] [--no-graph] [--no-half] [--no-tf32] [--layers] [--torch OUT.json]
 *
 * On CUDA the forward is captured once into a CUDA graph (after warm-up, so that every buffer and the
 * backend's workspace exist) and replayed; --no-graph times eager launches. On CUDA also the batch-1
 * pipeline of eval on the GPU (upload of the resized uint8 image, letterbox kernel, forward, NMS kernel,
 * the kept boxes back) as one CUDA graph, timed by the host from queueing to the boxes on the host. Each timed iteration is
 * one forward between two events on the current stream, synchronised; the median is reported.
 * The input is float32 NCHW in both precisions (the float16 forward converts it on the device). On CUDA
 * also batch 1 and batch B with --precision tf32 (the float32 network's convolutions on tensor cores),
 * beside PyTorch's fp32; --no-tf32 leaves them out. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "odl/backend.h"
#include "odl/clock.h"
#include "odl/device.h"
#include "odl/gpu_prep.h"
#include "odl/precision.h"
#include "odl/graph.h"
#include "odl/image.h"
#include "odl/json.h"
#include "odl/nms.h"
#include "odl/yolov5.h"
#include "worker/cli_flags.h"


static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof(double), cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* PyTorch's figures of the same call: the sections of torch_baselines.py's JSON (a section that failed
 * holds "error" and gives no figures). */
typedef struct torch_figures {
    const json_t *eager, *compiled; /* "yolov5n", "yolov5n_compiled"; NULL: not measured */
} torch_figures;

/* Number "<prefix>_b<batch>_<what>" of a section (torch_baselines.py's keys, batch 1 and 32 measured);
 * NAN when absent. */
static double torch_figure(const json_t *section, const char *prefix, int batch, const char *what) {
    char key[96];
    snprintf(key, sizeof key, "%s_b%d_%s", prefix, batch, what);
    const json_t *v = json_object_get(section, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static const json_t *torch_section(const json_t *root, const char *name, const char *path) {
    const json_t *s = json_object_get(root, name);
    if (json_is_object(s) && !json_object_get(s, "error")) return s;
    fprintf(stderr, "yolov5_bench: note: %s has no usable \"%s\" section%s\n", path, name,
            s ? " (it failed; see its \"error\")" : "");
    return NULL;
}

/* One row: our figure, PyTorch's and ours over PyTorch's as a speedup (pt/odl for times, odl/pt for
 * rates); "-" where PyTorch has no figure. */
static void print_row(const char *label, double odl, double pt, int is_rate, const char *tail) {
    const char *unit = is_rate ? "img/s" : "ms";
    char ptxt[32] = "-", rtxt[16] = "-";
    if (isfinite(pt) && pt > 0) {
        snprintf(ptxt, sizeof ptxt, is_rate ? "%.0f %s" : "%.3f %s", pt, unit);
        snprintf(rtxt, sizeof rtxt, "%.2fx", is_rate ? odl / pt : pt / odl);
    }
    char otxt[32];
    snprintf(otxt, sizeof otxt, is_rate ? "%.0f %s" : "%.3f %s", odl, unit);
    printf("%-50s %13s %13s %8s%s\n", label, otxt, ptxt, rtxt, tail);
}

#define DIE(...)                                                                                                   \
    do {                                                                                                           \
        fprintf(stderr, "yolov5_bench: error: " __VA_ARGS__);                                                      \
        fprintf(stderr, "\n");                                                                                     \
        exit(1);                                                                                                   \
    } while (0)
#define CK(call)                                                                                                   \
    do {                                                                                                           \
        if ((call) != ODL_OK) DIE("%s: %s", #call, odl_error_msg());                                              \
    } while (0)

typedef struct timer {
    odl_device dev;
    odl_event e0, e1;
} timer;

static void timer_init(timer *t, odl_device dev) {
    t->dev = dev;
    if (dev.type == ODL_DEV_CUDA) {
        CK(odl_event_create(&t->e0));
        CK(odl_event_create(&t->e1));
    }
}

/* Capture one forward into a graph (odl/graph.h). Returns NULL (and says why) when capture is not possible. */
static odl_graph *capture_forward(odl_yolov5 *m, const odl_tensor *x) {
    const odl_stream s = odl_stream_current();
    odl_graph *g = NULL;
    odl_status st = odl_graph_begin(s);
    if (st == ODL_OK) {
        st = odl_yolov5_forward(m, x, NULL);
        if (st != ODL_OK) odl_graph_abort(s);
        else st = odl_graph_end(s, &g);
    }
    if (st != ODL_OK) fprintf(stderr, "  CUDA graph: capture failed (%s); timing eager launches\n", odl_error_msg());
    return g;
}

/* Median milliseconds of one forward of x (graph replay when use_graph and capture works). */
static double time_forward(odl_yolov5 *m, odl_tensor *x, int warmup, int iters, int use_graph, int *graph_used) {
    odl_device dev = odl_yolov5_device(m);
    timer t;
    timer_init(&t, dev);
    for (int i = 0; i < warmup; i++) CK(odl_yolov5_forward(m, x, NULL));
    if (dev.type == ODL_DEV_CUDA) CK(odl_device_synchronize(dev));
    *graph_used = 0;
    odl_graph *ge = NULL;
    if (dev.type == ODL_DEV_CUDA && use_graph) {
        ge = capture_forward(m, x);
        if (ge) {
            *graph_used = 1;
            for (int i = 0; i < 3; i++) CK(odl_graph_launch(ge, odl_stream_current()));
            CK(odl_device_synchronize(dev));
        }
    }
    double *v = malloc(sizeof(double) * iters);
    for (int i = 0; i < iters; i++) {
        if (dev.type == ODL_DEV_CUDA) {
            CK(odl_event_record(t.e0, odl_stream_current()));
            if (ge) CK(odl_graph_launch(ge, odl_stream_current()));
            else CK(odl_yolov5_forward(m, x, NULL));
            CK(odl_event_record(t.e1, odl_stream_current()));
            CK(odl_event_synchronize(t.e1));
            float ms = 0;
            CK(odl_event_elapsed_ms(t.e0, t.e1, &ms));
            v[i] = ms;
        } else {
            double t0 = odl_mono_ms();
            CK(odl_yolov5_forward(m, x, NULL));
            v[i] = odl_mono_ms() - t0;
        }
    }
    odl_graph_free(ge);
    if (dev.type == ODL_DEV_CUDA) {
        odl_event_destroy(t.e0);
        odl_event_destroy(t.e1);
    }
    double med = median(v, iters);
    free(v);
    return med;
}

/* End to end on one image file, as detect.py: decode, letterbox (rect, stride-32 padding), / 255, forward,
 * NMS (conf 0.25, IoU 0.45), boxes back in the image. Two paths:
 *   cpu     the CPU image path: odl_image_load, odl_image_letterbox, odl_image_to_chw, a copy of the float
 *           input up, the forward, a copy of every prediction row down, odl_yolo_nms on them all;
 *   device  odl_worker's device path: the headers probed, the device image pipeline (odl/gpu_prep.h:
 *           nvJPEG where it is there, else a CPU thread; the letterbox on the device into the input),
 *           the forward, yolo_candidates (the rows NMS can take) copied down, odl_yolo_nms on them.
 * With st != NULL each stage is timed, the device synchronised after each (ms into st->ms[stage]);
 * without, the run is timed whole (no extra synchronisation). Returns ms; *ndet the box count. */
enum { ST_READ, ST_DECODE, ST_LETTERBOX, ST_UP, ST_FORWARD, ST_DOWN, ST_NMS, ST_N };
static const char *const stage_name[ST_N] = {"probe headers", "decode", "letterbox (+ /255 CHW)", "copy input up",
                                             "forward (eager)", "copy rows down", "NMS + boxes back"};
typedef struct stages {
    double ms[ST_N];
} stages;

typedef struct e2e_bufs {
    float *host_in, *host_out;
    size_t out_cap;
    odl_gpu_prep *gp;         /* device path */
    const odl_backend *be;
    float *d_rows, *h_rows;   /* candidate rows */
    int32_t *d_cnt, *h_cnt, *d_bad, *h_bad;
    int cap;
    int decoder;              /* of the last device run */
} e2e_bufs;

static void stage_mark(odl_device dev, stages *st, int k, double *t) {
    if (!st) return;
    if (dev.type == ODL_DEV_CUDA) CK(odl_device_synchronize(dev));
    const double n = odl_mono_ms();
    st->ms[k] += n - *t;
    *t = n;
}

static void boxes_back(const odl_letterbox *g, odl_detection *det, int n) {
    for (int k = 0; k < n; k++) {
        float b[4] = {det[k].x1, det[k].y1, det[k].x2, det[k].y2};
        odl_letterbox_unmap(g, b);
        det[k].x1 = b[0];
        det[k].y1 = b[1];
        det[k].x2 = b[2];
        det[k].y2 = b[3];
    }
}

static double e2e_cpu(odl_yolov5 *m, const char *image, e2e_bufs *eb, int *ndet, stages *st) {
    const odl_device dev = odl_yolov5_device(m);
    double t0 = odl_mono_ms(), t = t0;
    odl_image img, lb;
    odl_letterbox g;
    CK(odl_image_load(image, &img));
    stage_mark(dev, st, ST_DECODE, &t);
    CK(odl_image_letterbox(&img, 640, 1, odl_yolov5_max_stride(m), 114, &lb, &g));
    odl_image_to_chw(&lb, eb->host_in);
    stage_mark(dev, st, ST_LETTERBOX, &t);
    odl_tensor *x;
    CK(odl_yolov5_input(m, 1, lb.height, lb.width, &x));
    CK(odl_tensor_copy_from_host(x, eb->host_in, sizeof(float) * 3 * lb.width * lb.height));
    stage_mark(dev, st, ST_UP, &t);
    const odl_tensor *y;
    CK(odl_yolov5_forward(m, x, &y));
    stage_mark(dev, st, ST_FORWARD, &t);
    size_t n = (size_t)(y->shape[1] * y->shape[2]);
    if (n > eb->out_cap) DIE("output of %zu floats", n);
    CK(odl_tensor_copy_to_host(y, eb->host_out, sizeof(float) * n));
    stage_mark(dev, st, ST_DOWN, &t);
    odl_nms_params p = odl_nms_defaults();
    odl_detection det[1000];
    CK(odl_yolo_nms(eb->host_out, y->shape[1], (int)y->shape[2] - 5, &p, det, 1000, ndet));
    boxes_back(&g, det, *ndet);
    stage_mark(dev, st, ST_NMS, &t);
    double ms = odl_mono_ms() - t0;
    odl_image_free(&img);
    odl_image_free(&lb);
    return ms;
}

/* The batch-1 pipeline of an image on the GPU, as --task=eval runs it (worker/eval.c gpu_group): the
 * decoded uint8 image (pinned) is uploaded, resized, letterboxed and normalised by the backend's
 * letterbox_u8, run through the network, reduced by yolo_nms, and only the kept boxes come back.
 * With use_graph the upload, letterbox, forward, NMS and the copies back are one CUDA graph, captured after
 * a warm-up (the "extend the batch-1 graph over the letterbox upload, Detect decode and NMS");
 * without it they are queued one by one. The JPEG decode (CPU) is timed apart. ms[0]: median wall time of
 * the GPU part (queue, run, wait), ms[1]: of the decode; *ndet: boxes kept. Returns 1
 * when the graph was used. */
static int gpu_pipeline(odl_yolov5 *m, const char *image, int warmup, int iters, int use_graph, double ms[2], int *ndet) {
    const odl_device dev = odl_yolov5_device(m);
    const odl_backend *be = odl_backend_for(dev);
    if (!be) DIE("no backend: %s", odl_error_msg());
    odl_image img;
    odl_letterbox g;
    CK(odl_image_load(image, &img));
    CK(odl_letterbox_geometry(img.width, img.height, 640, 1, odl_yolov5_max_stride(m), &g));
    const size_t src_bytes = (size_t)3 * img.width * img.height;
    const int max_det = 1000, H = g.out_h, W = g.out_w;
    uint8_t *h_src = NULL, *d_src = NULL;
    const odl_letterbox_src h_img = {.off = 0, .pitch = 3 * (int64_t)img.width, .w = img.width, .h = img.height,
                                     .orient = 1, .unpad_w = g.unpad_w, .unpad_h = g.unpad_h, .left = g.left,
                                     .top = g.top};
    odl_letterbox_src *d_img = NULL;
    int32_t *d_cnt = NULL, *h_cnt = NULL;
    float *d_out = NULL, *h_out = NULL;
    CK(odl_host_alloc_pinned(src_bytes, (void **)&h_src));
    CK(odl_host_alloc_pinned(sizeof(int32_t), (void **)&h_cnt));
    CK(odl_host_alloc_pinned(sizeof(float) * 6 * max_det, (void **)&h_out));
    CK(odl_mem_alloc(dev, src_bytes, (void **)&d_src));
    CK(odl_mem_alloc(dev, sizeof h_img, (void **)&d_img));
    CK(odl_mem_alloc(dev, sizeof(int32_t), (void **)&d_cnt));
    CK(odl_mem_alloc(dev, sizeof(float) * 6 * max_det, (void **)&d_out));
    const odl_stream st = odl_stream_current();
    CK(odl_memcpy_async(d_img, dev, &h_img, odl_cpu(), sizeof h_img, st));
    odl_tensor *x;
    CK(odl_yolov5_input(m, 1, H, W, &x));
    const odl_nms_params np = odl_nms_defaults();
    /* upload .. boxes back: the same calls queued or captured */
#define PIPELINE()                                                                                                 \
    do {                                                                                                           \
        CK(odl_memcpy_async(d_src, dev, h_src, odl_cpu(), src_bytes, st));                                         \
        CK(be->letterbox_u8(1, H, W, d_src, d_img, 114, (float *)x->data));                                      \
        const odl_tensor *y;                                                                                       \
        CK(odl_yolov5_forward(m, x, &y));                                                                          \
        odl_yolo_nms_args a = {.N = 1, .rows = y->shape[1], .nc = (int)y->shape[2] - 5, .pred = (const float *)y->data, \
                               .conf_thres = np.conf_thres, .iou_thres = np.iou_thres, .max_wh = np.max_wh,         \
                               .multi_label = np.multi_label, .agnostic = np.agnostic, .max_nms = np.max_nms,       \
                               .max_det = max_det, .cand_cap = 1 << 16, .out = d_out, .count = d_cnt};              \
        CK(be->yolo_nms(&a));                                                                                      \
        CK(odl_memcpy_async(h_cnt, odl_cpu(), d_cnt, dev, sizeof(int32_t), st));                                   \
        CK(odl_memcpy_async(h_out, odl_cpu(), d_out, dev, sizeof(float) * 6 * max_det, st));                       \
    } while (0)
    double *vd = malloc(sizeof(double) * iters), *vg = malloc(sizeof(double) * iters);
    for (int i = 0; i < iters; i++) { /* decode on the CPU into the pinned buffer */
        const double t0 = odl_mono_ms();
        odl_image im;
        CK(odl_image_load(image, &im));
        memcpy(h_src, im.data, src_bytes);
        odl_image_free(&im);
        vd[i] = odl_mono_ms() - t0;
    }
    for (int i = 0; i < warmup + 1; i++) PIPELINE();
    CK(odl_stream_synchronize(st));
    odl_graph *ge = NULL;
    if (use_graph) {
        CK(odl_graph_begin(st)); /* the pipeline's calls (CK) end the program on an error, capture or not */
        PIPELINE();
        if (odl_graph_end(st, &ge) != ODL_OK)
            fprintf(stderr, "  pipeline CUDA graph: capture failed (%s); timing eager launches\n", odl_error_msg());
    }
    for (int i = 0; i < iters + warmup; i++) {
        const double t0 = odl_mono_ms();
        if (ge) CK(odl_graph_launch(ge, st));
        else PIPELINE();
        CK(odl_stream_synchronize(st));
        if (i >= warmup) vg[i - warmup] = odl_mono_ms() - t0;
    }
#undef PIPELINE
    *ndet = *h_cnt;
    ms[0] = median(vg, iters);
    ms[1] = median(vd, iters);
    const int used = ge != NULL;
    odl_graph_free(ge);
    free(vd);
    free(vg);
    odl_image_free(&img);
    odl_mem_free(dev, d_out);
    odl_mem_free(dev, d_cnt);
    odl_mem_free(dev, d_img);
    odl_mem_free(dev, d_src);
    odl_host_free_pinned(h_out);
    odl_host_free_pinned(h_cnt);
    odl_host_free_pinned(h_src);
    return used;
}

static double e2e_device(odl_yolov5 *m, const char *image, e2e_bufs *eb, int *ndet, stages *st) {
    const odl_device dev = odl_yolov5_device(m);
    const odl_stream s = odl_stream_current();
    double t0 = odl_mono_ms(), t = t0;
    int w = 0, h = 0;
    odl_letterbox g;
    CK(odl_image_probe(image, &w, &h));
    CK(odl_letterbox_geometry(w, h, 640, 1, odl_yolov5_max_stride(m), &g));
    stage_mark(dev, st, ST_READ, &t);
    odl_prep_job job = {image, 0, g.out_w, g.out_h, 1};
    odl_prep_result res;
    odl_gpu_prep_batch *b = NULL;
    CK(odl_gpu_prep_submit(eb->gp, &job, 1, &res, &b));
    CK(odl_gpu_prep_wait(b));
    if (res.status != ODL_OK) DIE("%s", res.err);
    eb->decoder = res.decoder;
    stage_mark(dev, st, ST_DECODE, &t);
    odl_tensor *x;
    CK(odl_yolov5_input(m, 1, g.out_h, g.out_w, &x));
    const int idx0 = 0;
    CK(odl_gpu_prep_letterbox(b, &idx0, 1, (float *)x->data, s));
    odl_gpu_prep_release(b);
    stage_mark(dev, st, ST_LETTERBOX, &t);
    const odl_tensor *y;
    CK(odl_yolov5_forward(m, x, &y));
    stage_mark(dev, st, ST_FORWARD, &t);
    const int64_t rows = y->shape[1];
    const int nc = (int)y->shape[2] - 5, no = nc + 5;
    odl_yolo_cand_args a = {.N = 1, .rows = rows, .nc = nc, .pred = (const float *)y->data, .conf_thres = 0.25f,
                            .cap = eb->cap, .out = eb->d_rows, .count = eb->d_cnt, .nonfinite = eb->d_bad};
    CK(eb->be->yolo_candidates(&a));
    CK(odl_memcpy_async(eb->h_cnt, odl_cpu(), eb->d_cnt, dev, sizeof(int32_t), s));
    CK(odl_stream_synchronize(s));
    const int nr = eb->h_cnt[0] < eb->cap ? eb->h_cnt[0] : eb->cap;
    CK(odl_memcpy_async(eb->h_rows, odl_cpu(), eb->d_rows, dev, sizeof(float) * (size_t)nr * no, s));
    CK(odl_stream_synchronize(s));
    stage_mark(dev, st, ST_DOWN, &t);
    odl_nms_params p = odl_nms_defaults();
    odl_detection det[1000];
    CK(odl_yolo_nms(eb->h_rows, nr, nc, &p, det, 1000, ndet));
    boxes_back(&g, det, *ndet);
    stage_mark(dev, st, ST_NMS, &t);
    return odl_mono_ms() - t0;
}

/* Median ms of `iters` end-to-end runs after `warmup`, and the per-stage medians of as many timed runs. */
static double e2e_time(odl_yolov5 *m, const char *image, e2e_bufs *eb, int device, int warmup, int iters, int *nd,
                       stages *med) {
    double (*f)(odl_yolov5 *, const char *, e2e_bufs *, int *, stages *) = device ? e2e_device : e2e_cpu;
    for (int i = 0; i < warmup; i++) f(m, image, eb, nd, NULL);
    double *v = malloc(sizeof(double) * iters), *sv = malloc(sizeof(double) * iters * ST_N);
    for (int i = 0; i < iters; i++) v[i] = f(m, image, eb, nd, NULL);
    for (int i = 0; i < iters; i++) {
        stages st = {{0}};
        f(m, image, eb, nd, &st);
        for (int k = 0; k < ST_N; k++) sv[k * iters + i] = st.ms[k];
    }
    for (int k = 0; k < ST_N; k++) med->ms[k] = median(sv + k * iters, iters);
    const double r = median(v, iters);
    free(v);
    free(sv);
    return r;
}

#define USAGE                                                                                                      \
    "usage: yolov5_bench [--weights W.h5] [--image bus.jpg] [--device cuda|cpu] [--iters N] [--warmup N] "        \
    "[--batch B] [--no-graph] [--no-half] [--no-tf32] [--layers] [--torch OUT.json]\n"

int main(int argc, char **argv) {
    const char *weights = "yolov5n.h5", *image = NULL, *device = "cuda", *torch_path = NULL;
    int iters = 50, warmup = 10, batch = 32, use_graph = 1, no_half = 0, no_tf32 = 0, layers = 0;
    const char *data = getenv("ODL_TEST_DATA");
    if (!data || !data[0]) data = "../shared/data";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        int m = 0; /* a flag with a value matched (v NULL: the value is missing) */
        if (!strcmp(a, "--no-graph")) use_graph = 0;
        else if (!strcmp(a, "--no-half")) no_half = 1;
        else if (!strcmp(a, "--no-tf32")) no_tf32 = 1;
        else if (!strcmp(a, "--layers")) layers = 1;
        else if ((v = odl_cli_flag_value(argc, argv, &i, "--weights", &m)) || m) weights = v;
        else if ((v = odl_cli_flag_value(argc, argv, &i, "--image", &m)) || m) image = v;
        else if ((v = odl_cli_flag_value(argc, argv, &i, "--device", &m)) || m) device = v;
        else if ((v = odl_cli_flag_value(argc, argv, &i, "--torch", &m)) || m) torch_path = v;
        else if ((v = odl_cli_flag_value(argc, argv, &i, "--iters", &m)) || m) {
            if (odl_cli_parse_int(v, 1, 1000000, &iters)) DIE("--iters '%s': an integer >= 1", v ? v : "");
        } else if ((v = odl_cli_flag_value(argc, argv, &i, "--warmup", &m)) || m) {
            if (odl_cli_parse_int(v, 0, 1000000, &warmup)) DIE("--warmup '%s': an integer >= 0", v ? v : "");
        } else if ((v = odl_cli_flag_value(argc, argv, &i, "--batch", &m)) || m) {
            if (odl_cli_parse_int(v, 1, 4096, &batch)) DIE("--batch '%s': an integer in 1..4096", v ? v : "");
        } else if ((v = odl_cli_flag_value(argc, argv, &i, "--baselines", &m)) || m) {
            DIE("--baselines is gone: ratios are taken only against PyTorch run in the same call; run "
                "../shared/bench/torch_baselines.py OUT.json yolov5n yolov5n_compiled and pass --torch OUT.json");
        } else {
            fprintf(stderr, "yolov5_bench: error: unknown argument '%s'\n" USAGE, a);
            return 2;
        }
        if (m && !v) DIE("%s needs a value", a);
    }
    char ibuf[4096];
    if (!image) {
        snprintf(ibuf, sizeof ibuf, "%s/yolov5/images/bus.jpg", data);
        image = ibuf;
    }
    json_t *torch_root = NULL;
    torch_figures pt = {NULL, NULL};
    if (torch_path) {
        if (odl_json_load_file(torch_path, &torch_root) != ODL_OK) DIE("--torch: %s", odl_error_msg());
        pt.eager = torch_section(torch_root, "yolov5n", torch_path);
        if (json_object_get(torch_root, "yolov5n_compiled"))
            pt.compiled = torch_section(torch_root, "yolov5n_compiled", torch_path);
    }

    odl_device dev = odl_cpu();
    if (!strcmp(device, "cuda")) {
        if (odl_cuda_device_count() < 1) DIE("--device cuda: no CUDA device (use --device cpu)");
        CK(odl_cuda_init(0, ODL_CUDA_POOL_GROW));
        dev = odl_cuda(0);
    } else if (strcmp(device, "cpu")) {
        DIE("--device %s: cuda or cpu", device);
    }
    odl_yolov5 *m = NULL;
    CK(odl_yolov5_load(weights, dev, &m));
    printf("yolov5_bench: %s on %s, %lld parameters (BN folded), %d timed iterations, median\n", weights,
           odl_device_name(dev), (long long)odl_yolov5_num_params(m), iters);

    /* Random-ish input in [0, 1] (the baseline used random input). */
    size_t maxin = (size_t)batch * 3 * 640 * 640;
    float *hin = malloc(sizeof(float) * maxin);
    uint32_t s = 12345;
    for (size_t i = 0; i < maxin; i++) {
        s = s * 1664525u + 1013904223u;
        hin[i] = (float)(s >> 8) / 16777216.0f;
    }
    size_t out_cap = (size_t)odl_yolov5_num_predictions(m, 640, 640) * (odl_yolov5_num_classes(m) + 5);
    float *hout = malloc(sizeof(float) * out_cap);
    e2e_bufs eb = {.host_in = hin, .host_out = hout, .out_cap = out_cap, .cap = 4096};
    {
        const odl_gpu_prep_options po = {.threads = 1, .max_batch = 1, .nvjpeg = 1, .keep_host = 0};
        const size_t no = (size_t)odl_yolov5_num_classes(m) + 5;
        CK(odl_gpu_prep_create(dev, &po, &eb.gp));
        if (!(eb.be = odl_backend_for(dev))) DIE("no backend for %s", odl_device_name(dev));
        CK(odl_mem_alloc(dev, sizeof(float) * eb.cap * no, (void **)&eb.d_rows));
        CK(odl_mem_alloc(dev, sizeof(int32_t), (void **)&eb.d_cnt));
        CK(odl_mem_alloc(dev, sizeof(int32_t), (void **)&eb.d_bad));
        CK(odl_host_alloc_pinned(sizeof(float) * eb.cap * no, (void **)&eb.h_rows));
        CK(odl_host_alloc_pinned(sizeof(int32_t), (void **)&eb.h_cnt));
        CK(odl_host_alloc_pinned(sizeof(int32_t), (void **)&eb.h_bad));
        printf("end to end: device path with %s\n", odl_gpu_prep_nvjpeg_note(eb.gp));
    }
    /* [precision][0: batch 1 ms, 1: batch B ms, 2: end to end ms (device path), 3: end to end ms (CPU path)];
     * graph use per precision; the stages of each end-to-end path per precision */
    double r[2][4] = {{0}};
    int graphs[2] = {0}, nd[2] = {0}, nd_cpu[2] = {0};
    stages stg[2][2];
    /* the GPU pipeline at batch 1 [precision][0: upload..boxes back, 1: decode on the CPU] */
    double pl[2][2] = {{0}};
    int pl_graph[2] = {0}, pl_nd[2] = {0};
    const int nprec = dev.type == ODL_DEV_CUDA && !no_half ? 2 : 1;
    for (int h = 0; h < nprec; h++) {
        CK(odl_yolov5_set_half(m, h));
        odl_tensor *x;
        int g1 = 0, gN = 0;
        CK(odl_yolov5_input(m, 1, 640, 640, &x));
        CK(odl_tensor_copy_from_host(x, hin, sizeof(float) * 3 * 640 * 640));
        r[h][0] = time_forward(m, x, warmup, iters, use_graph, &g1);
        CK(odl_yolov5_input(m, batch, 640, 640, &x));
        CK(odl_tensor_copy_from_host(x, hin, sizeof(float) * maxin));
        r[h][1] = time_forward(m, x, warmup, iters, use_graph, &gN);
        graphs[h] = g1 && gN;
        if (layers && dev.type == ODL_DEV_CUDA) {
            /* one eager forward with an event after each layer */
            const int nl = odl_yolov5_num_layers(m);
            float lm[1024];
            CK(odl_yolov5_set_profile(m, 1));
            for (int i = 0; i < 3; i++) CK(odl_yolov5_forward(m, x, NULL));
            CK(odl_yolov5_layer_ms(m, lm, nl));
            CK(odl_yolov5_set_profile(m, 0));
            float tot = 0;
            for (int i = 0; i < nl; i++) tot += lm[i];
            printf("per layer, %s, batch %d (eager, %.3f ms in all):\n", h ? "fp16" : "fp32", batch, tot);
            for (int i = 0; i < nl; i++)
                printf("  layer %2d %-8s %8.3f ms  %5.1f%%\n", i, odl_yolov5_layer_type(m, i), lm[i], 100 * lm[i] / tot);
        }
        r[h][2] = e2e_time(m, image, &eb, 1, warmup, iters, &nd[h], &stg[h][1]);
        r[h][3] = e2e_time(m, image, &eb, 0, warmup, iters, &nd_cpu[h], &stg[h][0]);
        if (nd[h] != nd_cpu[h]) printf("note: %s end to end: %d boxes on the device path, %d on the CPU path\n",
                                       h ? "fp16" : "fp32", nd[h], nd_cpu[h]);
        if (dev.type == ODL_DEV_CUDA) pl_graph[h] = gpu_pipeline(m, image, warmup, iters, use_graph, pl[h], &pl_nd[h]);
    }

    /* --precision tf32: the float32 network with its convolutions on tensor cores (TF32 operands, float32
     * accumulation), beside PyTorch's fp32 (whose cuDNN convolutions run TF32 by default) */
    double r_tf32[2] = {NAN, NAN};
    int g_tf32 = 0;
    if (dev.type == ODL_DEV_CUDA && !no_tf32) {
        odl_tensor *x;
        int g1 = 0, gN = 0;
        CK(odl_yolov5_set_half(m, 0));
        odl_set_matmul_precision(ODL_PRECISION_TF32);
        CK(odl_yolov5_input(m, 1, 640, 640, &x));
        CK(odl_tensor_copy_from_host(x, hin, sizeof(float) * 3 * 640 * 640));
        r_tf32[0] = time_forward(m, x, warmup, iters, use_graph, &g1);
        CK(odl_yolov5_input(m, batch, 640, 640, &x));
        CK(odl_tensor_copy_from_host(x, hin, sizeof(float) * maxin));
        r_tf32[1] = time_forward(m, x, warmup, iters, use_graph, &gN);
        g_tf32 = g1 && gN;
        odl_set_matmul_precision(ODL_PRECISION_FP32);
    }
    const char *pname[2] = {"fp32", "fp16"};
    if (torch_root) {
        const json_t *tv = json_object_get(torch_root, "torch"), *td = json_object_get(torch_root, "device");
        printf("PyTorch of this call: %s (torch %s on %s)\n", torch_path, json_is_string(tv) ? json_string_value(tv) : "?",
               json_is_string(td) ? json_string_value(td) : "?");
    } else {
        printf("PyTorch: none given (--torch OUT.json of ../shared/bench/torch_baselines.py, same call): no ratios\n");
    }
    const json_t *e2e = json_object_get(pt.eager, "e2e_bus_fp32_ms_median");
    const double pt_e2e = json_is_number(e2e) ? json_number_value(e2e) : NAN;
    printf("%-50s %13s %13s %8s\n", "measure", "odl", "PyTorch", "speedup");
    for (int h = 0; h < nprec; h++) {
        char lbl[96], tail[64];
        const double ips = batch * 1000.0 / r[h][1];
        snprintf(lbl, sizeof lbl, "forward batch 1, 640x640, %s%s", pname[h], graphs[h] ? " (CUDA graph)" : "");
        print_row(lbl, r[h][0], torch_figure(pt.eager, pname[h], 1, "ms"), 0, "");
        if (h == 1)
            print_row("  beside torch.compile reduce-overhead fp16", r[h][0],
                      torch_figure(pt.compiled, "reduce-overhead_fp16", 1, "ms"), 0, "");
        snprintf(lbl, sizeof lbl, "forward batch %d, 640x640, %s%s", batch, pname[h], graphs[h] ? " (CUDA graph)" : "");
        snprintf(tail, sizeof tail, "   (%.3f ms per batch)", r[h][1]);
        print_row(lbl, ips, torch_figure(pt.eager, pname[h], batch, "img_per_s"), 1, tail);
        if (h == 1)
            print_row("  beside torch.compile reduce-overhead fp16", ips,
                      torch_figure(pt.compiled, "reduce-overhead_fp16", batch, "img_per_s"), 1, "");
        snprintf(lbl, sizeof lbl, "end to end bus.jpg (decode..NMS), %s", pname[h]);
        snprintf(tail, sizeof tail, "   (%d boxes, %s%s)", nd[h], odl_decoder_name(eb.decoder),
                 isfinite(pt_e2e) ? "; PyTorch fp32" : "");
        print_row(lbl, r[h][2], pt_e2e, 0, tail);
        snprintf(lbl, sizeof lbl, "  same, the CPU image path, %s", pname[h]);
        snprintf(tail, sizeof tail, "   (%d boxes)", nd_cpu[h]);
        print_row(lbl, r[h][3], pt_e2e, 0, tail);
        if (dev.type == ODL_DEV_CUDA) {
            snprintf(lbl, sizeof lbl, "  GPU pipeline upload..boxes, %s%s", pname[h], pl_graph[h] ? " (one CUDA graph)" : "");
            snprintf(tail, sizeof tail, "   (%d boxes; + %.3f ms decode on the CPU)", pl_nd[h], pl[h][1]);
            print_row(lbl, pl[h][0], NAN, 0, tail);
        }
    }
    if (isfinite(r_tf32[0])) {
        char lbl[96], tail[64];
        const double ips = batch * 1000.0 / r_tf32[1], pt_ips = torch_figure(pt.eager, "fp32", batch, "img_per_s");
        snprintf(lbl, sizeof lbl, "forward batch 1, 640x640, tf32%s; PyTorch fp32", g_tf32 ? " (CUDA graph)" : "");
        print_row(lbl, r_tf32[0], torch_figure(pt.eager, "fp32", 1, "ms"), 0, "");
        snprintf(lbl, sizeof lbl, "forward batch %d, 640x640, tf32%s; PyTorch fp32", batch, g_tf32 ? " (CUDA graph)" : "");
        snprintf(tail, sizeof tail, "   (%.3f ms per batch)", r_tf32[1]);
        print_row(lbl, ips, pt_ips, 1, tail);
        if (isfinite(pt_ips))
            printf("target: batch %d tf32 >= 1.5x PyTorch fp32 (%.2fx): %s\n", batch, ips / pt_ips,
                   ips / pt_ips >= 1.5 ? "met" : "NOT met");
    }
    /* where the end-to-end time goes: every stage synchronised, medians */
    printf("end to end by stage, ms (medians of %d runs synchronised after each stage; the whole runs above are not):\n",
           iters);
    printf("  %-24s", "stage");
    for (int h = 0; h < nprec; h++) printf(" %11s %11s", h ? "cpu fp16" : "cpu fp32", h ? "device fp16" : "device fp32");
    printf("\n");
    for (int k = 0; k < ST_N; k++) {
        printf("  %-24s", stage_name[k]);
        for (int h = 0; h < nprec; h++) printf(" %11.3f %11.3f", stg[h][0].ms[k], stg[h][1].ms[k]);
        printf("\n");
    }
    if (isfinite(pt_e2e))
        printf("target: end to end <= 0.5x PyTorch's fp32 (%.3f ms): fp32 %.3f ms (%s), %s%.3f ms%s\n", 0.5 * pt_e2e, r[0][2],
               r[0][2] <= 0.5 * pt_e2e ? "met" : "NOT met", nprec > 1 ? "fp16 " : "", nprec > 1 ? r[1][2] : NAN,
               nprec > 1 ? (r[1][2] <= 0.5 * pt_e2e ? " (met)" : " (NOT met)") : "");
    /* The targets: batch 1 against PyTorch's fp32 batch 1, batch 32 against its fastest (fp16). */
    const int hb = nprec - 1;
    const double best_b1 = r[0][0] < r[hb][0] ? r[0][0] : r[hb][0];
    const double best_ips = batch * 1000.0 / (r[0][1] < r[hb][1] ? r[0][1] : r[hb][1]);
    const double pt_b1 = torch_figure(pt.eager, "fp32", 1, "ms"), pt_bNh = torch_figure(pt.eager, "fp16", batch, "img_per_s");
    if (isfinite(pt_b1) && isfinite(pt_bNh))
        printf("targets: batch 1 >= 2x PyTorch fp32 (%.2fx): %s; batch %d >= 1.5x PyTorch fp16 (%.2fx): %s\n",
               pt_b1 / best_b1, pt_b1 / best_b1 >= 2 ? "met" : "NOT met", batch, best_ips / pt_bNh,
               best_ips / pt_bNh >= 1.5 ? "met" : "NOT met");
    printf("{\"bench\": \"yolov5n\", \"device\": \"%s\", \"batch\": %d", odl_device_name(dev), batch);
    for (int h = 0; h < nprec; h++)
        printf(", \"%s_b1_ms\": %.4f, \"%s_bN_ms\": %.4f, \"%s_bN_img_per_s\": %.1f, \"%s_e2e_bus_ms\": %.3f, "
               "\"%s_e2e_bus_cpu_path_ms\": %.3f, \"%s_graph\": %s, \"%s_pipeline_b1_ms\": %.4f, \"%s_pipeline_graph\": %s, "
               "\"%s_decode_ms\": %.3f",
               pname[h], r[h][0], pname[h], r[h][1], pname[h], batch * 1000.0 / r[h][1], pname[h], r[h][2], pname[h],
               r[h][3], pname[h], graphs[h] ? "true" : "false", pname[h], pl[h][0], pname[h],
               pl_graph[h] ? "true" : "false", pname[h], pl[h][1]);
    if (isfinite(r_tf32[0]))
        printf(", \"tf32_b1_ms\": %.4f, \"tf32_bN_ms\": %.4f, \"tf32_bN_img_per_s\": %.1f, \"tf32_graph\": %s", r_tf32[0],
               r_tf32[1], batch * 1000.0 / r_tf32[1], g_tf32 ? "true" : "false");
    printf(", \"e2e_decoder\": \"%s\"", odl_decoder_name(eb.decoder));
    printf("}\n");
    odl_gpu_prep_free(eb.gp);
    odl_mem_free(dev, eb.d_rows);
    odl_mem_free(dev, eb.d_cnt);
    odl_mem_free(dev, eb.d_bad);
    odl_host_free_pinned(eb.h_rows);
    odl_host_free_pinned(eb.h_cnt);
    odl_host_free_pinned(eb.h_bad);
    free(hin);
    free(hout);
    json_decref(torch_root);
    odl_yolov5_free(m);
    if (dev.type == ODL_DEV_CUDA) odl_cuda_shutdown();
    return 0;
}
