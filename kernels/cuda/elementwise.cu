/* CUDA element-wise kernels: activations and their gradients, dropout, add, mul, scale, axpy and fill.
 * Formulas: odl/backend.h; CPU twin: kernels/cpu/elementwise.c, whose float operations and their order
 * are kept here (products and sums are written with __fmul_rn/__fadd_rn so that nvcc does not contract
 * them into FMAs, which the CPU build never does): add, mul, scale, axpy, fill, ReLU and dropout give
 * bitwise the CPU's results; SiLU and sigmoid differ only through expf (CUDA's expf is within 2 ulp).
 *   relu' : dx = x <= 0 ? 0 : dy          (a NaN input passes the gradient, as threshold_backward)
 *   silu' : s = 1/(1 + e^-x); dx = dy * s * (1 + x * (1 - s))
 *   sigmoid': dx = dy * (1 - y) * y, y the forward output (recomputed from x when y is NULL)
 *   dropout: keep element i when odl_philox_uniform(seed, offset, i) >= p; y = keep ? x * scale : 0,
 *     scale = 1/(1 - p) rounded once to float on the host (a dropped inf or NaN gives 0, as the CPU).
 *
 * Design: one grid-stride kernel per operation (a functor over up to three inputs), capped at 32
 * registers (ODLK_MAXNREG32) and sized by odlk::grid_for_kernel to exactly one resident wave (8 blocks
 * of 256 per SM on an H200). When every pointer is 16-byte aligned the loop moves one float4 per input
 * and iteration (at 2048 threads per SM that keeps 32 KB per input stream in flight on every SM, more
 * than HBM latency times bandwidth needs), and the first n % 4 threads of the grid finish the tail;
 * otherwise it moves single floats. Dropout gives each thread whole Philox blocks: one Philox4x32-10
 * call yields the four words of elements 4j..4j+3 (odl/rng.h stream layout), i.e. exactly one float4.
 * y may alias an input (in-place use): each element is read before it is written, by the same thread.
 */
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops_util.cuh"
#include "odl/rng.h"

namespace odlk {
namespace {

/* ---- functors: y = op(a, b, c) for one element ---- */
struct OpCopy {
    __device__ float operator()(float a, float, float) const { return a; }
};
template <int ACT>
struct OpAct {
    __device__ float operator()(float a, float, float) const { return act_apply(ACT, a); }
};
struct OpReluBwd { /* a = x, b = dy */
    __device__ float operator()(float x, float dy, float) const { return x <= 0.0f ? 0.0f : dy; }
};
struct OpSiluBwd { /* a = x, b = dy */
    __device__ float operator()(float x, float dy, float) const {
        float s = 1.0f / (1.0f + expf(-x));
        return __fmul_rn(__fmul_rn(dy, s), __fadd_rn(1.0f, __fmul_rn(x, 1.0f - s)));
    }
};
struct OpSigmoidBwdY { /* a = y, b = dy */
    __device__ float operator()(float y, float dy, float) const { return __fmul_rn(__fmul_rn(dy, 1.0f - y), y); }
};
struct OpSigmoidBwdX { /* a = x, b = dy */
    __device__ float operator()(float x, float dy, float) const {
        float s = 1.0f / (1.0f + expf(-x));
        return __fmul_rn(__fmul_rn(dy, 1.0f - s), s);
    }
};
struct OpAdd {
    __device__ float operator()(float a, float b, float) const { return __fadd_rn(a, b); }
};
struct OpMul {
    __device__ float operator()(float a, float b, float) const { return __fmul_rn(a, b); }
};
struct OpScale {
    float alpha;
    __device__ float operator()(float a, float, float) const { return __fmul_rn(alpha, a); }
};
struct OpAxpy { /* a = x, b = y */
    float alpha;
    __device__ float operator()(float x, float y, float) const { return __fadd_rn(y, __fmul_rn(alpha, x)); }
};
struct OpFill {
    float value;
    __device__ float operator()(float, float, float) const { return value; }
};

template <class Op>
__device__ __forceinline__ float4 apply4(const Op &op, float4 a, float4 b, float4 c) {
    return make_float4(op(a.x, b.x, c.x), op(a.y, b.y, c.y), op(a.z, b.z, c.z), op(a.w, b.w, c.w));
}

/* y[i] = op(a[i], b[i], c[i]) for i < n; inputs beyond NIN are not read. V: all pointers 16-byte
 * aligned (float4 path). */
template <int NIN, bool V, class Op>
__global__ void ODLK_MAXNREG32 map_kernel(int64_t n, const float *a, const float *b, const float *c,
                                                       float *y, Op op) {
    const int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    if (V) {
        const int64_t n4 = n >> 2;
        const float4 z = make_float4(0.f, 0.f, 0.f, 0.f);
        for (int64_t j = tid; j < n4; j += stride) {
            const float4 a0 = NIN > 0 ? ld4(a, j) : z;
            const float4 b0 = NIN > 1 ? ld4(b, j) : z;
            const float4 c0 = NIN > 2 ? ld4(c, j) : z;
            st4(y, j, apply4(op, a0, b0, c0));
        }
        const int64_t i = (n4 << 2) + tid;
        if (i < n)
            y[i] = op(NIN > 0 ? a[i] : 0.0f, NIN > 1 ? b[i] : 0.0f, NIN > 2 ? c[i] : 0.0f);
    } else {
        for (int64_t i = tid; i < n; i += stride)
            y[i] = op(NIN > 0 ? a[i] : 0.0f, NIN > 1 ? b[i] : 0.0f, NIN > 2 ? c[i] : 0.0f);
    }
}

template <int NIN, class Op>
odl_status launch_map(const char *name, int64_t n, const float *a, const float *b, const float *c, float *y,
                      Op op) {
    if (n <= 0) return ODL_OK;
    const bool v = aligned16(y) && (NIN < 1 || aligned16(a)) && (NIN < 2 || aligned16(b)) &&
                   (NIN < 3 || aligned16(c));
    int64_t work = v ? (n >> 2) : n;
    if (work < 1) work = 1;
    void (*k)(int64_t, const float *, const float *, const float *, float *, Op) =
        v ? map_kernel<NIN, true, Op> : map_kernel<NIN, false, Op>;
    k<<<grid_for_kernel((const void *)k, work, kThreads), kThreads, 0, stream()>>>(n, a, b, c, y, op);
    ODL_CUDA_LAUNCH_CHECK(name);
    return ODL_OK;
}

/* ---- dropout ---- */
__device__ __forceinline__ float drop1(uint32_t w, float p, float scale, float x) {
    const float u = (float)(w >> 8) * (1.0f / 16777216.0f); /* odl_philox_uniform */
    return u >= p ? __fmul_rn(x, scale) : 0.0f;
}

/* Thread-per-Philox-block: block j covers elements 4j..4j+3. V: x and y 16-byte aligned. The offset is
 * `offset`, plus *base when base is not NULL (odl_step_scalars.rng_offset, read when the kernel runs). */
template <bool V>
__global__ void ODLK_MAXNREG32 dropout_kernel(int64_t n, float p, float scale, uint64_t seed,
                                                           uint64_t offset, const uint64_t *base, const float *x,
                                                           float *y) {
    const int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    const int64_t nblk = (n + 3) >> 2;
    if (base) offset += *base;
    const uint32_t o0 = (uint32_t)offset, o1 = (uint32_t)(offset >> 32);
    const uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int64_t j = tid; j < nblk; j += stride) {
        const odl_philox_out r = odl_philox4x32_10((uint32_t)j, (uint32_t)((uint64_t)j >> 32), o0, o1, k0, k1);
        const int64_t i0 = j << 2;
        if (V && i0 + 3 < n) {
            float4 v = ld4(x, j);
            v.x = drop1(r.v[0], p, scale, v.x);
            v.y = drop1(r.v[1], p, scale, v.y);
            v.z = drop1(r.v[2], p, scale, v.z);
            v.w = drop1(r.v[3], p, scale, v.w);
            st4(y, j, v);
        } else {
#pragma unroll
            for (int k = 0; k < 4; k++)
                if (i0 + k < n) y[i0 + k] = drop1(r.v[k], p, scale, x[i0 + k]);
        }
    }
}

} // namespace
} // namespace odlk

using namespace odlk;

extern "C" odl_status odl_cuda_act_fwd(odl_act act, int64_t n, const float *x, float *y) {
    switch (act) {
    case ODL_ACT_RELU: return launch_map<1>("act_fwd relu", n, x, nullptr, nullptr, y, OpAct<ODL_ACT_RELU>());
    case ODL_ACT_SILU: return launch_map<1>("act_fwd silu", n, x, nullptr, nullptr, y, OpAct<ODL_ACT_SILU>());
    case ODL_ACT_SIGMOID:
        return launch_map<1>("act_fwd sigmoid", n, x, nullptr, nullptr, y, OpAct<ODL_ACT_SIGMOID>());
    default:
        if (y == x) return ODL_OK;
        return launch_map<1>("act_fwd none", n, x, nullptr, nullptr, y, OpCopy());
    }
}

extern "C" odl_status odl_cuda_act_bwd(odl_act act, int64_t n, const float *x, const float *y, const float *dy,
                                       float *dx) {
    switch (act) {
    case ODL_ACT_RELU: return launch_map<2>("act_bwd relu", n, x, dy, nullptr, dx, OpReluBwd());
    case ODL_ACT_SILU: return launch_map<2>("act_bwd silu", n, x, dy, nullptr, dx, OpSiluBwd());
    case ODL_ACT_SIGMOID:
        if (y) return launch_map<2>("act_bwd sigmoid", n, y, dy, nullptr, dx, OpSigmoidBwdY());
        return launch_map<2>("act_bwd sigmoid", n, x, dy, nullptr, dx, OpSigmoidBwdX());
    default:
        if (dx == dy) return ODL_OK;
        return launch_map<1>("act_bwd none", n, dy, nullptr, nullptr, dx, OpCopy());
    }
}

static odl_status launch_dropout(int64_t n, float p, uint64_t seed, uint64_t offset, const uint64_t *base,
                                 const float *x, float *y) {
    if (n <= 0) return ODL_OK;
    const float scale = 1.0f / (1.0f - p); /* once, in float, as the CPU and PyTorch */
    const int64_t nblk = (n + 3) >> 2;
    void (*k)(int64_t, float, float, uint64_t, uint64_t, const uint64_t *, const float *, float *) =
        aligned16(x) && aligned16(y) ? dropout_kernel<true> : dropout_kernel<false>;
    k<<<grid_for_kernel((const void *)k, nblk, kThreads), kThreads, 0, stream()>>>(n, p, scale, seed, offset, base, x,
                                                                                    y);
    ODL_CUDA_LAUNCH_CHECK("dropout_kernel");
    return ODL_OK;
}

extern "C" odl_status odl_cuda_dropout_fwd(int64_t n, float p, uint64_t seed, uint64_t offset, const float *x,
                                           float *y) {
    return launch_dropout(n, p, seed, offset, nullptr, x, y);
}

/* Same mask as the forward pass: dx = keep ? dy * scale : 0. */
extern "C" odl_status odl_cuda_dropout_bwd(int64_t n, float p, uint64_t seed, uint64_t offset, const float *dy,
                                           float *dx) {
    return launch_dropout(n, p, seed, offset, nullptr, dy, dx);
}

extern "C" odl_status odl_cuda_dropout_fwd_at(int64_t n, float p, uint64_t seed, const odl_step_scalars *s,
                                              uint64_t layer, const float *x, float *y) {
    return launch_dropout(n, p, seed, layer, &s->rng_offset, x, y);
}

extern "C" odl_status odl_cuda_dropout_bwd_at(int64_t n, float p, uint64_t seed, const odl_step_scalars *s,
                                              uint64_t layer, const float *dy, float *dx) {
    return launch_dropout(n, p, seed, layer, &s->rng_offset, dy, dx);
}

extern "C" odl_status odl_cuda_add(int64_t n, const float *a, const float *b, float *y) {
    return launch_map<2>("add", n, a, b, nullptr, y, OpAdd());
}

extern "C" odl_status odl_cuda_mul(int64_t n, const float *a, const float *b, float *y) {
    return launch_map<2>("mul", n, a, b, nullptr, y, OpMul());
}

extern "C" odl_status odl_cuda_scale(int64_t n, float alpha, const float *x, float *y) {
    return launch_map<1>("scale", n, x, nullptr, nullptr, y, OpScale{alpha});
}

extern "C" odl_status odl_cuda_axpy(int64_t n, float alpha, const float *x, float *y) {
    return launch_map<2>("axpy", n, x, y, nullptr, y, OpAxpy{alpha});
}

extern "C" odl_status odl_cuda_fill(int64_t n, float value, float *y) {
    return launch_map<0>("fill", n, nullptr, nullptr, nullptr, y, OpFill{value});
}
