/* What the FMA convolutions' passes share (kernels/cuda/conv2d.cu the forward, conv2d_bwd.cu the data and weight
 * gradients): the launch of one implicit GEMM on gemm_core.cuh's tiled kernel, the wide conv tiles, the plan
 * (tile, split-K, slice depth), the gather-table choice, and the dispatch from a plan's tile to its kernel.
 * Two translation units, so that a process that only infers loads the forward's module alone: the driver
 * loads a module whole at its first kernel's first launch (CUDA_MODULE_LOADING=LAZY), and this one was 31 MB
 * (bench/NOTES.md, 2026-12-08). Private to the CUDA backend. */
#ifndef ODL_KERNELS_CUDA_CONV2D_PLAN_CUH
#define ODL_KERNELS_CUDA_CONV2D_PLAN_CUH

#include "odl/env.h"
#include "conv2d_impl.cuh"
#include "conv2d_tiles.cuh"
#include "gemm_core.cuh"
#include "ops_util.cuh"

namespace odlk {

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

static inline int64_t tiles2(int64_t M, int64_t N, int bm, int bn) { return cdiv(M, bm) * cdiv(N, bn); }

/* Configuration, split count and slice depth for an implicit GEMM of M x N with reduction Kd.
 * wide: the wide conv tiles may be used (forward and bwd_data), when they give at least three blocks per
 * multiprocessor; otherwise plan_cfg's choice, with 128 x 256 narrowed to 128 x 128 unless allow_256.
 * max_splits: cap of the split-K factor. */
struct Plan {
    int cfg, splits, k_chunk;
};
static inline Plan plan_for(int M, int N, int Kd, bool allow_split, bool wide = false, bool allow_256 = false,
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
static inline bool gather_table(int Kd) { return Kd <= kGatherTableMax && odl_env_bool(ODL_ENV_CONV_GATHER_TABLE); }

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

} // namespace odlk

#endif
