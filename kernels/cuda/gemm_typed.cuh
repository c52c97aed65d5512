/* Typed output of the GEMMs (float32, bfloat16 or float16 C): the epilogue of odl/backend.h's
 * odl_gemm_typed_args applied to one or two elements and stored with one rounding to nearest even.
 * Shared by the wgmma kernels (gemm_sm90.cu) and the split-K reduction (gemm_tc.cu). */
#ifndef ODL_KERNELS_CUDA_GEMM_TYPED_CUH
#define ODL_KERNELS_CUDA_GEMM_TYPED_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "gemm_core.cuh"

namespace odlk {

/* dtypes of the typed GEMM: ODL_F32 (TF32 operands / float32 output), ODL_BF16, ODL_F16 */
constexpr int GEMM_T_F32 = ODL_F32, GEMM_T_BF16 = ODL_BF16, GEMM_T_F16 = ODL_F16;
static inline int gemm_type_size(int t) { return t == GEMM_T_F32 ? 4 : 2; }

/* Output mapping of the consumers' stores: C row-major with ldc (float32, bf16 or f16; split-K partials
 * are float32 slices zstride apart). */
struct TypedOut {
    void *C;
    int64_t ldc;
    int64_t zstride;
    int ctype; /* GEMM_T_* of C */
    bool pair; /* two consecutive columns at even n are one aligned store (ldc even, C 8-byte aligned) */
};

__device__ __forceinline__ float load_c(const TypedOut &o, int64_t off) {
    if (o.ctype == GEMM_T_F32) return static_cast<const float *>(o.C)[off];
    if (o.ctype == GEMM_T_BF16) return __bfloat162float(static_cast<const __nv_bfloat16 *>(o.C)[off]);
    return __half2float(static_cast<const __half *>(o.C)[off]);
}

__device__ __forceinline__ float epi1(const TypedOut &o, const Epi &ep, int m, int n, int64_t off, float v) {
    v *= ep.alpha;
    if (ep.beta != 0.0f) v = fmaf(ep.beta, load_c(o, off), v);
    if (ep.bias) v += ep.bias[ep.bias_per_row ? m : n];
    v = act_apply(ep.act, v);
    if (ep.residual) v += ep.residual[off];
    return v;
}

/* Stores (m, n) and, when n1, (m, n + 1), through the epilogue; T is C's element type. */
template <class T> __device__ __forceinline__ void put2(T *c, bool n1, bool pair, float v0, float v1);
template <> __device__ __forceinline__ void put2<float>(float *c, bool n1, bool pair, float v0, float v1) {
    if (n1 && pair) *reinterpret_cast<float2 *>(c) = make_float2(v0, v1);
    else {
        c[0] = v0;
        if (n1) c[1] = v1;
    }
}
template <> __device__ __forceinline__ void put2<__nv_bfloat16>(__nv_bfloat16 *c, bool n1, bool pair, float v0, float v1) {
    if (n1 && pair) *reinterpret_cast<__nv_bfloat162 *>(c) = __floats2bfloat162_rn(v0, v1);
    else {
        c[0] = __float2bfloat16_rn(v0);
        if (n1) c[1] = __float2bfloat16_rn(v1);
    }
}
template <> __device__ __forceinline__ void put2<__half>(__half *c, bool n1, bool pair, float v0, float v1) {
    if (n1 && pair) *reinterpret_cast<__half2 *>(c) = __floats2half2_rn(v0, v1);
    else {
        c[0] = __float2half_rn(v0);
        if (n1) c[1] = __float2half_rn(v1);
    }
}

template <class T>
__device__ __forceinline__ void store2(const TypedOut &o, const Epi &ep, int m, int n, bool n1, float v0, float v1) {
    const int64_t off = (int64_t)m * o.ldc + n;
    v0 = epi1(o, ep, m, n, off, v0);
    if (n1) v1 = epi1(o, ep, m, n + 1, off + 1, v1);
    put2<T>(static_cast<T *>(o.C) + off, n1, o.pair, v0, v1);
}


/* C (c_type, ldc) = epilogue(sum over z < splits of part[z * M * N + m * N + n]), z in increasing order
 * (deterministic); splits = 1 applies a typed epilogue to a float32 product. */
odl_status splitk_reduce_typed(const float *part, int splits, int M, int N, void *C, int64_t ldc, int c_type,
                               const Epi &ep);

} // namespace odlk

#endif
