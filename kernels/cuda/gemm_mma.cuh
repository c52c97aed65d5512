/* The tensor-core twin of gemm_core.cuh's tiled kernel, for the implicit GEMMs of the convolutions in TF32
 * and BF16 (conv2d_tc.cu): the same output mappings, split-K partials and fixed-order reduction, two main
 * loops:
 *   mma_gemm_kernel        gemm_core.cuh's register-staged double buffer (loaders with fetch / stash:
 *                          conv2d_tiles.cuh), one __syncthreads per BK slice;
 *   mma_gemm_async_kernel  loaders with issue() copy each slice straight to a ring of STAGES shared-memory
 *                          buffers by cp.async, STAGES - 1 slices ahead (mma_mainloop_async).
 *
 *   - Rounding, once per element, to TF32 (nearest even on the float32 bits: odl_round_mantissa(x, 10) of
 *     odl/precision.h) or BF16 (nearest even), so that every element reaches the tensor cores rounded as
 *     the CPU reference rounds it: the register-staged loop rounds each fetched slice (BF16 kept as the
 *     upper half of a float32), the pipelined one as fragments are read (frag()).
 *   - Shared memory holds float32 k-major ([BK][rows + 8]): with a row stride of 8 (mod 32) floats a warp's
 *     fragment read (lane g = lane / 4, t = lane % 4 reads row t, column g) touches 32 distinct banks.
 *   - Each warp owns WM x WN of the block tile as MT x NT mma tiles of 16 x 8:
 *       tf32: mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32, fragments a = {A[g][t], A[g+8][t],
 *             A[g][t+4], A[g+8][t+4]}, b = {B[t][g], B[t+4][g]} (PTX ISA, "Matrix fragments for
 *             mma.m16n8k8", .tf32);
 *       bf16: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32, whose registers pair the reduction
 *             indices (2t, 2t+1) and (2t+8, 2t+9) ("Matrix fragments for mma.m16n8k16"). The order of a
 *             sum's terms is free, so logical index 2t+j (j = 0, 1) is taken from shared-memory row t + 4j
 *             and 2t+8+j from row t+8+4j, the same permutation in A and B: every 32-bit fragment read is
 *             again row t, column g (conflict-free), and two of them make a register with one PRMT.
 *   - Accumulators c = {C[g][2t], C[g][2t+1], C[g+8][2t], C[g+8][2t+1]} of each mma tile go through the
 *     epilogue of gemm_core.cuh from a per-warp shared-memory slice, four consecutive columns per lane
 *     where the output allows (mma_epilogue).
 * Deterministic: a fixed order of mma over the slices and of the split-K partials.
 */
#ifndef ODL_KERNELS_CUDA_GEMM_MMA_CUH
#define ODL_KERNELS_CUDA_GEMM_MMA_CUH

#include <cuda_bf16.h>

#include "gemm_core.cuh"
#include "mma_util.cuh"

namespace odlk {

/* Block tile BM x BN x BK, WARPS_M x WARPS_N warps of WM x WN, MINB resident blocks per multiprocessor
 * (__launch_bounds__). BK a multiple of 16 (one BF16 mma step). */
template <int BM_, int BN_, int BK_, int WARPS_M_, int WARPS_N_, int MINB_>
struct MmaCfg {
    static constexpr int BM = BM_, BN = BN_, BK = BK_;
    static constexpr int WARPS_M = WARPS_M_, WARPS_N = WARPS_N_, MINB = MINB_;
    static constexpr int THREADS = WARPS_M * WARPS_N * 32;
    static constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N;
    static constexpr int MT = WM / 16, NT = WN / 8;
    static constexpr int PAD = 8;
    static constexpr int LDA = BM + PAD, LDB = BN + PAD;
    static constexpr int SMEM_FLOATS = 2 * BK * (LDA + LDB);
    static_assert(BK % 16 == 0, "a slice is whole BF16 mma steps");
    static_assert(WM % 16 == 0 && WN % 8 == 0, "warps hold whole mma tiles");
    static_assert(WM * WARPS_M == BM && WN * WARPS_N == BN, "warps must tile the block");
    static_assert(LDA % 32 == 8 && LDB % 32 == 8, "fragment reads conflict-free");
    static_assert(SMEM_FLOATS * 4 <= 48 * 1024, "static shared memory is limited to 48 KB");
};

template <bool BF16, class L>
__device__ __forceinline__ void round_slice(L &l) {
#pragma unroll
    for (int e = 0; e < L::ELEMS; e++) l.reg[e] = BF16 ? round_bf16_rne(l.reg[e]) : round_tf32_rne(l.reg[e]);
}

/* Two BF16 values held as the upper halves of float32 lo and hi, as one register (lo in the low half). */
__device__ __forceinline__ uint32_t pack_bf16_pair(float lo, float hi) {
    return __byte_perm(__float_as_uint(lo), __float_as_uint(hi), 0x7632);
}

/* One fragment register from shared memory: tf32 one float, bf16 two (lo in the low half). ROUND: the
 * floats are raw and are rounded here (nearest even: round_tf32_rne, or cvt.rn.bf16x2.f32 through
 * __floats2bfloat162_rn); else they were rounded when stashed (bf16: exact upper halves). */
template <bool BF16, bool ROUND>
__device__ __forceinline__ uint32_t frag(const float *p, int second) {
    if (!BF16) return __float_as_uint(ROUND ? round_tf32_rne(p[0]) : p[0]);
    if (ROUND) {
        const __nv_bfloat162 v = __floats2bfloat162_rn(p[0], p[second]);
        return *reinterpret_cast<const uint32_t *>(&v);
    }
    return pack_bf16_pair(p[0], p[second]);
}

/* acc[mt][nt] += A[m0 + mt*16 .., kk ..] * B[kk .., n0 + nt*8 ..] for one mma step of a warp (see the file
 * comment for the fragments); a, b point at the warp's corner of the slice (row kk). */
template <class Cfg, bool BF16, bool ROUND = false>
__device__ __forceinline__ void mma_step(const float *a, const float *b, float (&acc)[Cfg::MT][Cfg::NT][4]) {
    constexpr int LDA = Cfg::LDA, LDB = Cfg::LDB;
    constexpr MmaIn IN = BF16 ? MmaIn::BF16 : MmaIn::TF32;
    const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    uint32_t af[Cfg::MT][4];
#pragma unroll
    for (int mt = 0; mt < Cfg::MT; mt++) {
        const float *p = a + t * LDA + mt * 16 + g;
        if (BF16) {
            af[mt][0] = frag<true, ROUND>(p, 4 * LDA);
            af[mt][1] = frag<true, ROUND>(p + 8, 4 * LDA);
            af[mt][2] = frag<true, ROUND>(p + 8 * LDA, 4 * LDA);
            af[mt][3] = frag<true, ROUND>(p + 8 * LDA + 8, 4 * LDA);
        } else {
            af[mt][0] = frag<false, ROUND>(p, 0);
            af[mt][1] = frag<false, ROUND>(p + 8, 0);
            af[mt][2] = frag<false, ROUND>(p + 4 * LDA, 0);
            af[mt][3] = frag<false, ROUND>(p + 4 * LDA + 8, 0);
        }
    }
#pragma unroll
    for (int nt = 0; nt < Cfg::NT; nt++) {
        const float *p = b + t * LDB + nt * 8 + g;
        uint32_t b0, b1;
        if (BF16) {
            b0 = frag<true, ROUND>(p, 4 * LDB);
            b1 = frag<true, ROUND>(p + 8 * LDB, 4 * LDB);
        } else {
            b0 = frag<false, ROUND>(p, 0);
            b1 = frag<false, ROUND>(p + 4 * LDB, 0);
        }
#pragma unroll
        for (int mt = 0; mt < Cfg::MT; mt++) mma_16x8<IN>(acc[mt][nt], af[mt], b0, b1);
    }
}

/* Accumulate A[m0:m0+BM, kb:ke] * B[kb:ke, n0:n0+BN] into acc (gemm_core.cuh's mainloop with rounding and
 * mma). */
template <class Cfg, bool BF16, class LA, class LB>
__device__ __forceinline__ void mma_mainloop(LA &la, LB &lb, int kb, int ke, float (&acc)[Cfg::MT][Cfg::NT][4],
                                             float *smem) {
    constexpr int BK = Cfg::BK, LDA = Cfg::LDA, LDB = Cfg::LDB;
    constexpr int KSTEP = BF16 ? 16 : 8;
    static_assert(LA::LDS == LDA && LB::LDS == LDB, "loaders must stash with the kernel's row stride");
    float *As = smem;
    float *Bs = smem + 2 * BK * LDA;
    const int warp = threadIdx.x / 32;
    const int a_off = (warp / Cfg::WARPS_N) * Cfg::WM;
    const int b_off = (warp % Cfg::WARPS_N) * Cfg::WN;
    const int nt = (ke - kb + BK - 1) / BK;
    if (nt <= 0) return;

    la.fetch();
    lb.fetch();
    round_slice<BF16>(la);
    round_slice<BF16>(lb);
    la.stash(As);
    lb.stash(Bs);
    __syncthreads();

    for (int it = 0; it < nt; it++) {
        const int cur = it & 1;
        const bool more = it + 1 < nt;
        if (more) {
            la.fetch();
            lb.fetch();
        }
        const float *a = As + cur * BK * LDA + a_off;
        const float *b = Bs + cur * BK * LDB + b_off;
#pragma unroll
        for (int kk = 0; kk < BK; kk += KSTEP) mma_step<Cfg, BF16>(a + kk * LDA, b + kk * LDB, acc);
        if (more) {
            round_slice<BF16>(la);
            round_slice<BF16>(lb);
            la.stash(As + (cur ^ 1) * BK * LDA);
            lb.stash(Bs + (cur ^ 1) * BK * LDB);
        }
        __syncthreads();
    }
}

/* The pipelined main loop: loaders with issue() (conv2d_tiles.cuh: GatherTc, WeightsTc) copy slices
 * straight to a ring of STAGES shared-memory buffers by cp.async, STAGES - 1 slices ahead of the mma, so
 * that the gathers' latency hides behind several slices of work; the elements are rounded as fragments
 * are read. One __syncthreads per slice: at the top of iteration t every thread has finished slice t - 1,
 * whose buffer the copies of slice t + STAGES - 1 then overwrite. */
template <class Cfg, bool BF16, int STAGES, class LA, class LB>
__device__ __forceinline__ void mma_mainloop_async(LA &la, LB &lb, int kb, int ke, float (&acc)[Cfg::MT][Cfg::NT][4],
                                                   float *smem) {
    constexpr int BK = Cfg::BK, SA = BK * Cfg::LDA, SB = BK * Cfg::LDB;
    constexpr int KSTEP = BF16 ? 16 : 8;
    static_assert(LA::LDS == Cfg::LDA && LB::LDS == Cfg::LDB, "loaders must stash with the kernel's row stride");
    float *As = smem;
    float *Bs = smem + STAGES * SA;
    const int warp = threadIdx.x / 32;
    const int a_off = (warp / Cfg::WARPS_N) * Cfg::WM;
    const int b_off = (warp % Cfg::WARPS_N) * Cfg::WN;
    const int nt = (ke - kb + BK - 1) / BK;
#pragma unroll
    for (int st = 0; st < STAGES - 1; st++) {
        if (st < nt) {
            la.issue(As + st * SA);
            lb.issue(Bs + st * SB);
        }
        cp_async_commit();
    }
    for (int it = 0; it < nt; it++) {
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        const int nx = it + STAGES - 1;
        if (nx < nt) {
            la.issue(As + (nx % STAGES) * SA);
            lb.issue(Bs + (nx % STAGES) * SB);
        }
        cp_async_commit();
        const float *a = As + (it % STAGES) * SA + a_off;
        const float *b = Bs + (it % STAGES) * SB + b_off;
#pragma unroll
        for (int kk = 0; kk < BK; kk += KSTEP) mma_step<Cfg, BF16, true>(a + kk * Cfg::LDA, b + kk * Cfg::LDB, acc);
    }
    cp_async_wait<0>();
}

/* Stores chunk c (fragment row block i = c / (NT / 4), columns 32 (c % (NT / 4)) ..) of a warp's accumulators
 * (rows lane / 4 (+ 8), columns 8j + 2 (lane % 4) (+ 1)) into its staging buffer: an if-chain over the chunks,
 * so that the registers are indexed by constants while the loop over chunks stays rolled. */
template <class Cfg, int C0 = 0>
__device__ __forceinline__ void mma_stage_chunk(float *buf, const float (&acc)[Cfg::MT][Cfg::NT][4], int c, int r,
                                                int q) {
    constexpr int JG = Cfg::NT / 4;
    if constexpr (C0 < Cfg::MT * JG) {
        if (c == C0) {
            constexpr int i = C0 / JG, jg = C0 % JG;
            stage_frag(buf, &acc[i][jg * 4][0], r, q);
        } else {
            mma_stage_chunk<Cfg, C0 + 1>(buf, acc, c, r, q);
        }
    }
}

/* The accumulators of the block through the epilogue (split z = blockIdx.z of out), each warp through its
 * own kEpiRows x kEpiLd slice of `smem` (the main loop's, free once every warp has left it): with
 * out.vec a lane stores 4 consecutive columns of a row, else one column of each row. The loop over chunks
 * stays rolled, so the epilogue's code appears once (unrolled over every accumulator it was most of the
 * kernel's code, and the H200 stalled on instruction fetch). */
template <class Cfg, class Out>
__device__ __forceinline__ void mma_epilogue(Out out, const Epi &ep, const float (&acc)[Cfg::MT][Cfg::NT][4], int m0,
                                             int n0, int M, int N, float *smem) {
    static_assert(Cfg::NT % 4 == 0, "warps of whole 32-column chunks");
    static_assert(Cfg::THREADS / 32 * kEpiRows * kEpiLd <= 2 * Cfg::BK * (Cfg::LDA + Cfg::LDB),
                  "the staging slices fit in the main loop's shared memory");
    out.select_split(blockIdx.z);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    float *buf = smem + warp * kEpiRows * kEpiLd;
    const int wm = m0 + (warp / Cfg::WARPS_N) * Cfg::WM, wn = n0 + (warp % Cfg::WARPS_N) * Cfg::WN;
    constexpr int JG = Cfg::NT / 4;
    __syncthreads(); /* every warp is done with the main loop's shared memory */
#pragma unroll 1
    for (int c = 0; c < Cfg::MT * JG; c++) {
        mma_stage_chunk<Cfg>(buf, acc, c, lane / 4, lane % 4);
        __syncwarp();
        const int row0 = wm + (c / JG) * 16, col0 = wn + (c % JG) * kEpiCols;
        if (out.vec) {
            const int col = 4 * (lane % 8), n = col0 + col;
#pragma unroll
            for (int it = 0; it < kEpiRows / 4; it++) {
                const int r = it * 4 + lane / 8, m = row0 + r;
                if (m >= M || n >= N) continue;
                const float4 v = *reinterpret_cast<const float4 *>(&buf[r * kEpiLd + col]);
                const float e[4] = {v.x, v.y, v.z, v.w};
                if (n + 3 < N) epi_store4<kActOfEpi>(out, ep, m, n, e);
                else
                    for (int t = 0; t < 4 && n + t < N; t++) epi_store1(out, ep, m, n + t, e[t]);
            }
        } else {
            const int n = col0 + lane;
            if (n < N) {
#pragma unroll 1
                for (int r = 0; r < kEpiRows && row0 + r < M; r++)
                    epi_store1(out, ep, row0 + r, n, buf[r * kEpiLd + lane]);
            }
        }
        __syncwarp();
    }
}

template <class Cfg>
__device__ __forceinline__ void zero_acc(float (&acc)[Cfg::MT][Cfg::NT][4]) {
#pragma unroll
    for (int i = 0; i < Cfg::MT; i++)
#pragma unroll
        for (int j = 0; j < Cfg::NT; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[i][j][e] = 0.0f;
}

/* C tile = epilogue(A * B) for blockIdx.x's tile and blockIdx.z's k range (tiled_gemm_kernel's contract);
 * register-staged loaders (fetch / stash). */
template <class Cfg, bool BF16, class LA, class LB, class Out>
__global__ void __launch_bounds__(Cfg::THREADS, Cfg::MINB)
    mma_gemm_kernel(typename LA::Params pa, typename LB::Params pb, Out out, Epi ep, int M, int N, int K, int k_chunk,
                    int group_m) {
    __shared__ __align__(16) float smem[Cfg::SMEM_FLOATS];
    int m0, n0;
    tile_origin<Cfg>(M, N, group_m, m0, n0);
    const int kb = (int)blockIdx.z * k_chunk;
    const int ke = min(K, kb + k_chunk);
    LA la(pa, m0, kb);
    LB lb(pb, n0, kb);
    float acc[Cfg::MT][Cfg::NT][4];
    zero_acc<Cfg>(acc);
    mma_mainloop<Cfg, BF16>(la, lb, kb, ke, acc, smem);
    mma_epilogue<Cfg>(out, ep, acc, m0, n0, M, N, smem);
}

/* The same on the pipelined main loop (loaders with issue()); dynamic shared memory of
 * mma_async_smem_bytes<Cfg, STAGES>(). */
template <class Cfg, int STAGES>
constexpr int mma_async_smem_bytes() {
    return STAGES * Cfg::BK * (Cfg::LDA + Cfg::LDB) * (int)sizeof(float);
}
template <class Cfg, bool BF16, int STAGES, class LA, class LB, class Out>
__global__ void __launch_bounds__(Cfg::THREADS, Cfg::MINB)
    mma_gemm_async_kernel(typename LA::Params pa, typename LB::Params pb, Out out, Epi ep, int M, int N, int K,
                          int k_chunk, int group_m) {
    extern __shared__ __align__(16) float dsmem[];
    int m0, n0;
    tile_origin<Cfg>(M, N, group_m, m0, n0);
    const int kb = (int)blockIdx.z * k_chunk;
    const int ke = min(K, kb + k_chunk);
    LA la(pa, m0, kb);
    LB lb(pb, n0, kb);
    float acc[Cfg::MT][Cfg::NT][4];
    zero_acc<Cfg>(acc);
    mma_mainloop_async<Cfg, BF16, STAGES>(la, lb, kb, ke, acc, dsmem);
    mma_epilogue<Cfg>(out, ep, acc, m0, n0, M, N, dsmem);
}

} // namespace odlk

#endif
