/* The tiled FP32 matrix-product machinery shared by gemm.cu and conv2d.cu.
 *
 * One kernel template computes a BM x BN tile of C = A * B for a range of the reduction index k:
 *
 *   - Tile loaders (DenseTile here, the implicit-GEMM gathers in conv2d.cu) read a BK-deep slice of A
 *     (BM rows) and B (BN columns) from global memory into registers (`fetch`, zero outside the
 *     matrix) and write it to shared memory (`stash`) laid out k-major, [BK][rows + 4]: the 4-float pad
 *     keeps 16-byte alignment and makes the transposing stores of k-contiguous operands conflict-free.
 *   - Two shared-memory buffers, register-staged: the loads of slice t+1 are issued before the FMAs of
 *     slice t and stored to the other buffer after them, so global latency hides behind BK * TM * TN
 *     FMAs per thread, with one __syncthreads per slice.
 *   - Each warp owns a WM x WN sub-tile; its 32 lanes form a LANES_M x LANES_N grid and each lane
 *     holds a TM x TN register tile made of 4 x 4 blocks strided by 4 * LANES (the "split" register
 *     tile of CUTLASS's SIMT GEMM): per k a lane reads TM/4 + TN/4 float4 from shared memory and does
 *     TM * TN FMAs; a warp's fragment reads touch 4 * LANES_M and 4 * LANES_N consecutive floats, one
 *     shared-memory wavefront each, with broadcast.
 *   - Tiles are visited in groups of `group_m` tile rows (Triton's grouped ordering) so that
 *     consecutive blocks share A and B panels in L2.
 *   - blockIdx.z selects a split of k (split-K): each split writes raw partial sums to a workspace
 *     slice, and splitk_reduce_kernel adds the slices in a fixed order (deterministic) and applies the
 *     epilogue.
 *   - The epilogue (alpha, beta * C, bias per row or column, ReLU/SiLU/sigmoid, residual) is applied to
 *     the registers and stored through an output mapping (row-major C, or NCHW for convolutions),
 *     16 bytes at a time where the mapping allows.
 */
#ifndef ODL_KERNELS_CUDA_GEMM_CORE_CUH
#define ODL_KERNELS_CUDA_GEMM_CORE_CUH

#include "common.cuh"

namespace odlk {

/* Block tile BM x BN x BK, WARPS_M x WARPS_N warps, TM x TN registers per thread; MINB is the
 * __launch_bounds__ minimum of resident blocks per multiprocessor (it caps registers per thread at
 * 65536 / (THREADS * MINB)). */
template <int BM_, int BN_, int BK_, int WARPS_M_, int WARPS_N_, int TM_, int TN_, int MINB_>
struct TileCfg {
    static constexpr int BM = BM_, BN = BN_, BK = BK_;
    static constexpr int WARPS_M = WARPS_M_, WARPS_N = WARPS_N_;
    static constexpr int TM = TM_, TN = TN_, MINB = MINB_;
    static constexpr int THREADS = WARPS_M * WARPS_N * 32;
    static constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N;
    static constexpr int LANES_M = WM / TM, LANES_N = WN / TN;
    static constexpr int PAD = 4;
    static constexpr int LDA = BM + PAD, LDB = BN + PAD;
    static constexpr int SMEM_FLOATS = 2 * BK * (LDA + LDB);
    static_assert(LANES_M * LANES_N == 32, "a warp's lanes must tile its sub-tile");
    static_assert(TM % 4 == 0 && TN % 4 == 0, "register tiles are made of 4x4 blocks");
    static_assert(WM * WARPS_M == BM && WN * WARPS_N == BN, "warps must tile the block");
    static_assert(SMEM_FLOATS * 4 <= 48 * 1024, "static shared memory is limited to 48 KB");
};

/* Epilogue: out = act(alpha * acc + beta * C + bias) + residual (residual read at the output's
 * offset), then 0 where gate (read at the output's offset) is <= 0. beta == 0 never reads C. gate: a
 * convolution's data gradient whose input is a ReLU's output (odl/backend.h conv2d_bwd_data's relu_x),
 * that ReLU's backward as OpReluBwd selects (x <= 0 ? 0 : dy), so that the fused result has its bits.
 * Only epi_store1 applies it (not the 4-wide stores: an output with a gate has vec false), so that the
 * unrolled tile epilogues of every other product carry no code for it. */
struct Epi {
    float alpha, beta;
    const float *bias;
    int bias_per_row;
    const float *residual;
    int act;
    const float *gate;
};

static inline Epi epi_raw() {
    Epi e;
    e.alpha = 1.0f;
    e.beta = 0.0f;
    e.bias = nullptr;
    e.bias_per_row = 0;
    e.residual = nullptr;
    e.act = ODL_ACT_NONE;
    e.gate = nullptr;
    return e;
}

/* The epilogue of a GEMM call (odl_gemm_args or odl_gemm_typed_args: alpha, beta, bias, residual, act). */
template <class G> static inline Epi epi_of(const G *g) {
    Epi e;
    e.alpha = g->alpha;
    e.beta = g->beta;
    e.bias = g->ep.bias;
    e.bias_per_row = g->ep.bias_per_row;
    e.residual = g->ep.residual;
    e.act = g->ep.act;
    e.gate = nullptr;
    return e;
}

/* Row-major output C[m * ldc + n]; zstride shifts the base per split (split-K partials). vec: 4
 * consecutive columns starting at a multiple of 4 are contiguous and 16-byte aligned (C and residual
 * aligned, ldc % 4 == 0). */
struct OutRowMajor {
    float *C;
    int64_t ldc;
    int64_t zstride;
    bool vec;
    __device__ __forceinline__ void select_split(int z) { C += (int64_t)z * zstride; }
    __device__ __forceinline__ float *base() const { return C; }
    __device__ __forceinline__ int64_t off(int m, int n) const { return (int64_t)m * ldc + n; }
};

/* NCHW output of a convolution-like product: row m is a channel of Kc, column n = img * PQ + pq;
 * zstride shifts the base per split. vec needs PQ % 4 == 0 and 16-byte aligned y and residual. */
struct OutNCHW {
    float *y;
    int Kc, PQ;
    FastDiv fPQ;
    int64_t zstride;
    bool vec;
    __device__ __forceinline__ void select_split(int z) { y += (int64_t)z * zstride; }
    __device__ __forceinline__ float *base() const { return y; }
    __device__ __forceinline__ int64_t off(int m, int n) const {
        int img, pq;
        fPQ.divmod(n, img, pq);
        return ((int64_t)img * Kc + m) * PQ + pq;
    }
};

/* One output element. */
template <class Out>
__device__ __forceinline__ void epi_store1(const Out &out, const Epi &ep, int m, int n, float v) {
    float *base = out.base();
    int64_t o = out.off(m, n);
    v *= ep.alpha;
    if (ep.beta != 0.0f) v = fmaf(ep.beta, base[o], v);
    if (ep.bias) v += ep.bias[ep.bias_per_row ? m : n];
    v = act_apply(ep.act, v);
    if (ep.residual) v += ep.residual[o];
    if (ep.gate && ep.gate[o] <= 0.0f) v = 0.0f;
    base[o] = v;
}

/* Four consecutive elements of C at p (aligned for one vector access) as float32; gemm_typed.cuh adds the
 * bfloat16 and float16 ones. */
template <class T> __device__ __forceinline__ void load4(const T *p, float (&r)[4]);
template <> __device__ __forceinline__ void load4<float>(const float *p, float (&r)[4]) {
    const float4 v = *reinterpret_cast<const float4 *>(p);
    r[0] = v.x, r[1] = v.y, r[2] = v.z, r[3] = v.w;
}

/* r, four outputs at columns n..n+3 of row m (output offset o), through the epilogue: alpha, beta * C (C's
 * four values at c, of element type T, read only when beta != 0), bias, the activation act, residual
 * (float32 at o). The one copy of this order for every 4-wide store (epi_store4 here, the typed GEMM's
 * store4). */
template <class T>
__device__ __forceinline__ void epi_apply4(const Epi &ep, int act, int m, int n, int64_t o, float (&r)[4],
                                           const T *c) {
#pragma unroll
    for (int j = 0; j < 4; j++) r[j] *= ep.alpha;
    if (ep.beta != 0.0f) {
        float cv[4];
        load4<T>(c, cv);
#pragma unroll
        for (int j = 0; j < 4; j++) r[j] = fmaf(ep.beta, cv[j], r[j]);
    }
    if (ep.bias) {
#pragma unroll
        for (int j = 0; j < 4; j++) r[j] += ep.bias[ep.bias_per_row ? m : n + j];
    }
    if (act != ODL_ACT_NONE) {
#pragma unroll
        for (int j = 0; j < 4; j++) r[j] = act_apply(act, r[j]);
    }
    if (ep.residual) {
        const float4 q = *reinterpret_cast<const float4 *>(ep.residual + o);
        r[0] += q.x;
        r[1] += q.y;
        r[2] += q.z;
        r[3] += q.w;
    }
}

/* The staged epilogues (gemm_mma.cuh's mma_epilogue, gemm_sm90_kernel.cuh's epilogue) pass a warp's
 * accumulators through shared memory kEpiRows x kEpiCols at a time, rows kEpiLd floats apart (40: the
 * fragment's float2 stores and the row reads are free of bank conflicts). */
constexpr int kEpiRows = 16, kEpiCols = 32, kEpiLd = 40;

/* kEpiCols columns of a warp's m16 accumulator fragment into its staging buffer: f[4j + e] (j < 4) is row
 * r = lane / 4 (+ 8 for e >= 2), column 8j + 2q + e % 2 with q = lane % 4 -- the layout of both mma.sync
 * m16n8 and wgmma m64nN (per warp) accumulators. f is indexed by constants only, so it stays in registers. */
__device__ __forceinline__ void stage_frag(float *buf, const float *f, int r, int q) {
#pragma unroll
    for (int j = 0; j < kEpiCols / 8; j++) {
        *reinterpret_cast<float2 *>(&buf[r * kEpiLd + j * 8 + 2 * q]) = make_float2(f[j * 4], f[j * 4 + 1]);
        *reinterpret_cast<float2 *>(&buf[(r + 8) * kEpiLd + j * 8 + 2 * q]) = make_float2(f[j * 4 + 2], f[j * 4 + 3]);
    }
}

/* Stores chunk c (columns 32c .. 32c + 31) of a warp's accumulator fragment (rows lane / 4 (+ 8), columns
 * 8j + 2 (lane % 4) (+ 1)) into its staging buffer: an if-chain over the chunks, so that the registers are
 * indexed by constants while the loop over chunks stays rolled. */
template <int BN, int C0 = 0>
__device__ __forceinline__ void stage_chunk(float *buf, const float (&acc)[BN / 2], int c, int r, int q) {
    if constexpr (C0 < BN / kEpiCols) {
        if (c == C0) {
            stage_frag(buf, &acc[C0 * kEpiCols / 2], r, q);
        } else {
            stage_chunk<BN, C0 + 1>(buf, acc, c, r, q);
        }
    }
}

/* ACT of epi_store4: the activation is ep.act, read at run time (the staged epilogues of gemm_mma.cuh). */
constexpr int kActOfEpi = -1;

/* Four outputs at columns n..n+3 of row m (n % 4 == 0), all inside the output, with out.vec: 16-byte
 * accesses. ACT: a constant activation, so that the unrolled tile epilogue carries one activation's code
 * per instantiation, or kActOfEpi. */
template <int ACT, class Out>
__device__ __forceinline__ void epi_store4(const Out &out, const Epi &ep, int m, int n, const float *v) {
    float *base = out.base();
    const int64_t o = out.off(m, n);
    float r[4] = {v[0], v[1], v[2], v[3]};
    epi_apply4(ep, ACT == kActOfEpi ? ep.act : ACT, m, n, o, r, base + o);
    *reinterpret_cast<float4 *>(base + o) = make_float4(r[0], r[1], r[2], r[3]);
}

/* Store a thread's TM x TN accumulators (rows a_off + (i/4) * 4 * LANES_M + i%4, columns
 * b_off + (j/4) * 4 * LANES_N + j%4) through the epilogue. Tiles wholly inside a vectorisable output
 * take the unrolled float4 path; edge tiles go element by element through a local copy, which keeps
 * that rare path small. */
template <class Cfg, int ACT, class Out>
__device__ __forceinline__ void epi_tile_vec(const Out &out, const Epi &ep, const float (&acc)[Cfg::TM][Cfg::TN],
                                             int a_off, int b_off) {
#pragma unroll
    for (int i = 0; i < Cfg::TM; i++)
#pragma unroll
        for (int jg = 0; jg < Cfg::TN / 4; jg++)
            epi_store4<ACT>(out, ep, a_off + (i / 4) * Cfg::LANES_M * 4 + (i % 4), b_off + jg * Cfg::LANES_N * 4,
                            &acc[i][4 * jg]);
}

template <class Cfg, class Out>
__device__ __forceinline__ void epi_tile(const Out &out, const Epi &ep, const float (&acc)[Cfg::TM][Cfg::TN],
                                         int m0, int n0, int M, int N) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int a_off = m0 + (warp / Cfg::WARPS_N) * Cfg::WM + (lane / Cfg::LANES_N) * 4;
    const int b_off = n0 + (warp % Cfg::WARPS_N) * Cfg::WN + (lane % Cfg::LANES_N) * 4;
    if (out.vec && m0 + Cfg::BM <= M && n0 + Cfg::BN <= N) {
        switch (ep.act) {
        case ODL_ACT_RELU: epi_tile_vec<Cfg, ODL_ACT_RELU>(out, ep, acc, a_off, b_off); break;
        case ODL_ACT_SILU: epi_tile_vec<Cfg, ODL_ACT_SILU>(out, ep, acc, a_off, b_off); break;
        case ODL_ACT_SIGMOID: epi_tile_vec<Cfg, ODL_ACT_SIGMOID>(out, ep, acc, a_off, b_off); break;
        default: epi_tile_vec<Cfg, ODL_ACT_NONE>(out, ep, acc, a_off, b_off); break;
        }
        return;
    }
    float tmp[Cfg::TM * Cfg::TN];
#pragma unroll
    for (int i = 0; i < Cfg::TM; i++)
#pragma unroll
        for (int j = 0; j < Cfg::TN; j++) tmp[i * Cfg::TN + j] = acc[i][j];
#pragma unroll 1
    for (int e = 0; e < Cfg::TM * Cfg::TN; e++) {
        const int i = e / Cfg::TN, j = e % Cfg::TN;
        const int m = a_off + (i / 4) * Cfg::LANES_M * 4 + (i % 4);
        const int n = b_off + (j / 4) * Cfg::LANES_N * 4 + (j % 4);
        if (m < M && n < N) epi_store1(out, ep, m, n, tmp[e]);
    }
}

/* A dense matrix operand as a tile loader. The tile covers ROWS rows (m of A, or n of B) starting at
 * r0 and BK reduction indices. KCONTIG: element (r, k) at p[r * ld + k] (A not transposed, B
 * transposed); otherwise at p[k * ld + r] (A transposed, B not transposed). Each thread loads groups
 * of G = 4 elements consecutive along the contiguous index (G = 1 when its share is not a multiple of
 * 4). With vec (p 16-byte aligned and ld % 4 == 0), a tile wholly inside the matrix loads one float4
 * per group through a running pointer, with no per-element checks; edge tiles and unaligned operands
 * take guarded scalar loads. */
template <int ROWS, int BK, int THREADS, bool KCONTIG, int PAD = 4>
struct DenseTile {
    struct Params {
        const float *p;
        int64_t ld;
        int rows, K;
        bool vec;
    };
    static_assert((ROWS * BK) % THREADS == 0, "tile must split evenly over the threads");
    static constexpr int ELEMS = ROWS * BK / THREADS;
    static constexpr int G = (ELEMS % 4 == 0) ? 4 : 1; /* elements per group */
    static constexpr int NL = ELEMS / G;
    static constexpr int LDS = ROWS + PAD;

    const float *cur[NL]; /* first element of group v in the current tile */
    int64_t step;         /* pointer advance per tile */
    int rows, K, r0, k0;
    bool rows_in;         /* vec and every row of the tile inside the matrix */
    float reg[ELEMS];

    /* Position in the tile of group v of this thread: row r, reduction index k (the first of G
     * consecutive ones along the contiguous index). */
    __device__ __forceinline__ static void pos(int v, int &r, int &k) {
        const int idx = (int)threadIdx.x + v * THREADS;
        if (KCONTIG) { r = idx / (BK / G); k = (idx % (BK / G)) * G; }
        else { k = idx / (ROWS / G); r = (idx % (ROWS / G)) * G; }
    }

    /* The tile of rows r0.. and reduction indices kb.. is the first that fetch() loads. */
    __device__ __forceinline__ DenseTile(const Params &pr, int r0_, int kb)
        : step(KCONTIG ? BK : (int64_t)BK * pr.ld), rows(pr.rows), K(pr.K), r0(r0_), k0(kb),
          rows_in(pr.vec && r0_ + ROWS <= pr.rows) {
#pragma unroll
        for (int v = 0; v < NL; v++) {
            int r, k;
            pos(v, r, k);
            cur[v] = pr.p + (KCONTIG ? (int64_t)(r0 + r) * pr.ld + (kb + k) : (int64_t)(kb + k) * pr.ld + (r0 + r));
        }
    }

    /* Load the current tile into registers and move to the next one. */
    __device__ __forceinline__ void fetch() {
        if (G == 4 && rows_in && k0 + BK <= K) {
#pragma unroll
            for (int v = 0; v < NL; v++) {
                const float4 t = __ldg(reinterpret_cast<const float4 *>(cur[v]));
                /* (j % G) keeps the indices valid when G == 1, where this branch is dead */
                reg[G * v + 0] = t.x;
                reg[G * v + 1 % G] = t.y;
                reg[G * v + 2 % G] = t.z;
                reg[G * v + 3 % G] = t.w;
            }
        } else {
#pragma unroll
            for (int v = 0; v < NL; v++) {
                int r, k;
                pos(v, r, k);
                const int gr = r0 + r, gk = k0 + k;
#pragma unroll
                for (int j = 0; j < G; j++) {
                    const bool ok = KCONTIG ? (gr < rows && gk + j < K) : (gk < K && gr + j < rows);
                    reg[G * v + j] = ok ? __ldg(cur[v] + j) : 0.0f;
                }
            }
        }
#pragma unroll
        for (int v = 0; v < NL; v++) cur[v] += step;
        k0 += BK;
    }

    __device__ __forceinline__ void stash(float *s) const {
#pragma unroll
        for (int v = 0; v < NL; v++) {
            int r, k;
            pos(v, r, k);
            if (G == 4 && !KCONTIG) {
                *reinterpret_cast<float4 *>(s + k * LDS + r) =
                    make_float4(reg[G * v], reg[G * v + 1 % G], reg[G * v + 2 % G], reg[G * v + 3 % G]);
            } else {
#pragma unroll
                for (int j = 0; j < G; j++) s[(k + (KCONTIG ? j : 0)) * LDS + r + (KCONTIG ? 0 : j)] = reg[G * v + j];
            }
        }
    }
};

/* Accumulate A[m0:m0+BM, kb:ke] * B[kb:ke, n0:n0+BN] into acc (see the file comment). */
template <class Cfg, class LA, class LB>
__device__ __forceinline__ void mainloop(LA &la, LB &lb, int kb, int ke, float (&acc)[Cfg::TM][Cfg::TN],
                                         float *smem) {
    constexpr int BK = Cfg::BK, LDA = Cfg::LDA, LDB = Cfg::LDB;
    constexpr int TM = Cfg::TM, TN = Cfg::TN;
    float *As = smem;
    float *Bs = smem + 2 * BK * LDA;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int a_off = (warp / Cfg::WARPS_N) * Cfg::WM + (lane / Cfg::LANES_N) * 4;
    const int b_off = (warp % Cfg::WARPS_N) * Cfg::WN + (lane % Cfg::LANES_N) * 4;
    const int nt = (ke - kb + BK - 1) / BK;
    if (nt <= 0) return;

    la.fetch();
    lb.fetch();
    la.stash(As);
    lb.stash(Bs);
    __syncthreads();

    for (int t = 0; t < nt; t++) {
        const int cur = t & 1;
        const bool more = t + 1 < nt;
        if (more) {
            la.fetch();
            lb.fetch();
        }
        const float *a = As + cur * BK * LDA + a_off;
        const float *b = Bs + cur * BK * LDB + b_off;
#pragma unroll
        for (int k = 0; k < BK; k++) {
            float af[TM], bf[TN];
#pragma unroll
            for (int i = 0; i < TM / 4; i++) {
                const float4 v = *reinterpret_cast<const float4 *>(a + k * LDA + i * Cfg::LANES_M * 4);
                af[4 * i + 0] = v.x; af[4 * i + 1] = v.y; af[4 * i + 2] = v.z; af[4 * i + 3] = v.w;
            }
#pragma unroll
            for (int j = 0; j < TN / 4; j++) {
                const float4 v = *reinterpret_cast<const float4 *>(b + k * LDB + j * Cfg::LANES_N * 4);
                bf[4 * j + 0] = v.x; bf[4 * j + 1] = v.y; bf[4 * j + 2] = v.z; bf[4 * j + 3] = v.w;
            }
#pragma unroll
            for (int i = 0; i < TM; i++)
#pragma unroll
                for (int j = 0; j < TN; j++) acc[i][j] = fmaf(af[i], bf[j], acc[i][j]);
        }
        if (more) {
            la.stash(As + (cur ^ 1) * BK * LDA);
            lb.stash(Bs + (cur ^ 1) * BK * LDB);
        }
        __syncthreads();
    }
}

/* Block tile origin (m0, n0) of blockIdx.x in groups of group_m tile rows (Triton's grouped order:
 * consecutive blocks share A and B panels in L2). */
template <class Cfg>
__device__ __forceinline__ void tile_origin(int M, int N, int group_m, int &m0, int &n0) {
    const int tiles_m = (M + Cfg::BM - 1) / Cfg::BM;
    const int tiles_n = (N + Cfg::BN - 1) / Cfg::BN;
    const int pid = blockIdx.x;
    const int width = group_m * tiles_n;
    const int first_m = (pid / width) * group_m;
    const int gsz = min(tiles_m - first_m, group_m);
    m0 = (first_m + (pid % width) % gsz) * Cfg::BM;
    n0 = ((pid % width) / gsz) * Cfg::BN;
}

/* Whether loader L has finish(n0, z), which tiled_gemm_kernel calls after the main loop (conv2d_tiles.cuh
 * DyRowsSumTile: the bias gradient's partial sums of the dy it loaded). */
template <class L, class = void>
struct LoaderFinishes {
    static constexpr bool value = false;
};
template <class L>
struct LoaderFinishes<L, decltype(void(&L::finish))> {
    static constexpr bool value = true;
};

/* C tile = epilogue(A * B) for blockIdx.x's tile and blockIdx.z's k range [z * k_chunk, ...).
 * k_chunk is a multiple of BK (every split but the last covers whole slices). The stages are static shared
 * memory; the launch's dynamic shared memory belongs to the loaders (conv2d_tiles.cuh GatherTableTile's
 * table, which a loader's constructor writes and ends with __syncthreads). */
template <class Cfg, class LA, class LB, class Out>
__global__ void __launch_bounds__(Cfg::THREADS, Cfg::MINB)
    tiled_gemm_kernel(typename LA::Params pa, typename LB::Params pb, Out out, Epi ep, int M, int N, int K,
                      int k_chunk, int group_m) {
    __shared__ __align__(16) float smem[Cfg::SMEM_FLOATS];
    constexpr int TM = Cfg::TM, TN = Cfg::TN;
    int m0, n0;
    tile_origin<Cfg>(M, N, group_m, m0, n0);
    const int kb = (int)blockIdx.z * k_chunk;
    const int ke = min(K, kb + k_chunk);

    LA la(pa, m0, kb);
    LB lb(pb, n0, kb);
    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; i++)
#pragma unroll
        for (int j = 0; j < TN; j++) acc[i][j] = 0.0f;

    mainloop<Cfg>(la, lb, kb, ke, acc, smem);
    if constexpr (LoaderFinishes<LA>::value) la.finish(n0, (int)blockIdx.z);

    out.select_split(blockIdx.z);
    epi_tile<Cfg>(out, ep, acc, m0, n0, M, N);
}

/* fin(m, n) = epilogue(sum over z < splits of part's element (m, n) of split z, part.zstride apart), z in
 * increasing order: deterministic (splitk_reduce takes it below 32 splits, splitk_reduce_wide_kernel's fixed
 * order from 32 on). */
/* p[0] + p[stride] + ... + p[(splits - 1) * stride], added in that order (the split-K reductions'
 * determinism), the loads issued 8 at a time: one at a time, a 32-way split of a small product waited for
 * 32 round trips to L2 (4.4 us on an H200 for MNIST fc1's forward at batch 64). */
__device__ __forceinline__ float sum_splits(const float *__restrict__ p, int64_t stride, int splits) {
    float s = 0.0f;
    int z = 0;
    for (; z + 8 <= splits; z += 8) {
        float v[8];
#pragma unroll
        for (int j = 0; j < 8; j++) v[j] = p[(int64_t)(z + j) * stride];
#pragma unroll
        for (int j = 0; j < 8; j++) s += v[j];
    }
    for (; z < splits; z++) s += p[(int64_t)z * stride];
    return s;
}

template <class Out>
__global__ void splitk_reduce_kernel(Out part, int splits, int M, int N, FastDiv fN, Out fin, Epi ep) {
    const int total = M * N;
    const float *ws = part.base();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
        int m, n;
        fN.divmod(i, m, n);
        epi_store1(fin, ep, m, n, sum_splits(ws + part.off(m, n), part.zstride, splits));
    }
}

/* The same sums for many splits: a block holds 32 consecutive outputs (lane l: output 32 blockIdx.x + l) and
 * WZ warps; warp w adds splits w, w + WZ, ... in that order with sum_splits (each load a 128-byte row of the
 * partials), then warp 0 adds the WZ warp sums in order: deterministic. The per-element kernel above has one
 * thread an output, each adding all `splits` values 8 loads at a time: MNIST conv1's weight gradient at batch
 * 512 has 288 outputs of 528 splits, 288 threads on the GPU for 66 round trips to L2 each (bench/NOTES.md). */
template <class Out, int WZ>
__global__ void __launch_bounds__(WZ * 32) splitk_reduce_wide_kernel(Out part, int splits, int M, int N, FastDiv fN,
                                                                     Out fin, Epi ep) {
    __shared__ float sums[WZ][33];
    const int lane = threadIdx.x % 32, w = threadIdx.x / 32;
    const int i = blockIdx.x * 32 + lane;
    const bool in = i < M * N;
    int m = 0, n = 0;
    if (in) fN.divmod(i, m, n);
    float acc = 0.0f;
    if (in) /* splits w, w + WZ, ...: splits >= WZ, so at least one */
        acc = sum_splits(part.base() + part.off(m, n) + (int64_t)w * part.zstride, (int64_t)WZ * part.zstride,
                         (splits - w + WZ - 1) / WZ);
    sums[w][lane] = acc;
    __syncthreads();
    if (w != 0 || !in) return;
    float t = 0.0f;
#pragma unroll
    for (int j = 0; j < WZ; j++) t += sums[j][lane];
    epi_store1(fin, ep, m, n, t);
}

/* Grid of tiled_gemm_kernel for an M x N product with `splits` k ranges. */
template <class Cfg>
static inline dim3 tile_grid(int M, int N, int splits) {
    const int tiles = ((M + Cfg::BM - 1) / Cfg::BM) * ((N + Cfg::BN - 1) / Cfg::BN);
    return dim3((unsigned)tiles, 1, (unsigned)splits);
}

/* Launch the reduction of split-K partials written through `part` (M * N < 2^31). */
template <class Out>
static inline odl_status splitk_reduce(const Out &part, int splits, int M, int N, const Out &fin, const Epi &ep,
                                       const char *what) {
    const int64_t total = (int64_t)M * N;
    if (splits >= 32 && total > 0) { /* splitk_reduce_wide_kernel: 32 warps a block where blocks are few */
        const unsigned blocks = (unsigned)((total + 31) / 32);
        if (total <= 4096)
            splitk_reduce_wide_kernel<Out, 32><<<blocks, 1024, 0, stream()>>>(part, splits, M, N, FastDiv(N), fin, ep);
        else
            splitk_reduce_wide_kernel<Out, 8><<<blocks, 256, 0, stream()>>>(part, splits, M, N, FastDiv(N), fin, ep);
        ODL_CUDA_LAUNCH_CHECK(what);
        return ODL_OK;
    }
    const int threads = 256;
    splitk_reduce_kernel<Out><<<grid_for(total, threads), threads, 0, stream()>>>(part, splits, M, N, FastDiv(N), fin,
                                                                                 ep);
    ODL_CUDA_LAUNCH_CHECK(what);
    return ODL_OK;
}

/* out[i] = sum over z < splits of part[z * n + i], i < n (a vector's per-split partial sums: the bias gradient
 * summed beside a split weight gradient), in splitk_reduce's fixed order. */
static inline odl_status splitk_reduce_vector(float *part, int splits, int n, float *out, const char *what) {
    const OutRowMajor p = {part, 1, n, false}, f = {out, 1, 0, false};
    return splitk_reduce(p, splits, n, 1, f, epi_raw(), what);
}

/* ---- tile configurations (gemm.cu picks among them; conv2d.cu uses those plan_cfg returns) ---- */
/*                         BM   BN BK WARPS  TM  TN MINB */
using Cfg128x128 = TileCfg<128, 128, 8, 4, 2, 8, 8, 2>;   /* 256 threads, the default for large products */
using Cfg128x128w4 = TileCfg<128, 128, 8, 2, 2, 8, 16, 2>; /* 128 threads, 8 x 16 per thread */
using Cfg128x256 = TileCfg<128, 256, 8, 4, 2, 8, 16, 1>;  /* 256 threads, 8 x 16 per thread */
using Cfg64x128 = TileCfg<64, 128, 8, 2, 2, 8, 8, 3>;  /* 128 threads, up to 168 registers */
using Cfg64x64 = TileCfg<64, 64, 8, 2, 2, 8, 4, 4>;    /* 128 threads, 8 x 4 per thread */
using Cfg32x128 = TileCfg<32, 128, 8, 1, 4, 8, 4, 4>;   /* 128 threads, 8 x 4 per thread */
using Cfg16x128 = TileCfg<16, 128, 8, 1, 2, 4, 8, 8>;   /* 64 threads, 4 x 8 per thread */

enum { G128x128 = 0, G128x128W4, G128x256, G64x128, G64x64, G32x128, G16x128, G_COUNT };

/* Planning (gemm.cu): the configuration for an M x N product (one of G128x256, G128x128, G64x128,
 * G64x64, G32x128, G16x128), the split-K factor for it (at most max_splits), and the k slice depth for
 * a split count (returns the number of non-empty slices). */
int plan_cfg(int64_t M, int64_t N);
int plan_splits(int cfg, int64_t M, int64_t N, int64_t K, int max_splits = 64);
int k_chunk_for(int cfg, int K, int splits, int *chunk);
/* The same for any kernel (conv2d_tc.cu's tiles): the split-K factor of `tiles` tiles with `minb` resident
 * blocks per multiprocessor (1 when they fill the device or K < 512; slices at least 256 deep, at most
 * max_splits, partial sums at most 256 MB and 2^31 elements), and the depth of each of `splits` ranges as a
 * multiple of bk (returns the count of non-empty ranges). */
int split_count(int64_t tiles, int minb, int64_t M, int64_t N, int64_t K, int max_splits);
int slice_depth(int K, int splits, int bk, int *chunk);

} // namespace odlk

#endif
