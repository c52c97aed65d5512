/* test_gemm_tc: odl_backend.gemm_lowp (TF32 and BF16 inputs, float32 accumulation) and odl/precision.h,
 * against the float64 reference of tests/ops_ref.c.
 *
 *   test_gemm_tc [--backend cpu|cuda] [--seed N] [--quick]
 *
 * --quick (or ODL_TEST_QUICK=1): only the cases of at most 2^25 multiply-adds (for compute-sanitizer, which
 * runs kernels ~100x slower; the tile, split-K and layout paths are all still taken).
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
#include "odl/half.h"
#include "odl/ops.h"
#include "odl/precision.h"
#include "odl/tensor.h"
#include "gemm_cases.h"
#include "lowp_test_util.h"
#include "ops_ref.h"
#include "test_util.h"

static const odl_backend *g_be;

/* The backend's TF32 rounding (odl_backend.tf32_rounding): toward zero on the wgmma path of compute
 * capability 9.0, else nearest even. BF16 is always nearest even. */
static int g_tf32_trunc;
static float round_as_backend(float x, int keep) {
    return keep == 10 && g_tf32_trunc ? odl_trunc_mantissa(x, keep) : odl_round_mantissa(x, keep);
}
static double *f2d(const float *x, int64_t n, int keep) {
    double *d = malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
    for (int64_t i = 0; i < n; i++) d[i] = keep ? (double)round_as_backend(x[i], keep) : (double)x[i];
    return d;
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

    /* toward zero: up to one ulp (2^-10) per input instead of half */
    const double up = unit_roundoff(prec) * (prec == ODL_PRECISION_TF32 && g_tf32_trunc ? 2 : 1);
    const double td = tol_dot((double)K);
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

/* ---- gemm_typed: bfloat16 / float16 / float32 operands and C (odl_gemm_typed_args) ---- */

static size_t tsize(odl_dtype t) { return t == ODL_F32 ? 4 : 2; }
/* x rounded to dtype t (nearest even; float32 operands as the backend feeds TF32) */
static float tround(float x, odl_dtype t, int operand) {
    if (t == ODL_BF16) return odl_round_bf16(x);
    if (t == ODL_F16) return odl_half_to_float(odl_float_to_half(x));
    return operand ? round_as_backend(x, 10) : x;
}
/* n values of dtype t (already representable) as their bits */
static void *tpack(const float *x, int64_t n, odl_dtype t) {
    void *p = malloc((size_t)(n > 0 ? n : 1) * tsize(t));
    for (int64_t i = 0; i < n; i++) {
        if (t == ODL_F32) ((float *)p)[i] = x[i];
        else if (t == ODL_F16) ((odl_half *)p)[i] = odl_float_to_half(x[i]);
        else {
            uint32_t u;
            memcpy(&u, &x[i], 4);
            ((uint16_t *)p)[i] = (uint16_t)(u >> 16);
        }
    }
    return p;
}
typedef struct tbuf {
    void *base;
    void *p;
} tbuf;
/* a device copy of `bytes` at a byte offset `shift` (misaligned for the wgmma path unless 16 | shift) */
static tbuf tput(const void *x, size_t bytes, size_t shift) {
    tbuf b = {NULL, NULL};
    if (odl_mem_alloc(g_dev, bytes + shift + 16, &b.base) != ODL_OK) {
        TOK(ODL_E_NOMEM);
        return b;
    }
    b.p = (char *)b.base + shift;
    TOK(odl_memcpy_async(b.p, g_dev, x, odl_cpu(), bytes, odl_stream_current()));
    TOK(odl_device_synchronize(g_dev));
    return b;
}

static void run_typed_case(const gemm_case *c, odl_dtype abt, odl_dtype ct, int idx) {
    const int64_t M = c->M, N = c->N, K = c->K;
    const gemm_dims d = gemm_case_dims(c);
    const int64_t na = d.ra * d.lda, nb = d.rb * d.ldb, nc = M * d.ldc;
    float *A = fgen(na, -1, 1), *B = fgen(nb, -1, 1), *C0 = fgen(nc, -1, 1);
    for (int64_t i = 0; i < na; i++) A[i] = tround(A[i], abt, 0);
    for (int64_t i = 0; i < nb; i++) B[i] = tround(B[i], abt, 0);
    for (int64_t i = 0; i < nc; i++) C0[i] = tround(C0[i], ct, 0);
    const int64_t nbias = c->bias == 2 ? M : N;
    float *bias = c->bias ? fgen(nbias, -1, 1) : NULL;
    float *res = c->res && ct == ODL_F32 ? fgen(nc, -1, 1) : NULL;
    /* float64 reference of the operands as the product sees them */
    double *ref = f2d(C0, nc, 0), *mag = malloc((size_t)nc * sizeof(double));
    double *dA = malloc((size_t)na * sizeof(double)), *dB = malloc((size_t)nb * sizeof(double));
    for (int64_t i = 0; i < na; i++) dA[i] = tround(A[i], abt, 1);
    for (int64_t i = 0; i < nb; i++) dB[i] = tround(B[i], abt, 1);
    double *dbias = bias ? f2d(bias, nbias, 0) : NULL, *dres = res ? f2d(res, nc, 0) : NULL;
    ref_gemm_args r = {.trans_a = c->ta, .trans_b = c->tb, .M = M, .N = N, .K = K, .alpha = c->alpha, .A = dA,
                       .lda = d.lda, .B = dB, .ldb = d.ldb, .beta = c->beta, .C = ref, .ldc = d.ldc, .bias = dbias,
                       .bias_per_row = c->bias == 2, .residual = dres, .act = c->act, .mag = mag};
    ref_gemm(&r);
    void *hA = tpack(A, na, abt), *hB = tpack(B, nb, abt), *hC = tpack(C0, nc, ct);
    /* the ldc gap keeps a guard pattern; beta == 0 must not read C (NaN there) */
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = N; j < d.ldc; j++) memset((char *)hC + (i * d.ldc + j) * tsize(ct), 0x7d, tsize(ct));
    if (c->beta == 0)
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) memset((char *)hC + (i * d.ldc + j) * tsize(ct), 0xff, tsize(ct));
    const size_t sh = (size_t)c->shift * tsize(abt);
    tbuf bA = tput(hA, (size_t)na * tsize(abt), sh), bB = tput(hB, (size_t)nb * tsize(abt), sh);
    tbuf bC = tput(hC, (size_t)nc * tsize(ct), (size_t)c->shift * tsize(ct));
    tbuf bb = {0}, br = {0};
    if (bias) bb = tput(bias, (size_t)nbias * 4, 0);
    if (res) br = tput(res, (size_t)nc * 4, 0);
    odl_gemm_typed_args g = {.trans_a = c->ta, .trans_b = c->tb, .M = M, .N = N, .K = K, .alpha = c->alpha,
                             .A = bA.p, .lda = d.lda, .B = bB.p, .ldb = d.ldb, .beta = c->beta, .C = bC.p,
                             .ldc = d.ldc, .ab_type = abt, .c_type = ct};
    g.ep.bias = bb.p;
    g.ep.bias_per_row = c->bias == 2;
    g.ep.residual = br.p;
    g.ep.act = c->act;
    odl_status st = g_be->gemm_typed(&g);
    TOK(st);
    /* tolerance: float32 sums, TF32 operand rounding (float32 operands only), one rounding of C */
    const double td = tol_dot((double)K);
    const double up = abt == ODL_F32 ? ldexp(1, g_tf32_trunc ? -10 : -11) : 0;
    const double uo = ct == ODL_BF16 ? ldexp(1, -8) : ct == ODL_F16 ? ldexp(1, -11) : 0;
    const double tol = (2 * up + up * up) * (1 + td) + td + uo * (1 + td);
    double err = 0;
    int64_t gap_bad = 0;
    if (st == ODL_OK) {
        void *got = malloc((size_t)nc * tsize(ct));
        TOK(odl_device_synchronize(g_dev));
        TOK(odl_memcpy_async(got, odl_cpu(), bC.p, g_dev, (size_t)nc * tsize(ct), odl_stream_current()));
        TOK(odl_device_synchronize(g_dev));
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < d.ldc; j++) {
                const int64_t o = i * d.ldc + j;
                if (j >= N) {
                    gap_bad += memcmp((char *)got + o * tsize(ct), (char *)hC + o * tsize(ct), tsize(ct)) != 0;
                    continue;
                }
                float v;
                if (ct == ODL_F32) memcpy(&v, (char *)got + o * 4, 4);
                else if (ct == ODL_F16) v = odl_half_to_float(((odl_half *)got)[o]);
                else {
                    const uint32_t u = (uint32_t)((uint16_t *)got)[o] << 16;
                    memcpy(&v, &u, 4);
                }
                /* float16 C below its normal range (2^-14) has an absolute spacing of 2^-24 */
                const double d = fabs(v - ref[o]) - (ct == ODL_F16 ? ldexp(1, -25) : 0);
                const double e = isfinite(v) ? (d > 0 ? d : 0) / (mag[o] + 1e-300) : INFINITY;
                if (e > err) err = e;
            }
        free(got);
    }
    const int ok = err <= tol && gap_bad == 0;
    printf("%-4s typed %s->%s M%-5d N%-5d K%-5d%s%s a%g b%g%s%s act%d pad%d shift%d   C %.2e <= %.2e  %s\n",
           g_be->name, odl_dtype_name(abt), odl_dtype_name(ct), c->M, c->N, c->K, c->ta ? " tA" : "   ",
           c->tb ? " tB" : "   ", c->alpha, c->beta, c->bias == 1 ? " +bias" : c->bias == 2 ? " +rowbias" : "",
           res ? " +res" : "", (int)c->act, c->pad, c->shift, err, tol, ok ? "ok" : "FAIL");
    TCHECK(err <= tol, "typed case %d %s->%s: C error %.3e above %.3e", idx, odl_dtype_name(abt), odl_dtype_name(ct),
           err, tol);
    TCHECK(gap_bad == 0, "typed case %d: %" PRId64 " elements of the ldc gap were written", idx, gap_bad);
    odl_mem_free(g_dev, bA.base);
    odl_mem_free(g_dev, bB.base);
    odl_mem_free(g_dev, bC.base);
    if (bb.base) odl_mem_free(g_dev, bb.base);
    if (br.base) odl_mem_free(g_dev, br.base);
    free(A), free(B), free(C0), free(bias), free(res), free(ref), free(mag), free(dA), free(dB), free(dbias);
    free(dres), free(hA), free(hB), free(hC);
}

/* gemm_typed refuses what it does not take, with an error naming it. */
static void test_typed_refusals(void) {
    float x = 1.0f;
    odl_gemm_typed_args g = {.M = 1, .N = 1, .K = 1, .alpha = 1.f, .A = &x, .lda = 1, .B = &x, .ldb = 1, .C = &x,
                             .ldc = 1, .ab_type = ODL_I32, .c_type = ODL_F32};
    TFAIL(g_be->gemm_typed(&g), ODL_E_INVAL);
    g.ab_type = ODL_BF16;
    g.c_type = ODL_F64;
    TFAIL(g_be->gemm_typed(&g), ODL_E_INVAL);
    g.c_type = ODL_BF16;
    g.ep.residual = &x;
    TFAIL(g_be->gemm_typed(&g), ODL_E_INVAL);
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
            const float want = round_as_backend(as[i], keep_bits(prec));
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

static int small_case(const gemm_case *c) { return (double)c->M * c->N * c->K <= 33554432.0; }

int main(int argc, char **argv) {
    int quick = 0, have_cuda = 0;
    const int rc = lowp_test_setup("test_gemm_tc", argc, argv, &quick, &have_cuda);
    if (rc >= 0) return rc;
    const char *backend = have_cuda ? "cuda" : "cpu";
    g_be = odl_backend_for(g_dev);
    if (!g_be || !g_be->gemm_lowp) {
        printf("test_gemm_tc: FAIL: the %s op table has no gemm_lowp\n", backend);
        return 1;
    }
    g_tf32_trunc = g_be->tf32_rounding && g_be->tf32_rounding() == ODL_TF32_TOWARD_ZERO;
    printf("test_gemm_tc: %s backend rounds float32 to TF32 %s\n", backend,
           g_tf32_trunc ? "toward zero (the wgmma path of compute capability 9.0)" : "to nearest even");
    test_rounding();
    test_exact_ties();
    test_linear_routing();
    for (int pi = 0; pi < 2; pi++)
        for (int i = 0; i < N_GEMM_CASES; i++)
            if (!quick || small_case(&GEMM_CASES[i]))
                run_case(&GEMM_CASES[i], pi ? ODL_PRECISION_BF16 : ODL_PRECISION_TF32, i);
    TCHECK(g_low_seen >= 8, "only %d cases could show the input rounding", g_low_seen);
    if (!g_be->gemm_typed) {
        printf("test_gemm_tc: FAIL: the %s op table has no gemm_typed\n", backend);
        return 1;
    }
    test_typed_refusals();
    static const odl_dtype typed[][2] = {{ODL_BF16, ODL_F32}, {ODL_BF16, ODL_BF16}, {ODL_F16, ODL_F16},
                                         {ODL_F16, ODL_F32}, {ODL_F32, ODL_BF16}};
    for (size_t t = 0; t < sizeof typed / sizeof typed[0]; t++)
        for (int i = 0; i < N_GEMM_CASES; i++)
            if (!quick || small_case(&GEMM_CASES[i])) run_typed_case(&GEMM_CASES[i], typed[t][0], typed[t][1], i);
    if (have_cuda) odl_cuda_shutdown();
    char name[64];
    snprintf(name, sizeof name, "test_gemm_tc %s", backend);
    return odl_test_finish(name);
}
