/* What the FMA convolutions (conv2d.cu, conv2d_bwd.cu) share with conv2d_tc.cu (the tensor-core ones): limits,
 * workspace carving, the weight transpose of bwd_data and the bias gradient. Private to the CUDA backend. */
#ifndef ODL_KERNELS_CUDA_CONV2D_IMPL_CUH
#define ODL_KERNELS_CUDA_CONV2D_IMPL_CUH

#include "common.cuh"
#include "gemm_core.cuh"

namespace odlk {

/* The forward's epilogue from odl_backend.conv2d_fwd's (bias per output channel; e may be NULL). */
static inline Epi conv_epi(const odl_epilogue *e) {
    Epi ep = epi_raw();
    if (e) {
        ep.bias = e->bias;
        ep.bias_per_row = 1;
        ep.residual = e->residual;
        ep.act = e->act;
    }
    return ep;
}

/* bwd_weight's output dw [M][N] row-major and its split-K partials in ws, M*N floats apart. */
static inline void conv_dw_outs(float *dw, float *ws, int M, int N, OutRowMajor *fin, OutRowMajor *part) {
    fin->C = dw;
    fin->ldc = N;
    fin->zstride = 0;
    fin->vec = N % 4 == 0 && aligned16(dw);
    *part = *fin;
    part->C = ws;
    part->zstride = (int64_t)M * N;
    part->vec = N % 4 == 0;
}

/* An NCHW output y of Kc channels of PQ pixels (vec: the caller's alignment verdict for y) and its split-K
 * partials in ws, M*N floats apart (vectorisable when PQ % 4 == 0: the workspace is aligned). */
static inline void conv_nchw_outs(float *y, float *ws, int Kc, int PQ, int M, int N, bool vec, OutNCHW *fin,
                                  OutNCHW *part) {
    fin->y = y;
    fin->Kc = Kc;
    fin->PQ = PQ;
    fin->fPQ = FastDiv(PQ);
    fin->zstride = 0;
    fin->vec = vec;
    *part = *fin;
    part->y = ws;
    part->zstride = (int64_t)M * N;
    part->vec = PQ % 4 == 0;
}

/* ODL_E_UNSUPPORTED naming `what` when an image, N*P*Q, N*H*W, C*R*S or K*R*S reaches 2^31 elements. */
odl_status conv_check_sizes(const odl_conv2d_shape *s, const char *what);
/* The workspace, carved: `a` floats then `b` floats, each 256-byte aligned. */
odl_status conv_workspace2(size_t a, size_t b, float **pa, float **pb);
/* wt[c][k*R*S + rs] = w[k][c][rs] (bwd_data's A operand as a dense K-contiguous matrix). */
odl_status conv_transpose_weights(const odl_conv2d_shape *s, const float *w, float *wt);
/* db[k] = sum over N, P, Q of dy (float32 dy, double partial sums in a fixed order). */
odl_status conv_bias_grad(const odl_conv2d_shape *s, const float *dy, float *db);

} // namespace odlk

#endif
