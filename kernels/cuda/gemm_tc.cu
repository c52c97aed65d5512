/* TF32 and BF16 GEMM on tensor cores: odl_backend.gemm_lowp of the CUDA backend (odl/backend.h; CPU twin:
 * kernels/cpu/gemm_lowp.c). C = act(alpha * op(A) op(B) + beta * C + bias) + residual, row-major float32
 * storage, every trans_a / trans_b combination, any M, N, K and leading dimensions.
 *
 * Two kernels per call (three with split-K):
 *   1. pack_kernel rounds each operand once and lays it out K-major: A' [Mp, Kp] = round(op(A)) and
 *      B' [Np, Kp] = round(op(B)^T) in the backend's workspace, zero-padded to whole tiles (Mp, Np multiples
 *      of the block tile, Kp of one 128-byte pipeline stage), through a 32 x 32 shared-memory transpose
 *      when the operand is not K-contiguous. Rounding: TF32 to nearest even on the float32 bits (the rule of
 *      odl_round_mantissa, odl/precision.h), kept as float32; BF16 with __float2bfloat16_rn (nearest even).
 *      As torch.autocast casts a matmul's inputs to bfloat16 before cuBLAS, this costs one pass over A and B
 *      and buys a main loop with no bounds checks, no conversions and a single layout.
 *   2. gemm_tc_kernel: block tile BM x BN, STAGES-deep cp.async pipeline of 128-byte K slices (64 bf16 or
 *      32 tf32 per row) in shared memory, rows padded to 144 bytes so that ldmatrix reads are conflict-free;
 *      warps of MT x NT mma tiles of 16 x 8, fragments by ldmatrix.x4 (for TF32 the 8 x 8 b16 matrices are
 *      8 x 4 tf32, which is exactly the m16n8k8 tf32 fragment layout), then
 *        tf32: mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32  (PTX ISA, "Matrix fragments for mma.m16n8k8")
 *        bf16: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 ("Matrix fragments for mma.m16n8k16")
 *      with float32 accumulation; the byte layout of a 32-byte k step is the same in both precisions, only
 *      the mma differs. Epilogue (gemm_core.cuh's epi_store1) in float32 from the accumulators.
 *   3. split-K: products whose tiles cannot fill the device split the K slices; splitk_reduce adds the
 *      partial sums in a fixed order and applies the epilogue (deterministic).
 * Limits: M, N, K < 2^31 (ODL_E_UNSUPPORTED otherwise); the workspace holds (Mp + Np) * Kp rounded values.
 */
#include <cuda_bf16.h>
#include <limits.h>
#include <string.h>

#include <atomic>

#include "gemm_core.cuh"
#include "gemm_sm90.h"
#include "gemm_typed.cuh"
#include "kernels/gemm_args.h"
#include "mma_util.cuh"

namespace odlk {
namespace tc {
namespace {

constexpr int kStageBytes = 128;            /* K bytes of one pipeline stage, per row */
constexpr int kLdsBytes = kStageBytes + 16; /* shared-memory row: 144 bytes, ldmatrix conflict-free */

/* out[r, k] (row stride Kp) = round(op(X)[r, k]) for r < R, k < K, 0 for R <= r < Rp or K <= k < Kp.
 * KC: X[r * ld + k] (k contiguous); otherwise X[k * ld + r]. Blocks of 32 x 8 threads, one 32 x 32 tile
 * each (rows on grid.x, k tiles strided over grid.y). */
template <bool BF16, bool KC, bool TRUNC>
__global__ void __launch_bounds__(256) pack_kernel(const float *__restrict__ X, int64_t ld, int R, int K, int Kp,
                                                   void *__restrict__ out) {
    __shared__ float tile[32][33];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int r0 = blockIdx.x * 32;
    for (int k0 = blockIdx.y * 32; k0 < Kp; k0 += gridDim.y * 32) {
#pragma unroll
        for (int j = ty; j < 32; j += 8) {
            if (KC) {
                const int r = r0 + j, k = k0 + tx;
                tile[j][tx] = r < R && k < K ? X[(int64_t)r * ld + k] : 0.0f;
            } else {
                const int k = k0 + j, r = r0 + tx;
                tile[tx][j] = r < R && k < K ? X[(int64_t)k * ld + r] : 0.0f;
            }
        }
        __syncthreads();
#pragma unroll
        for (int j = ty; j < 32; j += 8) {
            const int64_t o = (int64_t)(r0 + j) * Kp + k0 + tx;
            const float v = tile[j][tx];
            if (BF16)
                static_cast<__nv_bfloat16 *>(out)[o] = __float2bfloat16_rn(v);
            else
                static_cast<float *>(out)[o] = TRUNC ? __uint_as_float(__float_as_uint(v) & 0xffffe000u) : round_tf32_rne(v);
        }
        __syncthreads();
    }
}

/* BM x BN block of WARPS_M x WARPS_N warps, STAGES pipeline stages, MINB blocks per multiprocessor. */
template <int BM_, int BN_, int WARPS_M_, int WARPS_N_, int STAGES_, int MINB_>
struct TcCfg {
    static constexpr int BM = BM_, BN = BN_, WARPS_M = WARPS_M_, WARPS_N = WARPS_N_;
    static constexpr int STAGES = STAGES_, MINB = MINB_;
    static constexpr int THREADS = WARPS_M * WARPS_N * 32;
    static constexpr int MT = BM / WARPS_M / 16, NT = BN / WARPS_N / 8;
    static constexpr int STAGE_BYTES = (BM + BN) * kLdsBytes;
    static constexpr int SMEM_BYTES = STAGES * STAGE_BYTES;
    static_assert(MT * 16 * WARPS_M == BM && NT * 8 * WARPS_N == BN, "warps must tile the block");
    static_assert(NT % 2 == 0, "B fragments load two n tiles per ldmatrix.x4");
    static_assert((BM * 8) % THREADS == 0 && (BN * 8) % THREADS == 0, "16-byte chunks divide among threads");
};
using TcBig = TcCfg<128, 256, 2, 4, 3, 1>;  /* 256 threads, warp tile 64 x 64, 166 KB shared memory */
using TcBig4 = TcCfg<128, 256, 2, 4, 4, 1>; /* the same with 4 stages, 221 KB */
using TcMid = TcCfg<128, 128, 2, 2, 3, 2>;  /* 128 threads, warp tile 64 x 64, 111 KB: two blocks per SM */
using TcSmall = TcCfg<64, 64, 2, 2, 4, 2>;  /* 128 threads, warp tile 32 x 32, 74 KB */
enum { kTcBig = 0, kTcBig4, kTcMid, kTcSmall, kTcCount };
const char *const kTcNames[kTcCount] = {"tc 128x256/256t 3 stages", "tc 128x256/256t 4 stages",
                                        "tc 128x128/128t 3 stages", "tc 64x64/128t 4 stages"};
const int kTcBM[kTcCount] = {TcBig::BM, TcBig4::BM, TcMid::BM, TcSmall::BM};
const int kTcBN[kTcCount] = {TcBig::BN, TcBig4::BN, TcMid::BN, TcSmall::BN};

struct TcParams {
    const unsigned char *A, *B; /* packed [Mp, Kp] and [Np, Kp] */
    int64_t ld;                 /* row stride of both, bytes (Kp * element size) */
    int M, N;
    int kstages; /* Kp * element size / kStageBytes */
    int k_chunk; /* stages per split */
    int group_m;
};

template <bool BF16, class Cfg>
__global__ void __launch_bounds__(Cfg::THREADS, Cfg::MINB) gemm_tc_kernel(const TcParams p, OutRowMajor out, Epi ep) {
    constexpr int BM = Cfg::BM, BN = Cfg::BN, MT = Cfg::MT, NT = Cfg::NT, STAGES = Cfg::STAGES;
    extern __shared__ __align__(128) unsigned char smem[];

    /* grouped tile order (Triton's): group_m tile rows walk the columns together, sharing B panels in L2 */
    const int tiles_m = (p.M + BM - 1) / BM, tiles_n = (p.N + BN - 1) / BN;
    const int pid = blockIdx.x, width = p.group_m * tiles_n;
    const int first_m = (pid / width) * p.group_m;
    const int gsz = min(tiles_m - first_m, p.group_m);
    const int m0 = (first_m + (pid % width) % gsz) * BM;
    const int n0 = ((pid % width) / gsz) * BN;
    const int s0 = (int)blockIdx.z * p.k_chunk;
    const int KT = max(0, min(p.kstages, s0 + p.k_chunk) - s0);

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm0 = (warp % Cfg::WARPS_M) * MT * 16, wn0 = (warp / Cfg::WARPS_M) * NT * 8;
    const unsigned char *gA = p.A + (int64_t)m0 * p.ld + (int64_t)s0 * kStageBytes;
    const unsigned char *gB = p.B + (int64_t)n0 * p.ld + (int64_t)s0 * kStageBytes;

    auto load = [&](int stage, int kt) {
        unsigned char *sA = smem + stage * Cfg::STAGE_BYTES, *sB = sA + BM * kLdsBytes;
        const int64_t koff = (int64_t)kt * kStageBytes;
#pragma unroll
        for (int c = 0; c < BM * 8 / Cfg::THREADS; c++) {
            const int i = tid + c * Cfg::THREADS; /* row i / 8, 16-byte chunk i % 8 */
            cp_async16(smem_u32(sA + (i >> 3) * kLdsBytes + (i & 7) * 16), gA + (i >> 3) * p.ld + koff + (i & 7) * 16);
        }
#pragma unroll
        for (int c = 0; c < BN * 8 / Cfg::THREADS; c++) {
            const int i = tid + c * Cfg::THREADS;
            cp_async16(smem_u32(sB + (i >> 3) * kLdsBytes + (i & 7) * 16), gB + (i >> 3) * p.ld + koff + (i & 7) * 16);
        }
    };

    float acc[MT][NT][4];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int i = 0; i < 4; i++) acc[mt][nt][i] = 0.0f;

    /* per-lane ldmatrix offsets: A rows lane % 16, 16-byte chunk lane / 16 (matrices a0..a3); B rows
     * lane % 8 + 8 * (lane / 16), chunk (lane / 8) % 2 (b0, b1 of two n tiles) */
    const int a_off = (wm0 + (lane & 15)) * kLdsBytes + (lane >> 4) * 16;
    const int b_off = BM * kLdsBytes + (wn0 + (lane & 7) + ((lane >> 4) << 3)) * kLdsBytes + ((lane >> 3) & 1) * 16;

#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        if (s < KT) load(s, s);
        cp_async_commit();
    }
    for (int kt = 0; kt < KT; kt++) {
        cp_async_wait<STAGES - 2>(); /* stage kt has landed (for this thread) ... */
        __syncthreads();             /* ... for every thread, and stage kt - 1 is no longer read */
        const int next = kt + STAGES - 1;
        if (next < KT) load(next % STAGES, next);
        cp_async_commit();
        const uint32_t base = smem_u32(smem + (kt % STAGES) * Cfg::STAGE_BYTES);
#pragma unroll
        for (int ks = 0; ks < kStageBytes; ks += 32) { /* one k16 bf16 / k8 tf32 mma step */
            uint32_t a[MT][4], b[NT][2];
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
                ldmatrix_x4(base + a_off + mt * 16 * kLdsBytes + ks, a[mt][0], a[mt][1], a[mt][2], a[mt][3]);
#pragma unroll
            for (int nt = 0; nt < NT; nt += 2)
                ldmatrix_x4(base + b_off + nt * 8 * kLdsBytes + ks, b[nt][0], b[nt][1], b[nt + 1][0], b[nt + 1][1]);
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int nt = 0; nt < NT; nt++)
                    mma_16x8<BF16 ? MmaIn::BF16 : MmaIn::TF32>(acc[mt][nt], a[mt], b[nt][0], b[nt][1]);
        }
    }
    cp_async_wait<0>();

    out.select_split(blockIdx.z);
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int m = m0 + wm0 + mt * 16 + g + (i >> 1) * 8;
                const int n = n0 + wn0 + nt * 8 + 2 * t + (i & 1);
                if (m < p.M && n < p.N) epi_store1(out, ep, m, n, acc[mt][nt][i]);
            }
}

template <bool BF16, class Cfg>
odl_status launch_tc(const TcParams &p, const OutRowMajor &out, const Epi &ep, int splits, const char *what) {
    auto kern = gemm_tc_kernel<BF16, Cfg>;
    static std::atomic<unsigned long long> opted{0};
    ODL_CHECK(opt_in_smem(kern, Cfg::SMEM_BYTES, opted));
    const int tiles = ((p.M + Cfg::BM - 1) / Cfg::BM) * ((p.N + Cfg::BN - 1) / Cfg::BN);
    kern<<<dim3((unsigned)tiles, 1, (unsigned)splits), Cfg::THREADS, Cfg::SMEM_BYTES, stream()>>>(p, out, ep);
    ODL_CUDA_LAUNCH_CHECK(what);
    return ODL_OK;
}

template <bool BF16>
odl_status run_tc(int cfg, const TcParams &p, const OutRowMajor &out, const Epi &ep, int splits) {
    switch (cfg) {
    case kTcBig: return launch_tc<BF16, TcBig>(p, out, ep, splits, kTcNames[cfg]);
    case kTcBig4: return launch_tc<BF16, TcBig4>(p, out, ep, splits, kTcNames[cfg]);
    case kTcMid: return launch_tc<BF16, TcMid>(p, out, ep, splits, kTcNames[cfg]);
    default: return launch_tc<BF16, TcSmall>(p, out, ep, splits, kTcNames[cfg]);
    }
}

/* round(op(X)) K-major into out [Rp, Kp] (see pack_kernel); kc: X is K-contiguous. TF32 rounds as the
 * device's wgmma path does (odl_cuda_tf32_rounding): toward zero on compute capability 9.0, so that a
 * product gives the same numbers whichever kernel its alignment sends it to. */
odl_status pack(bool bf16, bool kc, const float *X, int64_t ld, int R, int K, int Rp, int Kp, void *out) {
    const dim3 block(32, 8), grid((unsigned)(Rp / 32), (unsigned)min(Kp / 32, 4096));
    const bool trunc = !bf16 && sm90::available();
    if (bf16 && kc) pack_kernel<true, true, false><<<grid, block, 0, stream()>>>(X, ld, R, K, Kp, out);
    else if (bf16) pack_kernel<true, false, false><<<grid, block, 0, stream()>>>(X, ld, R, K, Kp, out);
    else if (kc && trunc) pack_kernel<false, true, true><<<grid, block, 0, stream()>>>(X, ld, R, K, Kp, out);
    else if (kc) pack_kernel<false, true, false><<<grid, block, 0, stream()>>>(X, ld, R, K, Kp, out);
    else if (trunc) pack_kernel<false, false, true><<<grid, block, 0, stream()>>>(X, ld, R, K, Kp, out);
    else pack_kernel<false, false, false><<<grid, block, 0, stream()>>>(X, ld, R, K, Kp, out);
    ODL_CUDA_LAUNCH_CHECK("odl_gemm_tc_pack");
    return ODL_OK;
}

int64_t cdiv64(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t round_up(int64_t a, int64_t b) { return cdiv64(a, b) * b; }
int64_t tiles_of(int cfg, int64_t M, int64_t N) { return cdiv64(M, kTcBM[cfg]) * cdiv64(N, kTcBN[cfg]); }

/* The tile: 128 x 128 (two blocks per multiprocessor) once its tiles fill the multiprocessors, else
 * 64 x 64. Measured on an H200 at 4096^3 (bench/results/2026-12-01/tc/run3): 128 x 128 / 2 per SM 973 us
 * tf32, 559 us bf16; 128 x 256 with 3 stages 1129 / 639, with 4 stages 1096 / 653; 64 x 64 1519 / 804. */
int tc_plan_cfg(int64_t M, int64_t N) { return tiles_of(kTcMid, M, N) >= sm_count() ? kTcMid : kTcSmall; }

/* Split-K factor over `kstages` 128-byte K slices: enough splits that the tiles fill the resident block
 * slots twice, each split at least 4 slices, at most 32; 1 when the tiles fill the device already. */
int tc_plan_splits(int cfg, int64_t M, int64_t N, int64_t kstages) {
    const int64_t tiles = tiles_of(cfg, M, N), sms = sm_count();
    if (tiles >= sms || kstages < 8) return 1;
    int64_t s = 2 * sms / tiles;
    if (s > kstages / 4) s = kstages / 4;
    if (s > 32) s = 32;
    while (s > 1 && (s * M * N > INT_MAX || s * M * N * 4 > (int64_t)256 << 20)) s--;
    return s < 1 ? 1 : (int)s;
}

/* The product of g on compute capability 9.0 (gemm_sm90.cu) with wgmma tile `tile` (-1: the plan's):
 * TF32 straight from the float32 operands, BF16 after the pack into K-major bfloat16 copies (as on other
 * GPUs). ODL_E_UNSUPPORTED where the wgmma kernels do not apply. */
odl_status gemm_tc_sm90(const odl_gemm_args *g, bool bf16, int tile, int splits) {
    odl_gemm_typed_args a = odl_gemm_typed_of(g);
    if (!bf16) return sm90::gemm(a, tile, splits);
    if (g->M > INT_MAX || g->N > INT_MAX || g->K > INT_MAX || g->K <= 0)
        return ODL_ERR(ODL_E_UNSUPPORTED, "gemm_sm90: M=%lld N=%lld K=%lld", (long long)g->M, (long long)g->N,
                       (long long)g->K);
    /* A' [Mp, Kp] = bf16(op(A)), B' [Np, Kp] = bf16(op(B)^T), rows 128-byte multiples */
    const int64_t Kp = round_up(g->K, kStageBytes / 2), Mp = round_up(g->M, 32), Np = round_up(g->N, 32);
    const size_t bytes_a = (size_t)round_up(Mp * Kp * 2, 256), bytes_b = (size_t)round_up(Np * Kp * 2, 256);
    a.ab_type = ODL_BF16;
    a.trans_a = 0;
    a.trans_b = 1;
    a.lda = a.ldb = Kp;
    a.A = a.B = g->C; /* stand-ins with the packed copies' alignment, for the plan below */
    void *ws = nullptr;
    ODL_CHECK(workspace(bytes_a + bytes_b + sm90::workspace_need(a, tile, splits), &ws));
    unsigned char *wa = (unsigned char *)ws, *wb = wa + bytes_a;
    ODL_CHECK(pack(true, !g->trans_a, g->A, g->lda, (int)g->M, (int)g->K, (int)Mp, (int)Kp, wa));
    ODL_CHECK(pack(true, g->trans_b != 0, g->B, g->ldb, (int)g->N, (int)g->K, (int)Np, (int)Kp, wb));
    a.A = wa;
    a.B = wb;
    return sm90::gemm(a, tile, splits, bytes_a + bytes_b);
}

odl_status gemm_tc(const odl_gemm_args *g, odl_precision prec, int cfg, int splits) {
    if (prec == ODL_PRECISION_FP32) return odl_cuda_gemm(g);
    if (prec != ODL_PRECISION_TF32 && prec != ODL_PRECISION_BF16)
        return ODL_ERR(ODL_E_INVAL, "gemm_lowp: unknown precision %d", (int)prec);
    if (g->M <= 0 || g->N <= 0) return ODL_OK;
    /* configurations kTcCount.. are the wgmma tiles; -1 takes them first on a 9.0 device */
    if (cfg >= kTcCount || (cfg < 0 && sm90::available())) {
        const odl_status st = gemm_tc_sm90(g, prec == ODL_PRECISION_BF16, cfg >= kTcCount ? cfg - kTcCount : -1, splits);
        if (st != ODL_E_UNSUPPORTED || cfg >= kTcCount) return st;
        odl_error_clear();
    }
    if (g->M > INT_MAX || g->N > INT_MAX || g->K > INT_MAX || g->K < 0)
        return ODL_ERR(ODL_E_UNSUPPORTED, "gemm_lowp: M=%lld N=%lld K=%lld exceeds the CUDA backend's int range",
                       (long long)g->M, (long long)g->N, (long long)g->K);
    const bool bf16 = prec == ODL_PRECISION_BF16;
    const int esz = bf16 ? 2 : 4;
    if (cfg < 0 || cfg >= kTcCount) cfg = tc_plan_cfg(g->M, g->N);
    const int64_t Kp = round_up(g->K > 0 ? g->K : 1, kStageBytes / esz);
    const int64_t kstages = Kp * esz / kStageBytes;
    const int64_t Mp = round_up(g->M, kTcBM[cfg]), Np = round_up(g->N, kTcBN[cfg]);
    if (splits <= 0) splits = tc_plan_splits(cfg, g->M, g->N, kstages);
    if ((int64_t)splits * g->M * g->N > INT_MAX) splits = 1;
    TcParams p;
    p.ld = Kp * esz;
    p.M = (int)g->M;
    p.N = (int)g->N;
    p.kstages = (int)kstages;
    p.k_chunk = (int)cdiv64(kstages, splits);
    p.group_m = 8;
    splits = (int)cdiv64(kstages, p.k_chunk);

    /* workspace: packed A', packed B', then the split-K partial sums (each region 256-byte aligned) */
    const size_t bytes_a = (size_t)round_up(Mp * Kp * esz, 256), bytes_b = (size_t)round_up(Np * Kp * esz, 256);
    const size_t bytes_part = splits > 1 ? (size_t)splits * (size_t)p.M * (size_t)p.N * sizeof(float) : 0;
    void *ws = nullptr;
    ODL_CHECK(workspace(bytes_a + bytes_b + bytes_part, &ws));
    unsigned char *wa = (unsigned char *)ws, *wb = wa + bytes_a;
    const bool ta = g->trans_a != 0, tb = g->trans_b != 0;
    /* op(A) [M, K] is K-contiguous unless transposed; op(B)^T [N, K] is K-contiguous when B is transposed */
    ODL_CHECK(pack(bf16, !ta, g->A, g->lda, p.M, (int)g->K, (int)Mp, (int)Kp, wa));
    ODL_CHECK(pack(bf16, tb, g->B, g->ldb, p.N, (int)g->K, (int)Np, (int)Kp, wb));
    p.A = wa;
    p.B = wb;

    const Epi ep = epi_of(g);
    OutRowMajor out;
    out.C = g->C;
    out.ldc = g->ldc;
    out.zstride = 0;
    out.vec = false;
    if (splits == 1) return bf16 ? run_tc<true>(cfg, p, out, ep, 1) : run_tc<false>(cfg, p, out, ep, 1);
    OutRowMajor part;
    part.C = (float *)(wb + bytes_b);
    part.ldc = p.N;
    part.zstride = (int64_t)p.M * p.N;
    part.vec = false;
    ODL_CHECK(bf16 ? run_tc<true>(cfg, p, part, epi_raw(), splits) : run_tc<false>(cfg, p, part, epi_raw(), splits));
    return splitk_reduce(part, splits, p.M, p.N, out, ep, "odl_gemm_tc_splitk_reduce");
}

} // namespace
} // namespace tc

__global__ void splitk_reduce_typed_kernel(const float *__restrict__ part, int splits, int M, int N, FastDiv fN,
                                           TypedOut o, Epi ep) {
    const int total = M * N;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
        int m, n;
        fN.divmod(i, m, n);
        const float s = sum_splits(part + i, total, splits);
        if (o.ctype == GEMM_T_BF16) store1<__nv_bfloat16>(o, ep, m, n, s);
        else if (o.ctype == GEMM_T_F16) store1<__half>(o, ep, m, n, s);
        else store1<float>(o, ep, m, n, s);
    }
}

odl_status splitk_reduce_typed(const float *part, int splits, int M, int N, void *C, int64_t ldc, int c_type,
                               const Epi &ep) {
    TypedOut o;
    o.C = C;
    o.ldc = ldc;
    o.zstride = 0;
    o.ctype = c_type;
    o.vec = false;
    const int threads = 256;
    splitk_reduce_typed_kernel<<<grid_for((int64_t)M * N, threads), threads, 0, stream()>>>(part, splits, M, N,
                                                                                           FastDiv(N), o, ep);
    ODL_CUDA_LAUNCH_CHECK("odl_gemm_typed_reduce");
    return ODL_OK;
}

namespace tc {
namespace {

template <class T> __global__ void to_f32_kernel(const T *__restrict__ x, int64_t n, float *__restrict__ y) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        y[i] = (float)x[i];
}

/* odl_backend.gemm_typed where the wgmma kernels do not apply: float32 copies of bfloat16 / float16
 * operands (exact, and exact again in TF32: 7 and 10 mantissa bits fit TF32's 10), their product on the
 * TF32 tensor-core kernels into a float32 buffer, then the typed epilogue. Slow but rare: GPUs other than
 * compute capability 9.0, misaligned operands. */
odl_status gemm_typed_fallback(const odl_gemm_typed_args *t) {
    int dev = 0;
    ODL_CUDA_CALL(cudaGetDevice(&dev));
    const odl_device d = odl_cuda(dev);
    const bool ta = t->trans_a != 0, tb = t->trans_b != 0;
    /* the stored extents: A is [M or K rows, lda], B [K or N rows, ldb] */
    const int64_t na = (ta ? t->K : t->M) * t->lda, nb = (tb ? t->N : t->K) * t->ldb;
    const bool conv = t->ab_type != ODL_F32;
    const size_t bytes = ((conv ? (size_t)(na + nb) : 0) + (size_t)(t->M * t->N)) * sizeof(float);
    void *buf = nullptr;
    ODL_CHECK(odl_mem_alloc(d, bytes, &buf));
    float *fa = (float *)buf, *fb = conv ? fa + na : nullptr, *prod = conv ? fb + nb : fa;
    odl_status st = ODL_OK;
    if (conv) {
        const unsigned grid = grid_for(na > nb ? na : nb, 256);
        if (t->ab_type == ODL_BF16) {
            to_f32_kernel<<<grid, 256, 0, stream()>>>((const __nv_bfloat16 *)t->A, na, fa);
            to_f32_kernel<<<grid, 256, 0, stream()>>>((const __nv_bfloat16 *)t->B, nb, fb);
        } else {
            to_f32_kernel<<<grid, 256, 0, stream()>>>((const __half *)t->A, na, fa);
            to_f32_kernel<<<grid, 256, 0, stream()>>>((const __half *)t->B, nb, fb);
        }
        const cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) st = ODL_ERR(ODL_E_CUDA, "odl_gemm_typed_convert: %s", cudaGetErrorString(e));
    }
    if (st == ODL_OK) {
        const odl_gemm_args g = odl_gemm_raw_of_typed(t, conv ? fa : (const float *)t->A,
                                                      conv ? fb : (const float *)t->B, prod, t->N);
        st = gemm_tc(&g, ODL_PRECISION_TF32, -1, 0);
    }
    if (st == ODL_OK) {
        const Epi ep = epi_of(t);
        st = splitk_reduce_typed(prod, 1, (int)t->M, (int)t->N, t->C, t->ldc, t->c_type, ep);
    }
    odl_mem_free(d, buf); /* the pool orders the reuse after the kernels on this stream */
    return st;
}

} // namespace
} // namespace tc
} // namespace odlk

extern "C" odl_status odl_cuda_gemm_typed(const odl_gemm_typed_args *a) {
    if (a->M <= 0 || a->N <= 0) return ODL_OK;
    if ((a->ab_type != ODL_F32 && a->ab_type != ODL_BF16 && a->ab_type != ODL_F16) ||
        (a->c_type != ODL_F32 && a->c_type != ODL_BF16 && a->c_type != ODL_F16))
        return ODL_ERR(ODL_E_INVAL, "gemm_typed: dtypes %s x %s -> %s (operands float32, bfloat16 or float16; C the same)",
                       odl_dtype_name(a->ab_type), odl_dtype_name(a->ab_type), odl_dtype_name(a->c_type));
    if (a->ep.residual && a->c_type != ODL_F32)
        return ODL_ERR(ODL_E_INVAL, "gemm_typed: a residual needs a float32 C (C is %s)", odl_dtype_name(a->c_type));
    if (a->M > INT_MAX || a->N > INT_MAX || a->K > INT_MAX || a->K < 0)
        return ODL_ERR(ODL_E_UNSUPPORTED, "gemm_typed: M=%lld N=%lld K=%lld exceeds the CUDA backend's int range",
                       (long long)a->M, (long long)a->N, (long long)a->K);
    const odl_status st = odlk::sm90::gemm(*a, -1, 0);
    if (st != ODL_E_UNSUPPORTED) return st;
    odl_error_clear();
    return odlk::tc::gemm_typed_fallback(a);
}

extern "C" odl_status odl_cuda_gemm_lowp(const odl_gemm_args *a, odl_precision prec) {
    return odlk::tc::gemm_tc(a, prec, -1, 0);
}

extern "C" odl_status odl_cuda_gemm_lowp_ex(const odl_gemm_args *a, odl_precision prec, int cfg, int splits) {
    return odlk::tc::gemm_tc(a, prec, cfg, splits);
}

extern "C" int odl_cuda_gemm_lowp_num_configs(void) { return odlk::tc::kTcCount + odlk::sm90::num_tiles(); }

extern "C" const char *odl_cuda_gemm_lowp_config_name(int cfg) {
    if (cfg >= odlk::tc::kTcCount) return odlk::sm90::tile_name(cfg - odlk::tc::kTcCount);
    return cfg >= 0 ? odlk::tc::kTcNames[cfg] : "auto";
}

extern "C" odl_tf32_rounding odl_cuda_tf32_rounding(void) {
    return odlk::sm90::available() ? ODL_TF32_TOWARD_ZERO : ODL_TF32_NEAREST_EVEN;
}
