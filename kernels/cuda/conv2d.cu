/* 2-D convolution of the CUDA backend (dilation 1, groups 1; formulas and layouts in odl/backend.h),
 * as implicit GEMMs on the tiled kernel of gemm_core.cuh: the loaders gather the im2col matrix tile
 * by tile into shared memory, so no im2col buffer is ever written. The forward is here, bwd_data and
 * bwd_weight in conv2d_bwd.cu (a module of their own: conv2d_plan.cuh says why).
 *
 *   forward      y[k, (n,p,q)]  = sum_(c,r,s)  w[k, (c,r,s)] * x[n, c, p*sh-ph+r, q*sw-pw+s]
 *                M = K, N = N*P*Q, reduction C*R*S; epilogue bias per channel, ReLU/SiLU/sigmoid,
 *                residual (YOLOv5's Conv = conv + BN folded into bias + SiLU, and its shortcut).
 *   bwd_data     dx[c, (n,h,w)] = sum_(k,r,s)  w[k, c, r, s] * dy[n, k, (h+ph-r)/sh, (w+pw-s)/sw]
 *                (terms whose division is inexact or lands outside dy are zero); the weights are
 *                first transposed to [C][K*R*S] in the workspace so that A loads like a dense matrix.
 *                M = C, N = N*H*W, reduction K*R*S.
 *   bwd_weight   dw[k, (c,r,s)] = sum_(n,p,q)  dy[n, k, p, q] * x[n, c, p*sh-ph+r, q*sw-pw+s]
 *                M = K, N = C*R*S, reduction N*P*Q, nearly always split over the reduction (split-K
 *                with partial sums in the workspace, added in a fixed order: deterministic).
 *                db[k] = sum over n, p, q of dy: slices of N*P*Q summed per block in double, then
 *                the slices in order (bias_grad_*_kernel; fixed shapes, no atomics: deterministic); with
 *                ODL_CONV_WGRAD_BIAS on (the default), where C*R*S <= 16, float32 sums of the dy values
 *                bwd_weight_smalln reads anyway, per chunk, then over the chunks as dw's.
 *   bwd_weight with relu_y (odl_conv2d_relu_out_bwd_weight: dy the gradient of this convolution's ReLU
 *                output relu_y): bwd_weight_smalln reads relu_y beside dy and takes 0 where relu_y <= 0
 *                (act_bwd's ReLU); elsewhere ops.c masks dy in place first.
 *   bwd_data with relu_x (the input of a convolution over a ReLU's output): dx = 0 where relu_x <= 0, in the
 *                store (Epi.gate).
 * Index arithmetic inside the gathers uses FastDiv (multiply-high) for the divisions by R*S, S, P*Q,
 * Q, H*W, W and the strides; with ODL_CONV_GATHER_TABLE on (the default), the forward (but a 1x1 stride-1 unpadded one)
 * and the stride-1 bwd_data of at most kGatherTableMax reduction rows read each row's (c, r, s) part from a
 * table in shared memory that each block writes once (conv2d_tiles.cuh GatherTableTile) instead.
 * Limits: each image (C*H*W, K*P*Q) and N*P*Q, N*H*W below 2^31 elements.
 */
#include <limits.h>

#include "conv2d_plan.cuh"

namespace odlk {

/* The workspace, carved: `a` floats then `b` floats, each 256-byte aligned. */
odl_status conv_workspace2(size_t a, size_t b, float **pa, float **pb) {
    const size_t a_bytes = (a * sizeof(float) + 255) & ~(size_t)255;
    void *p = nullptr;
    ODL_CHECK(workspace(a_bytes + b * sizeof(float) + 256, &p));
    *pa = (float *)p;
    *pb = (float *)((char *)p + a_bytes);
    return ODL_OK;
}

odl_status conv_check_sizes(const odl_conv2d_shape *s, const char *what) {
    const int64_t chw = (int64_t)s->C * s->H * s->W, kpq = (int64_t)s->K * s->P * s->Q;
    const int64_t npq = (int64_t)s->N * s->P * s->Q, nhw = (int64_t)s->N * s->H * s->W;
    const int64_t crs = (int64_t)s->C * s->R * s->S, krs = (int64_t)s->K * s->R * s->S;
    if (chw >= INT_MAX || kpq >= INT_MAX || npq >= INT_MAX || nhw >= INT_MAX || crs >= INT_MAX || krs >= INT_MAX)
        return ODL_ERR(ODL_E_UNSUPPORTED,
                       "%s: N=%d C=%d H=%d W=%d K=%d R=%d S=%d exceeds the CUDA backend's 2^31-element limits", what,
                       s->N, s->C, s->H, s->W, s->K, s->R, s->S);
    return ODL_OK;
}

/* ---- forward ---- */
template <class Cfg>
static odl_status fwd_cfg(const odl_conv2d_shape *s, const float *x, const float *w, const Epi &ep, float *y,
                          const Plan &pl, float *ws) {
    const int M = s->K, N = s->N * s->P * s->Q, Kd = s->C * s->R * s->S;
    using LA = DenseTile<Cfg::BM, Cfg::BK, Cfg::THREADS, true>;
    typename LA::Params pa = {w, (int64_t)Kd, M, Kd, aligned16(w) && Kd % 4 == 0};
    const int PQ = s->P * s->Q;
    OutNCHW fin, part;
    conv_nchw_outs(y, ws, s->K, PQ, M, N, PQ % 4 == 0 && aligned16(y) && (!ep.residual || aligned16(ep.residual)),
                   &fin, &part);
    const bool k1 = s->R == 1 && s->S == 1 && s->stride_h == 1 && s->stride_w == 1 && s->pad_h == 0 && s->pad_w == 0;
    const FastDiv fPQ(s->P * s->Q), fQ(s->Q), fRS(s->R * s->S), fS(s->S);
    if (k1) {
        using LB = Im2colTile<Cfg::BN, Cfg::BK, Cfg::THREADS, true>;
        typename LB::Params pb = {x, s->C, s->H, s->W, 1, 1, 0, 0, N, Kd, fPQ, fQ, fRS, fS};
        return run_implicit<Cfg, LA, LB>(pa, pb, fin, part, ep, M, N, Kd, pl.splits, pl.k_chunk, "odl_conv2d_fwd_1x1");
    }
    if (gather_table(Kd))
        return run_table<Cfg, LA>(pa, conv_fwd_gather(s, x), fin, part, ep, M, N, Kd, pl, "odl_conv2d_fwd_table");
    using LB = Im2colTile<Cfg::BN, Cfg::BK, Cfg::THREADS, false>;
    typename LB::Params pb = {x, s->C, s->H, s->W, s->stride_h, s->stride_w, s->pad_h, s->pad_w, N, Kd,
                              fPQ, fQ, fRS, fS};
    return run_implicit<Cfg, LA, LB>(pa, pb, fin, part, ep, M, N, Kd, pl.splits, pl.k_chunk, "odl_conv2d_fwd");
}

static odl_status conv_fwd(const odl_conv2d_shape *s, const float *x, const float *w, const odl_epilogue *e,
                           float *y) {
    ODL_CHECK(conv_check_sizes(s, "conv2d_fwd"));
    const int M = s->K, N = s->N * s->P * s->Q, Kd = s->C * s->R * s->S;
    if (M <= 0 || N <= 0) return ODL_OK;
    const Epi ep = conv_epi(e);
    const Plan pl = plan_for(M, N, Kd, true, true, true);
    float *ws = nullptr;
    if (pl.splits > 1) {
        void *p = nullptr;
        ODL_CHECK(workspace((size_t)pl.splits * M * N * sizeof(float), &p));
        ws = (float *)p;
    }
    if (pl.cfg == G128x256) return fwd_cfg<Cfg128x256>(s, x, w, ep, y, pl, ws);
    ODL_CONV_DISPATCH(fwd_cfg, pl.cfg, s, x, w, ep, y, pl, ws)
}

#undef ODL_CONV_DISPATCH

} // namespace odlk

extern "C" odl_status odl_cuda_conv2d_fwd(const odl_conv2d_shape *s, const float *x, const float *w,
                                          const odl_epilogue *ep, float *y) {
    return odlk::conv_fwd(s, x, w, ep, y);
}
