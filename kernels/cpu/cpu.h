/* Internal interface of the CPU backend (kernels/cpu/): the entry points that backend.c assembles into
 * the op table, a small deterministic thread pool and per-thread scratch buffers.
 *
 * Determinism: every CPU kernel produces bitwise the same output for the same input whatever the number
 * of threads. Work is only ever split so that each output element is computed by one thread, with an
 * operation order that does not depend on the split; reductions over a split dimension are never
 * combined from per-thread partial sums.
 */
#ifndef ODL_KERNELS_CPU_H
#define ODL_KERNELS_CPU_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "odl/backend.h"

/* Hot loops are compiled twice on x86-64, for the SSE2 baseline and for AVX2, and the variant is picked
 * when the library is loaded (gcc/clang target_clones). Both variants do the same float operations in
 * the same order (no FMA is enabled, and ISO C mode compiles with -ffp-contract=off), so results are
 * bitwise identical either way. ODL_CPU_NO_CLONES builds the baseline only. ThreadSanitizer instruments
 * the ifunc resolver, which runs before it is initialised: no clones then. */
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__)) && !defined(ODL_CPU_NO_CLONES) && \
    !defined(__SANITIZE_THREAD__)
#define ODL_CPU_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define ODL_CPU_CLONES
#endif

/* ---- threads (threads.c) ----
 * odl_cpu_num_threads / odl_cpu_set_num_threads are public (odl/backend.h). */

/* Body of a parallel loop: handles indices [begin, end) as chunk number `chunk`. May fail; a failure
 * must leave a message with ODL_ERR as usual. */
typedef odl_status (*odl_cpu_range_fn)(void *ctx, int chunk, int64_t begin, int64_t end);

/* Split [0, n) into at most odl_cpu_num_threads() contiguous chunks of at least `grain` indices and run
 * fn on them, the calling thread taking chunk 0. Runs fn(ctx, 0, 0, n) on the calling thread alone when
 * there is one chunk, when called from inside a parallel loop (no nesting) or when another thread is
 * using the pool. Returns the status of the first failing chunk (in chunk order) with its message.
 * Also returns the number of chunks used in *nchunks when not NULL. */
odl_status odl_cpu_parallel_for(int64_t n, int64_t grain, odl_cpu_range_fn fn, void *ctx, int *nchunks);

/* Number of chunks odl_cpu_parallel_for(n, grain, ...) would use if the pool were free; callers that need
 * one workspace per chunk size it with this. */
int odl_cpu_plan_chunks(int64_t n, int64_t grain);

/* A per-thread scratch buffer of at least `nfloats` floats, 64-byte aligned, kept between calls and
 * reused (slot 0..ODL_CPU_SCRATCH_SLOTS-1; each caller family owns its slot so that nested users do not
 * clobber each other). Errors: ODL_E_NOMEM. */
#define ODL_CPU_SCRATCH_SLOTS 4
enum { ODL_SCRATCH_GEMM_A = 0, ODL_SCRATCH_GEMM_B = 1, ODL_SCRATCH_CONV = 2, ODL_SCRATCH_MISC = 3 };
odl_status odl_cpu_scratch(int slot, size_t nfloats, float **out);

/* ---- GEMM (gemm.c) ---- */
odl_status odl_cpu_gemm(const odl_gemm_args *a);
/* dst[r * cols + c] = odl_round_mantissa(src[r * ld + c], keep) for a rows x cols matrix with leading
 * dimension ld (gemm_lowp.c; the CPU's one rounding loop of the TF32 / BF16 ops). */
void odl_cpu_round_copy(const float *src, int64_t rows, int64_t cols, int64_t ld, int keep, float *dst);
/* gemm_lowp (gemm_lowp.c): TF32 / BF16 rounding of the inputs, then odl_cpu_gemm. */
odl_status odl_cpu_gemm_lowp(const odl_gemm_args *a, odl_precision prec);
/* gemm_typed (gemm_lowp.c): float32 copies of bfloat16 / float16 operands, TF32 rounding of float32 ones. */
odl_status odl_cpu_gemm_typed(const odl_gemm_typed_args *t);
odl_tf32_rounding odl_cpu_tf32_rounding(void);

/* ---- convolution (conv2d.c) ---- */
odl_status odl_cpu_conv2d_fwd(const odl_conv2d_shape *s, const float *x, const float *w, const odl_epilogue *ep,
                              float *y);
odl_status odl_cpu_conv2d_bwd_data(const odl_conv2d_shape *s, const float *dy, const float *w, const float *relu_x,
                                   float *dx);
odl_status odl_cpu_conv2d_bwd_weight(const odl_conv2d_shape *s, const float *x, const float *dy, float *dw,
                                     float *db);
/* db[k] = sum over N, P, Q of dy (double sums): bwd_weight's bias gradient alone. */
odl_status odl_cpu_conv2d_bias_grad(const odl_conv2d_shape *s, const float *dy, float *db);
/* conv2d_*_lowp (conv2d_lowp.c): TF32 / BF16 rounded copies of both operands, then the float32 entries. */
odl_status odl_cpu_conv2d_fwd_lowp(const odl_conv2d_shape *s, const float *x, const float *w, const odl_epilogue *ep,
                                   float *y, odl_precision prec);
odl_status odl_cpu_conv2d_bwd_data_lowp(const odl_conv2d_shape *s, const float *dy, const float *w,
                                        const float *relu_x, float *dx, odl_precision prec);
odl_status odl_cpu_conv2d_bwd_weight_lowp(const odl_conv2d_shape *s, const float *x, const float *dy, float *dw,
                                          float *db, odl_precision prec);

/* ---- pooling (pool.c) ---- */
odl_status odl_cpu_maxpool2d_fwd(const odl_pool2d_shape *s, const float *x, float *y, int32_t *argmax);
odl_status odl_cpu_maxpool2d_bwd(const odl_pool2d_shape *s, const float *dy, const int32_t *argmax, const float *relu_y,
                                 float *dx);

/* ---- element-wise (elementwise.c) ---- */
/* act(v) for one value; shared by the GEMM/convolution epilogue and act_fwd so that a fused and an
 * unfused activation give identical bits. ReLU keeps NaN (x < 0 ? 0 : x), as torch.relu does; SiLU is
 * x / (1 + exp(-x)) and sigmoid 1 / (1 + exp(-x)), PyTorch's CPU formulas. */
static inline float odl_cpu_relu1(float v) { return v < 0.0f ? 0.0f : v; }
static inline float odl_cpu_sigmoid1(float v) { return 1.0f / (1.0f + expf(-v)); }
static inline float odl_cpu_silu1(float v) { return v / (1.0f + expf(-v)); }
static inline float odl_cpu_act1(odl_act act, float v) {
    switch (act) {
    case ODL_ACT_RELU: return odl_cpu_relu1(v);
    case ODL_ACT_SILU: return odl_cpu_silu1(v);
    case ODL_ACT_SIGMOID: return odl_cpu_sigmoid1(v);
    default: return v;
    }
}
odl_status odl_cpu_act_fwd(odl_act act, int64_t n, const float *x, float *y);
odl_status odl_cpu_act_bwd(odl_act act, int64_t n, const float *x, const float *y, const float *dy, float *dx);
odl_status odl_cpu_dropout_fwd(int64_t n, float p, uint64_t seed, uint64_t offset, const float *x, float *y);
odl_status odl_cpu_dropout_bwd(int64_t n, float p, uint64_t seed, uint64_t offset, const float *dy, float *dx);
odl_status odl_cpu_dropout_fwd_at(int64_t n, float p, uint64_t seed, const odl_step_scalars *s, uint64_t layer,
                                  const float *x, float *y);
odl_status odl_cpu_dropout_bwd_at(int64_t n, float p, uint64_t seed, const odl_step_scalars *s, uint64_t layer,
                                  const float *dy, float *dx);
odl_status odl_cpu_add(int64_t n, const float *a, const float *b, float *y);
odl_status odl_cpu_mul(int64_t n, const float *a, const float *b, float *y);
odl_status odl_cpu_scale(int64_t n, float alpha, const float *x, float *y);
odl_status odl_cpu_axpy(int64_t n, float alpha, const float *x, float *y);
odl_status odl_cpu_fill(int64_t n, float value, float *y);
odl_status odl_cpu_sum_rows(int64_t M, int64_t N, const float *x, float *y);
odl_status odl_cpu_sum(int64_t n, const float *x, float *out);
/* Sum of n floats in double with 8 interleaved partial sums combined in a fixed order (deterministic,
 * and not latency-bound like one running sum). */
double odl_cpu_sum_f64(const float *x, int64_t n);

/* ---- batch normalisation (batchnorm.c) ---- */
odl_status odl_cpu_batchnorm_infer(int N, int C, int64_t HW, const float *x, const float *gamma, const float *beta,
                                   const float *mean, const float *var, float eps, float *y);
odl_status odl_cpu_batchnorm_train_fwd(int N, int C, int64_t HW, const float *x, const float *gamma,
                                       const float *beta, float *running_mean, float *running_var, float momentum,
                                       float eps, float *y, float *save_mean, float *save_invstd);
odl_status odl_cpu_batchnorm_bwd(int N, int C, int64_t HW, const float *x, const float *dy, const float *gamma,
                                 const float *save_mean, const float *save_invstd, float *dx, float *dgamma,
                                 float *dbeta);

/* ---- layout: upsample, channel copy (layout.c) ---- */
odl_status odl_cpu_upsample2x_fwd(int N, int C, int H, int W, const float *x, float *y);
odl_status odl_cpu_upsample2x_bwd(int N, int C, int H, int W, const float *dy, float *dx);
odl_status odl_cpu_channel_copy(int N, int64_t HW, float *src, int C_src, float *dst, int C_dst, int c_offset,
                                int to_slice);

/* ---- float16 NHWC inference (nhwc_f16.c): the entries of odl/backend.h's "float16 NHWC inference" ---- */
odl_status odl_cpu_conv2d_f16(const odl_conv2d_f16_args *a);
odl_status odl_cpu_maxpool2d_f16(const odl_pool2d_shape *s, const odl_half *x, int64_t ldx, odl_half *y,
                                 int64_t ldy);
odl_status odl_cpu_upsample2x_f16(int N, int H, int W, int C, const odl_half *x, int64_t ldx, odl_half *y,
                                  int64_t ldy);
odl_status odl_cpu_copy_f16(int64_t pixels, int C, const odl_half *x, int64_t ldx, odl_half *y, int64_t ldy);
odl_status odl_cpu_nchw_f32_to_nhwc_f16(int N, int C, int H, int W, const float *x, int block, int C_pad,
                                       odl_half *y);

/* ---- YOLOv5 Detect (yolov5_detect.c) ---- */
odl_status odl_cpu_yolov5_detect_decode(const odl_detect_args *d, const float *head, int nhwc);

/* ---- losses (loss.c) ---- */
odl_status odl_cpu_log_softmax_nll_fwd(int B, int C, const float *logits, const int32_t *labels, float *logprobs,
                                       float *loss);
odl_status odl_cpu_log_softmax_nll_bwd(int B, int C, const float *logprobs, const int32_t *labels, float dloss,
                                       float *dlogits);
odl_status odl_cpu_argmax_rows(int B, int C, const float *x, int32_t *out);

/* ---- optimisers (optim.c) ---- */
odl_status odl_cpu_sgd_step(int64_t n, float *p, const float *g, float *buf, float lr, float momentum,
                            float dampening, float weight_decay, int nesterov, int64_t step);
odl_status odl_cpu_adam_step(int64_t n, float *p, const float *g, float *m, float *v, float lr, float beta1,
                             float beta2, float eps, float weight_decay, int decoupled, int64_t step);
odl_status odl_cpu_adadelta_step(int64_t n, float *p, const float *g, float *sq, float *acc, float lr, float rho,
                                 float eps, float weight_decay);
odl_status odl_cpu_step_scalars_advance(odl_step_scalars *s, const odl_step_hyper *h);
odl_status odl_cpu_sgd_step_at(int64_t n, float *p, const float *g, float *buf, const odl_step_scalars *s,
                               float momentum, float dampening, float weight_decay, int nesterov);
odl_status odl_cpu_adam_step_at(int64_t n, float *p, const float *g, float *m, float *v, const odl_step_scalars *s,
                                float beta1, float beta2, float eps, float weight_decay, int decoupled);
odl_status odl_cpu_adadelta_step_at(int64_t n, float *p, const float *g, float *sq, float *acc,
                                    const odl_step_scalars *s, float rho, float eps, float weight_decay);

/* ---- detection pipeline (detect_post.c) ---- */
odl_status odl_cpu_letterbox_u8(int N, int H, int W, const uint8_t *src, const odl_letterbox_src *img, uint8_t pad,
                                float *y);
odl_status odl_cpu_yolo_nms(const odl_yolo_nms_args *a);
odl_status odl_cpu_yolo_candidates(const odl_yolo_cand_args *a);

#endif
