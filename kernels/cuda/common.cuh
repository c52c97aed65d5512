/* Shared pieces of the CUDA backend (kernels/cuda/): launch checks, the current stream, device facts,
 * the backend's workspace, fast integer division, activations and the internal entry points that
 * backend.cu assembles into the op table.
 *
 * Every kernel is launched on odlk::stream() (the calling thread's odl_stream_current()) and every
 * launch is followed by ODL_CUDA_LAUNCH_CHECK("<kernel>"), which turns cudaGetLastError() into
 * ODL_E_CUDA with the kernel's name and CUDA's message.
 */
#ifndef ODL_KERNELS_CUDA_COMMON_CUH
#define ODL_KERNELS_CUDA_COMMON_CUH

#include <cuda_runtime.h>
#include <atomic>
#include <stddef.h>
#include <stdint.h>

#include "odl/backend.h"
#include "odl/device.h"
#include "odl/status.h"

/* After a launch: report a failed launch (bad configuration, missing kernel image, sticky fault). */
#define ODL_CUDA_LAUNCH_CHECK(name)                                                           \
    do {                                                                                      \
        cudaError_t odl_e_ = cudaGetLastError();                                              \
        if (odl_e_ != cudaSuccess)                                                            \
            return ODL_ERR(ODL_E_CUDA, "%s: %s", (name), cudaGetErrorString(odl_e_));         \
    } while (0)

/* A CUDA runtime call that must succeed. */
#define ODL_CUDA_CALL(call)                                                                   \
    do {                                                                                      \
        cudaError_t odl_e_ = (call);                                                          \
        if (odl_e_ != cudaSuccess)                                                            \
            return ODL_ERR(ODL_E_CUDA, "%s: %s", #call, cudaGetErrorString(odl_e_));          \
    } while (0)

namespace odlk {

/* The calling thread's current stream (odl/device.h). */
static inline cudaStream_t stream() { return (cudaStream_t)odl_stream_current(); }

/* Multiprocessor count of the current device (cached per device; 132 on an H200 SXM). */
int sm_count();

/* Workspace of the current device: at least `bytes`, 256-byte aligned, from the device's caching pool
 * (odl_mem_alloc). One buffer per device, kept between calls and grown on demand; a growth keeps the
 * old buffer allocated until the backend's release (a CUDA graph captured before it may still use it,
 * backend.cu). The pointer is valid until the next call;
 * an op uses it only for kernels it launches on the current stream, so consecutive ops on one stream
 * are ordered. Not for concurrent use from two streams of one device.
 * Errors: whatever odl_mem_alloc reports (ODL_E_NOMEM names the size), ODL_E_CUDA. */
odl_status workspace(size_t bytes, void **out);

/* Grid size for a grid-stride loop over `work` items with `threads` per block: enough blocks to fill
 * the device several times, never more than the work needs. */
static inline unsigned grid_for(int64_t work, int threads, int blocks_per_sm = 8) {
    int64_t need = (work + threads - 1) / threads;
    int64_t cap = (int64_t)sm_count() * blocks_per_sm;
    if (need > cap) need = cap;
    if (need < 1) need = 1;
    return (unsigned)need;
}

/* Lets kern take `bytes` of dynamic shared memory (cudaFuncSetAttribute's opt-in beyond 48 KB) once per
 * device, not on every launch: the attribute belongs to a device's context. `opted`: the kernel's own set
 * of devices done, one bit each (a device past 63 opts in on every call). */
template <class K>
odl_status opt_in_smem(K kern, int bytes, std::atomic<unsigned long long> &opted) {
    int dev = 0;
    ODL_CUDA_CALL(cudaGetDevice(&dev));
    const unsigned long long bit = dev >= 0 && dev < 64 ? 1ull << dev : 0;
    if (!bit || !(opted.load(std::memory_order_acquire) & bit)) {
        ODL_CUDA_CALL(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
        opted.fetch_or(bit, std::memory_order_release);
    }
    return ODL_OK;
}

static inline bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

/* Unsigned division of n < 2^31 by a run-time constant d in [1, 2^31) with a multiply-high and a shift
 * (Granlund & Montgomery, "Division by invariant integers using multiplication", PLDI 1994, section
 * 4: m = floor(2^32 (2^l - d) / d) + 1 with l = ceil(log2 d), q = (mulhi(m, n) + n) >> l). */
struct FastDiv {
    uint32_t d, m, l;
    FastDiv() : d(1), m(1), l(0) {}
    explicit FastDiv(int divisor) {
        d = (uint32_t)(divisor < 1 ? 1 : divisor);
        l = 0;
        while ((1ull << l) < d) l++;
        m = (uint32_t)(((1ull << 32) * ((1ull << l) - d)) / d + 1);
    }
    __host__ __device__ __forceinline__ int div(int n) const {
#if defined(__CUDA_ARCH__)
        uint32_t hi = __umulhi(m, (uint32_t)n);
#else
        uint32_t hi = (uint32_t)(((uint64_t)m * (uint32_t)n) >> 32);
#endif
        return (int)((hi + (uint32_t)n) >> l);
    }
    /* q = n / d, r = n - q d */
    __host__ __device__ __forceinline__ void divmod(int n, int &q, int &r) const {
        q = div(n);
        r = n - q * (int)d;
    }
};

/* Activations of odl_act, as PyTorch computes them: ReLU keeps NaN, SiLU x / (1 + e^-x),
 * sigmoid 1 / (1 + e^-x) (accurate expf; the library is built without fast math). */
__device__ __forceinline__ float act_apply(int act, float v) {
    switch (act) {
    case ODL_ACT_RELU: return v < 0.0f ? 0.0f : v;
    case ODL_ACT_SILU: return v / (1.0f + expf(-v));
    case ODL_ACT_SIGMOID: return 1.0f / (1.0f + expf(-v));
    default: return v;
    }
}

} // namespace odlk

/* ---- internal entry points (one per op-table entry; formulas in odl/backend.h) ---- */
extern "C" {
odl_status odl_cuda_gemm(const odl_gemm_args *a);
/* TF32 / BF16 tensor-core GEMM (gemm_tc.cu); ODL_PRECISION_FP32 is odl_cuda_gemm */
odl_status odl_cuda_gemm_lowp(const odl_gemm_args *a, odl_precision prec);
/* typed operands and output (odl_gemm_typed_args): wgmma on 9.0 devices (gemm_sm90.cu), else gemm_tc.cu */
odl_status odl_cuda_gemm_typed(const odl_gemm_typed_args *a);
odl_tf32_rounding odl_cuda_tf32_rounding(void);
odl_status odl_cuda_conv2d_fwd(const odl_conv2d_shape *s, const float *x, const float *w, const odl_epilogue *ep,
                               float *y);
odl_status odl_cuda_conv2d_bwd_data(const odl_conv2d_shape *s, const float *dy, const float *w, const float *relu_x,
                                    float *dx);
odl_status odl_cuda_conv2d_bwd_weight(const odl_conv2d_shape *s, const float *x, const float *dy, float *dw,
                                      float *db);
odl_status odl_cuda_conv2d_bwd_weight_relu(const odl_conv2d_shape *s, const float *x, const float *dy,
                                           const float *relu_y, float *dw, float *db, int *fused);
/* TF32 / BF16 tensor-core convolutions (conv2d_tc.cu); ODL_PRECISION_FP32 is the float32 entry */
odl_status odl_cuda_conv2d_fwd_lowp(const odl_conv2d_shape *s, const float *x, const float *w, const odl_epilogue *ep,
                                    float *y, odl_precision prec);
odl_status odl_cuda_conv2d_bwd_data_lowp(const odl_conv2d_shape *s, const float *dy, const float *w,
                                         const float *relu_x, float *dx, odl_precision prec);
odl_status odl_cuda_conv2d_bwd_weight_lowp(const odl_conv2d_shape *s, const float *x, const float *dy, float *dw,
                                           float *db, odl_precision prec);
odl_status odl_cuda_maxpool2d_fwd(const odl_pool2d_shape *s, const float *x, float *y, int32_t *argmax);
odl_status odl_cuda_maxpool2d_bwd(const odl_pool2d_shape *s, const float *dy, const int32_t *argmax, const float *relu_y,
                                  float *dx);
odl_status odl_cuda_act_fwd(odl_act act, int64_t n, const float *x, float *y);
odl_status odl_cuda_act_bwd(odl_act act, int64_t n, const float *x, const float *y, const float *dy, float *dx);
odl_status odl_cuda_dropout_fwd(int64_t n, float p, uint64_t seed, uint64_t offset, const float *x, float *y);
odl_status odl_cuda_dropout_bwd(int64_t n, float p, uint64_t seed, uint64_t offset, const float *dy, float *dx);
odl_status odl_cuda_batchnorm_infer(int N, int C, int64_t HW, const float *x, const float *gamma, const float *beta,
                                    const float *mean, const float *var, float eps, float *y);
odl_status odl_cuda_batchnorm_train_fwd(int N, int C, int64_t HW, const float *x, const float *gamma,
                                        const float *beta, float *running_mean, float *running_var, float momentum,
                                        float eps, float *y, float *save_mean, float *save_invstd);
odl_status odl_cuda_batchnorm_bwd(int N, int C, int64_t HW, const float *x, const float *dy, const float *gamma,
                                  const float *save_mean, const float *save_invstd, float *dx, float *dgamma,
                                  float *dbeta);
odl_status odl_cuda_upsample2x_fwd(int N, int C, int H, int W, const float *x, float *y);
odl_status odl_cuda_upsample2x_bwd(int N, int C, int H, int W, const float *dy, float *dx);
odl_status odl_cuda_channel_copy(int N, int64_t HW, float *src, int C_src, float *dst, int C_dst, int c_offset,
                                 int to_slice);
odl_status odl_cuda_log_softmax_nll_fwd(int B, int C, const float *logits, const int32_t *labels, float *logprobs,
                                        float *loss);
odl_status odl_cuda_log_softmax_nll_bwd(int B, int C, const float *logprobs, const int32_t *labels, float dloss,
                                        float *dlogits);
odl_status odl_cuda_argmax_rows(int B, int C, const float *x, int32_t *out);
odl_status odl_cuda_add(int64_t n, const float *a, const float *b, float *y);
odl_status odl_cuda_mul(int64_t n, const float *a, const float *b, float *y);
odl_status odl_cuda_scale(int64_t n, float alpha, const float *x, float *y);
odl_status odl_cuda_axpy(int64_t n, float alpha, const float *x, float *y);
odl_status odl_cuda_fill(int64_t n, float value, float *y);
odl_status odl_cuda_sum_rows(int64_t M, int64_t N, const float *x, float *y);
odl_status odl_cuda_sum(int64_t n, const float *x, float *out);
odl_status odl_cuda_sgd_step(int64_t n, float *p, const float *g, float *buf, float lr, float momentum,
                             float dampening, float weight_decay, int nesterov, int64_t step);
odl_status odl_cuda_adam_step(int64_t n, float *p, const float *g, float *m, float *v, float lr, float beta1,
                              float beta2, float eps, float weight_decay, int decoupled, int64_t step);
odl_status odl_cuda_adadelta_step(int64_t n, float *p, const float *g, float *sq, float *acc, float lr, float rho,
                                  float eps, float weight_decay);
/* a training step's scalars read from device memory (odl_step_scalars; optim.cu, elementwise.cu) */
odl_status odl_cuda_step_scalars_advance(odl_step_scalars *s, const odl_step_hyper *h);
odl_status odl_cuda_dropout_fwd_at(int64_t n, float p, uint64_t seed, const odl_step_scalars *s, uint64_t layer,
                                   const float *x, float *y);
odl_status odl_cuda_dropout_bwd_at(int64_t n, float p, uint64_t seed, const odl_step_scalars *s, uint64_t layer,
                                   const float *dy, float *dx);
odl_status odl_cuda_sgd_step_at(int64_t n, float *p, const float *g, float *buf, const odl_step_scalars *s,
                                float momentum, float dampening, float weight_decay, int nesterov);
odl_status odl_cuda_adam_step_at(int64_t n, float *p, const float *g, float *m, float *v, const odl_step_scalars *s,
                                 float beta1, float beta2, float eps, float weight_decay, int decoupled);
odl_status odl_cuda_adadelta_step_at(int64_t n, float *p, const float *g, float *sq, float *acc,
                                     const odl_step_scalars *s, float rho, float eps, float weight_decay);
odl_status odl_cuda_sgd_step_group_at(const odl_optim_group *t, const odl_step_scalars *s, float momentum,
                                      float dampening, float weight_decay, int nesterov);
odl_status odl_cuda_adam_step_group_at(const odl_optim_group *t, const odl_step_scalars *s, float beta1, float beta2,
                                       float eps, float weight_decay, int decoupled);
odl_status odl_cuda_adadelta_step_group_at(const odl_optim_group *t, const odl_step_scalars *s, float rho, float eps,
                                           float weight_decay);
/* float16 NHWC inference (conv2d_f16.cu, nhwc_f16.cu) */
odl_status odl_cuda_conv2d_f16(const odl_conv2d_f16_args *a);
odl_status odl_cuda_maxpool2d_f16(const odl_pool2d_shape *s, const odl_half *x, int64_t ldx, odl_half *y,
                                  int64_t ldy);
odl_status odl_cuda_upsample2x_f16(int N, int H, int W, int C, const odl_half *x, int64_t ldx, odl_half *y,
                                   int64_t ldy);
odl_status odl_cuda_copy_f16(int64_t pixels, int C, const odl_half *x, int64_t ldx, odl_half *y, int64_t ldy);
odl_status odl_cuda_nchw_f32_to_nhwc_f16(int N, int C, int H, int W, const float *x, int block, int C_pad,
                                        odl_half *y);
/* YOLOv5 Detect (yolov5_detect.cu, conv2d_f16.cu) */
odl_status odl_cuda_yolov5_detect_decode(const odl_detect_args *d, const float *head, int nhwc);
odl_status odl_cuda_yolov5_detect_head_f16(const odl_conv2d_f16_args *a, const odl_detect_args *d);
odl_status odl_cuda_letterbox_u8(int N, int H, int W, const uint8_t *src, const odl_letterbox_src *img, uint8_t pad,
                                 float *y);
odl_status odl_cuda_yolo_nms(const odl_yolo_nms_args *a);
odl_status odl_cuda_yolo_candidates(const odl_yolo_cand_args *a);

/* The table's release entry: frees the backend's cached workspaces. Registered with core's teardown
 * hooks (core/device_internal.h) when the first workspace is taken, so odl_cuda_shutdown runs it before
 * it checks the pools. Safe to call when nothing was allocated. */
void odl_cuda_backend_release(void);

/* ---- for bench/ and tests: GEMM and convolution with a forced kernel configuration ----
 * cfg: -1 = the heuristic's choice, otherwise an index below odl_cuda_gemm_num_configs();
 * splits: 0 = the heuristic's choice, >= 1 forces that split-K factor (clamped to what K allows). */
int odl_cuda_gemm_num_configs(void);
const char *odl_cuda_gemm_config_name(int cfg);
odl_status odl_cuda_gemm_ex(const odl_gemm_args *a, int cfg, int splits);
/* The configuration and split-K factor the heuristic picks for an M x N x K product. */
void odl_cuda_gemm_plan(int64_t M, int64_t N, int64_t K, int *cfg, int *splits);
/* The tensor-core GEMM with a forced tile (cfg -1: the heuristic's, else below odl_cuda_gemm_lowp_num_configs(),
 * named by odl_cuda_gemm_lowp_config_name: the mma.sync tiles of gemm_tc.cu first, then the wgmma tiles of
 * gemm_sm90.cu, which need a compute capability 9.0 device) and split-K. */
int odl_cuda_gemm_lowp_num_configs(void);
const char *odl_cuda_gemm_lowp_config_name(int cfg);
odl_status odl_cuda_gemm_lowp_ex(const odl_gemm_args *a, odl_precision prec, int cfg, int splits);
/* float16 convolution with a forced tile: cfg -1 = the heuristic's, else below
 * odl_cuda_conv2d_f16_num_configs() (mma.sync 0: 128x16, 1: 128x32, 2: 128x64, 3: 128x128 pixels x channels;
 * on a 9.0 device wgmma 4: 128x16, 5: 128x32, 6: 128x64, 7: 128x128, ODL_E_UNSUPPORTED where conv2d_f16_sm90.cu cannot
 * take the call). The Detect head's decoding epilogue always runs on mma.sync. */
int odl_cuda_conv2d_f16_num_configs(void);
odl_status odl_cuda_conv2d_f16_ex(const odl_conv2d_f16_args *a, int cfg);
}

#endif
