/* Tensor-level operations: validate shapes, dtypes and devices, then dispatch to the op table of the
 * tensors' device (odl/backend.h). All tensors of one call must be on one device, float32 and
 * contiguous unless stated. Outputs must be allocated by the caller with the documented shape.
 * Errors: ODL_E_INVAL with a message naming the argument and both shapes for any mismatch, a NULL
 * tensor, or tensors on different devices; whatever the backend reports otherwise.
 * Formulas and layouts are documented once, in odl/backend.h.
 */
#ifndef ODL_OPS_H
#define ODL_OPS_H

#include "odl/api.h"
#include "odl/backend.h"
#include "odl/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Output size of a convolution or pooling window along one axis (PyTorch, floor mode). */
static inline int odl_conv_out_size(int in, int k, int stride, int pad) { return (in + 2 * pad - k) / stride + 1; }

/* Fill a float32 tensor (any device) with a value. */
ODL_API odl_status odl_tensor_fill(odl_tensor *t, float value);

/* C = act(alpha * op(A) op(B) + beta * C + bias) + residual. A, B, C 2-D; bias [N] or NULL;
 * residual shaped as C or NULL. odl_gemm, odl_linear_fwd and odl_linear_bwd multiply in the process's
 * matmul precision (odl_matmul_precision, odl/precision.h): fp32 by default, else the backend's gemm_lowp. */
ODL_API odl_status odl_gemm(int trans_a, int trans_b, float alpha, const odl_tensor *A, const odl_tensor *B, float beta,
                    odl_tensor *C, const odl_tensor *bias, const odl_tensor *residual, odl_act act);

/* Linear layer (PyTorch nn.Linear): y[B,out] = act(x[B,in] W[out,in]^T + b[out]). b may be NULL. */
ODL_API odl_status odl_linear_fwd(const odl_tensor *x, const odl_tensor *w, const odl_tensor *b, odl_act act, odl_tensor *y);
/* Backward of odl_linear_fwd with act NONE: dx = dy W (skipped when dx is NULL), dw = dy^T x,
 * db = sum over the batch of dy (skipped when db is NULL). Overwrites the outputs. */
ODL_API odl_status odl_linear_bwd(const odl_tensor *x, const odl_tensor *w, const odl_tensor *dy, odl_tensor *dx,
                          odl_tensor *dw, odl_tensor *db);

/* Conv2d (dilation 1, groups 1): x [N,C,H,W], w [K,C,R,S], b [K] or NULL, residual [N,K,P,Q] or NULL,
 * y [N,K,P,Q]; y = act(conv(x, w) + b) + residual. */
ODL_API odl_status odl_conv2d_fwd(const odl_tensor *x, const odl_tensor *w, const odl_tensor *b, const odl_tensor *residual,
                          odl_act act, int stride, int pad, odl_tensor *y);
/* Backward of odl_conv2d_fwd with act NONE and no residual: dx (NULL to skip), dw, db (NULL to skip). */
ODL_API odl_status odl_conv2d_bwd(const odl_tensor *x, const odl_tensor *w, const odl_tensor *dy, int stride, int pad,
                          odl_tensor *dx, odl_tensor *dw, odl_tensor *db);
/* The backward of a ReLU followed by this convolution: odl_conv2d_bwd where x is the ReLU's output, dx then
 * 0 wherever x <= 0 (odl_act_bwd's ReLU, bit for bit) without reading or writing dx again: the CUDA kernels
 * apply it as they store dx. Same arguments and errors as odl_conv2d_bwd. */
ODL_API odl_status odl_conv2d_relu_bwd(const odl_tensor *x, const odl_tensor *w, const odl_tensor *dy, int stride, int pad,
                               odl_tensor *dx, odl_tensor *dw, odl_tensor *db);

/* The weight and bias gradients of a convolution whose ReLU epilogue gave y = relu(conv(x, w) + b), where no
 * input gradient is wanted (a first layer): dy [N,K,P,Q] is the gradient of y, and dw [K,C,R,S], db [K]
 * (NULL to skip) are odl_conv2d_bwd's for odl_act_bwd's ReLU backward of it (dy where y > 0, else 0), bit for
 * bit. dy is overwritten with that masked gradient unless the backend applies the mask in the weight
 * gradient's own reads of dy (CUDA where C*R*S <= 16: MNIST conv1's 44 MB pass at batch 512 gone). x, w as
 * odl_conv2d_bwd; y [N,K,P,Q]. Errors as odl_conv2d_bwd's. */
ODL_API odl_status odl_conv2d_relu_out_bwd_weight(const odl_tensor *x, const odl_tensor *w, const odl_tensor *y,
                                          odl_tensor *dy, int stride, int pad, odl_tensor *dw, odl_tensor *db);

/* Max-pool: x [N,C,H,W] -> y [N,C,P,Q]; argmax: I32 [N,C,P,Q] or NULL (needed for backward). */
ODL_API odl_status odl_maxpool2d_fwd(const odl_tensor *x, int kernel, int stride, int pad, odl_tensor *y,
                             odl_tensor *argmax);
/* dx [N,C,H,W] from dy and argmax [N,C,P,Q]. */
ODL_API odl_status odl_maxpool2d_bwd(const odl_tensor *dy, const odl_tensor *argmax, int kernel, int stride, int pad,
                             odl_tensor *dx);
/* The backward of a ReLU followed by this max-pool in one pass: odl_maxpool2d_bwd's dx, then odl_act_bwd's
 * ReLU (dx = 0 where the ReLU's output is <= 0), bit for bit, without reading or writing the ReLU's
 * [N,C,H,W] tensors again. y [N,C,P,Q]: the max-pool's forward output (the ReLU's output at argmax). */
ODL_API odl_status odl_maxpool2d_relu_bwd(const odl_tensor *dy, const odl_tensor *argmax, const odl_tensor *y, int kernel,
                                  int stride, int pad, odl_tensor *dx);

/* Element-wise activation; x, y (and dy, dx) of equal numel. y may be x. */
ODL_API odl_status odl_act_fwd(odl_act act, const odl_tensor *x, odl_tensor *y);
ODL_API odl_status odl_act_bwd(odl_act act, const odl_tensor *x, const odl_tensor *y, const odl_tensor *dy, odl_tensor *dx);

/* Dropout with probability p in [0, 1); p == 0 copies. */
ODL_API odl_status odl_dropout_fwd(float p, uint64_t seed, uint64_t offset, const odl_tensor *x, odl_tensor *y);
ODL_API odl_status odl_dropout_bwd(float p, uint64_t seed, uint64_t offset, const odl_tensor *dy, odl_tensor *dx);

/* BatchNorm2d over x [N,C,H,W]; per-channel tensors are [C]. */
ODL_API odl_status odl_batchnorm_infer(const odl_tensor *x, const odl_tensor *gamma, const odl_tensor *beta,
                               const odl_tensor *mean, const odl_tensor *var, float eps, odl_tensor *y);
ODL_API odl_status odl_batchnorm_train_fwd(const odl_tensor *x, const odl_tensor *gamma, const odl_tensor *beta,
                                   odl_tensor *running_mean, odl_tensor *running_var, float momentum, float eps,
                                   odl_tensor *y, odl_tensor *save_mean, odl_tensor *save_invstd);
ODL_API odl_status odl_batchnorm_bwd(const odl_tensor *x, const odl_tensor *dy, const odl_tensor *gamma,
                             const odl_tensor *save_mean, const odl_tensor *save_invstd, odl_tensor *dx,
                             odl_tensor *dgamma, odl_tensor *dbeta);

/* Nearest upsample x2: x [N,C,H,W] -> y [N,C,2H,2W]; bwd: dy [N,C,2H,2W] -> dx [N,C,H,W]. */
ODL_API odl_status odl_upsample2x_fwd(const odl_tensor *x, odl_tensor *y);
ODL_API odl_status odl_upsample2x_bwd(const odl_tensor *dy, odl_tensor *dx);

/* Concat along channels: xs[i] [N,C_i,H,W] -> y [N,sum C_i,H,W]; bwd splits dy into dxs. In bwd a NULL
 * entry skips that slice: either a single NULL (its channel count is what the others leave) or any number
 * of NULLs after the last non-NULL entry. */
ODL_API odl_status odl_concat_channels_fwd(int n, const odl_tensor *const *xs, odl_tensor *y);
ODL_API odl_status odl_concat_channels_bwd(const odl_tensor *dy, int n, odl_tensor *const *dxs);

/* logits [B,C], labels I32 [B] -> logprobs [B,C], loss [1] (mean NLL). */
ODL_API odl_status odl_log_softmax_nll_fwd(const odl_tensor *logits, const odl_tensor *labels, odl_tensor *logprobs,
                                   odl_tensor *loss);
/* dlogits [B,C] for an upstream gradient dloss of the mean loss (1 for plain training). */
ODL_API odl_status odl_log_softmax_nll_bwd(const odl_tensor *logprobs, const odl_tensor *labels, float dloss,
                                   odl_tensor *dlogits);
/* x [B,C] -> out I32 [B]. */
ODL_API odl_status odl_argmax_rows(const odl_tensor *x, odl_tensor *out);

/* Element-wise: equal numel everywhere. */
ODL_API odl_status odl_add(const odl_tensor *a, const odl_tensor *b, odl_tensor *y);
ODL_API odl_status odl_mul(const odl_tensor *a, const odl_tensor *b, odl_tensor *y);
ODL_API odl_status odl_scale(float alpha, const odl_tensor *x, odl_tensor *y);
ODL_API odl_status odl_axpy(float alpha, const odl_tensor *x, odl_tensor *y);
/* x [M,N] -> y [N], column sums. */
ODL_API odl_status odl_sum_rows(const odl_tensor *x, odl_tensor *y);
/* x (any shape) -> out [1]. */
ODL_API odl_status odl_sum(const odl_tensor *x, odl_tensor *out);

/* Optimiser updates in place; p, g and the state tensors of equal numel (formulas in backend.h). */
ODL_API odl_status odl_sgd_step(odl_tensor *p, const odl_tensor *g, odl_tensor *buf, float lr, float momentum,
                        float dampening, float weight_decay, int nesterov, int64_t step);
ODL_API odl_status odl_adam_step(odl_tensor *p, const odl_tensor *g, odl_tensor *m, odl_tensor *v, float lr, float beta1,
                         float beta2, float eps, float weight_decay, int decoupled, int64_t step);
ODL_API odl_status odl_adadelta_step(odl_tensor *p, const odl_tensor *g, odl_tensor *sq, odl_tensor *acc, float lr,
                             float rho, float eps, float weight_decay);

/* ---- a training step's scalars in the device's memory (odl_step_scalars, odl/backend.h) ----
 * s points to one odl_step_scalars in the memory of the tensors' device (odl_mem_alloc on a CUDA device,
 * host memory on the CPU); the kernels read it when they run, so a CUDA graph of these calls replays
 * with the current step and learning rate. Each op is bitwise its host-scalar twin above at
 * (lr, step) = (s->lr, s->optim_step) and offset = s->rng_offset + layer. Errors: as the twins', and
 * ODL_E_INVAL for a NULL s. */
ODL_API odl_status odl_step_scalars_advance(odl_device dev, odl_step_scalars *s, const odl_step_hyper *h);
ODL_API odl_status odl_dropout_fwd_at(float p, uint64_t seed, const odl_step_scalars *s, uint64_t layer,
                                      const odl_tensor *x, odl_tensor *y);
ODL_API odl_status odl_dropout_bwd_at(float p, uint64_t seed, const odl_step_scalars *s, uint64_t layer,
                                      const odl_tensor *dy, odl_tensor *dx);
ODL_API odl_status odl_sgd_step_at(odl_tensor *p, const odl_tensor *g, odl_tensor *buf, const odl_step_scalars *s,
                                   float momentum, float dampening, float weight_decay, int nesterov);
ODL_API odl_status odl_adam_step_at(odl_tensor *p, const odl_tensor *g, odl_tensor *m, odl_tensor *v,
                                    const odl_step_scalars *s, float beta1, float beta2, float eps, float weight_decay,
                                    int decoupled);
ODL_API odl_status odl_adadelta_step_at(odl_tensor *p, const odl_tensor *g, odl_tensor *sq, odl_tensor *acc,
                                        const odl_step_scalars *s, float rho, float eps, float weight_decay);
/* The same for count tensors at once: entry i is p[i], g[i] and its state (buf[i] NULL, or buf NULL, where
 * SGD has no momentum), each checked as its *_at twin checks it, all on one device; no two entries may share
 * memory (they run at once). Bitwise count calls of the twin, in one launch per ODL_OPTIM_GROUP_MAX entries on
 * CUDA (odl_optim_group, odl/backend.h). Errors: the twin's (ODL_E_INVAL, ODL_E_UNSUPPORTED for a backend
 * without *_at entries), naming the entry, before anything ran; ODL_E_INVAL for count < 0 or entries on several
 * devices. A launch that fails after earlier groups of ODL_OPTIM_GROUP_MAX ran leaves those updated. */
ODL_API odl_status odl_sgd_step_group_at(int count, odl_tensor *const *p, odl_tensor *const *g, odl_tensor *const *buf,
                                         const odl_step_scalars *s, float momentum, float dampening,
                                         float weight_decay, int nesterov);
ODL_API odl_status odl_adam_step_group_at(int count, odl_tensor *const *p, odl_tensor *const *g, odl_tensor *const *m,
                                          odl_tensor *const *v, const odl_step_scalars *s, float beta1, float beta2,
                                          float eps, float weight_decay, int decoupled);
ODL_API odl_status odl_adadelta_step_group_at(int count, odl_tensor *const *p, odl_tensor *const *g,
                                              odl_tensor *const *sq, odl_tensor *const *acc, const odl_step_scalars *s,
                                              float rho, float eps, float weight_decay);

#ifdef __cplusplus
}
#endif
#endif
