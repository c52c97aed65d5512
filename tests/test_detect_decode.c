/* test_detect_decode: the backends' yolov5_detect_decode entry (odl/backend.h) against a float64
 * evaluation of YOLOv5 v7.0's Detect.forward inference formula, on the CPU (NCHW and NHWC heads) and, with
 * --backend cuda, on CUDA device 0 (NCHW; 77 = skipped without one). Rows outside this level's range
 * must stay untouched. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "odl/backend.h"
#include "odl/device.h"
#include "test_util.h"

enum { N = 2, NA = 3, NO = 7, NY = 5, NX = 6, ROWS_BEFORE = 4, ROWS_AFTER = 3 };

static double ref(double v, int k, int x, int y, double stride, double anchor) {
    const double s = 1.0 / (1.0 + exp(-v));
    if (k == 0) return (s * 2.0 + x - 0.5) * stride;
    if (k == 1) return (s * 2.0 + y - 0.5) * stride;
    if (k < 4) return (s * 2.0) * (s * 2.0) * anchor;
    return s;
}

static void run(const odl_backend *be, odl_device dev, int nhwc) {
    const int64_t plane = (int64_t)NY * NX, rows_total = ROWS_BEFORE + (int64_t)NA * plane + ROWS_AFTER;
    const size_t nhead = (size_t)N * NA * NO * plane, nout = (size_t)N * rows_total * NO;
    float *head = malloc(nhead * sizeof(float)), *out = malloc(nout * sizeof(float));
    const float anchors[NA * 2] = {10, 13, 16, 30, 33, 23}, stride = 8;
    uint32_t seed = 12345;
    for (size_t i = 0; i < nhead; i++) {
        seed = seed * 1664525u + 1013904223u;
        head[i] = ((float)(seed >> 8) / 16777216.0f - 0.5f) * 12.0f; /* -6..6 */
    }
    for (size_t i = 0; i < nout; i++) out[i] = -12345.0f;
    float *dh = head, *dout = out;
    if (dev.type == ODL_DEV_CUDA) {
        void *a = NULL, *b = NULL;
        TOK(odl_mem_alloc(dev, nhead * sizeof(float), &a));
        TOK(odl_mem_alloc(dev, nout * sizeof(float), &b));
        TOK(odl_memcpy_async(a, dev, head, odl_cpu(), nhead * sizeof(float), odl_stream_current()));
        TOK(odl_memcpy_async(b, dev, out, odl_cpu(), nout * sizeof(float), odl_stream_current()));
        dh = a;
        dout = b;
    }
    odl_detect_args d = {dout, N, NA, NO, NY, NX, rows_total, ROWS_BEFORE, stride, anchors};
    TOK(be->yolov5_detect_decode(&d, dh, nhwc));
    if (dev.type == ODL_DEV_CUDA) {
        TOK(odl_memcpy_async(out, odl_cpu(), dout, dev, nout * sizeof(float), odl_stream_current()));
        TOK(odl_stream_synchronize(odl_stream_current()));
        odl_mem_free(dev, dh);
        odl_mem_free(dev, dout);
    }
    double worst = 0;
    int untouched = 1;
    for (int n = 0; n < N; n++) {
        for (int64_t r = 0; r < rows_total; r++) {
            const int64_t inside = r - ROWS_BEFORE;
            for (int k = 0; k < NO; k++) {
                const float got = out[((int64_t)n * rows_total + r) * NO + k];
                if (inside < 0 || inside >= NA * plane) {
                    untouched &= got == -12345.0f;
                    continue;
                }
                const int a = (int)(inside / plane), pix = (int)(inside % plane), y = pix / NX, x = pix % NX;
                const float v = nhwc ? head[(((int64_t)n * plane + pix) * NA + a) * NO + k]
                                     : head[(((int64_t)n * NA + a) * NO + k) * plane + pix];
                const double want = ref(v, k, x, y, stride, k == 2 || k == 3 ? anchors[a * 2 + k - 2] : 0);
                const double err = fabs(got - want) / (1.0 + fabs(want));
                if (err > worst) worst = err;
            }
        }
    }
    TCHECK(worst < 2e-6, "%s %s: worst relative error %.3g", be->name, nhwc ? "NHWC" : "NCHW", worst);
    TCHECK(untouched, "%s: rows of other levels were written", be->name);
    printf("%s %s head: worst relative error %.3g against float64\n", be->name, nhwc ? "NHWC" : "NCHW", worst);
    free(head);
    free(out);
}

int main(int argc, char **argv) {
    const int cuda = argc > 2 && !strcmp(argv[1], "--backend") && !strcmp(argv[2], "cuda");
    if (!cuda) {
        const odl_backend *be = odl_backend_cpu();
        TCHECK(be->yolov5_detect_decode != NULL, "CPU decode entry");
        TCHECK(be->yolov5_detect_head_f16 == NULL, "the CPU has no fused head: the caller decodes");
        if (be->yolov5_detect_decode) {
            run(be, odl_cpu(), 0);
            run(be, odl_cpu(), 1);
        }
        return odl_test_finish("test_detect_decode cpu");
    }
    if (odl_cuda_device_count() == 0) {
        printf("SKIP: no CUDA device (or a CPU-only build)\n");
        return ODL_TEST_SKIP;
    }
    TOK(odl_cuda_init(0, 0.1));
    const odl_backend *be = odl_backend_cuda();
    TCHECK(be && be->yolov5_detect_decode && be->yolov5_detect_head_f16 && be->release, "CUDA entries");
    if (be && be->yolov5_detect_decode) {
        run(be, odl_cuda(0), 0);
        odl_detect_args d = {0};
        float dummy = 0;
        d.out = &dummy;
        d.anchors_wh = &dummy;
        TFAIL(be->yolov5_detect_decode(&d, &dummy, 1), ODL_E_UNSUPPORTED);
    }
    TOK(odl_cuda_shutdown()); /* every allocation above was freed */
    return odl_test_finish("test_detect_decode cuda");
}
