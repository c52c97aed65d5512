/* A YOLOv5 of another size and class count (tests/yolov5_synth.py: depth 0.67, width 0.75 (the
 * yolov5m multiples), 3 classes, random weights, written as a real checkpoint and converted by
 * tools/convert_yolov5.py) against a float64 NumPy forward of the unfused network: every layer and the
 * Detect output for a batch of 2 inputs of 64x96 (rectangular, batch > 1).
 * usage: test_yolov5_synth cpu|cuda */
#include "yolov5_test_util.h"

int main(int argc, char **argv) {
    /* the data first: a skip after the device is set up would leave its pool allocated (memcheck's leak) */
    char dir[2048], w[4096], ref[4096];
    snprintf(dir, sizeof dir, "%s/yolov5_synth.d", getenv("ODL_BINARY_DIR") ? getenv("ODL_BINARY_DIR") : ".");
    snprintf(w, sizeof w, "%s/synth.h5", dir);
    snprintf(ref, sizeof ref, "%s/synth_ref.h5", dir);
    struct stat sb;
    if (stat(w, &sb) || stat(ref, &sb)) {
        printf("SKIP: %s not written (the yolov5_synth fixture needs a python3 with h5py)\n", w);
        return ODL_TEST_SKIP;
    }
    odl_device dev;
    int r = yolo_test_device(argc, argv, &dev);
    if (r) return r;
    odl_yolov5 *m = NULL;
    TOK(odl_yolov5_load(w, dev, &m));
    if (!m) return odl_test_finish("test_yolov5_synth");
    TCHECK(odl_yolov5_num_classes(m) == 3 && !strcmp(odl_yolov5_class_name(m, 2), "cls2"), "classes");
    printf("synthetic model: %d layers, %lld folded parameters\n", odl_yolov5_num_layers(m),
           (long long)odl_yolov5_num_params(m));
    int64_t n = 0;
    float *x = ref_read_f32(ref, "input", &n);
    TCHECK(x && n == 2 * 3 * 64 * 96, "input");
    odl_tensor *in = NULL;
    TOK(odl_yolov5_input(m, 2, 64, 96, &in));
    TOK(odl_tensor_copy_from_host(in, x, sizeof(float) * n));
    const odl_tensor *out = NULL;
    TOK(odl_yolov5_forward(m, in, &out));
    TCHECK(out && out->shape[0] == 2 && out->shape[1] == odl_yolov5_num_predictions(m, 64, 96) &&
               out->shape[1] == 3 * (8 * 12 + 4 * 6 + 2 * 3) && out->shape[2] == 8, "output shape");
    for (int i = 0; out && i < odl_yolov5_num_layers(m); i++) {
        char name[32];
        snprintf(name, sizeof name, "layer%02d", i);
        int64_t k = 0;
        float *want = ref_read_f32(ref, name, &k);
        const odl_tensor *lo = odl_yolov5_layer_output(m, i);
        TCHECK(want && lo && odl_tensor_numel(lo) == k, "%s size", name);
        if (!want || !lo || odl_tensor_numel(lo) != k) {
            free(want);
            continue;
        }
        float *got = to_host(lo);
        double rms = 0;
        for (int64_t j = 0; j < k; j++) rms += (double)want[j] * want[j];
        rms = sqrt(rms / (double)k);
        double ratio, rel, mabs;
        compare_f32(got, want, k, 1e-3 * rms, 1e-3, &ratio, &rel, &mabs);
        printf("%s %-8s %8lld values  max|d| %.3g  ratio %.3f  rel L2 %.3g\n", name, odl_yolov5_layer_type(m, i),
               (long long)k, mabs, ratio, rel);
        TCHECK(ratio <= 1.0 && rel <= 1e-4, "%s: ratio %.3f rel L2 %.3g", name, ratio, rel);
        free(got);
        free(want);
    }
    free(x);
    odl_yolov5_free(m);
    if (dev.type == ODL_DEV_CUDA) TOK(odl_cuda_shutdown()); /* no device memory left in use */
    return odl_test_finish("test_yolov5_synth");
}
