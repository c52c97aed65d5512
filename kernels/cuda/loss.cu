/* CUDA log-softmax + negative log-likelihood (PyTorch's F.log_softmax followed by F.nll_loss with mean
 * reduction). Formulas: odl/backend.h; CPU twin: kernels/cpu/loss.c, whose arithmetic is kept:
 *   forward, per row: m = max_j x_j (a NaN anywhere makes m NaN, as the CPU's `x > m || isnan(x)`);
 *     s = sum_j exp((double)x_j - m) in double when m is finite; lse = m + log(s) (= m when m is not
 *     finite: an all -inf row gives NaN, as PyTorch); logprobs_j = (float)((double)x_j - lse);
 *     loss = (float)(-(sum_b ((double)x[b, label_b] - lse_b)) / B), NaN for B == 0.
 *   backward: g = dloss / B (float); dlogits_j = expf(lp_j) * g, at the label (expf(lp_j) - 1) * g.
 *
 * Forward: one warp per row (a block of 256 per row when C > 1024): lanes take columns j = lane,
 * lane + 32, ..., keep a NaN-propagating max and a double sum in column order, and meet in fixed xor
 * trees; lane 0 stores the row's term (double) in the workspace. A single block then adds the B terms
 * in a fixed tree and writes the mean to the 1-float loss buffer: deterministic, no atomics.
 * Backward: one thread per element (row from odlk::FastDiv).
 *
 * Labels outside [0, C): the kernels never read outside the row; such a row's loss term and its
 * dlogits row are NaN. The same single block (forward) or a small check kernel (backward) records the
 * first bad row in the workspace, and the entry point copies that word back and returns ODL_E_INVAL
 * naming the row and label, as the CPU does. That copy waits for the stream (one synchronisation per
 * call). odl_backend_set_label_check(0) or ODL_CUDA_LABEL_CHECK=0 in the environment skip it (fully asynchronous; bad labels then
 * only show as NaN); it is also skipped while the stream is being captured into a CUDA graph, where a
 * synchronisation is not allowed. Unlike the CPU, logprobs/dlogits are written before the error is
 * known.
 */
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops_util.cuh"

namespace odlk {
namespace {

constexpr int kBlockRowC = 1024; /* C above this: a block of 256 per row */

__device__ __forceinline__ float nanmax(float a, float b) { return (a != a || b != b) ? NAN : (a > b ? a : b); }

/* Group-wide (G = 32: warp, G = kThreads: block) max and sum, result in every thread. sh: 32 slots. */
template <int G>
__device__ __forceinline__ float group_max(float v, float *sh) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = nanmax(v, __shfl_xor_sync(0xffffffffu, v, o));
    if (G == 32) return v;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    v = lane < G / 32 ? sh[lane] : -INFINITY;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = nanmax(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

template <int G>
__device__ __forceinline__ double group_sum(double v, double *sh) {
    v = warp_sum(v);
    if (G == 32) return v;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    return warp_sum(lane < G / 32 ? sh[lane] : 0.0);
}

/* Rows handled by groups of G threads (G = 32: several rows per block; G = kThreads: one). */
template <int G>
__global__ void __launch_bounds__(kThreads, 4) lsm_fwd_kernel(int B, int C, const float *__restrict__ x,
                                                           const int32_t *__restrict__ labels,
                                                           float *__restrict__ lp, double *__restrict__ term) {
    __shared__ float shf[32];
    __shared__ double shd[32];
    const int r = threadIdx.x % G;
    const int groups = (gridDim.x * blockDim.x) / G;
    /* every thread of a block runs the same number of iterations when G == kThreads */
    for (int b = (blockIdx.x * blockDim.x + threadIdx.x) / G; b < B; b += groups) {
        const float *xr = x + (int64_t)b * C;
        float m = -INFINITY;
        for (int j = r; j < C; j += G) {
            const float v = xr[j];
            if (v > m || v != v) m = v;
        }
        m = group_max<G>(m, shf);
        const bool fin = isfinite(m);
        double s = 0.0;
        if (fin)
            for (int j = r; j < C; j += G) s += exp((double)xr[j] - (double)m);
        s = group_sum<G>(s, shd);
        const double lse = fin ? (double)m + log(s) : (double)m;
        float *lr = lp + (int64_t)b * C;
        for (int j = r; j < C; j += G) lr[j] = (float)((double)xr[j] - lse);
        if (r == 0) {
            const int lab = labels[b];
            term[b] = (lab >= 0 && lab < C) ? (double)xr[lab] - lse : (double)NAN;
        }
    }
}

/* One block: the first row with a label outside [0, C) into err[0..1] ({INT_MAX, 0} when none). */
__device__ __forceinline__ void find_bad_label(int B, int C, const int32_t *__restrict__ labels,
                                               int *__restrict__ err) {
    __shared__ int sh[kThreads / 32];
    int bad = INT_MAX;
    for (int b = threadIdx.x; b < B; b += blockDim.x) {
        const int l = labels[b];
        if ((l < 0 || l >= C) && b < bad) bad = b;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) bad = min(bad, __shfl_xor_sync(0xffffffffu, bad, o));
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = bad;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 0; w < kThreads / 32; w++) bad = min(bad, sh[w]);
        err[0] = bad;
        err[1] = bad == INT_MAX ? 0 : labels[bad];
    }
}

/* One block: *loss = -(sum of the B terms) / B; the label check. */
__global__ void __launch_bounds__(kThreads) lsm_loss_kernel(int B, int C, const double *__restrict__ term,
                                                            const int32_t *__restrict__ labels,
                                                            float *__restrict__ loss, int *__restrict__ err) {
    __shared__ double sh[32];
    double a = 0.0;
    for (int b = threadIdx.x; b < B; b += blockDim.x) a += term[b];
    a = block_sum(a, sh);
    if (threadIdx.x == 0) *loss = B > 0 ? (float)(-a / (double)B) : NAN;
    find_bad_label(B, C, labels, err);
}

__global__ void __launch_bounds__(kThreads) label_check_kernel(int B, int C, const int32_t *__restrict__ labels,
                                                               int *__restrict__ err) {
    find_bad_label(B, C, labels, err);
}

template <bool BIG>
__global__ void ODLK_MAXNREG32 lsm_bwd_kernel(int64_t n, int C, FastDiv fdC,
                                                              const float *__restrict__ lp,
                                                              const int32_t *__restrict__ labels, float g,
                                                              float *__restrict__ d) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        int b, j;
        if (BIG) {
            b = (int)(i / C);
            j = (int)(i - (int64_t)b * C);
        } else {
            fdC.divmod((int)i, b, j);
        }
        const int lab = labels[b];
        const float e = expf(lp[i]);
        float v;
        if (lab < 0 || lab >= C)
            v = NAN;
        else
            v = j == lab ? (e - 1.0f) * g : e * g;
        d[i] = v;
    }
}

/* Whether to copy the label check back (see the file comment). */
bool label_check_wanted() {
    if (!odl_backend_label_check()) return false;
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream(), &cs) != cudaSuccess) {
        (void)cudaGetLastError();
        return false;
    }
    return cs == cudaStreamCaptureStatusNone;
}

odl_status label_check_result(const char *op, int C, const int *err_dev) {
    if (!label_check_wanted()) return ODL_OK;
    int err[2] = {INT_MAX, 0};
    ODL_CUDA_CALL(cudaMemcpyAsync(err, err_dev, sizeof err, cudaMemcpyDeviceToHost, stream()));
    ODL_CUDA_CALL(cudaStreamSynchronize(stream()));
    if (err[0] != INT_MAX)
        return ODL_ERR(ODL_E_INVAL, "%s: labels[%d] = %d is outside [0, %d)", op, err[0], err[1], C);
    return ODL_OK;
}

} // namespace
} // namespace odlk

using namespace odlk;

extern "C" odl_status odl_cuda_log_softmax_nll_fwd(int B, int C, const float *logits, const int32_t *labels,
                                                   float *logprobs, float *loss) {
    if (B < 0) B = 0;
    /* workspace: err (2 ints, padded to 16 bytes), then B doubles */
    void *ws = nullptr;
    ODL_CHECK(workspace(16 + (size_t)B * sizeof(double), &ws));
    int *err = (int *)ws;
    double *term = (double *)((char *)ws + 16);
    if (B > 0 && C > 0) {
        if (C > kBlockRowC) {
            const int res = resident_blocks((const void *)lsm_fwd_kernel<kThreads>, kThreads);
            lsm_fwd_kernel<kThreads><<<grid_for(B, 1, res), kThreads, 0, stream()>>>(B, C, logits, labels, logprobs,
                                                                                     term);
        } else {
            lsm_fwd_kernel<32><<<grid_for_kernel((const void *)lsm_fwd_kernel<32>, (int64_t)B * 32, kThreads), kThreads,
                                 0, stream()>>>(B, C, logits, labels, logprobs, term);
        }
        ODL_CUDA_LAUNCH_CHECK("lsm_fwd_kernel");
    }
    lsm_loss_kernel<<<1, kThreads, 0, stream()>>>(C > 0 ? B : 0, C, term, labels, loss, err);
    ODL_CUDA_LAUNCH_CHECK("lsm_loss_kernel");
    if (B > 0 && C <= 0) return ODL_ERR(ODL_E_INVAL, "log_softmax_nll: C = %d with B = %d rows", C, B);
    return label_check_result("log_softmax_nll", C, err);
}

extern "C" odl_status odl_cuda_log_softmax_nll_bwd(int B, int C, const float *logprobs, const int32_t *labels,
                                                   float dloss, float *dlogits) {
    if (B <= 0 || C <= 0) return ODL_OK;
    const float g = dloss / (float)B;
    const int64_t n = (int64_t)B * C;
    void *ws = nullptr;
    ODL_CHECK(workspace(16, &ws));
    int *err = (int *)ws;
    void (*k)(int64_t, int, FastDiv, const float *, const int32_t *, float, float *) =
        n <= INT_MAX ? lsm_bwd_kernel<false> : lsm_bwd_kernel<true>;
    k<<<grid_for_kernel((const void *)k, n, kThreads), kThreads, 0, stream()>>>(n, C, FastDiv(C), logprobs, labels, g,
                                                                              dlogits);
    ODL_CUDA_LAUNCH_CHECK("lsm_bwd_kernel");
    if (!label_check_wanted()) return ODL_OK;
    label_check_kernel<<<1, kThreads, 0, stream()>>>(B, C, labels, err);
    ODL_CUDA_LAUNCH_CHECK("label_check_kernel");
    return label_check_result("log_softmax_nll", C, err);
}
