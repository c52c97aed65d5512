/* The f16 instantiations of the wgmma GEMM kernel (gemm_sm90_kernel.cuh; design in gemm_sm90.cu). */
#include "gemm_sm90_kernel.cuh"

namespace odlk {
namespace sm90 {

odl_status run_f16(const Launch &l) {
    return run_layout<WgIn::F16>(l.a_mn, l.b_mn, l.tile, l.A, l.lda, l.B, l.ldb, l.abtype, l.p, l.out, l.ep, l.ctas);
}

} // namespace sm90
} // namespace odlk
