/* The TF32 / BF16 tensor-core GEMM kernel (see gemm_tc.cu for the design), shared by gemm_tc_tf32.cu and
 * gemm_tc_bf16.cu, which instantiate one precision each. */
#ifndef ODL_KERNELS_CUDA_GEMM_TC_CUH
#define ODL_KERNELS_CUDA_GEMM_TC_CUH

#include <cuda_bf16.h>
#include <limits.h>

#include <atomic>

#include "gemm_core.cuh"

namespace odlk {
namespace tc {

constexpr int kBK = 32;

static __device__ __forceinline__ uint32_t smem_addr(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

/* bytes < 16: the rest of the 16 is zero-filled (and nothing is read when 0) */
__device__ __forceinline__ void cp_async16(uint32_t dst, const void *src, int bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void cp_async4(uint32_t dst, const void *src, int bytes) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

/* odl_round_mantissa(x, 10) of odl/precision.h */
__device__ __forceinline__ uint32_t tf32_rne(float x) {
    uint32_t u = __float_as_uint(x);
    if ((u & 0x7f800000u) != 0x7f800000u) u += 0xfffu + ((u >> 13) & 1u);
    return u & 0xffffe000u;
}

__device__ __forceinline__ uint32_t bf16x2(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi); /* .x = lo in the low half */
    return *reinterpret_cast<uint32_t *>(&v);
}

__device__ __forceinline__ void mma_tf32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/* Shared-memory tile of one operand: ROWS (m for A, n for B) x kBK, in the operand's global layout. KC: k is
 * the contiguous index ([ROWS][kBK + 8]); otherwise rows are ([kBK][ROWS + 4]). */
template <int ROWS, bool KC>
struct SmemTile {
    static constexpr int LD = KC ? kBK + 8 : ROWS + 4;
    static constexpr int FLOATS = KC ? ROWS * LD : kBK * LD;
    static constexpr int OUTER = KC ? ROWS : kBK, INNER = KC ? kBK : ROWS;
    /* elements (r, k) and (r, k + 1), k even */
    static __device__ __forceinline__ float2 pair(const float *s, int r, int k) {
        if (KC) return *reinterpret_cast<const float2 *>(s + r * LD + k);
        return make_float2(s[k * LD + r], s[(k + 1) * LD + r]);
    }
    /* Copy the tile at (r0, k0) of the operand g (element (r, k) at g[r * ld + k] when KC, else
     * g[k * ld + r]) with rows < rlim and k < klim valid, zeros elsewhere. */
    template <int THREADS, bool VEC>
    static __device__ __forceinline__ void load(float *s, const float *g, int64_t ld, int r0, int rlim, int k0,
                                                int klim, int tid) {
        const int o0 = KC ? r0 : k0, olim = KC ? rlim : klim;
        const int i0 = KC ? k0 : r0, ilim = KC ? klim : rlim;
        if (VEC) {
            constexpr int CHUNKS = OUTER * INNER / 4;
            static_assert(CHUNKS % THREADS == 0, "16-byte chunks must divide among the threads");
#pragma unroll
            for (int c = 0; c < CHUNKS / THREADS; c++) {
                const int idx = tid + c * THREADS;
                const int o = idx / (INNER / 4), in = (idx % (INNER / 4)) * 4;
                const int go = o0 + o, gi = i0 + in;
                int bytes = 0;
                const float *src = g;
                if (go < olim && gi < ilim) {
                    bytes = min(4, ilim - gi) * 4;
                    src = g + (int64_t)go * ld + gi;
                }
                cp_async16(smem_addr(s + o * LD + in), src, bytes);
            }
        } else {
            constexpr int ELEMS = OUTER * INNER;
            static_assert(ELEMS % THREADS == 0, "elements must divide among the threads");
#pragma unroll 4
            for (int c = 0; c < ELEMS / THREADS; c++) {
                const int idx = tid + c * THREADS;
                const int o = idx / INNER, in = idx % INNER;
                const int go = o0 + o, gi = i0 + in;
                const bool ok = go < olim && gi < ilim;
                cp_async4(smem_addr(s + o * LD + in), ok ? g + (int64_t)go * ld + gi : g, ok ? 4 : 0);
            }
        }
    }
};

/* BM x BN block of WARPS_M x WARPS_N warps, STAGES pipeline stages, MINB blocks per multiprocessor. */
template <int BM_, int BN_, int WARPS_M_, int WARPS_N_, int STAGES_, int MINB_>
struct TcCfg {
    static constexpr int BM = BM_, BN = BN_, WARPS_M = WARPS_M_, WARPS_N = WARPS_N_;
    static constexpr int STAGES = STAGES_, MINB = MINB_;
    static constexpr int THREADS = WARPS_M * WARPS_N * 32;
    static constexpr int MT = BM / WARPS_M / 16, NT = BN / WARPS_N / 8;
    static_assert(MT * 16 * WARPS_M == BM && NT * 8 * WARPS_N == BN, "warps must tile the block");
};
using TcBig = TcCfg<128, 128, 2, 4, 4, 1>;  /* 256 threads, warp tile 64 x 32 */
using TcSmall = TcCfg<64, 64, 2, 2, 3, 3>;  /* 128 threads, warp tile 32 x 32 */
enum { kTcBig = 0, kTcSmall = 1, kTcCount };

struct TcParams {
    const float *A, *B;
    int64_t lda, ldb;
    int M, N, K;
    int k_chunk; /* depth of one split (multiple of kBK) */
    int group_m;
};

template <bool BF16, class Cfg, bool TA, bool TB>
struct TcLayout {
    using SA = SmemTile<Cfg::BM, !TA>; /* A[m * lda + k], or A[k * lda + m] transposed */
    using SB = SmemTile<Cfg::BN, TB>;  /* B[k * ldb + n], or B[n * ldb + k] transposed */
    static constexpr int STAGE_FLOATS = SA::FLOATS + SB::FLOATS;
    static constexpr int SMEM_BYTES = Cfg::STAGES * STAGE_FLOATS * 4;
};

/* acc += the warp's product over one shared-memory stage (kBK deep). */
template <bool BF16, class Cfg, class SA, class SB>
__device__ __forceinline__ void tc_stage(const float *sA, const float *sB, int wm0, int wn0, int lane,
                                         float (&acc)[Cfg::MT][Cfg::NT][4]) {
    constexpr int MT = Cfg::MT, NT = Cfg::NT;
    const int g = lane >> 2, t = lane & 3;
    constexpr int KSTEP = BF16 ? 16 : 8;
#pragma unroll
    for (int ks = 0; ks < kBK; ks += KSTEP) {
        uint32_t a[MT][4], b[NT][2];
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
            const int r = wm0 + mt * 16 + g;
            const float2 x0 = SA::pair(sA, r, ks + 2 * t), x1 = SA::pair(sA, r + 8, ks + 2 * t);
            if (BF16) {
                const float2 x2 = SA::pair(sA, r, ks + 8 + 2 * t), x3 = SA::pair(sA, r + 8, ks + 8 + 2 * t);
                a[mt][0] = bf16x2(x0.x, x0.y);
                a[mt][1] = bf16x2(x1.x, x1.y);
                a[mt][2] = bf16x2(x2.x, x2.y);
                a[mt][3] = bf16x2(x3.x, x3.y);
            } else { /* k slot t <- physical 2t, slot t + 4 <- 2t + 1 (the same mapping for B) */
                a[mt][0] = tf32_rne(x0.x);
                a[mt][1] = tf32_rne(x1.x);
                a[mt][2] = tf32_rne(x0.y);
                a[mt][3] = tf32_rne(x1.y);
            }
        }
#pragma unroll
        for (int nt = 0; nt < NT; nt++) {
            const int n = wn0 + nt * 8 + g;
            const float2 y0 = SB::pair(sB, n, ks + 2 * t);
            if (BF16) {
                const float2 y1 = SB::pair(sB, n, ks + 8 + 2 * t);
                b[nt][0] = bf16x2(y0.x, y0.y);
                b[nt][1] = bf16x2(y1.x, y1.y);
            } else {
                b[nt][0] = tf32_rne(y0.x);
                b[nt][1] = tf32_rne(y0.y);
            }
        }
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int nt = 0; nt < NT; nt++) {
                if (BF16)
                    mma_bf16(acc[mt][nt], a[mt], b[nt]);
                else
                    mma_tf32(acc[mt][nt], a[mt], b[nt]);
            }
    }
}

template <bool BF16, class Cfg, bool TA, bool TB, bool VEC>
__global__ void __launch_bounds__(Cfg::THREADS, Cfg::MINB) gemm_tc_kernel(const TcParams p, OutRowMajor out, Epi ep) {
    using L = TcLayout<BF16, Cfg, TA, TB>;
    using SA = typename L::SA;
    using SB = typename L::SB;
    constexpr int MT = Cfg::MT, NT = Cfg::NT, STAGES = Cfg::STAGES;
    extern __shared__ __align__(16) float smem[];

    /* grouped tile order (Triton's): group_m tile rows walk the columns together, sharing B panels in L2 */
    const int tiles_m = (p.M + Cfg::BM - 1) / Cfg::BM, tiles_n = (p.N + Cfg::BN - 1) / Cfg::BN;
    const int pid = blockIdx.x, width = p.group_m * tiles_n;
    const int first_m = (pid / width) * p.group_m;
    const int gsz = min(tiles_m - first_m, p.group_m);
    const int m0 = (first_m + (pid % width) % gsz) * Cfg::BM;
    const int n0 = ((pid % width) / gsz) * Cfg::BN;
    const int kb = (int)blockIdx.z * p.k_chunk;
    const int ke = min(p.K, kb + p.k_chunk);
    const int KT = ke > kb ? (ke - kb + kBK - 1) / kBK : 0;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm0 = (warp % Cfg::WARPS_M) * MT * 16, wn0 = (warp / Cfg::WARPS_M) * NT * 8;

    auto load = [&](int stage, int kt) {
        float *s = smem + stage * L::STAGE_FLOATS;
        const int k0 = kb + kt * kBK;
        SA::template load<Cfg::THREADS, VEC>(s, p.A, p.lda, m0, p.M, k0, ke, tid);
        SB::template load<Cfg::THREADS, VEC>(s + SA::FLOATS, p.B, p.ldb, n0, p.N, k0, ke, tid);
    };

    float acc[MT][NT][4];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int i = 0; i < 4; i++) acc[mt][nt][i] = 0.0f;

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
        const float *s = smem + (kt % STAGES) * L::STAGE_FLOATS;
        tc_stage<BF16, Cfg, SA, SB>(s, s + SA::FLOATS, wm0, wn0, lane, acc);
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

template <bool BF16, class Cfg, bool TA, bool TB, bool VEC>
static odl_status launch_tc(const TcParams &p, const OutRowMajor &out, const Epi &ep, int splits, const char *what) {
    constexpr int smem = TcLayout<BF16, Cfg, TA, TB>::SMEM_BYTES;
    auto kern = gemm_tc_kernel<BF16, Cfg, TA, TB, VEC>;
    /* the opt-in to more than 48 KB of dynamic shared memory, once per device */
    static std::atomic<unsigned long long> opted{0};
    int dev = 0;
    ODL_CUDA_CALL(cudaGetDevice(&dev));
    const unsigned long long bit = 1ull << (dev & 63);
    if (!(opted.load() & bit)) {
        ODL_CUDA_CALL(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        opted.fetch_or(bit);
    }
    const int tiles = ((p.M + Cfg::BM - 1) / Cfg::BM) * ((p.N + Cfg::BN - 1) / Cfg::BN);
    kern<<<dim3((unsigned)tiles, 1, (unsigned)splits), Cfg::THREADS, smem, stream()>>>(p, out, ep);
    ODL_CUDA_LAUNCH_CHECK(what);
    return ODL_OK;
}

template <bool BF16, class Cfg, bool TA, bool TB>
static odl_status run_tc3(const TcParams &p, bool vec, const OutRowMajor &out, const Epi &ep, int splits, const char *w) {
    return vec ? launch_tc<BF16, Cfg, TA, TB, true>(p, out, ep, splits, w)
               : launch_tc<BF16, Cfg, TA, TB, false>(p, out, ep, splits, w);
}

template <bool BF16, class Cfg>
static odl_status run_tc2(const TcParams &p, bool ta, bool tb, bool vec, const OutRowMajor &out, const Epi &ep, int splits,
                   const char *w) {
    if (!ta && !tb) return run_tc3<BF16, Cfg, false, false>(p, vec, out, ep, splits, w);
    if (!ta && tb) return run_tc3<BF16, Cfg, false, true>(p, vec, out, ep, splits, w);
    if (ta && !tb) return run_tc3<BF16, Cfg, true, false>(p, vec, out, ep, splits, w);
    return run_tc3<BF16, Cfg, true, true>(p, vec, out, ep, splits, w);
}

/* The launch on tile cfg (kTcBig, kTcSmall) for every layout; gemm_tc_tf32.cu and gemm_tc_bf16.cu each
 * instantiate one precision, so that the two compile in parallel. */
template <bool BF16>
odl_status run_tc1(int cfg, const TcParams &p, bool ta, bool tb, bool vec, const OutRowMajor &out, const Epi &ep,
                   int splits, const char *what) {
    if (cfg == kTcBig) return run_tc2<BF16, TcBig>(p, ta, tb, vec, out, ep, splits, what);
    return run_tc2<BF16, TcSmall>(p, ta, tb, vec, out, ep, splits, what);
}

odl_status run_tc_tf32(int cfg, const TcParams &p, bool ta, bool tb, bool vec, const OutRowMajor &out, const Epi &ep,
                       int splits, const char *what);
odl_status run_tc_bf16(int cfg, const TcParams &p, bool ta, bool tb, bool vec, const OutRowMajor &out, const Epi &ep,
                       int splits, const char *what);

} // namespace tc
} // namespace odlk

#endif

