/* Precision of matrix products (GEMM, linear layers, convolutions): odl_precision, its rounding rules and the
 * process-wide setting the tensor-level ops read (as PyTorch's torch.set_float32_matmul_precision).
 *
 *   fp32  float32 inputs, float32 FMA accumulation: the default, bit-reproducible path (odl_backend.gemm).
 *   tf32  float32 storage; each input of the product rounded to TF32 (8-bit exponent, 10 explicit mantissa
 *         bits, round to nearest even), products accumulated in float32 (NVIDIA's TF32 tensor-core mode,
 *         PyTorch's allow_tf32 / "high" matmul precision).
 *   bf16  float32 storage; each input rounded to bfloat16 (8-bit exponent, 7 mantissa bits, round to
 *         nearest even) and accumulated in float32, as torch.autocast(dtype=torch.bfloat16) computes a
 *         matmul; weights, gradients, optimiser state and the loss stay float32.
 * Unit roundoff of one input rounding: tf32 2^-11, bf16 2^-8 (float32: 2^-24).
 */
#ifndef ODL_PRECISION_H
#define ODL_PRECISION_H

#include <stdint.h>
#include <string.h>

#include "odl/api.h"
#include "odl/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum odl_precision {
    ODL_PRECISION_FP32 = 0,
    ODL_PRECISION_TF32 = 1,
    ODL_PRECISION_BF16 = 2,
} odl_precision;

/* {"fp32", "tf32", "bf16", NULL}, index = odl_precision (the config key `precision` takes its names). */
ODL_API const char *const *odl_precision_names(void);
/* "fp32", "tf32", "bf16" ("?" for anything else). */
ODL_API const char *odl_precision_name(odl_precision p);
/* Parse "fp32" | "tf32" | "bf16" into *out; ODL_E_CONFIG naming the accepted values otherwise. */
ODL_API odl_status odl_precision_parse(const char *s, odl_precision *out);

/* The precision odl_gemm, odl_linear_fwd and odl_linear_bwd use (default ODL_PRECISION_FP32). Set it once
 * before the work starts (the worker does, from --precision / config key `precision`); it is one
 * process-wide value, read at each call. Convolutions (odl_conv2d_fwd, odl_conv2d_bwd) follow it too: their
 * operands are rounded the same way (odl_backend.conv2d_*_lowp), as PyTorch's cuDNN TF32 mode and autocast. */
ODL_API void odl_set_matmul_precision(odl_precision p);
ODL_API odl_precision odl_matmul_precision(void);

/* Round a float32 to the nearest value with `keep` explicit mantissa bits (10: TF32, 7: bfloat16), ties to
 * even, result still a float32 (the dropped bits zero). NaN and infinity pass unchanged; values that round
 * past the largest finite number become infinity (IEEE 754 round-to-nearest). The CUDA kernels round the
 * same way, so both backends feed the same numbers to their products. */
static inline float odl_round_mantissa(float x, int keep) {
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) != 0x7f800000u) {
        const int drop = 23 - keep;
        u += ((1u << (drop - 1)) - 1u) + ((u >> drop) & 1u);
        u &= ~((1u << drop) - 1u);
    }
    memcpy(&x, &u, 4);
    return x;
}
/* Round toward zero to `keep` explicit mantissa bits (drop the rest): how the tensor cores of compute
 * capability 9.0 read a float32 operand of a TF32 wgmma (its upper 19 bits), and so the rule of the CUDA
 * backend's TF32 products there (odl_backend.tf32_rounding). NaN and infinity pass unchanged. */
static inline float odl_trunc_mantissa(float x, int keep) {
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) != 0x7f800000u) u &= ~((1u << (23 - keep)) - 1u);
    memcpy(&x, &u, 4);
    return x;
}

/* How a backend turns float32 operands into TF32 (odl_backend.tf32_rounding). */
typedef enum odl_tf32_rounding {
    ODL_TF32_NEAREST_EVEN = 0, /* odl_round_mantissa(x, 10): the CPU, GPUs other than compute capability 9.0 */
    ODL_TF32_TOWARD_ZERO = 1,  /* odl_trunc_mantissa(x, 10): the wgmma kernels on 9.0 (as cuBLAS's TF32) */
} odl_tf32_rounding;

static inline float odl_round_tf32(float x) { return odl_round_mantissa(x, 10); }
static inline float odl_round_bf16(float x) { return odl_round_mantissa(x, 7); }

#ifdef __cplusplus
}
#endif
#endif
