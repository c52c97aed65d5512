/* The TF32 instantiation of the tensor-core GEMM (gemm_tc.cuh), apart from the other precision's so that
 * the two compile in parallel. */
#include "gemm_tc.cuh"

namespace odlk {
namespace tc {

odl_status run_tc_tf32(int cfg, const TcParams &p, bool ta, bool tb, bool vec, const OutRowMajor &out, const Epi &ep,
                       int splits, const char *what) {
    return run_tc1<false>(cfg, p, ta, tb, vec, out, ep, splits, what);
}

} // namespace tc
} // namespace odlk
