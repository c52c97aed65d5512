/* The Hopper convolutions (conv2d_sm90.cu) as conv2d_tc.cu sees them: its TF32 and BF16 forward and stride-1
 * data gradient and its TF32 weight gradient go here on compute capability 9.0 devices (ODL_CONV_SM90). */
#ifndef ODL_KERNELS_CUDA_CONV2D_SM90_H
#define ODL_KERNELS_CUDA_CONV2D_SM90_H

#include "common.cuh"
#include "conv2d_tiles.cuh"
#include "gemm_core.cuh"

namespace odlk {
namespace sm90 {

/* Whether the forward / stride-1 data-gradient product of M channels x N pixels with a reduction of Kd
 * (C*R*S, or K*R*S) in TF32 or (bf16) BF16 runs on conv_rounded: a 9.0 device with the wgmma path on
 * (gemm_sm90.h's available()) and ODL_CONV_SM90 (odl/env.h) 2, or 1 and a shape where the kernel lab
 * measured it faster than the mma.sync kernels (conv2d_sm90.cu says which). Ch, images, src_elems: the
 * gathered tensor's channels (C, or K), images and elements (whether the NHWC copy applies). */
bool conv_use(int64_t M, int64_t N, int64_t Kd, int64_t Ch, int64_t images, int64_t src_elems, bool bf16);
/* Whether the weight gradient of M output channels x N = C*R*S columns over NPQ pixels runs on
 * conv_wgrad_tf32 / (bf16) conv_wgrad_bf16: a 9.0 device with the wgmma path on and ODL_CONV_SM90 1 or 2
 * (it splits the pixels, so any size fills the GPU). */
bool conv_wgrad_use(int64_t M, int64_t N, int64_t NPQ);

/* out = epilogue(W x B) on wgmma, both operands rounded to TF32 or (bf16) bfloat16, nearest even: B the
 * [Kd][N] operand gathered by g (conv2d_tiles.cuh's ConvGatherParams: im2col of x, or the mirrored window
 * of dy), rounded into an NHWC copy in the workspace first where its channels are whole 16-byte chunks,
 * else as the wgmma fragments are read; W packed rounded into the workspace first, from [M][Kd]
 * row-major float32 (the forward's weights) or, transposed (the data gradient), the [Kd / RS][M][RS]
 * weights of a convolution whose input has M channels, read as W[c][kk * RS + rs] = w[kk][c][rs]. float32
 * accumulation in a fixed order (deterministic); the epilogue (bias per output channel, activation,
 * residual) in float32 into the NCHW output `out`. M: output channels, N: output pixels (images * plane).
 * Only for products that conv_use takes (else ODL_E_INVAL). */
odl_status conv_rounded(const ConvGatherParams &g, const float *w, bool transposed, int RS, bool bf16, int M, int N,
                        int Kd, const OutNCHW &out, const Epi &ep, const char *what);

/* The weight gradient's operands: dy [N][K][P][Q] and x [N][C][H][W] float32, the convolution's geometry. */
struct ConvWgradParams {
    const float *dy, *x;
    int N, K, C, H, W, P, Q, R, S, sh, sw, ph, pw;
    FastDiv fPQ, fQ, fRS, fS;
};

/* dw[k][c*R*S + r*S + s] = sum over (n, p, q) of dy[n][k][p][q] * x[n][c][p*sh - ph + r][q*sw - pw + s]
 * (row-major [K][C*R*S], float32) in TF32 on wgmma (the operands' upper 19 bits: toward zero): M = K, N = C*R*S, the reduction over the N*P*Q pixels
 * split into ranges whose float32 partial sums (in the workspace) splitk_reduce adds in a fixed order
 * (deterministic). db (nullable): db[k] = sum over (n, p, q) of dy[n][k][p][q] from the same kernel (float32 sums
 * of the float32 dy rows in shared memory, per split, then over the splits as dw's). Only for products that
 * conv_wgrad_use takes (else ODL_E_INVAL). */
odl_status conv_wgrad_tf32(const ConvWgradParams &g, float *dw, float *db, const char *what);
/* The same in BF16: dy and x rounded to bfloat16 (nearest even; a bfloat16 value is exact in TF32) and
 * conv_wgrad_tf32's kernel on them: BF16 products, float32 accumulation. in_stage (the caller's reading of
 * ODL_CONV_WGRAD_BF16_STAGE, conv_wgrad_bf16_in_stage): the kernel rounds each stage in shared memory, and db
 * (nullable) is summed as conv_wgrad_tf32 sums it (from the float32 dy); else they are rounded into float32
 * copies in the workspace first, and db must be null (the caller's pass; else ODL_E_INVAL). The same dw bits
 * either way. */
bool conv_wgrad_bf16_in_stage();
odl_status conv_wgrad_bf16(const ConvWgradParams &g, float *dw, float *db, bool in_stage, const char *what);

} // namespace sm90
} // namespace odlk

#endif
