/* Hopper (compute capability 9.0) float16 NHWC convolution on wgmma: conv2d_f16.cu's implicit GEMM (its
 * file comment has the formulas) for YOLOv5 --half, compiled for sm_90a only (CMake: the odl_sm90a objects).
 * The float16 tensors are NHWC already, so the gather is conv2d_sm90.cu's NHWC one with no copy before it:
 *   D[pixel][channel] = sum_k A[pixel][k] * W[channel][k],  k = (r * S + s) * C + c
 * pixels as wgmma's M (128 a CTA), output channels as N (BN = 16, 32, 64 or 128 a CTA), k in 128-byte rows of
 * 64 halves. Warpgroup 0 produces: thread t copies 16-byte chunk t % 8 (8 channels of one pixel's tap,
 * zero-filled in the padding and past the reduction) of rows t / 8 + 16 j of every stage by cp.async, and
 * the weights' rows [n0, n0 + BN) of the KRSC tensor as they are (zero-filled past K and the reduction:
 * nothing packed), into 128-byte-swizzled K-major tiles of a STAGES-deep mbarrier ring; each thread's
 * copies arrive on the stage's "full" barrier when they land. Warpgroups 1 and 2 consume, 64 pixels each,
 * with conv_sm90_core.cuh's consume_ring (both operands from shared memory, one group in flight) and store
 * straight from their accumulators (conv2d_f16.cuh's f16_store_cols: bias, activation, residual, one
 * rounding to half), as the mma.sync kernels do. Persistent (ODL_CONV_F16_PERSIST): CTAS CTAs a multiprocessor walk the tiles,
 * the ring's stages and phases carried from tile to tile, so that the next tile's copies run under this
 * one's last wgmma and stores (YOLOv5n's reductions are 1 to 18 stages: a CTA per tile would wait for its
 * first copies every time). Float32 accumulation in a fixed order: deterministic.
 * Needs C % 8 == 0, ldx % 8 == 0 and 16-byte aligned x and w (conv_f16_use); the Detect heads' decoding
 * epilogue stays on the mma.sync kernels. */
#include <algorithm>
#include <atomic>

#include <cuda_fp16.h>

#include "conv2d_f16.cuh"
#include "conv_sm90_core.cuh"
#include "gemm_sm90.h"
#include "mma_util.cuh"
#include "odl/env.h"

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define ODL_CONV_F16_SM90_STUB 1 /* a device pass other than sm_90a: the kernel compiles to nothing */
#endif

namespace odlk {
namespace sm90 {
namespace {

template <int BN_>
struct ConvF16Cfg {
    static constexpr int BM = 128, BN = BN_, THREADS = 384;
    static constexpr int BK = kRowBytes / 2; /* halves per stage row */
    static constexpr int CTAS = BN <= 64 ? 2 : 1; /* per multiprocessor */
    static constexpr int STAGES = BN <= 64 ? 4 : 5;
    static constexpr int A_BYTES = BM * kRowBytes, B_BYTES = BN * kRowBytes;
    static constexpr int STAGE_BYTES = A_BYTES + B_BYTES, RING_BYTES = STAGES * STAGE_BYTES;
    static constexpr int SMEM_BYTES = RING_BYTES + 2 * STAGES * 8 + 1024;
    using Op = Wgmma<WgIn::F16, BN, 0, 0>;
    static_assert(CTAS * SMEM_BYTES <= 227 * 1024, "CTAS fit a multiprocessor");
};

/* Where a CTA's warpgroups are in its ring: the stage next filled / read and its phase, carried across the
 * CTA's tiles. */
struct RingPos {
    int s = 0;
    uint32_t phase = 0;
};

/* The producer's copies of one tile (pixels m0.., channels n0..) into the ring. */
template <class C>
__device__ __forceinline__ void produce_f16(const ConvF16Params &p, int m0, int n0, int kblocks, unsigned char *smem,
                                            uint64_t *full, uint64_t *empty, RingPos &rp) {
    constexpr int PJ = C::BM / 16;
    const int tid = threadIdx.x % 128, ch = tid & 7, rq = tid >> 3;
    int hb[PJ], wb[PJ];
    int64_t base[PJ];
#pragma unroll
    for (int j = 0; j < PJ; j++) f16_pixel_window(p, m0 + rq + 16 * j, hb[j], wb[j], base[j]);
    for (int kb = 0; kb < kblocks; kb++) {
        int r, sx;
        int64_t off;
        const bool kin = f16_tap(p, kb * C::BK + ch * 8, r, sx, off);
        mbar_wait(&empty[rp.s], rp.phase ^ 1);
        const uint32_t sa = smem_addr(smem + rp.s * C::STAGE_BYTES), sb = sa + C::A_BYTES;
#pragma unroll
        for (int j = 0; j < PJ; j++) {
            const bool ok = kin && (unsigned)(hb[j] + r) < (unsigned)p.H && (unsigned)(wb[j] + sx) < (unsigned)p.W;
            cp_async16_ca(sa + sw128(rq + 16 * j, (uint32_t)ch * 16), ok ? p.x + base[j] + off : p.x, ok);
        }
#pragma unroll
        for (int i = tid; i < C::BN * 8; i += 128) {
            const int row = i >> 3, chunk = i & 7, gk = kb * C::BK + chunk * 8, gn = n0 + row;
            const bool ok = gn < p.Kout && gk < p.Kred;
            cp_async16(sb + sw128(row, (uint32_t)chunk * 16), ok ? p.w + (int64_t)gn * p.Kred + gk : p.w, ok);
        }
        cp_async_mbar_arrive(&full[rp.s]);
        if (++rp.s == C::STAGES) {
            rp.s = 0;
            rp.phase ^= 1;
        }
    }
}

/* A consumer warpgroup's epilogue of one tile, straight from its accumulators (wgmma m64nBN's, per warp:
 * rows lane / 4 (+ 8), columns 8j + 2 (lane % 4) (+ 1)), through f16_store_cols. */
template <int BN, int OUT>
__device__ __forceinline__ void store_tile(const ConvF16Params &p, const float (&acc)[BN / 2], int m0, int n0, int cw) {
    const int lane = threadIdx.x % 32;
    const int row0 = m0 + cw * 64 + ((threadIdx.x % 128) / 32) * 16 + lane / 4;
#pragma unroll
    for (int j = 0; j < BN / 8; j++)
        f16_store_cols<OUT, 1>(p, n0 + j * 8 + (lane & 3) * 2, row0, [&](int, int e) { return acc[4 * j + e]; });
}

/* Tiles t = blockIdx.x, + gridDim.x, ... of tilesM x tilesN (channel tiles fastest, so that the CTAs at work
 * together read the same pixels): with a grid of CTAS per multiprocessor, the producer fills the next tile's
 * stages while the consumers store this one's outputs from registers. */
template <int BN, int OUT>
__global__ void __launch_bounds__(384, ConvF16Cfg<BN>::CTAS) conv_f16_sm90_kernel(const ConvF16Params p, int tiles) {
#ifndef ODL_CONV_F16_SM90_STUB
    using C = ConvF16Cfg<BN>;
    extern __shared__ unsigned char smem_raw[];
    uint64_t *full, *empty;
    unsigned char *smem = ring_setup<C>(smem_raw, full, empty);
    const int wg = threadIdx.x / 128;
    const int kblocks = (p.Kred + C::BK - 1) / C::BK;
    if (wg == 0) {
        RingPos rp;
        for (int t = blockIdx.x; t < tiles; t += gridDim.x)
            produce_f16<C>(p, (t / p.tilesN) * C::BM, (t % p.tilesN) * BN, kblocks, smem, full, empty, rp);
        return;
    }
    const uint32_t a_off = (uint32_t)(wg - 1) * 64 * kRowBytes;
    ConsumerRing<C::STAGES> ring;
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        float acc[BN / 2];
        consume_ring<C>(acc, smem, full, empty, kblocks, a_off, ring);
        store_tile<BN, OUT>(p, acc, (t / p.tilesN) * C::BM, (t % p.tilesN) * BN, wg - 1);
    }
#endif
}

template <int BN>
odl_status launch(const ConvF16Params &p, int out) {
    using C = ConvF16Cfg<BN>;
    const int64_t tilesM = ((int64_t)p.M + C::BM - 1) / C::BM, tilesN = (p.Kout + BN - 1) / BN;
    if (tilesM * tilesN > INT32_MAX)
        return ODL_ERR(ODL_E_UNSUPPORTED, "conv2d_f16 (wgmma): %lld x %lld tiles", (long long)tilesM, (long long)tilesN);
    const int tiles = (int)(tilesM * tilesN);
    const int grid = odl_env_bool(ODL_ENV_CONV_F16_PERSIST) ? std::min(tiles, C::CTAS * sm_count()) : tiles;
    ConvF16Params q = p;
    q.tilesN = (int)tilesN;
    auto k = out == kOutF32 ? conv_f16_sm90_kernel<BN, kOutF32> : conv_f16_sm90_kernel<BN, kOutHalf>;
    static std::atomic<unsigned long long> opted[2];
    ODL_CHECK(opt_in_smem(k, C::SMEM_BYTES, opted[out == kOutF32]));
    k<<<(unsigned)grid, C::THREADS, C::SMEM_BYTES, stream()>>>(q, tiles);
    ODL_CUDA_LAUNCH_CHECK("conv_f16_sm90_kernel");
    return ODL_OK;
}

/* The output-channel tile: the narrowest of 16, 32, 64, 128 that covers K (YOLOv5n: 16..256 channels, 255
 * in the heads), as conv2d_f16.cu picks its mma.sync tiles. */
int choose_cfg(int Kout) { return Kout <= 16 ? 0 : Kout <= 32 ? 1 : Kout <= 64 ? 2 : 3; }


/* Whether the kernels can run p at all: a 9.0 device with the wgmma path on (gemm_sm90.h's available()), a
 * plain half or float output, 16-byte chunks of 8 channels of one pixel in x and w. */
bool conv_f16_fits(const ConvF16Params &p, int out) {
    return (out == kOutHalf || out == kOutF32) && p.C % 8 == 0 && p.ldx % 8 == 0 &&
           ((uintptr_t)p.x | (uintptr_t)p.w) % 16 == 0 && available();
}

} // namespace

bool conv_f16_use(const ConvF16Params &p, int out) {
    const int64_t mode = odl_env_int(ODL_ENV_CONV_F16_SM90);
    if (mode == 0 || !conv_f16_fits(p, out)) return false;
    if (mode == 2) return true;
    /* mode 1: where the kernel lab measured wgmma faster than mma.sync (odl_bench_kernels --only convf16,
     * YOLOv5n batch 32, H100, 2026-12-07 tenth session: 16 rows, 0.64-0.80x the time at 3x3 and 1x1 layers
     * of 16..64 output channels over a reduction of 64 or more; 1.1-1.4x slower with 128 or 256 output
     * channels (one CTA of BN 128 per multiprocessor) and at 1x1 layers of 32 input channels (half of each
     * 64-wide k row zeros)), and a CTA for every multiprocessor at least (a batch-1 layer of YOLOv5n at
     * 20 x 20 has 4 tiles) */
    const int bn = 16 << choose_cfg(p.Kout);
    return p.Kout <= 64 && p.Kred >= 64 && ((int64_t)p.M + 127) / 128 * ((p.Kout + bn - 1) / bn) >= sm_count();
}

odl_status conv_f16(const ConvF16Params &p, int out, int cfg) {
    if (!conv_f16_fits(p, out)) return ODL_ERR(ODL_E_UNSUPPORTED, "conv2d_f16 (wgmma): a call it does not take");
    switch (cfg < 0 ? choose_cfg(p.Kout) : cfg) {
    case 0: return launch<16>(p, out);
    case 1: return launch<32>(p, out);
    case 2: return launch<64>(p, out);
    default: return launch<128>(p, out);
    }
}

} // namespace sm90
} // namespace odlk
