/* CPU optimiser updates, in place, with the element-wise formulas of torch.optim's single-tensor
 * (for-loop) implementations (torch/optim/sgd.py, adam.py, adamw.py, adadelta.py), as listed in
 * backend.h. Scalars that PyTorch computes in Python (bias corrections, step size) are computed in double
 * here and rounded to float once; element-wise arithmetic is float, in PyTorch's order:
 *   SGD:      g = g + wd*p; buf = step == 1 ? g : momentum*buf + (1 - dampening)*g;
 *             g = nesterov ? g + momentum*buf : buf; p = p + (-lr)*g.        (buf unused when momentum == 0)
 *   Adam(W):  AdamW p = p * (1 - lr*wd) (the factor in double); Adam g = g + wd*p; m = b1*m + (1 - b1)*g;
 *             v = b2*v + (1 - b2)*g*g; denom = sqrt(v) / sqrt(1 - b2^step) + eps;
 *             p = p + (-lr / (1 - b1^step)) * (m / denom).
 *   Adadelta: g = g + wd*p; sq = rho*sq + (1 - rho)*g*g; d = sqrt(acc + eps) / sqrt(sq + eps) * g;
 *             acc = rho*acc + (1 - rho)*d*d; p = p + (-lr)*d.
 * Threads: elements are independent.
 */
#include "kernels/cpu/cpu.h"

#include <math.h>

#include "kernels/step_scalars.h"

#define OPT_GRAIN 16384

typedef struct opt_job {
    float *p, *s1, *s2;
    const float *g;
    float lr, a, b, eps, wd, step_size, bc2_sqrt, decay;
    int flag, first;
} opt_job;

static odl_status sgd_chunk(void *ctx, int chunk, int64_t b, int64_t e) {
    (void)chunk;
    const opt_job *J = (const opt_job *)ctx;
    const float momentum = J->a, dampening = J->b, wd = J->wd, lr = J->lr;
    for (int64_t i = b; i < e; i++) {
        float g = J->g[i];
        if (wd != 0.0f) g = g + wd * J->p[i];
        if (momentum != 0.0f) {
            float buf = J->first ? g : momentum * J->s1[i] + (1.0f - dampening) * g;
            J->s1[i] = buf;
            g = J->flag ? g + momentum * buf : buf;
        }
        J->p[i] = J->p[i] + (-lr) * g;
    }
    return ODL_OK;
}

odl_status odl_cpu_sgd_step(int64_t n, float *p, const float *g, float *buf, float lr, float momentum,
                            float dampening, float weight_decay, int nesterov, int64_t step) {
    opt_job J = {0};
    J.p = p;
    J.g = g;
    J.s1 = buf;
    J.lr = lr;
    J.a = momentum;
    J.b = dampening;
    J.wd = weight_decay;
    J.flag = nesterov;
    J.first = step <= 1;
    return odl_cpu_parallel_for(n, OPT_GRAIN, sgd_chunk, &J, NULL);
}

static odl_status adam_chunk(void *ctx, int chunk, int64_t b, int64_t e) {
    (void)chunk;
    const opt_job *J = (const opt_job *)ctx;
    const float b1 = J->a, b2 = J->b, wd = J->wd, eps = J->eps;
    const float step_size = J->step_size, bc2_sqrt = J->bc2_sqrt;
    for (int64_t i = b; i < e; i++) {
        float p = J->p[i], g = J->g[i];
        if (J->flag)
            p = p * J->decay;
        else if (wd != 0.0f)
            g = g + wd * p;
        float m = b1 * J->s1[i] + (1.0f - b1) * g;
        float v = b2 * J->s2[i] + (1.0f - b2) * g * g;
        float denom = sqrtf(v) / bc2_sqrt + eps;
        J->s1[i] = m;
        J->s2[i] = v;
        J->p[i] = p + (-step_size) * (m / denom);
    }
    return ODL_OK;
}

odl_status odl_cpu_adam_step(int64_t n, float *p, const float *g, float *m, float *v, float lr, float beta1,
                             float beta2, float eps, float weight_decay, int decoupled, int64_t step) {
    opt_job J = {0};
    odl_adam_scalars(lr, beta1, beta2, weight_decay, step, &J.step_size, &J.bc2_sqrt, &J.decay);
    J.p = p;
    J.g = g;
    J.s1 = m;
    J.s2 = v;
    J.lr = lr;
    J.a = beta1;
    J.b = beta2;
    J.eps = eps;
    J.wd = weight_decay;
    J.flag = decoupled;
    return odl_cpu_parallel_for(n, OPT_GRAIN, adam_chunk, &J, NULL);
}

static odl_status adadelta_chunk(void *ctx, int chunk, int64_t b, int64_t e) {
    (void)chunk;
    const opt_job *J = (const opt_job *)ctx;
    const float rho = J->a, wd = J->wd, lr = J->lr, eps = J->eps;
    for (int64_t i = b; i < e; i++) {
        float g = J->g[i];
        if (wd != 0.0f) g = g + wd * J->p[i];
        float sq = rho * J->s1[i] + (1.0f - rho) * g * g;
        float d = sqrtf(J->s2[i] + eps) / sqrtf(sq + eps) * g;
        float acc = rho * J->s2[i] + (1.0f - rho) * d * d;
        J->s1[i] = sq;
        J->s2[i] = acc;
        J->p[i] = J->p[i] + (-lr) * d;
    }
    return ODL_OK;
}

odl_status odl_cpu_adadelta_step(int64_t n, float *p, const float *g, float *sq, float *acc, float lr, float rho,
                                 float eps, float weight_decay) {
    opt_job J = {0};
    J.p = p;
    J.g = g;
    J.s1 = sq;
    J.s2 = acc;
    J.lr = lr;
    J.a = rho;
    J.eps = eps;
    J.wd = weight_decay;
    return odl_cpu_parallel_for(n, OPT_GRAIN, adadelta_chunk, &J, NULL);
}

/* ---- the same updates with the step's scalars read from an odl_step_scalars (host memory here) ---- */

odl_status odl_cpu_step_scalars_advance(odl_step_scalars *s, const odl_step_hyper *h) {
    odl_step_scalars_advance_one(s, h);
    return ODL_OK;
}

odl_status odl_cpu_sgd_step_at(int64_t n, float *p, const float *g, float *buf, const odl_step_scalars *s,
                               float momentum, float dampening, float weight_decay, int nesterov) {
    return odl_cpu_sgd_step(n, p, g, buf, s->lr, momentum, dampening, weight_decay, nesterov, s->optim_step);
}

odl_status odl_cpu_adam_step_at(int64_t n, float *p, const float *g, float *m, float *v, const odl_step_scalars *s,
                                float beta1, float beta2, float eps, float weight_decay, int decoupled) {
    opt_job J = {0};
    J.p = p;
    J.g = g;
    J.s1 = m;
    J.s2 = v;
    J.lr = s->lr;
    J.a = beta1;
    J.b = beta2;
    J.eps = eps;
    J.wd = weight_decay;
    J.flag = decoupled;
    J.step_size = s->step_size;
    J.bc2_sqrt = s->bc2_sqrt;
    J.decay = s->decay;
    return odl_cpu_parallel_for(n, OPT_GRAIN, adam_chunk, &J, NULL);
}

odl_status odl_cpu_adadelta_step_at(int64_t n, float *p, const float *g, float *sq, float *acc,
                                    const odl_step_scalars *s, float rho, float eps, float weight_decay) {
    return odl_cpu_adadelta_step(n, p, g, sq, acc, s->lr, rho, eps, weight_decay);
}
