/* The wide tile configurations of the dense GEMM (128 x 128 with 128 threads of 8 x 16, and
 * 128 x 256 with 256 threads of 8 x 16), kept apart from gemm.cu so that the two compile in parallel.
 * The heuristic picks 128 x 256 for large products (plan_cfg); 128 x 128 / 128 threads only when forced. */
#include "gemm_run.cuh"

namespace odlk {

odl_status run_wide(int cfg, const odl_gemm_args *g, int splits, int k_chunk, float *ws, const char *what) {
    if (cfg == G128x256) return run_cfg<Cfg128x256>(g, splits, k_chunk, ws, what);
    return run_cfg<Cfg128x128w4>(g, splits, k_chunk, ws, what);
}

} // namespace odlk
