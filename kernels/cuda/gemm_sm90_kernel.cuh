/* The wgmma + TMA GEMM kernel of gemm_sm90.cu (the design is described there) and its launch, as a template
 * that the per-dtype files gemm_{bf16,f16,tf32}_sm90.cu instantiate (three files so that the assembler,
 * which takes most of the build, runs on three cores). Included only by *_sm90.cu files (sm_90a). */
#ifndef ODL_KERNELS_CUDA_GEMM_SM90_KERNEL_CUH
#define ODL_KERNELS_CUDA_GEMM_SM90_KERNEL_CUH

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string.h>

#include <atomic>

#include "gemm_sm90.h"
#include "gemm_typed.cuh"
#include "sm90_util.cuh"
#include "wgmma_ops.cuh"

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define ODL_SM90_STUB 1 /* a device pass other than sm_90a: the kernels compile to nothing */
#endif

namespace odlk {
namespace sm90 {
namespace {


constexpr int kGroupM = 8;

/* One kernel configuration: element type, tile, pipeline depth and operand majors (MN = 1: M- or
 * N-major in memory and shared memory, the wgmma transpose immediate). SWAP (tf32 only): the kernel
 * computes the transposed product C^T = op(B)^T op(A)^T of gemm_sm90.cu's caller, its A operand (the
 * caller's B) M-major in shared memory and read into registers (tf32 wgmma has no transpose bit, but
 * the register form takes any layout), and stores C^T transposed, i.e. the caller's C. */
template <WgIn IN_, int BM_, int BN_, int STAGES_, int A_MN_, int B_MN_, int SWAP_ = 0>
struct Cfg {
    static constexpr WgIn IN = IN_;
    static constexpr int BM = BM_, BN = BN_, STAGES = STAGES_, A_MN = A_MN_, B_MN = B_MN_, SWAP = SWAP_;
    static constexpr int CONSUMERS = BM / 64;
    static constexpr int THREADS = 128 * (CONSUMERS + 1);
    static constexpr int ESZ = IN == WgIn::TF32 ? 4 : 2;
    static constexpr int BK = kRowBytes / ESZ; /* K elements per stage */
    static constexpr int MN_BOX = kRowBytes / ESZ; /* MN elements of one MN-major box row */
    static constexpr int A_BYTES = BM * kRowBytes, B_BYTES = BN * kRowBytes;
    static constexpr int STAGE_BYTES = A_BYTES + B_BYTES;
    /* after the stages: the mbarriers (128 bytes), then each consumer warp's epilogue staging buffer */
    static constexpr int BAR_BYTES = 128;
    static constexpr int EPI_BYTES = CONSUMERS * 4 * kEpiRows * kEpiLd * 4;
    static constexpr int SMEM_BYTES = STAGES * STAGE_BYTES + BAR_BYTES + EPI_BYTES + 1024 /* base alignment */;
    using Op = Wgmma<IN, BN, SWAP ? 0 : A_MN, B_MN>; /* SWAP: WgmmaRegA instead */
    static constexpr int KSTEPS = BK / Op::K;
    /* setmaxnreg: the producer keeps 40 registers, the consumers share the rest of the 64K */
    static constexpr int PRODUCER_REGS = 40;
    static constexpr int CONSUMER_REGS = CONSUMERS == 2 ? 232 : 256;
    static_assert(BM % 64 == 0 && CONSUMERS >= 1 && CONSUMERS <= 2, "64 rows per consumer warpgroup");
    static_assert(BN % 64 == 0 && BN <= 256, "wgmma N and the TMA box limit");
    static_assert(SMEM_BYTES <= 227 * 1024, "shared memory per block");
    static_assert(2 * STAGES * 8 <= BAR_BYTES, "mbarriers");
    static_assert(IN != WgIn::TF32 || (B_MN == 0 && A_MN == SWAP), "tf32 operands are K-major, A M-major only through registers");
    static_assert(!SWAP || (IN == WgIn::TF32 && A_MN), "SWAP: tf32, A M-major");
    static_assert(128 * (PRODUCER_REGS + CONSUMERS * CONSUMER_REGS) <= 65536, "register file");
};

struct Unit {
    int m0, n0, kb0, kb1, split;
};

__device__ __forceinline__ Unit unit_of(const Params &p, int u, int BM, int BN) {
    Unit r;
    const int tile = u / p.splits;
    r.split = u - tile * p.splits;
    const int width = kGroupM * p.tiles_n;
    const int first_m = (tile / width) * kGroupM;
    const int gsz = min(p.tiles_m - first_m, kGroupM);
    const int in = tile % width;
    r.m0 = (first_m + in % gsz) * BM;
    r.n0 = (in / gsz) * BN;
    r.kb0 = r.split * p.kb_chunk;
    r.kb1 = min(p.kblocks, r.kb0 + p.kb_chunk);
    return r;
}

/* The plain epilogue (C = acc, alpha 1, nothing else) of a warp's 16 x BN slice wholly inside C, with o.vec:
 * straight from the fragment's registers, two columns per store (a warp's store covers whole 32-byte sectors),
 * no staging. */
template <class T, int BN>
__device__ __forceinline__ void store_plain(const TypedOut &o, const float (&acc)[BN / 2], int row0, int n0) {
    const int lane = threadIdx.x % 32;
    T *c0 = static_cast<T *>(o.C) + (int64_t)(row0 + lane / 4) * o.ldc + n0 + 2 * (lane % 4);
    T *c1 = c0 + 8 * o.ldc;
#pragma unroll
    for (int j = 0; j < BN / 8; j++) {
        put2<T>(c0 + 8 * j, acc[j * 4], acc[j * 4 + 1]);
        put2<T>(c1 + 8 * j, acc[j * 4 + 2], acc[j * 4 + 3]);
    }
}

/* A warp's 16 x BN slice of the consumer's m64nBN accumulator fragment, rows row0 .., through the epilogue
 * into C of element type T. The fragment goes 32 columns at a time through the warp's staging buffer `buf`
 * (kEpiRows x kEpiLd floats); then, with o.vec, each lane stores 4 consecutive columns of a row (a warp: 4
 * rows of 128 contiguous bytes of float32 per store), else one column of each row. The loop over chunks
 * stays rolled so that the epilogue's code appears once (unrolled over 128 registers it made the kernel half
 * a megabyte of code, fetched anew at every tile). plain: C = acc (alpha 1, nothing else). */
template <class T, int BN>
__device__ __forceinline__ void epilogue(float *buf, const TypedOut &o, const Epi &ep, bool plain,
                                         const float (&acc)[BN / 2], int row0, int n0, int M, int N) {
    const int lane = threadIdx.x % 32;
    const int rows = min(kEpiRows, M - row0);
#pragma unroll 1
    for (int c = 0; c < BN / kEpiCols; c++) {
        stage_chunk<BN>(buf, acc, c, lane / 4, lane % 4);
        __syncwarp();
        if (o.vec) {
            const int col = 4 * (lane % 8), n = n0 + c * kEpiCols + col;
            if (n < N) {
#pragma unroll
                for (int it = 0; it < kEpiRows / 4; it++) {
                    const int i = it * 4 + lane / 8;
                    if (i < rows) {
                        const float4 v = *reinterpret_cast<const float4 *>(&buf[i * kEpiLd + col]);
                        float r[4] = {v.x, v.y, v.z, v.w};
                        store4<T>(o, ep, plain, row0 + i, n, r);
                    }
                }
            }
        } else {
            const int n = n0 + c * kEpiCols + lane;
            if (n < N) {
#pragma unroll 1
                for (int i = 0; i < rows; i++) store1<T>(o, ep, row0 + i, n, buf[i * kEpiLd + lane]);
            }
        }
        __syncwarp();
    }
}

/* SWAP: this thread's tf32 A fragments of the KSTEPS k8 steps of one stage (wgmma_ops.cuh's WgmmaRegA
 * layout) from the stage's M-major A: boxes of 32 rows (M) x 32 K, each K row 128 bytes with the 16-byte
 * chunks swizzled by K row % 8 (TMA's 128-byte swizzle). m: this thread's first row in the tile. */
template <class C>
__device__ __forceinline__ void load_a_frags(uint32_t (&af)[C::KSTEPS][4], const unsigned char *sa, int m, int t) {
    auto at = [&](int mm, int k) {
        const int off = (mm / 32) * (C::BK * kRowBytes) + k * kRowBytes + ((((mm % 32) / 4) ^ (k % 8)) << 4) + (mm % 4) * 4;
        return *reinterpret_cast<const uint32_t *>(sa + off);
    };
#pragma unroll
    for (int j = 0; j < C::KSTEPS; j++) {
        const int k = 8 * j + t;
        af[j][0] = at(m, k);
        af[j][1] = at(m + 8, k);
        af[j][2] = at(m, k + 4);
        af[j][3] = at(m + 8, k + 4);
    }
}

/* SWAP's epilogue: the warp's 16 x BN slice of C^T (rows row0 .. of the kernel's M = columns of C, columns
 * n0 .. = rows of C) staged as in epilogue(), then stored transposed: each lane takes 4 consecutive columns
 * of C (16 rows of the slice: a warp's store is 8 rows of C, 64 contiguous bytes of float32 each). M, N:
 * the kernel's (C is N x M). */
template <class T, int BN>
__device__ __forceinline__ void epilogue_t(float *buf, const TypedOut &o, const Epi &ep, bool plain,
                                           const float (&acc)[BN / 2], int row0, int n0, int M, int N) {
    const int lane = threadIdx.x % 32;
    const int rows = min(kEpiRows, M - row0);
    const int mc = 4 * (lane % 4); /* this lane's first slice row: C column row0 + mc */
#pragma unroll 1
    for (int c = 0; c < BN / kEpiCols; c++) {
        stage_chunk<BN>(buf, acc, c, lane / 4, lane % 4);
        __syncwarp();
#pragma unroll
        for (int it = 0; it < kEpiCols / 8; it++) {
            const int j = it * 8 + lane / 4, n = n0 + c * kEpiCols + j; /* C row */
            if (n < N) {
                float r[4];
#pragma unroll
                for (int e = 0; e < 4; e++) r[e] = buf[(mc + e) * kEpiLd + j];
                if (o.vec && mc + 4 <= rows) {
                    store4<T>(o, ep, plain, n, row0 + mc, r);
                } else {
#pragma unroll
                    for (int e = 0; e < 4; e++)
                        if (mc + e < rows) store1<T>(o, ep, n, row0 + mc + e, r[e]);
                }
            }
        }
        __syncwarp();
    }
}

template <class C>
__global__ void __launch_bounds__(C::THREADS, 1)
    gemm_sm90_kernel(const __grid_constant__ CUtensorMap tmA, const __grid_constant__ CUtensorMap tmB,
                     const Params p, TypedOut out, const Epi ep) {
#ifndef ODL_SM90_STUB
    extern __shared__ unsigned char smem_raw[];
    /* 128-byte swizzled tiles must start on 1024-byte boundaries (the descriptors' base offset is 0) */
    unsigned char *smem = reinterpret_cast<unsigned char *>(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
    uint64_t *full = reinterpret_cast<uint64_t *>(smem + C::STAGES * C::STAGE_BYTES);
    uint64_t *empty = full + C::STAGES;
    const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;

    if (threadIdx.x == 0) {
        for (int s = 0; s < C::STAGES; s++) {
            mbar_init(&full[s], 1);             /* the producer's arrive.expect_tx */
            mbar_init(&empty[s], C::CONSUMERS); /* one arrival per consumer warpgroup */
        }
        mbar_fence_init();
        tma_prefetch_desc(&tmA);
        tma_prefetch_desc(&tmB);
    }
    __syncthreads();

    if (wg == 0) {
        /* ---- producer ---- */
        setmaxnreg_dec<C::PRODUCER_REGS>();
        if (tid == 0) {
            int s = 0;
            uint32_t phase = 0;
            for (int u = blockIdx.x; u < p.units; u += gridDim.x) {
                const Unit w = unit_of(p, u, C::BM, C::BN);
                for (int kb = w.kb0; kb < w.kb1; kb++) {
                    mbar_wait(&empty[s], phase ^ 1);
                    unsigned char *sa = smem + s * C::STAGE_BYTES, *sb = sa + C::A_BYTES;
                    mbar_arrive_expect_tx(&full[s], C::STAGE_BYTES);
                    const int k0 = kb * C::BK;
                    if (C::A_MN) {
#pragma unroll
                        for (int c = 0; c < C::BM / C::MN_BOX; c++)
                            tma_load_2d(sa + c * C::BK * kRowBytes, &tmA, &full[s], w.m0 + c * C::MN_BOX, k0);
                    } else {
                        tma_load_2d(sa, &tmA, &full[s], k0, w.m0);
                    }
                    if (C::B_MN) {
#pragma unroll
                        for (int c = 0; c < C::BN / C::MN_BOX; c++)
                            tma_load_2d(sb + c * C::BK * kRowBytes, &tmB, &full[s], w.n0 + c * C::MN_BOX, k0);
                    } else {
                        tma_load_2d(sb, &tmB, &full[s], k0, w.n0);
                    }
                    if (++s == C::STAGES) {
                        s = 0;
                        phase ^= 1;
                    }
                }
            }
        }
        return;
    }

    /* ---- consumers ---- */
    setmaxnreg_inc<C::CONSUMER_REGS>();
    const int cw = wg - 1; /* this warpgroup's 64 rows of the tile */
    /* this warp's epilogue buffer (warps 4.. are the consumers') */
    float *ebuf = reinterpret_cast<float *>(smem + C::STAGES * C::STAGE_BYTES + C::BAR_BYTES) +
                  (threadIdx.x / 32 - 4) * kEpiRows * kEpiLd;
    float acc[C::BN / 2];
    int s = 0;
    uint32_t phase = 0;
    /* descriptor strides: K-major SW128 tiles step 8 rows by 1024 bytes (SBO; LBO unused); MN-major tiles
     * step 8 K rows by 1024 bytes (SBO) and 64-element MN chunks by one box (LBO) */
    constexpr uint32_t kBox = C::BK * kRowBytes;
    const uint32_t a_lbo = C::A_MN ? kBox : 16, b_lbo = C::B_MN ? kBox : 16;
    /* per K step (one wgmma): K-major +32 bytes inside the swizzle row, MN-major +Op::K rows */
    constexpr uint32_t a_kstep = C::A_MN ? C::Op::K * kRowBytes : C::Op::K * C::ESZ;
    constexpr uint32_t b_kstep = C::B_MN ? C::Op::K * kRowBytes : C::Op::K * C::ESZ;
    const uint32_t a_rows = C::A_MN ? cw * kBox : cw * 64 * kRowBytes;

    /* SWAP: this thread's A fragments of the current stage */
    uint32_t af[C::KSTEPS][4];
    const int a_m = cw * 64 + (tid / 32) * 16 + (tid % 32) / 4, a_t = tid % 4;

    for (int u = blockIdx.x; u < p.units; u += gridDim.x) {
        const Unit w = unit_of(p, u, C::BM, C::BN);
        int prev = -1;
        for (int kb = w.kb0; kb < w.kb1; kb++) {
            mbar_wait(&full[s], phase);
            const uint32_t sa = smem_addr(smem + s * C::STAGE_BYTES) + a_rows;
            const uint32_t sb = smem_addr(smem + s * C::STAGE_BYTES + C::A_BYTES);
            if constexpr (C::SWAP) load_a_frags<C>(af, smem + s * C::STAGE_BYTES, a_m, a_t);
            wgmma_fence();
#pragma unroll
            for (int j = 0; j < C::KSTEPS; j++) {
                const uint32_t sc = (kb > w.kb0 || j > 0) ? 1u : 0u;
                const uint64_t db = desc_sw128(sb + j * b_kstep, b_lbo, 1024);
                if constexpr (C::SWAP) WgmmaRegA<C::BN>::run(acc, af[j], db, sc);
                else C::Op::run(acc, desc_sw128(sa + j * a_kstep, a_lbo, 1024), db, sc);
            }
            wgmma_commit();
            if constexpr (C::SWAP) {
                /* the next stage's fragment loads may not overlap this group: ptxas serialises every
                 * wgmma of a kernel where a register input is written while a group is in flight */
                wgmma_wait<0>();
                if (tid == 0) mbar_arrive(&empty[s]);
            } else {
                wgmma_wait<1>(); /* the previous stage's group has retired: release it */
                if (prev >= 0 && tid == 0) mbar_arrive(&empty[prev]);
                prev = s;
            }
            if (++s == C::STAGES) {
                s = 0;
                phase ^= 1;
            }
        }
        wgmma_wait<0>();
        if (prev >= 0 && tid == 0) mbar_arrive(&empty[prev]);
#pragma unroll
        for (int i = 0; i < C::BN / 2; i++) reg_fence(acc[i]);

        /* ---- epilogue (split-K: raw partial sums into this split's float32 slice) ---- */
        TypedOut o = out;
        if (p.splits > 1) o.C = static_cast<float *>(o.C) + (int64_t)w.split * o.zstride;
        const int row0 = w.m0 + cw * 64 + (tid / 32) * 16;
        const bool plain = ep.alpha == 1.0f && ep.beta == 0.0f && !ep.bias && !ep.residual && ep.act == ODL_ACT_NONE;
        if constexpr (C::SWAP) {
            if (row0 < p.M) {
                if (o.ctype == GEMM_T_BF16) epilogue_t<__nv_bfloat16, C::BN>(ebuf, o, ep, plain, acc, row0, w.n0, p.M, p.N);
                else if (o.ctype == GEMM_T_F16) epilogue_t<__half, C::BN>(ebuf, o, ep, plain, acc, row0, w.n0, p.M, p.N);
                else epilogue_t<float, C::BN>(ebuf, o, ep, plain, acc, row0, w.n0, p.M, p.N);
            }
        } else if (plain && o.vec && row0 + 16 <= p.M && w.n0 + C::BN <= p.N) {
            if (o.ctype == GEMM_T_BF16) store_plain<__nv_bfloat16, C::BN>(o, acc, row0, w.n0);
            else if (o.ctype == GEMM_T_F16) store_plain<__half, C::BN>(o, acc, row0, w.n0);
            else store_plain<float, C::BN>(o, acc, row0, w.n0);
        } else if (row0 < p.M) {
            if (o.ctype == GEMM_T_BF16) epilogue<__nv_bfloat16, C::BN>(ebuf, o, ep, plain, acc, row0, w.n0, p.M, p.N);
            else if (o.ctype == GEMM_T_F16) epilogue<__half, C::BN>(ebuf, o, ep, plain, acc, row0, w.n0, p.M, p.N);
            else epilogue<float, C::BN>(ebuf, o, ep, plain, acc, row0, w.n0, p.M, p.N);
        }
    }
#endif
}

/* A 2-D tensor map over a row-major matrix of `rows` rows of `cols` elements, ld elements apart, with a
 * box of box_cols x box_rows, 128-byte swizzle, zeros outside. */
odl_status make_map(CUtensorMap *map, int type, const void *base, int64_t rows, int64_t cols, int64_t ld,
                    int box_cols, int box_rows) {
    PFN_cuTensorMapEncodeTiled_v12000 enc;
    ODL_CHECK(encoder(&enc));
    const int esz = gemm_type_size(type);
    const CUtensorMapDataType dt = type == GEMM_T_BF16  ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                   : type == GEMM_T_F16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                                        : CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
    const cuuint64_t dims[2] = {(cuuint64_t)cols, (cuuint64_t)rows};
    const cuuint64_t strides[1] = {(cuuint64_t)(ld * esz)};
    const cuuint32_t box[2] = {(cuuint32_t)box_cols, (cuuint32_t)box_rows};
    const cuuint32_t estr[2] = {1, 1};
    const CUresult r = enc(map, dt, 2, const_cast<void *>(base), dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
                           CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                           CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS)
        return ODL_ERR(ODL_E_CUDA, "gemm_sm90: cuTensorMapEncodeTiled(%lld x %lld, ld %lld, box %d x %d) failed (%d)",
                       (long long)rows, (long long)cols, (long long)ld, box_cols, box_rows, (int)r);
    return ODL_OK;
}

template <class C>
odl_status launch(const void *A, int64_t lda, const void *B, int64_t ldb, int abtype, const Params &p0,
                  const TypedOut &out, const Epi &ep, int ctas, const char *name) {
    CUtensorMap ma, mb;
    /* A: op(A) is M x K; K-major: rows M of K; M-major: rows K of M. Likewise B with N. */
    if (C::A_MN) ODL_CHECK(make_map(&ma, abtype, A, p0.K, p0.M, lda, C::MN_BOX, C::BK));
    else ODL_CHECK(make_map(&ma, abtype, A, p0.M, p0.K, lda, C::BK, C::BM));
    if (C::B_MN) ODL_CHECK(make_map(&mb, abtype, B, p0.K, p0.N, ldb, C::MN_BOX, C::BK));
    else ODL_CHECK(make_map(&mb, abtype, B, p0.N, p0.K, ldb, C::BK, C::BN));
    auto kern = gemm_sm90_kernel<C>;
    static std::atomic<unsigned long long> opted{0};
    ODL_CHECK(opt_in_smem(kern, C::SMEM_BYTES, opted));
    Params p = p0;
    p.tiles_m = (p.M + C::BM - 1) / C::BM;
    p.tiles_n = (p.N + C::BN - 1) / C::BN;
    p.kblocks = (p.K + C::BK - 1) / C::BK;
    if (p.kblocks < 1) p.kblocks = 1;
    if (p.splits < 1) p.splits = 1;
    if (p.splits > p.kblocks) p.splits = p.kblocks;
    p.kb_chunk = (p.kblocks + p.splits - 1) / p.splits;
    p.splits = (p.kblocks + p.kb_chunk - 1) / p.kb_chunk;
    p.units = p.tiles_m * p.tiles_n * p.splits;
    const int grid = ctas < p.units ? ctas : p.units;
    kern<<<grid, C::THREADS, C::SMEM_BYTES, stream()>>>(ma, mb, p, out, ep);
    ODL_CUDA_LAUNCH_CHECK(name);
    return ODL_OK;
}


template <WgIn IN, int A_MN, int B_MN, int SWAP = 0>
odl_status run_tile(int tile, const void *A, int64_t lda, const void *B, int64_t ldb, int abtype, const Params &p,
                    const TypedOut &out, const Epi &ep, int ctas) {
    /* the rows of gemm_sm90.cu's kTiles, in order */
    switch (tile) {
    case 0: return launch<Cfg<IN, 128, 256, 4, A_MN, B_MN, SWAP>>(A, lda, B, ldb, abtype, p, out, ep, ctas, kTiles[0].name);
    case 1: return launch<Cfg<IN, 128, 128, 6, A_MN, B_MN, SWAP>>(A, lda, B, ldb, abtype, p, out, ep, ctas, kTiles[1].name);
    default: return launch<Cfg<IN, 64, 128, 8, A_MN, B_MN, SWAP>>(A, lda, B, ldb, abtype, p, out, ep, ctas, kTiles[2].name);
    }
}

template <WgIn IN>
odl_status run_layout(bool a_mn, bool b_mn, int tile, const void *A, int64_t lda, const void *B, int64_t ldb,
                      int abtype, const Params &p, const TypedOut &out, const Epi &ep, int ctas) {
    if constexpr (IN == WgIn::TF32) {
        /* an M-major tf32 A is gemm_sm90.cu's swapped product (its A in registers, C stored transposed) */
        if (a_mn) return run_tile<IN, 1, 0, 1>(tile, A, lda, B, ldb, abtype, p, out, ep, ctas);
        return run_tile<IN, 0, 0>(tile, A, lda, B, ldb, abtype, p, out, ep, ctas);
    } else {
        if (!a_mn && !b_mn) return run_tile<IN, 0, 0>(tile, A, lda, B, ldb, abtype, p, out, ep, ctas);
        if (!a_mn && b_mn) return run_tile<IN, 0, 1>(tile, A, lda, B, ldb, abtype, p, out, ep, ctas);
        if (a_mn && !b_mn) return run_tile<IN, 1, 0>(tile, A, lda, B, ldb, abtype, p, out, ep, ctas);
        return run_tile<IN, 1, 1>(tile, A, lda, B, ldb, abtype, p, out, ep, ctas);
    }
}

} // namespace
} // namespace sm90
} // namespace odlk

#endif
