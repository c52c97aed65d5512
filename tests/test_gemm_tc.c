/* test_gemm_tc: odl_backend.gemm_lowp (TF32 and BF16 inputs, float32 accumulation) and odl/precision.h,
 * against the float64 reference of tests/ops_ref.c.
 *
 *   test_gemm_tc [--backend cpu|cuda] [--seed N]
 *
 * cuda: CUDA device 0 (exit 77, skipped, without one); cpu: the CPU backend's emulation.
 * For each case (odd shapes, every trans_a / trans_b, padded leading dimensions, alpha, beta, bias per row
 * or column, activation, residual; shapes that take the 128 x 128 tile, the 64 x 64 tile and split-K on
 * CUDA; aligned and unaligned operands and leading dimensions), with u_p the unit roundoff
 * of one input rounding (tf32 2^-11, bf16 2^-8) and dot(K) = 8u + min((K+2)u, 8u sqrt(K)), u = 2^-24 (the
 * float32 summation bound of test_ops):
 *   C      vs the float64 product of the float32 inputs:  max |got - ref| / mag <= (2u_p + u_p^2)(1 + dot(K)) + dot(K)
 *          (each product a*b of rounded inputs is within (2u_p + u_p^2)|ab| of the exact one; mag = the
 *          reference's magnitude bound, sum |alpha a b| + |beta C| + |bias| with the activation's
 *          Lipschitz constant, + |out| + |residual|)
 *   C.rnd  vs the float64 product of the inputs rounded by odl_round_mantissa:  <= dot(K)
 *          (only the float32 sums differ: this proves the backend rounds exactly as odl/precision.h
 *          says, nearest even, and accumulates in float32)
 *   C.lowp the error of C is above dot(K) on a short reduction, i.e. the inputs were rounded at all
 * plus exact checks: odl_round_mantissa on ties and carries, 1x1x1 products of chosen ties, and that
 * odl_linear_fwd / odl_linear_bwd follow odl_set_matmul_precision (bit for bit the op table's entry).
 * Outputs are poisoned with NaN, the ldc gap must stay untouched and the inputs unchanged.
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
#include "odl/ops.h"
#include "odl/precision.h"
#include "odl/tensor.h"
#include "gemm_cases.h"
#include "ops_ref.h"
#include "test_util.h"

#define U 5.9604644775390625e-8 /* 2^-24 */
static double tol_dot(double K) {
    double a = (K + 2) * U, b = 8 * U * sqrt(K);
    return 8 * U + (a < b ? a : b);
}
static double unit_roundoff(odl_precision p) { return p == ODL_PRECISION_TF32 ? ldexp(1, -11) : ldexp(1, -8); }
static int keep_bits(odl_precision p) { return p == ODL_PRECISION_TF32 ? 10 : 7; }

static odl_device g_dev;
static const odl_backend *g_be;

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
static double *f2d(const float *x, int64_t n, int keep) {
    double *d = malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
    for (int64_t i = 0; i < n; i++) d[i] = keep ? (double)odl_round_mantissa(x[i], keep) : (double)x[i];
    return d;
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

static int g_low_seen; /* cases whose error showed that the inputs were rounded */

static void run_case(const gemm_case *c, odl_precision prec, int idx) {
    const int64_t M = c->M, N = c->N, K = c->K;
    const gemm_dims d = gemm_case_dims(c);
    const int64_t ra = d.ra, rb = d.rb, lda = d.lda, ldb = d.ldb, ldc = d.ldc;
    float *A = fgen(ra * lda, -1, 1), *B = fgen(rb * ldb, -1, 1), *C0 = fgen(M * ldc, -1, 1);
    const uint32_t guard = 0x7fc0dead;
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < ldc; j++) {
            if (j >= N) memcpy(&C0[i * ldc + j], &guard, 4);
            else if (c->beta == 0) C0[i * ldc + j] = NAN;
        }
    const int64_t nbias = c->bias == 2 ? M : N;
    float *bias = c->bias ? fgen(nbias, -1, 1) : NULL;
    float *res = c->res ? fgen(M * ldc, -1, 1) : NULL;

    /* two float64 references: exact inputs, and inputs rounded as odl/precision.h rounds */
    double *ref[2], *mag[2];
    for (int r = 0; r < 2; r++) {
        ref[r] = f2d(C0, M * ldc, 0);
        mag[r] = malloc((size_t)(M * ldc) * sizeof(double));
        double *dA = f2d(A, ra * lda, r ? keep_bits(prec) : 0), *dB = f2d(B, rb * ldb, r ? keep_bits(prec) : 0);
        double *dbias = bias ? f2d(bias, nbias, 0) : NULL, *dres = res ? f2d(res, M * ldc, 0) : NULL;
        ref_gemm_args ra_ = {.trans_a = c->ta, .trans_b = c->tb, .M = M, .N = N, .K = K, .alpha = c->alpha,
                             .A = dA, .lda = lda, .B = dB, .ldb = ldb, .beta = c->beta, .C = ref[r], .ldc = ldc,
                             .bias = dbias, .bias_per_row = c->bias == 2, .residual = dres, .act = c->act,
                             .mag = mag[r]};
        ref_gemm(&ra_);
        free(dA);
        free(dB);
        free(dbias);
        free(dres);
    }

    dbuf dA = dput(A, ra * lda, c->shift), dB = dput(B, rb * ldb, c->shift), dC = dput(C0, M * ldc, c->shift);
    dbuf db = {0}, dr = {0};
    if (bias) db = dput(bias, nbias, 0);
    if (res) dr = dput(res, M * ldc, 0);
    odl_gemm_args g = {.trans_a = c->ta, .trans_b = c->tb, .M = M, .N = N, .K = K, .alpha = c->alpha,
                       .A = dA.p, .lda = lda, .B = dB.p, .ldb = ldb, .beta = c->beta, .C = dC.p, .ldc = ldc};
    g.ep.bias = db.p;
    g.ep.bias_per_row = c->bias == 2;
    g.ep.residual = dr.p;
    g.ep.act = c->act;
    odl_status st = g_be->gemm_lowp(&g, prec);
    TOK(st);

    const double up = unit_roundoff(prec), td = tol_dot((double)K);
    const double tol_exact = (2 * up + up * up) * (1 + td) + td;
    double err[2] = {0, 0};
    int64_t gap_bad = 0;
    if (st == ODL_OK) {
        float *got = malloc((size_t)(M * ldc) * sizeof(float)), *back = malloc((size_t)(ra * lda) * sizeof(float));
        dget(got, &dC, M * ldc);
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < ldc; j++) {
                const int64_t o = i * ldc + j;
                if (j >= N) {
                    gap_bad += memcmp(&got[o], &C0[o], 4) != 0;
                    continue;
                }
                for (int r = 0; r < 2; r++) {
                    double e = isfinite(got[o]) ? fabs(got[o] - ref[r][o]) / (mag[r][o] + 1e-300) : INFINITY;
                    if (e > err[r]) err[r] = e;
                }
            }
        dget(back, &dA, ra * lda);
        TCHECK(memcmp(back, A, (size_t)(ra * lda) * sizeof(float)) == 0, "A was modified");
        free(back);
        free(got);
    }
    const int ok = err[0] <= tol_exact && err[1] <= td && gap_bad == 0;
    printf("%-4s %-4s M%-5d N%-5d K%-5d%s%s a%g b%g%s%s act%d pad%d shift%d   C %.2e <= %.2e   C.rnd %.2e <= %.2e  %s\n",
           g_be->name, odl_precision_name(prec), c->M, c->N, c->K, c->ta ? " tA" : "   ", c->tb ? " tB" : "   ",
           c->alpha, c->beta, c->bias == 1 ? " +bias" : c->bias == 2 ? " +rowbias" : "", c->res ? " +res" : "",
           (int)c->act, c->pad, c->shift, err[0], tol_exact, err[1], td, ok ? "ok" : "FAIL");
    TCHECK(err[0] <= tol_exact, "case %d %s: C error %.3e above %.3e", idx, odl_precision_name(prec), err[0],
           tol_exact);
    TCHECK(err[1] <= td, "case %d %s: C.rnd error %.3e above %.3e (not the rounding of odl/precision.h?)", idx,
           odl_precision_name(prec), err[1], td);
    TCHECK(gap_bad == 0, "case %d: %" PRId64 " elements of the ldc gap were written", idx, gap_bad);
    /* a short reduction of random inputs cannot hide a rounding of u_p in the float32 sum bound */
    if (K >= 16 && K <= 200 && c->alpha != 0 && M * N >= 64) {
        TCHECK(err[0] > 4 * td, "case %d %s: error %.3e within float32's %.3e: were the inputs rounded?", idx,
               odl_precision_name(prec), err[0], td);
        g_low_seen++;
    }
    odl_mem_free(g_dev, dA.base);
    odl_mem_free(g_dev, dB.base);
    odl_mem_free(g_dev, dC.base);
    if (db.base) odl_mem_free(g_dev, db.base);
    if (dr.base) odl_mem_free(g_dev, dr.base);
    for (int r = 0; r < 2; r++) {
        free(ref[r]);
        free(mag[r]);
    }
    free(A);
    free(B);
    free(C0);
    free(bias);
    free(res);
}

/* odl_round_mantissa on chosen bit patterns: ties to even, carries into the exponent, specials. */
static void test_rounding(void) {
    const float one = 1.0f;
    TCHECK(odl_round_tf32(one + ldexpf(1, -12)) == one, "below half an ulp rounds down");
    TCHECK(odl_round_tf32(one + ldexpf(1, -11)) == one, "tie to even (down)");
    TCHECK(odl_round_tf32(one + 3 * ldexpf(1, -11)) == one + ldexpf(1, -9), "tie to even (up)");
    TCHECK(odl_round_tf32(one + ldexpf(1, -11) + ldexpf(1, -20)) == one + ldexpf(1, -10), "above a tie rounds up");
    TCHECK(odl_round_bf16(one + ldexpf(1, -8)) == one, "bf16 tie to even (down)");
    TCHECK(odl_round_bf16(one + 3 * ldexpf(1, -8)) == one + ldexpf(1, -6), "bf16 tie to even (up)");
    TCHECK(odl_round_bf16(-(one + 3 * ldexpf(1, -8))) == -(one + ldexpf(1, -6)), "sign kept");
    TCHECK(odl_round_bf16(2.0f - ldexpf(1, -23)) == 2.0f, "carry into the exponent");
    TCHECK(isinf(odl_round_bf16(3.4028235e38f)), "past the largest finite bf16: infinity");
    TCHECK(isinf(odl_round_tf32(INFINITY)) && isnan(odl_round_tf32(NAN)), "inf and NaN pass");
    odl_precision p;
    TOK(odl_precision_parse("bf16", &p));
    TCHECK(p == ODL_PRECISION_BF16 && !strcmp(odl_precision_name(ODL_PRECISION_TF32), "tf32"), "names");
    TFAIL(odl_precision_parse("fp16", &p), ODL_E_CONFIG);
}

/* 1 x 1 x 1 products of ties: the backend's C must be exactly round(a) * b. */
static void test_exact_ties(void) {
    const float as[] = {1.0f + ldexpf(1, -11), 1.0f + 3 * ldexpf(1, -11), 1.0f + ldexpf(1, -8),
                        1.0f + 3 * ldexpf(1, -8), -1.5f - ldexpf(1, -12)};
    for (int pi = 0; pi < 2; pi++) {
        const odl_precision prec = pi ? ODL_PRECISION_BF16 : ODL_PRECISION_TF32;
        for (size_t i = 0; i < sizeof as / sizeof as[0]; i++) {
            float b = 1.0f, c = NAN;
            dbuf dA = dput(&as[i], 1, 0), dB = dput(&b, 1, 0), dC = dput(&c, 1, 0);
            odl_gemm_args g = {.M = 1, .N = 1, .K = 1, .alpha = 1.f, .A = dA.p, .lda = 1, .B = dB.p, .ldb = 1,
                               .beta = 0.f, .C = dC.p, .ldc = 1};
            TOK(g_be->gemm_lowp(&g, prec));
            dget(&c, &dC, 1);
            const float want = odl_round_mantissa(as[i], keep_bits(prec));
            TCHECK(c == want, "%s: %.9g * 1 gave %.9g, want %.9g", odl_precision_name(prec), as[i], c, want);
            odl_mem_free(g_dev, dA.base);
            odl_mem_free(g_dev, dB.base);
            odl_mem_free(g_dev, dC.base);
        }
    }
}

/* odl_linear_fwd / odl_linear_bwd follow odl_set_matmul_precision: bit for bit the op table's gemm (fp32)
 * or gemm_lowp (tf32, bf16) on the same arguments, and tf32 / bf16 differ from fp32. */
static void test_linear_routing(void) {
    enum { B = 5, IN = 37, OUT = 11 };
    const int64_t xs[2] = {B, IN}, ws[2] = {OUT, IN}, ys[2] = {B, OUT};
    float *hx = fgen(B * IN, -1, 1), *hw = fgen(OUT * IN, -1, 1), *hdy = fgen(B * OUT, -1, 1);
    odl_tensor x, w, y, dy, dw;
    TOK(odl_tensor_alloc(&x, g_dev, ODL_F32, 2, xs));
    TOK(odl_tensor_alloc(&w, g_dev, ODL_F32, 2, ws));
    TOK(odl_tensor_alloc(&y, g_dev, ODL_F32, 2, ys));
    TOK(odl_tensor_alloc(&dy, g_dev, ODL_F32, 2, ys));
    TOK(odl_tensor_alloc(&dw, g_dev, ODL_F32, 2, ws));
    TOK(odl_tensor_copy_from_host(&x, hx, sizeof(float) * B * IN));
    TOK(odl_tensor_copy_from_host(&w, hw, sizeof(float) * OUT * IN));
    TOK(odl_tensor_copy_from_host(&dy, hdy, sizeof(float) * B * OUT));
    float got[B * OUT], want[B * OUT], fp32[B * OUT], gdw[OUT * IN], wdw[OUT * IN];
    dbuf dC = dput(want, B * OUT, 0), dW = dput(wdw, OUT * IN, 0);
    for (int pi = 0; pi < 3; pi++) {
        const odl_precision p = (odl_precision)pi;
        odl_set_matmul_precision(p);
        TCHECK(odl_matmul_precision() == p, "setting read back");
        TOK(odl_linear_fwd(&x, &w, NULL, ODL_ACT_NONE, &y));
        TOK(odl_tensor_copy_to_host(&y, got, sizeof got));
        TOK(odl_linear_bwd(&x, &w, &dy, NULL, &dw, NULL));
        TOK(odl_tensor_copy_to_host(&dw, gdw, sizeof gdw));
        /* the same products through the op table: y = x w^T, dw = dy^T x */
        odl_gemm_args g = {.trans_b = 1, .M = B, .N = OUT, .K = IN, .alpha = 1.f, .A = x.data, .lda = IN,
                           .B = w.data, .ldb = IN, .C = dC.p, .ldc = OUT};
        odl_gemm_args gw = {.trans_a = 1, .M = OUT, .N = IN, .K = B, .alpha = 1.f, .A = dy.data, .lda = OUT,
                            .B = x.data, .ldb = IN, .C = dW.p, .ldc = IN};
        TOK(p == ODL_PRECISION_FP32 ? g_be->gemm(&g) : g_be->gemm_lowp(&g, p));
        TOK(p == ODL_PRECISION_FP32 ? g_be->gemm(&gw) : g_be->gemm_lowp(&gw, p));
        dget(want, &dC, B * OUT);
        dget(wdw, &dW, OUT * IN);
        TCHECK(memcmp(got, want, sizeof got) == 0, "%s: odl_linear_fwd differs from the op table's product",
               odl_precision_name(p));
        TCHECK(memcmp(gdw, wdw, sizeof gdw) == 0, "%s: odl_linear_bwd's dw differs from the op table's product",
               odl_precision_name(p));
        if (p == ODL_PRECISION_FP32) memcpy(fp32, got, sizeof got);
        else TCHECK(memcmp(got, fp32, sizeof got) != 0, "%s: same result as fp32", odl_precision_name(p));
    }
    odl_set_matmul_precision(ODL_PRECISION_FP32);
    odl_mem_free(g_dev, dC.base);
    odl_mem_free(g_dev, dW.base);
    odl_tensor_free(&x);
    odl_tensor_free(&w);
    odl_tensor_free(&y);
    odl_tensor_free(&dy);
    odl_tensor_free(&dw);
    free(hx);
    free(hw);
    free(hdy);
}

int main(int argc, char **argv) {
    const char *backend = "cpu";
    uint64_t seed = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--backend") && i + 1 < argc)
            backend = argv[++i];
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
            seed = strtoull(argv[++i], NULL, 10);
        else {
            fprintf(stderr, "usage: test_gemm_tc [--backend cpu|cuda] [--seed N]\n");
            return 2;
        }
    }
    if (!seed) seed = 0x9e3779b97f4a7c15ull ^ (uint64_t)time(NULL);
    g_rs = seed | 1;
    printf("test_gemm_tc: seed %" PRIu64 "\n", seed);
    int have_cuda = 0;
    if (!strcmp(backend, "cuda")) {
        int built = odl_cuda_built(), ndev = built ? odl_cuda_device_count() : 0;
        if (ndev <= 0) {
            printf("test_gemm_tc: skipped: no CUDA device (%s)\n", built ? "no device visible" : "CPU-only build");
            return ODL_TEST_SKIP;
        }
        odl_status st = odl_cuda_init(0, 0.2);
        if (st != ODL_OK) {
            printf("test_gemm_tc: FAIL: odl_cuda_init(0, 0.2): %s: %s\n", odl_status_str(st), odl_error_msg());
            return 1;
        }
        have_cuda = 1;
        g_dev = odl_cuda(0);
    } else if (!strcmp(backend, "cpu")) {
        g_dev = odl_cpu();
    } else {
        fprintf(stderr, "test_gemm_tc: unknown backend '%s' (cpu or cuda)\n", backend);
        return 2;
    }
    g_be = odl_backend_for(g_dev);
    if (!g_be || !g_be->gemm_lowp) {
        printf("test_gemm_tc: FAIL: the %s op table has no gemm_lowp\n", backend);
        return 1;
    }
    test_rounding();
    test_exact_ties();
    test_linear_routing();
    for (int pi = 0; pi < 2; pi++)
        for (int i = 0; i < N_GEMM_CASES; i++)
            run_case(&GEMM_CASES[i], pi ? ODL_PRECISION_BF16 : ODL_PRECISION_TF32, i);
    TCHECK(g_low_seen >= 8, "only %d cases could show the input rounding", g_low_seen);
    if (have_cuda) odl_cuda_shutdown();
    char name[64];
    snprintf(name, sizeof name, "test_gemm_tc %s", backend);
    return odl_test_finish(name);
}
