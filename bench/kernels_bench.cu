/* odl_bench_kernels: times the CUDA backend's own kernels beside cuBLAS / cuDNN on the same GPU and
 * checks every timed result against them.
 *
 *   odl_bench_kernels [--quick] [--only gemm|conv|ew|check|tc|tcq|fc1|convtc|convf16] [--reps N] [--csv FILE] [--fixed-peaks]
 *
 * What it does, in order (bench/README.md has the details):
 *   1. ceilings: a 1 GiB cudaMemcpy device-to-device (bytes read + written) and cuBLAS SGEMM 8192^3
 *      (FP32, no TF32) measured in this process; --fixed-peaks uses 4.07e12 B/s and 50.8e12 FLOP/s
 *      (../shared/data/baselines.json) instead.
 *   2. correctness sweep: odd GEMM shapes x trans x every tile configuration x split-K x epilogue
 *      (beta, bias per row/column, ReLU/SiLU/sigmoid, residual), and odd convolutions (strides, pads,
 *      5x5, 1x1, epilogue, bias gradient), against cuBLAS / cuDNN plus a plain reference epilogue.
 *   3. timing (CUDA events around each launch, warm-up, median of N, inputs rotated over enough
 *      copies to exceed twice the L2): square GEMMs 1024..8192 with the heuristic's choice and every
 *      configuration vs cuBLAS SGEMM; the MNIST CNN's GEMMs and convolutions (N = 64, 512) and
 *      YOLOv5n's convolutions at 640x640 batch 1 (fwd, bwd_data, bwd_weight) vs cuDNN with the fastest
 *      FMA (non-tensor-op) algorithm of cudnnFind*; relu / add / silu on 2^28 floats vs copy;
 *      --only tc: the TF32 / BF16 / FP16 tensor-core GEMM vs cuBLAS in the same precision (gemm_tc_rows.cuh);
 *      --only tcq / fc1: one bf16 4096^3 row / the MNIST fc1 rows of it alone (for a profiler).
 *      --only convf16: YOLOv5n's float16 NHWC convolutions at batch 32, mma.sync and wgmma, vs cuDNN float16
 *                      NHWC (conv_f16_rows.cuh).
 *      --only convtc: the TF32 / BF16 tensor-core convolutions (the MNIST CNN's, YOLOv5n's) vs cuDNN in the
 *      same precision and odl's FP32 FMA kernels (conv_tc_rows.cuh). Not in the default sweep: its 124
 *      cudnnFind* calls (each timing every algorithm) are expected to add well over 20 s to it.
 *      --tune: time every wgmma GEMM configuration per shape and write the table GEMMs read
 *      (kernels/gemm_table.h; --tune-out FILE, else $ODL_GEMM_TABLE, else ~/.cache/odl/gemm_sm90.tsv).
 * Every timed result is compared with the baseline's (rel L2 < 1e-4: OK, else BAD), outputs poisoned
 * with NaN first. The table: name, shape, own time (us), TFLOP/s, GB/s, SOL = T_SOL / T with
 * T_SOL = max(FLOPs / peak FLOP/s, bytes / peak B/s), baseline time, baseline / own, check.
 * Exit status: 0 when every check passed, 1 when one failed, 2 on a setup error.
 */
#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#ifdef ODL_BENCH_HAVE_CUDNN
#include <cudnn.h>
#endif

#include "kernels/cuda/common.cuh"
#include "odl/backend.h"
#include "odl/device.h"
#include "odl/rng.h"

/* ------------------------------------------------------------------------------------------------ */
/* setup errors end the program (this is a benchmark, not library code) */
#define CK(call)                                                                                    \
    do {                                                                                            \
        cudaError_t e_ = (call);                                                                    \
        if (e_ != cudaSuccess) {                                                                    \
            fprintf(stderr, "odl_bench_kernels: %s:%d: %s: %s\n", __FILE__, __LINE__, #call,        \
                    cudaGetErrorString(e_));                                                        \
            exit(2);                                                                                \
        }                                                                                           \
    } while (0)
#define CKB(call)                                                                                   \
    do {                                                                                            \
        cublasStatus_t s_ = (call);                                                                 \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                          \
            fprintf(stderr, "odl_bench_kernels: %s:%d: %s: cuBLAS status %d\n", __FILE__, __LINE__, \
                    #call, (int)s_);                                                                \
            exit(2);                                                                                \
        }                                                                                           \
    } while (0)
#define CKO(call)                                                                                   \
    do {                                                                                            \
        odl_status s_ = (call);                                                                     \
        if (s_ != ODL_OK) {                                                                         \
            fprintf(stderr, "odl_bench_kernels: %s:%d: %s: %s\n", __FILE__, __LINE__, #call,        \
                    odl_error_msg());                                                               \
            exit(2);                                                                                \
        }                                                                                           \
    } while (0)
#ifdef ODL_BENCH_HAVE_CUDNN
#define CKD(call)                                                                                   \
    do {                                                                                            \
        cudnnStatus_t s_ = (call);                                                                  \
        if (s_ != CUDNN_STATUS_SUCCESS) {                                                           \
            fprintf(stderr, "odl_bench_kernels: %s:%d: %s: %s\n", __FILE__, __LINE__, #call,        \
                    cudnnGetErrorString(s_));                                                       \
            exit(2);                                                                                \
        }                                                                                           \
    } while (0)
#endif

static const double kRelTol = 1e-4;

struct Opts {
    bool quick = false, fixed_peaks = false;
    std::string only;
    int reps = 0; /* 0: chosen per size */
    std::string csv;
    bool tune = false;
    std::string tune_out;
};

static Opts g_opt;
static cudaStream_t g_stream;
static cublasHandle_t g_cublas;
#ifdef ODL_BENCH_HAVE_CUDNN
static cudnnHandle_t g_cudnn;
#endif
static double g_peak_flops = 50.8e12, g_peak_bw = 4.07e12;
static size_t g_l2 = 60u << 20;
static int g_bad = 0, g_checks = 0;
static FILE *g_csv = nullptr;

/* ------------------------------------------------------------------------------------------------ */
/* device buffers and helpers */

struct Buf {
    float *p = nullptr;
    size_t n = 0;
    Buf() {}
    explicit Buf(size_t count) { alloc(count); }
    void alloc(size_t count) {
        n = count;
        CK(cudaMalloc(&p, (count ? count : 1) * sizeof(float)));
    }
    ~Buf() {
        if (p) cudaFree(p);
    }
    Buf(const Buf &) = delete;
    Buf &operator=(const Buf &) = delete;
};

__global__ void fill_uniform_kernel(float *p, size_t n, uint64_t seed, float lo, float hi) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = lo + (hi - lo) * odl_philox_uniform(seed, 7, i);
}

static void fill_uniform(float *p, size_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
    fill_uniform_kernel<<<1024, 256, 0, g_stream>>>(p, n, seed, lo, hi);
    CK(cudaGetLastError());
}

static void poison(float *p, size_t n) { CK(cudaMemsetAsync(p, 0xff, n * sizeof(float), g_stream)); } /* NaN */

__global__ void rel_l2_kernel(const float *a, const float *b, size_t n, double *acc) {
    double d = 0.0, r = 0.0;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const double x = a[i], y = b[i];
        d += (x - y) * (x - y);
        r += y * y;
        if (x != x) d = NAN; /* an unwritten (poisoned) or NaN element fails the check */
    }
    atomicAdd(&acc[0], d);
    atomicAdd(&acc[1], r);
}

/* ||a - b|| / ||b|| over n elements (NaN if a holds a NaN). */
static double rel_l2(const float *a, const float *b, size_t n) {
    double *acc;
    CK(cudaMalloc(&acc, 2 * sizeof(double)));
    CK(cudaMemsetAsync(acc, 0, 2 * sizeof(double), g_stream));
    rel_l2_kernel<<<512, 256, 0, g_stream>>>(a, b, n, acc);
    CK(cudaGetLastError());
    double h[2];
    CK(cudaMemcpyAsync(h, acc, sizeof h, cudaMemcpyDeviceToHost, g_stream));
    CK(cudaStreamSynchronize(g_stream));
    cudaFree(acc);
    if (h[1] == 0.0) return h[0] == 0.0 ? 0.0 : INFINITY;
    return std::sqrt(h[0] / h[1]);
}

static const char *verdict(double rel) {
    g_checks++;
    if (!(rel < kRelTol)) {
        g_bad++;
        return "BAD";
    }
    return "OK";
}

/* Median time in microseconds of fn(rep) over reps launches, each between two events. */
template <class F>
static double time_us(F fn, int reps, int warm = 3) {
    for (int i = 0; i < warm; i++) fn(i);
    CK(cudaStreamSynchronize(g_stream));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<float> ms;
    for (int r = 0; r < reps; r++) {
        CK(cudaEventRecord(e0, g_stream));
        fn(r);
        CK(cudaEventRecord(e1, g_stream));
        CK(cudaEventSynchronize(e1));
        float t = 0.0f;
        CK(cudaEventElapsedTime(&t, e0, e1));
        ms.push_back(t);
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    std::sort(ms.begin(), ms.end());
    const size_t m = ms.size();
    return 1e3 * (m % 2 ? ms[m / 2] : 0.5 * (ms[m / 2 - 1] + ms[m / 2]));
}

/* One thread spinning for `ns` nanoseconds of the GPU's clock: queued before a timed region, it keeps the GPU
 * busy while the host submits what follows, so that the events time GPU work only, not the host's launch
 * overhead (which differs between cuBLAS and our entry points). */
__global__ void spin_kernel(long long ns) {
    long long t0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    for (;;) {
        long long t;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
        if (t - t0 >= ns) break;
    }
}

/* Two ways of doing the same work timed in alternation (A, B, A, B, ...), medians of each, GPU time only (a
 * spin kernel ahead of each pair hides both host sides): clock and power drift over the run falls on both
 * alike, so their ratio is fairer than that of two time_us runs in turn. */
template <class FA, class FB>
static void time_pair_us(FA fa, FB fb, int reps, double *us_a, double *us_b, int warm = 3) {
    for (int i = 0; i < warm; i++) fa(i), fb(i);
    CK(cudaStreamSynchronize(g_stream));
    cudaEvent_t e[3];
    for (cudaEvent_t &x : e) CK(cudaEventCreate(&x));
    std::vector<float> ta, tb;
    for (int r = 0; r < reps; r++) {
        spin_kernel<<<1, 1, 0, g_stream>>>(200000);
        CK(cudaEventRecord(e[0], g_stream));
        fa(r);
        CK(cudaEventRecord(e[1], g_stream));
        fb(r);
        CK(cudaEventRecord(e[2], g_stream));
        CK(cudaEventSynchronize(e[2]));
        float a = 0.0f, b = 0.0f;
        CK(cudaEventElapsedTime(&a, e[0], e[1]));
        CK(cudaEventElapsedTime(&b, e[1], e[2]));
        ta.push_back(a);
        tb.push_back(b);
    }
    for (cudaEvent_t &x : e) cudaEventDestroy(x);
    auto median = [](std::vector<float> &v) {
        std::sort(v.begin(), v.end());
        const size_t m = v.size();
        return 1e3 * (m % 2 ? v[m / 2] : 0.5 * (v[m / 2 - 1] + v[m / 2]));
    };
    *us_a = median(ta);
    *us_b = median(tb);
}

/* One way of doing the work, GPU time only (time_pair_us beside an empty second). */
template <class F> static double time_gpu_us(F fn, int reps) {
    double us = 0.0, none = 0.0;
    time_pair_us(fn, [](int) {}, reps, &us, &none);
    return us;
}

/* Repetitions for a kernel expected to take about `est_us`: roughly half a second of timing. */
static int reps_for(double est_us) {
    if (g_opt.reps > 0) return g_opt.reps;
    int r = (int)(5e5 / std::max(est_us, 1.0));
    r = std::max(5, std::min(r, g_opt.quick ? 10 : 50));
    return r;
}

/* How many copies of a working set of `bytes` make more than twice the L2 (at most 16). */
static int rotation_for(size_t bytes) {
    size_t sets = (2 * g_l2) / std::max<size_t>(bytes, 1) + 1;
    return (int)std::min<size_t>(sets, 16);
}

/* ------------------------------------------------------------------------------------------------ */
/* the result table */

struct Row {
    std::string name, shape;
    double us, flops, bytes, base_us;
    std::string check;
};
static std::vector<Row> g_rows;

static void print_header() {
    printf("\n%-34s %-30s %10s %8s %8s %6s %10s %7s %s\n", "name", "shape", "time_us", "TFLOP/s", "GB/s", "SOL",
           "base_us", "base/own", "check");
}

static void add_row(const std::string &name, const std::string &shape, double us, double flops, double bytes,
                    double base_us, const std::string &check) {
    Row r{name, shape, us, flops, bytes, base_us, check};
    g_rows.push_back(r);
    const double t_sol = std::max(flops / g_peak_flops, bytes / g_peak_bw) * 1e6;
    char base[32] = "-", ratio[32] = "-";
    if (base_us > 0) {
        snprintf(base, sizeof base, "%.1f", base_us);
        snprintf(ratio, sizeof ratio, "%.3f", base_us / us);
    }
    printf("%-34s %-30s %10.1f %8.2f %8.0f %6.3f %10s %7s %s\n", name.c_str(), shape.c_str(), us,
           flops / us * 1e-6, bytes / us * 1e-3, t_sol / us, base, ratio, check.c_str());
    fflush(stdout);
    if (g_csv)
        fprintf(g_csv, "%s,%s,%.3f,%.4f,%.1f,%.4f,%.3f,%s\n", name.c_str(), shape.c_str(), us, flops / us * 1e-6,
                bytes / us * 1e-3, t_sol / us, base_us, check.c_str());
}

static std::string fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static std::string fmt(const char *f, ...) {
    char buf[256];
    va_list ap;
    va_start(ap, f);
    vsnprintf(buf, sizeof buf, f, ap);
    va_end(ap);
    return buf;
}

/* ------------------------------------------------------------------------------------------------ */
/* GEMM */

/* cuBLAS in row-major form: C = alpha op(A) op(B) + beta C (column-major C^T = op(B)^T op(A)^T). */
static void cublas_gemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                        int ldb, float beta, float *C, int ldc) {
    CKB(cublasSgemm(g_cublas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha, B, ldb,
                    A, lda, &beta, C, ldc));
}

__device__ float ref_act(int act, float v) {
    switch (act) {
    case ODL_ACT_RELU: return v < 0.0f ? 0.0f : v;
    case ODL_ACT_SILU: return v / (1.0f + expf(-v));
    case ODL_ACT_SIGMOID: return 1.0f / (1.0f + expf(-v));
    default: return v;
    }
}

/* out[m, n] = act(t[m, n] + beta * c0[m, n] + bias) + res[m, n] over a row-major M x N with ld. */
__global__ void ref_epilogue_kernel(int M, int N, int ld, const float *t, float beta, const float *c0,
                                    const float *bias, int bias_per_row, int act, const float *res, float *out) {
    const int64_t total = (int64_t)M * N;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        const int m = (int)(i / N), n = (int)(i % N);
        const int64_t o = (int64_t)m * ld + n;
        float v = t[o];
        if (beta != 0.0f) v += beta * c0[o];
        if (bias) v += bias[bias_per_row ? m : n];
        v = ref_act(act, v);
        if (res) v += res[o];
        out[o] = v;
    }
}

/* Copy an M x N block with leading dimension ld into a dense M x N buffer (for comparisons). */
__global__ void pack_kernel(int M, int N, int ld, const float *src, float *dst) {
    const int64_t total = (int64_t)M * N;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x)
        dst[i] = src[(i / N) * ld + i % N];
}

struct GemmCase {
    int ta, tb, M, N, K, pad; /* pad: extra columns in every leading dimension */
    float alpha, beta;
    int bias; /* 0 none, 1 per column, 2 per row */
    int act, residual;
};

/* One GEMM with forced configuration and split count, checked against cuBLAS + the reference epilogue. */
static double check_gemm(const GemmCase &c, int cfg, int splits) {
    const int M = c.M, N = c.N, K = c.K;
    const int lda = (c.ta ? M : K) + c.pad, ldb = (c.tb ? K : N) + c.pad, ldc = N + c.pad;
    const size_t a_rows = c.ta ? K : M, b_rows = c.tb ? N : K;
    Buf A(a_rows * lda + 1), B(b_rows * ldb + 1), C0((size_t)M * ldc), C((size_t)M * ldc), T((size_t)M * ldc),
        R((size_t)M * ldc), bias(std::max(M, N)), res((size_t)M * ldc), packed((size_t)M * N), packed_ref((size_t)M * N);
    fill_uniform(A.p, A.n, 11 + M);
    fill_uniform(B.p, B.n, 12 + N);
    fill_uniform(C0.p, C0.n, 13 + K);
    fill_uniform(bias.p, bias.n, 14);
    fill_uniform(res.p, res.n, 15);
    /* reference */
    CK(cudaMemsetAsync(T.p, 0, T.n * sizeof(float), g_stream));
    cublas_gemm(c.ta, c.tb, M, N, K, c.alpha, A.p, lda, B.p, ldb, 0.0f, T.p, ldc);
    ref_epilogue_kernel<<<256, 256, 0, g_stream>>>(M, N, ldc, T.p, c.beta, C0.p, c.bias ? bias.p : nullptr,
                                                   c.bias == 2, c.act, c.residual ? res.p : nullptr, R.p);
    CK(cudaGetLastError());
    /* own: C starts as C0 when beta != 0, NaN otherwise (beta == 0 must not read it) */
    if (c.beta != 0.0f) CK(cudaMemcpyAsync(C.p, C0.p, C.n * sizeof(float), cudaMemcpyDeviceToDevice, g_stream));
    else poison(C.p, C.n);
    odl_gemm_args g;
    memset(&g, 0, sizeof g);
    g.trans_a = c.ta;
    g.trans_b = c.tb;
    g.M = M;
    g.N = N;
    g.K = K;
    g.alpha = c.alpha;
    g.A = A.p;
    g.lda = lda;
    g.B = B.p;
    g.ldb = ldb;
    g.beta = c.beta;
    g.C = C.p;
    g.ldc = ldc;
    g.ep.bias = c.bias ? bias.p : nullptr;
    g.ep.bias_per_row = c.bias == 2;
    g.ep.residual = c.residual ? res.p : nullptr;
    g.ep.act = (odl_act)c.act;
    CKO(odl_cuda_gemm_ex(&g, cfg, splits));
    pack_kernel<<<256, 256, 0, g_stream>>>(M, N, ldc, C.p, packed.p);
    pack_kernel<<<256, 256, 0, g_stream>>>(M, N, ldc, R.p, packed_ref.p);
    CK(cudaGetLastError());
    return rel_l2(packed.p, packed_ref.p, (size_t)M * N);
}

static void gemm_sweep() {
    printf("\n== GEMM correctness sweep (own vs cuBLAS + reference epilogue, rel L2 < %g) ==\n", kRelTol);
    const int shapes[][3] = {{1, 1, 1},     {7, 13, 5},     {33, 65, 17},   {64, 128, 9216}, {127, 129, 63},
                             {128, 128, 8}, {255, 257, 300}, {64, 9216, 128}, {128, 9216, 64}, {300, 10, 128},
                             {16, 1000, 77}, {1030, 1030, 1030}};
    const int nshapes = (int)(sizeof shapes / sizeof shapes[0]);
    int n = 0, bad = 0;
    double worst = 0.0;
    for (int si = 0; si < nshapes; si++) {
        for (int t = 0; t < 4; t++) {
            for (int cfg = -1; cfg < odl_cuda_gemm_num_configs(); cfg++) {
                const int split_opts[] = {0, 1, 3};
                for (int sp : split_opts) {
                    if (g_opt.quick && (cfg > 0 || sp == 3)) continue;
                    GemmCase c;
                    c.ta = t & 1;
                    c.tb = t >> 1;
                    c.M = shapes[si][0];
                    c.N = shapes[si][1];
                    c.K = shapes[si][2];
                    /* vary the rest with the case number so that every feature meets every path */
                    const int k = n++;
                    c.pad = (k % 3 == 1) ? 1 : (k % 3 == 2 ? 4 : 0);
                    c.alpha = (k % 5 == 0) ? 0.5f : 1.0f;
                    c.beta = (k % 4 == 1) ? 0.75f : 0.0f;
                    c.bias = k % 3;
                    c.act = k % 4;
                    c.residual = (k % 7) < 3;
                    const double rel = check_gemm(c, cfg, sp);
                    worst = std::max(worst, rel != rel ? INFINITY : rel);
                    g_checks++;
                    if (!(rel < kRelTol)) {
                        bad++;
                        g_bad++;
                        printf("BAD gemm %dx%dx%d ta=%d tb=%d cfg=%s splits=%d pad=%d alpha=%g beta=%g bias=%d act=%d "
                               "res=%d: rel %.3g\n",
                               c.M, c.N, c.K, c.ta, c.tb, odl_cuda_gemm_config_name(cfg), sp, c.pad, c.alpha, c.beta,
                               c.bias, c.act, c.residual, rel);
                    }
                }
            }
        }
    }
    printf("gemm sweep: %d cases, %d bad, worst rel L2 %.3g\n", n, bad, worst);
}

static void gemm_time_square(int S) {
    const size_t per = 3 * (size_t)S * S;
    const int sets = rotation_for(per * sizeof(float));
    Buf A((size_t)S * S * sets), B((size_t)S * S * sets), C((size_t)S * S * sets), Cref((size_t)S * S);
    fill_uniform(A.p, A.n, 21);
    fill_uniform(B.p, B.n, 22);
    const double flops = 2.0 * S * S * (double)S, bytes = 3.0 * S * S * 4.0;
    const double est = flops / 40e12 * 1e6;
    const int reps = reps_for(est);
    auto ptr = [&](const Buf &b, int r) { return b.p + (size_t)(r % sets) * S * S; };
    const double base = time_us([&](int r) { cublas_gemm(0, 0, S, S, S, 1.0f, ptr(A, r), S, ptr(B, r), S, 0.0f, ptr(C, r), S); }, reps);
    cublas_gemm(0, 0, S, S, S, 1.0f, A.p, S, B.p, S, 0.0f, Cref.p, S);
    const std::string shape = fmt("%dx%dx%d NN", S, S, S);
    for (int cfg = -1; cfg < odl_cuda_gemm_num_configs(); cfg++) {
        if (g_opt.quick && cfg >= 0) continue;
        odl_gemm_args g;
        memset(&g, 0, sizeof g);
        g.M = g.N = g.K = S;
        g.alpha = 1.0f;
        g.lda = g.ldb = g.ldc = S;
        auto run = [&](int r) {
            g.A = ptr(A, r);
            g.B = ptr(B, r);
            g.C = ptr(C, r);
            CKO(odl_cuda_gemm_ex(&g, cfg, 0));
        };
        poison(C.p, (size_t)S * S);
        run(0);
        const double rel = rel_l2(C.p, Cref.p, (size_t)S * S);
        const double us = time_us(run, reps);
        int pc = 0, ps = 0;
        odl_cuda_gemm_plan(S, S, S, &pc, &ps);
        const std::string name = cfg < 0 ? fmt("gemm auto (%s s%d)", odl_cuda_gemm_config_name(pc), ps)
                                         : fmt("gemm %s", odl_cuda_gemm_config_name(cfg));
        add_row(name, shape, us, flops, bytes, base, verdict(rel));
    }
}

/* A GEMM of the MNIST network's linear layers (heuristic configuration) vs cuBLAS. */
static void gemm_time_case(const char *name, int ta, int tb, int M, int N, int K) {
    const int lda = ta ? M : K, ldb = tb ? K : N;
    const size_t per = (size_t)M * K + (size_t)K * N + (size_t)M * N;
    const int sets = rotation_for(per * 4);
    Buf A((size_t)M * K * sets), B((size_t)K * N * sets), C((size_t)M * N * sets), Cref((size_t)M * N);
    fill_uniform(A.p, A.n, 31);
    fill_uniform(B.p, B.n, 32);
    const double flops = 2.0 * M * N * (double)K, bytes = per * 4.0;
    const int reps = reps_for(std::max(flops / 30e12, bytes / 3e12) * 1e6 + 5);
    auto pa = [&](int r) { return A.p + (size_t)(r % sets) * M * K; };
    auto pb = [&](int r) { return B.p + (size_t)(r % sets) * K * N; };
    auto pcc = [&](int r) { return C.p + (size_t)(r % sets) * M * N; };
    const double base = time_us([&](int r) { cublas_gemm(ta, tb, M, N, K, 1.0f, pa(r), lda, pb(r), ldb, 0.0f, pcc(r), N); }, reps);
    cublas_gemm(ta, tb, M, N, K, 1.0f, A.p, lda, B.p, ldb, 0.0f, Cref.p, N);
    odl_gemm_args g;
    memset(&g, 0, sizeof g);
    g.trans_a = ta;
    g.trans_b = tb;
    g.M = M;
    g.N = N;
    g.K = K;
    g.alpha = 1.0f;
    g.lda = lda;
    g.ldb = ldb;
    g.ldc = N;
    auto run = [&](int r) {
        g.A = pa(r);
        g.B = pb(r);
        g.C = pcc(r);
        CKO(odl_cuda_gemm(&g));
    };
    poison(C.p, (size_t)M * N);
    run(0);
    const double rel = rel_l2(C.p, Cref.p, (size_t)M * N);
    const double us = time_us(run, reps);
    int pc = 0, ps = 0;
    odl_cuda_gemm_plan(M, N, K, &pc, &ps);
    add_row(fmt("%s (%s s%d)", name, odl_cuda_gemm_config_name(pc), ps), fmt("%dx%dx%d %c%c", M, N, K, ta ? 'T' : 'N', tb ? 'T' : 'N'),
            us, flops, bytes, base, verdict(rel));
}

#include "kernels/cuda/gemm_sm90.h"
#include "kernels/gemm_table.h"
#include "gemm_tc_rows.cuh" /* --only tc: TF32 / BF16 / FP16 tensor-core GEMM vs cuBLAS; --tune */

/* ------------------------------------------------------------------------------------------------ */
/* convolutions */

static odl_conv2d_shape conv_shape(int N, int C, int H, int W, int K, int R, int S, int stride, int pad) {
    odl_conv2d_shape s;
    s.N = N;
    s.C = C;
    s.H = H;
    s.W = W;
    s.K = K;
    s.R = R;
    s.S = S;
    s.stride_h = s.stride_w = stride;
    s.pad_h = s.pad_w = pad;
    s.P = (H + 2 * pad - R) / stride + 1;
    s.Q = (W + 2 * pad - S) / stride + 1;
    return s;
}

/* YOLOv5n's convolutions at 640x640, batch 1 (square inputs and kernels), timed by the conv section and by
 * --only convtc: stem, downsampling, C3 1x1, bottleneck 3x3, deep 3x3 s2, SPPF 1x1, Detect head. act: the
 * conv section's forward epilogue (with the bias). */
struct YoloConv {
    const char *name;
    int C, HW, K, RS, stride, pad;
    odl_act act;
};
static const YoloConv kYoloConvs[] = {
    {"yolo L0 stem", 3, 640, 16, 6, 2, 2, ODL_ACT_SILU},     {"yolo L1 down", 16, 320, 32, 3, 2, 1, ODL_ACT_SILU},
    {"yolo C3 1x1", 32, 160, 32, 1, 1, 0, ODL_ACT_SILU},     {"yolo bneck 3x3", 64, 80, 64, 3, 1, 1, ODL_ACT_SILU},
    {"yolo L7 down", 128, 40, 256, 3, 2, 1, ODL_ACT_SILU},   {"yolo SPPF 1x1", 256, 20, 256, 1, 1, 0, ODL_ACT_SILU},
    {"yolo detect 1x1", 64, 80, 255, 1, 1, 0, ODL_ACT_NONE},
};

#ifdef ODL_BENCH_HAVE_CUDNN
/* cuDNN descriptors of one convolution, with the fastest FMA-math algorithm of each direction. */
struct Cudnn {
    cudnnTensorDescriptor_t x, y, b;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
    cudnnConvolutionFwdAlgo_t fwd;
    cudnnConvolutionBwdDataAlgo_t bwd_data;
    cudnnConvolutionBwdFilterAlgo_t bwd_filter;
    cudnnMathType_t m_fwd, m_bd, m_bf;
    size_t ws_bytes = 0;
    void *ws = nullptr;

    explicit Cudnn(const odl_conv2d_shape &s) {
        CKD(cudnnCreateTensorDescriptor(&x));
        CKD(cudnnCreateTensorDescriptor(&y));
        CKD(cudnnCreateTensorDescriptor(&b));
        CKD(cudnnCreateFilterDescriptor(&w));
        CKD(cudnnCreateConvolutionDescriptor(&conv));
        CKD(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s.N, s.C, s.H, s.W));
        CKD(cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s.N, s.K, s.P, s.Q));
        CKD(cudnnSetTensor4dDescriptor(b, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, s.K, 1, 1));
        CKD(cudnnSetFilter4dDescriptor(w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, s.K, s.C, s.R, s.S));
        CKD(cudnnSetConvolution2dDescriptor(conv, s.pad_h, s.pad_w, s.stride_h, s.stride_w, 1, 1,
                                            CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
        CKD(cudnnSetConvolutionMathType(conv, CUDNN_FMA_MATH));
        int got = 0;
        cudnnConvolutionFwdAlgoPerf_t pf[16];
        CKD(cudnnFindConvolutionForwardAlgorithm(g_cudnn, x, w, conv, y, 16, &got, pf));
        pick(pf, got, fwd, m_fwd, "forward");
        cudnnConvolutionBwdDataAlgoPerf_t pd[16];
        CKD(cudnnFindConvolutionBackwardDataAlgorithm(g_cudnn, w, y, conv, x, 16, &got, pd));
        pick(pd, got, bwd_data, m_bd, "backward data");
        cudnnConvolutionBwdFilterAlgoPerf_t pw[16];
        CKD(cudnnFindConvolutionBackwardFilterAlgorithm(g_cudnn, x, y, conv, w, 16, &got, pw));
        pick(pw, got, bwd_filter, m_bf, "backward filter");
        if (ws_bytes) CK(cudaMalloc(&ws, ws_bytes));
    }
    /* the fastest successful result computed with FMA math (no tensor ops, no TF32) */
    template <class Perf, class Algo>
    void pick(const Perf *p, int n, Algo &algo, cudnnMathType_t &math, const char *what) {
        for (int i = 0; i < n; i++) {
            if (p[i].status != CUDNN_STATUS_SUCCESS || p[i].mathType != CUDNN_FMA_MATH) continue;
            algo = p[i].algo;
            math = p[i].mathType;
            ws_bytes = std::max(ws_bytes, p[i].memory);
            return;
        }
        for (int i = 0; i < n; i++) {
            if (p[i].status != CUDNN_STATUS_SUCCESS) continue;
            fprintf(stderr, "note: cuDNN %s: no FMA-math algorithm, using algo %d with math type %d\n", what,
                    (int)p[i].algo, (int)p[i].mathType);
            algo = p[i].algo;
            math = p[i].mathType;
            ws_bytes = std::max(ws_bytes, p[i].memory);
            return;
        }
        fprintf(stderr, "odl_bench_kernels: cuDNN found no %s algorithm\n", what);
        exit(2);
    }
    ~Cudnn() {
        if (ws) cudaFree(ws);
        cudnnDestroyTensorDescriptor(x);
        cudnnDestroyTensorDescriptor(y);
        cudnnDestroyTensorDescriptor(b);
        cudnnDestroyFilterDescriptor(w);
        cudnnDestroyConvolutionDescriptor(conv);
    }
    void forward(const float *xp, const float *wp, float *yp) {
        const float one = 1.0f, zero = 0.0f;
        CKD(cudnnSetConvolutionMathType(conv, m_fwd));
        CKD(cudnnConvolutionForward(g_cudnn, &one, x, xp, w, wp, conv, fwd, ws, ws_bytes, &zero, y, yp));
    }
    void backward_data(const float *dyp, const float *wp, float *dxp) {
        const float one = 1.0f, zero = 0.0f;
        CKD(cudnnSetConvolutionMathType(conv, m_bd));
        CKD(cudnnConvolutionBackwardData(g_cudnn, &one, w, wp, y, dyp, conv, bwd_data, ws, ws_bytes, &zero, x, dxp));
    }
    void backward_filter(const float *xp, const float *dyp, float *dwp) {
        const float one = 1.0f, zero = 0.0f;
        CKD(cudnnSetConvolutionMathType(conv, m_bf));
        CKD(cudnnConvolutionBackwardFilter(g_cudnn, &one, x, xp, y, dyp, conv, bwd_filter, ws, ws_bytes, &zero, w, dwp));
    }
    void backward_bias(const float *dyp, float *dbp) {
        const float one = 1.0f, zero = 0.0f;
        CKD(cudnnConvolutionBackwardBias(g_cudnn, &one, y, dyp, &zero, b, dbp));
    }
};

/* NCHW reference epilogue: out = act(t + bias[k]) + res over N x K x PQ. */
__global__ void ref_conv_epilogue_kernel(int64_t total, int K, int PQ, const float *t, const float *bias, int act,
                                         const float *res, float *out) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        const int k = (int)((i / PQ) % K);
        float v = t[i];
        if (bias) v += bias[k];
        v = ref_act(act, v);
        if (res) v += res[i];
        out[i] = v;
    }
}

/* Check all three directions (and the fused epilogue and bias gradient) of one convolution. */
static int check_conv(const odl_conv2d_shape &s, const char *label, bool verbose) {
    Cudnn dn(s);
    const size_t nx = (size_t)s.N * s.C * s.H * s.W, nw = (size_t)s.K * s.C * s.R * s.S,
                 ny = (size_t)s.N * s.K * s.P * s.Q;
    Buf x(nx), w(nw), y(ny), yref(ny), t(ny), bias(s.K), res(ny), dx(nx), dxref(nx), dw(nw), dwref(nw), db(s.K),
        dbref(s.K);
    fill_uniform(x.p, nx, 41);
    fill_uniform(w.p, nw, 42);
    fill_uniform(bias.p, s.K, 43);
    fill_uniform(res.p, ny, 44);
    int bad = 0;
    double rel[5];
    /* forward, plain */
    dn.forward(x.p, w.p, yref.p);
    poison(y.p, ny);
    CKO(odl_cuda_conv2d_fwd(&s, x.p, w.p, nullptr, y.p));
    rel[0] = rel_l2(y.p, yref.p, ny);
    /* forward with bias + SiLU + residual (YOLOv5's Conv and Bottleneck shortcut) */
    ref_conv_epilogue_kernel<<<512, 256, 0, g_stream>>>((int64_t)ny, s.K, s.P * s.Q, yref.p, bias.p, ODL_ACT_SILU,
                                                        res.p, t.p);
    CK(cudaGetLastError());
    odl_epilogue ep;
    ep.bias = bias.p;
    ep.bias_per_row = 0;
    ep.residual = res.p;
    ep.act = ODL_ACT_SILU;
    poison(y.p, ny);
    CKO(odl_cuda_conv2d_fwd(&s, x.p, w.p, &ep, y.p));
    rel[1] = rel_l2(y.p, t.p, ny);
    /* backward (dy = the residual buffer as random data) */
    dn.backward_data(res.p, w.p, dxref.p);
    poison(dx.p, nx);
    CKO(odl_cuda_conv2d_bwd_data(&s, res.p, w.p, nullptr, dx.p));
    rel[2] = rel_l2(dx.p, dxref.p, nx);
    dn.backward_filter(x.p, res.p, dwref.p);
    dn.backward_bias(res.p, dbref.p);
    poison(dw.p, nw);
    poison(db.p, s.K);
    CKO(odl_cuda_conv2d_bwd_weight(&s, x.p, res.p, dw.p, db.p));
    rel[3] = rel_l2(dw.p, dwref.p, nw);
    rel[4] = rel_l2(db.p, dbref.p, s.K);
    const char *what[5] = {"fwd", "fwd+bias+silu+res", "bwd_data", "bwd_weight", "bias_grad"};
    for (int i = 0; i < 5; i++) {
        g_checks++;
        if (!(rel[i] < kRelTol)) {
            bad++;
            g_bad++;
            printf("BAD conv %s %s N=%d C=%d H=%d W=%d K=%d R=%d S=%d stride=%d pad=%d: rel %.3g\n", label, what[i], s.N,
                   s.C, s.H, s.W, s.K, s.R, s.S, s.stride_h, s.pad_h, rel[i]);
        }
    }
    if (verbose)
        printf("conv %-18s fwd %.2g  epi %.2g  bwd_data %.2g  bwd_weight %.2g  bias %.2g\n", label, rel[0], rel[1],
               rel[2], rel[3], rel[4]);
    return bad;
}

static void conv_sweep() {
    printf("\n== convolution correctness sweep (own vs cuDNN, rel L2 < %g) ==\n", kRelTol);
    struct {
        int N, C, H, W, K, R, S, stride, pad;
    } cs[] = {
        {2, 3, 11, 13, 5, 3, 3, 1, 1},  {3, 4, 9, 7, 6, 3, 3, 2, 1},    {1, 3, 17, 15, 16, 6, 6, 2, 2},
        {2, 8, 10, 10, 33, 1, 1, 1, 0}, {2, 7, 9, 9, 12, 5, 5, 1, 2},   {1, 16, 12, 12, 70, 1, 1, 2, 0},
        {4, 1, 28, 28, 32, 3, 3, 1, 0}, {2, 32, 26, 26, 64, 3, 3, 1, 0}, {1, 256, 20, 20, 128, 1, 1, 1, 0},
        {1, 64, 15, 15, 64, 3, 3, 2, 1}, {5, 6, 7, 5, 130, 2, 3, 1, 0},
    };
    int bad = 0, n = 0;
    for (auto &c : cs) {
        const odl_conv2d_shape s = conv_shape(c.N, c.C, c.H, c.W, c.K, c.R, c.S, c.stride, c.pad);
        bad += check_conv(s, fmt("%dx%dx%dx%d k%dx%d s%d p%d", c.N, c.C, c.H, c.W, c.R, c.S, c.stride, c.pad).c_str(),
                          true);
        n++;
    }
    printf("conv sweep: %d shapes x 5 checks, %d bad\n", n, bad);
}

/* Time fwd (own with the given epilogue act; cuDNN plain), bwd_data and bwd_weight of one conv. */
static void conv_time(const char *name, const odl_conv2d_shape &s, odl_act fwd_act, bool backward) {
    const size_t nx = (size_t)s.N * s.C * s.H * s.W, nw = (size_t)s.K * s.C * s.R * s.S,
                 ny = (size_t)s.N * s.K * s.P * s.Q;
    const int sets = rotation_for((nx + nw + ny) * 4);
    Cudnn dn(s);
    Buf x(nx * sets), w(nw), y(ny * sets), yref(ny), dy(ny * sets), dx(nx * sets), dxref(nx), dw(nw * sets), dwref(nw),
        bias(s.K);
    fill_uniform(x.p, x.n, 51);
    fill_uniform(w.p, w.n, 52);
    fill_uniform(dy.p, dy.n, 53);
    fill_uniform(bias.p, bias.n, 54);
    const double flops = 2.0 * s.N * s.K * s.P * (double)s.Q * s.C * s.R * s.S;
    const std::string shape = fmt("N%d %d->%d %dx%d k%d s%d", s.N, s.C, s.K, s.H, s.W, s.R, s.stride_h);
    auto X = [&](int r) { return x.p + (size_t)(r % sets) * nx; };
    auto Y = [&](int r) { return y.p + (size_t)(r % sets) * ny; };
    auto DY = [&](int r) { return dy.p + (size_t)(r % sets) * ny; };
    auto DX = [&](int r) { return dx.p + (size_t)(r % sets) * nx; };
    auto DW = [&](int r) { return dw.p + (size_t)(r % sets) * nw; };
    const int reps = reps_for(flops / 25e12 * 1e6 + 10);
    /* forward */
    {
        odl_epilogue ep;
        memset(&ep, 0, sizeof ep);
        ep.act = fwd_act;
        ep.bias = fwd_act != ODL_ACT_NONE ? bias.p : nullptr;
        const odl_epilogue *epp = fwd_act != ODL_ACT_NONE ? &ep : nullptr;
        const double base = time_us([&](int r) { dn.forward(X(r), w.p, Y(r)); }, reps);
        dn.forward(x.p, w.p, yref.p);
        /* correctness of the plain product (the epilogue is checked in the sweep) */
        poison(y.p, ny);
        CKO(odl_cuda_conv2d_fwd(&s, x.p, w.p, nullptr, y.p));
        const double rel = rel_l2(y.p, yref.p, ny);
        const double us = time_us([&](int r) { CKO(odl_cuda_conv2d_fwd(&s, X(r), w.p, epp, Y(r))); }, reps);
        add_row(fmt("%s fwd%s", name, fwd_act == ODL_ACT_SILU ? "+bias+silu" : fwd_act == ODL_ACT_RELU ? "+bias+relu" : ""),
                shape, us, flops, (nx + nw + ny) * 4.0, base, verdict(rel));
    }
    if (!backward) return;
    {
        const double base = time_us([&](int r) { dn.backward_data(DY(r), w.p, DX(r)); }, reps);
        dn.backward_data(dy.p, w.p, dxref.p);
        poison(dx.p, nx);
        CKO(odl_cuda_conv2d_bwd_data(&s, dy.p, w.p, nullptr, dx.p));
        const double rel = rel_l2(dx.p, dxref.p, nx);
        const double us = time_us([&](int r) { CKO(odl_cuda_conv2d_bwd_data(&s, DY(r), w.p, nullptr, DX(r))); }, reps);
        add_row(fmt("%s bwd_data", name), shape, us, flops, (nx + nw + ny) * 4.0, base, verdict(rel));
    }
    {
        const double base = time_us([&](int r) { dn.backward_filter(X(r), DY(r), DW(r)); }, reps);
        dn.backward_filter(x.p, dy.p, dwref.p);
        poison(dw.p, nw);
        CKO(odl_cuda_conv2d_bwd_weight(&s, x.p, dy.p, dw.p, nullptr));
        const double rel = rel_l2(dw.p, dwref.p, nw);
        const double us = time_us([&](int r) { CKO(odl_cuda_conv2d_bwd_weight(&s, X(r), DY(r), DW(r), nullptr)); }, reps);
        add_row(fmt("%s bwd_weight", name), shape, us, flops, (nx + nw + ny) * 4.0, base, verdict(rel));
    }
}
#endif /* ODL_BENCH_HAVE_CUDNN */

#include "conv_tc_rows.cuh" /* --only convtc: TF32 / BF16 tensor-core convolutions vs cuDNN (with or without it) */
#include "conv_f16_rows.cuh" /* --only convf16: YOLOv5 --half's float16 NHWC convolutions vs cuDNN */

/* ------------------------------------------------------------------------------------------------ */
/* element-wise vs copy */

__global__ void ref_ew_kernel(int op, size_t n, const float *a, const float *b, float *y) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const float v = a[i];
        y[i] = op == 0 ? (v < 0.0f ? 0.0f : v) : op == 1 ? v + b[i] : v / (1.0f + expf(-v));
    }
}

static void ew_time() {
    const size_t n = g_opt.quick ? ((size_t)1 << 26) : ((size_t)1 << 28);
    Buf a(n), b(n), y(n), r(n);
    fill_uniform(a.p, n, 61);
    fill_uniform(b.p, n, 62);
    const int reps = g_opt.quick ? 10 : 30;
    const std::string shape = fmt("n=2^%d", (int)std::lround(std::log2((double)n)));
    const double copy = time_us([&](int) { CK(cudaMemcpyAsync(y.p, a.p, n * 4, cudaMemcpyDeviceToDevice, g_stream)); }, reps);
    add_row("copy (cudaMemcpy D2D)", shape, copy, 0.0, 2.0 * n * 4, 0.0, "-");
    struct {
        const char *name;
        int op;
        double bytes;
    } ops[] = {{"relu (act_fwd)", 0, 2.0 * n * 4}, {"add", 1, 3.0 * n * 4}, {"silu (act_fwd)", 2, 2.0 * n * 4}};
    for (auto &o : ops) {
        auto run = [&](int) {
            if (o.op == 0) CKO(odl_cuda_act_fwd(ODL_ACT_RELU, (int64_t)n, a.p, y.p));
            else if (o.op == 1) CKO(odl_cuda_add((int64_t)n, a.p, b.p, y.p));
            else CKO(odl_cuda_act_fwd(ODL_ACT_SILU, (int64_t)n, a.p, y.p));
        };
        ref_ew_kernel<<<1024, 256, 0, g_stream>>>(o.op, n, a.p, b.p, r.p);
        CK(cudaGetLastError());
        poison(y.p, n);
        run(0);
        const double rel = rel_l2(y.p, r.p, n);
        const double us = time_us(run, reps);
        /* the baseline column holds the copy time scaled to this op's bytes */
        add_row(o.name, shape, us, (o.op == 2 ? 4.0 : 1.0) * n, o.bytes, copy * o.bytes / (2.0 * n * 4), verdict(rel));
    }
}

/* ------------------------------------------------------------------------------------------------ */

static void measure_ceilings() {
    const size_t n = (size_t)1 << 28; /* 1 GiB */
    Buf a(n), b(n);
    fill_uniform(a.p, n, 1);
    const double copy_us = time_us([&](int) { CK(cudaMemcpyAsync(b.p, a.p, n * 4, cudaMemcpyDeviceToDevice, g_stream)); }, 20);
    const double bw = 2.0 * n * 4 / (copy_us * 1e-6);
    const int S = g_opt.quick ? 4096 : 8192;
    Buf A((size_t)S * S), B((size_t)S * S), C((size_t)S * S);
    fill_uniform(A.p, A.n, 2);
    fill_uniform(B.p, B.n, 3);
    const double g_us = time_us([&](int) { cublas_gemm(0, 0, S, S, S, 1.0f, A.p, S, B.p, S, 0.0f, C.p, S); }, g_opt.quick ? 5 : 10);
    const double fl = 2.0 * S * S * (double)S / (g_us * 1e-6);
    printf("measured: copy %.0f GB/s (read + write, 1 GiB), cuBLAS SGEMM %d^3 %.1f TFLOP/s (FP32, no TF32)\n", bw * 1e-9,
           S, fl * 1e-12);
    if (!g_opt.fixed_peaks) {
        g_peak_bw = bw;
        g_peak_flops = fl;
    }
    printf("SOL ceilings in use: %.1f TFLOP/s, %.0f GB/s (%s)\n", g_peak_flops * 1e-12, g_peak_bw * 1e-9,
           g_opt.fixed_peaks ? "fixed: baselines.json" : "measured above");
}

static void usage() {
    printf("usage: odl_bench_kernels [--quick] [--only gemm|conv|ew|check|tc|tcq|fc1|convtc|convf16] [--reps N] [--csv FILE] "
           "[--fixed-peaks]\n"
           "       odl_bench_kernels --tune [--tune-out FILE]   (time the wgmma GEMM configurations, write the table)\n");
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) g_opt.quick = true;
        else if (!strcmp(argv[i], "--fixed-peaks")) g_opt.fixed_peaks = true;
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) g_opt.only = argv[++i];
        else if (!strcmp(argv[i], "--tune")) g_opt.tune = true;
        else if (!strcmp(argv[i], "--tune-out") && i + 1 < argc) g_opt.tune_out = argv[++i];
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) g_opt.reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--csv") && i + 1 < argc) g_opt.csv = argv[++i];
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage();
            return 0;
        } else {
            fprintf(stderr, "odl_bench_kernels: unknown argument '%s'\n", argv[i]);
            usage();
            return 2;
        }
    }
    if (odl_cuda_device_count() < 1) {
        fprintf(stderr, "odl_bench_kernels: no CUDA device\n");
        return 2;
    }
    CKO(odl_cuda_init(0, 0.2));
    g_stream = (cudaStream_t)odl_stream_current();
    CKB(cublasCreate(&g_cublas));
    CKB(cublasSetStream(g_cublas, g_stream));
    CKB(cublasSetMathMode(g_cublas, CUBLAS_DEFAULT_MATH));
#ifdef ODL_BENCH_HAVE_CUDNN
    CKD(cudnnCreate(&g_cudnn));
    CKD(cudnnSetStream(g_cudnn, g_stream));
#endif
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    g_l2 = (size_t)prop.l2CacheSize;
    int rt = 0, drv = 0;
    cudaRuntimeGetVersion(&rt);
    cudaDriverGetVersion(&drv);
    printf("device: %s, sm_%d%d, %d SMs, L2 %zu MB, %.0f GB; CUDA runtime %d, driver %d", prop.name, prop.major,
           prop.minor, prop.multiProcessorCount, g_l2 >> 20, prop.totalGlobalMem / 1e9, rt, drv);
#ifdef ODL_BENCH_HAVE_CUDNN
    printf(", cuDNN %zu\n", cudnnGetVersion());
#else
    printf(", no cuDNN (convolution baselines skipped)\n");
#endif
    if (!g_opt.csv.empty()) {
        g_csv = fopen(g_opt.csv.c_str(), "w");
        if (!g_csv) {
            fprintf(stderr, "odl_bench_kernels: cannot write %s\n", g_opt.csv.c_str());
            return 2;
        }
        fprintf(g_csv, "name,shape,time_us,tflops,gbps,sol,base_us,check%s\n",
                g_opt.only == "tc" ? ",config" : g_opt.only == "convtc" ? ",config,fp32_us,rel_l2" : g_opt.only == "convf16" ? ",config,rel_l2" : "");
    }
    if (g_opt.tune) {
        gemm_tune(g_opt.tune_out);
        return 0;
    }
    const std::string &only = g_opt.only;
    const bool all = only.empty();
    measure_ceilings();
    if (all || only == "check" || only == "gemm") gemm_sweep();
#ifdef ODL_BENCH_HAVE_CUDNN
    if (all || only == "check" || only == "conv") conv_sweep();
#endif
    if (only != "check") print_header();
    if (all || only == "gemm") {
        const int sizes[] = {1024, 2048, 4096, 8192};
        for (int S : sizes)
            if (!(g_opt.quick && S == 8192)) gemm_time_square(S);
        /* the MNIST network's linear layers at batch 64: fc1 forward, its dx and dW */
        gemm_time_case("mnist fc1 fwd", 0, 1, 64, 128, 9216);
        gemm_time_case("mnist fc1 dx", 0, 0, 64, 9216, 128);
        gemm_time_case("mnist fc1 dW", 1, 0, 128, 9216, 64);
    }
#ifdef ODL_BENCH_HAVE_CUDNN
    if (all || only == "conv") {
        const int batches[] = {64, 512};
        for (int N : batches) {
            conv_time(fmt("mnist conv1 N%d", N).c_str(), conv_shape(N, 1, 28, 28, 32, 3, 3, 1, 0), ODL_ACT_RELU, true);
            conv_time(fmt("mnist conv2 N%d", N).c_str(), conv_shape(N, 32, 26, 26, 64, 3, 3, 1, 0), ODL_ACT_RELU, true);
        }
        /* YOLOv5n at 640x640, batch 1 */
        for (const YoloConv &c : kYoloConvs)
            conv_time(c.name, conv_shape(1, c.C, c.HW, c.HW, c.K, c.RS, c.RS, c.stride, c.pad), c.act, false);
    }
#endif
    if (all || only == "ew") ew_time();
    if (all || only == "tc") gemm_tc_rows();
    if (only == "tcq") gemm_tc_quick();
    if (only == "fc1") {
        printf("%-28s %-20s %9s %8s %6s %10s %8s %9s\n", "name", "shape", "own_us", "TFLOP/s", "SOL", "cublas_us",
               "blas/own", "fp32_us");
        gemm_tc_fc1_rows();
    }
    if (only == "convtc") conv_tc_rows(); /* not in `all`: see conv_tc_rows.cuh */
    if (only == "convf16") conv_f16_rows();

    /* the short table last (the end of the output is what a remote run shows): forced GEMM
     * configurations only as the best one per shape */
    if (!g_rows.empty()) {
        printf("\n== summary: own kernel vs baseline (base/own > 1: own faster) ==\n");
        printf("%-34s %10s %8s %6s %8s %s\n", "name", "time_us", "TFLOP/s", "SOL", "base/own", "check");
        std::vector<const Row *> best;
        for (const Row &r : g_rows) {
            const bool forced = r.name.rfind("gemm ", 0) == 0 && r.name.rfind("gemm auto", 0) != 0;
            if (forced) {
                const Row **b = nullptr;
                for (auto &x : best)
                    if (x->shape == r.shape) b = &x;
                if (!b) best.push_back(&r);
                else if (r.us < (*b)->us) *b = &r;
                continue;
            }
            const double t_sol = std::max(r.flops / g_peak_flops, r.bytes / g_peak_bw) * 1e6;
            printf("%-34s %10.1f %8.2f %6.3f %8s %s\n", r.name.c_str(), r.us, r.flops / r.us * 1e-6, t_sol / r.us,
                   r.base_us > 0 ? fmt("%.3f", r.base_us / r.us).c_str() : "-", r.check.c_str());
        }
        for (const Row *r : best)
            printf("best GEMM configuration %-16s %-20s %8.1f us, %.2f TFLOP/s, cuBLAS/own %.3f\n", r->shape.c_str(),
                   r->name.c_str() + 5, r->us, r->flops / r->us * 1e-6, r->base_us / r->us);
    }
    printf("\nchecks: %d, bad: %d\n", g_checks, g_bad);
    if (g_csv) fclose(g_csv);
    cublasDestroy(g_cublas);
#ifdef ODL_BENCH_HAVE_CUDNN
    cudnnDestroy(g_cudnn);
#endif
    odl_cuda_backend_release();
    return g_bad ? 1 : 0;
}
