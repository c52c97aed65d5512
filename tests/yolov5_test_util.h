/* Helpers of the YOLOv5 tests: JSON through jansson (the reference detections and odl_worker's
 * detections.json), reading reference tensors from HDF5, the converted weights' path and the device
 * chosen by argv ("cpu" or "cuda"; a cuda run exits 77 where no GPU is present). Header-only, one test
 * per process. */
#ifndef ODL_YOLOV5_TEST_UTIL_H
#define ODL_YOLOV5_TEST_UTIL_H

#include <hdf5.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "odl/device.h"
#include "odl/image.h"
#include "odl/nms.h"
#include "odl/yolov5.h"
#include "test_util.h"

/* ---------------------------------------------------------------------------------------------- */
/* JSON: through jansson, as the library writes it                                                */
/* ---------------------------------------------------------------------------------------------- */

/* The whole file (a new reference; json_decref it), or NULL with "file:line:col: reason" printed. */
static inline json_t *j_load(const char *path) {
    json_error_t e;
    json_t *v = json_load_file(path, JSON_REJECT_DUPLICATES, &e);
    if (!v) fprintf(stderr, "%s:%d:%d: %s\n", path, e.line, e.column, e.text);
    return v;
}
/* Member `key` of an object; NULL when o is NULL, not an object or has no such member. */
static inline json_t *j_get(const json_t *o, const char *key) { return json_object_get(o, key); }
/* Element i of an array as a number; NaN when absent or not a number. */
static inline double j_at(const json_t *a, size_t i) {
    const json_t *v = json_array_get(a, i);
    return json_is_number(v) ? json_number_value(v) : NAN;
}
/* Member `key` as a number; NaN when absent or not a number. */
static inline double j_num(const json_t *o, const char *key) {
    const json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* ---------------------------------------------------------------------------------------------- */
/* Data                                                                                           */
/* ---------------------------------------------------------------------------------------------- */

/* Read a float dataset of the reference file into a malloc'd float array (NULL on failure). */
static inline float *ref_read_f32(const char *file, const char *name, int64_t *numel) {
    hid_t f = H5Fopen(file, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) return NULL;
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    if (d < 0) { H5Fclose(f); return NULL; }
    hid_t sp = H5Dget_space(d);
    hssize_t n = H5Sget_simple_extent_npoints(sp);
    float *buf = malloc(sizeof(float) * (size_t)n);
    if (H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) { free(buf); buf = NULL; }
    if (numel) *numel = (int64_t)n;
    H5Sclose(sp);
    H5Dclose(d);
    H5Fclose(f);
    return buf;
}

/* The converted weights the test is given: its last --weights=PATH argument (the tests/ cmake files pass
 * BUILD/yolov5n.h5, written by the yolov5_convert fixture), else $ODL_YOLOV5_WEIGHTS; never a file of the
 * working folder, so that the test runs the same from anywhere (bench/sanitize_gpu.sh). NULL (with a
 * SKIP line) when none is given or the file is absent. */
static inline const char *yolo_weights_path(int argc, char **argv) {
    static char buf[4096];
    buf[0] = 0;
    for (int i = 1; i < argc; i++)
        if (!strncmp(argv[i], "--weights=", 10)) snprintf(buf, sizeof buf, "%s", argv[i] + 10);
    const char *e = getenv("ODL_YOLOV5_WEIGHTS");
    if (!buf[0] && e && e[0]) snprintf(buf, sizeof buf, "%s", e);
    if (!buf[0]) {
        printf("SKIP: no weights given (--weights=PATH or ODL_YOLOV5_WEIGHTS; the yolov5_convert test writes "
               "BUILD/yolov5n.h5)\n");
        return NULL;
    }
    struct stat sb;
    if (stat(buf, &sb) != 0) {
        printf("SKIP: no converted weights at %s (the yolov5_convert test writes them; it needs a python3 with h5py)\n", buf);
        return NULL;
    }
    return buf;
}

/* Device from argv[1]: "cpu" (default) or "cuda". Returns 0, or ODL_TEST_SKIP when CUDA is asked for
 * and none is usable, or 1 on failure. */
static inline int yolo_test_device(int argc, char **argv, odl_device *dev) {
    *dev = odl_cpu();
    if (argc > 1 && !strcmp(argv[1], "cuda")) {
        if (odl_cuda_device_count() < 1) {
            printf("SKIP: no CUDA device (%s)\n", odl_cuda_built() ? "no GPU or driver" : "CPU-only build");
            return ODL_TEST_SKIP;
        }
        if (odl_cuda_init(0, 0.5) != ODL_OK) {
            fprintf(stderr, "odl_cuda_init: %s\n", odl_error_msg());
            return 1;
        }
        *dev = odl_cuda(0);
    }
    return 0;
}

/* A YOLOv5 test's start: the weights (yolo_weights_path) and the reference files `data` of the data folder
 * (NULL-terminated, may be NULL; odl_test_have_data) first -- a skip or a failure after the device is set
 * up would leave its pool allocated (memcheck's leak: 2.6 GB, 2026-12-07, a sanitizer run without the test
 * data) -- then the device (yolo_test_device). 0, ODL_TEST_SKIP or 1. */
static inline int yolo_test_start(int argc, char **argv, const char *const *data, const char **wpath, odl_device *dev) {
    *wpath = yolo_weights_path(argc, argv);
    if (!*wpath) return ODL_TEST_SKIP;
    for (; data && *data; data++)
        if (!odl_test_have_data(*data)) return ODL_TEST_SKIP;
    return yolo_test_device(argc, argv, dev);
}

/* Copy a device tensor to a malloc'd host float array. */
static inline float *to_host(const odl_tensor *t) {
    size_t nb = odl_tensor_nbytes(t);
    float *h = malloc(nb ? nb : 1);
    if (odl_tensor_copy_to_host(t, h, nb) != ODL_OK) {
        fprintf(stderr, "copy to host: %s\n", odl_error_msg());
        free(h);
        return NULL;
    }
    return h;
}

/* Max |a - b| / (atol + rtol |b|) and the relative L2 error, in double. */
static inline void compare_f32(const float *a, const float *b, int64_t n, double atol, double rtol, double *ratio,
                        double *rel_l2, double *max_abs) {
    double num = 0, den = 0, worst = 0, ma = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (isnan(a[i]) || isnan(b[i])) d = INFINITY;
        double r = d / (atol + rtol * fabs((double)b[i]));
        if (!(r <= worst)) worst = r;
        if (!(d <= ma)) ma = d;
        num += d * d;
        den += (double)b[i] * b[i];
    }
    *ratio = worst;
    *rel_l2 = den > 0 ? sqrt(num / den) : sqrt(num);
    *max_abs = ma;
}

#endif
