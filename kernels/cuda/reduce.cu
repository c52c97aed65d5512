/* CUDA reductions: sum_rows (column sums of a row-major [M, N] matrix), sum (of n elements) and
 * argmax_rows. Formulas:
 * odl/backend.h; CPU twins: kernels/cpu/elementwise.c (sum_rows, sum) and kernels/cpu/loss.c (argmax).
 *
 * Determinism: no atomics. Every sum is accumulated in double (as the CPU does) by a fixed pattern:
 * each thread adds its elements in increasing order, the threads' sums meet in a fixed tree (xor
 * shuffles, then a fixed order across warps), and a second pass adds the blocks' partial sums from the
 * backend workspace (odlk::workspace) in a fixed tree. The split into blocks depends only on the shape
 * (odlk::kReduceBlocks is a constant), so results are bitwise reproducible on every run and device.
 * The results are rounded to float once, at the end. They are not bitwise the CPU's (its order is a
 * plain sequence), but both are the double-precision sum rounded once, so they agree to rounding in
 * all but contrived cases.
 *
 * sum_rows, two regimes:
 *   narrow (N <= 128): a block reads a contiguous range of rows as one flat stream of floats; with
 *     G = 256 / N groups, thread t < G*N reads elements t, t + G*N, ... so that it always meets column
 *     t % N, and every warp load is 128 contiguous bytes whatever N is (eight loads in flight per
 *     thread). The G per-thread sums of each
 *     column then meet in a fixed halving tree in shared memory; up to 768 row ranges, whose double
 *     partial sums a second kernel (one block per column) adds in a fixed tree.
 *   wide (N > 128): blocks of 32 columns x 8 row lanes (each warp reads 128 contiguous bytes of a
 *     row, eight rows in flight per thread), split over row ranges (odlk::reduce_parts_cap); the 8
 *     lanes meet in a fixed tree, and a second kernel (one thread per column) adds the row ranges'
 *     partials in order. With one row range the first kernel writes y directly.
 * sum: up to 768 contiguous, 16-byte aligned ranges read as float4 (four in flight per thread), block
 *   sums in double, then one block adds the partials.
 * argmax_rows: a warp per row (a block of 256 for C > 2048); each lane keeps the best of its elements,
 *   lanes combine by a strict total order (NaN above all, the lower index first among NaNs; else the
 *   larger value, the lower index on ties, -0 == +0), whose maximum is the CPU's sequential answer
 *   (first NaN, else first maximum) in any combination order.
 *
 * Workspace: sum_rows and sum take odlk::workspace() for their partial sums (at most
 * 768 * N doubles); a caller must not keep a workspace pointer of its own across these calls.
 */
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops_util.cuh"

namespace odlk {
namespace {

constexpr int kNarrowMax = 128;          /* sum_rows: largest N of the narrow regime */
constexpr int64_t kMinBlockElems = 4096; /* smallest range a reduction block is given (16 KB) */

/* ---- sum_rows, narrow ---- */
template <bool FINAL>
__global__ void __launch_bounds__(kThreads, kReduceMinBlocksPerSM)
    sum_rows_narrow_kernel(int64_t M, int N, int64_t rows_per,
                                                                   const float *__restrict__ x,
                                                                   double *__restrict__ partial,
                                                                   float *__restrict__ y) {
    __shared__ double acc[kThreads];
    const int t = threadIdx.x;
    const int G = kThreads / N, T = G * N;
    const int64_t r0 = (int64_t)blockIdx.x * rows_per;
    const int64_t r1 = r0 + rows_per < M ? r0 + rows_per : M;
    const int64_t e1 = r1 * N;
    double a = 0.0;
    if (t < T) {
        int64_t e = r0 * N + t;
        for (; e + 7 * (int64_t)T < e1; e += 8 * (int64_t)T) {
            float v[8];
#pragma unroll
            for (int k = 0; k < 8; k++) v[k] = x[e + k * (int64_t)T];
#pragma unroll
            for (int k = 0; k < 8; k++) a += (double)v[k];
        }
        for (; e < e1; e += T) a += (double)x[e];
    }
    acc[t] = a;
    __syncthreads();
    for (int g = G; g > 1;) { /* fixed halving tree over the groups: group i += group i + h */
        const int h = (g + 1) >> 1;
        if (t < (g - h) * N) acc[t] += acc[t + h * N];
        __syncthreads();
        g = h;
    }
    if (t < N) {
        if (FINAL)
            y[t] = (float)acc[t];
        else
            partial[(int64_t)blockIdx.x * N + t] = acc[t];
    }
}

/* One block per column: y[c] = sum over s of partial[s * N + c]. */
__global__ void __launch_bounds__(kThreads) sum_rows_finish_narrow_kernel(int S, int N,
                                                                          const double *__restrict__ partial,
                                                                          float *__restrict__ y) {
    __shared__ double sh[32];
    const int c = blockIdx.x;
    double a = 0.0;
    for (int s = threadIdx.x; s < S; s += blockDim.x) a += partial[(int64_t)s * N + c];
    a = block_sum(a, sh);
    if (threadIdx.x == 0) y[c] = (float)a;
}

/* ---- sum_rows, wide: block (32, 8), blockIdx.x = 32-column tile, blockIdx.y = row range ---- */
template <bool FINAL>
__global__ void __launch_bounds__(kThreads, kReduceMinBlocksPerSM)
    sum_rows_wide_kernel(int64_t M, int64_t N, int64_t rows_per,
                                                                 const float *__restrict__ x,
                                                                 double *__restrict__ partial,
                                                                 float *__restrict__ y) {
    __shared__ double acc[8][33];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int64_t n = (int64_t)blockIdx.x * 32 + tx;
    const int64_t r0 = (int64_t)blockIdx.y * rows_per;
    const int64_t r1 = r0 + rows_per < M ? r0 + rows_per : M;
    double a = 0.0;
    if (n < N) {
        int64_t m = r0 + ty;
        const float *p = x + m * N + n;
        const int64_t s8 = 8 * N;
        for (; m + 56 < r1; m += 64, p += 8 * s8) {
            float v[8];
#pragma unroll
            for (int k = 0; k < 8; k++) v[k] = p[k * s8];
#pragma unroll
            for (int k = 0; k < 8; k++) a += (double)v[k];
        }
        for (; m < r1; m += 8, p += s8) a += (double)p[0];
    }
    acc[ty][tx] = a;
    __syncthreads();
    if (ty < 4) acc[ty][tx] += acc[ty + 4][tx];
    __syncthreads();
    if (ty < 2) acc[ty][tx] += acc[ty + 2][tx];
    __syncthreads();
    if (ty == 0 && n < N) {
        const double v = acc[0][tx] + acc[1][tx];
        if (FINAL)
            y[n] = (float)v;
        else
            partial[(int64_t)blockIdx.y * N + n] = v;
    }
}

/* One thread per column: the row ranges' partials in order. */
__global__ void __launch_bounds__(kThreads) sum_rows_finish_wide_kernel(int S, int64_t N,
                                                                        const double *__restrict__ partial,
                                                                        float *__restrict__ y) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t n = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; n < N; n += stride) {
        double a = 0.0;
        for (int s = 0; s < S; s++) a += partial[(int64_t)s * N + n];
        y[n] = (float)a;
    }
}

/* ---- sum of n elements: block b adds [b*per, min(n, (b+1)*per)); per % 4 == 0 ---- */
template <bool V, bool FINAL>
__global__ void __launch_bounds__(kThreads, kReduceMinBlocksPerSM)
    sum_kernel(int64_t n, int64_t per, const float *__restrict__ x,
                                                       double *__restrict__ partial, float *__restrict__ out) {
    __shared__ double sh[32];
    const int t = threadIdx.x;
    const int64_t b0 = (int64_t)blockIdx.x * per;
    const int64_t b1 = b0 + per < n ? b0 + per : n;
    double a = 0.0;
    if (V) {
        const int64_t j1 = b1 >> 2; /* b0 is a multiple of 4 */
        int64_t j = (b0 >> 2) + t;
        for (; j + 3 * kThreads < j1; j += 4 * kThreads) {
            const float4 v0 = ld4(x, j), v1 = ld4(x, j + kThreads), v2 = ld4(x, j + 2 * kThreads),
                         v3 = ld4(x, j + 3 * kThreads);
            a += (double)v0.x; a += (double)v0.y; a += (double)v0.z; a += (double)v0.w;
            a += (double)v1.x; a += (double)v1.y; a += (double)v1.z; a += (double)v1.w;
            a += (double)v2.x; a += (double)v2.y; a += (double)v2.z; a += (double)v2.w;
            a += (double)v3.x; a += (double)v3.y; a += (double)v3.z; a += (double)v3.w;
        }
        for (; j < j1; j += kThreads) {
            const float4 v = ld4(x, j);
            a += (double)v.x; a += (double)v.y; a += (double)v.z; a += (double)v.w;
        }
        const int64_t i = (j1 << 2) + t;
        if (i < b1) a += (double)x[i];
    } else {
        int64_t i = b0 + t;
        for (; i + 3 * kThreads < b1; i += 4 * kThreads) {
            const float v0 = x[i], v1 = x[i + kThreads], v2 = x[i + 2 * kThreads], v3 = x[i + 3 * kThreads];
            a += (double)v0; a += (double)v1; a += (double)v2; a += (double)v3;
        }
        for (; i < b1; i += kThreads) a += (double)x[i];
    }
    a = block_sum(a, sh);
    if (t == 0) {
        if (FINAL)
            *out = (float)a;
        else
            partial[blockIdx.x] = a;
    }
}

/* One block: *out = sum of S partials. */
__global__ void __launch_bounds__(kThreads) sum_finish_kernel(int S, const double *__restrict__ partial,
                                                              float *__restrict__ out) {
    __shared__ double sh[32];
    double a = 0.0;
    for (int s = threadIdx.x; s < S; s += blockDim.x) a += partial[s];
    a = block_sum(a, sh);
    if (threadIdx.x == 0) *out = (float)a;
}

/* ---- argmax_rows ---- */
/* Is candidate (v, i) above (bv, bi)? i == INT_MAX marks "no candidate". */
__device__ __forceinline__ bool am_better(float v, int i, float bv, int bi) {
    if (i == INT_MAX) return false;
    if (bi == INT_MAX) return true;
    const bool vn = v != v, bn = bv != bv;
    if (vn || bn) return vn && (!bn || i < bi);
    return v > bv || (v == bv && i < bi);
}

__device__ __forceinline__ void am_warp(float &bv, int &bi) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
        const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (am_better(ov, oi, bv, bi)) {
            bv = ov;
            bi = oi;
        }
    }
}

/* A warp per row. */
__global__ void __launch_bounds__(kThreads) argmax_rows_warp_kernel(int B, int C, const float *__restrict__ x,
                                                                    int32_t *__restrict__ out) {
    const int lane = threadIdx.x & 31;
    const int warps = (gridDim.x * blockDim.x) >> 5;
    for (int b = (blockIdx.x * blockDim.x + threadIdx.x) >> 5; b < B; b += warps) {
        const float *r = x + (int64_t)b * C;
        float bv = 0.0f;
        int bi = INT_MAX;
        for (int j = lane; j < C; j += 32) {
            const float v = r[j];
            if (am_better(v, j, bv, bi)) {
                bv = v;
                bi = j;
            }
        }
        am_warp(bv, bi);
        if (lane == 0) out[b] = bi == INT_MAX ? 0 : bi;
    }
}

/* A block per row (long rows). */
__global__ void __launch_bounds__(kThreads) argmax_rows_block_kernel(int B, int C, const float *__restrict__ x,
                                                                     int32_t *__restrict__ out) {
    __shared__ float sv[kThreads / 32];
    __shared__ int si[kThreads / 32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int b = blockIdx.x; b < B; b += gridDim.x) {
        const float *r = x + (int64_t)b * C;
        float bv = 0.0f;
        int bi = INT_MAX;
        for (int j = threadIdx.x; j < C; j += kThreads) {
            const float v = r[j];
            if (am_better(v, j, bv, bi)) {
                bv = v;
                bi = j;
            }
        }
        am_warp(bv, bi);
        if (lane == 0) {
            sv[warp] = bv;
            si[warp] = bi;
        }
        __syncthreads();
        if (warp == 0) {
            bv = lane < kThreads / 32 ? sv[lane] : 0.0f;
            bi = lane < kThreads / 32 ? si[lane] : INT_MAX;
            am_warp(bv, bi);
            if (lane == 0) out[b] = bi == INT_MAX ? 0 : bi;
        }
        __syncthreads();
    }
}

} // namespace
} // namespace odlk

using namespace odlk;

extern "C" odl_status odl_cuda_sum_rows(int64_t M, int64_t N, const float *x, float *y) {
    if (N <= 0) return ODL_OK;
    if (M < 0) M = 0;
    if (N <= kNarrowMax) {
        const int n = (int)N;
        const Split sp = split_plan(M, cdiv(kMinBlockElems, N), kReduceBlocks);
        if (sp.parts == 1) {
            sum_rows_narrow_kernel<true><<<1, kThreads, 0, stream()>>>(M, n, sp.per, x, nullptr, y);
            ODL_CUDA_LAUNCH_CHECK("sum_rows_narrow_kernel");
            return ODL_OK;
        }
        void *ws = nullptr;
        ODL_CHECK(workspace((size_t)sp.parts * (size_t)N * sizeof(double), &ws));
        sum_rows_narrow_kernel<false><<<sp.parts, kThreads, 0, stream()>>>(M, n, sp.per, x, (double *)ws, nullptr);
        ODL_CUDA_LAUNCH_CHECK("sum_rows_narrow_kernel");
        sum_rows_finish_narrow_kernel<<<n, kThreads, 0, stream()>>>(sp.parts, n, (const double *)ws, y);
        ODL_CUDA_LAUNCH_CHECK("sum_rows_finish_narrow_kernel");
        return ODL_OK;
    }
    const int64_t tiles = cdiv(N, 32);
    if (tiles > INT_MAX) return ODL_ERR(ODL_E_UNSUPPORTED, "sum_rows: N=%lld is too large", (long long)N);
    const Split sp = split_plan(M, 64, reduce_parts_cap(tiles));
    const dim3 grid((unsigned)tiles, (unsigned)sp.parts), block(32, 8);
    if (sp.parts == 1) {
        sum_rows_wide_kernel<true><<<grid, block, 0, stream()>>>(M, N, sp.per, x, nullptr, y);
        ODL_CUDA_LAUNCH_CHECK("sum_rows_wide_kernel");
        return ODL_OK;
    }
    void *ws = nullptr;
    ODL_CHECK(workspace((size_t)sp.parts * (size_t)N * sizeof(double), &ws));
    sum_rows_wide_kernel<false><<<grid, block, 0, stream()>>>(M, N, sp.per, x, (double *)ws, nullptr);
    ODL_CUDA_LAUNCH_CHECK("sum_rows_wide_kernel");
    sum_rows_finish_wide_kernel<<<grid_for(N, kThreads), kThreads, 0, stream()>>>(sp.parts, N, (const double *)ws, y);
    ODL_CUDA_LAUNCH_CHECK("sum_rows_finish_wide_kernel");
    return ODL_OK;
}

extern "C" odl_status odl_cuda_sum(int64_t n, const float *x, float *out) {
    if (n < 0) n = 0;
    const bool v = aligned16(x);
    int64_t parts = cdiv(n, 2 * kMinBlockElems);
    if (parts > kReduceBlocks) parts = kReduceBlocks;
    if (parts < 1) parts = 1;
    int64_t per = (cdiv(n, parts) + 3) & ~(int64_t)3;
    if (per < 4) per = 4;
    parts = cdiv(n, per);
    if (parts < 1) parts = 1;
    if (parts == 1) {
        if (v)
            sum_kernel<true, true><<<1, kThreads, 0, stream()>>>(n, per, x, nullptr, out);
        else
            sum_kernel<false, true><<<1, kThreads, 0, stream()>>>(n, per, x, nullptr, out);
        ODL_CUDA_LAUNCH_CHECK("sum_kernel");
        return ODL_OK;
    }
    void *ws = nullptr;
    ODL_CHECK(workspace((size_t)parts * sizeof(double), &ws));
    if (v)
        sum_kernel<true, false><<<(unsigned)parts, kThreads, 0, stream()>>>(n, per, x, (double *)ws, nullptr);
    else
        sum_kernel<false, false><<<(unsigned)parts, kThreads, 0, stream()>>>(n, per, x, (double *)ws, nullptr);
    ODL_CUDA_LAUNCH_CHECK("sum_kernel");
    sum_finish_kernel<<<1, kThreads, 0, stream()>>>((int)parts, (const double *)ws, out);
    ODL_CUDA_LAUNCH_CHECK("sum_finish_kernel");
    return ODL_OK;
}

extern "C" odl_status odl_cuda_argmax_rows(int B, int C, const float *x, int32_t *out) {
    if (B <= 0) return ODL_OK;
    if (C > 2048) {
        argmax_rows_block_kernel<<<grid_for(B, 1), kThreads, 0, stream()>>>(B, C, x, out);
        ODL_CUDA_LAUNCH_CHECK("argmax_rows_block_kernel");
        return ODL_OK;
    }
    argmax_rows_warp_kernel<<<grid_for_kernel((const void *)argmax_rows_warp_kernel, (int64_t)B * 32, kThreads),
                              kThreads, 0, stream()>>>(B, C, x, out);
    ODL_CUDA_LAUNCH_CHECK("argmax_rows_warp_kernel");
    return ODL_OK;
}
