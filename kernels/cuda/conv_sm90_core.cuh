/* Device pieces shared by the wgmma convolutions (conv2d_sm90.cu: TF32 / BF16 training; conv2d_f16_sm90.cu:
 * float16 NHWC inference): the 128-byte-swizzled K-major tile's addressing and a consumer warpgroup's
 * main loop over an mbarrier ring of shared-memory operands. */
#ifndef ODL_KERNELS_CUDA_CONV_SM90_CORE_CUH
#define ODL_KERNELS_CUDA_CONV_SM90_CORE_CUH

#include "gemm_sm90.h"
#include "sm90_util.cuh"
#include "wgmma_ops.cuh"

namespace odlk {
namespace sm90 {

/* Byte offset of byte b (0..127) of row `row` in a K-major tile of 128-byte rows whose 16-byte chunks are
 * swizzled by row % 8 (the descriptors' 128-byte swizzle). */
static __device__ __forceinline__ uint32_t sw128(int row, uint32_t b) {
    return (uint32_t)row * kRowBytes + ((((b >> 4) ^ (uint32_t)(row & 7))) << 4) + (b & 15);
}

/* One 128-byte row of k of both K-major swizzled operands, A at a, B at b, as Op::K-sized wgmma steps of
 * 32 bytes, committed as one group; the first step overwrites acc unless `accumulate`. */
template <class Op, int N>
__device__ __forceinline__ void mma_row(float (&acc)[N], uint32_t a, uint32_t b, bool accumulate) {
    wgmma_fence();
#pragma unroll
    for (int j = 0; j < kRowBytes / 32; j++)
        Op::run(acc, desc_sw128(a + 32 * j, 16, 1024), desc_sw128(b + 32 * j, 16, 1024), (accumulate || j > 0) ? 1u : 0u);
    wgmma_commit();
}

/* A consumer warpgroup of the shared-memory-operand kernels (the weight gradient, the NHWC forward, the float16 NHWC forward): its
 * main loop over kblocks stages of the ring: wait for the stage's copies, make them visible to the async
 * proxy, BK / Op::K wgmma m64nBN on the stage's 64 A rows at a_off bytes and the B rows after the A tile,
 * one group in flight, each stage released once its group retired (ConsumerRing). Every k step
 * is 32 bytes of a 128-byte row (8 tf32, 16 bf16 or f16). acc holds zeros where kblocks is 0. */
/* No work of the consumer's own on a stage (consume_ring's hook). */
struct NoStageHook {
    __device__ __forceinline__ void operator()(unsigned char *) const {}
};

/* consume over a ring position carried by the caller (a persistent kernel's tiles share one ring); hook(stage)
 * runs on each stage's shared memory once its copies have landed, before the stage's wgmma and its release
 * (the weight gradient's row sums of dy, the bias gradient, and its BF16 rounding in place). */
template <class C, class Hook = NoStageHook>
__device__ __forceinline__ void consume_ring(float (&acc)[C::BN / 2], unsigned char *smem, uint64_t *full, uint64_t *empty,
                                             int kblocks, uint32_t a_off, ConsumerRing<C::STAGES> &ring,
                                             const Hook &hook = Hook()) {
    static_assert(C::BK / C::Op::K == kRowBytes / 32, "one 128-byte row per stage");
    const int tid = threadIdx.x % 128;
#pragma unroll
    for (int i = 0; i < C::BN / 2; i++) acc[i] = 0.0f;
    for (int kb = 0; kb < kblocks; kb++) {
        ring.wait(full);
        /* the hook's loads complete before this warp issues the stage's wgmma (the adds that use them come
         * first; a hook that stores into the stage fences and synchronises the warpgroup itself), and the
         * stage is released only once that warpgroup-wide group has retired */
        hook(smem + ring.s * C::STAGE_BYTES);
        const uint32_t sa = smem_addr(smem + ring.s * C::STAGE_BYTES) + a_off;
        const uint32_t sb = smem_addr(smem + ring.s * C::STAGE_BYTES + C::A_BYTES);
        mma_row<typename C::Op>(acc, sa, sb, kb > 0);
        ring.retire_prev(empty, tid);
    }
    ring.drain(empty, tid);
#pragma unroll
    for (int i = 0; i < C::BN / 2; i++) reg_fence(acc[i]);
}

/* hook_reads: the hook reads (or writes) the stages with ordinary loads, so every thread hands each stage back
 * (the "empty" barriers count 128 arrivals per consumer warpgroup: ConsumerRing) */
template <class C, class Hook = NoStageHook>
__device__ __forceinline__ void consume(float (&acc)[C::BN / 2], unsigned char *smem, uint64_t *full, uint64_t *empty,
                                        int kblocks, uint32_t a_off, const Hook &hook = Hook(), bool hook_reads = false) {
    ConsumerRing<C::STAGES> ring;
    ring.every_thread = hook_reads;
    consume_ring<C>(acc, smem, full, empty, kblocks, a_off, ring, hook);
}

/* The ring of a one-producer, two-consumer-warpgroup kernel (C::RING_BYTES of stages, then STAGES "full"
 * and STAGES "empty" mbarriers) in the dynamic shared memory, aligned to 1024 bytes (the 128-byte
 * swizzle's period): a stage is full when the producer warpgroup's 128 threads have arrived, empty when
 * both consumer warpgroups have handed it back: empty_arrivals, 2 (thread 0 of each) or 256 (every
 * thread: consumers that read the ring with ordinary loads, ConsumerRing). Every thread of the CTA calls
 * it (it ends in __syncthreads). */
template <class C>
__device__ __forceinline__ unsigned char *ring_setup(unsigned char *smem_raw, uint64_t *&full, uint64_t *&empty,
                                                     uint32_t empty_arrivals = 2) {
    unsigned char *smem = reinterpret_cast<unsigned char *>(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
    full = reinterpret_cast<uint64_t *>(smem + C::RING_BYTES);
    empty = full + C::STAGES;
    if (threadIdx.x == 0) {
        for (int s = 0; s < C::STAGES; s++) {
            mbar_init(&full[s], 128);
            mbar_init(&empty[s], empty_arrivals);
        }
        mbar_fence_init();
    }
    __syncthreads();
    return smem;
}

} // namespace sm90
} // namespace odlk

#endif
