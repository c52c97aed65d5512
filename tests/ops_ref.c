/* Float64 reference implementations for tests/test_ops.c; see ops_ref.h. */
#include "ops_ref.h"

#include <math.h>
#include <string.h>

#include "odl/rng.h"

/* ---------------------------------------------------------------- activations */

double ref_sigmoid(double x) {
    if (x >= 0) return 1.0 / (1.0 + exp(-x));
    double e = exp(x);
    return e / (1.0 + e);
}

double ref_act(odl_act act, double x) {
    switch (act) {
    case ODL_ACT_RELU: return x > 0 ? x : 0.0;
    case ODL_ACT_SILU: return x * ref_sigmoid(x);
    case ODL_ACT_SIGMOID: return ref_sigmoid(x);
    default: return x;
    }
}

double ref_act_grad(odl_act act, double x, double y) {
    switch (act) {
    case ODL_ACT_RELU: return x > 0 ? 1.0 : 0.0;
    case ODL_ACT_SILU: {
        double s = ref_sigmoid(x);
        return s * (1.0 + x * (1.0 - s));
    }
    case ODL_ACT_SIGMOID: return y * (1.0 - y);
    default: return 1.0;
    }
}

double ref_act_lipschitz(odl_act act) {
    switch (act) {
    case ODL_ACT_SILU: return 1.1; /* max of silu' is 1.0998 at x = 2.3994 */
    case ODL_ACT_SIGMOID: return 0.25;
    default: return 1.0;
    }
}

void ref_act_fwd(odl_act act, int64_t n, const double *x, double *y) {
    for (int64_t i = 0; i < n; i++)
        y[i] = ref_act(act, x[i]);
}

void ref_act_bwd(odl_act act, int64_t n, const double *x, const double *y, const double *dy, double *dx) {
    for (int64_t i = 0; i < n; i++)
        dx[i] = dy[i] * ref_act_grad(act, x[i], y ? y[i] : 0.0);
}

/* ---------------------------------------------------------------- GEMM */

void ref_gemm(const ref_gemm_args *a) {
    double lip = ref_act_lipschitz(a->act);
    for (int64_t i = 0; i < a->M; i++) {
        for (int64_t j = 0; j < a->N; j++) {
            double acc = 0, am = 0;
            for (int64_t k = 0; k < a->K; k++) {
                double av = a->trans_a ? a->A[k * a->lda + i] : a->A[i * a->lda + k];
                double bv = a->trans_b ? a->B[j * a->ldb + k] : a->B[k * a->ldb + j];
                acc += av * bv;
                am += fabs(av * bv);
            }
            double z = a->alpha * acc, zm = fabs(a->alpha) * am;
            int64_t o = i * a->ldc + j;
            if (a->beta != 0) {
                z += a->beta * a->C[o];
                zm += fabs(a->beta * a->C[o]);
            }
            if (a->bias) {
                double b = a->bias[a->bias_per_row ? i : j];
                z += b;
                zm += fabs(b);
            }
            double out = ref_act(a->act, z), m = lip * zm + fabs(out);
            if (a->residual) {
                out += a->residual[o];
                m += fabs(a->residual[o]);
            }
            a->C[o] = out;
            if (a->mag) a->mag[o] = m;
        }
    }
}

/* ---------------------------------------------------------------- convolution */

void ref_conv2d_fwd(const odl_conv2d_shape *s, const double *x, const double *w, const double *bias,
                    const double *residual, odl_act act, double *y, double *mag) {
    double lip = ref_act_lipschitz(act);
    for (int n = 0; n < s->N; n++)
        for (int k = 0; k < s->K; k++)
            for (int p = 0; p < s->P; p++)
                for (int q = 0; q < s->Q; q++) {
                    double acc = 0, am = 0;
                    for (int c = 0; c < s->C; c++)
                        for (int r = 0; r < s->R; r++) {
                            int h = p * s->stride_h - s->pad_h + r;
                            if (h < 0 || h >= s->H) continue;
                            for (int t = 0; t < s->S; t++) {
                                int wi = q * s->stride_w - s->pad_w + t;
                                if (wi < 0 || wi >= s->W) continue;
                                double v = x[(((int64_t)n * s->C + c) * s->H + h) * s->W + wi] *
                                           w[(((int64_t)k * s->C + c) * s->R + r) * s->S + t];
                                acc += v;
                                am += fabs(v);
                            }
                        }
                    if (bias) {
                        acc += bias[k];
                        am += fabs(bias[k]);
                    }
                    int64_t o = (((int64_t)n * s->K + k) * s->P + p) * s->Q + q;
                    double out = ref_act(act, acc), m = lip * am + fabs(out);
                    if (residual) {
                        out += residual[o];
                        m += fabs(residual[o]);
                    }
                    y[o] = out;
                    if (mag) mag[o] = m;
                }
}

void ref_conv2d_bwd_data(const odl_conv2d_shape *s, const double *dy, const double *w, double *dx, double *mag) {
    int64_t nx = (int64_t)s->N * s->C * s->H * s->W;
    memset(dx, 0, (size_t)nx * sizeof *dx);
    if (mag) memset(mag, 0, (size_t)nx * sizeof *mag);
    for (int n = 0; n < s->N; n++)
        for (int k = 0; k < s->K; k++)
            for (int p = 0; p < s->P; p++)
                for (int q = 0; q < s->Q; q++) {
                    double g = dy[(((int64_t)n * s->K + k) * s->P + p) * s->Q + q];
                    for (int c = 0; c < s->C; c++)
                        for (int r = 0; r < s->R; r++) {
                            int h = p * s->stride_h - s->pad_h + r;
                            if (h < 0 || h >= s->H) continue;
                            for (int t = 0; t < s->S; t++) {
                                int wi = q * s->stride_w - s->pad_w + t;
                                if (wi < 0 || wi >= s->W) continue;
                                int64_t o = (((int64_t)n * s->C + c) * s->H + h) * s->W + wi;
                                double v = g * w[(((int64_t)k * s->C + c) * s->R + r) * s->S + t];
                                dx[o] += v;
                                if (mag) mag[o] += fabs(v);
                            }
                        }
                }
}

void ref_conv2d_bwd_weight(const odl_conv2d_shape *s, const double *x, const double *dy, double *dw, double *db,
                           double *mag_dw, double *mag_db) {
    for (int k = 0; k < s->K; k++) {
        for (int c = 0; c < s->C; c++)
            for (int r = 0; r < s->R; r++)
                for (int t = 0; t < s->S; t++) {
                    double acc = 0, am = 0;
                    for (int n = 0; n < s->N; n++)
                        for (int p = 0; p < s->P; p++) {
                            int h = p * s->stride_h - s->pad_h + r;
                            if (h < 0 || h >= s->H) continue;
                            for (int q = 0; q < s->Q; q++) {
                                int wi = q * s->stride_w - s->pad_w + t;
                                if (wi < 0 || wi >= s->W) continue;
                                double v = x[(((int64_t)n * s->C + c) * s->H + h) * s->W + wi] *
                                           dy[(((int64_t)n * s->K + k) * s->P + p) * s->Q + q];
                                acc += v;
                                am += fabs(v);
                            }
                        }
                    int64_t o = (((int64_t)k * s->C + c) * s->R + r) * s->S + t;
                    dw[o] = acc;
                    if (mag_dw) mag_dw[o] = am;
                }
        if (db) {
            double acc = 0, am = 0;
            for (int n = 0; n < s->N; n++)
                for (int64_t pq = 0; pq < (int64_t)s->P * s->Q; pq++) {
                    double v = dy[((int64_t)n * s->K + k) * s->P * s->Q + pq];
                    acc += v;
                    am += fabs(v);
                }
            db[k] = acc;
            if (mag_db) mag_db[k] = am;
        }
    }
}

/* ---------------------------------------------------------------- max-pool */

void ref_maxpool2d_fwd(const odl_pool2d_shape *s, const double *x, double *y, int32_t *argmax) {
    for (int64_t nc = 0; nc < (int64_t)s->N * s->C; nc++) {
        const double *xp = x + nc * s->H * s->W;
        for (int p = 0; p < s->P; p++)
            for (int q = 0; q < s->Q; q++) {
                double best = -INFINITY;
                int32_t idx = -1;
                for (int r = 0; r < s->kh; r++) {
                    int h = p * s->stride_h - s->pad_h + r;
                    if (h < 0 || h >= s->H) continue;
                    for (int t = 0; t < s->kw; t++) {
                        int w = q * s->stride_w - s->pad_w + t;
                        if (w < 0 || w >= s->W) continue;
                        double v = xp[h * s->W + w];
                        if (idx < 0 || v > best) {
                            best = v;
                            idx = h * s->W + w;
                        }
                    }
                }
                int64_t o = (nc * s->P + p) * s->Q + q;
                y[o] = best;
                if (argmax) argmax[o] = idx;
            }
    }
}

void ref_maxpool2d_bwd(const odl_pool2d_shape *s, const double *dy, const int32_t *argmax, double *dx) {
    int64_t plane = (int64_t)s->H * s->W, oplane = (int64_t)s->P * s->Q;
    memset(dx, 0, (size_t)((int64_t)s->N * s->C * plane) * sizeof *dx);
    for (int64_t nc = 0; nc < (int64_t)s->N * s->C; nc++)
        for (int64_t o = 0; o < oplane; o++) {
            int32_t a = argmax[nc * oplane + o];
            if (a >= 0 && a < plane) dx[nc * plane + a] += dy[nc * oplane + o];
        }
}

/* ---------------------------------------------------------------- dropout */

int ref_dropout_keep(float p, uint64_t seed, uint64_t offset, int64_t i) {
    return odl_philox_uniform(seed, offset, (uint64_t)i) >= p;
}

float ref_dropout_scale(float p) {
    volatile float keep = 1.0f - p; /* rounded to float, as PyTorch's float scale */
    return 1.0f / keep;
}

void ref_dropout_fwd(int64_t n, float p, uint64_t seed, uint64_t offset, const double *x, double *y) {
    double sc = ref_dropout_scale(p);
    for (int64_t i = 0; i < n; i++)
        y[i] = ref_dropout_keep(p, seed, offset, i) ? x[i] * sc : 0.0;
}

void ref_dropout_bwd(int64_t n, float p, uint64_t seed, uint64_t offset, const double *dy, double *dx) {
    ref_dropout_fwd(n, p, seed, offset, dy, dx);
}

/* ---------------------------------------------------------------- batch normalisation */

void ref_batchnorm_infer(int N, int C, int64_t HW, const double *x, const double *gamma, const double *beta,
                         const double *mean, const double *var, double eps, double *y) {
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) {
            double is = 1.0 / sqrt(var[c] + eps);
            int64_t o = ((int64_t)n * C + c) * HW;
            for (int64_t i = 0; i < HW; i++)
                y[o + i] = (x[o + i] - mean[c]) * is * gamma[c] + beta[c];
        }
}

void ref_batchnorm_train_fwd(int N, int C, int64_t HW, const double *x, const double *gamma, const double *beta,
                             double *running_mean, double *running_var, double momentum, double eps, double *y,
                             double *save_mean, double *save_invstd) {
    double M = (double)N * (double)HW;
    for (int c = 0; c < C; c++) {
        double s = 0;
        for (int n = 0; n < N; n++)
            for (int64_t i = 0; i < HW; i++)
                s += x[((int64_t)n * C + c) * HW + i];
        double mean = s / M, ss = 0;
        for (int n = 0; n < N; n++)
            for (int64_t i = 0; i < HW; i++) {
                double d = x[((int64_t)n * C + c) * HW + i] - mean;
                ss += d * d;
            }
        double var = ss / M, is = 1.0 / sqrt(var + eps);
        for (int n = 0; n < N; n++)
            for (int64_t i = 0; i < HW; i++) {
                int64_t o = ((int64_t)n * C + c) * HW + i;
                y[o] = (x[o] - mean) * is * gamma[c] + beta[c];
            }
        if (save_mean) save_mean[c] = mean;
        if (save_invstd) save_invstd[c] = is;
        if (running_mean) running_mean[c] = (1.0 - momentum) * running_mean[c] + momentum * mean;
        if (running_var) running_var[c] = (1.0 - momentum) * running_var[c] + momentum * ss / (M - 1.0);
    }
}

void ref_batchnorm_bwd(int N, int C, int64_t HW, const double *x, const double *dy, const double *gamma,
                       const double *save_mean, const double *save_invstd, double *dx, double *dgamma, double *dbeta) {
    double M = (double)N * (double)HW;
    for (int c = 0; c < C; c++) {
        double sdy = 0, sdyx = 0, mean = save_mean[c], is = save_invstd[c];
        for (int n = 0; n < N; n++)
            for (int64_t i = 0; i < HW; i++) {
                int64_t o = ((int64_t)n * C + c) * HW + i;
                sdy += dy[o];
                sdyx += dy[o] * (x[o] - mean) * is;
            }
        dbeta[c] = sdy;
        dgamma[c] = sdyx;
        for (int n = 0; n < N; n++)
            for (int64_t i = 0; i < HW; i++) {
                int64_t o = ((int64_t)n * C + c) * HW + i;
                double xh = (x[o] - mean) * is;
                dx[o] = gamma[c] * is / M * (M * dy[o] - sdy - xh * sdyx);
            }
    }
}

/* ---------------------------------------------------------------- upsample, concat */

void ref_upsample2x_fwd(int N, int C, int H, int W, const double *x, double *y) {
    for (int64_t nc = 0; nc < (int64_t)N * C; nc++)
        for (int h = 0; h < 2 * H; h++)
            for (int w = 0; w < 2 * W; w++)
                y[(nc * 2 * H + h) * 2 * W + w] = x[(nc * H + h / 2) * W + w / 2];
}

void ref_upsample2x_bwd(int N, int C, int H, int W, const double *dy, double *dx) {
    for (int64_t nc = 0; nc < (int64_t)N * C; nc++)
        for (int h = 0; h < H; h++)
            for (int w = 0; w < W; w++) {
                const double *d0 = dy + (nc * 2 * H + 2 * h) * 2 * W + 2 * w, *d1 = d0 + 2 * W;
                dx[(nc * H + h) * W + w] = ((d0[0] + d0[1]) + d1[0]) + d1[1];
            }
}

void ref_concat_fwd(int N, int64_t HW, int n, const int *Cs, const double *const *xs, double *y) {
    int Ct = 0;
    for (int i = 0; i < n; i++)
        Ct += Cs[i];
    for (int b = 0; b < N; b++) {
        int off = 0;
        for (int i = 0; i < n; i++) {
            for (int c = 0; c < Cs[i]; c++)
                for (int64_t j = 0; j < HW; j++)
                    y[((int64_t)b * Ct + off + c) * HW + j] = xs[i][((int64_t)b * Cs[i] + c) * HW + j];
            off += Cs[i];
        }
    }
}

void ref_concat_bwd(int N, int64_t HW, int n, const int *Cs, const double *dy, double *const *dxs) {
    int Ct = 0;
    for (int i = 0; i < n; i++)
        Ct += Cs[i];
    for (int b = 0; b < N; b++) {
        int off = 0;
        for (int i = 0; i < n; i++) {
            if (dxs[i])
                for (int c = 0; c < Cs[i]; c++)
                    for (int64_t j = 0; j < HW; j++)
                        dxs[i][((int64_t)b * Cs[i] + c) * HW + j] = dy[((int64_t)b * Ct + off + c) * HW + j];
            off += Cs[i];
        }
    }
}

/* ---------------------------------------------------------------- losses */

void ref_log_softmax_nll_fwd(int B, int C, const double *logits, const int32_t *labels, double *logprobs,
                             double *loss) {
    double tot = 0;
    for (int b = 0; b < B; b++) {
        const double *x = logits + (int64_t)b * C;
        double m = x[0];
        for (int c = 1; c < C; c++)
            if (x[c] > m) m = x[c];
        double s = 0;
        for (int c = 0; c < C; c++)
            s += exp(x[c] - m);
        double lse = m + log(s);
        for (int c = 0; c < C; c++)
            logprobs[(int64_t)b * C + c] = x[c] - lse;
        tot += x[labels[b]] - lse;
    }
    *loss = -tot / B;
}

void ref_log_softmax_nll_bwd(int B, int C, const double *logprobs, const int32_t *labels, double dloss,
                             double *dlogits) {
    for (int b = 0; b < B; b++)
        for (int c = 0; c < C; c++) {
            int64_t o = (int64_t)b * C + c;
            dlogits[o] = (exp(logprobs[o]) - (c == labels[b] ? 1.0 : 0.0)) * dloss / B;
        }
}

void ref_argmax_rows(int B, int C, const double *x, int32_t *out) {
    for (int b = 0; b < B; b++) {
        int32_t best = 0;
        for (int c = 1; c < C; c++)
            if (x[(int64_t)b * C + c] > x[(int64_t)b * C + best]) best = c;
        out[b] = best;
    }
}

/* ---------------------------------------------------------------- reductions */

void ref_sum_rows(int64_t M, int64_t N, const double *x, double *y, double *mag) {
    for (int64_t j = 0; j < N; j++) {
        double s = 0, a = 0;
        for (int64_t i = 0; i < M; i++) {
            s += x[i * N + j];
            a += fabs(x[i * N + j]);
        }
        y[j] = s;
        if (mag) mag[j] = a;
    }
}

void ref_sum(int64_t n, const double *x, double *out, double *mag) {
    double s = 0, a = 0;
    for (int64_t i = 0; i < n; i++) {
        s += x[i];
        a += fabs(x[i]);
    }
    *out = s;
    if (mag) *mag = a;
}

/* ---------------------------------------------------------------- optimisers */

void ref_sgd_step(int64_t n, double *p, const double *g, double *buf, double lr, double momentum, double dampening,
                  double weight_decay, int nesterov, int64_t step) {
    for (int64_t i = 0; i < n; i++) {
        double gi = g[i] + weight_decay * p[i];
        if (momentum != 0) {
            buf[i] = step == 1 ? gi : momentum * buf[i] + (1.0 - dampening) * gi;
            gi = nesterov ? gi + momentum * buf[i] : buf[i];
        }
        p[i] -= lr * gi;
    }
}

void ref_adam_step(int64_t n, double *p, const double *g, double *m, double *v, double lr, double beta1, double beta2,
                   double eps, double weight_decay, int decoupled, int64_t step) {
    double bc1 = 1.0 - pow(beta1, (double)step), bc2 = 1.0 - pow(beta2, (double)step);
    for (int64_t i = 0; i < n; i++) {
        double gi = g[i];
        if (decoupled)
            p[i] *= 1.0 - lr * weight_decay;
        else
            gi += weight_decay * p[i];
        m[i] = beta1 * m[i] + (1.0 - beta1) * gi;
        v[i] = beta2 * v[i] + (1.0 - beta2) * gi * gi;
        p[i] -= lr * (m[i] / bc1) / (sqrt(v[i] / bc2) + eps);
    }
}

void ref_adadelta_step(int64_t n, double *p, const double *g, double *sq, double *acc, double lr, double rho,
                       double eps, double weight_decay) {
    for (int64_t i = 0; i < n; i++) {
        double gi = g[i] + weight_decay * p[i];
        sq[i] = rho * sq[i] + (1.0 - rho) * gi * gi;
        double d = sqrt(acc[i] + eps) / sqrt(sq[i] + eps) * gi;
        acc[i] = rho * acc[i] + (1.0 - rho) * d * d;
        p[i] -= lr * d;
    }
}
