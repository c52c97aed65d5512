/* FP32 GEMM of the CUDA backend: C = act(alpha * op(A) op(B) + beta * C + bias) + residual, row-major,
 * every trans_a / trans_b combination, any M, N, K and leading dimensions (odl/backend.h).
 *
 * The kernel is tiled_gemm_kernel (gemm_core.cuh) with dense tile loaders; this file holds the tile
 * configurations, the heuristic that picks one (and a split-K factor) for a shape, and the launch.
 * Large products use 128 x 256 x 8 tiles of 256 threads with an 8 x 16 register tile per thread
 * (128 x 128 with 8 x 8 when the wide tiles would leave multiprocessors idle); thin
 * ones (small M, as an MNIST batch of 64) use 64-, 32- or 16-row tiles, and products whose tiles
 * cannot fill the device split K into slices reduced in a fixed order (deterministic). Operands load
 * as float4 when both are 16-byte aligned with leading dimensions divisible by 4; otherwise element by
 * element. No cuBLAS.
 */
#include <limits.h>

#include "gemm_run.cuh"

namespace odlk {

struct GemmCfgInfo {
    const char *name;
    int bm, bn, bk, threads, minb;
};

#define ODL_CFG_INFO(C, name) {name, C::BM, C::BN, C::BK, C::THREADS, C::MINB}
static const GemmCfgInfo g_cfgs[G_COUNT] = {
    ODL_CFG_INFO(Cfg128x128, "128x128x8/256t"), ODL_CFG_INFO(Cfg128x128w4, "128x128x8/128t"),
    ODL_CFG_INFO(Cfg128x256, "128x256x8/256t"), ODL_CFG_INFO(Cfg64x128, "64x128x8/128t"),
    ODL_CFG_INFO(Cfg64x64, "64x64x8/128t"),      ODL_CFG_INFO(Cfg32x128, "32x128x8/128t"),
    ODL_CFG_INFO(Cfg16x128, "16x128x8/64t"),
};
#undef ODL_CFG_INFO

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t tiles_of(int cfg, int64_t M, int64_t N) { return cdiv(M, g_cfgs[cfg].bm) * cdiv(N, g_cfgs[cfg].bn); }

int split_count(int64_t tiles, int minb, int64_t M, int64_t N, int64_t K, int max_splits) {
    const int64_t sms = sm_count();
    if (tiles >= sms || K < 512) return 1;
    int64_t s = sms * minb / tiles;
    if (s > K / 256) s = K / 256;
    if (s > max_splits) s = max_splits;
    /* the partial sums must stay indexable by int and modest in size (<= 256 MB) */
    while (s > 1 && (s * M * N > INT_MAX || s * M * N * 4 > (int64_t)256 << 20)) s--;
    return s < 1 ? 1 : (int)s;
}

/* Split-K factor for an M x N x K product on `cfg`: enough k slices that the tiles fill every resident
 * block slot once, each slice at least 256 deep, at most 64 slices. 1 when the tiles fill the device
 * already. */
int plan_splits(int cfg, int64_t M, int64_t N, int64_t K, int max_splits) {
    return split_count(tiles_of(cfg, M, N), g_cfgs[cfg].minb, M, N, K, max_splits);
}

/* Tile configuration for a shape (see the file comment): rows per tile from M, then the largest tile
 * that still gives at least one block per multiprocessor. 128 x 256 (8 x 16 per thread) once its tiles
 * fill at least 7/8 of the multiprocessors: measured on an H200 at 0.95 of cuBLAS for 4096^3 and
 * 8192^3 against 0.81 for 128 x 128, and 46 vs 39 TFLOP/s at 2048^3 with 128 tiles on 132 SMs
 * (bench/NOTES.md). */
int plan_cfg(int64_t M, int64_t N) {
    const int64_t sms = sm_count();
    if (M <= 16) return G16x128;
    if (M <= 32) return G32x128;
    if (M <= 64) return tiles_of(G64x128, M, N) >= sms ? G64x128 : G64x64;
    if (tiles_of(G128x256, M, N) * 8 >= sms * 7) return G128x256;
    if (tiles_of(G128x128, M, N) >= sms) return G128x128;
    if (tiles_of(G64x128, M, N) >= sms) return G64x128;
    return G64x64;
}

int slice_depth(int K, int splits, int bk, int *chunk) {
    int c = (int)cdiv(cdiv(K, splits), bk) * bk;
    if (c < bk) c = bk;
    *chunk = c;
    int s = (int)cdiv(K, c);
    return s < 1 ? 1 : s;
}

/* Slice depth for `splits` k ranges: a multiple of BK; returns the number of non-empty ranges. */
int k_chunk_for(int cfg, int K, int splits, int *chunk) { return slice_depth(K, splits, g_cfgs[cfg].bk, chunk); }

static odl_status gemm_impl(const odl_gemm_args *g, int cfg, int splits) {
    if (g->M <= 0 || g->N <= 0) return ODL_OK;
    if (g->M > INT_MAX || g->N > INT_MAX || g->K > INT_MAX || g->K < 0)
        return ODL_ERR(ODL_E_UNSUPPORTED, "gemm: M=%lld N=%lld K=%lld exceeds the CUDA backend's int range",
                       (long long)g->M, (long long)g->N, (long long)g->K);
    if (cfg < 0 || cfg >= G_COUNT) cfg = plan_cfg(g->M, g->N);
    if (splits <= 0) splits = plan_splits(cfg, g->M, g->N, g->K);
    if ((int64_t)splits * g->M * g->N > INT_MAX) splits = 1;
    int k_chunk = INT_MAX;
    if (splits > 1) splits = k_chunk_for(cfg, (int)g->K, splits, &k_chunk);
    if (splits <= 1) {
        splits = 1;
        k_chunk = g->K > 0 ? (int)g->K : 1;
    }
    float *ws = nullptr;
    if (splits > 1) {
        void *p = nullptr;
        ODL_CHECK(workspace((size_t)splits * (size_t)g->M * (size_t)g->N * sizeof(float), &p));
        ws = (float *)p;
    }
    const char *what = g_cfgs[cfg].name;
    switch (cfg) {
    case G128x128: return run_cfg<Cfg128x128>(g, splits, k_chunk, ws, what);
    case G128x128W4:
    case G128x256: return run_wide(cfg, g, splits, k_chunk, ws, what);
    case G64x128: return run_cfg<Cfg64x128>(g, splits, k_chunk, ws, what);
    case G64x64: return run_cfg<Cfg64x64>(g, splits, k_chunk, ws, what);
    case G32x128: return run_cfg<Cfg32x128>(g, splits, k_chunk, ws, what);
    default: return run_cfg<Cfg16x128>(g, splits, k_chunk, ws, what);
    }
}

} // namespace odlk

extern "C" odl_status odl_cuda_gemm(const odl_gemm_args *a) { return odlk::gemm_impl(a, -1, 0); }

extern "C" odl_status odl_cuda_gemm_ex(const odl_gemm_args *a, int cfg, int splits) {
    return odlk::gemm_impl(a, cfg, splits);
}

extern "C" int odl_cuda_gemm_num_configs(void) { return odlk::G_COUNT; }

extern "C" const char *odl_cuda_gemm_config_name(int cfg) {
    return cfg >= 0 && cfg < odlk::G_COUNT ? odlk::g_cfgs[cfg].name : "auto";
}

extern "C" void odl_cuda_gemm_plan(int64_t M, int64_t N, int64_t K, int *cfg, int *splits) {
    int c = odlk::plan_cfg(M, N);
    int s = odlk::plan_splits(c, M, N, K);
    if (s > 1 && K <= INT_MAX) {
        int chunk;
        s = odlk::k_chunk_for(c, (int)K, s, &chunk);
    }
    if (cfg) *cfg = c;
    if (splits) *splits = s;
}
