/* The CUDA op table (odl/backend.h) and the backend's device facts and workspace (common.cuh).
 * Every entry is one of the project's own kernels (the .cu files beside this one); none calls cuBLAS or cuDNN.
 */
#include <atomic>
#include <mutex>

#include "common.cuh"
#include "core/device_internal.h"

namespace odlk {

static constexpr int kMaxDevices = 64;

static int g_sms[kMaxDevices];

static int current_device() {
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= kMaxDevices) dev = 0;
    return dev;
}

int sm_count() {
    const int dev = current_device();
    int n = g_sms[dev];
    if (n > 0) return n;
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n <= 0) {
        cudaGetLastError(); /* leave no sticky error behind; assume an H200 */
        n = 132;
    }
    g_sms[dev] = n;
    return n;
}

/* Buffers a growth replaced. A CUDA graph captured before the growth still points to the old buffer and
 * may be replayed later (the training step's graphs, captured before the first evaluation, whose larger
 * batch grows the workspace), so an old buffer stays allocated until the backend's release. Growth by
 * at least half each time keeps them below twice the current buffer. */
static constexpr int kRetired = 16;

struct Workspace {
    void *p;
    size_t cap;
    size_t n_allocs; /* the pool's allocation count just after this buffer was taken */
    void *retired[kRetired];
    int n_retired;
};
static Workspace g_ws[kMaxDevices];
static std::mutex g_ws_mu;
static std::atomic<uint64_t> g_ws_epoch{0}; /* odl_backend.workspace_epoch: bumped when buffers are freed */

odl_status workspace(size_t bytes, void **out) {
    int dev = 0;
    ODL_CUDA_CALL(cudaGetDevice(&dev));
    if (dev < 0 || dev >= kMaxDevices) return ODL_ERR(ODL_E_NODEV, "workspace: CUDA device %d out of range", dev);
    std::lock_guard<std::mutex> lock(g_ws_mu);
    Workspace &w = g_ws[dev];
    if (bytes == 0) bytes = 256;
    if (w.p) {
        /* odl_cuda_shutdown() frees the whole pool; if the pool was made again since, this buffer is gone
         * (it would count in in_use, and the allocation count only grows within one pool) */
        odl_pool_stats ps;
        if (odl_pool_get_stats(odl_cuda(dev), &ps) != ODL_OK || ps.in_use < w.cap || ps.n_allocs < w.n_allocs) {
            odl_error_clear();
            g_ws_epoch++;
            w.p = nullptr;
            w.cap = 0;
            w.n_retired = 0;
        }
    }
    if (w.cap < bytes) {
        cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
        if (cudaStreamIsCapturing(stream(), &cs) == cudaSuccess && cs != cudaStreamCaptureStatusNone)
            return ODL_ERR(ODL_E_UNSUPPORTED,
                           "CUDA backend workspace must grow to %zu bytes while the stream is being captured into a "
                           "graph; run the captured work once before capturing it",
                           bytes);
        /* grow by at least half, in whole MiB, so that a run settles after a few steps */
        size_t want = w.cap + w.cap / 2;
        if (want < bytes) want = bytes;
        want = (want + ((size_t)1 << 20) - 1) & ~(((size_t)1 << 20) - 1);
        if (w.p && w.n_retired == kRetired) {
            /* kernels queued on any stream may still use the old buffers (no graph should be left that
             * does, after this many growths) */
            ODL_CUDA_CALL(cudaDeviceSynchronize());
            for (int i = 0; i < w.n_retired; i++) odl_mem_free(odl_cuda(dev), w.retired[i]);
            w.n_retired = 0;
            g_ws_epoch++;
        }
        if (w.p) {
            w.retired[w.n_retired++] = w.p;
            w.p = nullptr;
            w.cap = 0;
        }
        void *p = nullptr;
        if (odl_mem_alloc(odl_cuda(dev), want, &p) != ODL_OK) {
            want = bytes;
            odl_status st = odl_mem_alloc(odl_cuda(dev), want, &p);
            if (st != ODL_OK) {
                odl_error_prefix("CUDA backend workspace of %zu bytes", bytes);
                return st;
            }
        }
        w.p = p;
        w.cap = want;
        ODL_CHECK(odl_device_at_shutdown(odl_cuda_backend_release));
        odl_pool_stats ps;
        w.n_allocs = odl_pool_get_stats(odl_cuda(dev), &ps) == ODL_OK ? ps.n_allocs : 0;
    }
    *out = w.p;
    return ODL_OK;
}

} // namespace odlk

extern "C" void odl_cuda_backend_release(void) {
    std::lock_guard<std::mutex> lock(odlk::g_ws_mu);
    int prev = -1;
    const bool have_prev = cudaGetDevice(&prev) == cudaSuccess;
    for (int d = 0; d < odlk::kMaxDevices; d++) {
        odlk::Workspace &w = odlk::g_ws[d];
        if (!w.p && !w.n_retired) continue;
        if (cudaSetDevice(d) == cudaSuccess) cudaDeviceSynchronize();
        odl_mem_free(odl_cuda(d), w.p);
        for (int i = 0; i < w.n_retired; i++) odl_mem_free(odl_cuda(d), w.retired[i]);
        w.p = nullptr;
        w.cap = 0;
        w.n_retired = 0;
    }
    odlk::g_ws_epoch++;
    if (have_prev) cudaSetDevice(prev);
    cudaGetLastError();
}

static uint64_t workspace_epoch(void) { return odlk::g_ws_epoch.load(); }

static odl_backend make_table() {
    odl_backend b = {};
    b.name = "cuda";
    b.release = odl_cuda_backend_release;
    b.workspace_epoch = workspace_epoch;
    b.gemm = odl_cuda_gemm;
    b.conv2d_fwd = odl_cuda_conv2d_fwd;
    b.conv2d_bwd_data = odl_cuda_conv2d_bwd_data;
    b.conv2d_bwd_weight = odl_cuda_conv2d_bwd_weight;
    b.conv2d_bwd_weight_relu = odl_cuda_conv2d_bwd_weight_relu;
    b.maxpool2d_fwd = odl_cuda_maxpool2d_fwd;
    b.maxpool2d_bwd = odl_cuda_maxpool2d_bwd;
    b.act_fwd = odl_cuda_act_fwd;
    b.act_bwd = odl_cuda_act_bwd;
    b.dropout_fwd = odl_cuda_dropout_fwd;
    b.dropout_bwd = odl_cuda_dropout_bwd;
    b.batchnorm_infer = odl_cuda_batchnorm_infer;
    b.batchnorm_train_fwd = odl_cuda_batchnorm_train_fwd;
    b.batchnorm_bwd = odl_cuda_batchnorm_bwd;
    b.upsample2x_fwd = odl_cuda_upsample2x_fwd;
    b.upsample2x_bwd = odl_cuda_upsample2x_bwd;
    b.channel_copy = odl_cuda_channel_copy;
    b.log_softmax_nll_fwd = odl_cuda_log_softmax_nll_fwd;
    b.log_softmax_nll_bwd = odl_cuda_log_softmax_nll_bwd;
    b.argmax_rows = odl_cuda_argmax_rows;
    b.add = odl_cuda_add;
    b.mul = odl_cuda_mul;
    b.scale = odl_cuda_scale;
    b.axpy = odl_cuda_axpy;
    b.fill = odl_cuda_fill;
    b.sum_rows = odl_cuda_sum_rows;
    b.sum = odl_cuda_sum;
    b.sgd_step = odl_cuda_sgd_step;
    b.adam_step = odl_cuda_adam_step;
    b.adadelta_step = odl_cuda_adadelta_step;
    b.step_scalars_advance = odl_cuda_step_scalars_advance;
    b.dropout_fwd_at = odl_cuda_dropout_fwd_at;
    b.dropout_bwd_at = odl_cuda_dropout_bwd_at;
    b.sgd_step_at = odl_cuda_sgd_step_at;
    b.adam_step_at = odl_cuda_adam_step_at;
    b.adadelta_step_at = odl_cuda_adadelta_step_at;
    b.sgd_step_group_at = odl_cuda_sgd_step_group_at;
    b.adam_step_group_at = odl_cuda_adam_step_group_at;
    b.adadelta_step_group_at = odl_cuda_adadelta_step_group_at;
    b.conv2d_f16 = odl_cuda_conv2d_f16;
    b.maxpool2d_f16 = odl_cuda_maxpool2d_f16;
    b.upsample2x_f16 = odl_cuda_upsample2x_f16;
    b.copy_f16 = odl_cuda_copy_f16;
    b.nchw_f32_to_nhwc_f16 = odl_cuda_nchw_f32_to_nhwc_f16;
    b.yolov5_detect_decode = odl_cuda_yolov5_detect_decode;
    b.yolov5_detect_head_f16 = odl_cuda_yolov5_detect_head_f16;
    b.letterbox_u8 = odl_cuda_letterbox_u8;
    b.yolo_nms = odl_cuda_yolo_nms;
    b.yolo_candidates = odl_cuda_yolo_candidates;
    b.gemm_lowp = odl_cuda_gemm_lowp;
    b.conv2d_fwd_lowp = odl_cuda_conv2d_fwd_lowp;
    b.conv2d_bwd_data_lowp = odl_cuda_conv2d_bwd_data_lowp;
    b.conv2d_bwd_weight_lowp = odl_cuda_conv2d_bwd_weight_lowp;
    b.gemm_typed = odl_cuda_gemm_typed;
    b.tf32_rounding = odl_cuda_tf32_rounding;
    return b;
}

extern "C" const odl_backend *odl_backend_cuda(void) {
    static const odl_backend table = make_table();
    return &table;
}
