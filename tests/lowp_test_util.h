/* Shared by the tests of the lower-precision ops (test_gemm_tc.c: gemm_lowp / gemm_typed; test_conv_tc.c:
 * conv2d_*_lowp): the float32 summation bound, the unit roundoff of TF32 / BF16, a seeded generator of
 * inputs and device copies on g_dev (the CPU or CUDA device 0). Header-only, one copy per test. */
#ifndef ODL_TESTS_LOWP_TEST_UTIL_H
#define ODL_TESTS_LOWP_TEST_UTIL_H

#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "odl/device.h"
#include "odl/precision.h"
#include "test_util.h"

#define U 5.9604644775390625e-8 /* 2^-24 */
static double tol_dot(double K) {
    double a = (K + 2) * U, b = 8 * U * sqrt(K);
    return 8 * U + (a < b ? a : b);
}
static double unit_roundoff(odl_precision p) { return p == ODL_PRECISION_TF32 ? ldexp(1, -11) : ldexp(1, -8); }
static int keep_bits(odl_precision p) { return p == ODL_PRECISION_TF32 ? 10 : 7; }

static odl_device g_dev;

static uint64_t g_rs;
static double runi(double lo, double hi) {
    g_rs ^= g_rs << 13;
    g_rs ^= g_rs >> 7;
    g_rs ^= g_rs << 17;
    return lo + (hi - lo) * (double)(g_rs >> 11) * (1.0 / 9007199254740992.0);
}

static float *fgen(int64_t n, double lo, double hi) {
    float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    for (int64_t i = 0; i < n; i++) p[i] = (float)runi(lo, hi);
    return p;
}
/* A device copy of n floats at a byte offset of `shift` floats (misaligned when shift % 4 != 0). */
typedef struct dbuf {
    void *base;
    float *p;
} dbuf;
static dbuf dput(const float *x, int64_t n, int shift) {
    dbuf b = {NULL, NULL};
    size_t bytes = (size_t)(n + shift + 1) * sizeof(float);
    if (odl_mem_alloc(g_dev, bytes, &b.base) != ODL_OK) {
        TOK(ODL_E_NOMEM);
        return b;
    }
    b.p = (float *)b.base + shift;
    TOK(odl_memcpy_async(b.p, g_dev, x, odl_cpu(), (size_t)n * sizeof(float), odl_stream_current()));
    TOK(odl_device_synchronize(g_dev));
    return b;
}
static void dget(float *x, const dbuf *b, int64_t n) {
    TOK(odl_device_synchronize(g_dev));
    TOK(odl_memcpy_async(x, odl_cpu(), b->p, g_dev, (size_t)n * sizeof(float), odl_stream_current()));
    TOK(odl_device_synchronize(g_dev));
}

/* Options and device of a lowp test: `NAME [--backend cpu|cuda] [--seed N] [--quick]`; seeds g_rs, sets
 * g_dev (CUDA device 0 initialised with a fifth of its memory, or the CPU) and *quick, *have_cuda.
 * Returns -1 to go on, else the exit status: 2 on bad arguments, ODL_TEST_SKIP without a CUDA device, 1
 * when the device does not start. */
static int lowp_test_setup(const char *name, int argc, char **argv, int *quick, int *have_cuda) {
    const char *backend = "cpu";
    uint64_t seed = 0;
    *quick = odl_test_quick(argc, argv);
    *have_cuda = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            continue;
        else if (!strcmp(argv[i], "--backend") && i + 1 < argc)
            backend = argv[++i];
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
            seed = strtoull(argv[++i], NULL, 10);
        else {
            fprintf(stderr, "usage: %s [--backend cpu|cuda] [--seed N] [--quick]\n", name);
            return 2;
        }
    }
    if (!seed) seed = 0x9e3779b97f4a7c15ull ^ (uint64_t)time(NULL);
    g_rs = seed | 1;
    printf("%s: seed %" PRIu64 "\n", name, seed);
    if (!strcmp(backend, "cuda")) {
        int built = odl_cuda_built(), ndev = built ? odl_cuda_device_count() : 0;
        if (ndev <= 0) {
            printf("%s: skipped: no CUDA device (%s)\n", name, built ? "no device visible" : "CPU-only build");
            return ODL_TEST_SKIP;
        }
        odl_status st = odl_cuda_init(0, 0.2);
        if (st != ODL_OK) {
            printf("%s: FAIL: odl_cuda_init(0, 0.2): %s: %s\n", name, odl_status_str(st), odl_error_msg());
            return 1;
        }
        *have_cuda = 1;
        g_dev = odl_cuda(0);
    } else if (!strcmp(backend, "cpu")) {
        g_dev = odl_cpu();
    } else {
        fprintf(stderr, "%s: unknown backend '%s' (cpu or cuda)\n", name, backend);
        return 2;
    }
    return -1;
}

#endif
