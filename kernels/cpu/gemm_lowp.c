/* CPU reference of odl_backend.gemm_lowp (odl/backend.h, odl/precision.h): the TF32 / BF16 product as
 * the tensor cores compute it, for the CPU backend and as the CUDA kernels' twin in tests.
 *
 * Every element of op(A) and op(B) is rounded once to the precision's format (odl_round_mantissa: round
 * to nearest even, as the CUDA kernels of kernels/cuda/gemm_tc.cu round), into a contiguous copy; the
 * float32 GEMM (gemm.c) then multiplies the copies with float32 accumulation and applies the epilogue.
 * The products of rounded inputs are exact in float32 (11 x 11 and 8 x 8 significant bits fit in 24),
 * so the only differences from the GPU are in the order of the float32 sums. Deterministic, as gemm.c.
 */
#include <stdlib.h>
#include <string.h>

#include "kernels/gemm_args.h"
#include "odl/half.h"

#include "kernels/cpu/cpu.h"

void odl_cpu_round_copy(const float *src, int64_t rows, int64_t cols, int64_t ld, int keep, float *dst) {
    for (int64_t r = 0; r < rows; r++) {
        const float *s = src + r * ld;
        float *d = dst + r * cols;
        for (int64_t c = 0; c < cols; c++) d[c] = odl_round_mantissa(s[c], keep);
    }
}

odl_status odl_cpu_gemm_lowp(const odl_gemm_args *a, odl_precision prec) {
    if (prec == ODL_PRECISION_FP32) return odl_cpu_gemm(a);
    if (prec != ODL_PRECISION_TF32 && prec != ODL_PRECISION_BF16)
        return ODL_ERR(ODL_E_INVAL, "gemm_lowp: unknown precision %d", (int)prec);
    if (a->M <= 0 || a->N <= 0 || a->K <= 0 || a->alpha == 0.0f) return odl_cpu_gemm(a); /* A, B unread */
    const int keep = prec == ODL_PRECISION_TF32 ? 10 : 7;
    /* op(A) is [M, K]: stored [M, lda], or [K, lda] transposed; op(B) [K, N]: [K, ldb] or [N, ldb] */
    const int64_t ra = a->trans_a ? a->K : a->M, ca = a->trans_a ? a->M : a->K;
    const int64_t rb = a->trans_b ? a->N : a->K, cb = a->trans_b ? a->K : a->N;
    float *A = malloc((size_t)(ra * ca) * sizeof(float));
    float *B = malloc((size_t)(rb * cb) * sizeof(float));
    if (!A || !B) {
        free(A);
        free(B);
        return ODL_ERR(ODL_E_NOMEM, "gemm_lowp (%s): rounded copies of A [%lld x %lld] and B [%lld x %lld]",
                       odl_precision_name(prec), (long long)ra, (long long)ca, (long long)rb, (long long)cb);
    }
    odl_cpu_round_copy(a->A, ra, ca, a->lda, keep, A);
    odl_cpu_round_copy(a->B, rb, cb, a->ldb, keep, B);
    odl_gemm_args g = *a;
    g.A = A;
    g.lda = ca;
    g.B = B;
    g.ldb = cb;
    odl_status st = odl_cpu_gemm(&g);
    free(A);
    free(B);
    return st;
}

/* ---- odl_backend.gemm_typed (odl/backend.h): float32 copies of the operands (bfloat16 and float16 are
 * exact in float32, and their products too: 8 x 8 and 11 x 11 significant bits fit in 24; float32
 * operands rounded to TF32 by gemm_lowp), the raw product in float32, then the epilogue in float32 and one
 * rounding to C's dtype (nearest even, as __float2bfloat16_rn / __float2half_rn). ---- */

static float bf16_to_float(uint16_t h) {
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint16_t float_to_bf16(float f) {
    uint32_t u;
    f = odl_round_bf16(f);
    memcpy(&u, &f, 4);
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
    return (uint16_t)(u >> 16);
}

static float typed_load(const void *p, odl_dtype t, int64_t i) {
    if (t == ODL_BF16) return bf16_to_float(((const uint16_t *)p)[i]);
    if (t == ODL_F16) return odl_half_to_float(((const odl_half *)p)[i]);
    return ((const float *)p)[i];
}

static void typed_store(void *p, odl_dtype t, int64_t i, float v) {
    if (t == ODL_BF16) ((uint16_t *)p)[i] = float_to_bf16(v);
    else if (t == ODL_F16) ((odl_half *)p)[i] = odl_float_to_half(v);
    else ((float *)p)[i] = v;
}

static int typed_ok(odl_dtype t) { return t == ODL_F32 || t == ODL_BF16 || t == ODL_F16; }

/* dst = float32 copy of a rows x ld matrix of dtype t (all of every row: leading dimensions kept) */
static float *typed_copy(const void *src, odl_dtype t, int64_t n) {
    float *d = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    if (d)
        for (int64_t i = 0; i < n; i++) d[i] = typed_load(src, t, i);
    return d;
}

odl_status odl_cpu_gemm_typed(const odl_gemm_typed_args *t) {
    if (!typed_ok(t->ab_type) || !typed_ok(t->c_type))
        return ODL_ERR(ODL_E_INVAL, "gemm_typed: dtypes %s operands -> %s C (each float32, bfloat16 or float16)",
                       odl_dtype_name(t->ab_type), odl_dtype_name(t->c_type));
    if (t->ep.residual && t->c_type != ODL_F32)
        return ODL_ERR(ODL_E_INVAL, "gemm_typed: a residual needs a float32 C (C is %s)", odl_dtype_name(t->c_type));
    if (t->M <= 0 || t->N <= 0) return ODL_OK;
    const int64_t na = (t->trans_a ? t->K : t->M) * t->lda, nb = (t->trans_b ? t->N : t->K) * t->ldb;
    const int conv = t->ab_type != ODL_F32;
    float *A = conv ? typed_copy(t->A, t->ab_type, na) : NULL, *B = conv ? typed_copy(t->B, t->ab_type, nb) : NULL;
    float *P = malloc((size_t)(t->M * t->N) * sizeof(float));
    odl_status st = ODL_OK;
    if (!P || (conv && (!A || !B)))
        st = ODL_ERR(ODL_E_NOMEM, "gemm_typed: float32 copies for a %lld x %lld x %lld product", (long long)t->M,
                     (long long)t->N, (long long)t->K);
    if (st == ODL_OK) {
        const odl_gemm_args g = odl_gemm_raw_of_typed(t, conv ? A : (const float *)t->A,
                                                      conv ? B : (const float *)t->B, P, t->N);
        st = conv ? odl_cpu_gemm(&g) : odl_cpu_gemm_lowp(&g, ODL_PRECISION_TF32);
    }
    for (int64_t m = 0; st == ODL_OK && m < t->M; m++)
        for (int64_t n = 0; n < t->N; n++) {
            const int64_t o = m * t->ldc + n;
            float v = t->alpha * P[m * t->N + n];
            if (t->beta != 0.0f) v += t->beta * typed_load(t->C, t->c_type, o);
            if (t->ep.bias) v += t->ep.bias[t->ep.bias_per_row ? m : n];
            v = odl_cpu_act1(t->ep.act, v);
            if (t->ep.residual) v += t->ep.residual[o];
            typed_store(t->C, t->c_type, o, v);
        }
    free(A);
    free(B);
    free(P);
    return st;
}

odl_tf32_rounding odl_cpu_tf32_rounding(void) { return ODL_TF32_NEAREST_EVEN; }
