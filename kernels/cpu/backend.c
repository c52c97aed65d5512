/* The CPU op table (odl/backend.h): the readable reference of every operation and the CPU runtime.
 * Each entry lives in the file named for its concern: gemm.c, conv2d.c, pool.c, elementwise.c (activations,
 * dropout, arithmetic, reductions), batchnorm.c, layout.c (upsample, channel copy), loss.c, optim.c;
 * threads.c holds the thread pool and scratch buffers they share. */
#include "kernels/cpu/cpu.h"

static const odl_backend g_cpu_backend = {
    .name = "cpu",
    .gemm = odl_cpu_gemm,
    .conv2d_fwd = odl_cpu_conv2d_fwd,
    .conv2d_bwd_data = odl_cpu_conv2d_bwd_data,
    .conv2d_bwd_weight = odl_cpu_conv2d_bwd_weight,
    .maxpool2d_fwd = odl_cpu_maxpool2d_fwd,
    .maxpool2d_bwd = odl_cpu_maxpool2d_bwd,
    .act_fwd = odl_cpu_act_fwd,
    .act_bwd = odl_cpu_act_bwd,
    .dropout_fwd = odl_cpu_dropout_fwd,
    .dropout_bwd = odl_cpu_dropout_bwd,
    .batchnorm_infer = odl_cpu_batchnorm_infer,
    .batchnorm_train_fwd = odl_cpu_batchnorm_train_fwd,
    .batchnorm_bwd = odl_cpu_batchnorm_bwd,
    .upsample2x_fwd = odl_cpu_upsample2x_fwd,
    .upsample2x_bwd = odl_cpu_upsample2x_bwd,
    .channel_copy = odl_cpu_channel_copy,
    .log_softmax_nll_fwd = odl_cpu_log_softmax_nll_fwd,
    .log_softmax_nll_bwd = odl_cpu_log_softmax_nll_bwd,
    .argmax_rows = odl_cpu_argmax_rows,
    .add = odl_cpu_add,
    .mul = odl_cpu_mul,
    .scale = odl_cpu_scale,
    .axpy = odl_cpu_axpy,
    .fill = odl_cpu_fill,
    .sum_rows = odl_cpu_sum_rows,
    .sum = odl_cpu_sum,
    .sgd_step = odl_cpu_sgd_step,
    .adam_step = odl_cpu_adam_step,
    .adadelta_step = odl_cpu_adadelta_step,
};

const odl_backend *odl_backend_cpu(void) { return &g_cpu_backend; }
