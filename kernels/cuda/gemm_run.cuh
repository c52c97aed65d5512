/* Launch of the dense GEMM on one tile configuration (all trans_a / trans_b combinations), shared by
 * gemm.cu and gemm_wide.cu, which instantiate different configurations so that they compile in
 * parallel. */
#ifndef ODL_KERNELS_CUDA_GEMM_RUN_CUH
#define ODL_KERNELS_CUDA_GEMM_RUN_CUH

#include "gemm_core.cuh"

namespace odlk {

template <class Cfg, bool TA, bool TB>
static inline odl_status run_gemm(const odl_gemm_args *g, int splits, int k_chunk, float *ws, const char *what) {
    using LA = DenseTile<Cfg::BM, Cfg::BK, Cfg::THREADS, !TA>; /* A[m*lda+k], or A[k*lda+m] transposed */
    using LB = DenseTile<Cfg::BN, Cfg::BK, Cfg::THREADS, TB>;  /* B[k*ldb+n], or B[n*ldb+k] transposed */
    const int M = (int)g->M, N = (int)g->N, K = (int)g->K;
    const bool vec = aligned16(g->A) && aligned16(g->B) && g->lda % 4 == 0 && g->ldb % 4 == 0;
    typename LA::Params pa = {g->A, g->lda, M, K, vec};
    typename LB::Params pb = {g->B, g->ldb, N, K, vec};
    const Epi ep = epi_of(g);
    OutRowMajor out;
    out.C = g->C;
    out.ldc = g->ldc;
    out.zstride = 0;
    out.vec = aligned16(g->C) && g->ldc % 4 == 0 && (!g->ep.residual || aligned16(g->ep.residual));
    if (splits == 1) {
        tiled_gemm_kernel<Cfg, LA, LB, OutRowMajor>
            <<<tile_grid<Cfg>(M, N, 1), Cfg::THREADS, 0, stream()>>>(pa, pb, out, ep, M, N, K, k_chunk, 8);
        ODL_CUDA_LAUNCH_CHECK(what);
        return ODL_OK;
    }
    OutRowMajor part;
    part.C = ws;
    part.ldc = N;
    part.zstride = (int64_t)M * N;
    part.vec = N % 4 == 0;
    tiled_gemm_kernel<Cfg, LA, LB, OutRowMajor>
        <<<tile_grid<Cfg>(M, N, splits), Cfg::THREADS, 0, stream()>>>(pa, pb, part, epi_raw(), M, N, K, k_chunk, 8);
    ODL_CUDA_LAUNCH_CHECK(what);
    return splitk_reduce(part, splits, M, N, out, ep, "odl_gemm_splitk_reduce");
}

template <class Cfg>
static inline odl_status run_cfg(const odl_gemm_args *g, int splits, int k_chunk, float *ws, const char *what) {
    const int ta = g->trans_a != 0, tb = g->trans_b != 0;
    if (!ta && !tb) return run_gemm<Cfg, false, false>(g, splits, k_chunk, ws, what);
    if (!ta && tb) return run_gemm<Cfg, false, true>(g, splits, k_chunk, ws, what);
    if (ta && !tb) return run_gemm<Cfg, true, false>(g, splits, k_chunk, ws, what);
    return run_gemm<Cfg, true, true>(g, splits, k_chunk, ws, what);
}

/* The wide configurations (G128x128W4, G128x256), compiled in gemm_wide.cu. */
odl_status run_wide(int cfg, const odl_gemm_args *g, int splits, int k_chunk, float *ws, const char *what);

} // namespace odlk

#endif
