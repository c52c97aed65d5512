/* Device helpers shared by the CUDA element-wise, reduction and normalisation kernels (pool.cu,
 * elementwise.cu, reduce.cu, batchnorm.cu, layout.cu, loss.cu, optim.cu): float4 access, fixed-shape
 * (deterministic) warp and block sums, and the fixed split plan of the two-pass reductions.
 *
 * Determinism: every reduction here has a shape that depends only on the problem size (never on the
 * device, the timing or atomics), so the same input gives bitwise the same output on every run and on
 * every GPU model. Butterfly (xor) shuffles give every lane the same value because IEEE addition is
 * commutative.
 */
#ifndef ODL_KERNELS_CUDA_OPS_UTIL_CUH
#define ODL_KERNELS_CUDA_OPS_UTIL_CUH

#include <climits>
#include <mutex>

#include "kernels/cuda/common.cuh"

/* Register cap of the simple streaming kernels: 32 registers let 8 blocks of 256 threads (2048, all an
 * sm_90 SM holds) be resident, and as many as fit where an SM holds 1536 threads (sm_86/89), without
 * the ptxas warning a __launch_bounds__(256, 8) gives there. Grids are then sized from the occupancy
 * the device reports (odlk::resident_blocks), so a grid-stride loop always runs in a single wave. */
#define ODLK_MAXNREG32 __maxnreg__(32)

namespace odlk {

/* Threads per block of the streaming kernels (8 blocks of 256 fill an SM's 2048 threads). */
constexpr int kThreads = 256;
/* Block count the two-pass reductions aim at: one wave of 6 blocks of 256 threads on each of an H200's
 * 132 multiprocessors (792 slots; the reduction kernels are built with __launch_bounds__(256, 6), at
 * most 40 registers). A constant, not sm_count(), so that the split (and hence every rounding) is the
 * same on every device. */
constexpr int kReduceBlocks = 768;
constexpr int kReduceMinBlocksPerSM = 6;

__device__ __forceinline__ float4 ld4(const float *p, int64_t j) { return reinterpret_cast<const float4 *>(p)[j]; }
__device__ __forceinline__ void st4(float *p, int64_t j, float4 v) { reinterpret_cast<float4 *>(p)[j] = v; }

/* Sum over the 32 lanes of a warp; every lane gets the (same) result. */
__device__ __forceinline__ double warp_sum(double v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* Sum over a block of blockDim.x threads (a multiple of 32, at most 1024); the result is valid in
 * warp 0 (every lane of it). `sh` holds at least 32 doubles. Contains __syncthreads(): every thread
 * of the block must call it. The shape depends only on blockDim.x. */
__device__ __forceinline__ double block_sum(double v, double *sh) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads(); /* sh may still be read by an earlier call */
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    if (warp == 0) v = warp_sum(lane < nw ? sh[lane] : 0.0);
    return v;
}

/* Blocks of `threads` threads of `kernel` that are resident at once on one multiprocessor of the current
 * device (cudaOccupancyMaxActiveBlocksPerMultiprocessor, no dynamic shared memory), cached per kernel
 * and device; 1 if the query fails. With grid_for(work, threads, resident_blocks(k, threads)) a
 * grid-stride loop fills the device in exactly one wave: every block does the same work, so a grid of
 * more blocks than fit would leave a partly filled second wave. */
static inline int resident_blocks(const void *kernel, int threads) {
    struct Entry {
        const void *k;
        int dev, threads, n;
    };
    static Entry cache[128];
    static int used = 0;
    static std::mutex mu;
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) {
        (void)cudaGetLastError();
        dev = 0;
    }
    {
        std::lock_guard<std::mutex> lock(mu);
        for (int i = 0; i < used; i++)
            if (cache[i].k == kernel && cache[i].dev == dev && cache[i].threads == threads) return cache[i].n;
    }
    int n = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, threads, 0) != cudaSuccess || n < 1) {
        (void)cudaGetLastError();
        n = 1;
    }
    std::lock_guard<std::mutex> lock(mu);
    if (used < 128) cache[used++] = Entry{kernel, dev, threads, n};
    return n;
}

/* grid_for sized for one resident wave of `kernel` (see resident_blocks). */
static inline unsigned grid_for_kernel(const void *kernel, int64_t work, int threads) {
    return grid_for(work, threads, resident_blocks(kernel, threads));
}

/* Ceiling division for positive 64-bit values. */
static inline int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Fixed split of `items` work items into `parts` contiguous ranges of `per` items (parts >= 1,
 * parts * per >= items, no empty range): at most max_parts ranges of at least min_per items. */
struct Split {
    int parts;
    int64_t per;
};
static inline Split split_plan(int64_t items, int64_t min_per, int64_t max_parts) {
    Split s;
    if (items <= 0) {
        s.parts = 1;
        s.per = 1;
        return s;
    }
    int64_t parts = cdiv(items, min_per < 1 ? 1 : min_per);
    if (parts > max_parts) parts = max_parts;
    if (parts < 1) parts = 1;
    s.per = cdiv(items, parts);
    s.parts = (int)cdiv(items, s.per);
    return s;
}

/* Most ranges each of `groups` independent reductions (channels, column tiles) may be split into:
 * all groups together in one wave (kReduceBlocks blocks) when they fit, otherwise at least four waves'
 * worth of blocks, so that the last, partly filled wave costs at most a fifth of the time. */
static inline int64_t reduce_parts_cap(int64_t groups) {
    if (groups < 1) groups = 1;
    if (groups <= kReduceBlocks) return kReduceBlocks / groups;
    return cdiv(4 * (int64_t)kReduceBlocks, groups);
}

} // namespace odlk

#endif
