/* TF32 and BF16 convolutions on tensor cores: odl_backend.conv2d_{fwd,bwd_data,bwd_weight}_lowp of the
 * CUDA backend (odl/backend.h; CPU twin: kernels/cpu/conv2d_lowp.c). The same three implicit GEMMs as
 * conv2d.cu (formulas and operand layouts in its file comment), gathered by the same tile loaders
 * (conv2d_tiles.cuh), on the mma.sync kernels of gemm_mma.cuh: each gathered element rounded once (TF32 or
 * BF16, nearest even), products accumulated in float32, the epilogue (bias, activation, residual) in
 * float32, split-K partials added in a fixed order. Deterministic. The forward and the stride-1 data
 * gradient gather with GatherTc / WeightsTc through the cp.async ring (mma_gemm_async_kernel); the weight
 * gradient and a strided data gradient with the register-staged loaders (mma_gemm_kernel).
 *
 * Products too small for an mma slice (kMinReduction: a first layer with C = 1) and sources of 2^31
 * elements or more (the gathers index in 32 bits) run conv2d.cu's float32 kernels, which are at least as
 * accurate (odl/backend.h allows it). The bias gradient is float32 (conv2d.cu's), as autocast leaves it.
 *
 * Tiles (block BM x BN, slices of 16, 4 warps): plan_tc below.
 */
#include <limits.h>
#include <string.h>

#include <atomic>

#include "odl/env.h"
#include "odl/log.h"

#include "conv2d_impl.cuh"
#include "conv2d_sm90.h"
#include "conv2d_tiles.cuh"
#include "gemm_mma.cuh"
#include "ops_util.cuh"

namespace odlk {
namespace {

/*                  BM   BN  BK WARPS MINB */
using T64x256 = MmaCfg<64, 256, 16, 1, 4, 2>; /* warps of 64 x 64 */
using T32x256 = MmaCfg<32, 256, 16, 1, 4, 3>; /* warps of 32 x 64 */
using T64x128 = MmaCfg<64, 128, 16, 2, 2, 3>; /* warps of 32 x 64 */
using T32x128 = MmaCfg<32, 128, 16, 1, 4, 4>; /* warps of 32 x 32 */
using T64x128w = MmaCfg<64, 128, 16, 2, 2, 2>; /* bwd_weight's: its loader holds 3 indices per column */
enum { K64x256, K32x256, K64x128, K32x128, K64x128W };
struct TileInfo {
    int bm, bn, minb;
};
constexpr TileInfo kTiles[] = {{64, 256, 2}, {32, 256, 3}, {64, 128, 3}, {32, 128, 4}, {64, 128, 2}};

struct Plan {
    int cfg, splits, k_chunk;
};

/* Products with a reduction (fwd, bwd_data) or a column count (bwd_weight) of at most this many run the
 * float32 kernels: one 16-deep mma slice would be mostly zeros, and conv2d.cu's kernels are faster there
 * (the MNIST conv1 forward, C*R*S = 9: 34 us FMA vs 120 us mma.sync at batch 512 on an H200). */
constexpr int64_t kMinReduction = 16;

static int64_t tiles_of(int cfg, int64_t M, int64_t N) { return cdiv(M, kTiles[cfg].bm) * cdiv(N, kTiles[cfg].bn); }

/* ODL_CONV_TC_TILE (odl/env.h): the wide tile it names, or -1 when unset; a value that names none is
 * ignored with one warning (as ODL_GEMM_CONFIG, kernels/gemm_table.c). */
static int forced_wide_tile() {
    const char *v = odl_env_str(ODL_ENV_CONV_TC_TILE);
    if (!v || !v[0]) return -1;
    if (!strcmp(v, "64x256")) return K64x256;
    if (!strcmp(v, "32x256")) return K32x256;
    if (!strcmp(v, "64x128")) return K64x128;
    static std::atomic<int> warned{0};
    if (!warned.exchange(1)) ODL_LOG_WARN("ODL_CONV_TC_TILE='%s' is not 64x256, 32x256 or 64x128 (ignored)", v);
    return -1;
}

/* The tile for an M x N product with reduction Kd, then split-K when the tiles leave multiprocessors idle
 * (at most max_splits ranges, each at least 256 deep, partial sums at most 256 MB). Forward and bwd_data
 * (wide = true: many columns, the pixels): 32 x 256 for M <= 64, 64 x 256 above, when their tiles fill
 * the multiprocessors, else 64 x 128. Measured on an H200 (MNIST conv2 forward, M = 64, at batch 512,
 * TF32): 32 x 256 347 us (three resident blocks of 4 warps), 64 x 256 448 us (two), 64 x 128 591 us:
 * these kernels are bound by the gathers and by stalls, not by the tensor cores, so occupancy wins over
 * the larger tile's reuse of the gathered operand. bwd_weight (columns C*R*S, a long reduction): 32 x 128 for M <= 32,
 * else 64 x 128. Few tiles keep the build small: each is compiled per loader and precision. */
static Plan plan_tc(int64_t M, int64_t N, int64_t Kd, bool wide, int max_splits) {
    const int64_t sms = sm_count();
    Plan p;
    if (wide) {
        p.cfg = M <= 64 ? K32x256 : K64x256;
        if (tiles_of(p.cfg, M, N) < sms) p.cfg = K64x128;
        const int forced = forced_wide_tile();
        if (forced >= 0) p.cfg = forced;
    } else {
        p.cfg = M <= 32 ? K32x128 : K64x128W;
    }
    const int s = split_count(tiles_of(p.cfg, M, N), kTiles[p.cfg].minb, M, N, Kd, max_splits);
    p.splits = 1;
    p.k_chunk = Kd > 0 ? (int)Kd : 1; /* Kd < 2^31: conv_check_sizes */
    if (s > 1) p.splits = slice_depth((int)Kd, s, 16, &p.k_chunk);
    return p;
}

/* One implicit GEMM on mma_gemm_kernel (conv2d.cu's run_implicit). */
template <class Cfg, bool BF16, class LA, class LB, class Out>
static odl_status run_mma(const typename LA::Params &pa, const typename LB::Params &pb, const Out &fin,
                          const Out &part, const Epi &ep, int M, int N, int Kd, const Plan &pl, const char *what) {
    const int tiles = (int)(cdiv(M, Cfg::BM) * cdiv(N, Cfg::BN));
    if (pl.splits <= 1) {
        mma_gemm_kernel<Cfg, BF16, LA, LB, Out>
            <<<dim3((unsigned)tiles, 1, 1), Cfg::THREADS, 0, stream()>>>(pa, pb, fin, ep, M, N, Kd, pl.k_chunk, 8);
        ODL_CUDA_LAUNCH_CHECK(what);
        return ODL_OK;
    }
    mma_gemm_kernel<Cfg, BF16, LA, LB, Out><<<dim3((unsigned)tiles, 1, (unsigned)pl.splits), Cfg::THREADS, 0,
                                              stream()>>>(pa, pb, part, epi_raw(), M, N, Kd, pl.k_chunk, 8);
    ODL_CUDA_LAUNCH_CHECK(what);
    return splitk_reduce(part, pl.splits, M, N, fin, ep, "odl_conv2d_tc_splitk_reduce");
}

/* Pipeline depth of the cp.async kernels per tile: as deep as two (three for 32 x 256) resident blocks of
 * shared memory allow on a 9.0 device (227 KB per multiprocessor). */
template <class Cfg> struct Stages { static constexpr int value = 4; };
template <> struct Stages<T32x256> { static constexpr int value = 3; };

/* One implicit GEMM on mma_gemm_async_kernel (loaders with issue()). */
template <class Cfg, bool BF16, class LA, class LB, class Out>
static odl_status run_mma_async(const typename LA::Params &pa, const typename LB::Params &pb, const Out &fin,
                                const Out &part, const Epi &ep, int M, int N, int Kd, const Plan &pl, const char *what) {
    constexpr int ST = Stages<Cfg>::value, smem = mma_async_smem_bytes<Cfg, ST>();
    auto kern = mma_gemm_async_kernel<Cfg, BF16, ST, LA, LB, Out>;
    static std::atomic<unsigned long long> opted{0};
    ODL_CHECK(opt_in_smem(kern, smem, opted));
    const int tiles = (int)(cdiv(M, Cfg::BM) * cdiv(N, Cfg::BN));
    const bool split = pl.splits > 1;
    kern<<<dim3((unsigned)tiles, 1, (unsigned)(split ? pl.splits : 1)), Cfg::THREADS, smem, stream()>>>(
        pa, pb, split ? part : fin, split ? epi_raw() : ep, M, N, Kd, pl.k_chunk, 8);
    ODL_CUDA_LAUNCH_CHECK(what);
    if (!split) return ODL_OK;
    return splitk_reduce(part, pl.splits, M, N, fin, ep, "odl_conv2d_tc_splitk_reduce");
}

/* ---- forward: M = K, N = N*P*Q, reduction C*R*S ---- */
static bool fwd_vec(const odl_conv2d_shape *s, const float *y, const Epi &ep) {
    return (s->P * s->Q) % 4 == 0 && aligned16(y) && (!ep.residual || aligned16(ep.residual));
}

template <class Cfg, bool BF16>
static odl_status fwd_tc(const odl_conv2d_shape *s, const float *x, const float *w, const Epi &ep, float *y,
                         const Plan &pl, float *ws) {
    const int M = s->K, N = s->N * s->P * s->Q, Kd = s->C * s->R * s->S, PQ = s->P * s->Q;
    using LA = WeightsTc<Cfg::BM, Cfg::BK, Cfg::THREADS, Cfg::PAD>;
    typename LA::Params pa = {w, M, Kd};
    OutNCHW fin, part;
    conv_nchw_outs(y, ws, s->K, PQ, M, N, fwd_vec(s, y, ep), &fin, &part);
    using LB = GatherTc<Cfg::BN, Cfg::BK, Cfg::THREADS, Cfg::PAD>;
    return run_mma_async<Cfg, BF16, LA, LB>(pa, conv_fwd_gather(s, x), fin, part, ep, M, N, Kd, pl,
                                            "odl_conv2d_fwd_tc");
}

/* ---- bwd_data: M = C, N = N*H*W, reduction K*R*S; A = the transposed weights ---- */
template <class Cfg, bool BF16>
static odl_status bwd_data_tc(const odl_conv2d_shape *s, const float *dy, const float *wt, const float *relu_x,
                              float *dx, const Plan &pl, float *ws) {
    const int M = s->C, N = s->N * s->H * s->W, Kd = s->K * s->R * s->S, HW = s->H * s->W;
    using LA = DenseTile<Cfg::BM, Cfg::BK, Cfg::THREADS, true, Cfg::PAD>;
    typename LA::Params pa = {wt, (int64_t)Kd, M, Kd, Kd % 4 == 0};
    OutNCHW fin, part;
    conv_nchw_outs(dx, ws, s->C, HW, M, N, HW % 4 == 0 && aligned16(dx) && !relu_x, &fin,
                   &part);
    Epi ep = epi_raw();
    ep.gate = relu_x;
    const FastDiv fHW(HW), fW(s->W), fRS(s->R * s->S), fS(s->S), fsh(s->stride_h), fsw(s->stride_w);
    if (s->stride_h == 1 && s->stride_w == 1) {
        using LWA = WeightsTc<Cfg::BM, Cfg::BK, Cfg::THREADS, Cfg::PAD>;
        using LB = GatherTc<Cfg::BN, Cfg::BK, Cfg::THREADS, Cfg::PAD>;
        typename LWA::Params pwa = {wt, M, Kd};
        return run_mma_async<Cfg, BF16, LWA, LB>(pwa, conv_bwd_data_gather(s, dy), fin, part, ep, M, N, Kd, pl,
                                                 "odl_conv2d_bwd_data_tc");
    }
    using LB = DyGatherTile<Cfg::BN, Cfg::BK, Cfg::THREADS, false, Cfg::PAD>;
    typename LB::Params pb = {dy, s->K, s->P, s->Q, s->stride_h, s->stride_w, s->pad_h, s->pad_w, N, Kd,
                              fHW, fW, fRS, fS, fsh, fsw};
    return run_mma<Cfg, BF16, LA, LB>(pa, pb, fin, part, ep, M, N, Kd, pl, "odl_conv2d_bwd_data_tc_strided");
}

/* ---- bwd_weight: M = K, N = C*R*S, reduction N*P*Q ---- */
template <class Cfg, bool BF16>
static odl_status bwd_weight_tc(const odl_conv2d_shape *s, const float *x, const float *dy, float *dw, const Plan &pl,
                                float *ws) {
    const int M = s->K, N = s->C * s->R * s->S, Kd = s->N * s->P * s->Q;
    using LA = DyRowsTile<Cfg::BM, Cfg::BK, Cfg::THREADS, Cfg::PAD>;
    using LB = XColsTile<Cfg::BN, Cfg::BK, Cfg::THREADS, Cfg::PAD>;
    typename LA::Params pa;
    typename LB::Params pb;
    conv_wgrad_operands<LA, LB>(s, x, dy, &pa, &pb);
    OutRowMajor fin, part;
    conv_dw_outs(dw, ws, M, N, &fin, &part);
    return run_mma<Cfg, BF16, LA, LB>(pa, pb, fin, part, epi_raw(), M, N, Kd, pl, "odl_conv2d_bwd_weight_tc");
}

#define ODL_TC_DISPATCH_WIDE(fn, pl, bf16, ...)                                                                  \
    do {                                                                                                       \
        switch ((pl).cfg) {                                                                                    \
        case K64x256: return bf16 ? fn<T64x256, true>(__VA_ARGS__) : fn<T64x256, false>(__VA_ARGS__);           \
        case K32x256: return bf16 ? fn<T32x256, true>(__VA_ARGS__) : fn<T32x256, false>(__VA_ARGS__);           \
        default: return bf16 ? fn<T64x128, true>(__VA_ARGS__) : fn<T64x128, false>(__VA_ARGS__);                \
        }                                                                                                      \
    } while (0)

/* The split-K partials' buffer of a plan (nullptr without split-K). */
static odl_status partials(const Plan &pl, int64_t M, int64_t N, float **ws) {
    *ws = nullptr;
    if (pl.splits <= 1) return ODL_OK;
    void *p = nullptr;
    ODL_CHECK(workspace((size_t)pl.splits * M * N * sizeof(float), &p));
    *ws = (float *)p;
    return ODL_OK;
}

static odl_status conv_fwd_tc(const odl_conv2d_shape *s, const float *x, const float *w, const odl_epilogue *e,
                              float *y, bool bf16) {
    ODL_CHECK(conv_check_sizes(s, "conv2d_fwd_lowp"));
    const int64_t M = s->K, N = (int64_t)s->N * s->P * s->Q, Kd = (int64_t)s->C * s->R * s->S;
    if (M <= 0 || N <= 0) return ODL_OK;
    if (Kd <= kMinReduction || (int64_t)s->N * s->C * s->H * s->W >= INT_MAX) return odl_cuda_conv2d_fwd(s, x, w, e, y);
    const Epi ep = conv_epi(e);
    if (sm90::conv_use(M, N, Kd, s->C, s->N, (int64_t)s->N * s->C * s->H * s->W, bf16)) {
        OutNCHW fin, part;
        conv_nchw_outs(y, nullptr, s->K, s->P * s->Q, (int)M, (int)N, fwd_vec(s, y, ep), &fin, &part);
        return sm90::conv_rounded(conv_fwd_gather(s, x), w, false, s->R * s->S, bf16, (int)M, (int)N, (int)Kd, fin,
                                  ep, "odl_conv2d_fwd_sm90");
    }
    const Plan pl = plan_tc(M, N, Kd, true, 64);
    float *ws = nullptr;
    ODL_CHECK(partials(pl, M, N, &ws));
    ODL_TC_DISPATCH_WIDE(fwd_tc, pl, bf16, s, x, w, ep, y, pl, ws);
}

static odl_status conv_bwd_data_tc(const odl_conv2d_shape *s, const float *dy, const float *w, const float *relu_x,
                                   float *dx, bool bf16) {
    ODL_CHECK(conv_check_sizes(s, "conv2d_bwd_data_lowp"));
    const int64_t M = s->C, N = (int64_t)s->N * s->H * s->W, Kd = (int64_t)s->K * s->R * s->S;
    if (M <= 0 || N <= 0) return ODL_OK;
    if (Kd <= kMinReduction || (int64_t)s->N * s->K * s->P * s->Q >= INT_MAX)
        return odl_cuda_conv2d_bwd_data(s, dy, w, relu_x, dx);
    if (s->stride_h == 1 && s->stride_w == 1 &&
        sm90::conv_use(M, N, Kd, s->K, s->N, (int64_t)s->N * s->K * s->P * s->Q, bf16)) { /* packs the weights transposed itself */
        OutNCHW fin, part;
        conv_nchw_outs(dx, nullptr, s->C, s->H * s->W, (int)M, (int)N, false, &fin, &part);
        Epi ep = epi_raw();
        ep.gate = relu_x;
        return sm90::conv_rounded(conv_bwd_data_gather(s, dy), w, true, s->R * s->S, bf16, (int)M, (int)N, (int)Kd,
                                  fin, ep, "odl_conv2d_bwd_data_sm90");
    }
    const Plan pl = plan_tc(M, N, Kd, true, 64);
    float *wt = nullptr, *ws = nullptr;
    ODL_CHECK(conv_workspace2((size_t)s->K * s->C * s->R * s->S, pl.splits > 1 ? (size_t)pl.splits * M * N : 0, &wt,
                              &ws));
    ODL_CHECK(conv_transpose_weights(s, w, wt));
    ODL_TC_DISPATCH_WIDE(bwd_data_tc, pl, bf16, s, dy, wt, relu_x, dx, pl, ws);
}

static odl_status bwd_weight_tc_plan(const odl_conv2d_shape *s, const float *x, const float *dy, float *dw,
                                     const Plan &pl, float *ws, bool bf16) {
    if (pl.cfg == K32x128)
        return bf16 ? bwd_weight_tc<T32x128, true>(s, x, dy, dw, pl, ws) : bwd_weight_tc<T32x128, false>(s, x, dy, dw, pl, ws);
    return bf16 ? bwd_weight_tc<T64x128w, true>(s, x, dy, dw, pl, ws) : bwd_weight_tc<T64x128w, false>(s, x, dy, dw, pl, ws);
}

static odl_status conv_bwd_weight_tc(const odl_conv2d_shape *s, const float *x, const float *dy, float *dw, float *db,
                                     bool bf16) {
    ODL_CHECK(conv_check_sizes(s, "conv2d_bwd_weight_lowp"));
    const int64_t M = s->K, N = (int64_t)s->C * s->R * s->S, Kd = (int64_t)s->N * s->P * s->Q;
    if (M > 0 && N > 0 && N <= kMinReduction) return odl_cuda_conv2d_bwd_weight(s, x, dy, dw, db);
    if (M > 0 && N > 0 && sm90::conv_wgrad_use(M, N, Kd)) {
        const sm90::ConvWgradParams g = {dy, x, s->N, s->K, s->C, s->H, s->W, s->P, s->Q, s->R, s->S,
                                         s->stride_h, s->stride_w, s->pad_h, s->pad_w, FastDiv(s->P * s->Q),
                                         FastDiv(s->Q), FastDiv(s->R * s->S), FastDiv(s->S)};
        /* the bias gradient in the same kernel with ODL_CONV_WGRAD_BIAS, on by default (+3.5 % examples-CNN
         * samples/s on an H100): TF32, and BF16 where it rounds in shared memory (its rounded copies would not
         * give the float32 dy's db) */
        const bool in_stage = bf16 && sm90::conv_wgrad_bf16_in_stage();
        float *kdb = db && odl_env_bool(ODL_ENV_CONV_WGRAD_BIAS) && (!bf16 || in_stage) ? db : nullptr;
        ODL_CHECK(bf16 ? sm90::conv_wgrad_bf16(g, dw, kdb, in_stage, "odl_conv2d_bwd_weight_sm90")
                       : sm90::conv_wgrad_tf32(g, dw, kdb, "odl_conv2d_bwd_weight_sm90"));
        if (kdb) return ODL_OK;
    } else if (M > 0 && N > 0) {
        /* up to 256 ranges of the reduction, as conv2d.cu's weight gradient */
        const Plan pl = plan_tc(M, N, Kd, false, 256);
        float *ws = nullptr;
        ODL_CHECK(partials(pl, M, N, &ws));
        ODL_CHECK(bwd_weight_tc_plan(s, x, dy, dw, pl, ws, bf16));
    }
    if (db) ODL_CHECK(conv_bias_grad(s, dy, db));
    return ODL_OK;
}

#undef ODL_TC_DISPATCH_WIDE

} // namespace
} // namespace odlk

extern "C" odl_status odl_cuda_conv2d_fwd_lowp(const odl_conv2d_shape *s, const float *x, const float *w,
                                               const odl_epilogue *ep, float *y, odl_precision prec) {
    if (prec == ODL_PRECISION_FP32) return odl_cuda_conv2d_fwd(s, x, w, ep, y);
    return odlk::conv_fwd_tc(s, x, w, ep, y, prec == ODL_PRECISION_BF16);
}

extern "C" odl_status odl_cuda_conv2d_bwd_data_lowp(const odl_conv2d_shape *s, const float *dy, const float *w,
                                                    const float *relu_x, float *dx, odl_precision prec) {
    if (prec == ODL_PRECISION_FP32) return odl_cuda_conv2d_bwd_data(s, dy, w, relu_x, dx);
    return odlk::conv_bwd_data_tc(s, dy, w, relu_x, dx, prec == ODL_PRECISION_BF16);
}

extern "C" odl_status odl_cuda_conv2d_bwd_weight_lowp(const odl_conv2d_shape *s, const float *x, const float *dy,
                                                      float *dw, float *db, odl_precision prec) {
    if (prec == ODL_PRECISION_FP32) return odl_cuda_conv2d_bwd_weight(s, x, dy, dw, db);
    return odlk::conv_bwd_weight_tc(s, x, dy, dw, db, prec == ODL_PRECISION_BF16);
}
