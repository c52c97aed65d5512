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
 * NHWC variant (conv_fwd_sm90_kernel on a ConvNhwcCfg, where the gathered tensor's channels are whole 16-byte chunks): the
 * source copied to NHWC and rounded first, the reduction tap-major, 16-byte copies, both wgmma operands from
 * shared memory (comment above NhwcGather).
 * Window patch (conv_patch_sm90_kernel, stride 1, opt-in by ODL_CONV_PATCH=1, then taken first where it
 * fits): no gather at all; each CTA copies the rows of the source its 128 pixels' windows cover from NCHW
 * into shared memory once, and every tap is a shifted wgmma descriptor over them (comment above
 * PatchGather).
 * Weight gradient: pixels as K (their contiguous direction), both operands in shared memory (TF32 read
 * toward zero; BF16 rounded in place by the consumers, or from rounded copies with
 * ODL_CONV_WGRAD_BF16_STAGE=0), split over the pixels, two producer warpgroups, and the bias gradient summed from the dy rows in
 * the ring (WgradCfg, below). Deterministic throughout: one CTA per output element, k in a fixed order,
 * split partials added in a fixed order.
 */
#include <limits.h>

#include <algorithm>
#include <atomic>
#include <type_traits>

#include <cuda_bf16.h>

#include "conv2d_sm90.h"
#include "gemm_sm90.h"
#include "odl/env.h"
#include "conv_sm90_core.cuh"
#include "sm90_util.cuh"
#include "wgmma_ops.cuh"

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define ODL_CONV_SM90_STUB 1 /* a device pass other than sm_90a: the kernel compiles to nothing */
#endif

namespace odlk {
namespace sm90 {
namespace {


/* Producer thread tid's (0..127) share of one stage of packed weights: rows c0 .. c0 + BN - 1 of wpk (rows
 * of Kpad elements, all inside the padded buffer) from element k0 on, 128 bytes each as 8 16-byte
 * cp.async into the K-major swizzled tile at sb. */
template <int BN, class T>
__device__ __forceinline__ void copy_weights(uint32_t sb, const T *__restrict__ wpk, int Kpad, int c0, int64_t k0,
                                             int tid) {
#pragma unroll
    for (int i = tid; i < BN * 8; i += 128) {
        const int row = i >> 3, chunk = i & 7;
        cp_async16(sb + sw128(row, (uint32_t)chunk * 16),
                   wpk + (int64_t)(c0 + row) * Kpad + k0 + chunk * (16 / (int)sizeof(T)));
    }
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

/* The output pixel of tile row r (0..127) of the kernels with pixels contiguous in the tile: p0 + r, -1 past
 * the N pixels. */
struct LinearPixels {
    int p0, N;
    __device__ __forceinline__ int operator()(int r) const { return p0 + r < N ? p0 + r : -1; }
};

/* The forward kernels' epilogue: each consumer warp's 16 pixels x BN channels through its staging slice of
 * the (idle) shared memory, channel by channel, 16 pixels per half warp; pixel_of(tile row) is the output
 * pixel of a row, -1 for none. */
template <int BN, class PixelOf>
__device__ __forceinline__ void store_pixels_channels(const float (&acc)[BN / 2], unsigned char *smem, const PixelOf &pixel_of,
                                                      int c0, int cw, int M, const OutNCHW &out, const Epi &ep) {
    named_barrier(1, 256); /* both consumer warpgroups are done with the ring */
    const int tid = threadIdx.x % 128, lane = threadIdx.x % 32;
    float *buf = reinterpret_cast<float *>(smem) + (threadIdx.x / 32 - 4) * kEpiRows * kEpiLd;
    const int prow = lane & 15, half = lane >> 4;
    const int pix = pixel_of(cw * 64 + (tid / 32) * 16 + prow);
#pragma unroll 1
    for (int c = 0; c < BN / kEpiCols; c++) {
        stage_chunk<BN>(buf, acc, c, lane / 4, lane % 4);
        __syncwarp();
        if (pix >= 0) {
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
    static constexpr bool BF16 = BF16_, NHWC = false;
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

/* wpk[m][k] = round(W[m][k]) (TF32 or BF16, nearest even) for m < M, k < Kd = Ch * RS, zeros to Mpad x Kpad.
 * W[m][(c, rs)] is w[m][c][rs] of a [M][Ch][RS] weight, or, transposed (the data gradient's A), w[c][m][rs] of
 * a [Ch][M][RS] one (Ch = the convolution's output channels, M its input channels). k orders (c, rs) channel
 * major, k = c * RS + rs (the NCHW gather's rows), or tap major, k = rs * Chp + c (the NHWC gather's, Chp =
 * Ch; the window patch's, Chp = Ch padded to whole slabs, zeros for c >= Ch). */
template <class T>
__global__ void pack_weights(const float *__restrict__ w, int M, int Ch, int Chp, int RS, int Mpad, int Kpad,
                             int transposed, int tap_major, T *__restrict__ wpk) {
    const int64_t total = (int64_t)Mpad * Kpad;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        const int m = (int)(i / Kpad), k = (int)(i % Kpad);
        const int c = tap_major ? k % Chp : k / RS, rs = tap_major ? k / Chp : k % RS;
        float v = 0.0f;
        if (m < M && c < Ch && rs < RS) {
            v = transposed ? w[((int64_t)c * M + m) * RS + rs] : w[((int64_t)m * Ch + c) * RS + rs];
        }
        put_rounded(v, &wpk[i]);
    }
}

template <class C>
__device__ __forceinline__ void produce_reg(const ConvGatherParams &g, const typename C::T *__restrict__ wpk, int Kpad,
                                            int p0, int c0, int kblocks, unsigned char *smem, uint64_t *full,
                                            uint64_t *empty) {
    const int tid = threadIdx.x % 128, pw = tid / 32, lane = tid % 32, ks = lane & 3, nr = lane >> 2;
    const PixelRows<C::BM / 32> px(g, p0, pw, nr);
    int s = 0;
    uint32_t phase = 0;
    for (int kb = 0; kb < kblocks; kb++) {
        mbar_wait(&empty[s], phase ^ 1);
        const uint32_t sa = smem_addr(smem + s * C::STAGE_BYTES), sb = sa + C::A_BYTES;
#pragma unroll
        for (int kk = 0; kk < C::BK / 4; kk++) /* tile kk / 8, chunk kk % 8 */
            px.copy(g, sa + (kk / 8) * C::A_SUB, pw, nr, kb * C::BK + kk * 4 + ks, (uint32_t)((((kk % 8) ^ nr) << 4) + ks * 4));
        copy_weights<C::BN>(sb, wpk, Kpad, c0, kb * C::BK, tid);
        /* the arrival completes once this thread's copies have landed and the consumers' try_wait acquires
         * it; each consumer thread hands the stage back by its own arrival, which this thread's wait on
         * "empty" acquires (consume_reg: with a named barrier and one arrival instead, racecheck reported the
         * consumers' loads against these copies, bench/racecheck_probe.cu) */
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
        /* each thread hands the stage back after its own loads of A and its wgmma's reads (ring_setup's
         * 256 arrivals; one arrival after a named barrier orders them as well, but racecheck reports it:
         * ConsumerRing) */
        mbar_arrive(&empty[s]);
        if (++s == C::STAGES) {
            s = 0;
            phase ^= 1;
        }
    }
#pragma unroll
    for (int i = 0; i < C::BN / 2; i++) reg_fence(acc[i]);
}

/* ---- forward / stride-1 data gradient from an NHWC copy of the gathered tensor ----
 * The NCHW gather above copies 4 bytes per element, each with its own window decode and bounds check, and
 * the producer warpgroup's issue rate bounds the kernel (bench/NOTES.md, "Rounded wgmma convolutions": 1.6
 * elements a clock per multiprocessor at MNIST conv2). Here the source is first copied to [images][Hs][Ws][Ch]
 * (nchw_to_nhwc, rounded to TF32 / BF16 on the way) and the reduction is ordered tap major, k = (r*S + s)*Ch
 * + c, so that a window tap of one pixel is Ch contiguous values: 16-byte cp.async (4 tf32 / 8 bf16), one
 * decode and bounds check per chunk, and a row of the ring is one 128-byte swizzle row in the element type.
 * The operands being rounded already, wgmma reads both from shared memory (its truncation of a rounded
 * value is exact) with one group in flight. Needs Ch a multiple of the chunk (nhwc_fits). */
struct NhwcGather {
    const void *src; /* [images][Hs][Ws][Ch] of the element type */
    int Ch, Hs, Ws, rows, cols; /* rows = Kd = RS * Ch; cols = the output pixels */
    int mul_h, mul_w, add_h, add_w, sgn; /* as ConvGatherParams (conv2d_tiles.cuh) */
    FastDiv fPlane, fRow, fCh, fS;
};

template <bool BF16_, int BN_>
struct ConvNhwcCfg {
    static constexpr bool BF16 = BF16_, NHWC = true;
    static constexpr int BM = 128, BN = BN_, THREADS = 384;
    using T = typename std::conditional<BF16, __nv_bfloat16, float>::type;
    static constexpr int E = 16 / (int)sizeof(T);           /* elements per 16-byte chunk */
    static constexpr int BK = kRowBytes / (int)sizeof(T);   /* k per stage: one 128-byte row */
    static constexpr int STAGES = 4;
    static constexpr int A_BYTES = BM * kRowBytes, B_BYTES = BN * kRowBytes;
    static constexpr int STAGE_BYTES = A_BYTES + B_BYTES, RING_BYTES = STAGES * STAGE_BYTES;
    static constexpr int SMEM_BYTES = RING_BYTES + 2 * STAGES * 8 + 1024;
    using Op = Wgmma<BF16 ? WgIn::BF16 : WgIn::TF32, BN, 0, 0>;
    static_assert(Op::K * (int)sizeof(T) == 32, "32-byte k steps (consume)");
    static_assert(BN % 32 == 0 && BN <= 64, "channel tiles of 32 or 64");
    static_assert(8 * kEpiRows * kEpiLd * 4 <= RING_BYTES, "staging fits in the ring");
    static_assert(2 * SMEM_BYTES <= 227 * 1024, "two CTAs per multiprocessor");
};

/* dst[img][p][c] = round(src[img][c][p]) for p < HW, c < Ch (TF32 or BF16, nearest even): 32 x 32 tiles
 * through shared memory, reads along p and writes along c coalesced. grid (HW / 32, Ch / 32, images),
 * 32 x 8 threads. */
template <class T>
__global__ void nchw_to_nhwc(const float *__restrict__ src, int Ch, int HW, T *__restrict__ dst) {
    __shared__ float tile[32][33];
    const int p0 = blockIdx.x * 32, c0 = blockIdx.y * 32;
    const float *s = src + (int64_t)blockIdx.z * Ch * HW;
    T *d = dst + (int64_t)blockIdx.z * Ch * HW;
    for (int i = threadIdx.y; i < 32; i += 8) {
        const int c = c0 + i, p = p0 + threadIdx.x;
        if (c < Ch && p < HW) tile[i][threadIdx.x] = s[(int64_t)c * HW + p];
    }
    __syncthreads();
    for (int i = threadIdx.y; i < 32; i += 8) {
        const int p = p0 + i, c = c0 + threadIdx.x;
        if (p < HW && c < Ch) put_rounded(tile[threadIdx.x][i], &d[(int64_t)p * Ch + c]);
    }
}

/* The producer of the NHWC kernel: thread t copies 16-byte chunk t % 8 of the 128-byte rows t / 8 + 16 j
 * (j < BM / 16) of every stage (8 lanes fill one row: conflict-free swizzled stores, one pixel's 128
 * contiguous bytes read), and the packed weights as produce_reg does. */
template <class C>
__device__ __forceinline__ void produce_nhwc(const NhwcGather &g, const typename C::T *__restrict__ wpk, int Kpad,
                                             int p0, int c0, int kblocks, unsigned char *smem, uint64_t *full,
                                             uint64_t *empty) {
    using T = typename C::T;
    constexpr int PJ = C::BM / 16;
    const int tid = threadIdx.x % 128, ch = tid & 7, rq = tid >> 3;
    const T *src = static_cast<const T *>(g.src);
    int base[PJ], hb[PJ], wb[PJ];
#pragma unroll
    for (int j = 0; j < PJ; j++) {
        const int col = p0 + rq + 16 * j;
        int img = 0, rem = 0, a = 0, b = 0;
        if (col < g.cols) {
            g.fPlane.divmod(col, img, rem);
            g.fRow.divmod(rem, a, b);
        }
        hb[j] = col < g.cols ? a * g.mul_h + g.add_h : kGatherColOut;
        wb[j] = b * g.mul_w + g.add_w;
        base[j] = col < g.cols ? ((img * g.Hs + hb[j]) * g.Ws + wb[j]) * g.Ch : 0;
    }
    int s = 0;
    uint32_t phase = 0;
    for (int kb = 0; kb < kblocks; kb++) {
        const int k = kb * C::BK + ch * C::E;
        int tap, c, r, sx;
        g.fCh.divmod(k, tap, c);
        g.fS.divmod(tap, r, sx);
        const int dr = k < g.rows ? g.sgn * r : kGatherRowOut, ds = g.sgn * sx;
        const int off = g.sgn * (r * g.Ws + sx) * g.Ch + c; /* r, not dr: no overflow past the rows */
        mbar_wait(&empty[s], phase ^ 1);
        const uint32_t sa = smem_addr(smem + s * C::STAGE_BYTES), sb = sa + C::A_BYTES;
#pragma unroll
        for (int j = 0; j < PJ; j++) {
            const bool ok = (unsigned)(hb[j] + dr) < (unsigned)g.Hs && (unsigned)(wb[j] + ds) < (unsigned)g.Ws;
            cp_async16_ca(sa + sw128(rq + 16 * j, (uint32_t)ch * 16), ok ? src + (base[j] + off) : src, ok);
        }
        copy_weights<C::BN>(sb, wpk, Kpad, c0, kb * C::BK, tid);
        cp_async_mbar_arrive(&full[s]);
        if (++s == C::STAGES) {
            s = 0;
            phase ^= 1;
        }
    }
}

/* The forward / stride-1 data gradient: C a ConvRegCfg (NCHW gather, register A) or a ConvNhwcCfg (below:
 * NHWC gather, both operands from shared memory), G its gather's parameters. */
template <class C, class G>
__global__ void __launch_bounds__(C::THREADS, 2)
    conv_fwd_sm90_kernel(const G g, const typename C::T *__restrict__ wpk, int Kpad, int M, const OutNCHW out,
                         const Epi ep) {
#ifndef ODL_CONV_SM90_STUB
    extern __shared__ unsigned char smem_raw[];
    uint64_t *full, *empty;
    unsigned char *smem = ring_setup<C>(smem_raw, full, empty, C::NHWC ? 2 : 256); /* consume_reg: every thread */
    const int wg = threadIdx.x / 128;
    const int p0 = blockIdx.x * C::BM, c0 = blockIdx.y * C::BN;
    const int kblocks = (g.rows + C::BK - 1) / C::BK;
    if (wg == 0) {
        if constexpr (C::NHWC) produce_nhwc<C>(g, wpk, Kpad, p0, c0, kblocks, smem, full, empty);
        else produce_reg<C>(g, wpk, Kpad, p0, c0, kblocks, smem, full, empty);
        return;
    }
    float acc[C::BN / 2];
    if constexpr (C::NHWC) consume<C>(acc, smem, full, empty, kblocks, (uint32_t)(wg - 1) * 64 * kRowBytes);
    else consume_reg<C>(acc, smem, full, empty, kblocks, wg - 1);
    store_pixels_channels<C::BN>(acc, smem, LinearPixels{p0, g.cols}, c0, wg - 1, M, out, ep);
#endif
}

/* ---- forward / stride-1 data gradient from a window patch in shared memory (no gather, no NHWC copy) ----
 * With stride 1 every window tap (r, s) of an output pixel (y, x) reads the source at (y + r', x + s') of a
 * "virtual" zero-padded plane V (V[u][v] = src[u + oh][v + ow]; r' = r, s' = s for the forward, R-1-r,
 * S-1-s for the mirrored data gradient). Laid out with a row pitch of Wo + S - 1, V's flat index of that
 * read is m + (r' * pitch + s') with m = y * pitch + x: every tap is one constant shift of the same rows.
 * So a CTA takes 128 consecutive m of one image (the tile's rows; x >= Wo rows compute unused outputs, S - 1
 * of every pitch), copies V's rows m0 .. m0 + 127 + (R-1) * pitch + S - 1 (the "patch") into shared memory
 * once per 128-byte slab of channels (32 tf32 / 64 bf16: one swizzled row per patch row), rounded on the
 * way, and each tap's A operand is the patch seen from row shift(r, s) on: a wgmma descriptor whose start
 * moves by whole 128-byte rows (the 128-byte swizzle is a function of the shared-memory address, so a
 * shifted start reads the same swizzled rows with the descriptor's base offset left 0: seen on an H100,
 * 2026-12-07, starts 1, 3, 5, 8 and 13 rows in exact against an aligned copy, and every start not a
 * multiple of 8 rows wrong with the base offset set to (start >> 7) & 7). The source is read about (1 + (R-1) * pitch / 128) times
 * instead of R * S times, straight from NCHW (a warp's load is 32 consecutive m of one channel), and the
 * NHWC copy is gone. Weights: packed rounded, tap-major with the channels padded to whole slabs
 * (k = tap * Chp + c), one 128-byte row per output channel and (tap, slab) through a 4-stage cp.async ring.
 * Order of the reduction: slab, then tap, then channel: for one slab the NHWC kernel's order.
 * Opt-in (ODL_CONV_PATCH=1): correct, but slower on an H100 than the NHWC copy and its gather (MNIST conv2
 * N512 TF32 forward 270 us against 176; ncu: most warp cycles waiting on global loads; bench/NOTES.md
 * "Window patch"). */
struct PatchGather {
    const float *src; /* [images][Ch][Hs][Ws] float32 */
    int Ch, Chp, Hs, Ws, img_stride, plane; /* Chp: Ch padded to whole slabs; plane = Hs * Ws */
    int oh, ow, R, S, sgn;                  /* V[u][v] = src[u + oh][v + ow]; sgn < 0: mirrored taps */
    int Ho, Wo, pitch, tiles, rows;         /* tiles per image of 128 m; rows: the patch's rows (PR) */
    int patch_bytes, pbuf;                  /* one patch buffer (PR rounded to 8 rows) and their count */
    FastDiv fPitch, fTiles;
};

template <bool BF16_, int BN_>
struct ConvPatchCfg {
    static constexpr bool BF16 = BF16_;
    static constexpr int BM = 128, BN = BN_, THREADS = 384, STAGES = 4;
    using T = typename std::conditional<BF16, __nv_bfloat16, float>::type;
    static constexpr int E = 16 / (int)sizeof(T);         /* channels per 16-byte chunk */
    static constexpr int SW = kRowBytes / (int)sizeof(T); /* channels per slab: one 128-byte row */
    static constexpr int B_BYTES = BN * kRowBytes, RING_BYTES = STAGES * B_BYTES;
    static constexpr int BAR_BYTES = (2 * STAGES + 4) * 8;
    using Op = Wgmma<BF16 ? WgIn::BF16 : WgIn::TF32, BN, 0, 0>;
    static_assert(Op::K * (int)sizeof(T) == 32, "32-byte k steps");
    static_assert(BN % 32 == 0 && BN <= 64, "channel tiles of 32 or 64");
    static_assert(8 * kEpiRows * kEpiLd * 4 <= RING_BYTES + 2 * BM * kRowBytes, "staging fits in ring + a patch");
    static int smem_bytes(int patch_bytes, int pbuf) { return RING_BYTES + pbuf * patch_bytes + BAR_BYTES + 1024; }
};

/* E consecutive channels of one source element position, rounded, as 16 bytes. */
__device__ __forceinline__ uint4 patch_chunk(const float *__restrict__ p, int plane, int n, float) {
    float v[4];
#pragma unroll
    for (int e = 0; e < 4; e++) v[e] = e < n ? round_tf32_rne(__ldg(p + (int64_t)e * plane)) : 0.0f;
    return make_uint4(__float_as_uint(v[0]), __float_as_uint(v[1]), __float_as_uint(v[2]), __float_as_uint(v[3]));
}
__device__ __forceinline__ uint4 patch_chunk(const float *__restrict__ p, int plane, int n, __nv_bfloat16) {
    uint32_t w[4];
#pragma unroll
    for (int e = 0; e < 4; e++) {
        const float a = 2 * e < n ? __ldg(p + (int64_t)(2 * e) * plane) : 0.0f;
        const float b = 2 * e + 1 < n ? __ldg(p + (int64_t)(2 * e + 1) * plane) : 0.0f;
        const __nv_bfloat162 h = __floats2bfloat162_rn(a, b); /* .x = a, the lower channel, in the low half */
        w[e] = *reinterpret_cast<const uint32_t *>(&h);
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
}

/* Slab j of the patch of the tile at m0 of one image (src: the image) into the swizzled rows at pa: lane =
 * patch row (32 consecutive m: coalesced loads of each channel), warp w the chunks w and w + 4 of each
 * row (conflict-free 16-byte stores: 8 rows cover the 8 swizzled slots); zeros outside V's source part
 * and past Ch. RB rows per thread are loaded before any is stored, so that 8 * RB (TF32) or 16 * RB (BF16)
 * loads of a thread are in flight at once. */
template <class C>
__device__ __forceinline__ void load_patch(const PatchGather &g, const float *__restrict__ src, int j, int m0,
                                           uint32_t pa) {
    constexpr int RB = C::BF16 ? 2 : 3;
    const int tid = threadIdx.x % 128, lane = tid & 31, w = tid >> 5;
    const int cbase = j * C::SW;
    for (int row0 = lane; row0 < g.rows; row0 += 32 * RB) {
        uint4 val[RB][2];
#pragma unroll
        for (int b = 0; b < RB; b++) {
            const int row = row0 + 32 * b;
            int u, v;
            g.fPitch.divmod(m0 + row, u, v);
            const int hy = u + g.oh, wx = v + g.ow;
            const bool in = row < g.rows && (unsigned)hy < (unsigned)g.Hs && (unsigned)wx < (unsigned)g.Ws;
#pragma unroll
            for (int q = 0; q < 2; q++) {
                const int c = cbase + (w + 4 * q) * C::E;
                const int n = in ? min(C::E, g.Ch - c) : 0; /* channels to read (<= 0: none) */
                const float *p = n > 0 ? src + (int64_t)c * g.plane + hy * g.Ws + wx : src;
                val[b][q] = patch_chunk(p, g.plane, n, typename C::T{});
            }
        }
#pragma unroll
        for (int b = 0; b < RB; b++) {
            const int row = row0 + 32 * b;
            if (row >= g.rows) break;
#pragma unroll
            for (int q = 0; q < 2; q++)
                asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(pa + sw128(row, (uint32_t)(w + 4 * q) * 16)),
                             "r"(val[b][q].x), "r"(val[b][q].y), "r"(val[b][q].z), "r"(val[b][q].w)
                             : "memory");
        }
    }
}

/* The shift of tap (r, s) in patch rows. */
__device__ __forceinline__ int patch_shift(const PatchGather &g, int r, int s) {
    return g.sgn > 0 ? r * g.pitch + s : (g.R - 1 - r) * g.pitch + (g.S - 1 - s);
}

/* The tile's output pixel of a row: m = m0 + r -> (u, v), an output for v < Wo and u < Ho. */
struct PatchPixels {
    int img, m0, Ho, Wo;
    FastDiv fPitch;
    __device__ __forceinline__ int operator()(int r) const {
        int u, v;
        fPitch.divmod(m0 + r, u, v);
        return u < Ho && v < Wo ? (img * Ho + u) * Wo + v : -1;
    }
};

template <class C>
__global__ void __launch_bounds__(C::THREADS, 2)
    conv_patch_sm90_kernel(const PatchGather g, const typename C::T *__restrict__ wpk, int Kpad, int M,
                           const OutNCHW out, const Epi ep) {
#ifndef ODL_CONV_SM90_STUB
    extern __shared__ unsigned char smem_raw[];
    unsigned char *smem = reinterpret_cast<unsigned char *>(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
    unsigned char *ring = smem, *patch = smem + C::RING_BYTES;
    uint64_t *full = reinterpret_cast<uint64_t *>(patch + g.pbuf * g.patch_bytes);
    uint64_t *empty = full + C::STAGES, *pfull = empty + C::STAGES, *pempty = pfull + 2;
    const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;
    int img, t;
    g.fTiles.divmod((int)blockIdx.x, img, t);
    const int m0 = t * C::BM, c0 = blockIdx.y * C::BN, slabs = g.Chp / C::SW;
    if (threadIdx.x == 0) {
        for (int s = 0; s < C::STAGES; s++) {
            mbar_init(&full[s], 128);
            mbar_init(&empty[s], 2);
        }
        for (int b = 0; b < 2; b++) {
            mbar_init(&pfull[b], 128);
            mbar_init(&pempty[b], 2);
        }
        mbar_fence_init();
    }
    __syncthreads();

    if (wg == 0) {
        /* ---- producer: per slab its patch, then the weights of each tap ---- */
        const float *src = g.src + (int64_t)img * g.img_stride;
        int s = 0, pb = 0, issued = 0; /* issued: taps of slab 0 whose weights went before its patch */
        uint32_t phase = 0, pphase = 0;
        auto weights = [&](int j, int tap) {
            mbar_wait(&empty[s], phase ^ 1);
            const uint32_t sb = smem_addr(ring + s * C::B_BYTES);
            copy_weights<C::BN>(sb, wpk, Kpad, c0, (int64_t)tap * g.Chp + j * C::SW, tid);
            cp_async_mbar_arrive(&full[s]);
            if (++s == C::STAGES) {
                s = 0;
                phase ^= 1;
            }
        };
        const int RS = g.R * g.S;
        for (; issued < min(RS, C::STAGES); issued++) weights(0, issued); /* in flight during the first patch */
        for (int j = 0; j < slabs; j++) {
            mbar_wait(&pempty[pb], pphase ^ 1);
            load_patch<C>(g, src, j, m0, smem_addr(patch + pb * g.patch_bytes));
            fence_proxy_async_shared(); /* the stores above, for wgmma's (async proxy) reads */
            mbar_arrive(&pfull[pb]);
            if (++pb == g.pbuf) {
                pb = 0;
                pphase ^= 1;
            }
            for (int tap = j == 0 ? issued : 0; tap < RS; tap++) weights(j, tap);
        }
        return;
    }

    /* ---- consumers: warpgroup cw takes tile rows cw * 64 .. + 63 ---- */
    const int cw = wg - 1;
    float acc[C::BN / 2];
#pragma unroll
    for (int i = 0; i < C::BN / 2; i++) acc[i] = 0.0f;
    ConsumerRing<C::STAGES> wring;
    int pb = 0;
    uint32_t pphase = 0;
    bool accumulate = false;
    for (int j = 0; j < slabs; j++) {
        mbar_wait(&pfull[pb], pphase);
        const uint32_t pa = smem_addr(patch + pb * g.patch_bytes) + (uint32_t)cw * 64 * kRowBytes;
        for (int r = 0; r < g.R; r++) {
            for (int sx = 0; sx < g.S; sx++) {
                wring.wait(full);
                mma_row<typename C::Op>(acc, pa + (uint32_t)patch_shift(g, r, sx) * kRowBytes,
                                        smem_addr(ring + wring.s * C::B_BYTES), accumulate);
                accumulate = true;
                wring.retire_prev(empty, tid);
            }
        }
        /* the slab's groups all retired before its patch goes back (with one buffer the producer waits for
         * it before the next slab's patch, which this warpgroup's next group needs) */
        wring.drain(empty, tid);
        if (tid == 0) mbar_arrive(&pempty[pb]);
        if (++pb == g.pbuf) {
            pb = 0;
            pphase ^= 1;
        }
    }
#pragma unroll
    for (int i = 0; i < C::BN / 2; i++) reg_fence(acc[i]);
    store_pixels_channels<C::BN>(acc, smem, PatchPixels{img, m0, g.Ho, g.Wo, g.fPitch}, c0, cw, M, out, ep);
#endif
}

/* ---- the weight gradient: D[k][crs] = sum_pixels dy[k][pixel] * im2col[crs][pixel] ----
 * Both operands are K-major with the pixels as K, the contiguous direction of NCHW: a producer warp fills one
 * 128-byte row (32 pixels) per cp.async, lane = pixel (the swizzled chunks of one row: 32 distinct banks).
 * CTA: 64 output channels x 96 columns (C*R*S), PW producer warpgroups, one consumer warpgroup, the pixels
 * of one split. The producers' issue is what bounds the kernel (bench/NOTES.md: MNIST conv2 at batch 512
 * moves ~2.3 TB/s through L2 in 4-byte copies with two producer warps a scheduler): PW = 2 doubles the
 * warps that issue them, and where a stage's 32 pixels are one image's consecutive ones (P*Q % 32 == 0,
 * dy 16-byte aligned: the kernel's dy16) dy's rows go in 16-byte copies, a quarter of the instructions.
 * ODL_CONV_WGRAD_PRODUCER picks (0: PW 1, 4-byte copies; 1: PW 1, 16-byte dy; 2, the default: PW 2, 16-byte
 * dy; MNIST conv2 at batch 512 on an H100: 245 -> 174 us). */
template <int PW>
struct WgradCfg {
    static constexpr int BM = 64, BN = 96, BK = kRowBytes / 4, STAGES = 4, THREADS = 128 * (PW + 1);
    static constexpr int A_BYTES = BM * kRowBytes, B_BYTES = BN * kRowBytes, STAGE_BYTES = A_BYTES + B_BYTES;
    static constexpr int RING_BYTES = STAGES * STAGE_BYTES;
    static constexpr int TABLE_BYTES = BN * 16; /* per B row: the (c, r, s) offset, r, s */
    static constexpr int SMEM_BYTES = RING_BYTES + 2 * STAGES * 8 + TABLE_BYTES + 1024;
    using Op = Wgmma<WgIn::TF32, BN, 0, 0>;
    static_assert(Op::K * 4 == 32, "32-byte k steps (consume)");
    static_assert(4 * kEpiRows * kEpiLd * 4 <= RING_BYTES, "staging fits in the ring");
    static_assert(2 * SMEM_BYTES <= 227 * 1024, "two CTAs per multiprocessor");
    static_assert(BM % (4 * PW) == 0 && BN % (4 * PW) == 0, "rows split over the producer warps");
    static_assert(BM * 8 % (128 * PW) == 0, "dy's 16-byte chunks split over the producers");
};

/* float32 x 4 -> the bfloat16 nearest each (ties to even), as float32: exact in TF32 */
__device__ __forceinline__ float4 round4_bf16(float4 v) {
    return make_float4(round_bf16_rne(v.x), round_bf16_rne(v.y), round_bf16_rne(v.z), round_bf16_rne(v.w));
}

/* dbpart (nullable): the CTAs of the first column tile also sum their dy rows (the bias gradient, from the
 * float32 dy in shared memory), split z's sums at dbpart[z * K + k]. round_bf16: the consumers round each
 * stage's dy and x to bfloat16 (nearest even) in place before its wgmma, so that the TF32 wgmma multiplies
 * bfloat16 values (exact in TF32): BF16 products, float32 sums, the bits of the same kernel run on rounded
 * copies, without the copies (conv_wgrad_bf16). */
template <class C, int PW>
__global__ void __launch_bounds__(C::THREADS, 2)
    conv_wgrad_sm90_kernel(const ConvWgradParams g, int NPQ, int chunk, OutRowMajor out, bool dy16, bool round_bf16,
                           float *dbpart) {
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
    /* the CTAs of the first column tile also sum their dy rows (the bias gradient) from the ring, and BF16's
     * consumers round the stages in place: where they do, each consumer thread hands the stages back
     * (ConsumerRing) */
    const bool do_db = dbpart != nullptr && blockIdx.x == 0, touch = do_db || round_bf16;

    if (threadIdx.x == 0) {
        for (int s = 0; s < C::STAGES; s++) {
            mbar_init(&full[s], 128 * PW);
            mbar_init(&empty[s], touch ? 128 : 1);
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

    if (wg < PW) {
        /* ---- producers: lane = pixel of the stage, warp pw = rows pw, pw + 4 PW, ... ---- */
        const int ptid = threadIdx.x, pw = ptid / 32, lane = ptid % 32;
        constexpr int PWARPS = 4 * PW;
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
            if (dy16) {
                /* the stage's 32 pixels: one image's pq0 .. pq0 + 31 (j1 and the stage starts are multiples of
                 * 32, as P*Q is), all in or all out: thread t copies chunk t % 8 of rows t / 8, + 16 PW, ... */
                const int js = j0 + kb * C::BK;
                int img0 = 0, pq0 = 0;
                g.fPQ.divmod(js, img0, pq0);
                const float *dys = g.dy + (int64_t)img0 * KPQ + pq0 + (ptid & 7) * 4;
#pragma unroll
                for (int i = 0; i < C::BM * 8 / (128 * PW); i++) {
                    const int row = ptid / 8 + 16 * PW * i;
                    const bool ok = js < j1 && m0 + row < M;
                    cp_async16(sa + sw128(row, (uint32_t)(ptid & 7) * 16), ok ? dys + (int64_t)(m0 + row) * PQ : g.dy,
                               ok);
                }
            } else {
#pragma unroll 4
                for (int i = 0; i < C::BM / PWARPS; i++) {
                    const int row = pw + PWARPS * i;
                    const bool ok = jin && m0 + row < M;
                    cp_async4(sa + sw128(row, (uint32_t)lane * 4), ok ? dyb + (int64_t)(m0 + row) * PQ : g.dy, ok);
                }
            }
#pragma unroll 4
            for (int i = 0; i < C::BN / PWARPS; i++) {
                const int row = pw + PWARPS * i;
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

    /* ---- consumer (warpgroup PW) ---- */
    float acc[C::BN / 2];
    /* per stage: the bias gradient, thread t adding row t / 2's 16 values of half t % 2 in order (before it
     * rounds them: db is the float32 dy's), then with round_bf16 dy's rows (the same 64 bytes a thread) and
     * x's rows (16-byte chunks t, t + 128, ...) rounded in place, the stores made visible to wgmma (async
     * proxy) and every consumer thread's done before any warp's wgmma reads the stage */
    float dbs = 0.0f;
    auto stage_work = [&](unsigned char *stage) {
        if (!touch) return;
#pragma unroll
        for (int c = 0; c < 4; c++) {
            float4 *p = reinterpret_cast<float4 *>(stage + sw128(tid >> 1, (uint32_t)((tid & 1) * 4 + c) * 16));
            const float4 v = *p;
            if (do_db) {
                dbs += v.x;
                dbs += v.y;
                dbs += v.z;
                dbs += v.w;
            }
            if (round_bf16) *p = round4_bf16(v);
        }
        if (!round_bf16) return;
        static_assert(C::A_BYTES == 128 * 4 * 16 && C::B_BYTES % (128 * 16) == 0, "stage split over the consumers");
#pragma unroll 2 /* fewer chunks in flight: the two-producer kernel's consumer sits at its 80-register cap */
        for (int i = 0; i < C::B_BYTES / (128 * 16); i++) {
            float4 *p = reinterpret_cast<float4 *>(stage + C::A_BYTES + (i * 128 + tid) * 16);
            *p = round4_bf16(*p);
        }
        fence_proxy_async_shared();
        named_barrier_c<2, 128>();
    };
    consume<C>(acc, smem, full, empty, kblocks, 0, stage_work, touch);
    if (do_db) {
        dbs += __shfl_xor_sync(0xffffffffu, dbs, 1); /* the two halves of a row: the same sum in both lanes */
        if ((tid & 1) == 0 && m0 + (tid >> 1) < M) dbpart[(int64_t)blockIdx.z * M + m0 + (tid >> 1)] = dbs;
    }

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
    using C = WgradCfg<1>; /* BM, BK: the same for every PW */
    return cdiv(M, C::BM) <= 65535 && NPQ <= INT_MAX - C::BK && M * N < INT_MAX;
}

/* Whether the NHWC path takes a product whose gathered tensor has Ch channels, `images` images and
 * src_elems elements: ODL_CONV_NHWC on, whole 16-byte chunks of channels, the images in one grid z, 32-bit
 * offsets. */
bool nhwc_fits(int64_t Ch, int64_t images, int64_t src_elems, bool bf16) {
    return odl_env_bool(ODL_ENV_CONV_NHWC) && Ch % (bf16 ? 8 : 4) == 0 && images <= 65535 && src_elems < INT_MAX;
}

/* The window-patch kernel's dynamic shared memory at most: two CTAs on a multiprocessor of 227 KB. */
constexpr int kPatchSmemMax = 113 * 1024;

/* The window-patch kernel's parameters for a stride-1 product (false: not stride 1, ODL_CONV_PATCH off, or
 * the patch or the indices too large for it). The patch and the weights ring share a CTA's shared memory
 * with a second CTA on the multiprocessor; two patch buffers where that fits and there are several slabs. */
bool patch_plan(const ConvGatherParams &g, int Ch, int RS, int images, bool bf16, int M, PatchGather &pg, int &smem) {
    if (!odl_env_bool(ODL_ENV_CONV_PATCH) || g.mul_h != 1 || g.mul_w != 1) return false;
    const int S = (int)g.fS.d, R = RS / S, Wo = (int)g.fRow.d, Ho = (int)(g.fPlane.d / g.fRow.d);
    const int64_t pitch = (int64_t)Wo + S - 1, rows = 128 + (int64_t)(R - 1) * pitch + S - 1;
    const int64_t tiles = cdiv((int64_t)Ho * pitch, 128);
    const int sw = bf16 ? 64 : 32;
    const int64_t chp = cdiv(Ch, sw) * sw;
    if (rows > 4096 || (int64_t)images * tiles > INT_MAX || (int64_t)images * g.img_stride >= INT_MAX ||
        tiles * 128 + rows >= INT_MAX || chp * RS >= INT_MAX)
        return false;
    const int patch_bytes = (int)(cdiv(rows, 8) * 8 * kRowBytes);
    const bool bn32 = channel_tile(M) == 32;
    auto bytes = [&](int pbuf) {
        return bf16 ? (bn32 ? ConvPatchCfg<true, 32>::smem_bytes(patch_bytes, pbuf) : ConvPatchCfg<true, 64>::smem_bytes(patch_bytes, pbuf))
                    : (bn32 ? ConvPatchCfg<false, 32>::smem_bytes(patch_bytes, pbuf) : ConvPatchCfg<false, 64>::smem_bytes(patch_bytes, pbuf));
    };
    const int pbuf = chp / sw > 1 && bytes(2) <= kPatchSmemMax ? 2 : 1;
    if (bytes(pbuf) > kPatchSmemMax) return false;
    const int oh = g.sgn > 0 ? g.add_h : g.add_h - (R - 1), ow = g.sgn > 0 ? g.add_w : g.add_w - (S - 1);
    pg = {g.src, Ch, (int)chp, g.Hs, g.Ws, g.img_stride, g.plane, oh, ow, R, S, g.sgn, Ho, Wo, (int)pitch, (int)tiles,
          (int)rows, patch_bytes, pbuf, FastDiv((int)pitch), FastDiv((int)tiles)};
    smem = bytes(pbuf);
    return true;
}

} // namespace

bool conv_use(int64_t M, int64_t N, int64_t Kd, int64_t Ch, int64_t images, int64_t src_elems, bool bf16) {
    const int64_t mode = odl_env_int(ODL_ENV_CONV_SM90);
    if (mode == 0 || !fwd_fits(M, N) || !available()) return false;
    if (mode == 2) return true;
    const int64_t tiles = cdiv(N, 128) * cdiv(M, channel_tile(M));
    /* Mode 1 takes what the kernel lab measured faster than the mma.sync kernels (H200, 2026-12-06 eighth
     * session, bench/results/2026-12-06/eighth). From the NHWC copy: TF32 and BF16 alike, a reduction of at
     * least 256 (MNIST conv2 fwd / bwd_data 1.1-1.7x, YOLOv5n's 64-channel 3x3 and 256-channel 1x1 layers)
     * and a quarter of the multiprocessors' tiles at least (no split-K: YOLOv5n's 128->256 stride-2 layer,
     * 16 tiles of 1152, stays on the split mma.sync kernels, as do the short reductions of the stem and
     * the 32- and 64-channel 1x1 layers). From the NCHW gather (channels not whole 16-byte chunks): TF32 with
     * 64-channel tiles, a reduction of at least 256 and tiles that fill the GPU (H100, seventh session). */
    if (nhwc_fits(Ch, images, src_elems, bf16)) return Kd >= 256 && 4 * tiles >= sm_count();
    return !bf16 && channel_tile(M) == 64 && Kd >= 256 && tiles >= sm_count();
}

bool conv_wgrad_use(int64_t M, int64_t N, int64_t NPQ) {
    const int64_t mode = odl_env_int(ODL_ENV_CONV_SM90);
    /* BF16 too (rounded copies first, or rounded in shared memory: conv_wgrad_bf16): MNIST conv2 0.79-0.90x the
     * mma.sync kernel's time with the copies (eighth session) */
    return mode != 0 && wgrad_fits(M, N, NPQ) && available();
}

namespace {

template <class C, class G>
odl_status launch_fwd(const G &g, const void *wpk, int Kpad, int M, int N, const OutNCHW &out, const Epi &ep) {
    static std::atomic<unsigned long long> opted{0};
    ODL_CHECK(opt_in_smem(conv_fwd_sm90_kernel<C, G>, C::SMEM_BYTES, opted));
    const dim3 grid((unsigned)cdiv(N, C::BM), (unsigned)cdiv(M, C::BN));
    conv_fwd_sm90_kernel<C, G><<<grid, C::THREADS, C::SMEM_BYTES, stream()>>>(
        g, static_cast<const typename C::T *>(wpk), Kpad, M, out, ep);
    return ODL_OK;
}

/* pack_weights into wpk (Mpad x Kpad of bfloat16 or float32) on the stream. */
odl_status pack(const float *w, int M, int Ch, int Chp, int RS, int Mpad, int Kpad, bool transposed, bool tap_major,
                bool bf16, void *wpk) {
    const unsigned blocks = grid_for((int64_t)Mpad * Kpad, 256);
    const int tr = transposed ? 1 : 0, tap = tap_major ? 1 : 0;
    if (bf16)
        pack_weights<__nv_bfloat16><<<blocks, 256, 0, stream()>>>(w, M, Ch, Chp, RS, Mpad, Kpad, tr, tap,
                                                                  static_cast<__nv_bfloat16 *>(wpk));
    else
        pack_weights<float><<<blocks, 256, 0, stream()>>>(w, M, Ch, Chp, RS, Mpad, Kpad, tr, tap, static_cast<float *>(wpk));
    ODL_CUDA_LAUNCH_CHECK("odl_conv2d_pack_weights");
    return ODL_OK;
}

template <class C>
odl_status launch_patch(const PatchGather &pg, int smem, const void *wpk, int Kpad, int M, int images, const OutNCHW &out,
                        const Epi &ep) {
    static std::atomic<unsigned long long> opted{0};
    ODL_CHECK(opt_in_smem(conv_patch_sm90_kernel<C>, kPatchSmemMax, opted));
    const dim3 grid((unsigned)(images * pg.tiles), (unsigned)cdiv(M, C::BN));
    conv_patch_sm90_kernel<C><<<grid, C::THREADS, smem, stream()>>>(pg, static_cast<const typename C::T *>(wpk), Kpad, M,
                                                                     out, ep);
    return ODL_OK;
}

/* The window-patch path of conv_rounded: weights packed tap-major over whole slabs, then the kernel. */
odl_status conv_patch(const PatchGather &pg, int smem, const float *w, bool transposed, int RS, bool bf16, int M,
                      int images, const OutNCHW &out, const Epi &ep) {
    const int BN = channel_tile(M), esz = bf16 ? 2 : 4;
    const int Mpad = (int)(cdiv(M, BN) * BN), Kpad = pg.Chp * RS;
    void *wpk = nullptr;
    ODL_CHECK(workspace((size_t)Mpad * Kpad * esz, &wpk));
    ODL_CHECK(pack(w, M, pg.Ch, pg.Chp, RS, Mpad, Kpad, transposed, true, bf16, wpk));
    if (bf16) return BN == 32 ? launch_patch<ConvPatchCfg<true, 32>>(pg, smem, wpk, Kpad, M, images, out, ep)
                              : launch_patch<ConvPatchCfg<true, 64>>(pg, smem, wpk, Kpad, M, images, out, ep);
    return BN == 32 ? launch_patch<ConvPatchCfg<false, 32>>(pg, smem, wpk, Kpad, M, images, out, ep)
                    : launch_patch<ConvPatchCfg<false, 64>>(pg, smem, wpk, Kpad, M, images, out, ep);
}

} // namespace

odl_status conv_rounded(const ConvGatherParams &g, const float *w, bool transposed, int RS, bool bf16, int M, int N,
                        int Kd, const OutNCHW &out, const Epi &ep, const char *what) {
    if (M <= 0 || N <= 0) return ODL_OK;
    if (!fwd_fits(M, N) || Kd <= 0 || Kd % RS != 0)
        return ODL_ERR(ODL_E_INVAL, "%s: %d channels x %d pixels x %d is outside the wgmma convolution (conv_use)",
                       what, M, N, Kd);
    const int BN = channel_tile(M), BK = bf16 ? 64 : 32, esz = bf16 ? 2 : 4;
    const int Ch = Kd / RS, out_plane = (int)g.fPlane.d, images = N / out_plane;
    PatchGather pg;
    int psmem = 0;
    if (patch_plan(g, Ch, RS, images, bf16, M, pg, psmem)) {
        ODL_CHECK(conv_patch(pg, psmem, w, transposed, RS, bf16, M, images, out, ep));
        ODL_CUDA_LAUNCH_CHECK(what);
        return ODL_OK;
    }
    const bool nhwc = nhwc_fits(Ch, images, (int64_t)images * g.img_stride, bf16);
    const int Mpad = (int)(cdiv(M, BN) * BN), Kpad = (int)(cdiv(Kd, BK) * BK);
    /* the workspace: the packed weights, then (NHWC) the rounded copy of the gathered tensor */
    const size_t wbytes = ((size_t)Mpad * Kpad * esz + 255) & ~(size_t)255;
    const size_t xbytes = nhwc ? (size_t)images * g.plane * Ch * esz : 0;
    void *wpk = nullptr;
    ODL_CHECK(workspace(wbytes + xbytes, &wpk));
    void *xt = static_cast<char *>(wpk) + wbytes;
    ODL_CHECK(pack(w, M, Ch, Ch, RS, Mpad, Kpad, transposed, nhwc, bf16, wpk));
    odl_status st;
    if (nhwc) {
        const dim3 tgrid((unsigned)cdiv(g.plane, 32), (unsigned)cdiv(Ch, 32), (unsigned)images);
        if (bf16)
            nchw_to_nhwc<__nv_bfloat16><<<tgrid, dim3(32, 8), 0, stream()>>>(g.src, Ch, g.plane,
                                                                            static_cast<__nv_bfloat16 *>(xt));
        else
            nchw_to_nhwc<float><<<tgrid, dim3(32, 8), 0, stream()>>>(g.src, Ch, g.plane, static_cast<float *>(xt));
        ODL_CUDA_LAUNCH_CHECK("odl_conv2d_nchw_to_nhwc");
        const NhwcGather ng = {xt, Ch, g.Hs, g.Ws, Kd, N, g.mul_h, g.mul_w, g.add_h, g.add_w, g.sgn,
                               g.fPlane, g.fRow, FastDiv(Ch), g.fS};
        if (bf16) st = BN == 32 ? launch_fwd<ConvNhwcCfg<true, 32>>(ng, wpk, Kpad, M, N, out, ep)
                                : launch_fwd<ConvNhwcCfg<true, 64>>(ng, wpk, Kpad, M, N, out, ep);
        else st = BN == 32 ? launch_fwd<ConvNhwcCfg<false, 32>>(ng, wpk, Kpad, M, N, out, ep)
                           : launch_fwd<ConvNhwcCfg<false, 64>>(ng, wpk, Kpad, M, N, out, ep);
    } else if (bf16) {
        st = BN == 32 ? launch_fwd<ConvRegCfg<true, 32>>(g, wpk, Kpad, M, N, out, ep)
                      : launch_fwd<ConvRegCfg<true, 64>>(g, wpk, Kpad, M, N, out, ep);
    } else {
        st = BN == 32 ? launch_fwd<ConvRegCfg<false, 32>>(g, wpk, Kpad, M, N, out, ep)
                      : launch_fwd<ConvRegCfg<false, 64>>(g, wpk, Kpad, M, N, out, ep);
    }
    ODL_CHECK(st);
    ODL_CUDA_LAUNCH_CHECK(what);
    return ODL_OK;
}

namespace {

/* The weight gradient on g's operands; its split partials go into the workspace past its first ws_off bytes
 * (where the BF16 path keeps its rounded copies). */
/* The weight gradient's split of its NPQ > 0 pixels into `splits` ranges of `chunk` (a multiple of BK):
 * until two CTAs per multiprocessor are busy, each split 8 stages deep at least. */
struct WgradSplit {
    int64_t splits;
    int chunk;
    size_t partial_bytes; /* the float32 partial sums of splits > 1, in the workspace */
};
WgradSplit wgrad_split(int64_t M, int64_t N, int64_t NPQ) {
    using C = WgradCfg<1>; /* BM, BN, BK: the same for every PW */
    int64_t splits = cdiv(2 * (int64_t)sm_count(), cdiv(N, C::BN) * cdiv(M, C::BM));
    splits = std::max<int64_t>(1, std::min<int64_t>({splits, 256, NPQ / (8 * C::BK)}));
    const int chunk = (int)(cdiv(cdiv(NPQ, splits), C::BK) * C::BK);
    splits = std::max<int64_t>(1, cdiv(NPQ, chunk));
    return {splits, chunk, splits > 1 ? (size_t)(splits * M * N) * sizeof(float) : 0};
}

template <int PW>
odl_status launch_wgrad(const ConvWgradParams &g, dim3 grid, int NPQ, int chunk, const OutRowMajor &out, bool dy16,
                        bool round_bf16, float *dbpart) {
    using C = WgradCfg<PW>;
    auto kern = conv_wgrad_sm90_kernel<C, PW>;
    static std::atomic<unsigned long long> opted{0};
    ODL_CHECK(opt_in_smem(kern, C::SMEM_BYTES, opted));
    kern<<<grid, C::THREADS, C::SMEM_BYTES, stream()>>>(g, NPQ, chunk, out, dy16, round_bf16, dbpart);
    return ODL_OK;
}

/* db (nullable): the bias gradient too, from the dy rows the kernel has in shared memory (its split sums after
 * dw's partials in the workspace, added over the splits by splitk_reduce as dw's). round_bf16: the kernel
 * rounds the operands to bfloat16 in shared memory (conv_wgrad_sm90_kernel). */
odl_status wgrad_run(const ConvWgradParams &g, float *dw, float *db, size_t ws_off, const char *what,
                     bool round_bf16 = false) {
    using C = WgradCfg<1>;
    const int64_t M = g.K, N = (int64_t)g.C * g.R * g.S, NPQ = (int64_t)g.N * g.P * g.Q;
    if (M <= 0 || N <= 0) return ODL_OK;
    if (NPQ == 0) { /* no images: an empty sum (chunk below would be 0) */
        ODL_CUDA_CALL(cudaMemsetAsync(dw, 0, (size_t)(M * N) * sizeof(float), stream()));
        if (db) ODL_CUDA_CALL(cudaMemsetAsync(db, 0, (size_t)M * sizeof(float), stream()));
        return ODL_OK;
    }
    const int64_t tn = cdiv(N, C::BN), tm = cdiv(M, C::BM);
    if (!wgrad_fits(M, N, NPQ))
        return ODL_ERR(ODL_E_INVAL, "%s: %lld x %lld x %lld is outside the wgmma weight gradient (conv_wgrad_use)",
                       what, (long long)M, (long long)N, (long long)NPQ);
    const WgradSplit sp = wgrad_split(M, N, NPQ);
    const int64_t splits = sp.splits;
    const int chunk = sp.chunk;
    OutRowMajor fin = {dw, N, 0, false}, part = fin;
    float *dbpart = db;
    if (splits > 1) {
        void *ws = nullptr;
        const size_t db_bytes = db ? (size_t)(splits * M) * sizeof(float) : 0;
        ODL_CHECK(workspace(ws_off + sp.partial_bytes + db_bytes, &ws));
        part.C = reinterpret_cast<float *>(static_cast<char *>(ws) + ws_off);
        part.zstride = M * N;
        if (db) dbpart = reinterpret_cast<float *>(static_cast<char *>(ws) + ws_off + sp.partial_bytes);
    }
    const int64_t variant = odl_env_int(ODL_ENV_CONV_WGRAD_PRODUCER);
    const bool dy16 = variant >= 1 && (int64_t)g.P * g.Q % C::BK == 0 && (uintptr_t)g.dy % 16 == 0;
    const dim3 grid((unsigned)tn, (unsigned)tm, (unsigned)splits);
    const OutRowMajor &o = splits > 1 ? part : fin;
    if (variant >= 2) ODL_CHECK(launch_wgrad<2>(g, grid, (int)NPQ, chunk, o, dy16, round_bf16, dbpart));
    else ODL_CHECK(launch_wgrad<1>(g, grid, (int)NPQ, chunk, o, dy16, round_bf16, dbpart));
    ODL_CUDA_LAUNCH_CHECK(what);
    if (splits == 1) return ODL_OK;
    ODL_CHECK(splitk_reduce(part, (int)splits, (int)M, (int)N, fin, epi_raw(), "odl_conv2d_bwd_weight_sm90_reduce"));
    if (!db) return ODL_OK;
    return splitk_reduce_vector(dbpart, (int)splits, (int)M, db, "odl_conv2d_bias_grad_sm90_reduce");
}

/* dst[i] = the bfloat16 nearest src[i] (ties to even) as float32, i < n: exact in TF32, so that the
 * truncating TF32 wgmma multiplies it unchanged. */
__global__ void round_bf16_copy(const float *__restrict__ src, int64_t n, float *__restrict__ dst) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        dst[i] = round_bf16_rne(src[i]);
}

} // namespace

odl_status conv_wgrad_tf32(const ConvWgradParams &g, float *dw, float *db, const char *what) {
    return wgrad_run(g, dw, db, 0, what);
}

bool conv_wgrad_bf16_in_stage() { return odl_env_bool(ODL_ENV_CONV_WGRAD_BF16_STAGE); }

odl_status conv_wgrad_bf16(const ConvWgradParams &g, float *dw, float *db, bool in_stage, const char *what) {
    if (in_stage) return wgrad_run(g, dw, db, 0, what, true);
    if (db) return ODL_ERR(ODL_E_INVAL, "%s: the bias gradient is summed here only in stage (in_stage)", what);
    const int64_t ndy = (int64_t)g.N * g.K * g.P * g.Q, nx = (int64_t)g.N * g.C * g.H * g.W;
    if ((int64_t)g.K * g.C * g.R * g.S <= 0 || ndy == 0) return wgrad_run(g, dw, nullptr, 0, what);
    const size_t bdy = ((size_t)ndy * sizeof(float) + 255) & ~(size_t)255, bx = (size_t)nx * sizeof(float);
    const size_t off = (bdy + bx + 255) & ~(size_t)255;
    /* the whole workspace at once (copies, then wgrad_run's partials): a growth between the two would
     * allocate a second buffer and keep the first, holding the copies, retired until the backend's release */
    const WgradSplit sp = wgrad_split(g.K, (int64_t)g.C * g.R * g.S, (int64_t)g.N * g.P * g.Q);
    void *ws = nullptr;
    ODL_CHECK(workspace(off + sp.partial_bytes, &ws));
    float *rdy = static_cast<float *>(ws), *rx = reinterpret_cast<float *>(static_cast<char *>(ws) + bdy);
    round_bf16_copy<<<grid_for(ndy, 256), 256, 0, stream()>>>(g.dy, ndy, rdy);
    round_bf16_copy<<<grid_for(nx, 256), 256, 0, stream()>>>(g.x, nx, rx);
    ODL_CUDA_LAUNCH_CHECK("odl_conv2d_bwd_weight_sm90_round");
    ConvWgradParams r = g;
    r.dy = rdy;
    r.x = rx;
    return wgrad_run(r, dw, nullptr, off, what);
}

} // namespace sm90
} // namespace odlk
