/* Float64 reference implementations of every op of odl/ops.h (and of the op table in odl/backend.h),
 * for tests/test_ops.c. Straightforward loops, no tiling, no threads: each is the formula of
 * odl/backend.h written out in double, so that it can be read against PyTorch's definition.
 *
 * Magnitude bounds: the reductions (GEMM, convolution, sums) can optionally write `mag`, a per-output
 * bound of the sum of the absolute values of the terms (|alpha| sum_k |a_ik b_kj| + |beta c_ij| + |bias|,
 * propagated through the activation's Lipschitz constant, + |act(z)| + |residual|). Any float32 summation order
 * has an error of at most (K + 2) * 2^-24 * mag (Higham, "Accuracy and Stability of Numerical
 * Algorithms", 2nd ed., section 3.1), which is what the tolerances of test_ops are scaled by.
 *
 * Layouts are those of odl/backend.h: row-major matrices, NCHW images, weights [K, C, R, S].
 */
#ifndef ODL_TESTS_OPS_REF_H
#define ODL_TESTS_OPS_REF_H

#include <stdint.h>

#include "odl/backend.h"

/* ---- activations ---- */
double ref_sigmoid(double x);
/* act(x) */
double ref_act(odl_act act, double x);
/* d act / dx at x; sigmoid uses the forward output y (as the backend does), others x.
 * ReLU: 1 for x > 0, else 0 (PyTorch's threshold_backward: 0 at x == 0). */
double ref_act_grad(odl_act act, double x, double y);
/* A Lipschitz constant of act (bounds |act(a) - act(b)| / |a - b|). */
double ref_act_lipschitz(odl_act act);
void ref_act_fwd(odl_act act, int64_t n, const double *x, double *y);
/* dx = dy * act'(x) (sigmoid: from y). */
void ref_act_bwd(odl_act act, int64_t n, const double *x, const double *y, const double *dy, double *dx);

/* ---- GEMM: C = act(alpha op(A) op(B) + beta C + bias) + residual (odl_gemm_args in double) ---- */
typedef struct ref_gemm_args {
    int trans_a, trans_b;
    int64_t M, N, K;
    double alpha;
    const double *A;
    int64_t lda;
    const double *B;
    int64_t ldb;
    double beta; /* 0: C is not read */
    double *C;
    int64_t ldc;
    const double *bias; /* NULL, [N], or [M] with bias_per_row */
    int bias_per_row;
    const double *residual; /* NULL or [M, ldc] */
    odl_act act;
    double *mag; /* NULL or [M, ldc]: magnitude bound of each output */
} ref_gemm_args;
void ref_gemm(const ref_gemm_args *a);

/* ---- convolution (odl_conv2d_shape; P and Q must be filled in) ----
 * fwd: y = act(conv(x, w) + bias) + residual; bias [K] or NULL; residual [N,K,P,Q] or NULL. */
void ref_conv2d_fwd(const odl_conv2d_shape *s, const double *x, const double *w, const double *bias,
                    const double *residual, odl_act act, double *y, double *mag);
/* dx[N,C,H,W] = conv_transpose(dy, w) */
void ref_conv2d_bwd_data(const odl_conv2d_shape *s, const double *dy, const double *w, double *dx, double *mag);
/* dw[K,C,R,S] = sum_n corr(x, dy); db[K] (nullable) = sum over N,P,Q of dy. */
void ref_conv2d_bwd_weight(const odl_conv2d_shape *s, const double *x, const double *dy, double *dw, double *db,
                           double *mag_dw, double *mag_db);

/* ---- max-pool (pad cells are -inf; argmax = h*W + w of the first maximum in row-major window order) ---- */
void ref_maxpool2d_fwd(const odl_pool2d_shape *s, const double *x, double *y, int32_t *argmax);
void ref_maxpool2d_bwd(const odl_pool2d_shape *s, const double *dy, const int32_t *argmax, double *dx);

/* ---- dropout: keep i when odl_philox_uniform(seed, offset, i) >= p; y = keep ? x * scale : 0 with
 * scale = 1 / (1 - p) computed in float (odl/backend.h) ---- */
float ref_dropout_scale(float p);
int ref_dropout_keep(float p, uint64_t seed, uint64_t offset, int64_t i);
void ref_dropout_fwd(int64_t n, float p, uint64_t seed, uint64_t offset, const double *x, double *y);
void ref_dropout_bwd(int64_t n, float p, uint64_t seed, uint64_t offset, const double *dy, double *dx);

/* ---- batch normalisation, NCHW, per channel over N*HW values ---- */
void ref_batchnorm_infer(int N, int C, int64_t HW, const double *x, const double *gamma, const double *beta,
                         const double *mean, const double *var, double eps, double *y);
/* Batch statistics (biased variance) for y, save_mean, save_invstd = 1/sqrt(var + eps); running stats
 * r = (1 - momentum) r + momentum stat with the unbiased variance (N*HW / (N*HW - 1)). running_* may be
 * NULL (not updated). */
void ref_batchnorm_train_fwd(int N, int C, int64_t HW, const double *x, const double *gamma, const double *beta,
                             double *running_mean, double *running_var, double momentum, double eps, double *y,
                             double *save_mean, double *save_invstd);
/* Training-mode backward from the saved statistics (PyTorch's batch_norm_backward):
 * xhat = (x - mean) invstd; dbeta = sum dy; dgamma = sum dy xhat;
 * dx = gamma invstd / M (M dy - dbeta - xhat dgamma), M = N*HW. */
void ref_batchnorm_bwd(int N, int C, int64_t HW, const double *x, const double *dy, const double *gamma,
                       const double *save_mean, const double *save_invstd, double *dx, double *dgamma, double *dbeta);

/* ---- nearest upsample x2 (H, W: the small tensor's); bwd sums ((a + b) + c) + d in scan order ---- */
void ref_upsample2x_fwd(int N, int C, int H, int W, const double *x, double *y);
void ref_upsample2x_bwd(int N, int C, int H, int W, const double *dy, double *dx);

/* ---- concat along channels: xs[i] [N, Cs[i], HW] -> y [N, sum Cs, HW]; bwd skips NULL dxs[i] ---- */
void ref_concat_fwd(int N, int64_t HW, int n, const int *Cs, const double *const *xs, double *y);
void ref_concat_bwd(int N, int64_t HW, int n, const int *Cs, const double *dy, double *const *dxs);

/* ---- log-softmax + mean NLL ---- */
void ref_log_softmax_nll_fwd(int B, int C, const double *logits, const int32_t *labels, double *logprobs, double *loss);
/* dlogits = (exp(logprobs) - onehot(label)) * dloss / B */
void ref_log_softmax_nll_bwd(int B, int C, const double *logprobs, const int32_t *labels, double dloss,
                             double *dlogits);
/* First index of the maximum of each row. */
void ref_argmax_rows(int B, int C, const double *x, int32_t *out);

/* ---- reductions (mag: sum of |x| of the terms) ---- */
void ref_sum_rows(int64_t M, int64_t N, const double *x, double *y, double *mag);
void ref_sum(int64_t n, const double *x, double *out, double *mag);

/* ---- optimisers, one step in place, torch.optim formulas (see odl/backend.h) ---- */
void ref_sgd_step(int64_t n, double *p, const double *g, double *buf, double lr, double momentum, double dampening,
                  double weight_decay, int nesterov, int64_t step);
void ref_adam_step(int64_t n, double *p, const double *g, double *m, double *v, double lr, double beta1, double beta2,
                   double eps, double weight_decay, int decoupled, int64_t step);
void ref_adadelta_step(int64_t n, double *p, const double *g, double *sq, double *acc, double lr, double rho,
                       double eps, double weight_decay);

#endif
