/* The scalars of one optimiser update that PyTorch computes in Python (bias corrections, Adam's step
 * size, AdamW's decay factor) and the advance of odl_step_scalars (odl/backend.h), shared by the CPU
 * backend, the CUDA backend's host entries and its device-side advance (kernels/cuda/optim.cu), so that
 * every path computes them with the same operations and gets the same bits: an update whose scalars
 * were computed on the GPU inside a CUDA graph equals the one computed on the host. Private to kernels/.
 *
 * beta^step is taken by repeated squaring in double-double arithmetic (exact products through fma, which
 * is correctly rounded on both sides) instead of the C library's pow, which the GPU's pow does not
 * reproduce bit for bit: the error of the squarings grows with the exponent, about step x 2^-104, so the
 * result rounded to double is the correctly rounded power but in near-ties, as pow's (< 1 ulp) is.
 * Products, sums and differences are written with ODL_D* so that nvcc contracts nothing into an FMA (the
 * host build is ISO C: no contraction).
 */
#ifndef ODL_KERNELS_STEP_SCALARS_H
#define ODL_KERNELS_STEP_SCALARS_H

#include <math.h>
#include <stdint.h>

#include "odl/backend.h"

#ifdef __CUDACC__
#define ODL_STEP_FN static __host__ __device__ __forceinline__
#else
#define ODL_STEP_FN static inline
#endif
#if defined(__CUDA_ARCH__)
#define ODL_DMUL(a, b) __dmul_rn((a), (b))
#define ODL_DADD(a, b) __dadd_rn((a), (b))
#define ODL_DSUB(a, b) __dsub_rn((a), (b))
#define ODL_DDIV(a, b) __ddiv_rn((a), (b))
#define ODL_DFMA(a, b, c) __fma_rn((a), (b), (c))
#define ODL_DSQRT(a) __dsqrt_rn(a)
#else
#define ODL_DMUL(a, b) ((a) * (b))
#define ODL_DADD(a, b) ((a) + (b))
#define ODL_DSUB(a, b) ((a) - (b))
#define ODL_DDIV(a, b) ((a) / (b))
#define ODL_DFMA(a, b, c) fma((a), (b), (c))
#define ODL_DSQRT(a) sqrt(a)
#endif

/* A double-double hi + lo with |lo| <= ulp(hi) / 2. */
typedef struct odl_dd {
    double hi, lo;
} odl_dd;

/* a * b: the exact product of the high parts (fma gives its rounding error), the cross terms, renormalised
 * (Dekker's product with Knuth's fast two-sum). */
ODL_STEP_FN odl_dd odl_dd_mul(odl_dd a, odl_dd b) {
    const double p = ODL_DMUL(a.hi, b.hi);
    double e = ODL_DFMA(a.hi, b.hi, -p);
    e = ODL_DADD(e, ODL_DADD(ODL_DMUL(a.hi, b.lo), ODL_DMUL(a.lo, b.hi)));
    const double s = ODL_DADD(p, e);
    const odl_dd r = {s, ODL_DSUB(e, ODL_DSUB(s, p))};
    return r;
}

/* b^n for n >= 0 by squaring in double-double (the bits of n from the lowest, r *= b^(2^k) for each bit
 * set), rounded to double. */
ODL_STEP_FN double odl_powi(double b, int64_t n) {
    odl_dd r = {1.0, 0.0}, x = {b, 0.0};
    while (n > 0) {
        if (n & 1) r = odl_dd_mul(r, x);
        n >>= 1;
        if (n) x = odl_dd_mul(x, x);
    }
    return ODL_DADD(r.hi, r.lo);
}

/* Adam(W) update number `step` (from 1; below 1 counts as 1) at learning rate lr:
 * step_size = lr / (1 - beta1^step), bc2_sqrt = sqrt(1 - beta2^step), decay = 1 - lr * weight_decay, each
 * in double and rounded to float once (torch.optim.adam's single-tensor formulas). */
ODL_STEP_FN void odl_adam_scalars(float lr, float beta1, float beta2, float weight_decay, int64_t step,
                                  float *step_size, float *bc2_sqrt, float *decay) {
    const int64_t t = step < 1 ? 1 : step;
    const double bc1 = ODL_DSUB(1.0, odl_powi((double)beta1, t));
    const double bc2 = ODL_DSUB(1.0, odl_powi((double)beta2, t));
    *step_size = (float)ODL_DDIV((double)lr, bc1);
    *bc2_sqrt = (float)ODL_DSQRT(bc2);
    *decay = (float)ODL_DSUB(1.0, ODL_DMUL((double)lr, (double)weight_decay));
}

/* The start of a training step on s (see odl_step_scalars): this step's dropout offset from the steps
 * taken so far, then both counters forward by one and the update's scalars for the new optim_step. */
ODL_STEP_FN void odl_step_scalars_advance_one(odl_step_scalars *s, const odl_step_hyper *h) {
    s->rng_offset = ((uint64_t)s->rng_step * (uint64_t)h->world_size + (uint64_t)h->rank) * (uint64_t)h->rng_stride;
    s->rng_step += 1;
    s->optim_step += 1;
    s->first = s->optim_step <= 1;
    odl_adam_scalars(s->lr, h->beta1, h->beta2, h->weight_decay, s->optim_step, &s->step_size, &s->bc2_sqrt, &s->decay);
}

#endif
