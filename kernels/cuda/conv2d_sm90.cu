/* Hopper (compute capability 9.0) TF32 and BF16 convolutions on wgmma: the forward and the stride-1 data
 * gradient of conv2d_tc.cu's implicit GEMMs (formulas in conv2d.cu's file comment) in TF32 and BF16, and the
 * TF32 weight gradient, compiled for sm_90a only (CMake: the odl_sm90a objects, as gemm_sm90.cu).
 * conv2d_tc.cu's mma.sync kernels read each operand element from shared memory into registers, round it
 * and feed mma.sync: at MNIST conv2 on an H200 that reached 40 of the ~400 TFLOP/s the TF32 tensor cores
 * have. Here wgmma does the multiplying for a whole warpgroup and reads the weights from shared memory.
 *
 * Forward and data gradient: the product is taken transposed, pixels as wgmma's M and output channels as N:
 *   D[pixel][channel] = sum_k B^T[pixel][k] * W[channel][k]
 * so that a layer of 16..64 channels fills a wgmma m64nN (N = the channel tile, 32 or 64) without rows of
 * zeros. Shared-memory tiles are K-major, rows of 128 bytes with the 16-byte chunks swizzled by row % 8 (the
 * 128-byte swizzle of the descriptors).
 *   - CTA: 128 pixels x BN channels, 3 warpgroups, two CTAs per multiprocessor (one's epilogue beside the
 *     other's main loop). Warpgroup 0 produces: each thread gathers 4 pixel rows of every stage by 4-byte
 *     cp.async (zero-filled outside the image, past K, past the pixels), lanes taking 8 rows x 4
 *     consecutive k (conflict-free swizzled stores), and copies the weights, packed and rounded once per
 *     call, by 16-byte cp.async; each thread's copies arrive on the stage's "full" mbarrier when they land
 *     (cp.async.mbarrier.arrive.noinc). Warpgroups 1 and 2 consume, 64 pixels each: they read their A
 *     fragments from the float32 ring and round them to nearest even (wgmma itself would truncate float32
 *     operands, a bias that moved YOLOv5n's tf32 confidences by 0.02: docs/PRECISION.md), fence the
 *     generic proxy's writes for the async proxy and issue register-operand wgmmas, then release the stage.
 *   - Epilogue: each consumer warp stages its 16 pixels x 32 channels at a time in the (by then idle) ring
 *     and stores them channel by channel, 16 consecutive pixels per half warp (NCHW: contiguous), through
 *     gemm_core.cuh's epi_store1 (bias per channel, activation, residual).
 * Weight gradient: pixels as K (their contiguous direction), both operands in shared memory (TF32 read
 * toward zero), split over the pixels (below). Deterministic throughout: one CTA per output element, k in
 * a fixed order, split partials added in order.
 */
#include <limits.h>

#include <algorithm>
#include <atomic>
#include <type_traits>

#include <cuda_bf16.h>

#include "conv2d_sm90.h"
#include "gemm_sm90.h"
#include "odl/env.h"
#include "sm90_util.cuh"
#include "wgmma_ops.cuh"

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define ODL_CONV_SM90_STUB 1 /* a device pass other than sm_90a: the kernel compiles to nothing */
#endif

namespace odlk {
namespace sm90 {
namespace {


/* Byte offset of byte b (0..127) of row `row` in a K-major tile of 128-byte rows whose 16-byte chunks are
 * swizzled by row % 8 (the descriptors' 128-byte swizzle). */
__device__ __forceinline__ uint32_t sw128(int row, uint32_t b) {
    return (uint32_t)row * kRowBytes + ((((b >> 4) ^ (uint32_t)(row & 7))) << 4) + (b & 15);
}

/* A producer thread's share of the gathered operand: pixel rows pw*32 + 8j + nr (j < PJ) of the CTA's 128,
 * their window origins, and the cp.async of one k of all of them into a K-major swizzled tile. */
template <int PJ>
struct PixelRows {
    int base[PJ], hb[PJ], wb[PJ];
    __device__ __forceinline__ PixelRows(const ConvGatherParams &g, int p0, int pw, int nr) {
#pragma unroll
        for (int j = 0; j < PJ; j++) conv_gather_col(g, p0 + pw * 32 + j * 8 + nr, base[j], hb[j], wb[j]);
    }
    /* Column k of the rows into the tile at sa (row r at sa + r * 128; sw: the byte offset of k's slot in a
     * row, the same for every row of this thread since they agree mod 8), zeros outside the source. */
    __device__ __forceinline__ void copy(const ConvGatherParams &g, uint32_t sa, int pw, int nr, int k, uint32_t sw) const {
        int off, dr, ds;
        conv_gather_row(g, k, off, dr, ds);
#pragma unroll
        for (int j = 0; j < PJ; j++) {
            const bool ok = conv_gather_inside(g, hb[j], wb[j], dr, ds);
            cp_async4(sa + (uint32_t)(pw * 32 + j * 8 + nr) * kRowBytes + sw, ok ? g.src + (base[j] + off) : g.src, ok);
        }
    }
};

/* The weight gradient's consumer warpgroup: its main loop over kblocks stages of the ring: wait for the
 * stage's copies, make them visible to the async proxy, BK / 8 wgmma m64nBNk8 on the stage's A rows and the
 * B rows after them, one group in flight, each stage released once its group retired. acc holds zeros where
 * kblocks is 0. */
template <class C>
__device__ __forceinline__ void consume(float (&acc)[C::BN / 2], unsigned char *smem, uint64_t *full, uint64_t *empty,
                                        int kblocks) {
    const int tid = threadIdx.x % 128;
#pragma unroll
    for (int i = 0; i < C::BN / 2; i++) acc[i] = 0.0f;
    int s = 0, prev = -1;
    uint32_t phase = 0;
    for (int kb = 0; kb < kblocks; kb++) {
        mbar_wait(&full[s], phase);
        fence_proxy_async_shared();
        const uint32_t sa = smem_addr(smem + s * C::STAGE_BYTES);
        const uint32_t sb = smem_addr(smem + s * C::STAGE_BYTES + C::A_BYTES);
        wgmma_fence();
#pragma unroll
        for (int j = 0; j < C::BK / C::Op::K; j++) {
            const uint32_t step = j * C::Op::K * 4; /* +32 bytes per k8 inside the swizzle row */
            C::Op::run(acc, desc_sw128(sa + step, 16, 1024), desc_sw128(sb + step, 16, 1024), (kb > 0 || j > 0) ? 1u : 0u);
        }
        wgmma_commit();
        wgmma_wait<1>(); /* the previous stage's group has retired: release it */
        if (prev >= 0 && tid == 0) mbar_arrive(&empty[prev]);
        prev = s;
        if (++s == C::STAGES) {
            s = 0;
            phase ^= 1;
        }
    }
    wgmma_wait<0>();
    if (prev >= 0 && tid == 0) mbar_arrive(&empty[prev]);
#pragma unroll
    for (int i = 0; i < C::BN / 2; i++) reg_fence(acc[i]);
}

/* The forward kernel's epilogue: each consumer warp's 16 pixels x BN channels through its staging slice of
 * the (idle) ring, channel by channel, 16 consecutive pixels per half warp. */
template <int BN>
__device__ __forceinline__ void store_pixels_channels(const float (&acc)[BN / 2], unsigned char *smem, int p0, int c0,
                                                      int cw, int M, int N, const OutNCHW &out, const Epi &ep) {
    named_barrier(1, 256); /* both consumer warpgroups are done with the ring */
    const int tid = threadIdx.x % 128, lane = threadIdx.x % 32;
    float *buf = reinterpret_cast<float *>(smem) + (threadIdx.x / 32 - 4) * kEpiRows * kEpiLd;
    const int prow = lane & 15, half = lane >> 4;
    const int pix = p0 + cw * 64 + (tid / 32) * 16 + prow;
#pragma unroll 1
    for (int c = 0; c < BN / kEpiCols; c++) {
        stage_chunk<BN>(buf, acc, c, lane / 4, lane % 4);
        __syncwarp();
        if (pix < N) {
#pragma unroll 4
            for (int e = 0; e < kEpiCols / 2; e++) {
                const int col = 2 * e + half, ch = c0 + c * kEpiCols + col;
                if (ch < M) epi_store1(out, ep, ch, pix, buf[prow * kEpiLd + col]);
            }
        }
        __syncwarp();
    }
}


/* ---- forward / stride-1 data gradient, TF32 or BF16, rounded to nearest even ----
 * Rounded as the mma.sync kernels and the CPU twin round (truncation, which wgmma applies to float32 in
 * shared memory, biases every product low: see docs/PRECISION.md). The gathered operand stays float32 in
 * the ring (128-byte-row tiles of 32 k, BK / 32 tiles per stage) and each consumer thread reads its wgmma A fragment from it and rounds it
 * (TF32: round_tf32_rne; BF16: two consecutive k per 8-byte load, cvt.rn.bf16x2), wgmma taking A from
 * registers; the weights are packed rounded once per call (zero-padded to whole tiles) and copied 16 bytes
 * at a time into a K-major swizzled tile. ptxas serialises the wgmma of a kernel whose register operand is
 * written while a group is in flight, so a stage's fragments are all loaded first and its group retired
 * before the next stage's loads. */
template <bool BF16_, int BN_>
struct ConvRegCfg {
    static constexpr bool BF16 = BF16_;
    static constexpr int BM = 128, BN = BN_, THREADS = 384;
    static constexpr int BK = BF16 ? 64 : 32;         /* k per stage: one 128-byte row of the packed weights */
    static constexpr int STAGES = BF16 ? 2 : 4;
    static constexpr int A_SUB = BM * kRowBytes;      /* float32: 32 k of every pixel row */
    static constexpr int A_BYTES = (BK / 32) * A_SUB, B_BYTES = BN * kRowBytes;
    static constexpr int STAGE_BYTES = A_BYTES + B_BYTES, RING_BYTES = STAGES * STAGE_BYTES;
    static constexpr int SMEM_BYTES = RING_BYTES + 2 * STAGES * 8 + 1024;
    static constexpr int KSTEP = BF16 ? 16 : 8;       /* k per wgmma */
    using T = typename std::conditional<BF16, __nv_bfloat16, float>::type; /* packed weight element */
    static_assert(BN % 32 == 0 && BN <= 64, "channel tiles of 32 or 64");
    static_assert(8 * kEpiRows * kEpiLd * 4 <= RING_BYTES, "staging fits in the ring");
    static_assert(2 * SMEM_BYTES <= 227 * 1024, "two CTAs per multiprocessor");
};

__device__ __forceinline__ void put_rounded(float v, float *p) { *p = round_tf32_rne(v); }
__device__ __forceinline__ void put_rounded(float v, __nv_bfloat16 *p) { *p = __float2bfloat16_rn(v); }

/* wpk[m][k] = round(w[m][k]) (TF32 or BF16, nearest even) for m < M, k < Kd, zeros to Mpad x Kpad;
 * transposed (the data gradient's A): element (c, kk*RS + rs) is w[kk][c][rs] of a [Kout][Cin][RS] weight
 * with Cin = M. */
template <class T>
__global__ void pack_weights(const float *__restrict__ w, int M, int Kd, int Mpad, int Kpad, int transposed, int RS,
                             T *__restrict__ wpk) {
    const int64_t total = (int64_t)Mpad * Kpad;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        const int m = (int)(i / Kpad), k = (int)(i % Kpad);
        float v = 0.0f;
        if (m < M && k < Kd) v = transposed ? w[((int64_t)(k / RS) * M + m) * RS + k % RS] : w[(int64_t)m * Kd + k];
        put_rounded(v, &wpk[i]);
    }
}

template <class C>
__device__ __forceinline__ void produce_reg(const ConvGatherParams &g, const typename C::T *__restrict__ wpk, int Kpad,
                                            int p0, int c0, int kblocks, unsigned char *smem, uint64_t *full,
                                            uint64_t *empty) {
    const int tid = threadIdx.x % 128, pw = tid / 32, lane = tid % 32, ks = lane & 3, nr = lane >> 2;
    const PixelRows<C::BM / 32> px(g, p0, pw, nr);
    constexpr int PER_CHUNK = 16 / (int)sizeof(typename C::T); /* weight elements per 16-byte chunk */
    int s = 0;
    uint32_t phase = 0;
    for (int kb = 0; kb < kblocks; kb++) {
        mbar_wait(&empty[s], phase ^ 1);
        const uint32_t sa = smem_addr(smem + s * C::STAGE_BYTES), sb = sa + C::A_BYTES;
#pragma unroll
        for (int kk = 0; kk < C::BK / 4; kk++) /* tile kk / 8, chunk kk % 8 */
            px.copy(g, sa + (kk / 8) * C::A_SUB, pw, nr, kb * C::BK + kk * 4 + ks, (uint32_t)((((kk % 8) ^ nr) << 4) + ks * 4));
        /* the packed weights: BN rows of 8 16-byte chunks, all inside the padded buffer */
#pragma unroll
        for (int i = tid; i < C::BN * 8; i += 128) {
            const int row = i >> 3, ch = i & 7;
            cp_async16(sb + sw128(row, (uint32_t)ch * 16),
                       wpk + (int64_t)(c0 + row) * Kpad + kb * C::BK + ch * PER_CHUNK);
        }
        cp_async_mbar_arrive(&full[s]);
        if (++s == C::STAGES) {
            s = 0;
            phase ^= 1;
        }
    }
}

/* Element k of a row of a 32-k float32 tile (128-byte rows, 16-byte chunks swizzled by row). */
__device__ __forceinline__ const float *tile_at(const unsigned char *tile, int row, int k) {
    return reinterpret_cast<const float *>(tile + sw128(row, (uint32_t)k * 4));
}
/* TF32 of one element, nearest even, as the register a tf32 wgmma reads. */
__device__ __forceinline__ uint32_t tf32_at(const unsigned char *tile, int row, int k) {
    return __float_as_uint(round_tf32_rne(*tile_at(tile, row, k)));
}
/* Two consecutive k (k even) rounded to a bfloat16 pair, the lower k in the low half. */
__device__ __forceinline__ uint32_t bf16_pair(const unsigned char *tile, int row, int k) {
    const float2 v = *reinterpret_cast<const float2 *>(tile_at(tile, row, k));
    const __nv_bfloat162 b = __floats2bfloat162_rn(v.x, v.y);
    return *reinterpret_cast<const uint32_t *>(&b);
}

template <class C>
__device__ __forceinline__ void consume_reg(float (&acc)[C::BN / 2], unsigned char *smem, uint64_t *full,
                                            uint64_t *empty, int kblocks, int cw) {
    const int tid = threadIdx.x % 128, g = (tid % 32) >> 2, t = tid & 3;
    const int r0 = cw * 64 + (tid / 32) * 16 + g; /* this thread's fragment rows r0, r0 + 8 */
#pragma unroll
    for (int i = 0; i < C::BN / 2; i++) acc[i] = 0.0f;
    int s = 0;
    uint32_t phase = 0;
    for (int kb = 0; kb < kblocks; kb++) {
        mbar_wait(&full[s], phase);
        fence_proxy_async_shared();
        const unsigned char *st = smem + s * C::STAGE_BYTES;
        constexpr int STEPS = C::BK / C::KSTEP;
        uint32_t af[STEPS][4];
#pragma unroll
        for (int j = 0; j < STEPS; j++) {
            const int kj = j * C::KSTEP; /* the step's first k in the stage */
            const unsigned char *tile = st + (kj / 32) * C::A_SUB;
            const int k = kj % 32;
            if constexpr (C::BF16) { /* m64k16: k pairs 2t (+8) of rows g (+8) */
                af[j][0] = bf16_pair(tile, r0, k + 2 * t);
                af[j][1] = bf16_pair(tile, r0 + 8, k + 2 * t);
                af[j][2] = bf16_pair(tile, r0, k + 2 * t + 8);
                af[j][3] = bf16_pair(tile, r0 + 8, k + 2 * t + 8);
            } else { /* m64k8: k t (+4) of rows g (+8) */
                af[j][0] = tf32_at(tile, r0, k + t);
                af[j][1] = tf32_at(tile, r0 + 8, k + t);
                af[j][2] = tf32_at(tile, r0, k + t + 4);
                af[j][3] = tf32_at(tile, r0 + 8, k + t + 4);
            }
        }
        const uint32_t sb = smem_addr(st + C::A_BYTES);
        wgmma_fence();
#pragma unroll
        for (int j = 0; j < STEPS; j++) { /* +32 bytes of packed weights per step */
            const uint64_t db = desc_sw128(sb + j * 32, 16, 1024);
            const uint32_t sc = (kb > 0 || j > 0) ? 1u : 0u;
            if constexpr (C::BF16) WgmmaRegABf16<C::BN>::run(acc, af[j], db, sc);
            else WgmmaRegA<C::BN>::run(acc, af[j], db, sc);
        }
        wgmma_commit();
        wgmma_wait<0>();
        /* every warp's ordinary loads of the stage's A are done before it is handed back (wgmma's completion
         * alone speaks for the warps' wgmma reads) */
        if (cw == 0) named_barrier_c<2, 128>();
        else named_barrier_c<3, 128>();
        if (tid == 0) mbar_arrive(&empty[s]);
        if (++s == C::STAGES) {
            s = 0;
            phase ^= 1;
        }
    }
#pragma unroll
    for (int i = 0; i < C::BN / 2; i++) reg_fence(acc[i]);
}

template <class C>
__global__ void __launch_bounds__(C::THREADS, 2)
    conv_reg_sm90_kernel(const ConvGatherParams g, const typename C::T *__restrict__ wpk, int Kpad, int M,
                         const OutNCHW out, const Epi ep) {
#ifndef ODL_CONV_SM90_STUB
    extern __shared__ unsigned char smem_raw[];
    unsigned char *smem = reinterpret_cast<unsigned char *>(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
    uint64_t *full = reinterpret_cast<uint64_t *>(smem + C::RING_BYTES);
    uint64_t *empty = full + C::STAGES;
    const int wg = threadIdx.x / 128;
    const int p0 = blockIdx.x * C::BM, c0 = blockIdx.y * C::BN;
    const int kblocks = (g.rows + C::BK - 1) / C::BK;
    if (threadIdx.x == 0) {
        for (int s = 0; s < C::STAGES; s++) {
            mbar_init(&full[s], 128);
            mbar_init(&empty[s], 2);
        }
        mbar_fence_init();
    }
    __syncthreads();
    if (wg == 0) {
        produce_reg<C>(g, wpk, Kpad, p0, c0, kblocks, smem, full, empty);
        return;
    }
    float acc[C::BN / 2];
    consume_reg<C>(acc, smem, full, empty, kblocks, wg - 1);
    store_pixels_channels<C::BN>(acc, smem, p0, c0, wg - 1, M, g.cols, out, ep);
#endif
}

/* ---- the weight gradient: D[k][crs] = sum_pixels dy[k][pixel] * im2col[crs][pixel] ----
 * Both operands are K-major with the pixels as K, the contiguous direction of NCHW: a producer warp fills one
 * 128-byte row (32 pixels) per cp.async, lane = pixel (the swizzled chunks of one row: 32 distinct banks).
 * CTA: 64 output channels x 96 columns (C*R*S), one consumer warpgroup, the pixels of one split. */
struct WgradCfg {
    static constexpr int BM = 64, BN = 96, BK = kRowBytes / 4, STAGES = 4, THREADS = 256;
    static constexpr int A_BYTES = BM * kRowBytes, B_BYTES = BN * kRowBytes, STAGE_BYTES = A_BYTES + B_BYTES;
    static constexpr int RING_BYTES = STAGES * STAGE_BYTES;
    static constexpr int TABLE_BYTES = BN * 16; /* per B row: the (c, r, s) offset, r, s */
    static constexpr int SMEM_BYTES = RING_BYTES + 2 * STAGES * 8 + TABLE_BYTES + 1024;
    using Op = Wgmma<WgIn::TF32, BN, 0, 0>;
    static_assert(4 * kEpiRows * kEpiLd * 4 <= RING_BYTES, "staging fits in the ring");
    static_assert(2 * SMEM_BYTES <= 227 * 1024, "two CTAs per multiprocessor");
    static_assert(BM % 4 == 0 && BN % 4 == 0, "rows split over the producer warps");
};

template <class C>
__global__ void __launch_bounds__(C::THREADS, 2)
    conv_wgrad_sm90_kernel(const ConvWgradParams g, int NPQ, int chunk, OutRowMajor out) {
#ifndef ODL_CONV_SM90_STUB
    extern __shared__ unsigned char smem_raw[];
    unsigned char *smem = reinterpret_cast<unsigned char *>(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
    uint64_t *full = reinterpret_cast<uint64_t *>(smem + C::RING_BYTES);
    uint64_t *empty = full + C::STAGES;
    int4 *table = reinterpret_cast<int4 *>(empty + C::STAGES);
    const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;
    const int M = g.K, N = g.C * g.R * g.S;
    const int n0 = blockIdx.x * C::BN, m0 = blockIdx.y * C::BM;
    const int j0 = blockIdx.z * chunk, j1 = (int)min((int64_t)NPQ, (int64_t)j0 + chunk); /* j0 + chunk may pass 2^31 */
    const int kblocks = (j1 - j0 + C::BK - 1) / C::BK;

    if (threadIdx.x == 0) {
        for (int s = 0; s < C::STAGES; s++) {
            mbar_init(&full[s], 128);
            mbar_init(&empty[s], 1);
        }
        mbar_fence_init();
    }
    if (wg == 0) {
        for (int i = tid; i < C::BN; i += 128) {
            int c = 0, rs = 0, r = 0, sx = 0;
            const int col = n0 + i;
            if (col < N) {
                g.fRS.divmod(col, c, rs);
                g.fS.divmod(rs, r, sx);
            }
            /* a column past N: r outside every row */
            table[i] = make_int4(c * g.H * g.W + r * g.W + sx, col < N ? r : kGatherRowOut, sx, 0);
        }
    }
    __syncthreads();

    if (wg == 0) {
        /* ---- producer: lane = pixel of the stage, warp pw = rows pw, pw + 4, ... ---- */
        const int pw = tid / 32, lane = tid % 32;
        const int KPQ = g.K * g.P * g.Q, CHW = g.C * g.H * g.W, PQ = g.P * g.Q;
        int s = 0;
        uint32_t phase = 0;
        for (int kb = 0; kb < kblocks; kb++) {
            const int j = j0 + kb * C::BK + lane;
            const bool jin = j < j1;
            int img = 0, pq = 0, p = 0, q = 0;
            if (jin) {
                g.fPQ.divmod(j, img, pq);
                g.fQ.divmod(pq, p, q);
            }
            const float *dyb = g.dy + (int64_t)img * KPQ + pq;
            const int hb = jin ? p * g.sh - g.ph : kGatherColOut, wb = q * g.sw - g.pw;
            const float *xb = g.x + (int64_t)img * CHW + (int64_t)hb * g.W + wb; /* kGatherColOut * W: 64-bit */
            mbar_wait(&empty[s], phase ^ 1);
            const uint32_t sa = smem_addr(smem + s * C::STAGE_BYTES), sb = sa + C::A_BYTES;
#pragma unroll 4
            for (int i = 0; i < C::BM / 4; i++) {
                const int row = pw + 4 * i;
                const bool ok = jin && m0 + row < M;
                cp_async4(sa + sw128(row, (uint32_t)lane * 4), ok ? dyb + (int64_t)(m0 + row) * PQ : g.dy, ok);
            }
#pragma unroll 4
            for (int i = 0; i < C::BN / 4; i++) {
                const int row = pw + 4 * i;
                const int4 t = table[row];
                const bool ok = (unsigned)(hb + t.y) < (unsigned)g.H && (unsigned)(wb + t.z) < (unsigned)g.W;
                cp_async4(sb + sw128(row, (uint32_t)lane * 4), ok ? xb + t.x : g.x, ok);
            }
            cp_async_mbar_arrive(&full[s]);
            if (++s == C::STAGES) {
                s = 0;
                phase ^= 1;
            }
        }
        return;
    }

    /* ---- consumer ---- */
    float acc[C::BN / 2];
    consume<C>(acc, smem, full, empty, kblocks);

    /* ---- epilogue: rows m0 + 16 warp .., 32 columns at a time, a row's 32 columns per store ---- */
    named_barrier(1, 128);
    out.select_split(blockIdx.z);
    const int lane = threadIdx.x % 32, warp = tid / 32;
    float *buf = reinterpret_cast<float *>(smem) + warp * kEpiRows * kEpiLd;
    const int row0 = m0 + warp * 16;
#pragma unroll 1
    for (int c = 0; c < C::BN / kEpiCols; c++) {
        stage_chunk<C::BN>(buf, acc, c, lane / 4, lane % 4);
        __syncwarp();
        const int col = n0 + c * kEpiCols + lane;
        if (col < N) {
#pragma unroll 4
            for (int r = 0; r < kEpiRows; r++)
                if (row0 + r < M) out.C[out.off(row0 + r, col)] = buf[r * kEpiLd + lane];
        }
        __syncwarp();
    }
#endif
}

int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* The channel tile of a forward / data-gradient product of M channels (ConvRegCfg's BN). */
int channel_tile(int64_t M) { return M <= 32 ? 32 : 64; }

/* Whether the kernels' grids and 32-bit indices take the sizes (grid y at most 65535 tiles). */
bool fwd_fits(int64_t M, int64_t N) { return cdiv(M, 32) <= 65535 && N <= INT_MAX - 128; }
bool wgrad_fits(int64_t M, int64_t N, int64_t NPQ) {
    return cdiv(M, WgradCfg::BM) <= 65535 && NPQ <= INT_MAX - WgradCfg::BK && M * N < INT_MAX;
}

} // namespace

bool conv_use(int64_t M, int64_t N, int64_t Kd, bool bf16) {
    const int64_t mode = odl_env_int(ODL_ENV_CONV_SM90);
    if (mode == 0 || !fwd_fits(M, N) || !available()) return false;
    if (mode == 2) return true;
    /* Mode 1 takes what the kernel lab measured faster than the mma.sync kernels (H100, 2026-12-06,
     * bench/results/2026-12-06/seventh): TF32 with 64-channel tiles, a reduction of at least 256 and tiles
     * that fill the multiprocessors (MNIST conv2's forward 1.11-1.21x). Slower there: every BF16 product
     * (0.75-0.92x: the float32 ring gives up BF16's halved gather), 32-channel tiles (conv2's data gradient
     * at batch 512, 0.85x) and short reductions (YOLOv5n's stem, k = 108, and 1x1 layers: 0.71-0.82x). */
    return !bf16 && channel_tile(M) == 64 && Kd >= 256 && cdiv(N, 128) * cdiv(M, channel_tile(M)) >= sm_count();
}

bool conv_wgrad_use(int64_t M, int64_t N, int64_t NPQ) {
    return odl_env_int(ODL_ENV_CONV_SM90) != 0 && wgrad_fits(M, N, NPQ) && available();
}


template <bool BF16, int BN>
odl_status launch_reg(const ConvGatherParams &g, const void *wpk, int Kpad, int M, int N, const OutNCHW &out,
                      const Epi &ep) {
    using C = ConvRegCfg<BF16, BN>;
    static std::atomic<unsigned long long> opted{0};
    ODL_CHECK(opt_in_smem(conv_reg_sm90_kernel<C>, C::SMEM_BYTES, opted));
    const dim3 grid((unsigned)cdiv(N, C::BM), (unsigned)cdiv(M, BN));
    conv_reg_sm90_kernel<C><<<grid, C::THREADS, C::SMEM_BYTES, stream()>>>(
        g, static_cast<const typename C::T *>(wpk), Kpad, M, out, ep);
    return ODL_OK;
}

odl_status conv_rounded(const ConvGatherParams &g, const float *w, bool transposed, int RS, bool bf16, int M, int N,
                        int Kd, const OutNCHW &out, const Epi &ep, const char *what) {
    if (M <= 0 || N <= 0) return ODL_OK;
    if (!fwd_fits(M, N) || Kd <= 0)
        return ODL_ERR(ODL_E_INVAL, "%s: %d channels x %d pixels x %d is outside the wgmma convolution (conv_use)",
                       what, M, N, Kd);
    const int BN = channel_tile(M), BK = bf16 ? 64 : 32;
    const int Mpad = (int)(cdiv(M, BN) * BN), Kpad = (int)(cdiv(Kd, BK) * BK);
    void *wpk = nullptr;
    ODL_CHECK(workspace((size_t)Mpad * Kpad * (bf16 ? 2 : 4), &wpk));
    const unsigned blocks = grid_for((int64_t)Mpad * Kpad, 256);
    if (bf16)
        pack_weights<__nv_bfloat16><<<blocks, 256, 0, stream()>>>(w, M, Kd, Mpad, Kpad, transposed ? 1 : 0, RS,
                                                                  static_cast<__nv_bfloat16 *>(wpk));
    else
        pack_weights<float><<<blocks, 256, 0, stream()>>>(w, M, Kd, Mpad, Kpad, transposed ? 1 : 0, RS,
                                                          static_cast<float *>(wpk));
    ODL_CUDA_LAUNCH_CHECK("odl_conv2d_pack_weights");
    odl_status st;
    if (bf16) st = BN == 32 ? launch_reg<true, 32>(g, wpk, Kpad, M, N, out, ep) : launch_reg<true, 64>(g, wpk, Kpad, M, N, out, ep);
    else st = BN == 32 ? launch_reg<false, 32>(g, wpk, Kpad, M, N, out, ep) : launch_reg<false, 64>(g, wpk, Kpad, M, N, out, ep);
    ODL_CHECK(st);
    ODL_CUDA_LAUNCH_CHECK(what);
    return ODL_OK;
}

odl_status conv_wgrad_tf32(const ConvWgradParams &g, float *dw, const char *what) {
    using C = WgradCfg;
    const int64_t M = g.K, N = (int64_t)g.C * g.R * g.S, NPQ = (int64_t)g.N * g.P * g.Q;
    if (M <= 0 || N <= 0) return ODL_OK;
    if (NPQ == 0) { /* no images: an empty sum (chunk below would be 0) */
        ODL_CUDA_CALL(cudaMemsetAsync(dw, 0, (size_t)(M * N) * sizeof(float), stream()));
        return ODL_OK;
    }
    const int64_t tn = cdiv(N, C::BN), tm = cdiv(M, C::BM);
    if (!wgrad_fits(M, N, NPQ))
        return ODL_ERR(ODL_E_INVAL, "%s: %lld x %lld x %lld is outside the wgmma weight gradient (conv_wgrad_use)",
                       what, (long long)M, (long long)N, (long long)NPQ);
    /* split the pixels until two CTAs per multiprocessor are busy, each split 8 stages deep at least */
    int64_t splits = cdiv(2 * (int64_t)sm_count(), tn * tm);
    splits = std::max<int64_t>(1, std::min<int64_t>({splits, 256, NPQ / (8 * C::BK)}));
    const int chunk = (int)(cdiv(cdiv(NPQ, splits), C::BK) * C::BK);
    splits = std::max<int64_t>(1, cdiv(NPQ, chunk));
    OutRowMajor fin = {dw, N, 0, false}, part = fin;
    if (splits > 1) {
        void *ws = nullptr;
        ODL_CHECK(workspace((size_t)(splits * M * N) * sizeof(float), &ws));
        part.C = static_cast<float *>(ws);
        part.zstride = M * N;
    }
    auto kern = conv_wgrad_sm90_kernel<C>;
    static std::atomic<unsigned long long> opted{0};
    ODL_CHECK(opt_in_smem(kern, C::SMEM_BYTES, opted));
    kern<<<dim3((unsigned)tn, (unsigned)tm, (unsigned)splits), C::THREADS, C::SMEM_BYTES, stream()>>>(
        g, (int)NPQ, chunk, splits > 1 ? part : fin);
    ODL_CUDA_LAUNCH_CHECK(what);
    if (splits == 1) return ODL_OK;
    return splitk_reduce(part, (int)splits, (int)M, (int)N, fin, epi_raw(), "odl_conv2d_bwd_weight_sm90_reduce");
}

} // namespace sm90
} // namespace odlk
