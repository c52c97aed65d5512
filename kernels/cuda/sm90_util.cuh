/* Device helpers of the Hopper (sm_90a) kernels: mbarriers, TMA tile loads, wgmma descriptors and the
 * warpgroup fences. Each wraps one PTX instruction of the PTX ISA 8.x (sections "mbarrier",
 * "cp.async.bulk.tensor", "Asynchronous Warpgroup Level Matrix Multiply-Accumulate": matrix descriptor
 * format, wgmma.fence / commit_group / wait_group, setmaxnreg). Only compiled into code for sm_90a
 * (gemm_sm90.cu guards its kernels with __CUDA_ARCH_FEAT_SM90_ALL).
 */
#ifndef ODL_KERNELS_CUDA_SM90_UTIL_CUH
#define ODL_KERNELS_CUDA_SM90_UTIL_CUH

#include <cuda.h> /* CUtensorMap (a type only: the encoder is reached through the runtime at run time) */
#include <stdint.h>

namespace odlk {
namespace sm90 {

static __device__ __forceinline__ uint32_t smem_addr(const void *p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* ---- mbarrier (PTX "Parallel Synchronization and Communication Instructions: mbarrier") ---- */
static __device__ __forceinline__ void mbar_init(uint64_t *bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count));
}
/* Makes the initialised barriers visible to the async proxy (TMA) and the other threads. */
static __device__ __forceinline__ void mbar_fence_init() {
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
/* One arrival that also announces `bytes` of TMA transactions for the current phase. */
static __device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t *bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(bytes)
                 : "memory");
}
static __device__ __forceinline__ void mbar_arrive(uint64_t *bar) {
    asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}
/* Waits until the phase of parity `parity` has completed. A fresh barrier is in phase 0, so waiting for
 * parity 1 returns at once: producers start with parity 1 on their "empty" barriers. */
static __device__ __forceinline__ void mbar_wait(uint64_t *bar, uint32_t parity) {
    const uint32_t a = smem_addr(bar);
    uint32_t done = 0;
    do {
        asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     " selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done)
                     : "r"(a), "r"(parity)
                     : "memory");
    } while (!done);
}

/* One arrival on `bar` once every cp.async this thread issued before has landed (.noinc: the arrival is
 * one of the barrier's expected count, which counts the copying threads). */
static __device__ __forceinline__ void cp_async_mbar_arrive(uint64_t *bar) {
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}
/* Orders this thread's view of shared memory written through the generic proxy (st.shared, cp.async)
 * before the async proxy's reads of it (wgmma operands; PTX "Memory Consistency Model: proxies"). */
static __device__ __forceinline__ void fence_proxy_async_shared() {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

/* ---- TMA: a 2-D box of the tensor map at coordinates (c0 innermost, c1) into shared memory, completing
 * on `bar` (cp.async.bulk.tensor.2d ... mbarrier::complete_tx::bytes). Out-of-range elements are zeros. */
static __device__ __forceinline__ void tma_load_2d(void *dst, const CUtensorMap *map, uint64_t *bar, int c0, int c1) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4}], [%2];\n" ::"r"(smem_addr(dst)),
                 "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_addr(bar)), "r"(c0), "r"(c1)
                 : "memory");
}
static __device__ __forceinline__ void tma_prefetch_desc(const CUtensorMap *map) {
    asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

/* ---- wgmma matrix descriptor (PTX "Matrix Descriptor Format"): start address >> 4 in bits [0,14),
 * leading-dimension byte offset >> 4 in [16,30), stride-dimension byte offset >> 4 in [32,46), base
 * offset 0 (tiles are 1024-byte aligned), layout in [62,64): 1 = 128-byte swizzle. ---- */
static __device__ __forceinline__ uint64_t desc_sw128(uint32_t saddr, uint32_t lbo, uint32_t sbo) {
    return (uint64_t)((saddr & 0x3FFFF) >> 4) | ((uint64_t)(lbo >> 4) << 16) | ((uint64_t)(sbo >> 4) << 32) |
           (1ull << 62);
}

/* ---- warpgroup ordering ---- */
static __device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
static __device__ __forceinline__ void wgmma_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N> static __device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

/* A consumer warpgroup's place in a ring of STAGES shared-memory stages fed through "full" / "empty"
 * mbarriers, one wgmma group in flight: the stage it reads next (s, in phase `phase`) and the stage whose
 * group may still be running (prev, -1 for none). Each stage is handed back once its group has retired:
 * by one arrival per warpgroup (thread 0 of it) where the warpgroup reads the stage through wgmma alone,
 * by an arrival of every thread (every_thread; the "empty" barrier counts 128 per warpgroup) where its
 * threads also read the stage with ordinary loads. The warpgroup's wgmma cannot retire before each warp
 * issued its part, after its loads, so one arrival would order them too; but compute-sanitizer's racecheck
 * sees an ordering only from each reading thread's own arrival (bench/racecheck_probe.cu, H100 2026-12-07:
 * a named barrier then one arrival is reported as a hazard, an arrival per thread is not), and CUTLASS's
 * PipelineAsync releases a stage by every consumer thread too. */
template <int STAGES>
struct ConsumerRing {
    int s = 0, prev = -1;
    uint32_t phase = 0;
    bool every_thread = false;
    /* Waits for stage s's copies and orders them before the async proxy's (wgmma's) reads. */
    __device__ __forceinline__ void wait(uint64_t *full) const {
        mbar_wait(&full[s], phase);
        fence_proxy_async_shared();
    }
    /* After stage s's group was committed: once the group before it retired, hands that one's stage back;
     * moves on to the next stage. */
    __device__ __forceinline__ void retire_prev(uint64_t *empty, int tid) {
        wgmma_wait<1>();
        if (prev >= 0 && (every_thread || tid == 0)) mbar_arrive(&empty[prev]);
        prev = s;
        if (++s == STAGES) {
            s = 0;
            phase ^= 1;
        }
    }
    /* Every group retired and the last stage handed back. */
    __device__ __forceinline__ void drain(uint64_t *empty, int tid) {
        wgmma_wait<0>();
        if (prev >= 0 && (every_thread || tid == 0)) mbar_arrive(&empty[prev]);
        prev = -1;
    }
};
/* Keeps the compiler from moving accesses of an accumulator register across the wgmma instructions that
 * write it asynchronously (CUTLASS's warpgroup_fence_operand). */
static __device__ __forceinline__ void reg_fence(float &r) { asm volatile("" : "+f"(r)::"memory"); }

template <int REGS> static __device__ __forceinline__ void setmaxnreg_dec() {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(REGS));
}
template <int REGS> static __device__ __forceinline__ void setmaxnreg_inc() {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(REGS));
}

/* Named barrier ID (1..15) over THREADS threads, both immediates (a register id makes ptxas reserve all 16). */
template <int ID, int THREADS> static __device__ __forceinline__ void named_barrier_c() {
    asm volatile("bar.sync %0, %1;\n" ::"n"(ID), "n"(THREADS) : "memory");
}
/* Named barrier `id` (1..15; 0 is __syncthreads) over `threads` threads. */
static __device__ __forceinline__ void named_barrier(int id, int threads) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

} // namespace sm90
} // namespace odlk

#endif
