/* test_conv_tc: odl_backend.conv2d_{fwd,bwd_data,bwd_weight}_lowp (TF32 and BF16 operands, float32
 * accumulation: the tensor-core convolutions of kernels/cuda/conv2d_tc.cu and their CPU twin
 * kernels/cpu/conv2d_lowp.c) against the float64 reference of tests/ops_ref.c.
 *
 *   test_conv_tc [--backend cpu|cuda] [--seed N] [--quick]
 *
 * --quick (or ODL_TEST_QUICK=1): the cases of at most 2^24 multiply-adds per pass (for compute-sanitizer;
 * every tile, loader and split-K path is still taken).
 *
 * Each case (channels 1, 3, 5, 8, 33, 64; strides 1 and 2, unequal ones; padding; 1x1, 3x3, 5x5, 6x6 and even
 * kernels; H, W not multiples of any tile; shapes that take each tile of conv2d_tc.cu and split-K) runs
 * forward (bias, activation, residual as the case says), bwd_data and bwd_weight with db, in TF32 and
 * BF16, inputs fresh from the seed, outputs poisoned with NaN. With u_p the unit roundoff of one input
 * rounding (tf32 2^-11, bf16 2^-8), K the pass's reduction length (C*R*S, K*R*S, N*P*Q) and dot(K) the
 * float32 summation bound of test_ops (8u + min((K+2)u, 8u sqrt(K)), u = 2^-24), per output element:
 *   out      vs the float64 result of the float32 inputs: |got - ref| / mag <= (2u_p + u_p^2)(1 + dot(K)) + dot(K)
 *            (mag: the reference's magnitude bound, sum of |terms| + |bias| + |residual| with the
 *            activation's Lipschitz constant)
 *   out.rnd  vs the float64 result of the inputs rounded by odl_round_mantissa: <= dot(K), or the float32
 *            result itself within dot(K) where the backend has no lower-precision kernel (odl/backend.h:
 *            CUDA bwd_weight with C*R*S <= 16), or, where the backend's TF32 rounds toward zero (the wgmma
 *            kernels of compute capability 9.0: odl_backend.tf32_rounding), the result of the inputs
 *            truncated by odl_trunc_mantissa (then u_p is 2^-10 in the bound above). Each proves that the
 *            inputs were rounded to nearest even, toward zero where the device does, or not at all.
 *   lowp     short reductions show an error above 4 dot(K): the inputs were rounded at all
 *   db       vs the float64 sum of the float32 dy: <= dot(N*P*Q) (db is never rounded)
 * and: odl_conv2d_fwd / odl_conv2d_bwd follow odl_set_matmul_precision (bit for bit the op table's lowp
 * entry, and the float32 entry for fp32); the inputs are unchanged; a batch of 0 gives dw = db = 0; bwd_data
 * with relu_x = x (and odl_conv2d_relu_bwd) gives the bits of dx with 0 wherever x <= 0, x holding exact zeros
 * (every kernel path of each case, float32 included).
 */
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "odl/backend.h"
#include "odl/device.h"
#include "odl/env.h"
#include "odl/ops.h"
#include "odl/precision.h"
#include "odl/tensor.h"
#include "lowp_test_util.h"
#include "ops_ref.h"
#include "test_util.h"

static const odl_backend *g_be;
static int g_tf32_trunc; /* the backend's TF32 may round toward zero (odl_backend.tf32_rounding) */

typedef struct conv_case {
    int N, C, H, W, K, R, S, sh, sw, ph, pw;
    int bias, res;
    odl_act act;
    const char *tag;
} conv_case;

static const conv_case CASES[] = {
    {1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 0, ODL_ACT_NONE, "1x1x1"},
    {2, 3, 13, 29, 5, 3, 3, 1, 1, 1, 1, 1, 1, ODL_ACT_SILU, "C3 K5"},
    {1, 5, 17, 17, 3, 3, 3, 2, 2, 1, 1, 0, 0, ODL_ACT_RELU, "C5 stride 2"},
    {2, 3, 13, 29, 4, 5, 5, 2, 2, 2, 2, 1, 0, ODL_ACT_SIGMOID, "5x5 stride 2"},
    {1, 33, 7, 9, 7, 1, 1, 1, 1, 0, 0, 1, 1, ODL_ACT_NONE, "1x1 C33"},
    {2, 3, 64, 48, 16, 6, 6, 2, 2, 2, 2, 1, 0, ODL_ACT_SILU, "yolov5 stem 6x6"},
    {4, 1, 28, 28, 32, 3, 3, 1, 1, 0, 0, 1, 0, ODL_ACT_RELU, "mnist conv1"},
    {4, 32, 26, 26, 64, 3, 3, 1, 1, 0, 0, 1, 0, ODL_ACT_RELU, "mnist conv2"},
    {64, 32, 26, 26, 64, 3, 3, 1, 1, 0, 0, 1, 0, ODL_ACT_RELU, "mnist conv2 N64 (64x256 tiles)"},
    {24, 16, 21, 23, 20, 3, 3, 1, 1, 1, 1, 1, 1, ODL_ACT_SILU, "K20 (32x256 tiles)"},
    {1, 64, 12, 12, 96, 3, 3, 1, 1, 1, 1, 1, 0, ODL_ACT_SILU, "K96 few pixels (64x128, split-K)"},
    {1, 33, 5, 3, 65, 3, 3, 1, 1, 1, 1, 1, 0, ODL_ACT_SIGMOID, "K65 C33"},
    {3, 2, 4, 4, 2, 3, 3, 1, 1, 2, 2, 1, 0, ODL_ACT_NONE, "pad > kernel/2"},
    {2, 3, 11, 13, 4, 3, 5, 1, 2, 2, 0, 1, 1, ODL_ACT_RELU, "unequal strides and pads"},
    {1, 2, 9, 6, 3, 2, 4, 2, 1, 0, 1, 0, 0, ODL_ACT_SILU, "even kernel"},
    {1, 129, 3, 3, 1, 3, 3, 1, 1, 1, 1, 1, 0, ODL_ACT_NONE, "C129 K1"},
    {2, 8, 9, 11, 40, 3, 3, 1, 1, 1, 1, 1, 0, ODL_ACT_RELU, "C8 K40 (NHWC: taps across a row)"},
    {1, 64, 40, 40, 128, 3, 3, 2, 2, 1, 1, 1, 0, ODL_ACT_SILU, "yolov5 down 64->128"},
    /* the window patch: rows of 202 (patch 534 rows: one buffer for its two TF32 slabs), taps of 2 x 3 */
    {2, 40, 5, 200, 8, 2, 3, 1, 1, 1, 1, 1, 1, ODL_ACT_SILU, "C40 W200 (one patch buffer)"},
};
#define N_CASES ((int)(sizeof CASES / sizeof CASES[0]))

static odl_conv2d_shape shape_of(const conv_case *c) {
    odl_conv2d_shape s = {c->N, c->C, c->H, c->W, c->K, c->R, c->S, c->sh, c->sw, c->ph, c->pw, 0, 0};
    s.P = odl_conv_out_size(c->H, c->R, c->sh, c->ph);
    s.Q = odl_conv_out_size(c->W, c->S, c->sw, c->pw);
    return s;
}

/* x as float64: unchanged (r = 0), rounded to `keep` mantissa bits to nearest even (r = 1) or toward zero
 * (r = 2). */
static double *to_f64(const float *x, int64_t n, int keep, int r) {
    double *d = malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
    for (int64_t i = 0; i < n; i++)
        d[i] = r == 0 ? (double)x[i] : r == 1 ? (double)odl_round_mantissa(x[i], keep) : (double)odl_trunc_mantissa(x[i], keep);
    return d;
}

#define NREF 3 /* the references: float32 inputs, rounded to nearest even, truncated (TF32 toward zero only) */

static float *nan_buf(int64_t n) {
    float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    for (int64_t i = 0; i < n; i++) p[i] = NAN;
    return p;
}

/* Largest |got - ref| / mag over n outputs (infinity for a non-finite output). */
static double max_err(const float *got, const double *ref, const double *mag, int64_t n) {
    double e = 0;
    for (int64_t i = 0; i < n; i++) {
        const double d = isfinite(got[i]) ? fabs(got[i] - ref[i]) / (mag[i] + 1e-300) : INFINITY;
        if (d > e) e = d;
    }
    return e;
}

/* Frees the device copies of n dbufs (those never allocated have no base). */
static void dfree_all(const dbuf *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (b[i].base) odl_mem_free(g_dev, b[i].base);
}

static int g_low_seen;

/* The checks of the file comment for one pass's output against its two references. */
static void check_pass(const conv_case *c, int idx, odl_precision prec, const char *pass, double K, const float *got,
                       double *const ref[NREF], double *const mag[NREF], int64_t n) {
    const double up = unit_roundoff(prec) * (ref[2] ? 2 : 1), td = tol_dot(K);
    const double tol = (2 * up + up * up) * (1 + td) + td;
    const double e0 = max_err(got, ref[0], mag[0], n), e1 = max_err(got, ref[1], mag[1], n);
    const double e2 = ref[2] ? max_err(got, ref[2], mag[2], n) : INFINITY;
    const double erd = fmin(e0, fmin(e1, e2));
    const int ok = e0 <= tol && erd <= td;
    printf("%-4s %-4s %-10s N%d C%d %dx%d K%d %dx%d s%d,%d p%d,%d %-32s  %.2e <= %.2e   rnd %.2e <= %.2e  %s\n",
           g_be->name, odl_precision_name(prec), pass, c->N, c->C, c->H, c->W, c->K, c->R, c->S, c->sh, c->sw, c->ph,
           c->pw, c->tag, e0, tol, erd, td, ok ? "ok" : "FAIL");
    TCHECK(e0 <= tol, "case %d %s %s: error %.3e above %.3e", idx, odl_precision_name(prec), pass, e0, tol);
    TCHECK(erd <= td,
           "case %d %s %s: %.3e from the rounded inputs' result, %.3e from the truncated, %.3e from the float32 one, "
           "above %.3e",
           idx, odl_precision_name(prec), pass, e1, e2, e0, td);
    if (K >= 16 && K <= 300 && n >= 64) {
        TCHECK(e0 > 4 * td, "case %d %s %s: error %.3e within float32's %.3e: were the inputs rounded?", idx,
               odl_precision_name(prec), pass, e0, td);
        g_low_seen++;
    }
}

static void free_refs(double *a[NREF]) {
    for (int r = 0; r < NREF; r++) free(a[r]);
}

/* The BF16 weight gradient again with ODL_CONV_WGRAD_BF16_STAGE the other way (compute capability 9.0's wgmma
 * kernel: operands rounded in shared memory or into copies first; elsewhere no difference): dw bit for bit
 * dw0, db within the float32 bound of either way's sums. The environment is put back. */
static void bf16_wgrad_both_ways(const odl_conv2d_shape *s, const float *x, const float *dy, const float *dw0,
                                 const double *bref, const double *bmag, int idx) {
    const int64_t nw = (int64_t)s->K * s->C * s->R * s->S;
    const int stage = odl_env_bool(ODL_ENV_CONV_WGRAD_BF16_STAGE);
    const char *cur = getenv("ODL_CONV_WGRAD_BF16_STAGE");
    char *was = cur ? strdup(cur) : NULL;
    setenv("ODL_CONV_WGRAD_BF16_STAGE", stage ? "0" : "1", 1);
    TOK(odl_env_reload());
    float *dw1 = nan_buf(nw), *db1 = nan_buf(s->K);
    dbuf dDW1 = dput(dw1, nw, 0), dDB1 = dput(db1, s->K, 0);
    TOK(g_be->conv2d_bwd_weight_lowp(s, x, dy, dDW1.p, dDB1.p, ODL_PRECISION_BF16));
    dget(dw1, &dDW1, nw);
    dget(db1, &dDB1, s->K);
    int64_t nbad = 0;
    for (int64_t i = 0; i < nw; i++) nbad += memcmp(&dw1[i], &dw0[i], sizeof(float)) != 0;
    TCHECK(nbad == 0, "case %d bf16 bwd_weight with ODL_CONV_WGRAD_BF16_STAGE=%d: %" PRId64 " of %" PRId64
                      " elements not the bits of =%d's", idx, !stage, nbad, nw, stage);
    const double eb = max_err(db1, bref, bmag, s->K), tb = tol_dot((double)s->N * s->P * s->Q);
    TCHECK(eb <= tb, "case %d bf16 db with ODL_CONV_WGRAD_BF16_STAGE=%d: error %.3e above %.3e", idx, !stage, eb, tb);
    if (was) setenv("ODL_CONV_WGRAD_BF16_STAGE", was, 1);
    else unsetenv("ODL_CONV_WGRAD_BF16_STAGE");
    TOK(odl_env_reload());
    free(was);
    dbuf all[] = {dDW1, dDB1};
    dfree_all(all, 2);
    free(dw1);
    free(db1);
}

static void run_case(const conv_case *c, int idx, odl_precision prec) {
    const odl_conv2d_shape s = shape_of(c);
    const int keep = keep_bits(prec);
    const int64_t nx = (int64_t)s.N * s.C * s.H * s.W, nw = (int64_t)s.K * s.C * s.R * s.S;
    const int64_t ny = (int64_t)s.N * s.K * s.P * s.Q;
    float *x = fgen(nx, -1, 1), *w = fgen(nw, -1, 1), *dy = fgen(ny, -1, 1);
    float *bias = c->bias ? fgen(s.K, -1, 1) : NULL, *res = c->res ? fgen(ny, -1, 1) : NULL;
    for (int64_t i = 5; i < nx; i += 11) x[i] = 0.0f; /* the ReLU's gate at exactly 0 (relu_x below) */
    double *ref[NREF] = {0}, *mag[NREF] = {0}, *dref[NREF] = {0}, *dmag[NREF] = {0}, *wref[NREF] = {0};
    double *wmag[NREF] = {0}, *bref = malloc((size_t)s.K * sizeof(double));
    double *bmag = malloc((size_t)s.K * sizeof(double));
    const int nref = prec == ODL_PRECISION_TF32 && g_tf32_trunc ? 3 : 2;
    for (int r = 0; r < nref; r++) {
        double *x64 = to_f64(x, nx, keep, r), *w64 = to_f64(w, nw, keep, r), *dy64 = to_f64(dy, ny, keep, r);
        double *b64 = bias ? to_f64(bias, s.K, 0, 0) : NULL, *res64 = res ? to_f64(res, ny, 0, 0) : NULL;
        ref[r] = malloc((size_t)ny * sizeof(double));
        mag[r] = malloc((size_t)ny * sizeof(double));
        dref[r] = malloc((size_t)nx * sizeof(double));
        dmag[r] = malloc((size_t)nx * sizeof(double));
        wref[r] = malloc((size_t)nw * sizeof(double));
        wmag[r] = malloc((size_t)nw * sizeof(double));
        ref_conv2d_fwd(&s, x64, w64, b64, res64, c->act, ref[r], mag[r]);
        ref_conv2d_bwd_data(&s, dy64, w64, dref[r], dmag[r]);
        ref_conv2d_bwd_weight(&s, x64, dy64, wref[r], r ? NULL : bref, wmag[r], r ? NULL : bmag);
        free(x64);
        free(w64);
        free(dy64);
        free(b64);
        free(res64);
    }

    float *y0 = nan_buf(ny), *dx0 = nan_buf(nx), *dw0 = nan_buf(nw), *db0 = nan_buf(s.K);
    dbuf dX = dput(x, nx, 0), dW = dput(w, nw, 0), dDY = dput(dy, ny, 0);
    dbuf dB = {0}, dR = {0};
    if (bias) dB = dput(bias, s.K, 0);
    if (res) dR = dput(res, ny, 0);
    dbuf dY = dput(y0, ny, 0), dDX = dput(dx0, nx, 0), dDW = dput(dw0, nw, 0), dDB = dput(db0, s.K, 0);
    odl_epilogue ep;
    memset(&ep, 0, sizeof ep);
    ep.bias = dB.p;
    ep.bias_per_row = 1;
    ep.residual = dR.p;
    ep.act = c->act;
    TOK(g_be->conv2d_fwd_lowp(&s, dX.p, dW.p, &ep, dY.p, prec));
    TOK(g_be->conv2d_bwd_data_lowp(&s, dDY.p, dW.p, NULL, dDX.p, prec));
    TOK(g_be->conv2d_bwd_weight_lowp(&s, dX.p, dDY.p, dDW.p, dDB.p, prec));
    dget(y0, &dY, ny);
    dget(dx0, &dDX, nx);
    /* with relu_x = x (a ReLU's output below this convolution): the bits of dx, 0 where x <= 0 */
    float *dxr = nan_buf(nx);
    dbuf dDXR = dput(dxr, nx, 0);
    TOK(g_be->conv2d_bwd_data_lowp(&s, dDY.p, dW.p, dX.p, dDXR.p, prec));
    dget(dxr, &dDXR, nx);
    int64_t nbad = 0, first = -1;
    for (int64_t i = 0; i < nx; i++) {
        const float want = x[i] <= 0.0f ? 0.0f : dx0[i];
        if (memcmp(&want, &dxr[i], sizeof want) != 0 && nbad++ == 0) first = i;
    }
    TCHECK(nbad == 0, "case %d %s bwd_data relu_x: %" PRId64 " of %" PRId64 " elements not dx gated by x > 0 (first %" PRId64 ")",
           idx, odl_precision_name(prec), nbad, nx, first);
    if (prec == ODL_PRECISION_TF32) { /* the float32 entry's too (its kernels' 4-wide and scalar stores) */
        float *dxf = nan_buf(nx);
        TOK(g_be->conv2d_bwd_data(&s, dDY.p, dW.p, NULL, dDXR.p));
        dget(dxf, &dDXR, nx);
        TOK(g_be->conv2d_bwd_data(&s, dDY.p, dW.p, dX.p, dDXR.p));
        dget(dxr, &dDXR, nx);
        nbad = 0;
        for (int64_t i = 0; i < nx; i++) {
            const float want = x[i] <= 0.0f ? 0.0f : dxf[i];
            if (memcmp(&want, &dxr[i], sizeof want) != 0 && nbad++ == 0) first = i;
        }
        TCHECK(nbad == 0, "case %d fp32 bwd_data relu_x: %" PRId64 " of %" PRId64 " elements not dx gated by x > 0 (first %" PRId64 ")",
               idx, nbad, nx, first);
        free(dxf);
    }
    free(dxr);
    dget(dw0, &dDW, nw);
    dget(db0, &dDB, s.K);
    if (prec == ODL_PRECISION_BF16) bf16_wgrad_both_ways(&s, dX.p, dDY.p, dw0, bref, bmag, idx);

    check_pass(c, idx, prec, "fwd", (double)s.C * s.R * s.S, y0, ref, mag, ny);
    check_pass(c, idx, prec, "bwd_data", (double)s.K * s.R * s.S, dx0, dref, dmag, nx);
    check_pass(c, idx, prec, "bwd_weight", (double)s.N * s.P * s.Q, dw0, wref, wmag, nw);
    const double eb = max_err(db0, bref, bmag, s.K), tb = tol_dot((double)s.N * s.P * s.Q);
    TCHECK(eb <= tb, "case %d %s db: error %.3e above %.3e (db is the float32 dy's)", idx, odl_precision_name(prec), eb,
           tb);
    float *back = malloc((size_t)(nx > ny ? nx : ny) * sizeof(float));
    dget(back, &dX, nx);
    TCHECK(memcmp(back, x, (size_t)nx * sizeof(float)) == 0, "case %d: x was modified", idx);
    dget(back, &dDY, ny);
    TCHECK(memcmp(back, dy, (size_t)ny * sizeof(float)) == 0, "case %d: dy was modified", idx);
    free(back);

    dbuf all[] = {dX, dW, dDY, dB, dR, dY, dDX, dDW, dDB, dDXR};
    dfree_all(all, sizeof all / sizeof all[0]);
    free_refs(ref);
    free_refs(mag);
    free_refs(dref);
    free_refs(dmag);
    free_refs(wref);
    free_refs(wmag);
    free(bref);
    free(bmag);
    free(x);
    free(w);
    free(dy);
    free(bias);
    free(res);
    free(y0);
    free(dx0);
    free(dw0);
    free(db0);
}

/* A batch of 0 images: the weight gradient is an empty sum, dw and db exactly zero (they start as NaN), in
 * each precision (on a 9.0 device the TF32 one is the wgmma kernel's split over no pixels). */
static void test_empty_batch(void) {
    const conv_case c = {0, 32, 8, 8, 64, 3, 3, 1, 1, 1, 1, 0, 0, ODL_ACT_NONE, "empty batch"};
    const odl_conv2d_shape s = shape_of(&c);
    const int64_t nw = (int64_t)s.K * s.C * s.R * s.S;
    float *w0 = nan_buf(nw), *b0 = nan_buf(s.K);
    for (int pi = 0; pi < 2; pi++) {
        const odl_precision prec = pi ? ODL_PRECISION_BF16 : ODL_PRECISION_TF32;
        dbuf dX = dput(w0, 0, 0), dDY = dput(w0, 0, 0), dDW = dput(w0, nw, 0), dDB = dput(b0, s.K, 0);
        TOK(g_be->conv2d_bwd_weight_lowp(&s, dX.p, dDY.p, dDW.p, dDB.p, prec));
        float *dw = nan_buf(nw), *db = nan_buf(s.K);
        dget(dw, &dDW, nw);
        dget(db, &dDB, s.K);
        int64_t bad = 0;
        for (int64_t i = 0; i < nw; i++) bad += dw[i] != 0.0f;
        for (int i = 0; i < s.K; i++) bad += db[i] != 0.0f;
        TCHECK(bad == 0, "%s empty batch: %lld of dw, db not zero", odl_precision_name(prec), (long long)bad);
        dbuf all[] = {dX, dDY, dDW, dDB};
        dfree_all(all, sizeof all / sizeof all[0]);
        free(dw);
        free(db);
    }
    free(w0);
    free(b0);
}

/* A float32 tensor on g_dev with the given shape, filled from host (NULL: NaN). */
static void tensor_put(odl_tensor *t, int ndim, const int64_t *shape, const float *host) {
    memset(t, 0, sizeof *t);
    TOK(odl_tensor_alloc(t, g_dev, ODL_F32, ndim, shape));
    const int64_t n = odl_tensor_numel(t);
    float *tmp = host ? NULL : nan_buf(n);
    if (t->data) {
        TOK(odl_memcpy_async(t->data, g_dev, host ? host : tmp, odl_cpu(), (size_t)n * sizeof(float),
                             odl_stream_current()));
        TOK(odl_device_synchronize(g_dev));
    }
    free(tmp);
}

static int same_as(const odl_tensor *t, const float *want) {
    const int64_t n = odl_tensor_numel(t);
    float *got = malloc((size_t)n * sizeof(float));
    TOK(odl_device_synchronize(g_dev));
    TOK(odl_memcpy_async(got, odl_cpu(), t->data, g_dev, (size_t)n * sizeof(float), odl_stream_current()));
    TOK(odl_device_synchronize(g_dev));
    const int same = memcmp(got, want, (size_t)n * sizeof(float)) == 0;
    free(got);
    return same;
}

/* odl_conv2d_fwd / odl_conv2d_bwd in each matmul precision give the op table's entry for it, bit for bit. */
static void test_routing(void) {
    const conv_case c = {2, 8, 10, 10, 12, 3, 3, 1, 1, 1, 1, 1, 0, ODL_ACT_RELU, "routing"};
    const odl_conv2d_shape s = shape_of(&c);
    const int64_t xs[4] = {s.N, s.C, s.H, s.W}, wsh[4] = {s.K, s.C, s.R, s.S}, ys[4] = {s.N, s.K, s.P, s.Q};
    const int64_t ks = s.K, nx = xs[0] * xs[1] * xs[2] * xs[3], nw = wsh[0] * wsh[1] * wsh[2] * wsh[3];
    const int64_t ny = ys[0] * ys[1] * ys[2] * ys[3];
    float *x = fgen(nx, -1, 1), *w = fgen(nw, -1, 1), *dy = fgen(ny, -1, 1), *b = fgen(s.K, -1, 1);
    odl_tensor tx, tw, tdy, tb, ty, tdx, tdw, tdb;
    tensor_put(&tx, 4, xs, x);
    tensor_put(&tw, 4, wsh, w);
    tensor_put(&tdy, 4, ys, dy);
    tensor_put(&tb, 1, &ks, b);
    tensor_put(&ty, 4, ys, NULL);
    tensor_put(&tdx, 4, xs, NULL);
    tensor_put(&tdw, 4, wsh, NULL);
    tensor_put(&tdb, 1, &ks, NULL);
    float *want_y = nan_buf(ny), *want_dx = nan_buf(nx), *want_dw = nan_buf(nw), *want_db = nan_buf(s.K);
    dbuf e_y = dput(want_y, ny, 0), e_dx = dput(want_dx, nx, 0), e_dw = dput(want_dw, nw, 0);
    dbuf e_db = dput(want_db, s.K, 0);
    const odl_precision saved = odl_matmul_precision();
    for (int p = 0; p < 3 && tx.data && tdb.data; p++) {
        const odl_precision prec = (odl_precision)p;
        odl_epilogue ep;
        memset(&ep, 0, sizeof ep);
        ep.bias = tb.data;
        ep.bias_per_row = 1;
        ep.act = c.act;
        if (prec == ODL_PRECISION_FP32) {
            TOK(g_be->conv2d_fwd(&s, tx.data, tw.data, &ep, e_y.p));
            TOK(g_be->conv2d_bwd_data(&s, tdy.data, tw.data, NULL, e_dx.p));
            TOK(g_be->conv2d_bwd_weight(&s, tx.data, tdy.data, e_dw.p, e_db.p));
        } else {
            TOK(g_be->conv2d_fwd_lowp(&s, tx.data, tw.data, &ep, e_y.p, prec));
            TOK(g_be->conv2d_bwd_data_lowp(&s, tdy.data, tw.data, NULL, e_dx.p, prec));
            TOK(g_be->conv2d_bwd_weight_lowp(&s, tx.data, tdy.data, e_dw.p, e_db.p, prec));
        }
        dget(want_y, &e_y, ny);
        dget(want_dx, &e_dx, nx);
        dget(want_dw, &e_dw, nw);
        dget(want_db, &e_db, s.K);
        odl_set_matmul_precision(prec);
        TOK(odl_conv2d_fwd(&tx, &tw, &tb, NULL, c.act, 1, 1, &ty));
        TOK(odl_conv2d_bwd(&tx, &tw, &tdy, 1, 1, &tdx, &tdw, &tdb));
        odl_set_matmul_precision(saved);
        const char *pn = odl_precision_name(prec);
        TCHECK(same_as(&ty, want_y), "odl_conv2d_fwd in %s is not the op table's entry", pn);
        TCHECK(same_as(&tdx, want_dx), "odl_conv2d_bwd dx in %s is not the op table's entry", pn);
        TCHECK(same_as(&tdw, want_dw), "odl_conv2d_bwd dw in %s is not the op table's entry", pn);
        TCHECK(same_as(&tdb, want_db), "odl_conv2d_bwd db in %s is not the op table's entry", pn);
        /* odl_conv2d_relu_bwd: the same, dx 0 where x <= 0 */
        odl_set_matmul_precision(prec);
        TOK(odl_conv2d_relu_bwd(&tx, &tw, &tdy, 1, 1, &tdx, &tdw, &tdb));
        odl_set_matmul_precision(saved);
        for (int64_t i = 0; i < nx; i++)
            if (x[i] <= 0.0f) want_dx[i] = 0.0f;
        TCHECK(same_as(&tdx, want_dx), "odl_conv2d_relu_bwd dx in %s is not the entry's dx gated by x > 0", pn);
        TCHECK(same_as(&tdw, want_dw), "odl_conv2d_relu_bwd dw in %s is not the op table's entry", pn);
        TCHECK(same_as(&tdb, want_db), "odl_conv2d_relu_bwd db in %s is not the op table's entry", pn);
    }
    dbuf all[] = {e_y, e_dx, e_dw, e_db};
    for (size_t i = 0; i < 4; i++)
        if (all[i].base) odl_mem_free(g_dev, all[i].base);
    odl_tensor *ts[] = {&tx, &tw, &tdy, &tb, &ty, &tdx, &tdw, &tdb};
    for (size_t i = 0; i < 8; i++) odl_tensor_free(ts[i]);
    free(x);
    free(w);
    free(dy);
    free(b);
    free(want_y);
    free(want_dx);
    free(want_dw);
    free(want_db);
}

static double case_macs(const conv_case *c) {
    const odl_conv2d_shape s = shape_of(c);
    return (double)s.N * s.K * s.P * s.Q * s.C * s.R * s.S;
}

int main(int argc, char **argv) {
    int quick = 0, have_cuda = 0;
    const int rc = lowp_test_setup("test_conv_tc", argc, argv, &quick, &have_cuda);
    if (rc >= 0) return rc;
    const char *backend = have_cuda ? "cuda" : "cpu";
    g_be = odl_backend_for(g_dev);
    if (!g_be || !g_be->conv2d_fwd_lowp || !g_be->conv2d_bwd_data_lowp || !g_be->conv2d_bwd_weight_lowp) {
        printf("test_conv_tc: FAIL: the %s op table has no conv2d_*_lowp\n", backend);
        return 1;
    }
    g_tf32_trunc = g_be->tf32_rounding && g_be->tf32_rounding() == ODL_TF32_TOWARD_ZERO;
    printf("test_conv_tc: %s backend's TF32 may round %s\n", backend,
           g_tf32_trunc ? "toward zero (the wgmma kernels of compute capability 9.0) or to nearest even"
                        : "to nearest even");
    test_routing();
    test_empty_batch();
    for (int pi = 0; pi < 2; pi++)
        for (int i = 0; i < N_CASES; i++)
            if (!quick || case_macs(&CASES[i]) <= 16777216.0)
                run_case(&CASES[i], i, pi ? ODL_PRECISION_BF16 : ODL_PRECISION_TF32);
    TCHECK(g_low_seen >= 8, "only %d passes could show the input rounding", g_low_seen);
    if (have_cuda) odl_cuda_shutdown();
    char name[64];
    snprintf(name, sizeof name, "test_conv_tc %s", backend);
    return odl_test_finish(name);
}
