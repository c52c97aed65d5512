/* Device helpers of the tensor-core kernels (conv2d_f16.cu, gemm_tc.cu, gemm_mma.cuh): cp.async copies into shared
 * memory, their commit / wait groups, ldmatrix, and the mma.sync shapes with float32 accumulation
 * (PTX ISA: "Asynchronous copy", "ldmatrix", "Matrix fragments for mma.m16n8k8 / m16n8k16"). */
#ifndef ODL_KERNELS_CUDA_MMA_UTIL_CUH
#define ODL_KERNELS_CUDA_MMA_UTIL_CUH

#include <cuda_bf16.h>
#include <stdint.h>

namespace odlk {

/* odl_round_mantissa(x, 10) of odl/precision.h: TF32, nearest even; NaN and infinity unchanged. */
static __device__ __forceinline__ float round_tf32_rne(float x) {
    uint32_t u = __float_as_uint(x);
    if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0xfffu + ((u >> 13) & 1u)) & 0xffffe000u;
    return __uint_as_float(u);
}
/* odl_round_mantissa(x, 7): BF16 nearest even (__float2bfloat16_rn), as the upper half of a float32. */
static __device__ __forceinline__ float round_bf16_rne(float x) {
    return __uint_as_float((uint32_t)__bfloat16_as_ushort(__float2bfloat16_rn(x)) << 16);
}

static __device__ __forceinline__ uint32_t smem_u32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

/* 16 bytes global -> shared; valid = false writes 16 zero bytes and reads nothing (src-size 0). */
static __device__ __forceinline__ void cp_async16(uint32_t dst, const void *src, bool valid = true) {
    const int n = valid ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(n));
}
/* The same, cached in L1 (.ca): gathers whose neighbours read the same lines (a convolution's windows). */
static __device__ __forceinline__ void cp_async16_ca(uint32_t dst, const void *src, bool valid = true) {
    const int n = valid ? 16 : 0;
    asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(n));
}
/* 4 bytes global -> shared, cached in L1 (.ca: neighbouring gathers reuse lines); valid = false writes zero. */
static __device__ __forceinline__ void cp_async4(uint32_t dst, const void *src, bool valid = true) {
    const int n = valid ? 4 : 0;
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(n));
}
static __device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> static __device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

static __device__ __forceinline__ void ldmatrix_x4(uint32_t addr, uint32_t &r0, uint32_t &r1, uint32_t &r2,
                                                   uint32_t &r3) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
}

/* d += a * b on one 16 x 8 tile: m16n8k16 with float16 or bfloat16 inputs, m16n8k8 with tf32 inputs. */
enum class MmaIn { F16, BF16, TF32 };
template <MmaIn IN>
static __device__ __forceinline__ void mma_16x8(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    if (IN == MmaIn::F16)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                     "{%8, %9}, {%0, %1, %2, %3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    else if (IN == MmaIn::BF16)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                     "{%8, %9}, {%0, %1, %2, %3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    else
        asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                     "{%8, %9}, {%0, %1, %2, %3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

} // namespace odlk

#endif
