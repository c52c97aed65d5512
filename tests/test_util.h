/* Minimal test support: checks that report file:line and count failures, a skip exit code (77, which
 * ctest reports as skipped), the reference-data folder and a few numeric helpers. Header-only so
 * that each test stays one process and one file. */
#ifndef ODL_TEST_UTIL_H
#define ODL_TEST_UTIL_H

#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "odl/device.h"
#include "odl/status.h"

#define ODL_TEST_SKIP 77

static int odl_test_failures = 0;
static int odl_test_checks = 0;

#define TCHECK(cond, ...)                                                         \
    do {                                                                          \
        odl_test_checks++;                                                        \
        if (!(cond)) {                                                            \
            odl_test_failures++;                                                  \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);        \
            fprintf(stderr, __VA_ARGS__);                                         \
            fprintf(stderr, "\n");                                                \
        }                                                                         \
    } while (0)

/* A call that must succeed; on failure prints the library's message and counts a failure. */
#define TOK(call)                                                                             \
    do {                                                                                      \
        odl_test_checks++;                                                                    \
        odl_status s_ = (call);                                                               \
        if (s_ != ODL_OK) {                                                                   \
            odl_test_failures++;                                                              \
            fprintf(stderr, "FAIL %s:%d: %s -> %s: %s\n", __FILE__, __LINE__, #call,          \
                    odl_status_str(s_), odl_error_msg());                                     \
        }                                                                                     \
    } while (0)

/* A call that must fail with `code` and leave a non-empty message. */
#define TFAIL(call, code)                                                                     \
    do {                                                                                      \
        odl_test_checks++;                                                                    \
        odl_error_clear();                                                                    \
        odl_status s_ = (call);                                                               \
        if (s_ != (code) || odl_error_msg()[0] == 0) {                                        \
            odl_test_failures++;                                                              \
            fprintf(stderr, "FAIL %s:%d: %s returned %d (%s), wanted %d, message '%s'\n",    \
                    __FILE__, __LINE__, #call, (int)s_, odl_status_str(s_), (int)(code),     \
                    odl_error_msg());                                                         \
        }                                                                                     \
    } while (0)

/* The device of a test that runs on the CPU and, as its gpu ctest entry, with `--device cuda` on CUDA
 * device 0 (its pool made with preallocate_fraction, odl_cuda_init): 0 with *dev set, or ODL_TEST_SKIP
 * after one "SKIP:" line when CUDA was asked for and there is none, or 1 when its set-up failed. */
static inline int odl_test_device(int argc, char **argv, double preallocate_fraction, odl_device *dev) {
    *dev = odl_cpu();
    if (!(argc > 2 && !strcmp(argv[1], "--device") && !strcmp(argv[2], "cuda"))) return 0;
    if (odl_cuda_device_count() == 0) {
        printf("SKIP: no CUDA device (or a CPU-only build)\n");
        return ODL_TEST_SKIP;
    }
    odl_status s = odl_cuda_init(0, preallocate_fraction);
    if (s != ODL_OK) {
        fprintf(stderr, "FAIL: odl_cuda_init: %s\n", odl_error_msg());
        return 1;
    }
    *dev = odl_cuda(0);
    return 0;
}

/* Whether a test takes its smaller sizes: `--quick` among its arguments, or ODL_TEST_QUICK set to anything but
 * "" or "0" (bench/sanitize_gpu.sh sets it: compute-sanitizer runs kernels 100x and more slower). The
 * smaller sizes keep every kind of case (each tile, loader, step kind), fewer or smaller of each. */
static inline int odl_test_quick(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--quick")) return 1;
    const char *e = getenv("ODL_TEST_QUICK");
    return e && e[0] && strcmp(e, "0") != 0;
}

/* Exit status of a test's main(). */
static inline int odl_test_finish(const char *name) {
    printf("%s: %d checks, %d failed\n", name, odl_test_checks, odl_test_failures);
    return odl_test_failures ? 1 : 0;
}

/* The reference-data folder: $ODL_TEST_DATA, else the build's default (../shared/data beside the
 * checkout), else "../shared/data". */
static inline const char *odl_test_data_dir(void) {
    const char *d = getenv("ODL_TEST_DATA");
    if (d && d[0]) return d;
    d = getenv("ODL_TEST_DATA_DEFAULT");
    if (d && d[0]) return d;
    return "../shared/data";
}

/* Path inside the data folder, in a static buffer (one at a time). */
static inline const char *odl_test_data_path(const char *rel) {
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/%s", odl_test_data_dir(), rel);
    return buf;
}

/* 1 when the reference file `rel` of the data folder exists; else prints one line saying what is
 * missing and where the data comes from (README, "Test data") and returns 0. Tests call it before
 * opening reference data, so that a checkout without ../shared/data skips (exit 77) instead of printing
 * pages of HDF5 diagnostics. */
static inline int odl_test_have_data(const char *rel) {
    const char *p = odl_test_data_path(rel);
    FILE *f = fopen(p, "rb");
    if (f) {
        fclose(f);
        return 1;
    }
    printf("SKIP: reference data %s not found (set ODL_TEST_DATA to the data folder; README, \"Test data\")\n", p);
    return 0;
}

/* main()'s exit status when the data-dependent part was skipped: failures of the rest still fail. */
static inline int odl_test_finish_skipped(const char *name) {
    int r = odl_test_finish(name);
    return r ? r : ODL_TEST_SKIP;
}

/* ||a - b|| / ||b|| in double. */
static inline double odl_rel_l2(const double *a, const double *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = a[i] - b[i];
        num += d * d;
        den += b[i] * b[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* Max over i of |a - b| / (atol + rtol * |b|); <= 1 means within tolerance. NaN counts as failing. */
static inline double odl_max_tol_ratio_f32(const float *a, const float *b, size_t n, double atol, double rtol) {
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(a[i]) != isnan(b[i])) return INFINITY;
        double r = fabs((double)a[i] - (double)b[i]) / (atol + rtol * fabs((double)b[i]));
        if (!(r <= worst)) worst = r;
    }
    return worst;
}

/* A whole file as a NUL-terminated malloc'd string, or NULL when it cannot be read. */
static inline char *odl_test_read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (b) b[fread(b, 1, (size_t)n, f)] = 0;
    fclose(f);
    return b;
}

/* A fresh directory /tmp/odl_<name>_XXXXXX for the test's files, its path in dir[cap]; 0, or -1 after
 * printing why. */
static inline int odl_test_mkdtemp(char *dir, size_t cap, const char *name) {
    snprintf(dir, cap, "/tmp/odl_%s_XXXXXX", name);
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return -1;
    }
    return 0;
}

static inline int odl_test_rmtree_writable_(const char *p, const struct stat *sb, int type, struct FTW *ftw) {
    (void)ftw;
    if (type == FTW_D || type == FTW_DNR) chmod(p, sb->st_mode | S_IRWXU);
    return 0;
}
static inline int odl_test_rmtree_remove_(const char *p, const struct stat *sb, int type, struct FTW *ftw) {
    (void)sb, (void)type, (void)ftw;
    return remove(p) == 0 ? 0 : -1;
}
/* Remove dir and everything below it, read-only directories included (tests make some to provoke
 * write errors), as `chmod -R u+w; rm -rf` would; a note on stderr when that fails. */
static inline void odl_test_rmtree(const char *dir) {
    nftw(dir, odl_test_rmtree_writable_, 16, FTW_PHYS);
    if (nftw(dir, odl_test_rmtree_remove_, 16, FTW_DEPTH | FTW_PHYS) != 0) fprintf(stderr, "note: could not remove %s\n", dir);
}

/* odl_test_finish for a test whose files are in dir (from odl_test_mkdtemp): dir removed when every check
 * passed, kept and named when one failed. A folder of its own per run, not a fixed one in the build: two
 * runs of one test at once (ctest -j with its CPU and CUDA variants, compute-sanitizer's tools side by side
 * in bench/sanitize_gpu.sh) wrote each other's files (2026-12-08: eval_coco8_gpu under initcheck read the
 * metrics.json that its memcheck run had just written). */
static inline int odl_test_finish_in(const char *name, const char *dir) {
    if (odl_test_failures)
        printf("%s: its files are kept in %s\n", name, dir);
    else
        odl_test_rmtree(dir);
    return odl_test_finish(name);
}

#endif
