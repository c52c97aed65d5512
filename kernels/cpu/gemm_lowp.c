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

#include "kernels/cpu/cpu.h"

/* dst[r * cols + c] = round(src[r * ld + c]) for a rows x cols matrix stored with leading dimension ld. */
static void round_copy(const float *src, int64_t rows, int64_t cols, int64_t ld, int keep, float *dst) {
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
    round_copy(a->A, ra, ca, a->lda, keep, A);
    round_copy(a->B, rb, cb, a->ldb, keep, B);
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
