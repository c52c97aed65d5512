/* CUDA max-pooling over NCHW planes (PyTorch MaxPool2d, floor mode, dilation 1). Shapes: odl/backend.h;
 * CPU twin: kernels/cpu/pool.c, whose semantics are kept exactly:
 *   - padding cells count as -inf; the maximum is the first in scan order (r, then s) among equal values;
 *     a NaN is taken as the maximum (the last NaN of the window: `v > m || isnan(v)`, as PyTorch's CPU
 *     kernel); a window of only -inf values gives the index of its first input cell;
 *   - argmax is the flat index ih*W + iw inside the input plane; a window with no input cell (impossible
 *     when pad <= kernel/2, which odl_maxpool2d_fwd checks) gives -inf and the clamped window start.
 *
 * Forward: one thread per output element (flat index split with odlk::FastDiv), reading the window
 * straight from global memory (neighbouring threads share rows, so the L1 serves the overlap of k5 s1
 * windows). The 2x2 stride-2 unpadded window (MNIST) has its own kernel with one float2 load per window
 * row when W is even and x is 8-byte aligned.
 *
 * Backward, deterministic and without atomics (gather form): one thread per input cell (ih, iw) visits
 * the windows that contain it, p from ceil((ih + pad_h - kh + 1) / stride_h) to (ih + pad_h) / stride_h
 * (clamped to [0, P)), q likewise, in scan order, and adds dy[p, q] when argmax[p, q] == ih*W + iw, to
 * a sum that starts at 0. That is the same additions in the same order as the CPU's zero-fill followed
 * by its scatter loop over windows in scan order, so dx is bitwise the CPU's; overlapping windows
 * (k5 s1 p2) need no special case, and every dx element is written exactly once (no zero-fill pass).
 * The 2x2 stride-2 unpadded window has a kernel of its own: a thread per window writes the window's
 * four cells (and the zeros of an odd last row or column), the same values.
 * Deviation: a window's gradient reaches only a cell inside that window; the CPU would also honour an
 * argmax pointing elsewhere in the plane, which maxpool2d_fwd never produces (when pad <= kernel/2).
 *
 * Limits: N*C*H*W and N*C*P*Q below 2^31 (ODL_E_UNSUPPORTED otherwise).
 */
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops_util.cuh"

namespace odlk {
namespace {

struct PoolGeom {
    int H, W, kh, kw, sh, sw, ph, pw, P, Q;
};

/* General window: one thread per output element o = (plane * P + p) * Q + q. */
__global__ void ODLK_MAXNREG32 maxpool_fwd_kernel(int total, PoolGeom g, FastDiv fdQ, FastDiv fdP,
                                                               const float *__restrict__ x, float *__restrict__ y,
                                                               int32_t *__restrict__ argmax) {
    const int stride = gridDim.x * blockDim.x;
    for (int o = blockIdx.x * blockDim.x + threadIdx.x; o < total; o += stride) {
        int t, q, plane, p;
        fdQ.divmod(o, t, q);
        fdP.divmod(t, plane, p);
        int h0 = p * g.sh - g.ph, h1 = h0 + g.kh;
        int w0 = q * g.sw - g.pw, w1 = w0 + g.kw;
        h0 = h0 < 0 ? 0 : h0;
        h1 = h1 > g.H ? g.H : h1;
        w0 = w0 < 0 ? 0 : w0;
        w1 = w1 > g.W ? g.W : w1;
        const float *xp = x + (int64_t)plane * g.H * g.W;
        float m = -INFINITY;
        int idx = (h0 < g.H ? h0 : g.H - 1) * g.W + (w0 < g.W ? w0 : g.W - 1);
        for (int ih = h0; ih < h1; ih++) {
            const float *row = xp + ih * g.W;
            for (int iw = w0; iw < w1; iw++) {
                const float v = row[iw];
                if (v > m || v != v) {
                    m = v;
                    idx = ih * g.W + iw;
                }
            }
        }
        y[o] = m;
        if (argmax) argmax[o] = idx;
    }
}

/* 2x2 window, stride 2, no padding: the same comparisons in the same order as the general loop (the
 * first cell taken unconditionally equals starting from -inf with that cell first). V2: W even and x
 * 8-byte aligned, so each window row is one float2. */
template <bool V2>
__global__ void ODLK_MAXNREG32 maxpool_fwd_2x2_kernel(int total, int H, int W, FastDiv fdQ,
                                                                   FastDiv fdP, const float *__restrict__ x,
                                                                   float *__restrict__ y,
                                                                   int32_t *__restrict__ argmax) {
    const int stride = gridDim.x * blockDim.x;
    for (int o = blockIdx.x * blockDim.x + threadIdx.x; o < total; o += stride) {
        int t, q, plane, p;
        fdQ.divmod(o, t, q);
        fdP.divmod(t, plane, p);
        const int i00 = 2 * p * W + 2 * q; /* flat index of the window's first cell inside the plane */
        const float *r0 = x + (int64_t)plane * H * W + i00, *r1 = r0 + W;
        float v00, v01, v10, v11;
        if (V2) {
            const float2 u = *reinterpret_cast<const float2 *>(r0), l = *reinterpret_cast<const float2 *>(r1);
            v00 = u.x;
            v01 = u.y;
            v10 = l.x;
            v11 = l.y;
        } else {
            v00 = r0[0];
            v01 = r0[1];
            v10 = r1[0];
            v11 = r1[1];
        }
        float m = v00;
        int idx = i00;
        if (v01 > m || v01 != v01) {
            m = v01;
            idx = i00 + 1;
        }
        if (v10 > m || v10 != v10) {
            m = v10;
            idx = i00 + W;
        }
        if (v11 > m || v11 != v11) {
            m = v11;
            idx = i00 + W + 1;
        }
        y[o] = m;
        if (argmax) argmax[o] = idx;
    }
}

/* Backward of the 2x2 stride-2 unpadded window, whose windows do not overlap: one thread per window
 * writes its four cells (dy at the argmax cell, 0 elsewhere; 0 + dy as the CPU's zero-fill and
 * scatter give) and, for the last window of a row or column, the zeros of the odd row/column that no
 * window covers. Same values as the gather kernel with a quarter of the threads and no division per
 * cell. V2: W even and dx 8-byte aligned (float2 stores). */
template <bool V2>
__global__ void ODLK_MAXNREG32 maxpool_bwd_2x2_kernel(int total, int H, int W, int P, int Q,
                                                                      FastDiv fdQ, FastDiv fdP,
                                                                      const float *__restrict__ dy,
                                                                      const int32_t *__restrict__ argmax,
                                                                      const float *__restrict__ relu_y,
                                                                      float *__restrict__ dx) {
    const int stride = gridDim.x * blockDim.x;
    for (int o = blockIdx.x * blockDim.x + threadIdx.x; o < total; o += stride) {
        int t, q, plane, p;
        fdQ.divmod(o, t, q);
        fdP.divmod(t, plane, p);
        const int a = argmax[o];
        /* the fused ReLU backward stops where the ReLU's output (the window's maximum) is <= 0, as OpReluBwd */
        const float g = relu_y && relu_y[o] <= 0.0f ? 0.0f : 0.0f + dy[o];
        const int i00 = 2 * p * W + 2 * q;
        float *base = dx + (int64_t)plane * H * W;
        const float v00 = a == i00 ? g : 0.0f, v01 = a == i00 + 1 ? g : 0.0f;
        const float v10 = a == i00 + W ? g : 0.0f, v11 = a == i00 + W + 1 ? g : 0.0f;
        if (V2) {
            *reinterpret_cast<float2 *>(base + i00) = make_float2(v00, v01);
            *reinterpret_cast<float2 *>(base + i00 + W) = make_float2(v10, v11);
        } else {
            base[i00] = v00;
            base[i00 + 1] = v01;
            base[i00 + W] = v10;
            base[i00 + W + 1] = v11;
        }
        if (q == Q - 1)
            for (int w = 2 * Q; w < W; w++) {
                base[2 * p * W + w] = 0.0f;
                base[(2 * p + 1) * W + w] = 0.0f;
            }
        if (p == P - 1) {
            const int w1 = q == Q - 1 ? W : 2 * q + 2;
            for (int h = 2 * P; h < H; h++)
                for (int w = 2 * q; w < w1; w++) base[h * W + w] = 0.0f;
        }
    }
}

/* Gather backward: one thread per input cell i = (plane * H + ih) * W + iw. */
__global__ void ODLK_MAXNREG32 maxpool_bwd_kernel(int total, PoolGeom g, FastDiv fdW, FastDiv fdH,
                                                               FastDiv fdSh, FastDiv fdSw,
                                                               const float *__restrict__ dy,
                                                               const int32_t *__restrict__ argmax,
                                                               const float *__restrict__ relu_y,
                                                               float *__restrict__ dx) {
    const int stride = gridDim.x * blockDim.x;
    const int PQ = g.P * g.Q;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        int t, iw, plane, ih;
        fdW.divmod(i, t, iw);
        fdH.divmod(t, plane, ih);
        /* windows p with p*sh - ph <= ih < p*sh - ph + kh */
        const int th = ih + g.ph - g.kh + 1, tw = iw + g.pw - g.kw + 1;
        const int p0 = th <= 0 ? 0 : fdSh.div(th + g.sh - 1);
        const int q0 = tw <= 0 ? 0 : fdSw.div(tw + g.sw - 1);
        int p1 = fdSh.div(ih + g.ph), q1 = fdSw.div(iw + g.pw);
        p1 = p1 < g.P - 1 ? p1 : g.P - 1;
        q1 = q1 < g.Q - 1 ? q1 : g.Q - 1;
        const int me = ih * g.W + iw;
        const int64_t pbase = (int64_t)plane * PQ;
        float acc = 0.0f;
        for (int p = p0; p <= p1; p++) {
            const int64_t rb = pbase + p * g.Q;
            for (int q = q0; q <= q1; q++)
                if (argmax[rb + q] == me && !(relu_y && relu_y[rb + q] <= 0.0f)) acc += dy[rb + q];
        }
        dx[i] = acc;
    }
}

} // namespace
} // namespace odlk

using namespace odlk;

static odl_status pool_sizes(const char *op, const odl_pool2d_shape *s, int64_t *nx, int64_t *ny) {
    *nx = (int64_t)s->N * s->C * s->H * s->W;
    *ny = (int64_t)s->N * s->C * s->P * s->Q;
    if (*nx > INT_MAX || *ny > INT_MAX)
        return ODL_ERR(ODL_E_UNSUPPORTED, "%s: N=%d C=%d H=%d W=%d P=%d Q=%d: more than 2^31-1 elements per tensor",
                       op, s->N, s->C, s->H, s->W, s->P, s->Q);
    return ODL_OK;
}

static PoolGeom pool_geom(const odl_pool2d_shape *s) {
    PoolGeom g = {s->H, s->W, s->kh, s->kw, s->stride_h, s->stride_w, s->pad_h, s->pad_w, s->P, s->Q};
    return g;
}

extern "C" odl_status odl_cuda_maxpool2d_fwd(const odl_pool2d_shape *s, const float *x, float *y, int32_t *argmax) {
    int64_t nx, ny;
    ODL_CHECK(pool_sizes("maxpool2d_fwd", s, &nx, &ny));
    if (ny == 0) return ODL_OK;
    const int total = (int)ny;
    const FastDiv fdQ(s->Q), fdP(s->P);
    if (s->kh == 2 && s->kw == 2 && s->stride_h == 2 && s->stride_w == 2 && s->pad_h == 0 && s->pad_w == 0) {
        void (*k)(int, int, int, FastDiv, FastDiv, const float *, float *, int32_t *) =
            (s->W & 1) == 0 && ((uintptr_t)x & 7u) == 0 ? maxpool_fwd_2x2_kernel<true> : maxpool_fwd_2x2_kernel<false>;
        k<<<grid_for_kernel((const void *)k, total, kThreads), kThreads, 0, stream()>>>(total, s->H, s->W, fdQ, fdP, x,
                                                                                      y, argmax);
        ODL_CUDA_LAUNCH_CHECK("maxpool_fwd_2x2_kernel");
        return ODL_OK;
    }
    maxpool_fwd_kernel<<<grid_for_kernel((const void *)maxpool_fwd_kernel, total, kThreads), kThreads, 0, stream()>>>(
        total, pool_geom(s), fdQ, fdP, x, y, argmax);
    ODL_CUDA_LAUNCH_CHECK("maxpool_fwd_kernel");
    return ODL_OK;
}

extern "C" odl_status odl_cuda_maxpool2d_bwd(const odl_pool2d_shape *s, const float *dy, const int32_t *argmax,
                                             const float *relu_y, float *dx) {
    int64_t nx, ny;
    ODL_CHECK(pool_sizes("maxpool2d_bwd", s, &nx, &ny));
    if (nx == 0) return ODL_OK;
    if (s->kh == 2 && s->kw == 2 && s->stride_h == 2 && s->stride_w == 2 && s->pad_h == 0 && s->pad_w == 0 &&
        ny > 0) {
        const int windows = (int)ny;
        const FastDiv fdQ(s->Q), fdP(s->P);
        void (*k)(int, int, int, int, int, FastDiv, FastDiv, const float *, const int32_t *, const float *, float *) =
            (s->W & 1) == 0 && ((uintptr_t)dx & 7u) == 0 ? maxpool_bwd_2x2_kernel<true> : maxpool_bwd_2x2_kernel<false>;
        k<<<grid_for_kernel((const void *)k, windows, kThreads), kThreads, 0, stream()>>>(
            windows, s->H, s->W, s->P, s->Q, fdQ, fdP, dy, argmax, relu_y, dx);
        ODL_CUDA_LAUNCH_CHECK("maxpool_bwd_2x2_kernel");
        return ODL_OK;
    }
    const int total = (int)nx;
    const FastDiv fdW(s->W), fdH(s->H), fdSh(s->stride_h), fdSw(s->stride_w);
    maxpool_bwd_kernel<<<grid_for_kernel((const void *)maxpool_bwd_kernel, total, kThreads), kThreads, 0, stream()>>>(
        total, pool_geom(s), fdW, fdH, fdSh, fdSw, dy, argmax, relu_y, dx);
    ODL_CUDA_LAUNCH_CHECK("maxpool_bwd_kernel");
    return ODL_OK;
}
