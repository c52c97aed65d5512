/* 2-D convolution of the CUDA backend (dilation 1, groups 1; formulas and layouts in odl/backend.h),
 * as implicit GEMMs on the tiled kernel of gemm_core.cuh: the loaders gather the im2col matrix tile
 * by tile into shared memory, so no im2col buffer is ever written.
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

#include "odl/env.h"
#include "conv2d_impl.cuh"
#include "conv2d_tiles.cuh"
#include "gemm_core.cuh"
#include "ops_util.cuh"

namespace odlk {

/* ---- launch helpers ---- */

/* One implicit GEMM: tiled_gemm_kernel with loaders LA, LB into `fin`, split `splits` ways over the
 * reduction (partials in ws through `part`, then the fixed-order reduction with the epilogue). dsmem: the
 * loaders' dynamic shared memory (GatherTableTile's table; with the kernel's static stages below 48 KB). */
template <class Cfg, class LA, class LB, class Out>
static odl_status run_implicit(const typename LA::Params &pa, const typename LB::Params &pb, const Out &fin,
                               const Out &part, const Epi &ep, int M, int N, int Kd, int splits, int k_chunk,
                               const char *what, size_t dsmem = 0) {
    if (splits <= 1) {
        tiled_gemm_kernel<Cfg, LA, LB, Out>
            <<<tile_grid<Cfg>(M, N, 1), Cfg::THREADS, dsmem, stream()>>>(pa, pb, fin, ep, M, N, Kd, k_chunk, 8);
        ODL_CUDA_LAUNCH_CHECK(what);
        return ODL_OK;
    }
    tiled_gemm_kernel<Cfg, LA, LB, Out><<<tile_grid<Cfg>(M, N, splits), Cfg::THREADS, dsmem, stream()>>>(
        pa, pb, part, epi_raw(), M, N, Kd, k_chunk, 8);
    ODL_CUDA_LAUNCH_CHECK(what);
    return splitk_reduce(part, splits, M, N, fin, ep, "odl_conv2d_splitk_reduce");
}

/* Wide tiles for the implicit GEMMs with few rows (K or C of 17..64) and many columns (N*P*Q): along
 * the gathered operand a thread holds 2 columns of 8 reduction rows, so each row's (c, r, s)
 * decomposition serves two loads, and 8 x 16 / 8 x 8 register tiles read shared memory less per FMA
 * than 64 x 128 / 32 x 128. Conv-only (not in the GEMM's table). */
/*                         BM   BN BK WARPS  TM  TN MINB */
using Cfg64x256 = TileCfg<64, 256, 8, 1, 4, 8, 16, 2>; /* 128 threads, 8 x 16 per thread */
using Cfg32x256 = TileCfg<32, 256, 8, 1, 4, 8, 8, 3>;  /* 128 threads, 8 x 8 per thread */
enum { C64x256 = G_COUNT, C32x256 };

static int64_t tiles2(int64_t M, int64_t N, int bm, int bn) { return cdiv(M, bm) * cdiv(N, bn); }

/* Configuration, split count and slice depth for an implicit GEMM of M x N with reduction Kd.
 * wide: the wide conv tiles may be used (forward and bwd_data), when they give at least three blocks per
 * multiprocessor; otherwise plan_cfg's choice, with 128 x 256 narrowed to 128 x 128 unless allow_256.
 * max_splits: cap of the split-K factor. */
struct Plan {
    int cfg, splits, k_chunk;
};
static Plan plan_for(int M, int N, int Kd, bool allow_split, bool wide = false, bool allow_256 = false,
                     int max_splits = 64) {
    Plan p;
    const int64_t sms = sm_count();
    p.cfg = plan_cfg(M, N);
    if (p.cfg == G128x256 && !allow_256) p.cfg = G128x128;
    if (wide && M > 16 && M <= 32 && tiles2(M, N, 32, 256) >= 3 * sms) p.cfg = C32x256;
    if (wide && M > 32 && M <= 64 && tiles2(M, N, 64, 256) >= 3 * sms) p.cfg = C64x256;
    p.splits = allow_split && p.cfg < G_COUNT ? plan_splits(p.cfg, M, N, Kd, max_splits) : 1;
    p.k_chunk = Kd > 0 ? Kd : 1;
    if (p.splits > 1) p.splits = k_chunk_for(p.cfg, Kd, p.splits, &p.k_chunk);
    if (p.splits <= 1) {
        p.splits = 1;
        p.k_chunk = Kd > 0 ? Kd : 1;
    }
    return p;
}

/* Whether a gathered operand of Kd reduction rows is loaded by GatherTableTile (ODL_CONV_GATHER_TABLE):
 * its table of at most kGatherTableMax entries (18 KB) and the largest tile's static stages (128 x 256,
 * 25 KB) stay below the 48 KB a kernel gets without opting in. */
static bool gather_table(int Kd) { return Kd <= kGatherTableMax && odl_env_bool(ODL_ENV_CONV_GATHER_TABLE); }

/* The implicit GEMM with GatherTableTile for B (the forward's or bwd_data's, g), each block's table sized
 * for its reduction range. */
template <class Cfg, class LA, class Out>
static odl_status run_table(const typename LA::Params &pa, const ConvGatherParams &g, const Out &fin,
                            const Out &part, const Epi &ep, int M, int N, int Kd, const Plan &pl, const char *what) {
    using LB = GatherTableTile<Cfg::BN, Cfg::BK, Cfg::THREADS>;
    const typename LB::Params pb = {g, pl.k_chunk};
    return run_implicit<Cfg, LA, LB>(pa, pb, fin, part, ep, M, N, Kd, pl.splits, pl.k_chunk, what,
                                     LB::table_bytes(pl.k_chunk));
}

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

/* ---- bwd_data ---- */
__global__ void transpose_weights_kernel(const float *__restrict__ w, int K, int C, int RS, float *__restrict__ wt) {
    /* wt[c][k*RS + rs] = w[k][c][rs] */
    const int64_t total = (int64_t)K * C * RS;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        const int rs = (int)(i % RS);
        const int64_t kc = i / RS;
        const int c = (int)(kc % C), k = (int)(kc / C);
        wt[((int64_t)c * K + k) * RS + rs] = w[i];
    }
}

odl_status conv_transpose_weights(const odl_conv2d_shape *s, const float *w, float *wt) {
    const int threads = 256;
    transpose_weights_kernel<<<grid_for((int64_t)s->K * s->C * s->R * s->S, threads), threads, 0, stream()>>>(
        w, s->K, s->C, s->R * s->S, wt);
    ODL_CUDA_LAUNCH_CHECK("odl_conv2d_transpose_weights");
    return ODL_OK;
}

template <class Cfg>
static odl_status bwd_data_cfg(const odl_conv2d_shape *s, const float *dy, const float *wt, const float *relu_x,
                               float *dx, const Plan &pl, float *ws) {
    const int M = s->C, N = s->N * s->H * s->W, Kd = s->K * s->R * s->S;
    using LA = DenseTile<Cfg::BM, Cfg::BK, Cfg::THREADS, true>;
    typename LA::Params pa = {wt, (int64_t)Kd, M, Kd, Kd % 4 == 0};
    const int HW = s->H * s->W;
    OutNCHW fin, part;
    conv_nchw_outs(dx, ws, s->C, HW, M, N, HW % 4 == 0 && aligned16(dx) && !relu_x, &fin,
                   &part);
    const FastDiv fHW(s->H * s->W), fW(s->W), fRS(s->R * s->S), fS(s->S), fsh(s->stride_h), fsw(s->stride_w);
    Epi ep = epi_raw();
    ep.gate = relu_x; /* the ReLU backward of the layer below, in the store */
    if (s->stride_h == 1 && s->stride_w == 1 && gather_table(Kd))
        return run_table<Cfg, LA>(pa, conv_bwd_data_gather(s, dy), fin, part, ep, M, N, Kd, pl,
                                  "odl_conv2d_bwd_data_table");
    if (s->stride_h == 1 && s->stride_w == 1) {
        using LB = DyGatherTile<Cfg::BN, Cfg::BK, Cfg::THREADS, true>;
        typename LB::Params pb = {dy, s->K, s->P, s->Q, 1, 1, s->pad_h, s->pad_w, N, Kd, fHW, fW, fRS, fS, fsh, fsw};
        return run_implicit<Cfg, LA, LB>(pa, pb, fin, part, ep, M, N, Kd, pl.splits, pl.k_chunk,
                                         "odl_conv2d_bwd_data");
    }
    using LB = DyGatherTile<Cfg::BN, Cfg::BK, Cfg::THREADS, false>;
    typename LB::Params pb = {dy, s->K, s->P, s->Q, s->stride_h, s->stride_w, s->pad_h, s->pad_w, N, Kd,
                              fHW, fW, fRS, fS, fsh, fsw};
    return run_implicit<Cfg, LA, LB>(pa, pb, fin, part, ep, M, N, Kd, pl.splits, pl.k_chunk,
                                     "odl_conv2d_bwd_data_strided");
}

/* ---- bwd_weight ---- */
/* db (nullable): the bias gradient summed by the A loader from its own reads of dy (DyRowsSumTile), split sums
 * in dbpart ([splits][K]) added in order after. */
template <class Cfg>
static odl_status bwd_weight_cfg(const odl_conv2d_shape *s, const float *x, const float *dy, float *dw, float *db,
                                 const Plan &pl, float *ws, float *dbpart) {
    const int M = s->K, N = s->C * s->R * s->S, Kd = s->N * s->P * s->Q;
    using LA = DyRowsTile<Cfg::BM, Cfg::BK, Cfg::THREADS>;
    using LB = XColsTile<Cfg::BN, Cfg::BK, Cfg::THREADS>;
    const FastDiv fPQ(s->P * s->Q), fQ(s->Q), fRS(s->R * s->S), fS(s->S);
    typename LA::Params pa = {dy, s->K, s->P * s->Q, Kd, fPQ};
    typename LB::Params pb = {x, s->C, s->H, s->W, s->stride_h, s->stride_w, s->pad_h, s->pad_w, N, Kd,
                              fPQ, fQ, fRS, fS};
    OutRowMajor fin, part;
    conv_dw_outs(dw, ws, M, N, &fin, &part);
    if (!db)
        return run_implicit<Cfg, LA, LB>(pa, pb, fin, part, epi_raw(), M, N, Kd, pl.splits, pl.k_chunk,
                                         "odl_conv2d_bwd_weight");
    using LAS = DyRowsSumTile<Cfg::BM, Cfg::BK, Cfg::THREADS>;
    const typename LAS::Params ps = {pa, dbpart};
    ODL_CHECK((run_implicit<Cfg, LAS, LB>(ps, pb, fin, part, epi_raw(), M, N, Kd, pl.splits, pl.k_chunk,
                                          "odl_conv2d_bwd_weight_db")));
    return splitk_reduce_vector(dbpart, pl.splits, M, db, "odl_conv2d_bias_grad_fma_reduce");
}

/* ---- bwd_weight for few columns (C*R*S <= 16, e.g. a first layer with C = 1): the tiled GEMM would
 * waste most of a 128-column tile, so a dedicated reduction kernel instead. Block (chunk b, channel
 * group g): warp w of the block owns output channels k0 = (g * 8 + w) * KT .. k0 + KT - 1; lane l
 * walks the reduction indices j = n*PQ + p*Q + q of chunk b with stride 32 (coalesced dy and x reads),
 * accumulating dy[n, k, pq] * x[n, c, p*sh-ph+r, q*sw-pw+s] for its KT channels and all C*R*S columns
 * in registers; a fixed xor-butterfly over the warp's lanes then adds the 32 lane sums (every lane
 * ends with the same value: IEEE addition commutes) and the block writes part[b][k][crs]. The chunks
 * are added in a fixed order by splitk_reduce: deterministic, FP32 FMAs. ---- */
template <int KT, int CRS_MAX, bool RELU>
__global__ void __launch_bounds__(256)
    bwd_weight_smalln_kernel(const float *__restrict__ x, const float *__restrict__ dy,
                             const float *__restrict__ relu_y, int K, int C, int H, int W,
                             int sh, int sw, int ph, int pw, int PQ, int NPQ, int CRS, int RS, int S, FastDiv fPQ,
                             FastDiv fQ, int chunk, float *__restrict__ part, float *__restrict__ dbpart) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int k0 = ((int)blockIdx.y * 8 + warp) * KT;
    if (k0 >= K) return; /* whole warp: no block-wide barrier below */
    const int HW = H * W;
    int coff[CRS_MAX], rr[CRS_MAX], ss[CRS_MAX];
#pragma unroll
    for (int e = 0; e < CRS_MAX; e++) {
        const int c = e / RS, rs = e % RS, r = rs / S, s_ = rs % S;
        coff[e] = c * HW + r * W + s_;
        rr[e] = e < CRS ? r : (1 << 28); /* columns past C*R*S fail every bounds check */
        ss[e] = s_;
    }
    float acc[KT][CRS_MAX], dsum[KT];
#pragma unroll
    for (int t = 0; t < KT; t++) {
        dsum[t] = 0.0f;
#pragma unroll
        for (int e = 0; e < CRS_MAX; e++) acc[t][e] = 0.0f;
    }
    const int jb = (int)blockIdx.x * chunk;
    const int je = min(NPQ, jb + chunk);
    const int64_t CHW = (int64_t)C * HW;
    for (int j = jb + lane; j < je; j += 32) {
        int img, pq, p, q;
        fPQ.divmod(j, img, pq);
        fQ.divmod(pq, p, q);
        const int h0 = p * sh - ph, w0 = q * sw - pw;
        const int64_t xbase = (int64_t)img * CHW + (int64_t)h0 * W + w0;
        const int64_t dyo = ((int64_t)img * K + k0) * PQ + pq;
        float dv[KT], rv[KT], xv[CRS_MAX];
        /* the ReLU outputs loaded beside dy, every load of the iteration issued before any is used: a load
         * under `k0 + t < K && ...` became a branch per channel, each waiting for its load in turn (SASS:
         * BSSY/BRA around LDG + FSETP), and the fused kernel took 91 us where the plain one took 43 (H200) */
#pragma unroll
        for (int t = 0; t < KT; t++) {
            const bool in = k0 + t < K;
            dv[t] = in ? __ldg(dy + dyo + (int64_t)t * PQ) : 0.0f;
            if (RELU) rv[t] = in ? __ldg(relu_y + dyo + (int64_t)t * PQ) : 1.0f;
        }
        if (RELU) {
#pragma unroll
            for (int t = 0; t < KT; t++) /* OpReluBwd's test (elementwise.cu): the same bits as act_bwd's pass */
                if (rv[t] <= 0.0f) dv[t] = 0.0f;
        }
#pragma unroll
        for (int e = 0; e < CRS_MAX; e++) {
            const int h = h0 + rr[e], w = w0 + ss[e];
            xv[e] = ((unsigned)h < (unsigned)H && (unsigned)w < (unsigned)W) ? __ldg(x + (xbase + coff[e])) : 0.0f;
        }
#pragma unroll
        for (int t = 0; t < KT; t++) {
            if (dbpart) dsum[t] += dv[t];
#pragma unroll
            for (int e = 0; e < CRS_MAX; e++) acc[t][e] = fmaf(dv[t], xv[e], acc[t][e]);
        }
    }
    float *pb = part + ((int64_t)blockIdx.x * K + k0) * CRS;
#pragma unroll
    for (int t = 0; t < KT; t++)
#pragma unroll
        for (int e = 0; e < CRS_MAX; e++) {
            float v = acc[t][e];
#pragma unroll
            for (int off = 16; off >= 1; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
            if (lane == ((t * CRS_MAX + e) & 31) && e < CRS && k0 + t < K) pb[t * CRS + e] = v;
        }
    if (!dbpart) return;
#pragma unroll
    for (int t = 0; t < KT; t++) {
        float v = dsum[t];
#pragma unroll
        for (int off = 16; off >= 1; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
        if (lane == 0 && k0 + t < K) dbpart[(int64_t)blockIdx.x * K + k0 + t] = v;
    }
}

/* db (nullable): the bias gradient from the same reads of dy (each chunk's float32 sums, then over the chunks
 * as dw's); relu_y (nullable): dy masked where it is <= 0 as it is read. */
template <int CRS_MAX>
static odl_status bwd_weight_smalln(const odl_conv2d_shape *s, const float *x, const float *dy, const float *relu_y,
                                    float *dw, float *db) {
    constexpr int KT = 4;
    const int K = s->K, CRS = s->C * s->R * s->S, PQ = s->P * s->Q, NPQ = s->N * s->P * s->Q;
    if (NPQ <= 0) { /* an empty batch: the sums are zero */
        ODL_CUDA_CALL(cudaMemsetAsync(dw, 0, (size_t)K * CRS * sizeof(float), stream()));
        if (db) ODL_CUDA_CALL(cudaMemsetAsync(db, 0, (size_t)K * sizeof(float), stream()));
        return ODL_OK;
    }
    const int groups = (int)cdiv(K, 8 * KT);
    /* about four blocks per multiprocessor in all, each chunk at least 256 reduction indices deep and a
     * multiple of 32 */
    const int64_t want = (int64_t)sm_count() * 4 / groups > 0 ? (int64_t)sm_count() * 4 / groups : 1;
    int64_t chunk = cdiv(NPQ, want);
    if (chunk < 256) chunk = 256;
    chunk = cdiv(chunk, 32) * 32;
    const int chunks = (int)cdiv(NPQ, chunk);
    void *p = nullptr;
    ODL_CHECK(workspace((size_t)chunks * K * (CRS + (db ? 1 : 0)) * sizeof(float), &p));
    float *ws = (float *)p, *dbpart = db ? ws + (size_t)chunks * K * CRS : nullptr;
    const auto kernel =
        relu_y ? bwd_weight_smalln_kernel<KT, CRS_MAX, true> : bwd_weight_smalln_kernel<KT, CRS_MAX, false>;
    kernel<<<dim3((unsigned)chunks, (unsigned)groups), 256, 0, stream()>>>(
        x, dy, relu_y, K, s->C, s->H, s->W, s->stride_h, s->stride_w, s->pad_h, s->pad_w, PQ, NPQ, CRS, s->R * s->S,
        s->S, FastDiv(PQ), FastDiv(s->Q), (int)chunk, ws, dbpart);
    ODL_CUDA_LAUNCH_CHECK("odl_conv2d_bwd_weight_smalln");
    OutRowMajor part;
    part.C = ws;
    part.ldc = CRS;
    part.zstride = (int64_t)K * CRS;
    part.vec = false;
    OutRowMajor fin = part;
    fin.C = dw;
    fin.zstride = 0;
    ODL_CHECK(splitk_reduce(part, chunks, K, CRS, fin, epi_raw(), "odl_conv2d_bwd_weight_smalln_reduce"));
    if (!db) return ODL_OK;
    return splitk_reduce_vector(dbpart, chunks, K, db, "odl_conv2d_bias_grad_smalln_reduce");
}

/* ---- bias gradient: db[k] = sum over n < N, pq < PQ of dy[n, k, pq] ----
 * Pass 1: block (k, s) sums slice s of channel k's N*PQ values (a fixed split_plan of the count) in
 * double with block_sum's fixed tree; pass 2 adds each channel's slices in order. */
__global__ void bias_grad_partial_kernel(const float *__restrict__ dy, int K, int PQ, int NPQ, FastDiv fPQ, int64_t per,
                                         double *__restrict__ part, float *__restrict__ db) {
    __shared__ double sh[32];
    const int k = blockIdx.x, s = blockIdx.y;
    const int64_t begin = (int64_t)s * per, end = min((int64_t)NPQ, begin + per);
    double acc = 0.0;
    for (int64_t j = begin + threadIdx.x; j < end; j += blockDim.x) {
        int img, pq;
        fPQ.divmod((int)j, img, pq);
        acc += (double)dy[((int64_t)img * K + k) * PQ + pq];
    }
    acc = block_sum(acc, sh);
    if (threadIdx.x == 0) {
        if (gridDim.y == 1) db[k] = (float)acc;
        else part[(int64_t)k * gridDim.y + s] = acc;
    }
}

__global__ void bias_grad_final_kernel(const double *__restrict__ part, int K, int parts, float *__restrict__ db) {
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= K) return;
    double acc = 0.0;
    for (int s = 0; s < parts; s++) acc += part[(int64_t)k * parts + s];
    db[k] = (float)acc;
}

odl_status conv_bias_grad(const odl_conv2d_shape *s, const float *dy, float *db) {
    const int K = s->K, PQ = s->P * s->Q, NPQ = s->N * s->P * s->Q;
    if (K <= 0) return ODL_OK;
    const Split sp = split_plan(NPQ, 16384, 256);
    double *part = nullptr;
    if (sp.parts > 1) {
        void *p = nullptr;
        ODL_CHECK(workspace((size_t)K * sp.parts * sizeof(double), &p));
        part = (double *)p;
    }
    bias_grad_partial_kernel<<<dim3((unsigned)K, (unsigned)sp.parts), kThreads, 0, stream()>>>(
        dy, K, PQ, NPQ, FastDiv(PQ > 0 ? PQ : 1), sp.per, part, db);
    ODL_CUDA_LAUNCH_CHECK("odl_conv2d_bias_grad");
    if (sp.parts > 1) {
        bias_grad_final_kernel<<<(unsigned)cdiv(K, 128), 128, 0, stream()>>>(part, K, sp.parts, db);
        ODL_CUDA_LAUNCH_CHECK("odl_conv2d_bias_grad_final");
    }
    return ODL_OK;
}

#define ODL_CONV_DISPATCH(fn, cfg, ...)                                      \
    switch (cfg) {                                                           \
    case C64x256: return fn<Cfg64x256>(__VA_ARGS__);                         \
    case C32x256: return fn<Cfg32x256>(__VA_ARGS__);                         \
    case G128x128: return fn<Cfg128x128>(__VA_ARGS__);                       \
    case G64x128: return fn<Cfg64x128>(__VA_ARGS__);                         \
    case G64x64: return fn<Cfg64x64>(__VA_ARGS__);                           \
    case G32x128: return fn<Cfg32x128>(__VA_ARGS__);                         \
    default: return fn<Cfg16x128>(__VA_ARGS__);                              \
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

static odl_status conv_bwd_data(const odl_conv2d_shape *s, const float *dy, const float *w, const float *relu_x,
                                float *dx) {
    ODL_CHECK(conv_check_sizes(s, "conv2d_bwd_data"));
    const int M = s->C, N = s->N * s->H * s->W, Kd = s->K * s->R * s->S;
    if (M <= 0 || N <= 0) return ODL_OK;
    const Plan pl = plan_for(M, N, Kd, true, true, false);
    float *wt = nullptr, *ws = nullptr;
    ODL_CHECK(conv_workspace2((size_t)s->K * s->C * s->R * s->S, pl.splits > 1 ? (size_t)pl.splits * M * N : 0, &wt, &ws));
    ODL_CHECK(conv_transpose_weights(s, w, wt));
    ODL_CONV_DISPATCH(bwd_data_cfg, pl.cfg, s, dy, wt, relu_x, dx, pl, ws)
}

static odl_status bwd_weight_smalln_any(const odl_conv2d_shape *s, const float *x, const float *dy,
                                        const float *relu_y, float *dw, float *db) {
    const int crs = s->C * s->R * s->S;
    if (crs <= 4) return bwd_weight_smalln<4>(s, x, dy, relu_y, dw, db);
    if (crs <= 9) return bwd_weight_smalln<9>(s, x, dy, relu_y, dw, db);
    return bwd_weight_smalln<16>(s, x, dy, relu_y, dw, db);
}

static odl_status conv_bwd_weight(const odl_conv2d_shape *s, const float *x, const float *dy, float *dw, float *db) {
    ODL_CHECK(conv_check_sizes(s, "conv2d_bwd_weight"));
    const int M = s->K, N = s->C * s->R * s->S, Kd = s->N * s->P * s->Q;
    if (M > 0 && N > 0 && N <= 16) {
        /* the bias gradient from the kernel's own reads of dy (ODL_CONV_WGRAD_BIAS: MNIST conv1's 44 MB pass) */
        float *dbk = db && odl_env_bool(ODL_ENV_CONV_WGRAD_BIAS) ? db : nullptr;
        ODL_CHECK(bwd_weight_smalln_any(s, x, dy, nullptr, dw, dbk));
        if (dbk) return ODL_OK;
    } else if (M > 0 && N > 0) {
        /* up to 256 k slices: enough blocks to fill every resident slot (64 x 288 x 346112 of the MNIST
         * conv2 at batch 512 had 64 slices = 192 blocks of 4 warps, 1-2 per multiprocessor) */
        const Plan pl = plan_for(M, N, Kd, true, false, false, 256);
        /* the bias gradient from the A loader's reads of dy (ODL_CONV_WGRAD_BIAS_FMA: conv2's 75 MB pass in fp32) */
        float *dbk = db && odl_env_bool(ODL_ENV_CONV_WGRAD_BIAS) && odl_env_bool(ODL_ENV_CONV_WGRAD_BIAS_FMA) ? db
                                                                                                          : nullptr;
        float *ws = nullptr, *dbpart = nullptr;
        const size_t n_ws = pl.splits > 1 ? (size_t)pl.splits * M * N : 0, n_db = dbk ? (size_t)pl.splits * M : 0;
        if (n_ws || n_db) ODL_CHECK(conv_workspace2(n_ws, n_db, &ws, &dbpart));
        odl_status st;
        switch (pl.cfg) {
        case G128x128: st = bwd_weight_cfg<Cfg128x128>(s, x, dy, dw, dbk, pl, ws, dbpart); break;
        case G64x128: st = bwd_weight_cfg<Cfg64x128>(s, x, dy, dw, dbk, pl, ws, dbpart); break;
        case G64x64: st = bwd_weight_cfg<Cfg64x64>(s, x, dy, dw, dbk, pl, ws, dbpart); break;
        case G32x128: st = bwd_weight_cfg<Cfg32x128>(s, x, dy, dw, dbk, pl, ws, dbpart); break;
        default: st = bwd_weight_cfg<Cfg16x128>(s, x, dy, dw, dbk, pl, ws, dbpart); break;
        }
        ODL_CHECK(st);
        if (dbk) return ODL_OK;
    }
    if (db) ODL_CHECK(conv_bias_grad(s, dy, db));
    return ODL_OK;
}

#undef ODL_CONV_DISPATCH

} // namespace odlk

extern "C" odl_status odl_cuda_conv2d_fwd(const odl_conv2d_shape *s, const float *x, const float *w,
                                          const odl_epilogue *ep, float *y) {
    return odlk::conv_fwd(s, x, w, ep, y);
}

extern "C" odl_status odl_cuda_conv2d_bwd_data(const odl_conv2d_shape *s, const float *dy, const float *w,
                                               const float *relu_x, float *dx) {
    return odlk::conv_bwd_data(s, dy, w, relu_x, dx);
}

extern "C" odl_status odl_cuda_conv2d_bwd_weight(const odl_conv2d_shape *s, const float *x, const float *dy,
                                                 float *dw, float *db) {
    return odlk::conv_bwd_weight(s, x, dy, dw, db);
}

/* The ReLU's mask inside bwd_weight_smalln where conv_bwd_weight would take it (C*R*S <= 16, in every precision:
 * conv2d_bwd_weight_lowp gives the float32 entry's result there) with the bias gradient from its own reads
 * (ODL_CONV_WGRAD_BIAS, or no db): the same dw and db bits as the mask in place and then the entry of any
 * precision. Elsewhere *fused = 0 and nothing is done (ops.c masks dy and calls the entry). */
extern "C" odl_status odl_cuda_conv2d_bwd_weight_relu(const odl_conv2d_shape *s, const float *x, const float *dy,
                                                      const float *relu_y, float *dw, float *db, int *fused) {
    const int M = s->K, N = s->C * s->R * s->S;
    *fused = M > 0 && N > 0 && N <= 16 && (!db || odl_env_bool(ODL_ENV_CONV_WGRAD_BIAS));
    if (!*fused) return ODL_OK;
    ODL_CHECK(odlk::conv_check_sizes(s, "conv2d_bwd_weight_relu"));
    return odlk::bwd_weight_smalln_any(s, x, dy, relu_y, dw, db);
}
