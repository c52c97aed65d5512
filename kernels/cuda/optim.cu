/* CUDA optimiser updates, in place, with the element-wise formulas of torch.optim's single-tensor
 * implementations (odl/backend.h). CPU twin: kernels/cpu/optim.c, whose float arithmetic is kept
 * operation for operation and in the same order, written with __fmul_rn/__fadd_rn/__fdiv_rn/__fsqrt_rn
 * so that nvcc contracts nothing into an FMA (the CPU build never does) and every operation is IEEE
 * round-to-nearest: the CPU and the GPU give bitwise the same parameters and state. Scalars that
 * PyTorch computes in Python (bias corrections, step size, the AdamW decay factor) are computed in double
 * by kernels/step_scalars.h, on the host for the entries that take lr and step as arguments and on the
 * device (step_scalars_advance, one thread) for the *_at entries that read them from an odl_step_scalars
 * when they run (a CUDA graph replays them), with the same operations as the CPU backend, and rounded to
 * float once:
 *   SGD:      g = g + wd*p; buf = step == 1 ? g : momentum*buf + (1 - dampening)*g;
 *             g = nesterov ? g + momentum*buf : buf; p = p + (-lr)*g.        (buf unused when momentum == 0)
 *   Adam(W):  AdamW p = p * (1 - lr*wd); Adam g = g + wd*p; m = b1*m + (1 - b1)*g;
 *             v = b2*v + (1 - b2)*g*g; denom = sqrt(v) / sqrt(1 - b2^step) + eps;
 *             p = p + (-lr / (1 - b1^step)) * (m / denom).
 *   Adadelta: g = g + wd*p; sq = rho*sq + (1 - rho)*g*g; d = sqrt(acc + eps) / sqrt(sq + eps) * g;
 *             acc = rho*acc + (1 - rho)*d*d; p = p + (-lr)*d.
 * Design: one grid-stride kernel per optimiser (one resident wave, odlk::grid_for_kernel), float4 on
 * every stream when all pointers are 16-byte aligned (the first n % 4 threads finish the tail), scalar
 * otherwise.
 * Traffic per element: SGD 16 bytes (12 without momentum), Adam 28, Adadelta 28.
 * The *_group_at entries update up to ODL_OPTIM_GROUP_MAX tensors in one launch (a training step's
 * parameters: one graph node instead of one per parameter), element for element the same arithmetic.
 */
#include <limits.h>
#include <math.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops_util.cuh"
#include "kernels/step_scalars.h"

namespace odlk {
namespace {

struct SgdUpd {
    float lr, momentum, omd, wd; /* omd = 1 - dampening */
    int nesterov, first;
    __device__ __forceinline__ void load(const odl_step_scalars &s) {
        lr = s.lr;
        first = s.first;
    }
    __device__ __forceinline__ void operator()(float &p, float g, float &buf, float &) const {
        if (wd != 0.0f) g = __fadd_rn(g, __fmul_rn(wd, p));
        if (momentum != 0.0f) {
            const float b = first ? g : __fadd_rn(__fmul_rn(momentum, buf), __fmul_rn(omd, g));
            buf = b;
            g = nesterov ? __fadd_rn(g, __fmul_rn(momentum, b)) : b;
        }
        p = __fadd_rn(p, __fmul_rn(-lr, g));
    }
};

struct AdamUpd {
    float b1, omb1, b2, omb2, eps, wd, step_size, bc2_sqrt, decay;
    int decoupled;
    __device__ __forceinline__ void load(const odl_step_scalars &s) {
        step_size = s.step_size;
        bc2_sqrt = s.bc2_sqrt;
        decay = s.decay;
    }
    __device__ __forceinline__ void operator()(float &p, float g, float &m, float &v) const {
        if (decoupled)
            p = __fmul_rn(p, decay);
        else if (wd != 0.0f)
            g = __fadd_rn(g, __fmul_rn(wd, p));
        m = __fadd_rn(__fmul_rn(b1, m), __fmul_rn(omb1, g));
        v = __fadd_rn(__fmul_rn(b2, v), __fmul_rn(__fmul_rn(omb2, g), g));
        const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(v), bc2_sqrt), eps);
        p = __fadd_rn(p, __fmul_rn(-step_size, __fdiv_rn(m, denom)));
    }
};

struct AdadeltaUpd {
    float lr, rho, omr, eps, wd;
    __device__ __forceinline__ void load(const odl_step_scalars &s) { lr = s.lr; }
    __device__ __forceinline__ void operator()(float &p, float g, float &sq, float &acc) const {
        if (wd != 0.0f) g = __fadd_rn(g, __fmul_rn(wd, p));
        sq = __fadd_rn(__fmul_rn(rho, sq), __fmul_rn(__fmul_rn(omr, g), g));
        const float d = __fmul_rn(__fdiv_rn(__fsqrt_rn(__fadd_rn(acc, eps)), __fsqrt_rn(__fadd_rn(sq, eps))), g);
        acc = __fadd_rn(__fmul_rn(rho, acc), __fmul_rn(__fmul_rn(omr, d), d));
        p = __fadd_rn(p, __fmul_rn(-lr, d));
    }
};

template <class U, int NS>
__device__ __forceinline__ void upd_one(const U &upd, float *p, const float *g, float *s1, float *s2, int64_t i) {
    float pi = p[i], a = NS > 0 ? s1[i] : 0.0f, b = NS > 1 ? s2[i] : 0.0f;
    upd(pi, g[i], a, b);
    p[i] = pi;
    if (NS > 0) s1[i] = a;
    if (NS > 1) s2[i] = b;
}

/* Elements 4j .. 4j+3, streams 16-byte aligned. */
template <class U, int NS>
__device__ __forceinline__ void upd_four(const U &upd, float *p, const float *g, float *s1, float *s2, int64_t j) {
    const float4 z = make_float4(0.f, 0.f, 0.f, 0.f);
    float4 pv = ld4(p, j);
    const float4 gv = ld4(g, j);
    float4 a = NS > 0 ? ld4(s1, j) : z, b = NS > 1 ? ld4(s2, j) : z;
    upd(pv.x, gv.x, a.x, b.x);
    upd(pv.y, gv.y, a.y, b.y);
    upd(pv.z, gv.z, a.z, b.z);
    upd(pv.w, gv.w, a.w, b.w);
    st4(p, j, pv);
    if (NS > 0) st4(s1, j, a);
    if (NS > 1) st4(s2, j, b);
}

/* NS: how many state streams (s1, s2) the update reads and writes (SGD: 1 with momentum, else 0). */
/* At most 64 registers (4 blocks of 256 per SM): with four float4 streams and the IEEE division and
 * square root sequences, Adam and Adadelta spill at 40. Four 16-byte loads in flight per thread keep
 * 64 KB per SM in flight at that occupancy. */
/* sc != NULL: the step's scalars come from *sc (read when the kernel runs) instead of upd's. */
template <class U, int NS, bool V>
__global__ void __launch_bounds__(kThreads, 4) optim_kernel(int64_t n, float *p, const float *__restrict__ g,
                                                            float *s1, float *s2, U upd,
                                                            const odl_step_scalars *__restrict__ sc) {
    if (sc) upd.load(*sc);
    const int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    if (V) {
        const int64_t n4 = n >> 2;
        for (int64_t j = tid; j < n4; j += stride) upd_four<U, NS>(upd, p, g, s1, s2, j);
        const int64_t i = (n4 << 2) + tid;
        if (i < n) upd_one<U, NS>(upd, p, g, s1, s2, i);
    } else {
        for (int64_t i = tid; i < n; i += stride) upd_one<U, NS>(upd, p, g, s1, s2, i);
    }
}

template <class U, int NS>
odl_status launch_optim(const char *name, int64_t n, float *p, const float *g, float *s1, float *s2, U upd,
                        const odl_step_scalars *sc = nullptr) {
    if (n <= 0) return ODL_OK;
    const bool v = aligned16(p) && aligned16(g) && (NS < 1 || aligned16(s1)) && (NS < 2 || aligned16(s2));
    int64_t work = v ? (n >> 2) : n;
    if (work < 1) work = 1;
    void (*k)(int64_t, float *, const float *, float *, float *, U, const odl_step_scalars *) =
        v ? optim_kernel<U, NS, true> : optim_kernel<U, NS, false>;
    k<<<grid_for_kernel((const void *)k, work, kThreads), kThreads, 0, stream()>>>(n, p, g, s1, s2, upd, sc);
    ODL_CUDA_LAUNCH_CHECK(name);
    return ODL_OK;
}

/* A grouped update (odl_optim_group): entry e takes the blocks [first[e], first[e + 1]), a block kGroupChunk
 * consecutive elements of its entry, float4 where bit e of vec says the entry's streams are 16-byte aligned
 * (the tail past its last whole float4 in its last block). Each element goes through the same upd as
 * optim_kernel's, so the bits are those of one optim_kernel launch per entry. */
constexpr int kGroupChunk = kThreads * 16;

struct GroupLaunch {
    odl_optim_group t;
    int first[ODL_OPTIM_GROUP_MAX + 1];
    unsigned vec;
};

template <class U, int NS>
__global__ void __launch_bounds__(kThreads, 4) optim_group_kernel(const GroupLaunch L, U upd,
                                                                  const odl_step_scalars *__restrict__ sc) {
    upd.load(*sc);
    int e = 0;
    while (e + 1 < L.t.count && (int)blockIdx.x >= L.first[e + 1]) e++;
    float *p = L.t.p[e], *s1 = L.t.s1[e], *s2 = L.t.s2[e];
    const float *__restrict__ g = L.t.g[e];
    const int64_t lo = (int64_t)(blockIdx.x - L.first[e]) * kGroupChunk;
    const int64_t hi = lo + kGroupChunk < L.t.n[e] ? lo + kGroupChunk : L.t.n[e];
    if ((L.vec >> e) & 1u) {
        for (int64_t j = (lo >> 2) + threadIdx.x; j < (hi >> 2); j += kThreads) upd_four<U, NS>(upd, p, g, s1, s2, j);
        const int64_t i = ((hi >> 2) << 2) + threadIdx.x;
        if (i < hi) upd_one<U, NS>(upd, p, g, s1, s2, i);
    } else {
        for (int64_t i = lo + threadIdx.x; i < hi; i += kThreads) upd_one<U, NS>(upd, p, g, s1, s2, i);
    }
}

template <class U, int NS>
odl_status launch_group(const char *name, const odl_optim_group *t, U upd, const odl_step_scalars *sc) {
    if (t->count < 1 || t->count > ODL_OPTIM_GROUP_MAX)
        return ODL_ERR(ODL_E_INVAL, "%s: %d entries (1 to %d)", name, t->count, ODL_OPTIM_GROUP_MAX);
    GroupLaunch L;
    L.t = *t;
    L.vec = 0;
    int64_t blocks = 0;
    for (int e = 0; e < t->count; e++) {
        L.first[e] = (int)blocks;
        blocks += (t->n[e] + kGroupChunk - 1) / kGroupChunk;
        if (blocks > INT_MAX) return ODL_ERR(ODL_E_INVAL, "%s: %lld blocks", name, (long long)blocks);
        const bool v = aligned16(t->p[e]) && aligned16(t->g[e]) && (NS < 1 || aligned16(t->s1[e])) &&
                       (NS < 2 || aligned16(t->s2[e]));
        if (v) L.vec |= 1u << e;
    }
    L.first[t->count] = (int)blocks;
    if (blocks == 0) return ODL_OK;
    optim_group_kernel<U, NS><<<(unsigned)blocks, kThreads, 0, stream()>>>(L, upd, sc);
    ODL_CUDA_LAUNCH_CHECK(name);
    return ODL_OK;
}

__global__ void step_scalars_kernel(odl_step_scalars *s, odl_step_hyper h) { odl_step_scalars_advance_one(s, &h); }

SgdUpd sgd_upd(float lr, float momentum, float dampening, float weight_decay, int nesterov, int64_t step) {
    SgdUpd u;
    u.lr = lr;
    u.momentum = momentum;
    u.omd = 1.0f - dampening;
    u.wd = weight_decay;
    u.nesterov = nesterov;
    u.first = step <= 1;
    return u;
}

AdamUpd adam_upd(float lr, float beta1, float beta2, float eps, float weight_decay, int decoupled, int64_t step) {
    AdamUpd u;
    u.b1 = beta1;
    u.omb1 = 1.0f - beta1;
    u.b2 = beta2;
    u.omb2 = 1.0f - beta2;
    u.eps = eps;
    u.wd = weight_decay;
    odl_adam_scalars(lr, beta1, beta2, weight_decay, step, &u.step_size, &u.bc2_sqrt, &u.decay);
    u.decoupled = decoupled;
    return u;
}

AdadeltaUpd adadelta_upd(float lr, float rho, float eps, float weight_decay) {
    AdadeltaUpd u;
    u.lr = lr;
    u.rho = rho;
    u.omr = 1.0f - rho;
    u.eps = eps;
    u.wd = weight_decay;
    return u;
}

} // namespace
} // namespace odlk

using namespace odlk;

extern "C" odl_status odl_cuda_sgd_step(int64_t n, float *p, const float *g, float *buf, float lr, float momentum,
                                        float dampening, float weight_decay, int nesterov, int64_t step) {
    const SgdUpd u = sgd_upd(lr, momentum, dampening, weight_decay, nesterov, step);
    if (momentum != 0.0f) return launch_optim<SgdUpd, 1>("optim_kernel sgd", n, p, g, buf, nullptr, u);
    return launch_optim<SgdUpd, 0>("optim_kernel sgd", n, p, g, nullptr, nullptr, u);
}

extern "C" odl_status odl_cuda_adam_step(int64_t n, float *p, const float *g, float *m, float *v, float lr,
                                         float beta1, float beta2, float eps, float weight_decay, int decoupled,
                                         int64_t step) {
    return launch_optim<AdamUpd, 2>("optim_kernel adam", n, p, g, m, v,
                                    adam_upd(lr, beta1, beta2, eps, weight_decay, decoupled, step));
}

extern "C" odl_status odl_cuda_adadelta_step(int64_t n, float *p, const float *g, float *sq, float *acc, float lr,
                                             float rho, float eps, float weight_decay) {
    return launch_optim<AdadeltaUpd, 2>("optim_kernel adadelta", n, p, g, sq, acc,
                                        adadelta_upd(lr, rho, eps, weight_decay));
}

/* ---- the *_at entries: the step's scalars from an odl_step_scalars in device memory ---- */

extern "C" odl_status odl_cuda_step_scalars_advance(odl_step_scalars *s, const odl_step_hyper *h) {
    step_scalars_kernel<<<1, 1, 0, stream()>>>(s, *h);
    ODL_CUDA_LAUNCH_CHECK("step_scalars_kernel");
    return ODL_OK;
}

/* The launch arguments' lr and step are placeholders that the kernel replaces with *s before use. */
extern "C" odl_status odl_cuda_sgd_step_at(int64_t n, float *p, const float *g, float *buf, const odl_step_scalars *s,
                                           float momentum, float dampening, float weight_decay, int nesterov) {
    const SgdUpd u = sgd_upd(0.0f, momentum, dampening, weight_decay, nesterov, 1);
    if (momentum != 0.0f) return launch_optim<SgdUpd, 1>("optim_kernel sgd", n, p, g, buf, nullptr, u, s);
    return launch_optim<SgdUpd, 0>("optim_kernel sgd", n, p, g, nullptr, nullptr, u, s);
}

extern "C" odl_status odl_cuda_adam_step_at(int64_t n, float *p, const float *g, float *m, float *v,
                                            const odl_step_scalars *s, float beta1, float beta2, float eps,
                                            float weight_decay, int decoupled) {
    return launch_optim<AdamUpd, 2>("optim_kernel adam", n, p, g, m, v,
                                    adam_upd(0.0f, beta1, beta2, eps, weight_decay, decoupled, 1), s);
}

extern "C" odl_status odl_cuda_adadelta_step_at(int64_t n, float *p, const float *g, float *sq, float *acc,
                                                const odl_step_scalars *s, float rho, float eps, float weight_decay) {
    return launch_optim<AdadeltaUpd, 2>("optim_kernel adadelta", n, p, g, sq, acc,
                                        adadelta_upd(0.0f, rho, eps, weight_decay), s);
}

/* ---- grouped: every entry of an odl_optim_group in one launch ---- */

extern "C" odl_status odl_cuda_sgd_step_group_at(const odl_optim_group *t, const odl_step_scalars *s, float momentum,
                                                 float dampening, float weight_decay, int nesterov) {
    const SgdUpd u = sgd_upd(0.0f, momentum, dampening, weight_decay, nesterov, 1);
    if (momentum != 0.0f) return launch_group<SgdUpd, 1>("optim_group_kernel sgd", t, u, s);
    return launch_group<SgdUpd, 0>("optim_group_kernel sgd", t, u, s);
}

extern "C" odl_status odl_cuda_adam_step_group_at(const odl_optim_group *t, const odl_step_scalars *s, float beta1,
                                                  float beta2, float eps, float weight_decay, int decoupled) {
    return launch_group<AdamUpd, 2>("optim_group_kernel adam", t,
                                    adam_upd(0.0f, beta1, beta2, eps, weight_decay, decoupled, 1), s);
}

extern "C" odl_status odl_cuda_adadelta_step_group_at(const odl_optim_group *t, const odl_step_scalars *s, float rho,
                                                      float eps, float weight_decay) {
    return launch_group<AdadeltaUpd, 2>("optim_group_kernel adadelta", t, adadelta_upd(0.0f, rho, eps, weight_decay),
                                        s);
}
