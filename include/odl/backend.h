/* The backend interface: one op table per backend (CPU, CUDA), as ggml's backend vtable.
 *
 * Every entry works on raw, contiguous float32 buffers that live on the backend's device, and returns
 * an odl_status. Shapes are validated once, in the tensor-level ops (odl/ops.h); a backend may assume
 * valid arguments but must still report failures of the calls it makes (a CUDA launch, a workspace
 * allocation). The CPU backend (kernels/cpu/) is the readable reference and the CPU runtime; the CUDA
 * backend (kernels/cuda/) holds the project's own kernels and launches on odl_stream_current().
 *
 * Layouts: matrices are row-major; images NCHW; convolution weights [K, C, R, S] (PyTorch's
 * [out, in, kh, kw]); linear weights [out, in].
 */
#ifndef ODL_BACKEND_H
#define ODL_BACKEND_H

#include <stdint.h>

#include "odl/api.h"
#include "odl/precision.h"
#include "odl/status.h"
#include "odl/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum odl_act {
    ODL_ACT_NONE = 0,
    ODL_ACT_RELU = 1,
    ODL_ACT_SILU = 2,    /* x * sigmoid(x) (YOLOv5's nn.SiLU) */
    ODL_ACT_SIGMOID = 3,
} odl_act;

/* Fused epilogue of GEMM and convolution:
 *   out = act(acc + bias) + residual
 * bias: NULL, or per output column (GEMM: length N; bias_per_row = 1: per row, length M) / per output
 * channel (convolution: length K). residual: NULL, or a tensor of the output's shape added after the
 * activation (YOLOv5's Bottleneck shortcut `x + cv2(cv1(x))`). */
typedef struct odl_epilogue {
    const float *bias;
    int bias_per_row;
    const float *residual;
    odl_act act;
} odl_epilogue;

/* C[M,N] = act(alpha * op(A) * op(B) + beta * C + bias) + residual, row-major, with leading dimensions
 * lda, ldb, ldc (residual uses ldc). op(A) is [M,K]: A is [M,lda] or, with trans_a, [K,lda] read
 * transposed. op(B) is [K,N]: B is [K,ldb] or, with trans_b, [N,ldb]. beta == 0 never reads C (it may
 * hold NaN). Same definition as BLAS sgemm in row-major form. */
typedef struct odl_gemm_args {
    int trans_a, trans_b;
    int64_t M, N, K;
    float alpha;
    const float *A;
    int64_t lda;
    const float *B;
    int64_t ldb;
    float beta;
    float *C;
    int64_t ldc;
    odl_epilogue ep;
} odl_gemm_args;

/* The product of odl_gemm_args with operands and output in other dtypes:
 *   C[M,N] = act(alpha * op(A) * op(B) + beta * C + bias) + residual
 * ab_type (both operands): ODL_BF16 or ODL_F16 (exact in the product), or ODL_F32 multiplied in TF32 (the
 * tensor cores read the upper 19 bits of each float32; the CPU rounds to nearest even, odl/precision.h);
 * c_type: ODL_F32, ODL_BF16 or ODL_F16, each element rounded to nearest even once (beta reads C in c_type).
 * Accumulation float32; bias float32 (per column, or per row with bias_per_row); residual float32 and only
 * with a float32 C. Leading dimensions in elements of the operand's dtype. */
typedef struct odl_gemm_typed_args {
    int trans_a, trans_b;
    int64_t M, N, K;
    float alpha;
    const void *A;
    int64_t lda;
    const void *B;
    int64_t ldb;
    float beta;
    void *C;
    int64_t ldc;
    odl_dtype ab_type, c_type;
    odl_epilogue ep;
} odl_gemm_typed_args;

/* 2-D convolution geometry (dilation 1, groups 1). Input [N,C,H,W], weight [K,C,R,S], output [N,K,P,Q]
 * with P = (H + 2*pad_h - R) / stride_h + 1, Q likewise (PyTorch's Conv2d). */
typedef struct odl_conv2d_shape {
    int N, C, H, W;
    int K, R, S;
    int stride_h, stride_w, pad_h, pad_w;
    int P, Q;
} odl_conv2d_shape;

/* Max-pool geometry: input [N,C,H,W], window kh x kw, stride, padding (pad cells are -inf, as
 * PyTorch's MaxPool2d), output [N,C,P,Q] with P = (H + 2*pad_h - kh) / stride_h + 1 (floor mode). */
typedef struct odl_pool2d_shape {
    int N, C, H, W;
    int kh, kw, stride_h, stride_w, pad_h, pad_w;
    int P, Q;
} odl_pool2d_shape;

/* ---- float16 NHWC inference (YOLOv5 --half) ----
 * odl_half holds IEEE 754 binary16 bits (odl/half.h converts); the C side never computes in half.
 * Tensors are [N, H, W, C] with a pixel stride ld >= C: element (n, h, w, c) is at ((n*H + h)*W + w)*ld + c.
 * A tensor can so be a channel slice of a wider one (pointer + channel offset, ld = the wide C), which
 * makes concatenation along channels free: producers write into slices of the consumer's buffer.
 * Arithmetic is float32 with one rounding to half (round to nearest even) when an element is stored, as
 * cuDNN's float16 convolution with float32 accumulation; the CPU entries are the readable reference. */
typedef uint16_t odl_half;

/* y = act(conv(x, w) + bias) + residual in NHWC (dilation 1, groups 1).
 * Requirements (checked by odl_conv2d_f16_check): C % 8 == 0, ldx % 8 == 0, x and w 16-byte aligned
 * (the CUDA kernel loads 8 channels at a time; pad channels with zeros, e.g. the 3 of an RGB image to 8);
 * ldr even, and ldy even for a float16 y; y and residual 4-byte aligned; ldx >= C, ldy >= K, ldr >= K.
 * residual may be y itself (each element is read before it is written, by the same thread); y must not
 * overlap x. */
typedef struct odl_conv2d_f16_args {
    odl_conv2d_shape s;       /* geometry as for conv2d_fwd (N, C, H, W, K, R, S, stride, pad, P, Q) */
    const odl_half *x;        /* [N, H, W, C], pixel stride ldx */
    int64_t ldx;
    const odl_half *w;        /* [K, R, S, C] (KRSC), contiguous */
    const float *bias;        /* [K] float32, or NULL */
    odl_act act;
    const odl_half *residual; /* NULL, or [N, P, Q, K] with pixel stride ldr, added after act */
    int64_t ldr;
    void *y;                  /* [N, P, Q, K] with pixel stride ldy: half, or float32 when y_f32 */
    int64_t ldy;
    int y_f32;
} odl_conv2d_f16_args;

/* ODL_OK, or ODL_E_INVAL naming the requirement of odl_conv2d_f16_args that a does not meet. */
ODL_API odl_status odl_conv2d_f16_check(const odl_conv2d_f16_args *a);

/* One YOLOv5 Detect level to decode (YOLOv5 v7.0 models/yolo.py Detect.forward, inference branch:
 * s = sigmoid(v); x, y = (s * 2 + grid - 0.5) * stride; w, h = (s * 2)^2 * anchor; scores = s).
 * out [N, rows_total, no] float32 on the device; this level's N * na * ny * nx rows start at row_offset
 * and are ordered anchor, y, x (as YOLOv5 concatenates them). anchors_wh: na (<= 16) pairs of host floats,
 * the anchors' width and height in input pixels. */
typedef struct odl_detect_args {
    float *out;
    int N, na, no, ny, nx;
    int64_t rows_total, row_offset;
    float stride;
    const float *anchors_wh;
} odl_detect_args;

/* Batched YOLOv5 non_max_suppression (utils/general.py, v7.0) over the Detect output, the same result
 * as odl_yolo_nms (include/odl/nms.h) image by image: candidates objectness > conf_thres, score =
 * objectness x class score (every class above conf_thres with multi_label, else the first best class),
 * ordered by decreasing score with ties in (anchor, class) order, the first max_nms of them, class-aware
 * greedy NMS (boxes offset by class x max_wh unless agnostic; suppressed when IoU > iou_thres, float32,
 * no contraction into FMA), the first max_det kept. All pointers are in the backend's memory. */
typedef struct odl_yolo_nms_args {
    int N;               /* images */
    int64_t rows;        /* anchors per image */
    int nc;              /* classes; pred rows are 5 + nc floats */
    const float *pred;   /* [N, rows, 5 + nc]: cx cy w h (input pixels), objectness, class scores */
    float conf_thres, iou_thres, max_wh;
    int multi_label, agnostic, max_nms, max_det;
    int cand_cap;        /* candidates an image may have (a power of two); above it count[n] = -1 and the
                            caller runs odl_yolo_nms for that image */
    float *out;          /* [N, max_det, 6]: x1 y1 x2 y2 (input pixels) conf class */
    int32_t *count;      /* [N] boxes kept, or -1 */
} odl_yolo_nms_args;

/* The scalars of a training step that change from one step to the next, kept in the backend's memory
 * (device memory on CUDA) so that the kernels read them when they run instead of taking them as launch
 * arguments: a step captured once into a CUDA graph then replays correctly at every later step, and
 * nothing is captured again when the learning rate changes. The host writes optim_step, rng_step and lr
 * (start, resume, the StepLR change at an epoch's end); step_scalars_advance, the first operation of
 * every step, derives the rest on the device. */
typedef struct odl_step_scalars {
    int64_t optim_step;  /* optimiser updates done; advance adds one, so inside a step: this update's number */
    int64_t rng_step;    /* training steps done; advance adds one after taking the dropout offset from it */
    uint64_t rng_offset; /* this step's dropout offset: (rng_step * world_size + rank) * rng_stride, layer i
                            draws at rng_offset + i (odl_net_dropout_offset) */
    float lr;            /* learning rate of the update (host-written) */
    float step_size;     /* Adam: lr / (1 - beta1^optim_step) */
    float bc2_sqrt;      /* Adam: sqrt(1 - beta2^optim_step) */
    float decay;         /* AdamW: 1 - lr * weight_decay */
    int32_t first;       /* SGD: optim_step == 1 */
    int32_t pad_;
} odl_step_scalars;

/* What step_scalars_advance needs besides the scalars: constant for a run. */
typedef struct odl_step_hyper {
    int world_size, rank;
    uint32_t rng_stride;               /* ODL_NET_RNG_STRIDE */
    float beta1, beta2, weight_decay;  /* Adam(W)'s; ignored by the other optimisers */
} odl_step_hyper;

/* Several tensors' optimiser update in one backend call (one kernel launch on CUDA, where a training step of
 * eight parameters launched eight: ~4.5 us each in a CUDA graph, mostly fixed cost). Entry i: n[i] float32
 * elements of the parameter p[i], its gradient g[i] and state s1[i], s2[i] (SGD: s1 = momentum buffer, NULL
 * without momentum; Adam: m, v; Adadelta: sq, acc), all in the backend's memory. */
#define ODL_OPTIM_GROUP_MAX 16
typedef struct odl_optim_group {
    int count;
    int64_t n[ODL_OPTIM_GROUP_MAX];
    float *p[ODL_OPTIM_GROUP_MAX];
    const float *g[ODL_OPTIM_GROUP_MAX];
    float *s1[ODL_OPTIM_GROUP_MAX];
    float *s2[ODL_OPTIM_GROUP_MAX];
} odl_optim_group;

/* The rows of a Detect output that YOLOv5's NMS can take, for odl_yolo_nms to run on the host without
 * the whole output: per image n, the rows with objectness > conf_thres (NaN fails), in row order, into
 * out[n, 0 .. min(count[n], cap)), and the number of rows holding a NaN or an infinity (as
 * odl_yolo_nonfinite_rows counts them). odl_yolo_nms on the first count[n] rows gives what it gives on
 * all rows (it takes only such rows, in order) when count[n] <= cap; above cap only cap rows are written
 * and the caller copies the whole output instead. All pointers are in the backend's memory. */
typedef struct odl_yolo_cand_args {
    int N;
    int64_t rows;
    int nc;              /* rows are 5 + nc floats */
    const float *pred;   /* [N, rows, 5 + nc] */
    float conf_thres;
    int cap;             /* rows of room per image */
    float *out;          /* [N, cap, 5 + nc] */
    int32_t *count;      /* [N] candidate rows (may exceed cap) */
    int32_t *nonfinite;  /* [N] rows with a NaN or an infinity */
} odl_yolo_cand_args;

/* One image of letterbox_u8: RGB bytes (3 a pixel) stored as w x h rows `pitch` bytes apart from
 * src + off, shown with EXIF orientation `orient` (1..8; 1 none; 5..8 swap the axes, so the oriented image
 * is h x w), resized to unpad_w x unpad_h with cv2's INTER_LINEAR (a copy when the sizes are equal) and
 * placed at column `left`, row `top` of the letterbox. Formulas: kernels/resize_linear.h. */
typedef struct odl_letterbox_src {
    int64_t off, pitch;
    int32_t w, h, orient;
    int32_t unpad_w, unpad_h, left, top;
    int32_t pad_; /* 0 */
} odl_letterbox_src;

typedef struct odl_backend {
    const char *name;
    /* Free the backend's cached device buffers (its workspace); NULL when it keeps none. Run by
     * odl_cuda_shutdown before the pools are checked for live allocations. */
    void (*release)(void);
    /* A count that changes whenever device memory the backend lent to kernels (its workspace) may have been
     * freed: the retired buffers of a growth freed, the workspace released. A CUDA graph captured at
     * another count may point into freed memory and must be captured again. NULL when the backend keeps
     * no such memory. */
    uint64_t (*workspace_epoch)(void);

    /* ---- linear algebra ---- */
    odl_status (*gemm)(const odl_gemm_args *a);

    /* ---- convolution ----
     * fwd: y = act(conv(x, w) + bias) + residual (ep.bias_per_row ignored; bias per output channel).
     * bwd_data: dx = conv_transpose(dy, w) (overwrites dx); with relu_x (the forward's input x, of a
     * convolution whose input is a ReLU's output) dx = 0 where relu_x <= 0: that ReLU's backward fused,
     * the bits of act_bwd(RELU) run after (a backend may run it after, or in its store).
     * bwd_weight: dw = sum_n corr(x, dy) (overwrites dw); db (nullable) = sum over N,P,Q of dy. */
    odl_status (*conv2d_fwd)(const odl_conv2d_shape *s, const float *x, const float *w, const odl_epilogue *ep,
                             float *y);
    odl_status (*conv2d_bwd_data)(const odl_conv2d_shape *s, const float *dy, const float *w, const float *relu_x,
                                  float *dx);
    odl_status (*conv2d_bwd_weight)(const odl_conv2d_shape *s, const float *x, const float *dy, float *dw,
                                    float *db);
    /* bwd_weight of dy masked by the ReLU output relu_y [N,K,P,Q] of this convolution's epilogue (dy where
     * relu_y > 0, else 0; act_bwd(RELU)'s bits) with the mask applied in the kernel's own reads of dy, the
     * dw and db bits of the bwd_weight entry of any precision after act_bwd: *fused = 1. Where the backend
     * cannot (a shape or setting), it does nothing and sets *fused = 0, and ops.c masks dy in place and calls
     * the bwd_weight entry; so it does when this entry is NULL. */
    odl_status (*conv2d_bwd_weight_relu)(const odl_conv2d_shape *s, const float *x, const float *dy,
                                         const float *relu_y, float *dw, float *db, int *fused);

    /* ---- pooling ----
     * fwd writes y and, when argmax != NULL, the flat index h*W + w of each maximum inside its input
     * plane (first maximum in scan order on ties, as PyTorch). bwd: dx = 0, then dx[argmax] += dy; with
     * relu_y (the forward's y, of a pool whose input is a ReLU's output) only where relu_y > 0: the ReLU's
     * backward fused (x[argmax] = y, and dx is 0 wherever x is not some window's maximum). */
    odl_status (*maxpool2d_fwd)(const odl_pool2d_shape *s, const float *x, float *y, int32_t *argmax);
    odl_status (*maxpool2d_bwd)(const odl_pool2d_shape *s, const float *dy, const int32_t *argmax, const float *relu_y,
                                float *dx);

    /* ---- element-wise activations (n elements; y may alias x) ----
     * bwd: dx = dy * act'(x); y is the forward output (used by sigmoid; may be NULL for others).
     * dx may alias dy. */
    odl_status (*act_fwd)(odl_act act, int64_t n, const float *x, float *y);
    odl_status (*act_bwd)(odl_act act, int64_t n, const float *x, const float *y, const float *dy, float *dx);

    /* ---- dropout (inverted, as PyTorch): keep element i when odl_philox_uniform(seed, offset, i) >= p,
     * y = keep ? x * scale : 0 with scale = 1 / (1 - p) computed once in float, as PyTorch (so every
     * backend multiplies by the same rounded scale). bwd regenerates the same mask: dx = keep ? dy * scale : 0. ---- */
    odl_status (*dropout_fwd)(int64_t n, float p, uint64_t seed, uint64_t offset, const float *x, float *y);
    odl_status (*dropout_bwd)(int64_t n, float p, uint64_t seed, uint64_t offset, const float *dy, float *dx);

    /* ---- batch normalisation over NCHW, per channel (PyTorch BatchNorm2d) ----
     * infer: y = (x - mean) / sqrt(var + eps) * gamma + beta.
     * train: batch mean and biased variance over N*H*W; y normalised with them; save_mean and
     *   save_invstd = 1/sqrt(var_biased + eps) for backward; running stats updated as
     *   r = (1 - momentum) * r + momentum * stat, with the unbiased variance for running_var.
     * bwd: dx, dgamma, dbeta from dy, x and the saved statistics (overwrites all three). */
    odl_status (*batchnorm_infer)(int N, int C, int64_t HW, const float *x, const float *gamma, const float *beta,
                                  const float *mean, const float *var, float eps, float *y);
    odl_status (*batchnorm_train_fwd)(int N, int C, int64_t HW, const float *x, const float *gamma,
                                      const float *beta, float *running_mean, float *running_var, float momentum,
                                      float eps, float *y, float *save_mean, float *save_invstd);
    odl_status (*batchnorm_bwd)(int N, int C, int64_t HW, const float *x, const float *dy, const float *gamma,
                                const float *save_mean, const float *save_invstd, float *dx, float *dgamma,
                                float *dbeta);

    /* ---- nearest upsample x2 (NCHW): y[n,c,h,w] = x[n,c,h/2,w/2]; H and W are the small tensor's size in
     * both directions; bwd sums each 2x2 block as ((a + b) + c) + d in scan order ---- */
    odl_status (*upsample2x_fwd)(int N, int C, int H, int W, const float *x, float *y);
    odl_status (*upsample2x_bwd)(int N, int C, int H, int W, const float *dy, float *dx);

    /* ---- channel slice copy, the building block of concat along channels (NCHW) ----
     * to_slice = 1: dst[n, c_offset + c, :] = src[n, c, :] for c < C_src (concat forward);
     * to_slice = 0: src[n, c, :] = dst[n, c_offset + c, :] (concat backward, slice out).
     * src is [N, C_src, HW], dst is [N, C_dst, HW]. */
    odl_status (*channel_copy)(int N, int64_t HW, float *src, int C_src, float *dst, int C_dst, int c_offset,
                               int to_slice);

    /* ---- log-softmax + NLL loss (mean over the batch), PyTorch's log_softmax + nll_loss ----
     * fwd: logprobs[B,C] = log_softmax(logits); *loss (one float on the device) = -mean_b logprobs[b, label_b].
     * bwd: dlogits = (exp(logprobs) - onehot(label)) * dloss / B. labels are int32 in [0, C). */
    odl_status (*log_softmax_nll_fwd)(int B, int C, const float *logits, const int32_t *labels, float *logprobs,
                                      float *loss);
    odl_status (*log_softmax_nll_bwd)(int B, int C, const float *logprobs, const int32_t *labels, float dloss,
                                      float *dlogits);
    /* Index of the largest element of each row of x[B,C] (first on ties). */
    odl_status (*argmax_rows)(int B, int C, const float *x, int32_t *out);

    /* ---- element-wise arithmetic and reductions ---- */
    odl_status (*add)(int64_t n, const float *a, const float *b, float *y);    /* y = a + b */
    odl_status (*mul)(int64_t n, const float *a, const float *b, float *y);    /* y = a * b */
    odl_status (*scale)(int64_t n, float alpha, const float *x, float *y);     /* y = alpha * x */
    odl_status (*axpy)(int64_t n, float alpha, const float *x, float *y);      /* y += alpha * x */
    odl_status (*fill)(int64_t n, float value, float *y);
    /* y[n] = sum_m x[m, n] for x [M, N] (bias gradient of a linear layer). Overwrites y. */
    odl_status (*sum_rows)(int64_t M, int64_t N, const float *x, float *y);
    /* *out (one float on the device) = sum of n elements. */
    odl_status (*sum)(int64_t n, const float *x, float *out);

    /* ---- optimiser updates, in place, PyTorch's torch.optim formulas (see each) ----
     * SGD (torch.optim.SGD): g += wd*p; buf = step==1 ? g : momentum*buf + (1-dampening)*g;
     *   g = nesterov ? g + momentum*buf : buf (when momentum != 0); p -= lr*g. step counts from 1.
     * Adam/AdamW (torch.optim.Adam/AdamW): AdamW: p *= 1 - lr*wd; Adam: g += wd*p; m = b1*m + (1-b1)*g;
     *   v = b2*v + (1-b2)*g^2; p -= lr * (m / (1-b1^step)) / (sqrt(v / (1-b2^step)) + eps).
     * Adadelta (torch.optim.Adadelta): g += wd*p; sq = rho*sq + (1-rho)*g^2;
     *   d = sqrt(acc + eps) / sqrt(sq + eps) * g; acc = rho*acc + (1-rho)*d^2; p -= lr*d. */
    odl_status (*sgd_step)(int64_t n, float *p, const float *g, float *buf, float lr, float momentum,
                           float dampening, float weight_decay, int nesterov, int64_t step);
    odl_status (*adam_step)(int64_t n, float *p, const float *g, float *m, float *v, float lr, float beta1,
                            float beta2, float eps, float weight_decay, int decoupled, int64_t step);
    odl_status (*adadelta_step)(int64_t n, float *p, const float *g, float *sq, float *acc, float lr, float rho,
                                float eps, float weight_decay);

    /* ---- float16 NHWC inference (see odl_conv2d_f16_args above; arguments are valid, checked by the
     * caller with odl_conv2d_f16_check / the shapes) ----
     * conv2d_f16: the convolution of odl_conv2d_f16_args.
     * maxpool2d_f16: y = max-pool(x) with odl_pool2d_shape (pad cells -inf, no argmax); x [N, H, W, C]
     *   pixel stride ldx, y [N, P, Q, C] pixel stride ldy (s->C is the channel count).
     * upsample2x_f16: y[n, h, w, c] = x[n, h/2, w/2, c]; H, W are x's size; x stride ldx, y stride ldy.
     * copy_f16: y[i, c] = x[i, c] for `pixels` pixels of C channels (a channel-slice copy).
     * nchw_f32_to_nhwc_f16 with space-to-depth by `block` (1: none): x [N, C, H, W] float32 contiguous,
     *   H and W multiples of block; y [N, H/block, W/block, C_pad] contiguous with
     *   y[n, h, w, (i*block + j)*C + c] = half(x[n, c, h*block + i, w*block + j]) and 0 in channels
     *   block*block*C .. C_pad-1 (C_pad >= block*block*C). Block 2 turns YOLOv5's first convolution
     *   (6x6, stride 2, pad 2) into a 3x3 stride-1 convolution over 4x the channels (as the Focus layer it
     *   replaced), half the reduction length and a quarter of the padded input. */
    odl_status (*conv2d_f16)(const odl_conv2d_f16_args *a);
    odl_status (*maxpool2d_f16)(const odl_pool2d_shape *s, const odl_half *x, int64_t ldx, odl_half *y,
                                int64_t ldy);
    odl_status (*upsample2x_f16)(int N, int H, int W, int C, const odl_half *x, int64_t ldx, odl_half *y,
                                 int64_t ldy);
    odl_status (*copy_f16)(int64_t pixels, int C, const odl_half *x, int64_t ldx, odl_half *y, int64_t ldy);
    odl_status (*nchw_f32_to_nhwc_f16)(int N, int C, int H, int W, const float *x, int block, int C_pad,
                                       odl_half *y);

    /* ---- YOLOv5 Detect (odl_detect_args) ----
     * yolov5_detect_decode: decode one level's head output, float32 [N, na * no, ny, nx] (nhwc 0) or
     * [N, ny, nx, na * no] (nhwc 1; the CPU only, else ODL_E_UNSUPPORTED), into d->out.
     * yolov5_detect_head_f16: the float16 head convolution a (its act, residual and y ignored; a->s.K =
     * na * no) with the decoding fused into its epilogue, so the head output never reaches memory; NULL
     * where the backend has none (the caller then runs conv2d_f16 into float32 NHWC and decodes). */
    odl_status (*yolov5_detect_decode)(const odl_detect_args *d, const float *head, int nhwc);
    odl_status (*yolov5_detect_head_f16)(const odl_conv2d_f16_args *a, const odl_detect_args *d);

    /* ---- detection pre- and post-processing (the eval/infer pipeline; arguments checked by the caller) ----
     * letterbox_u8: N images img[n] (odl_letterbox_src) of the uint8 buffer src, each oriented, resized
     *   and placed in an H x W letterbox: y [N, 3, H, W] float32 = pixel / 255.0f inside, pad / 255.0f
     *   outside (YOLOv5's letterbox border 114 and `im /= 255`); bitwise what odl_image_letterbox gives
     *   from the oriented image, then odl_image_to_chw. src, img and y are in the backend's memory.
     * yolo_nms: odl_yolo_nms_args.
     * yolo_candidates: odl_yolo_cand_args. */
    odl_status (*letterbox_u8)(int N, int H, int W, const uint8_t *src, const odl_letterbox_src *img, uint8_t pad,
                               float *y);
    odl_status (*yolo_nms)(const odl_yolo_nms_args *a);
    odl_status (*yolo_candidates)(const odl_yolo_cand_args *a);
    /* ---- GEMM in a lower input precision (odl/precision.h): the product of odl_gemm_args with every
     * element of op(A) and op(B) rounded to prec's format (round to nearest even) and float32
     * accumulation; the epilogue (alpha, beta, bias, act, residual) in float32 as gemm's. CUDA: TF32 /
     * BF16 tensor-core kernels (kernels/cuda/gemm_tc.cu); CPU: rounded copies of the operands through the
     * float32 GEMM (kernels/cpu/gemm_lowp.c). ODL_PRECISION_FP32 is gemm itself. ---- */
    odl_status (*gemm_lowp)(const odl_gemm_args *a, odl_precision prec);
    /* ---- convolution in a lower input precision (odl/precision.h): conv2d_fwd, conv2d_bwd_data and
     * conv2d_bwd_weight with every element of both operands (x and w; dy and w; x and dy) rounded to prec's
     * format (round to nearest even) and float32 accumulation; bias, activation, residual and db (from
     * the float32 dy) in float32 as the float32 entries, as cuDNN's TF32 mode and torch.autocast's bfloat16
     * convolutions compute. A backend may give the float32 entry's result where it has no lower-precision
     * kernel for a shape (CUDA: bwd_weight with C*R*S <= 16). CUDA: mma.sync implicit GEMMs
     * (kernels/cuda/conv2d_tc.cu); CPU: rounded copies of the operands through the float32 entries
     * (kernels/cpu/conv2d_lowp.c). ODL_PRECISION_FP32 is the float32 entry itself. ---- */
    odl_status (*conv2d_fwd_lowp)(const odl_conv2d_shape *s, const float *x, const float *w, const odl_epilogue *ep,
                                  float *y, odl_precision prec);
    odl_status (*conv2d_bwd_data_lowp)(const odl_conv2d_shape *s, const float *dy, const float *w,
                                       const float *relu_x, float *dx, odl_precision prec);
    odl_status (*conv2d_bwd_weight_lowp)(const odl_conv2d_shape *s, const float *x, const float *dy, float *dw,
                                         float *db, odl_precision prec);
    /* ---- GEMM on typed operands (odl_gemm_typed_args): CUDA on compute capability 9.0 through wgmma
     * (kernels/cuda/gemm_sm90.cu), elsewhere float32 copies through gemm_lowp; CPU: float32 copies through
     * gemm / gemm_lowp. ODL_E_INVAL for a dtype outside the list above. ---- */
    odl_status (*gemm_typed)(const odl_gemm_typed_args *a);
    /* How gemm_lowp (TF32) and gemm_typed (ODL_F32 operands) round float32 operands to TF32 on the current
     * device (odl/precision.h): the CPU and the mma.sync kernels round to nearest even in their pack; the
     * wgmma kernels of compute capability 9.0 feed float32 straight to the tensor cores, which read the
     * upper 19 bits. BF16 is always rounded to nearest even (in the pack). */
    odl_tf32_rounding (*tf32_rounding)(void);

    /* ---- a training step's scalars in the backend's memory (odl_step_scalars; s lives on the device) ----
     * step_scalars_advance: one update of *s as odl_step_scalars says (a single thread on CUDA).
     * dropout_fwd_at / dropout_bwd_at: dropout_fwd / dropout_bwd at offset s->rng_offset + layer.
     * sgd_step_at, adam_step_at, adadelta_step_at: the updates above with lr and the step's scalars read
     *   from *s (step = s->optim_step): bitwise what sgd_step / adam_step / adadelta_step give for
     *   lr = s->lr and that step, on every backend (kernels/step_scalars.h). */
    odl_status (*step_scalars_advance)(odl_step_scalars *s, const odl_step_hyper *h);
    odl_status (*dropout_fwd_at)(int64_t n, float p, uint64_t seed, const odl_step_scalars *s, uint64_t layer,
                                 const float *x, float *y);
    odl_status (*dropout_bwd_at)(int64_t n, float p, uint64_t seed, const odl_step_scalars *s, uint64_t layer,
                                 const float *dy, float *dx);
    odl_status (*sgd_step_at)(int64_t n, float *p, const float *g, float *buf, const odl_step_scalars *s,
                              float momentum, float dampening, float weight_decay, int nesterov);
    odl_status (*adam_step_at)(int64_t n, float *p, const float *g, float *m, float *v, const odl_step_scalars *s,
                               float beta1, float beta2, float eps, float weight_decay, int decoupled);
    odl_status (*adadelta_step_at)(int64_t n, float *p, const float *g, float *sq, float *acc,
                                   const odl_step_scalars *s, float rho, float eps, float weight_decay);
    /* sgd_step_group_at, adam_step_group_at, adadelta_step_group_at: the *_at update of every entry of t
     *   (1 <= t->count <= ODL_OPTIM_GROUP_MAX) in one call, each entry bitwise what its own *_at call gives.
     *   NULL where a backend has none (the CPU's): the ops then make one *_at call per entry. */
    odl_status (*sgd_step_group_at)(const odl_optim_group *t, const odl_step_scalars *s, float momentum,
                                    float dampening, float weight_decay, int nesterov);
    odl_status (*adam_step_group_at)(const odl_optim_group *t, const odl_step_scalars *s, float beta1, float beta2,
                                     float eps, float weight_decay, int decoupled);
    odl_status (*adadelta_step_group_at)(const odl_optim_group *t, const odl_step_scalars *s, float rho, float eps,
                                         float weight_decay);
} odl_backend;

/* Number of threads the CPU backend's kernels use: $ODL_CPU_THREADS when set (1..64; odl/env.h), else the
 * number of online CPUs (at most 64). Results do not depend on it (kernels/cpu/cpu.h says why). */
ODL_API int odl_cpu_num_threads(void);
/* Override the thread count (clamped to 1..64) for later loops, e.g. to show in a test that results do
 * not depend on it. Not to be called while a parallel loop runs. */
ODL_API void odl_cpu_set_num_threads(int n);

/* Whether a loss op copies its label range check back (one stream synchronisation per call on CUDA;
 * kernels/cuda/loss.cu). On unless turned off here; ODL_CUDA_LABEL_CHECK (odl/env.h), when set, wins.
 * Training turns it off: its labels are range-checked when the IDX files are read. */
ODL_API void odl_backend_set_label_check(int on);
ODL_API int odl_backend_label_check(void);

/* The op table of a device type; NULL for CUDA in a CPU-only build. */
ODL_API const odl_backend *odl_backend_cpu(void);
ODL_API const odl_backend *odl_backend_cuda(void);
/* The table for a device, or NULL (and an error message) when that backend is not built. */
ODL_API const odl_backend *odl_backend_for(odl_device dev);
/* The device's backend's workspace_epoch (0 where it keeps no workspace): a CUDA graph captured at another
 * value must be captured again. */
ODL_API uint64_t odl_backend_workspace_epoch(odl_device dev);

#ifdef __cplusplus
}
#endif
#endif
