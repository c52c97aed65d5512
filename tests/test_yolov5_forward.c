/* YOLOv5n forward against the official outputs (../shared/data/yolov5/reference/yolov5n_reference.h5):
 *   bus640    the Detect output [1, 25200, 85] for bus.jpg letterboxed to 640x640 (input_rgb_u8 / 255);
 *   zidane320 every layer's output for zidane.jpg letterboxed to 320x320, reported layer by layer so
 *             that the first wrong layer is named.
 * usage: test_yolov5_forward cpu|cuda bus640|zidane320 [half]
 * Tolerance (float32): 1e-3 relative, |ours - ref| <= 1e-3 * (|ref| + s) with s the layer's RMS value (so
 * that values near zero are held to 1e-3 of the layer's scale), and a relative L2 error under 1e-4.
 * With `half` the network runs in float16 (odl_yolov5_set_half) against the same float32 reference. Each
 * stored activation is rounded to half, a relative error uniform in +-2^-11 (RMS 2^-11 / sqrt(3) = 2.8e-4),
 * and the deepest output sits behind about 60 such roundings (convolutions in sequence): as a random walk,
 * sqrt(60) * 2.8e-4 = 2.2e-3 relative L2 (measured: at most 2.5e-3 on the CPU). Bounds: relative L2 5e-3,
 * about twice that estimate, and per element 3e-2 of (|ref| + rms), the float32 bound scaled by 30. */
#include "yolov5_test_util.h"

static double g_tol = 1e-3, g_l2 = 1e-4;

static void check_tensor(const char *what, const float *ours, const float *ref, int64_t n) {
    double rms = 0;
    for (int64_t i = 0; i < n; i++) rms += (double)ref[i] * ref[i];
    rms = sqrt(rms / (double)(n ? n : 1));
    double ratio, rel_l2, max_abs;
    compare_f32(ours, ref, n, g_tol * rms, g_tol, &ratio, &rel_l2, &max_abs);
    printf("%-22s %9lld values  max|d| %.3g  max d/(%g(|ref|+rms)) %.3f  rel L2 %.3g\n", what, (long long)n, max_abs,
           g_tol, ratio, rel_l2);
    TCHECK(ratio <= 1.0, "%s: max error ratio %.3f > 1 (max |d| %.3g)", what, ratio, max_abs);
    TCHECK(rel_l2 <= g_l2, "%s: relative L2 error %.3g", what, rel_l2);
}

int main(int argc, char **argv) {
    const char *wpath = NULL;
    odl_device dev;
    const char *const data[] = {"yolov5/reference/yolov5n_reference.h5", NULL};
    int r = yolo_test_start(argc, argv, data, &wpath, &dev);
    if (r) return r;
    const char *mode = argc > 2 ? argv[2] : "bus640";
    char ref[4096];
    snprintf(ref, sizeof ref, "%s", odl_test_data_path("yolov5/reference/yolov5n_reference.h5"));

    odl_yolov5 *m = NULL;
    TOK(odl_yolov5_load(wpath, dev, &m));
    if (!m) return odl_test_finish("test_yolov5_forward");
    if (argc > 3 && !strcmp(argv[3], "half")) {
        TOK(odl_yolov5_set_half(m, 1));
        TCHECK(odl_yolov5_is_half(m), "half mode");
        g_tol = 3e-2;
        g_l2 = 5e-3;
        printf("float16 forward\n");
    }
    TCHECK(odl_yolov5_num_classes(m) == 80, "classes %d", odl_yolov5_num_classes(m));
    TCHECK(odl_yolov5_num_layers(m) == 25, "layers %d", odl_yolov5_num_layers(m));
    TCHECK(odl_yolov5_max_stride(m) == 32, "max stride %d", odl_yolov5_max_stride(m));
    /* 1,881,736 parameters and buffers in the checkpoint; folding drops the BN statistics:
     * each folded conv keeps weight + bias, i.e. conv weights + 2 * channels of each BN become weight + bias. */
    printf("folded parameters: %lld\n", (long long)odl_yolov5_num_params(m));
    TCHECK(!strcmp(odl_yolov5_class_name(m, 0), "person") && !strcmp(odl_yolov5_class_name(m, 79), "toothbrush"),
           "class names");

    const int S = strcmp(mode, "zidane320") ? 640 : 320;
    float *x = NULL;
    int64_t nx = 0;
    if (S == 640) {
        /* bus_640/input_rgb_u8 [640, 640, 3] HWC -> [1, 3, 640, 640] / 255 */
        float *u8 = ref_read_f32(ref, "bus_640/input_rgb_u8", &nx);
        TCHECK(u8 && nx == 640 * 640 * 3, "reference input");
        if (!u8) return odl_test_finish("test_yolov5_forward");
        x = malloc(sizeof(float) * nx);
        for (int64_t p = 0; p < 640 * 640; p++)
            for (int c = 0; c < 3; c++) x[c * 640 * 640 + p] = u8[p * 3 + c] / 255.0f;
        free(u8);
    } else {
        x = ref_read_f32(ref, "zidane_320/input", &nx);
        TCHECK(x && nx == 3 * 320 * 320, "reference input");
        if (!x) return odl_test_finish("test_yolov5_forward");
    }
    odl_tensor *in = NULL;
    TOK(odl_yolov5_input(m, 1, S, S, &in));
    TOK(odl_tensor_copy_from_host(in, x, sizeof(float) * nx));
    const odl_tensor *out = NULL;
    TOK(odl_yolov5_forward(m, in, &out));
    if (!out) return odl_test_finish("test_yolov5_forward");
    TCHECK(out->ndim == 3 && out->shape[0] == 1 && out->shape[1] == odl_yolov5_num_predictions(m, S, S) &&
               out->shape[2] == 85, "output shape");

    if (S == 640) {
        int64_t n = 0;
        float *want = ref_read_f32(ref, "bus_640/output", &n);
        float *got = to_host(out);
        TCHECK(want && got && n == 25200 * 85, "reference output");
        if (want && got) {
            check_tensor("bus_640 Detect", got, want, n);
            /* Columns apart: boxes (pixels) and scores. */
            float *gb = malloc(sizeof(float) * 25200 * 4), *wb = malloc(sizeof(float) * 25200 * 4);
            float *gs = malloc(sizeof(float) * 25200 * 81), *ws = malloc(sizeof(float) * 25200 * 81);
            for (int i = 0; i < 25200; i++) {
                memcpy(gb + i * 4, got + i * 85, 16);
                memcpy(wb + i * 4, want + i * 85, 16);
                memcpy(gs + i * 81, got + i * 85 + 4, 81 * 4);
                memcpy(ws + i * 81, want + i * 85 + 4, 81 * 4);
            }
            check_tensor("bus_640 boxes", gb, wb, 25200 * 4);
            check_tensor("bus_640 scores", gs, ws, 25200 * 81);
            free(gb);
            free(wb);
            free(gs);
            free(ws);
        }
        free(want);
        free(got);
    } else {
        for (int i = 0; i < odl_yolov5_num_layers(m); i++) {
            char name[96];
            const char *type = odl_yolov5_layer_type(m, i);
            snprintf(name, sizeof name, "zidane_320/layer%02d_%s", i, type);
            int64_t n = 0;
            float *want = ref_read_f32(ref, name, &n);
            TCHECK(want != NULL, "reference %s missing", name);
            float *got = want ? malloc(sizeof(float) * (size_t)n) : NULL;
            if (got) {
                TOK(odl_yolov5_layer_output_host(m, i, got, (size_t)n));
                check_tensor(name + 11, got, want, n);
            }
            free(got);
            free(want);
        }
    }
    free(x);
    odl_yolov5_free(m);
    if (dev.type == ODL_DEV_CUDA) TOK(odl_cuda_shutdown()); /* no device memory left in use */
    return odl_test_finish("test_yolov5_forward");
}
