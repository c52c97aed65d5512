/* CPU batch normalisation over NCHW, per channel, with PyTorch BatchNorm2d semantics (formulas in
 * backend.h), following ATen's CPU kernels (aten/src/ATen/native/cpu/batch_norm_kernel.cpp and
 * Normalization.cpp):
 *   statistics: mean and sum of squared deviations (two passes) over N*HW values, in double;
 *     save_invstd = 1/sqrt(var_biased + eps); running_mean = momentum*mean + (1-momentum)*running_mean,
 *     running_var likewise with var_unbiased = sum_sq / (N*HW - 1) (var_biased when N*HW == 1);
 *   transform: alpha = invstd*gamma, shift = beta - mean*alpha (float), y = x*alpha + shift;
 *     inference uses invstd = 1/sqrt(var + eps) from the running statistics;
 *   backward: sum = sum(dy), dot = sum((x - mean)*dy) in double; k = dot*invstd^2/cnt, gm = sum/cnt,
 *     dx = (dy - gm - (x - mean)*k) * invstd*gamma; dgamma = dot*invstd; dbeta = sum.
 * gamma/beta NULL mean 1/0, running statistics and save_* NULL are skipped (affine=False,
 * track_running_stats=False); odl_batchnorm_* in ops.c always passes them.
 * Threads: channels are independent; each channel's sums run in a fixed order.
 */
#include "kernels/cpu/cpu.h"

#include <math.h>

/* sum((x - m)^2) and sum((x - m) * d) in double with 4 partial sums combined in a fixed order. */
static double sq_dev_f64(const float *x, int64_t n, double m) {
    double l[4] = {0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        for (int k = 0; k < 4; k++) {
            double d = (double)x[i + k] - m;
            l[k] += d * d;
        }
    for (int k = 0; i < n; i++, k++) {
        double d = (double)x[i] - m;
        l[k] += d * d;
    }
    return (l[0] + l[1]) + (l[2] + l[3]);
}

static double dot_dev_f64(const float *x, const float *dy, int64_t n, double m) {
    double l[4] = {0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        for (int k = 0; k < 4; k++) l[k] += ((double)x[i + k] - m) * (double)dy[i + k];
    for (int k = 0; i < n; i++, k++) l[k] += ((double)x[i] - m) * (double)dy[i];
    return (l[0] + l[1]) + (l[2] + l[3]);
}

typedef struct bn_job {
    int N, C;
    int64_t HW;
    const float *x, *dy, *gamma, *beta, *mean, *var, *invstd;
    float *running_mean, *running_var, *y, *save_mean, *save_invstd, *dx, *dgamma, *dbeta;
    float momentum, eps;
} bn_job;

/* y[n, c, :] = x*alpha + shift for every image n. */
static void transform_channel(const bn_job *J, int64_t c, float alpha, float shift) {
    for (int64_t n = 0; n < J->N; n++) {
        const float *x = J->x + (n * J->C + c) * J->HW;
        float *y = J->y + (n * J->C + c) * J->HW;
        for (int64_t i = 0; i < J->HW; i++) y[i] = x[i] * alpha + shift;
    }
}

static odl_status infer_chunk(void *ctx, int chunk, int64_t b, int64_t e) {
    (void)chunk;
    const bn_job *J = (const bn_job *)ctx;
    for (int64_t c = b; c < e; c++) {
        float invstd = 1.0f / sqrtf(J->var[c] + J->eps);
        float g = J->gamma ? J->gamma[c] : 1.0f, bt = J->beta ? J->beta[c] : 0.0f;
        float alpha = invstd * g;
        transform_channel(J, c, alpha, bt - J->mean[c] * alpha);
    }
    return ODL_OK;
}

static int64_t bn_grain(int N, int64_t HW) {
    int64_t per = (int64_t)N * HW;
    return per >= 16384 ? 1 : 16384 / (per > 0 ? per : 1);
}

odl_status odl_cpu_batchnorm_infer(int N, int C, int64_t HW, const float *x, const float *gamma, const float *beta,
                                   const float *mean, const float *var, float eps, float *y) {
    bn_job J = {0};
    J.N = N;
    J.C = C;
    J.HW = HW;
    J.x = x;
    J.gamma = gamma;
    J.beta = beta;
    J.mean = mean;
    J.var = var;
    J.eps = eps;
    J.y = y;
    return odl_cpu_parallel_for(C, bn_grain(N, HW), infer_chunk, &J, NULL);
}

static odl_status train_chunk(void *ctx, int chunk, int64_t b, int64_t e) {
    (void)chunk;
    const bn_job *J = (const bn_job *)ctx;
    const int64_t cnt = (int64_t)J->N * J->HW;
    for (int64_t c = b; c < e; c++) {
        double s = 0.0;
        for (int64_t n = 0; n < J->N; n++) s += odl_cpu_sum_f64(J->x + (n * J->C + c) * J->HW, J->HW);
        double mean = cnt > 0 ? s / (double)cnt : 0.0;
        double ss = 0.0;
        for (int64_t n = 0; n < J->N; n++) ss += sq_dev_f64(J->x + (n * J->C + c) * J->HW, J->HW, mean);
        double var = cnt > 0 ? ss / (double)cnt : 0.0;
        double var_unbiased = cnt > 1 ? ss / (double)(cnt - 1) : var;
        double invstd = 1.0 / sqrt(var + (double)J->eps);
        float mean_f = (float)mean, invstd_f = (float)invstd;
        if (J->save_mean) J->save_mean[c] = mean_f;
        if (J->save_invstd) J->save_invstd[c] = invstd_f;
        if (J->running_mean)
            J->running_mean[c] = (float)((double)J->momentum * mean + (1.0 - (double)J->momentum) * J->running_mean[c]);
        if (J->running_var)
            J->running_var[c] =
                (float)((double)J->momentum * var_unbiased + (1.0 - (double)J->momentum) * J->running_var[c]);
        float g = J->gamma ? J->gamma[c] : 1.0f, bt = J->beta ? J->beta[c] : 0.0f;
        float alpha = invstd_f * g;
        transform_channel(J, c, alpha, bt - mean_f * alpha);
    }
    return ODL_OK;
}

odl_status odl_cpu_batchnorm_train_fwd(int N, int C, int64_t HW, const float *x, const float *gamma,
                                       const float *beta, float *running_mean, float *running_var, float momentum,
                                       float eps, float *y, float *save_mean, float *save_invstd) {
    bn_job J = {0};
    J.N = N;
    J.C = C;
    J.HW = HW;
    J.x = x;
    J.gamma = gamma;
    J.beta = beta;
    J.running_mean = running_mean;
    J.running_var = running_var;
    J.momentum = momentum;
    J.eps = eps;
    J.y = y;
    J.save_mean = save_mean;
    J.save_invstd = save_invstd;
    return odl_cpu_parallel_for(C, bn_grain(N, HW), train_chunk, &J, NULL);
}

static odl_status bwd_chunk(void *ctx, int chunk, int64_t b, int64_t e) {
    (void)chunk;
    const bn_job *J = (const bn_job *)ctx;
    const int64_t cnt = (int64_t)J->N * J->HW;
    for (int64_t c = b; c < e; c++) {
        const double mean = J->mean[c];
        const float mean_f = J->mean[c], invstd = J->invstd[c];
        double sum = 0.0, dot = 0.0;
        for (int64_t n = 0; n < J->N; n++) {
            const float *x = J->x + (n * J->C + c) * J->HW, *dy = J->dy + (n * J->C + c) * J->HW;
            sum += odl_cpu_sum_f64(dy, J->HW);
            dot += dot_dev_f64(x, dy, J->HW, mean);
        }
        if (J->dbeta) J->dbeta[c] = (float)sum;
        if (J->dgamma) J->dgamma[c] = (float)(dot * (double)invstd);
        if (!J->dx) continue;
        const float g = J->gamma ? J->gamma[c] : 1.0f;
        const float k = cnt > 0 ? (float)(dot * (double)invstd * (double)invstd / (double)cnt) : 0.0f;
        const float gm = cnt > 0 ? (float)(sum / (double)cnt) : 0.0f;
        const float w = invstd * g;
        for (int64_t n = 0; n < J->N; n++) {
            const float *x = J->x + (n * J->C + c) * J->HW, *dy = J->dy + (n * J->C + c) * J->HW;
            float *dx = J->dx + (n * J->C + c) * J->HW;
            for (int64_t i = 0; i < J->HW; i++) dx[i] = (dy[i] - gm - (x[i] - mean_f) * k) * w;
        }
    }
    return ODL_OK;
}

odl_status odl_cpu_batchnorm_bwd(int N, int C, int64_t HW, const float *x, const float *dy, const float *gamma,
                                 const float *save_mean, const float *save_invstd, float *dx, float *dgamma,
                                 float *dbeta) {
    bn_job J = {0};
    J.N = N;
    J.C = C;
    J.HW = HW;
    J.x = x;
    J.dy = dy;
    J.gamma = gamma;
    J.mean = save_mean;
    J.invstd = save_invstd;
    J.dx = dx;
    J.dgamma = dgamma;
    J.dbeta = dbeta;
    return odl_cpu_parallel_for(C, bn_grain(N, HW) * 2, bwd_chunk, &J, NULL);
}
