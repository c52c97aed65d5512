/* CUDA batch normalisation over NCHW, per channel, with PyTorch BatchNorm2d semantics. Formulas:
 * odl/backend.h; CPU twin: kernels/cpu/batchnorm.c, whose float arithmetic is kept operation for
 * operation (written with __fmul_rn/__fadd_rn/__fsub_rn so that nothing is contracted into an FMA):
 *   train statistics in double: mean, sum of squared deviations ss; var = ss/cnt, var_unbiased =
 *     ss/(cnt - 1) (var when cnt == 1); save_invstd = (float)(1/sqrt(var + eps)); running stats
 *     r = (float)(momentum*stat + (1 - momentum)*r) in double;
 *   transform: alpha = invstd*gamma, shift = beta - mean*alpha (float), y = x*alpha + shift; inference
 *     uses invstd = 1/sqrtf(var + eps) in float;
 *   backward: sum = sum(dy), dot = sum((x - mean)*dy) in double; k = (float)(dot*invstd^2/cnt),
 *     gm = (float)(sum/cnt), dx = (dy - gm - (x - mean)*k) * (invstd*gamma); dgamma = dot*invstd,
 *     dbeta = sum.
 * gamma/beta NULL mean 1/0; running statistics, save_*, dx, dgamma, dbeta NULL are skipped.
 * The statistics are double sums in a different order from the CPU's, so they agree with it to double
 * rounding; rounded to float, mean and invstd are then almost always the CPU's bits, and so is y.
 *
 * Design (3 launches for training forward and backward, 2 for inference):
 *   1. statistics: grid (channel, range of the channel's N*HW values); each block reads its range
 *      (float4 when HW % 4 == 0, two in flight per thread; item q of a channel is image q / HWi,
 *      offset q % HWi, odlk::FastDiv)
 *      and accumulates in double; the block's sums meet in block_sum's fixed tree and go to the
 *      workspace. Forward sums are shifted by the channel's first value K (s1 = sum(x - K),
 *      s2 = sum((x - K)^2), ss = s2 - s1^2/cnt, the "shifted data" algorithm), so that one pass over x
 *      gives mean and variance without the cancellation of sum(x^2) - sum(x)^2/cnt; backward sums
 *      dy and (x - mean)*dy.
 *   2. finalisation: a warp per channel adds the ranges' partials in a fixed tree, writes the
 *      per-channel outputs and the transform's coefficients (workspace).
 *   3. transform: one grid-stride pass over the tensor (float4 when HW % 4 == 0), channel =
 *      (item / HWi) % C by FastDiv.
 * The split depends only on the shape (odlk::reduce_parts_cap), so every result is bitwise
 * reproducible.
 * Traffic: training forward reads x twice and writes y; backward reads x and dy twice and writes dx;
 * inference reads x once.
 * Limit: N*C*HW below 2^31 (ODL_E_UNSUPPORTED otherwise).
 */
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops_util.cuh"

namespace odlk {
namespace {

enum { BN_FWD = 0, BN_BWD = 1 };

/* One item of the statistics loop: a float4 (V) or a float of x (and dy). */
template <bool V>
struct BnItem {
    float4 x, g;
};
template <bool V>
__device__ __forceinline__ BnItem<V> bn_load(const float *__restrict__ x, const float *__restrict__ dy, int64_t i,
                                             bool need_dy) {
    BnItem<V> it;
    if (V) {
        it.x = ld4(x, i);
        it.g = need_dy ? ld4(dy, i) : it.x;
    } else {
        it.x = it.g = make_float4(0.f, 0.f, 0.f, 0.f);
        it.x.x = x[i];
        it.g.x = need_dy ? dy[i] : 0.0f;
    }
    return it;
}
/* FWD: a += x - K, b += (x - K)^2; BWD: a += dy, b += (x - K) * dy, lane by lane in order. */
template <int MODE>
__device__ __forceinline__ void bn_acc1(float xv, float gv, double K, double &a, double &b) {
    if (MODE == BN_FWD) {
        const double d = (double)xv - K;
        a += d;
        b += d * d;
    } else {
        a += (double)gv;
        b += ((double)xv - K) * (double)gv;
    }
}
template <int MODE, bool V>
__device__ __forceinline__ void bn_acc(const BnItem<V> &it, double K, double &a, double &b) {
    bn_acc1<MODE>(it.x.x, it.g.x, K, a, b);
    if (V) {
        bn_acc1<MODE>(it.x.y, it.g.y, K, a, b);
        bn_acc1<MODE>(it.x.z, it.g.z, K, a, b);
        bn_acc1<MODE>(it.x.w, it.g.w, K, a, b);
    }
}

/* Statistics of channel blockIdx.x over its items [s*per, min(J, (s+1)*per)), s = blockIdx.y (FWD: two
 * items of x in flight per thread; BWD: one item each of x and dy).
 * FWD: part = {sum(x - K), sum((x - K)^2)}, K = x[0, c, 0]. BWD: part = {sum(dy), sum((x - mean)*dy)}. */
template <int MODE, bool V>
__global__ void __launch_bounds__(kThreads, kReduceMinBlocksPerSM) bn_stats_kernel(
    int C, int HWi, FastDiv fdHW, int J, int per, const float *__restrict__ x, const float *__restrict__ dy,
    const float *__restrict__ mean, double *__restrict__ part) {
    __shared__ double sh[32];
    const int c = blockIdx.x, s = blockIdx.y;
    const int q0 = s * per, q1 = q0 + per < J ? q0 + per : J;
    const double K = MODE == BN_FWD ? (double)x[(int64_t)c * HWi * (V ? 4 : 1)] : (double)mean[c];
    double a = 0.0, b = 0.0;
    constexpr int U = MODE == BN_FWD ? 2 : 1; /* items per thread and iteration (BWD loads two streams) */
    for (int q = q0 + threadIdx.x; q < q1; q += U * kThreads) {
        const int q2 = q + kThreads;
        const bool two = U == 2 && q2 < q1;
        int n, hw;
        fdHW.divmod(q, n, hw);
        const BnItem<V> i0 = bn_load<V>(x, dy, ((int64_t)n * C + c) * HWi + hw, MODE == BN_BWD);
        BnItem<V> i1;
        if (two) {
            fdHW.divmod(q2, n, hw);
            i1 = bn_load<V>(x, dy, ((int64_t)n * C + c) * HWi + hw, MODE == BN_BWD);
        }
        bn_acc<MODE, V>(i0, K, a, b);
        if (two) bn_acc<MODE, V>(i1, K, a, b);
    }
    a = block_sum(a, sh);
    b = block_sum(b, sh);
    if (threadIdx.x == 0) {
        part[((int64_t)c * gridDim.y + s) * 2] = a;
        part[((int64_t)c * gridDim.y + s) * 2 + 1] = b;
    }
}

/* A warp per channel: the S partial pairs of the channel in a fixed tree. */
__device__ __forceinline__ void warp_pair_sum(const double *__restrict__ part, int c, int S, double &a, double &b) {
    const int lane = threadIdx.x & 31;
    a = 0.0;
    b = 0.0;
    for (int s = lane; s < S; s += 32) {
        a += part[((int64_t)c * S + s) * 2];
        b += part[((int64_t)c * S + s) * 2 + 1];
    }
    a = warp_sum(a);
    b = warp_sum(b);
}

__global__ void __launch_bounds__(kThreads) bn_train_finalize_kernel(
    int C, int S, int64_t cnt, const float *__restrict__ x, int HW, const double *__restrict__ part,
    const float *__restrict__ gamma, const float *__restrict__ beta, float *__restrict__ running_mean,
    float *__restrict__ running_var, float momentum, float eps, float *__restrict__ save_mean,
    float *__restrict__ save_invstd, float2 *__restrict__ coef) {
    const int warps = (gridDim.x * blockDim.x) >> 5;
    for (int c = (blockIdx.x * blockDim.x + threadIdx.x) >> 5; c < C; c += warps) {
        double s1, s2;
        warp_pair_sum(part, c, S, s1, s2);
        if ((threadIdx.x & 31) != 0) continue;
        double mean = 0.0, ss = 0.0;
        if (cnt > 0) {
            const double K = (double)x[(int64_t)c * HW];
            mean = K + s1 / (double)cnt;
            ss = s2 - s1 * (s1 / (double)cnt);
            if (ss < 0.0) ss = 0.0;
        }
        const double var = cnt > 0 ? ss / (double)cnt : 0.0;
        const double var_u = cnt > 1 ? ss / (double)(cnt - 1) : var;
        const double invstd = 1.0 / sqrt(__dadd_rn(var, (double)eps));
        const float mean_f = (float)mean, invstd_f = (float)invstd;
        if (save_mean) save_mean[c] = mean_f;
        if (save_invstd) save_invstd[c] = invstd_f;
        const double mo = (double)momentum, om = 1.0 - (double)momentum;
        if (running_mean)
            running_mean[c] = (float)__dadd_rn(__dmul_rn(mo, mean), __dmul_rn(om, (double)running_mean[c]));
        if (running_var)
            running_var[c] = (float)__dadd_rn(__dmul_rn(mo, var_u), __dmul_rn(om, (double)running_var[c]));
        const float g = gamma ? gamma[c] : 1.0f, bt = beta ? beta[c] : 0.0f;
        const float alpha = __fmul_rn(invstd_f, g);
        coef[c] = make_float2(alpha, __fsub_rn(bt, __fmul_rn(mean_f, alpha)));
    }
}

__global__ void __launch_bounds__(kThreads) bn_infer_coef_kernel(int C, const float *__restrict__ gamma,
                                                                 const float *__restrict__ beta,
                                                                 const float *__restrict__ mean,
                                                                 const float *__restrict__ var, float eps,
                                                                 float2 *__restrict__ coef) {
    const int stride = gridDim.x * blockDim.x;
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < C; c += stride) {
        const float invstd = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(var[c], eps)));
        const float g = gamma ? gamma[c] : 1.0f, bt = beta ? beta[c] : 0.0f;
        const float alpha = __fmul_rn(invstd, g);
        coef[c] = make_float2(alpha, __fsub_rn(bt, __fmul_rn(mean[c], alpha)));
    }
}

/* coef[c] = {gm, k, w, mean} */
__global__ void __launch_bounds__(kThreads) bn_bwd_finalize_kernel(int C, int S, int64_t cnt,
                                                                   const double *__restrict__ part,
                                                                   const float *__restrict__ gamma,
                                                                   const float *__restrict__ save_mean,
                                                                   const float *__restrict__ save_invstd,
                                                                   float *__restrict__ dgamma,
                                                                   float *__restrict__ dbeta,
                                                                   float4 *__restrict__ coef) {
    const int warps = (gridDim.x * blockDim.x) >> 5;
    for (int c = (blockIdx.x * blockDim.x + threadIdx.x) >> 5; c < C; c += warps) {
        double sum, dot;
        warp_pair_sum(part, c, S, sum, dot);
        if ((threadIdx.x & 31) != 0) continue;
        const float invstd = save_invstd[c];
        if (dbeta) dbeta[c] = (float)sum;
        if (dgamma) dgamma[c] = (float)(dot * (double)invstd);
        const float g = gamma ? gamma[c] : 1.0f;
        const float k = cnt > 0 ? (float)(dot * (double)invstd * (double)invstd / (double)cnt) : 0.0f;
        const float gm = cnt > 0 ? (float)(sum / (double)cnt) : 0.0f;
        coef[c] = make_float4(gm, k, __fmul_rn(invstd, g), save_mean[c]);
    }
}

/* FWD: y = x*alpha + shift (coef2); BWD: dx = (dy - gm - (x - mean)*k) * w (coef4). Item q: plane q / HWi,
 * channel plane % C. */
template <int MODE, bool V>
__global__ void ODLK_MAXNREG32 bn_transform_kernel(int items, FastDiv fdHW, FastDiv fdC,
                                                                   const float *__restrict__ x,
                                                                   const float *__restrict__ dy,
                                                                   const void *__restrict__ coef,
                                                                   float *__restrict__ out) {
    const int stride = gridDim.x * blockDim.x;
    for (int q = blockIdx.x * blockDim.x + threadIdx.x; q < items; q += stride) {
        int plane, c;
        plane = fdHW.div(q);
        c = plane - fdC.div(plane) * (int)fdC.d;
        if (MODE == BN_FWD) {
            const float2 k = reinterpret_cast<const float2 *>(coef)[c];
            if (V) {
                float4 v = ld4(x, q);
                v.x = __fadd_rn(__fmul_rn(v.x, k.x), k.y);
                v.y = __fadd_rn(__fmul_rn(v.y, k.x), k.y);
                v.z = __fadd_rn(__fmul_rn(v.z, k.x), k.y);
                v.w = __fadd_rn(__fmul_rn(v.w, k.x), k.y);
                st4(out, q, v);
            } else {
                out[q] = __fadd_rn(__fmul_rn(x[q], k.x), k.y);
            }
        } else {
            const float4 k = reinterpret_cast<const float4 *>(coef)[c]; /* gm, k, w, mean */
#define ODL_BN_DX(X, G) __fmul_rn(__fsub_rn(__fsub_rn((G), k.x), __fmul_rn(__fsub_rn((X), k.w), k.y)), k.z)
            if (V) {
                const float4 v = ld4(x, q), g = ld4(dy, q);
                st4(out, q, make_float4(ODL_BN_DX(v.x, g.x), ODL_BN_DX(v.y, g.y), ODL_BN_DX(v.z, g.z),
                                        ODL_BN_DX(v.w, g.w)));
            } else {
                out[q] = ODL_BN_DX(x[q], dy[q]);
            }
#undef ODL_BN_DX
        }
    }
}

struct BnPlan {
    bool v;
    int HWi, J, items;
    Split sp;
};

odl_status bn_plan(const char *op, int N, int C, int64_t HW, const float *x, const float *y2, const float *y3,
                   BnPlan *p) {
    const int64_t total = (int64_t)N * C * HW;
    if (total > INT_MAX)
        return ODL_ERR(ODL_E_UNSUPPORTED, "%s: N=%d C=%d HW=%lld: more than 2^31-1 elements", op, N, C,
                       (long long)HW);
    p->v = HW % 4 == 0 && aligned16(x) && (!y2 || aligned16(y2)) && (!y3 || aligned16(y3));
    p->HWi = (int)(p->v ? HW / 4 : HW);
    p->J = N * p->HWi;
    p->items = (int)((int64_t)N * C * p->HWi);
    p->sp = split_plan(p->J, p->v ? 1024 : 4096, reduce_parts_cap(C));
    return ODL_OK;
}

template <int MODE>
odl_status launch_stats(const BnPlan &p, int C, const float *x, const float *dy, const float *mean, double *part) {
    const dim3 grid((unsigned)C, (unsigned)p.sp.parts);
    const FastDiv fd(p.HWi);
    if (p.v)
        bn_stats_kernel<MODE, true><<<grid, kThreads, 0, stream()>>>(C, p.HWi, fd, p.J, (int)p.sp.per, x, dy, mean,
                                                                     part);
    else
        bn_stats_kernel<MODE, false><<<grid, kThreads, 0, stream()>>>(C, p.HWi, fd, p.J, (int)p.sp.per, x, dy, mean,
                                                                      part);
    ODL_CUDA_LAUNCH_CHECK("bn_stats_kernel");
    return ODL_OK;
}

template <int MODE>
odl_status launch_transform(const BnPlan &p, int C, const float *x, const float *dy, const void *coef, float *out) {
    if (p.items <= 0) return ODL_OK;
    const FastDiv fdHW(p.HWi), fdC(C);
    void (*k)(int, FastDiv, FastDiv, const float *, const float *, const void *, float *) =
        p.v ? bn_transform_kernel<MODE, true> : bn_transform_kernel<MODE, false>;
    k<<<grid_for_kernel((const void *)k, p.items, kThreads), kThreads, 0, stream()>>>(p.items, fdHW, fdC, x, dy, coef,
                                                                                    out);
    ODL_CUDA_LAUNCH_CHECK("bn_transform_kernel");
    return ODL_OK;
}

/* Workspace: C coefficient slots of 16 bytes, then parts*C pairs of doubles. */
odl_status bn_workspace(int C, int parts, void **coef, double **part) {
    void *ws = nullptr;
    const size_t cbytes = (size_t)C * 16;
    ODL_CHECK(workspace(cbytes + (size_t)C * (size_t)parts * 2 * sizeof(double), &ws));
    *coef = ws;
    *part = (double *)((char *)ws + cbytes);
    return ODL_OK;
}

} // namespace
} // namespace odlk

using namespace odlk;

extern "C" odl_status odl_cuda_batchnorm_infer(int N, int C, int64_t HW, const float *x, const float *gamma,
                                               const float *beta, const float *mean, const float *var, float eps,
                                               float *y) {
    if (C <= 0) return ODL_OK;
    BnPlan p = {};
    ODL_CHECK(bn_plan("batchnorm_infer", N, C, HW, x, y, nullptr, &p));
    if (p.items <= 0) return ODL_OK;
    void *coef = nullptr;
    ODL_CHECK(workspace((size_t)C * 16, &coef));
    bn_infer_coef_kernel<<<grid_for(C, kThreads), kThreads, 0, stream()>>>(C, gamma, beta, mean, var, eps,
                                                                           (float2 *)coef);
    ODL_CUDA_LAUNCH_CHECK("bn_infer_coef_kernel");
    return launch_transform<BN_FWD>(p, C, x, nullptr, coef, y);
}

extern "C" odl_status odl_cuda_batchnorm_train_fwd(int N, int C, int64_t HW, const float *x, const float *gamma,
                                                   const float *beta, float *running_mean, float *running_var,
                                                   float momentum, float eps, float *y, float *save_mean,
                                                   float *save_invstd) {
    if (C <= 0) return ODL_OK;
    BnPlan p = {};
    ODL_CHECK(bn_plan("batchnorm_train_fwd", N, C, HW, x, y, nullptr, &p));
    void *coef = nullptr;
    double *part = nullptr;
    ODL_CHECK(bn_workspace(C, p.sp.parts, &coef, &part));
    const int64_t cnt = (int64_t)N * HW;
    if (cnt > 0) ODL_CHECK(launch_stats<BN_FWD>(p, C, x, nullptr, nullptr, part));
    else ODL_CUDA_CALL(cudaMemsetAsync(part, 0, (size_t)C * p.sp.parts * 2 * sizeof(double), stream()));
    bn_train_finalize_kernel<<<grid_for((int64_t)C * 32, kThreads), kThreads, 0, stream()>>>(
        C, p.sp.parts, cnt, x, (int)HW, part, gamma, beta, running_mean, running_var, momentum, eps, save_mean,
        save_invstd, (float2 *)coef);
    ODL_CUDA_LAUNCH_CHECK("bn_train_finalize_kernel");
    return launch_transform<BN_FWD>(p, C, x, nullptr, coef, y);
}

extern "C" odl_status odl_cuda_batchnorm_bwd(int N, int C, int64_t HW, const float *x, const float *dy,
                                             const float *gamma, const float *save_mean, const float *save_invstd,
                                             float *dx, float *dgamma, float *dbeta) {
    if (C <= 0) return ODL_OK;
    BnPlan p = {};
    ODL_CHECK(bn_plan("batchnorm_bwd", N, C, HW, x, dy, dx, &p));
    void *coef = nullptr;
    double *part = nullptr;
    ODL_CHECK(bn_workspace(C, p.sp.parts, &coef, &part));
    const int64_t cnt = (int64_t)N * HW;
    if (cnt > 0) ODL_CHECK(launch_stats<BN_BWD>(p, C, x, dy, save_mean, part));
    else ODL_CUDA_CALL(cudaMemsetAsync(part, 0, (size_t)C * p.sp.parts * 2 * sizeof(double), stream()));
    bn_bwd_finalize_kernel<<<grid_for((int64_t)C * 32, kThreads), kThreads, 0, stream()>>>(
        C, p.sp.parts, cnt, part, gamma, save_mean, save_invstd, dgamma, dbeta, (float4 *)coef);
    ODL_CUDA_LAUNCH_CHECK("bn_bwd_finalize_kernel");
    if (!dx) return ODL_OK;
    return launch_transform<BN_BWD>(p, C, x, dy, coef, dx);
}
