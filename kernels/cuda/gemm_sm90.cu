/* Hopper (compute capability 9.0) GEMM on wgmma + TMA: the tensor-core path of gemm_lowp (TF32, BF16) and
 * of gemm_typed (BF16 / FP16 / TF32 operands in memory, float32 / BF16 / FP16 output) on H100 / H200.
 * Compiled for sm_90a only (CMake: the odl_sm90a objects); other GPUs keep gemm_tc.cu's mma.sync kernels.
 *
 *   C = act(alpha * op(A) op(B) + beta * C + bias) + residual, row-major storage, float32 accumulation.
 *
 * Structure (after the public Hopper kernels that ../shared/KERNELS.md lists: pranjalssh/fast.cu's
 * matmul steps, CUTLASS's sm90 warp-specialised GEMM; no code copied):
 *   - A persistent grid (at most one CTA per multiprocessor) walks work units u = blockIdx.x,
 *     blockIdx.x + gridDim.x, ...; a unit is one BM x BN output tile and one split of the K range, tiles
 *     in grouped order (GROUP_M tile rows walk the columns together, so the CTAs of one wave share A and
 *     B panels in L2).
 *   - Warpgroup 0 is the producer: one thread issues TMA loads (cp.async.bulk.tensor) of the A and B
 *     slices of each K step into a STAGES-deep ring of shared-memory stages, 128-byte swizzled, each
 *     stage completing on its "full" mbarrier (expect_tx bytes), and waits on the stage's "empty" mbarrier
 *     before reusing it. It gives its registers away (setmaxnreg.dec).
 *   - Warpgroups 1..CONSUMERS each own 64 rows of the tile: per stage they issue BK / k wgmma.mma_async
 *     m64nBNk{16,8} on descriptors of the swizzled stage, commit, wait for the previous group
 *     (wgmma.wait_group 1: one group in flight) and release the previous stage to the producer.
 *   - After the last K step each consumer warp stores its 16 rows while the producer already fills the ring
 *     for the next unit: the plain epilogue (C = acc) of a slice inside C straight from the registers, two
 *     columns per store; any other through a small shared-memory staging buffer, 32 columns at a time,
 *     with the epilogue's code in one rolled loop (unrolled over the 128 accumulators it was half a
 *     megabyte of SASS, fetched cold at every tile: a third of the consumers' time on the H200).
 *   - Split-K: units of one tile write raw partial sums to the workspace; splitk_reduce adds them in split
 *     order and applies the epilogue (deterministic, as gemm_core.cuh's).
 * Layouts: wgmma's A is M x K and B is K x N in shared memory, K-major (K contiguous) or, for 16-bit
 * inputs, MN-major (the transpose immediates), so every trans_a / trans_b is a TMA load without a copy.
 * TF32 wgmma reads K-major operands only, except for A from registers. An N-major float32 B (the NN and TN
 * layouts: a linear layer's data and weight gradients) makes the kernel compute the transposed product
 * C^T = op(B)^T op(A)^T instead (swap_of): B, M-major in that product, is read into registers, op(A)^T is
 * its K-major B, and the epilogue stores C^T transposed, i.e. C. Only an M-major A of a swapped product
 * (TN), or any MN-major operand that ODL_GEMM_TF32_SWAP=0 leaves, is first transposed into the workspace
 * (transpose_kernel, bits unchanged): 19 MB of copy for MNIST fc1's weight gradient at batch 512 before,
 * 256 KB now.
 * TF32 rounding: the tensor cores read float32 operands' upper 19 bits; odl_cuda_sm90_tf32_rounding says
 * what this device does (measured once, see below) so that the tests can hold it to it.
 * Limits: M, N, K < 2^31; operand bases 16-byte aligned and leading dimensions whose byte size is a multiple
 * of 16 (TMA's rule); otherwise ODL_E_UNSUPPORTED and the caller takes gemm_tc.cu's kernels.
 */
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <atomic>
#include <mutex>

#include "gemm_core.cuh"
#include "gemm_sm90.h"
#include "gemm_typed.cuh"
#include "kernels/gemm_table.h"
#include "odl/env.h"

namespace odlk {
namespace sm90 {
namespace {

/* out[c, r] = in[r, c] for r < R, c < Cn (float32 bits unchanged), ld_in / ld_out in elements; 32 x 32
 * tiles through shared memory. */
__global__ void __launch_bounds__(256) transpose_kernel(const float *__restrict__ in, int64_t ld_in, int R, int Cn,
                                                        float *__restrict__ outp, int64_t ld_out) {
    __shared__ float tile[32][33];
    const int c0 = blockIdx.x * 32, r0 = blockIdx.y * 32;
    for (int j = threadIdx.y; j < 32; j += 8) {
        const int r = r0 + j, c = c0 + threadIdx.x;
        if (r < R && c < Cn) tile[j][threadIdx.x] = in[(int64_t)r * ld_in + c];
    }
    __syncthreads();
    for (int j = threadIdx.y; j < 32; j += 8) {
        const int c = c0 + j, r = r0 + threadIdx.x;
        if (r < R && c < Cn) outp[(int64_t)c * ld_out + r] = tile[threadIdx.x][j];
    }
}

PFN_cuTensorMapEncodeTiled_v12000 g_encode = nullptr;
std::once_flag g_encode_once;

} // namespace

/* ---- host side ---- */

odl_status encoder(PFN_cuTensorMapEncodeTiled_v12000 *out) {
    std::call_once(g_encode_once, [] {
        void *fn = nullptr;
        cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q) ==
                cudaSuccess &&
            q == cudaDriverEntryPointSuccess)
            g_encode = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
        cudaGetLastError();
    });
    if (!g_encode) return ODL_ERR(ODL_E_UNSUPPORTED, "gemm_sm90: the driver has no cuTensorMapEncodeTiled");
    *out = g_encode;
    return ODL_OK;
}

const TileDesc kTiles[kTileCount] = {
    {128, 256, 4, "wgmma 128x256 4 stages", "128x256"},
    {128, 128, 6, "wgmma 128x128 6 stages", "128x128"},
    {64, 128, 8, "wgmma 64x128 8 stages", "64x128"},
};

namespace {
int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Whether a's product runs swapped (see the top): a tf32 product whose B is N-major, unless A is M-major
 * and the larger of the two (then transposing A would cost more than transposing B). */
bool swap_of(const Args &a) {
    return a.ab_type == GEMM_T_F32 && !a.trans_b && (!a.trans_a || a.M <= a.N) && odl_env_bool(ODL_ENV_GEMM_TF32_SWAP);
}

struct DevState {
    int checked; /* 0 unknown, 1 yes, -1 no */
};
DevState g_dev[64];
std::mutex g_dev_mu;

} // namespace

bool available() {
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) {
        cudaGetLastError();
        return false;
    }
    std::lock_guard<std::mutex> lock(g_dev_mu);
    DevState &d = g_dev[dev];
    if (d.checked == 0) {
        int major = 0, minor = 0;
        PFN_cuTensorMapEncodeTiled_v12000 enc;
        bool ok = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
                  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) == cudaSuccess &&
                  major == 9 && minor == 0;
        if (ok && encoder(&enc) != ODL_OK) {
            odl_error_clear();
            ok = false;
        }
        cudaGetLastError();
        d.checked = ok && odl_env_bool(ODL_ENV_GEMM_SM90) ? 1 : -1;
    }
    return d.checked > 0;
}

/* ---- planning ---- */

int num_tiles() { return kTileCount; }
const char *tile_name(int t) { return t >= 0 && t < kTileCount ? kTiles[t].name : "auto"; }

void plan_builtin(int64_t M, int64_t N, int64_t K, int esz, int *tile, int *splits) {
    const int64_t sms = sm_count();
    const int64_t bk = kRowBytes / esz;
    /* 128 x 256 once its tiles fill every multiprocessor and K is long enough to amortise a tile's pipeline
     * fill and epilogue; else 128 x 128 once its tiles fill most multiprocessors, or when 64 x 128 tiles
     * would spill into a second wave (MNIST fc1's 9216 rows: 144 tiles on 132 multiprocessors, twice the time
     * of 72 tiles of 128 x 128, whose two consumer warpgroups each do a 64 x 128 tile's work); else 64 x 128,
     * with split-K when even those leave multiprocessors idle (H200: bench/results/2026-12-04/gemm) */
    const int64_t kb = cdiv(K > 0 ? K : 1, bk);
    int t = 2;
    if (cdiv(M, 128) * cdiv(N, 256) >= sms && kb >= 8) t = 0;
    else if (cdiv(M, 128) * cdiv(N, 128) >= sms * 3 / 4 || cdiv(M, 64) * cdiv(N, 128) > sms) t = 1;
    const int64_t tiles = cdiv(M, kTiles[t].bm) * cdiv(N, kTiles[t].bn);
    int64_t sp = 1;
    if (tiles < sms && kb >= 8) {
        sp = sms / tiles;
        if (sp > kb / 4) sp = kb / 4;
        if (sp > 32) sp = 32;
        while (sp > 1 && (sp * M * N > INT_MAX || sp * M * N * 4 > ((int64_t)256 << 20))) sp--;
        if (sp < 1) sp = 1;
    }
    *tile = t;
    *splits = (int)sp;
}

int tile_index(const char *name) {
    for (int i = 0; i < kTileCount; i++)
        if (!strcmp(name, kTiles[i].short_name)) return i;
    char *end;
    const long i = strtol(name, &end, 10);
    return *name && !*end && i >= 0 && i < kTileCount ? (int)i : -1;
}

const char *tile_short_name(int t) { return t >= 0 && t < kTileCount ? kTiles[t].short_name : "?"; }

const char *dtype_key(int ab_type) {
    return ab_type == GEMM_T_BF16 ? "bf16" : ab_type == GEMM_T_F16 ? "fp16" : "tf32";
}

/* The current device's name (cudaDeviceProp.name), cached per device. */
const char *device_name() {
    static char names[64][96];
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) {
        cudaGetLastError();
        return "";
    }
    std::lock_guard<std::mutex> lock(g_dev_mu);
    if (!names[dev][0]) {
        cudaDeviceProp p;
        if (cudaGetDeviceProperties(&p, dev) == cudaSuccess) snprintf(names[dev], sizeof names[dev], "%.95s", p.name);
        cudaGetLastError();
    }
    return names[dev];
}

int forced_ctas() {
    char t[16];
    int s = 0, c = 0;
    return odl_gemm_config_forced(t, sizeof t, &s, &c) ? c : 0;
}

void plan(const Args &a, int *tile, int *splits) {
    const int esz = gemm_type_size(a.ab_type);
    if (swap_of(a)) plan_builtin(a.N, a.M, a.K, esz, tile, splits); /* the kernel's M x N is N x M */
    else plan_builtin(a.M, a.N, a.K, esz, tile, splits);
    char forced[16];
    int fs = 0, fc = 0;
    odl_gemm_table_row row;
    if (odl_gemm_config_forced(forced, sizeof forced, &fs, &fc)) {
        const int t = tile_index(forced);
        if (t >= 0) {
            *tile = t;
            if (fs > 0) *splits = fs;
        }
    } else if (odl_gemm_table_find(device_name(), dtype_key(a.ab_type), a.trans_a, a.trans_b, a.M, a.N, a.K, &row)) {
        const int t = tile_index(row.tile);
        if (t >= 0) {
            *tile = t;
            *splits = row.splits;
        }
    }
}

namespace {

/* The checks of gemm(), then the tile and split-K it runs with. */
odl_status resolve(const Args &a, int *tile, int *splits) {
    if (a.M > INT_MAX || a.N > INT_MAX || a.K > INT_MAX || a.K < 0)
        return ODL_ERR(ODL_E_UNSUPPORTED, "gemm_sm90: M=%lld N=%lld K=%lld exceed int", (long long)a.M,
                       (long long)a.N, (long long)a.K);
    if (a.K == 0) return ODL_ERR(ODL_E_UNSUPPORTED, "gemm_sm90: K = 0 (a tensor map needs a non-empty K)");
    if (a.ab_type != GEMM_T_F32 && a.ab_type != GEMM_T_BF16 && a.ab_type != GEMM_T_F16)
        return ODL_ERR(ODL_E_INVAL, "gemm_typed: operand dtype %d is not float32, bfloat16 or float16", (int)a.ab_type);
    if (a.c_type != GEMM_T_F32 && a.c_type != GEMM_T_BF16 && a.c_type != GEMM_T_F16)
        return ODL_ERR(ODL_E_INVAL, "gemm_typed: C dtype %d is not float32, bfloat16 or float16", (int)a.c_type);
    if (!available()) return ODL_ERR(ODL_E_UNSUPPORTED, "gemm_sm90: not a compute capability 9.0 device");
    const int esz = gemm_type_size(a.ab_type);
    auto ok_ld = [&](const void *p, int64_t ld) { return aligned16(p) && (ld * esz) % 16 == 0; };
    if (!ok_ld(a.A, a.lda) || !ok_ld(a.B, a.ldb))
        return ODL_ERR(ODL_E_UNSUPPORTED, "gemm_sm90: operands need 16-byte aligned bases and leading dimensions");
    if (a.c_type != GEMM_T_F32 && a.ep.residual)
        return ODL_ERR(ODL_E_UNSUPPORTED, "gemm_sm90: a residual needs a float32 C");
    if (*tile < 0 || *tile >= kTileCount || *splits <= 0) {
        int t, sp;
        plan(a, &t, &sp);
        if (*tile < 0 || *tile >= kTileCount) *tile = t;
        if (*splits <= 0) *splits = sp;
    }
    if ((int64_t)*splits * a.M * a.N > INT_MAX) *splits = 1;
    return ODL_OK;
}

/* Workspace layout of gemm(): tf32 transposes of MN-major operands (rows of K rounded to 16 bytes; none of
 * B in a swapped product), then the split-K partial sums; each region 256-byte aligned. */
struct WsLayout {
    int64_t ld_t;
    size_t at, bt, part;
    size_t total() const { return at + bt + part; }
};
WsLayout layout_of(const Args &a, int splits) {
    WsLayout w;
    const bool tf32 = a.ab_type == GEMM_T_F32;
    w.ld_t = (a.K + 3) / 4 * 4;
    w.at = tf32 && a.trans_a ? (size_t)cdiv(a.M * w.ld_t * 4, 256) * 256 : 0;
    w.bt = tf32 && !a.trans_b && !swap_of(a) ? (size_t)cdiv(a.N * w.ld_t * 4, 256) * 256 : 0;
    w.part = splits > 1 ? (size_t)cdiv((int64_t)splits * a.M * a.N * 4, 256) * 256 : 0;
    return w;
}

} // namespace

size_t workspace_need(const Args &a, int tile, int splits) {
    if (resolve(a, &tile, &splits) != ODL_OK) {
        odl_error_clear();
        return 0;
    }
    return layout_of(a, splits).total();
}

odl_status gemm(const Args &a, int tile, int splits, size_t reserve) {
    if (a.M <= 0 || a.N <= 0) return ODL_OK;
    ODL_CHECK(resolve(a, &tile, &splits));
    const int esz = gemm_type_size(a.ab_type);
    /* op(A) M x K is K-major unless trans_a; op(B) K x N is K-major (stored N x K) when trans_b */
    bool a_mn = a.trans_a != 0, b_mn = a.trans_b == 0;
    const int M = (int)a.M, N = (int)a.N, K = (int)a.K;
    const WsLayout wl = layout_of(a, splits);
    const size_t bytes_at = wl.at, bytes_bt = wl.bt;
    const int64_t lda_t = wl.ld_t, ldb_t = wl.ld_t;
    unsigned char *ws = nullptr;
    if (wl.total()) {
        void *w = nullptr;
        ODL_CHECK(workspace(reserve + wl.total(), &w));
        ws = static_cast<unsigned char *>(w) + reserve;
    }
    const void *A = a.A, *B = a.B;
    int64_t lda = a.lda, ldb = a.ldb;
    if (bytes_at) { /* A stored K x M -> M x K */
        float *t = reinterpret_cast<float *>(ws);
        transpose_kernel<<<dim3((unsigned)cdiv(M, 32), (unsigned)cdiv(K, 32)), dim3(32, 8), 0, stream()>>>(
            static_cast<const float *>(a.A), a.lda, K, M, t, lda_t);
        ODL_CUDA_LAUNCH_CHECK("odl_gemm_sm90_transpose");
        A = t;
        lda = lda_t;
        a_mn = false;
    }
    if (bytes_bt) { /* B stored K x N -> N x K */
        float *t = reinterpret_cast<float *>(ws + bytes_at);
        transpose_kernel<<<dim3((unsigned)cdiv(N, 32), (unsigned)cdiv(K, 32)), dim3(32, 8), 0, stream()>>>(
            static_cast<const float *>(a.B), a.ldb, K, N, t, ldb_t);
        ODL_CUDA_LAUNCH_CHECK("odl_gemm_sm90_transpose");
        B = t;
        ldb = ldb_t;
        b_mn = false;
    }
    /* swapped: the kernel's A is B as it is (M-major, into registers), its B is op(A) K-major */
    const bool sw = swap_of(a);
    if (sw) {
        const void *t = A;
        const int64_t lt = lda;
        A = B;
        lda = ldb;
        B = t;
        ldb = lt;
        a_mn = true;
        b_mn = false;
    }

    const Epi ep = epi_of(&a);
    TypedOut out;
    out.C = a.C;
    out.ldc = a.ldc;
    out.zstride = 0;
    out.ctype = a.c_type;
    out.vec = a.ldc % 4 == 0 && N % 4 == 0 && (uintptr_t)a.C % (4 * gemm_type_size(a.c_type)) == 0 &&
              (uintptr_t)a.ep.residual % 16 == 0;
    Params p;
    memset(&p, 0, sizeof p);
    p.M = sw ? N : M; /* the kernel's product; C stays the caller's M x N */
    p.N = sw ? M : N;
    p.K = K;
    p.splits = splits;
    const int fc = forced_ctas();
    const int ctas = fc > 0 ? fc : sm_count();
    auto run = [&](const TypedOut &o, const Epi &e) -> odl_status {
        Launch l;
        l.a_mn = a_mn;
        l.b_mn = b_mn;
        l.tile = tile;
        l.A = A;
        l.lda = lda;
        l.B = B;
        l.ldb = ldb;
        l.abtype = a.ab_type;
        l.p = p;
        l.out = o;
        l.ep = e;
        l.ctas = ctas;
        if (a.ab_type == GEMM_T_BF16) return run_bf16(l);
        if (a.ab_type == GEMM_T_F16) return run_f16(l);
        return run_tf32(l);
    };
    if (splits == 1) return run(out, ep);
    TypedOut part;
    part.C = ws + wl.at + wl.bt;
    part.ldc = N;
    part.zstride = (int64_t)M * N;
    part.ctype = GEMM_T_F32;
    part.vec = N % 4 == 0;
    ODL_CHECK(run(part, epi_raw()));
    /* the reduction's output and C: splits of the tile order kept (kblocks per split may cut the count) */
    const int bk = kRowBytes / esz;
    const int kblocks = (int)cdiv(K > 0 ? K : 1, bk);
    const int chunk = (int)cdiv(kblocks, splits);
    const int used = (int)cdiv(kblocks, chunk);
    return splitk_reduce_typed(static_cast<const float *>(part.C), used, M, N, a.C, a.ldc, a.c_type, ep);
}

} // namespace sm90
} // namespace odlk
