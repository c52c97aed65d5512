/* Typed output of the GEMMs (float32, bfloat16 or float16 C): the epilogue of odl/backend.h's
 * odl_gemm_typed_args applied to one or two elements and stored with one rounding to nearest even.
 * Shared by the wgmma kernels (gemm_sm90.cu) and the split-K reduction (gemm_tc.cu). */
#ifndef ODL_KERNELS_CUDA_GEMM_TYPED_CUH
#define ODL_KERNELS_CUDA_GEMM_TYPED_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

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
    bool vec;  /* four consecutive columns at n % 4 == 0 are one aligned store: C (and residual) 4-element
                  aligned, ldc and N multiples of 4 */
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

/* One element (m, n) of C through the epilogue, rounded once to T (nearest even). */
template <class T> __device__ __forceinline__ T to_typed(float v);
template <> __device__ __forceinline__ float to_typed<float>(float v) { return v; }
template <> __device__ __forceinline__ __nv_bfloat16 to_typed<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <> __device__ __forceinline__ __half to_typed<__half>(float v) { return __float2half_rn(v); }

template <class T> __device__ __forceinline__ void store1(const TypedOut &o, const Epi &ep, int m, int n, float v) {
    const int64_t off = (int64_t)m * o.ldc + n;
    static_cast<T *>(o.C)[off] = to_typed<T>(epi1(o, ep, m, n, off, v));
}

/* gemm_core.cuh's load4 for 16-bit C. */
template <> __device__ __forceinline__ void load4<__nv_bfloat16>(const __nv_bfloat16 *p, float (&r)[4]) {
    const uint2 u = *reinterpret_cast<const uint2 *>(p);
    const float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&u.x));
    const float2 b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&u.y));
    r[0] = a.x, r[1] = a.y, r[2] = b.x, r[3] = b.y;
}
template <> __device__ __forceinline__ void load4<__half>(const __half *p, float (&r)[4]) {
    const uint2 u = *reinterpret_cast<const uint2 *>(p);
    const float2 a = __half22float2(*reinterpret_cast<const __half2 *>(&u.x));
    const float2 b = __half22float2(*reinterpret_cast<const __half2 *>(&u.y));
    r[0] = a.x, r[1] = a.y, r[2] = b.x, r[3] = b.y;
}
template <class T> __device__ __forceinline__ void put4(T *p, const float (&r)[4]);
template <> __device__ __forceinline__ void put4<float>(float *p, const float (&r)[4]) {
    *reinterpret_cast<float4 *>(p) = make_float4(r[0], r[1], r[2], r[3]);
}
template <> __device__ __forceinline__ void put4<__nv_bfloat16>(__nv_bfloat16 *p, const float (&r)[4]) {
    __nv_bfloat162 a = __floats2bfloat162_rn(r[0], r[1]), b = __floats2bfloat162_rn(r[2], r[3]);
    uint2 u;
    u.x = *reinterpret_cast<uint32_t *>(&a);
    u.y = *reinterpret_cast<uint32_t *>(&b);
    *reinterpret_cast<uint2 *>(p) = u;
}
template <> __device__ __forceinline__ void put4<__half>(__half *p, const float (&r)[4]) {
    __half2 a = __floats2half2_rn(r[0], r[1]), b = __floats2half2_rn(r[2], r[3]);
    uint2 u;
    u.x = *reinterpret_cast<uint32_t *>(&a);
    u.y = *reinterpret_cast<uint32_t *>(&b);
    *reinterpret_cast<uint2 *>(p) = u;
}

/* Two consecutive elements v0, v1 at p (8-byte aligned for float32, 4-byte for 16-bit types). */
template <class T> __device__ __forceinline__ void put2(T *p, float v0, float v1);
template <> __device__ __forceinline__ void put2<float>(float *p, float v0, float v1) {
    *reinterpret_cast<float2 *>(p) = make_float2(v0, v1);
}
template <> __device__ __forceinline__ void put2<__nv_bfloat16>(__nv_bfloat16 *p, float v0, float v1) {
    *reinterpret_cast<__nv_bfloat162 *>(p) = __floats2bfloat162_rn(v0, v1);
}
template <> __device__ __forceinline__ void put2<__half>(__half *p, float v0, float v1) {
    *reinterpret_cast<__half2 *>(p) = __floats2half2_rn(v0, v1);
}

/* Four consecutive elements (m, n .. n + 3) of C, with o.vec (n % 4 == 0): one 16-byte (float32) or 8-byte
 * store, and C and residual read as vectors. plain: alpha 1 and nothing else (no reads). */
template <class T>
__device__ __forceinline__ void store4(const TypedOut &o, const Epi &ep, bool plain, int m, int n, float (&r)[4]) {
    const int64_t off = (int64_t)m * o.ldc + n;
    T *c = static_cast<T *>(o.C) + off;
    if (!plain) epi_apply4(ep, ep.act, m, n, off, r, static_cast<const T *>(c));
    put4<T>(c, r);
}

/* C (c_type, ldc) = epilogue(sum over z < splits of part[z * M * N + m * N + n]), z in increasing order
 * (deterministic); splits = 1 applies a typed epilogue to a float32 product. */
odl_status splitk_reduce_typed(const float *part, int splits, int M, int N, void *C, int64_t ldc, int c_type,
                               const Epi &ep);

} // namespace odlk

#endif
