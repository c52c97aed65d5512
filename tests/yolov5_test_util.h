/* Helpers of the YOLOv5 tests: a small JSON reader (for the reference detections and odl_worker's
 * detections.json), reading reference tensors from HDF5, the converted weights' path and the device
 * chosen by argv ("cpu" or "cuda"; a cuda run exits 77 where no GPU is present). Header-only, one test
 * per process. */
#ifndef ODL_YOLOV5_TEST_UTIL_H
#define ODL_YOLOV5_TEST_UTIL_H

#include <hdf5.h>
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
/* JSON                                                                                           */
/* ---------------------------------------------------------------------------------------------- */
typedef enum { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ } jtype;
typedef struct jval {
    jtype t;
    double num;
    char *str;          /* J_STR */
    int n;              /* J_ARR / J_OBJ count */
    struct jval *items; /* J_ARR / J_OBJ values */
    char **keys;        /* J_OBJ keys */
} jval;

typedef struct jparser {
    const char *s;
    size_t i, n;
    int err;
} jparser;

static void j_ws(jparser *p) {
    while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\n' || p->s[p->i] == '\t' || p->s[p->i] == '\r')) p->i++;
}
static int j_parse(jparser *p, jval *v);
static char *j_string(jparser *p) {
    if (p->s[p->i] != '"') { p->err = 1; return NULL; }
    p->i++;
    size_t cap = 16, k = 0;
    char *o = malloc(cap);
    while (p->i < p->n && p->s[p->i] != '"') {
        char c = p->s[p->i++];
        if (c == '\\' && p->i < p->n) {
            char e = p->s[p->i++];
            if (e == 'n') c = '\n';
            else if (e == 't') c = '\t';
            else if (e == 'u') { c = '?'; p->i += 4; }
            else c = e;
        }
        if (k + 2 > cap) o = realloc(o, cap *= 2);
        o[k++] = c;
    }
    if (p->i >= p->n) p->err = 1;
    p->i++;
    o[k] = 0;
    return o;
}
static int j_parse(jparser *p, jval *v) {
    memset(v, 0, sizeof *v);
    j_ws(p);
    if (p->i >= p->n) return p->err = 1;
    char c = p->s[p->i];
    if (c == '{' || c == '[') {
        int obj = c == '{';
        v->t = obj ? J_OBJ : J_ARR;
        p->i++;
        int cap = 0;
        j_ws(p);
        if (p->s[p->i] == (obj ? '}' : ']')) { p->i++; return 0; }
        for (;;) {
            if (v->n == cap) {
                cap = cap ? cap * 2 : 8;
                v->items = realloc(v->items, sizeof(jval) * cap);
                if (obj) v->keys = realloc(v->keys, sizeof(char *) * cap);
            }
            j_ws(p);
            if (obj) {
                v->keys[v->n] = j_string(p);
                j_ws(p);
                if (p->err || p->s[p->i] != ':') return p->err = 1;
                p->i++;
            }
            if (j_parse(p, &v->items[v->n])) return 1;
            v->n++;
            j_ws(p);
            if (p->s[p->i] == ',') { p->i++; continue; }
            if (p->s[p->i] == (obj ? '}' : ']')) { p->i++; return 0; }
            return p->err = 1;
        }
    }
    if (c == '"') {
        v->t = J_STR;
        v->str = j_string(p);
        return p->err;
    }
    if (!strncmp(p->s + p->i, "true", 4)) { v->t = J_BOOL; v->num = 1; p->i += 4; return 0; }
    if (!strncmp(p->s + p->i, "false", 5)) { v->t = J_BOOL; p->i += 5; return 0; }
    if (!strncmp(p->s + p->i, "null", 4)) { v->t = J_NULL; p->i += 4; return 0; }
    char *e;
    v->t = J_NUM;
    v->num = strtod(p->s + p->i, &e);
    if (e == p->s + p->i) return p->err = 1;
    p->i = (size_t)(e - p->s);
    return 0;
}
static inline void j_free(jval *v) {
    if (!v) return;
    for (int i = 0; i < v->n; i++) {
        j_free(&v->items[i]);
        if (v->keys) free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->str);
    memset(v, 0, sizeof *v);
}
/* Parse a whole file; returns 0 on success. */
static inline int j_load(const char *path, jval *out) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    size_t got = fread(b, 1, (size_t)n, f);
    fclose(f);
    b[got] = 0;
    jparser p = {b, 0, got, 0};
    int r = j_parse(&p, out);
    free(b);
    return r || p.err ? -1 : 0;
}
static inline const jval *j_get(const jval *o, const char *key) {
    if (!o || o->t != J_OBJ) return NULL;
    for (int i = 0; i < o->n; i++)
        if (!strcmp(o->keys[i], key)) return &o->items[i];
    return NULL;
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

/* The converted weights: $ODL_YOLOV5_WEIGHTS, else $ODL_BINARY_DIR/yolov5n.h5 (written by the
 * yolov5_convert fixture). NULL (with a message) when absent. */
static inline const char *yolo_weights_path(void) {
    static char buf[4096];
    const char *e = getenv("ODL_YOLOV5_WEIGHTS");
    if (e && e[0]) snprintf(buf, sizeof buf, "%s", e);
    else snprintf(buf, sizeof buf, "%s/yolov5n.h5", getenv("ODL_BINARY_DIR") ? getenv("ODL_BINARY_DIR") : ".");
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
