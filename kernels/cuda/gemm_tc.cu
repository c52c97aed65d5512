/* TF32 and BF16 GEMM on tensor cores: odl_backend.gemm_lowp of the CUDA backend (odl/backend.h; CPU twin:
 * kernels/cpu/gemm_lowp.c). C = act(alpha * op(A) op(B) + beta * C + bias) + residual, row-major float32
 * storage, every trans_a / trans_b combination, any M, N, K and leading dimensions.
 *
 * Block tile BM x BN x BK = 32, a STAGES-deep cp.async pipeline of float32 tiles in shared memory (16-byte
 * copies when A and B are 16-byte aligned with leading dimensions divisible by 4, zero-filled past the
 * matrix edges; 4-byte copies otherwise). Each warp owns MT x NT mma tiles of 16 x 8 and reads its
 * fragments from shared memory, rounding each float32 on the way to TF32 (round to nearest even, the
 * rule of odl_round_mantissa, so that both backends multiply the same numbers) or converting pairs to
 * bfloat16x2 (__floats2bfloat162_rn, also nearest even), then
 *   tf32: mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32   (PTX ISA, "Matrix fragments for mma.m16n8k8")
 *   bf16: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32  ("Matrix fragments for mma.m16n8k16")
 * with float32 accumulation. Shared memory keeps each operand in its global layout (k-contiguous rows
 * [rows][BK + 8], or rows-contiguous [BK][rows + 4]); the paddings make the fragment reads conflict-free
 * (float2 reads of (row g, k 2t..2t+1) and scalar reads of (k 2t, row g), g = lane / 4, t = lane % 4).
 * Since the mma sums over its k slots in any pairing of A and B, the TF32 path maps its k slots t and t+4
 * to the physical k 2t and 2t+1, so that the k-contiguous fragments are float2 reads as in BF16.
 * ldmatrix does not apply: the tiles hold float32 that are rounded in registers.
 * Epilogue (gemm_core.cuh's epi_store1) in float32 from the accumulators; products whose tiles cannot
 * fill the device split K, and the slices are added in a fixed order by splitk_reduce (deterministic).
 * Limits: M, N, K < 2^31 (ODL_E_UNSUPPORTED otherwise).
 */
#include <limits.h>

#include "gemm_tc.cuh"

namespace odlk {
namespace tc {

static const char *const kTcNames[kTcCount] = {"tc 128x128x32/256t 4 stages", "tc 64x64x32/128t 3 stages"};

static int64_t cdiv64(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* The tile: 128 x 128 once its tiles fill every multiprocessor, else 64 x 64. */
static int tc_plan_cfg(int64_t M, int64_t N) { return cdiv64(M, 128) * cdiv64(N, 128) >= sm_count() ? kTcBig : kTcSmall; }

/* Split-K factor: enough k slices that the tiles fill the resident block slots (two waves of 64 x 64
 * blocks), each slice at least 256 deep, at most 32; 1 when the tiles fill the device already. */
static int tc_plan_splits(int cfg, int64_t M, int64_t N, int64_t K) {
    const int64_t bm = cfg == kTcBig ? 128 : 64, tiles = cdiv64(M, bm) * cdiv64(N, bm);
    const int64_t sms = sm_count();
    if (tiles >= sms || K < 512) return 1;
    int64_t s = 2 * sms / tiles;
    if (s > K / 256) s = K / 256;
    if (s > 32) s = 32;
    while (s > 1 && (s * M * N > INT_MAX || s * M * N * 4 > (int64_t)256 << 20)) s--;
    return s < 1 ? 1 : (int)s;
}

static odl_status gemm_tc(const odl_gemm_args *g, odl_precision prec, int cfg, int splits) {
    if (prec == ODL_PRECISION_FP32) return odl_cuda_gemm(g);
    if (prec != ODL_PRECISION_TF32 && prec != ODL_PRECISION_BF16)
        return ODL_ERR(ODL_E_INVAL, "gemm_lowp: unknown precision %d", (int)prec);
    if (g->M <= 0 || g->N <= 0) return ODL_OK;
    if (g->M > INT_MAX || g->N > INT_MAX || g->K > INT_MAX || g->K < 0)
        return ODL_ERR(ODL_E_UNSUPPORTED, "gemm_lowp: M=%lld N=%lld K=%lld exceeds the CUDA backend's int range",
                       (long long)g->M, (long long)g->N, (long long)g->K);
    if (cfg < 0 || cfg >= kTcCount) cfg = tc_plan_cfg(g->M, g->N);
    if (splits <= 0) splits = tc_plan_splits(cfg, g->M, g->N, g->K);
    if ((int64_t)splits * g->M * g->N > INT_MAX) splits = 1;
    TcParams p;
    p.A = g->A;
    p.B = g->B;
    p.lda = g->lda;
    p.ldb = g->ldb;
    p.M = (int)g->M;
    p.N = (int)g->N;
    p.K = (int)g->K;
    p.group_m = 8;
    /* slices of whole kBK steps; the count of non-empty ones */
    p.k_chunk = (int)(cdiv64(cdiv64(p.K > 0 ? p.K : 1, splits), kBK) * kBK);
    splits = p.K > 0 ? (int)cdiv64(p.K, p.k_chunk) : 1;
    const bool vec = aligned16(g->A) && aligned16(g->B) && g->lda % 4 == 0 && g->ldb % 4 == 0;
    const bool bf16 = prec == ODL_PRECISION_BF16;
    const Epi ep = epi_of(g);
    OutRowMajor out;
    out.C = g->C;
    out.ldc = g->ldc;
    out.zstride = 0;
    out.vec = false;
    const bool ta = g->trans_a != 0, tb = g->trans_b != 0;
    if (splits == 1)
        return bf16 ? run_tc_bf16(cfg, p, ta, tb, vec, out, ep, 1, kTcNames[cfg])
                    : run_tc_tf32(cfg, p, ta, tb, vec, out, ep, 1, kTcNames[cfg]);
    void *ws = nullptr;
    ODL_CHECK(workspace((size_t)splits * (size_t)p.M * (size_t)p.N * sizeof(float), &ws));
    OutRowMajor part;
    part.C = (float *)ws;
    part.ldc = p.N;
    part.zstride = (int64_t)p.M * p.N;
    part.vec = false;
    ODL_CHECK(bf16 ? run_tc_bf16(cfg, p, ta, tb, vec, part, epi_raw(), splits, kTcNames[cfg])
                   : run_tc_tf32(cfg, p, ta, tb, vec, part, epi_raw(), splits, kTcNames[cfg]));
    return splitk_reduce(part, splits, p.M, p.N, out, ep, "odl_gemm_tc_splitk_reduce");
}

} // namespace tc
} // namespace odlk

extern "C" odl_status odl_cuda_gemm_lowp(const odl_gemm_args *a, odl_precision prec) {
    return odlk::tc::gemm_tc(a, prec, -1, 0);
}

extern "C" odl_status odl_cuda_gemm_lowp_ex(const odl_gemm_args *a, odl_precision prec, int cfg, int splits) {
    return odlk::tc::gemm_tc(a, prec, cfg, splits);
}

extern "C" int odl_cuda_gemm_lowp_num_configs(void) { return odlk::tc::kTcCount; }

extern "C" const char *odl_cuda_gemm_lowp_config_name(int cfg) {
    return cfg >= 0 && cfg < odlk::tc::kTcCount ? odlk::tc::kTcNames[cfg] : "auto";
}
