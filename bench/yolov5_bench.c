/* YOLOv5 inference benchmark: forward latency at batch 1, throughput at batch 32 (640x640, float32 and,
 * on CUDA, float16: odl_yolov5_set_half), and end to end on one image (decode + letterbox + forward + NMS, as detect.py), printed beside
 * PyTorch's figures from ../shared/data/baselines.json ("yolov5n_inference", measured on an H200 with the
 * official v7.0 model, Conv+BN fused, cudnn.benchmark, median of 50).
 *
 *   yolov5_bench [--weights W.h5] [--image bus.jpg] [--device cuda|cpu] [--iters 50] [--warmup 10]
 *                [--batch 32] [--no-graph] [--no-half] [--baselines FILE]
 *
 * On CUDA the forward is captured once into a CUDA graph (after warm-up, so that every buffer and the
 * backend's workspace exist) and replayed; --no-graph times eager launches. Each timed iteration is
 * one forward between two events on the current stream, synchronised; the median is reported.
 * The input is float32 NCHW in both precisions (the float16 forward converts it on the device). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "odl/device.h"
#include "odl/image.h"
#include "odl/nms.h"
#include "odl/yolov5.h"

#ifdef ODL_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof(double), cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* A number following "key": inside the "yolov5n_inference" object of baselines.json; NAN if absent. */
static double baseline(const char *json, const char *key) {
    if (!json) return NAN;
    const char *sec = strstr(json, "\"yolov5n_inference\"");
    if (!sec) return NAN;
    char k[128];
    snprintf(k, sizeof k, "\"%s\"", key);
    const char *p = strstr(sec, k);
    const char *end = strchr(sec, '}');
    if (!p || (end && p > end)) return NAN;
    p = strchr(p, ':');
    return p ? strtod(p + 1, NULL) : NAN;
}

static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    size_t got = fread(b, 1, (size_t)n, f);
    b[got] = 0;
    fclose(f);
    return b;
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

#ifdef ODL_HAVE_CUDA
/* Capture one forward into a graph. Returns NULL (and says why) when capture is not possible. */
static cudaGraphExec_t capture_forward(odl_yolov5 *m, const odl_tensor *x) {
    cudaStream_t s = (cudaStream_t)odl_stream_current();
    cudaGraph_t g = NULL;
    cudaGraphExec_t ge = NULL;
    if (cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
        fprintf(stderr, "  CUDA graph: cannot begin capture on the current stream (%s); timing eager launches\n",
                cudaGetErrorString(cudaGetLastError()));
        return NULL;
    }
    odl_status st = odl_yolov5_forward(m, x, NULL);
    cudaError_t e = cudaStreamEndCapture(s, &g);
    if (st != ODL_OK || e != cudaSuccess || !g) {
        fprintf(stderr, "  CUDA graph: capture failed (%s%s%s); timing eager launches\n",
                st != ODL_OK ? odl_error_msg() : "", st != ODL_OK ? "; " : "", cudaGetErrorString(e));
        cudaGetLastError();
        if (g) cudaGraphDestroy(g);
        return NULL;
    }
    e = cudaGraphInstantiate(&ge, g, 0);
    cudaGraphDestroy(g);
    if (e != cudaSuccess) {
        fprintf(stderr, "  CUDA graph: instantiate failed (%s); timing eager launches\n", cudaGetErrorString(e));
        cudaGetLastError();
        return NULL;
    }
    return ge;
}
#endif

/* Median milliseconds of one forward of x (graph replay when use_graph and capture works). */
static double time_forward(odl_yolov5 *m, odl_tensor *x, int warmup, int iters, int use_graph, int *graph_used) {
    odl_device dev = odl_yolov5_device(m);
    timer t;
    timer_init(&t, dev);
    for (int i = 0; i < warmup; i++) CK(odl_yolov5_forward(m, x, NULL));
    if (dev.type == ODL_DEV_CUDA) CK(odl_device_synchronize(dev));
    *graph_used = 0;
#ifdef ODL_HAVE_CUDA
    cudaGraphExec_t ge = NULL;
    if (dev.type == ODL_DEV_CUDA && use_graph) {
        ge = capture_forward(m, x);
        if (ge) {
            *graph_used = 1;
            for (int i = 0; i < 3; i++) cudaGraphLaunch(ge, (cudaStream_t)odl_stream_current());
            CK(odl_device_synchronize(dev));
        }
    }
#else
    (void)use_graph;
#endif
    double *v = malloc(sizeof(double) * iters);
    for (int i = 0; i < iters; i++) {
        if (dev.type == ODL_DEV_CUDA) {
            CK(odl_event_record(t.e0, odl_stream_current()));
#ifdef ODL_HAVE_CUDA
            if (ge) {
                if (cudaGraphLaunch(ge, (cudaStream_t)odl_stream_current()) != cudaSuccess)
                    DIE("cudaGraphLaunch: %s", cudaGetErrorString(cudaGetLastError()));
            } else
#endif
                CK(odl_yolov5_forward(m, x, NULL));
            CK(odl_event_record(t.e1, odl_stream_current()));
            CK(odl_event_synchronize(t.e1));
            float ms = 0;
            CK(odl_event_elapsed_ms(t.e0, t.e1, &ms));
            v[i] = ms;
        } else {
            double t0 = now_ms();
            CK(odl_yolov5_forward(m, x, NULL));
            v[i] = now_ms() - t0;
        }
    }
#ifdef ODL_HAVE_CUDA
    if (ge) cudaGraphExecDestroy(ge);
#endif
    if (dev.type == ODL_DEV_CUDA) {
        odl_event_destroy(t.e0);
        odl_event_destroy(t.e1);
    }
    double med = median(v, iters);
    free(v);
    return med;
}

/* One end-to-end run on an image file: decode, letterbox (detect.py: rect, stride-32 padding), /255,
 * upload, forward, download, NMS, boxes to the original image. Returns ms; *ndet the box count. */
static double end_to_end(odl_yolov5 *m, const char *image, float *host_in, float *host_out, size_t out_cap, int *ndet) {
    double t0 = now_ms();
    odl_image img, lb;
    odl_letterbox g;
    CK(odl_image_load(image, &img));
    CK(odl_image_letterbox(&img, 640, 1, odl_yolov5_max_stride(m), 114, &lb, &g));
    odl_image_to_chw(&lb, host_in);
    odl_tensor *x;
    CK(odl_yolov5_input(m, 1, lb.height, lb.width, &x));
    CK(odl_tensor_copy_from_host(x, host_in, sizeof(float) * 3 * lb.width * lb.height));
    const odl_tensor *y;
    CK(odl_yolov5_forward(m, x, &y));
    size_t n = (size_t)(y->shape[1] * y->shape[2]);
    if (n > out_cap) DIE("output of %zu floats", n);
    CK(odl_tensor_copy_to_host(y, host_out, sizeof(float) * n));
    odl_nms_params p = odl_nms_defaults();
    odl_detection det[1000];
    CK(odl_yolo_nms(host_out, y->shape[1], (int)y->shape[2] - 5, &p, det, 1000, ndet));
    for (int k = 0; k < *ndet; k++) {
        float b[4] = {det[k].x1, det[k].y1, det[k].x2, det[k].y2};
        odl_letterbox_unmap(&g, b);
    }
    double ms = now_ms() - t0;
    odl_image_free(&img);
    odl_image_free(&lb);
    return ms;
}

int main(int argc, char **argv) {
    const char *weights = "yolov5n.h5", *image = NULL, *device = "cuda", *bfile = NULL;
    int iters = 50, warmup = 10, batch = 32, use_graph = 1, no_half = 0, layers = 0;
    const char *data = getenv("ODL_TEST_DATA");
    if (!data || !data[0]) data = "../shared/data";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--weights") && v) weights = argv[++i];
        else if (!strcmp(a, "--image") && v) image = argv[++i];
        else if (!strcmp(a, "--device") && v) device = argv[++i];
        else if (!strcmp(a, "--baselines") && v) bfile = argv[++i];
        else if (!strcmp(a, "--iters") && v) iters = atoi(argv[++i]);
        else if (!strcmp(a, "--warmup") && v) warmup = atoi(argv[++i]);
        else if (!strcmp(a, "--batch") && v) batch = atoi(argv[++i]);
        else if (!strcmp(a, "--no-graph")) use_graph = 0;
        else if (!strcmp(a, "--no-half")) no_half = 1;
        else if (!strcmp(a, "--layers")) layers = 1;
        else {
            fprintf(stderr, "usage: yolov5_bench [--weights W.h5] [--image bus.jpg] [--device cuda|cpu] [--iters N] "
                            "[--warmup N] [--batch B] [--no-graph] [--no-half] [--layers] [--baselines FILE]\n");
            return 2;
        }
    }
    if (iters < 1 || warmup < 0 || batch < 1) DIE("bad --iters/--warmup/--batch");
    char ibuf[4096], bbuf[4096];
    if (!image) {
        snprintf(ibuf, sizeof ibuf, "%s/yolov5/images/bus.jpg", data);
        image = ibuf;
    }
    if (!bfile) {
        snprintf(bbuf, sizeof bbuf, "%s/baselines.json", data);
        bfile = bbuf;
    }
    char *bj = read_text(bfile);
    if (!bj) fprintf(stderr, "yolov5_bench: note: %s not readable, no PyTorch figures\n", bfile);

    odl_device dev = odl_cpu();
    if (!strcmp(device, "cuda")) {
        if (odl_cuda_device_count() < 1) DIE("--device cuda: no CUDA device (use --device cpu)");
        CK(odl_cuda_init(0, 0.6));
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
    /* [precision][0: batch 1 ms, 1: batch B ms, 2: end to end ms]; graph use per precision */
    double r[2][3] = {{0}};
    int graphs[2] = {0}, nd[2] = {0};
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
        for (int i = 0; i < warmup; i++) end_to_end(m, image, hin, hout, out_cap, &nd[h]);
        double *v = malloc(sizeof(double) * iters);
        for (int i = 0; i < iters; i++) v[i] = end_to_end(m, image, hin, hout, out_cap, &nd[h]);
        r[h][2] = median(v, iters);
        free(v);
    }

    const double pt_b1 = baseline(bj, "fp32_b1_ms"), pt_b32 = baseline(bj, "fp32_b32_img_per_s");
    const double pt_b32h = baseline(bj, "fp16_b32_img_per_s"), pt_b1h = baseline(bj, "fp16_b1_ms");
    const double pt_e2e = baseline(bj, "e2e_bus_fp32_ms_median");
    const char *pname[2] = {"fp32", "fp16"};
    const double pt1[2] = {pt_b1, pt_b1h}, ptN[2] = {pt_b32, pt_b32h};
    printf("%-46s %12s %12s %8s\n", "measure", "odl", "PyTorch", "speedup");
    for (int h = 0; h < nprec; h++) {
        char lbl[96];
        const double ips = batch * 1000.0 / r[h][1];
        snprintf(lbl, sizeof lbl, "forward batch 1, 640x640, %s%s", pname[h], graphs[h] ? " (CUDA graph)" : "");
        printf("%-46s %9.3f ms %9.3f ms %7.2fx\n", lbl, r[h][0], pt1[h], pt1[h] / r[h][0]);
        snprintf(lbl, sizeof lbl, "forward batch %d, 640x640, %s%s", batch, pname[h], graphs[h] ? " (CUDA graph)" : "");
        printf("%-46s %7.0f img/s %7.0f img/s %7.2fx   (%.3f ms per batch)\n", lbl, ips, ptN[h], ips / ptN[h], r[h][1]);
        snprintf(lbl, sizeof lbl, "end to end bus.jpg (decode..NMS), %s", pname[h]);
        printf("%-46s %9.3f ms %9.3f ms %7.2fx   (%d boxes; PyTorch fp32)\n", lbl, r[h][2], pt_e2e, pt_e2e / r[h][2], nd[h]);
    }
    /* The targets: batch 1 against PyTorch's fp32 batch 1, batch 32 against its fastest (fp16). */
    const int hb = nprec - 1;
    const double best_b1 = r[0][0] < r[hb][0] ? r[0][0] : r[hb][0];
    const double best_ips = batch * 1000.0 / (r[0][1] < r[hb][1] ? r[0][1] : r[hb][1]);
    printf("targets: batch 1 >= 2x PyTorch fp32 (%.2fx): %s; batch %d >= 1.5x PyTorch fp16 (%.2fx): %s\n",
           pt_b1 / best_b1, pt_b1 / best_b1 >= 2 ? "met" : "NOT met", batch, best_ips / pt_b32h,
           best_ips / pt_b32h >= 1.5 ? "met" : "NOT met");
    printf("{\"bench\": \"yolov5n\", \"device\": \"%s\", \"batch\": %d", odl_device_name(dev), batch);
    for (int h = 0; h < nprec; h++)
        printf(", \"%s_b1_ms\": %.4f, \"%s_bN_ms\": %.4f, \"%s_bN_img_per_s\": %.1f, \"%s_e2e_bus_ms\": %.3f, "
               "\"%s_graph\": %s",
               pname[h], r[h][0], pname[h], r[h][1], pname[h], batch * 1000.0 / r[h][1], pname[h], r[h][2], pname[h],
               graphs[h] ? "true" : "false");
    printf("}\n");
    free(hin);
    free(hout);
    free(bj);
    odl_yolov5_free(m);
    if (dev.type == ODL_DEV_CUDA) odl_cuda_shutdown();
    return 0;
}
