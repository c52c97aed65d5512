/* float16 NHWC convolution on tensor cores (odl/backend.h, odl_conv2d_f16_args; CPU twin:
 * kernels/cpu/nhwc_f16.c). Inference only: YOLOv5 --half.
 *
 * Implicit GEMM (as CUTLASS's "analytic" iterator, NVIDIA, cutlass/conv/threadblock): the output
 * y[N*P*Q, K] (NHWC rows are pixels, pixel stride ldy) is
 *     A[N*P*Q, R*S*C] x W^T,  A[(n, p, q), (r, s, c)] = x[n, p*stride_h - pad_h + r, q*stride_w - pad_w + s, c]
 * and W is the KRSC weight read as [K, R*S*C] row-major. The reduction index (r, s, c) runs with c fastest,
 * so 8 consecutive reduction elements are 8 consecutive channels of one input pixel: one 16-byte load
 * (C % 8 == 0), zero-filled by cp.async when the pixel lies in the padding.
 *
 * Block tile BM pixels x BN output channels x BK = 32 reduction elements, STAGES-deep cp.async pipeline
 * in shared memory (rows padded to 40 halves = 80 bytes, which keeps ldmatrix conflict-free), warps of
 * MT x NT mma.sync.m16n8k16 tiles (float16 inputs, float32 accumulation: the PTX ISA's
 * "Matrix fragments for mma.m16n8k16"). Each thread loads fixed tile rows for the whole reduction, so a
 * row's pixel (n, p, q) is decoded once per block, and the (r, s, c) of its chunk once per k-step.
 * Epilogue in registers: v = act(acc + bias[k]) + residual, rounded once to half (or stored as float).
 * The reduction order is fixed by the tile shape, so results are deterministic.
 * A third epilogue (odl_cuda_yolov5_detect_head_f16) applies YOLOv5's Detect decoding to each head value
 * and writes it straight to its row of the detection output, so the head tensor never reaches memory
 * (the decode was a third of the batch-32 float16 forward as a separate pass).
 * Limits: N*P*Q < 2^31 and R*S*C < 2^31 (ODL_E_UNSUPPORTED otherwise).
 */
#include <atomic>
#include <cuda_fp16.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/conv2d_f16.cuh"
#include "kernels/cuda/mma_util.cuh"
#include "kernels/yolov5_decode.h"

namespace odlk {
namespace {

constexpr int kBK = 32;
constexpr int kLds = kBK + 8; /* shared-memory row, in halves */

/* The kernel's accumulators acc[MT][NT][4] of warp (wm, wn): mma.m16n8k16's c0, c1 at (row lane/4, cols
 * 2*(lane%4) + {0, 1}) of each 16 x 8 tile, c2, c3 eight rows further down. */

/* Epilogue of kOutHalf / kOutF32: v = act(acc + bias) + residual, stored as half (rounded once) or float. */
template <int WM, int WN, int MT, int NT, int OUT>
__device__ __forceinline__ void epilogue_store(const ConvF16Params &p, const float (&acc)[MT][NT][4], int m0, int n0) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int wm = warp % WM, wn = warp / WM;
#pragma unroll
    for (int j = 0; j < NT; j++)
        f16_store_cols<OUT, MT>(p, n0 + wn * NT * 8 + j * 8 + (lane & 3) * 2, m0 + wm * MT * 16 + (lane >> 2),
                                [&](int i, int e) { return acc[i][j][e]; });
}

/* Epilogue of kOutDetect: the head values decoded and scattered to the detection rows (smem_raw: the
 * pipeline's shared memory, free by now). */
template <int WM, int WN, int MT, int NT>
__device__ __forceinline__ void epilogue_detect(const ConvF16Params &p, const float (&acc)[MT][NT][4],
                                                unsigned char *smem_raw, int m0, int n0) {
    constexpr int BM = WM * MT * 16, BN = WN * NT * 8, THREADS = WM * WN * 32;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp % WM, wn = warp / WM;
    /* YOLOv5 Detect decoding (kernels/yolov5_decode.h), stored at out[n, row_offset + a * ny * nx +
     * y * nx + x, k] for channel a * no + k.
     * Per-row (pixel) and per-column (anchor, k) facts are tabled once per block, and the decoded tile
     * goes through shared memory (the pipeline's buffers, free now) in chunks of rows, so that the stores
     * run along the 5 + nc values of output rows. */
    __shared__ int64_t s_rowbase[BM];
    __shared__ float s_gx[BM], s_gy[BM];
    __shared__ int64_t s_coloff[BN];
    __shared__ int s_k[BN];
    __shared__ float s_anc[BN], s_bias[BN];
    __syncthreads();
    for (int r = tid; r < BM; r += THREADS) {
        const int gm = m0 + r;
        int n = 0, pix = 0, yy = 0, xx = 0;
        if (gm < p.M) {
            p.fdPQ.divmod(gm, n, pix);
            p.fdQ.divmod(pix, yy, xx);
        }
        s_rowbase[r] = ((int64_t)n * p.rows_total + p.row_offset + pix) * p.no;
        s_gx[r] = (float)xx - 0.5f;
        s_gy[r] = (float)yy - 0.5f;
    }
    for (int c = tid; c < BN; c += THREADS) {
        const int col = n0 + c, a = col / p.no, k = col - a * p.no;
        s_coloff[c] = (int64_t)a * p.fdPQ.d * p.no + k;
        s_k[c] = k;
        s_anc[c] = (k == 2 || k == 3) && a < p.na ? p.anchors[a * 2 + (k - 2)] : 0.0f;
        s_bias[c] = p.bias && col < p.Kout ? p.bias[col] : 0.0f;
    }
    __syncthreads();
    float *sO = reinterpret_cast<float *>(smem_raw);
    constexpr int ldo = BN + 1;
    int chunk = (int)(p.smem_bytes / (ldo * sizeof(float))) / 16 * 16;
    if (chunk > BM) chunk = BM;
    float *out = reinterpret_cast<float *>(p.y);
    for (int r0 = 0; r0 < BM; r0 += chunk) {
        const int rows = BM - r0 < chunk ? BM - r0 : chunk;
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int i = 0; i < MT; i++)
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const int rl = wm * MT * 16 + i * 16 + (lane >> 2) + h * 8;
                    if (rl < r0 || rl >= r0 + rows) continue;
#pragma unroll
                    for (int e = 0; e < 2; e++) {
                        const int cl = wn * NT * 8 + j * 8 + (lane & 3) * 2 + e;
                        sO[(rl - r0) * ldo + cl] = yolov5_decode(acc[i][j][2 * h + e] + s_bias[cl], s_k[cl],
                                                                 s_gx[rl], s_gy[rl], p.stride, s_anc[cl]);
                    }
                }
        __syncthreads();
        for (int idx = tid; idx < rows * BN; idx += THREADS) {
            const int rl = idx / BN, cl = idx - rl * BN;
            if (m0 + r0 + rl < p.M && n0 + cl < p.Kout) out[s_rowbase[r0 + rl] + s_coloff[cl]] = sO[rl * ldo + cl];
        }
        __syncthreads();
    }
}

/* WM x WN warps, each MT x NT mma tiles of 16 x 8: BM = WM*MT*16 pixels, BN = WN*NT*8 channels. */
template <int WM, int WN, int MT, int NT, int STAGES, int OUT>
__global__ void __launch_bounds__(WM *WN * 32)
    conv2d_f16_kernel(const ConvF16Params p) {
    constexpr int BM = WM * MT * 16, BN = WN * NT * 8, THREADS = WM * WN * 32;
    constexpr int A_CHUNKS = BM * (kBK / 8), B_CHUNKS = BN * (kBK / 8);
    static_assert(A_CHUNKS % THREADS == 0, "A tile chunks must divide among the threads");
    static_assert(THREADS % (kBK / 8) == 0, "a thread keeps one chunk column");
    constexpr int A_PER = A_CHUNKS / THREADS;
    constexpr int B_PER = (B_CHUNKS + THREADS - 1) / THREADS;
    static_assert(NT % 2 == 0, "B fragments are loaded two n-tiles at a time");

    extern __shared__ __align__(16) unsigned char smem_raw[];
    __half *sA = reinterpret_cast<__half *>(smem_raw);      /* [STAGES][BM][kLds] */
    __half *sB = sA + p.smem_stages * BM * kLds;            /* [smem_stages][BN][kLds] */

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp % WM, wn = warp / WM;
    const int tileN = blockIdx.x % p.tilesN, tileM = blockIdx.x / p.tilesN;
    const int m0 = tileM * BM, n0 = tileN * BN;

    /* This thread's A chunks: rows tid/4 + i*(THREADS/4), chunk column tid%4 (8 reduction elements). */
    const int kc = tid & 3;
    int a_ih[A_PER], a_iw[A_PER];
    int64_t a_base[A_PER];
#pragma unroll
    for (int i = 0; i < A_PER; i++) f16_pixel_window(p, m0 + (tid >> 2) + i * (THREADS / 4), a_ih[i], a_iw[i], a_base[i]);

    const int KT = (p.Kred + kBK - 1) / kBK;

    auto load_stage = [&](int stage, int kt) {
        int r, s;
        int64_t off;
        const bool kin = f16_tap(p, kt * kBK + kc * 8, r, s, off);
        __half *dA = sA + stage * BM * kLds;
#pragma unroll
        for (int i = 0; i < A_PER; i++) {
            const int row = (tid >> 2) + i * (THREADS / 4);
            const bool v = kin && (unsigned)(a_ih[i] + r) < (unsigned)p.H && (unsigned)(a_iw[i] + s) < (unsigned)p.W;
            const __half *src = v ? p.x + a_base[i] + off : p.x;
            cp_async16(smem_u32(dA + row * kLds + kc * 8), src, v);
        }
        __half *dB = sB + stage * BN * kLds;
#pragma unroll
        for (int i = 0; i < B_PER; i++) {
            const int id = tid + i * THREADS;
            if (B_CHUNKS % THREADS == 0 || id < B_CHUNKS) {
                const int row = id >> 2, col = (id & 3) * 8;
                const int gk = kt * kBK + col, gn = n0 + row;
                const bool v = gn < p.Kout && gk < p.Kred;
                const __half *src = v ? p.w + (int64_t)gn * p.Kred + gk : p.w;
                cp_async16(smem_u32(dB + row * kLds + col), src, v);
            }
        }
    };

    float acc[MT][NT][4];
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[i][j][e] = 0.0f;

#pragma unroll
    for (int st = 0; st < STAGES - 1; st++) {
        if (st < KT) load_stage(st, st);
        cp_async_commit();
    }

    for (int kt = 0; kt < KT; kt++) {
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        {
            const int nk = kt + STAGES - 1;
            if (nk < KT) load_stage(nk % STAGES, nk);
            cp_async_commit();
        }
        const __half *tA = sA + (kt % STAGES) * BM * kLds;
        const __half *tB = sB + (kt % STAGES) * BN * kLds;
#pragma unroll
        for (int k16 = 0; k16 < kBK / 16; k16++) {
            uint32_t af[MT][4];
#pragma unroll
            for (int i = 0; i < MT; i++) {
                const int row = wm * MT * 16 + i * 16 + (lane & 15);
                const int col = k16 * 16 + (lane >> 4) * 8;
                ldmatrix_x4(smem_u32(tA + row * kLds + col), af[i][0], af[i][1], af[i][2], af[i][3]);
            }
            uint32_t bf[NT][2];
#pragma unroll
            for (int j = 0; j < NT / 2; j++) {
                const int row = wn * NT * 8 + j * 16 + (lane >> 4) * 8 + (lane & 7);
                const int col = k16 * 16 + ((lane >> 3) & 1) * 8;
                ldmatrix_x4(smem_u32(tB + row * kLds + col), bf[2 * j][0], bf[2 * j][1], bf[2 * j + 1][0],
                            bf[2 * j + 1][1]);
            }
#pragma unroll
            for (int i = 0; i < MT; i++)
#pragma unroll
                for (int j = 0; j < NT; j++) mma_16x8<MmaIn::F16>(acc[i][j], af[i], bf[j][0], bf[j][1]);
        }
    }
    cp_async_wait<0>();

    if constexpr (OUT == kOutDetect) epilogue_detect<WM, WN, MT, NT>(p, acc, smem_raw, m0, n0);
    else epilogue_store<WM, WN, MT, NT, OUT>(p, acc, m0, n0);
}

template <int WM, int WN, int MT, int NT, int STAGES>
odl_status launch_cfg(const ConvF16Params &p, int out, const char *name) {
    constexpr int BM = WM * MT * 16, BN = WN * NT * 8, THREADS = WM * WN * 32;
    /* A reduction of KT < STAGES k-tiles only ever touches stages 0..KT-1 (the pipeline loads k-tile t into
     * stage t % STAGES), so a short reduction (a 1x1 convolution of 16..32 channels: KT = 1) gets a smaller
     * buffer and more resident blocks: those layers are bound by load latency, not by the tensor cores. */
    const int KT = (p.Kred + kBK - 1) / kBK;
    ConvF16Params q = p;
    q.smem_stages = KT < STAGES ? KT : STAGES;
    const size_t smem = (size_t)q.smem_stages * (BM + BN) * kLds * sizeof(__half);
    q.smem_bytes = (int)smem;
    constexpr size_t smem_max = (size_t)STAGES * (BM + BN) * kLds * sizeof(__half);
    q.tilesN = (p.Kout + BN - 1) / BN;
    const int64_t tilesM = ((int64_t)p.M + BM - 1) / BM;
    const int64_t blocks = tilesM * q.tilesN;
    if (blocks > INT32_MAX) return ODL_ERR(ODL_E_UNSUPPORTED, "conv2d_f16: %lld blocks", (long long)blocks);
    auto k = out == kOutDetect ? conv2d_f16_kernel<WM, WN, MT, NT, STAGES, kOutDetect>
             : out == kOutF32  ? conv2d_f16_kernel<WM, WN, MT, NT, STAGES, kOutF32>
                               : conv2d_f16_kernel<WM, WN, MT, NT, STAGES, kOutHalf>;
    if (smem_max > 48 * 1024) { /* one set of devices per output kind: each is its own kernel */
        static std::atomic<unsigned long long> opted[3];
        ODL_CHECK(opt_in_smem(k, (int)smem_max, opted[out == kOutDetect ? 0 : out == kOutF32 ? 1 : 2]));
    }
    k<<<(unsigned)blocks, THREADS, smem, stream()>>>(q);
    ODL_CUDA_LAUNCH_CHECK(name);
    return ODL_OK;
}

} // namespace
} // namespace odlk

/* Tile choice: the narrowest tile that covers the output channels (YOLOv5n has 16..256 channels and a
 * 255-channel Detect head), so that few columns are wasted; 128 pixels per block everywhere. On a 9.0
 * device ODL_CONV_F16_SM90 may send the call to the wgmma kernels first (conv2d_f16_sm90.cu).
 * odl_cuda_conv2d_f16_ex forces one, for benchmarks. */
extern "C" int odl_cuda_conv2d_f16_num_configs(void) { return 8; }

namespace odlk {
namespace {
odl_status run(const odl_conv2d_f16_args *a, int cfg, int out, const ConvF16Params *detect) {
    const odl_conv2d_shape &s = a->s;
    const int64_t M = (int64_t)s.N * s.P * s.Q, Kred = (int64_t)s.R * s.S * s.C;
    if (M > INT32_MAX || Kred > INT32_MAX)
        return ODL_ERR(ODL_E_UNSUPPORTED, "conv2d_f16: N*P*Q = %lld, R*S*C = %lld (limit 2^31)", (long long)M,
                       (long long)Kred);
    if (M == 0 || s.K == 0) return ODL_OK;
    ConvF16Params p;
    p.x = reinterpret_cast<const __half *>(a->x);
    p.w = reinterpret_cast<const __half *>(a->w);
    p.bias = a->bias;
    p.res = reinterpret_cast<const __half *>(a->residual);
    p.y = a->y;
    p.ldx = a->ldx;
    p.ldr = a->ldr;
    p.ldy = a->ldy;
    p.M = (int)M;
    p.Kout = s.K;
    p.Kred = (int)Kred;
    p.H = s.H;
    p.W = s.W;
    p.C = s.C;
    p.S = s.S;
    p.sh = s.stride_h;
    p.sw = s.stride_w;
    p.ph = s.pad_h;
    p.pw = s.pad_w;
    p.fdPQ = FastDiv(s.P * s.Q);
    p.fdQ = FastDiv(s.Q);
    p.fdC = FastDiv(s.C);
    p.fdS = FastDiv(s.S);
    p.tilesN = 1;
    p.act = (int)a->act;
    p.na = p.no = 0;
    p.rows_total = p.row_offset = 0;
    p.stride = 0.0f;
    if (detect) {
        p.na = detect->na;
        p.no = detect->no;
        p.rows_total = detect->rows_total;
        p.row_offset = detect->row_offset;
        p.stride = detect->stride;
        for (int i = 0; i < 32; i++) p.anchors[i] = detect->anchors[i];
    }
    if (out != kOutDetect && (cfg >= 4 || (cfg < 0 && sm90::conv_f16_use(p, out))))
        return sm90::conv_f16(p, out, cfg >= 4 ? cfg - 4 : -1);
    if (cfg < 0) {
        if (s.K <= 16) cfg = 0;
        else if (s.K <= 32) cfg = 1;
        else if (s.K <= 64) cfg = 2;
        else cfg = 3;
    }
    switch (cfg) {
    case 0: return launch_cfg<4, 1, 2, 2, 4>(p, out, "conv2d_f16_kernel<128x16>");
    case 1: return launch_cfg<4, 1, 2, 4, 4>(p, out, "conv2d_f16_kernel<128x32>");
    case 2: return launch_cfg<2, 2, 4, 4, 4>(p, out, "conv2d_f16_kernel<128x64>");
    default: return launch_cfg<2, 4, 4, 4, 3>(p, out, "conv2d_f16_kernel<128x128>");
    }
}
} // namespace
} // namespace odlk

extern "C" odl_status odl_cuda_conv2d_f16_ex(const odl_conv2d_f16_args *a, int cfg) {
    return odlk::run(a, cfg, a->y_f32 ? odlk::kOutF32 : odlk::kOutHalf, nullptr);
}

extern "C" odl_status odl_cuda_yolov5_detect_head_f16(const odl_conv2d_f16_args *a, const odl_detect_args *det) {
    if (!a || !det || !det->out || !det->anchors_wh) return ODL_ERR(ODL_E_INVAL, "yolov5 Detect head: NULL argument");
    float *out = det->out;
    const int na = det->na, no = det->no;
    const int64_t rows_total = det->rows_total, row_offset = det->row_offset;
    const float stride = det->stride, *anchors_wh = det->anchors_wh;
    if (na < 1 || na > 16 || no < 6 || (int64_t)na * no != a->s.K)
        return ODL_ERR(ODL_E_INVAL, "yolov5 Detect head: %d anchors x %d outputs for %d channels", na, no, a->s.K);
    odlk::ConvF16Params d;
    d.na = na;
    d.no = no;
    d.rows_total = rows_total;
    d.row_offset = row_offset;
    d.stride = stride;
    for (int i = 0; i < 32; i++) d.anchors[i] = i < 2 * na ? anchors_wh[i] : 0.0f;
    odl_conv2d_f16_args b = *a;
    b.act = ODL_ACT_NONE;
    b.residual = nullptr;
    b.y = out;
    return odlk::run(&b, -1, odlk::kOutDetect, &d);
}

extern "C" odl_status odl_cuda_conv2d_f16(const odl_conv2d_f16_args *a) { return odl_cuda_conv2d_f16_ex(a, -1); }
