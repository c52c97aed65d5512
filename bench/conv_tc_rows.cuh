/* odl_bench_kernels --only convtc: the kernel-lab rows of the tensor-core convolutions (kernels/cuda/conv2d_tc.cu:
 * odl_cuda_conv2d_fwd_lowp, _bwd_data_lowp, _bwd_weight_lowp in TF32 and BF16) beside cuDNN in the same
 * precision, in this process. Included by kernels_bench.cu after its convolution section; uses its buffers,
 * timing (time_pair_us: own and cuDNN alternating, GPU time only, medians; inputs rotated over enough copies to exceed twice the L2, the
 * weights of fwd / bwd_data not, as conv_time), CSV, conv_shape / kYoloConvs, and gemm_tc_rows.cuh's
 * bfloat16 conversion, precision names and ceilings.
 *
 *   own   odl_cuda_conv2d_*_lowp on float32 NCHW operands, each gathered element rounded to TF32 / BF16 inside
 *         the kernel, float32 accumulation and float32 output (what --precision tf32|bf16 training calls).
 *   tf32  cuDNN on float32 tensors, cudnnFind* run under CUDNN_DEFAULT_MATH and under CUDNN_TENSOR_OP_MATH
 *         and the fastest successful algorithm of either list taken whatever its math type, run with the
 *         math type its result names (PyTorch with torch.backends.cudnn.allow_tf32 = True and
 *         cudnn.benchmark; NVIDIA_TF32_OVERRIDE=0 in the environment would turn cuDNN's TF32 off).
 *   bf16  cuDNN on CUDNN_DATA_BFLOAT16 x / w / y descriptors (dy, dx, dw alike), compute type
 *         CUDNN_DATA_FLOAT, CUDNN_TENSOR_OP_MATH (as autocast's convolution), the fastest successful
 *         algorithm of cudnnFind*; the inputs converted to bfloat16 beforehand, untimed. Not the same bytes:
 *         odl reads float32 inputs (twice the bytes of cuDNN's bfloat16 ones) and writes float32, cuDNN
 *         writes bfloat16.
 *   fp32  odl's float32 FMA kernels (odl_cuda_conv2d_fwd / _bwd_data / _bwd_weight, conv2d.cu) on the same
 *         inputs, timed once per pass and printed in both precisions' rows: fp32/own is the tensor cores'
 *         speed-up. Products too small for an mma slice run the float32 kernel inside the lowp entry too
 *         (conv2d_tc.cu, kMinReduction): conv1's forward (reduction C*R*S = 9) and bwd_weight (9 columns),
 *         so own ~ fp32 in conv1's rows.
 * Rows: the MNIST CNN's conv1 (1->32, 28x28, 3x3; fwd and bwd_weight only, its dx is never needed) and
 * conv2 (32->64, 26x26, 3x3) at N = 64 and 512 (N = 64 only with --quick), and YOLOv5n's convolutions at
 * 640x640 batch 1 (kYoloConvs, the conv section's list), fwd / bwd_data / bwd_weight each; the forward
 * without epilogue, bwd_weight without bias gradient. TFLOP/s: 2*N*K*P*Q*C*R*S per pass; GB/s (CSV) of the
 * float32 bytes odl moves; SOL vs g_peak_tc, the dense GEMM ceiling of the precision (baselines.json's
 * cuBLAS 8192^3 rate: --only convtc does not run --only tc's ceiling row).
 * Check: rel L2 of own's result against cuDNN float32 with CUDNN_FMA_MATH (no TF32) on the unrounded inputs,
 * below 2e-3 (tf32) and 1.6e-2 (bf16), a few times one input rounding (2^-11, 2^-8); the same-precision
 * cuDNN result's rel L2 printed beside it. Without cuDNN (no ODL_BENCH_HAVE_CUDNN) the rows hold odl's own
 * and fp32 times only, checked against odl's float32 kernel (which the conv sweep checks against cuDNN on
 * builds that have it).
 * Last, per precision: the geometric mean of cuDNN/own (and of fp32/own) over the rows, and the section's
 * wall time. Not part of the default (`all`) sweep: its 31 passes run four cudnnFind* each (the FP32
 * reference, TF32 under two math types, BF16), each of which allocates a workspace for and times every
 * algorithm; with the timing itself we expect that well past the 20 s a default-sweep section may add on an
 * H200 (an estimate: the section prints its wall time, to revisit with). Run it with --only convtc. */
#include <time.h>

#include <initializer_list>

enum ConvDir { CONV_FWD = 0, CONV_BWD_DATA = 1, CONV_BWD_WEIGHT = 2 };
static const char *const kConvDirName[3] = {"fwd", "bwd_data", "bwd_weight"};

__global__ void from_bf16_kernel(const __nv_bfloat16 *x, float *y, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        y[i] = __bfloat162float(x[i]);
}

/* per precision (TC_TF32, TC_BF16): sums of log(cuDNN / own) and log(fp32 / own) for the geometric means */
struct ConvTcSum {
    double log_dnn = 0.0, log_fp32 = 0.0;
    int n_dnn = 0, n = 0;
};
static ConvTcSum g_convtc_sum[2];

#ifdef ODL_BENCH_HAVE_CUDNN
static const char *dn_math_name(cudnnMathType_t m) {
    switch (m) {
    case CUDNN_DEFAULT_MATH: return "default";
    case CUDNN_TENSOR_OP_MATH: return "tensor_op";
    case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION: return "tensor_op_conv";
    case CUDNN_FMA_MATH: return "fma";
    default: return "?";
    }
}

static const char *dn_algo_name(ConvDir d, int algo) {
    static const char *const fwd[] = {"implicit_gemm", "implicit_precomp_gemm", "gemm", "direct", "fft",
                                      "fft_tiling", "winograd", "winograd_nonfused"};
    static const char *const bd[] = {"algo0", "algo1", "fft", "fft_tiling", "winograd", "winograd_nonfused"};
    static const char *const bf[] = {"algo0", "algo1", "fft", "algo3", "winograd", "winograd_nonfused", "fft_tiling"};
    if (algo < 0) return "?";
    if (d == CONV_FWD) return algo < 8 ? fwd[algo] : "?";
    if (d == CONV_BWD_DATA) return algo < 6 ? bd[algo] : "?";
    return algo < 7 ? bf[algo] : "?";
}

/* One direction of one convolution in cuDNN: descriptors of data type dt (x, w, y; compute type float32),
 * and the fastest successful algorithm of cudnnFind* over the lists it returns under each math type of
 * maths (fma_only: only results computed with CUDNN_FMA_MATH, the reference), run with the math type its
 * result names; format: NCHW (KCRS weights) or NHWC (KRSC). ok is false when no algorithm succeeded (bfloat16 may have none for a shape): the row then
 * prints '-' for cuDNN. */
struct DnDir {
    cudnnTensorDescriptor_t x = nullptr, y = nullptr;
    cudnnFilterDescriptor_t w = nullptr;
    cudnnConvolutionDescriptor_t conv = nullptr;
    ConvDir dir;
    int algo = -1;
    cudnnMathType_t math = CUDNN_DEFAULT_MATH;
    float best_ms = 0.0f;
    size_t ws_bytes = 0;
    void *ws = nullptr;
    bool ok = false;
    cudnnStatus_t find_status = CUDNN_STATUS_SUCCESS; /* the last failed cudnnFind* call's, for the note */

    DnDir(const odl_conv2d_shape &s, ConvDir d, cudnnDataType_t dt, std::initializer_list<cudnnMathType_t> maths,
          bool fma_only, cudnnTensorFormat_t format = CUDNN_TENSOR_NCHW)
        : dir(d) {
        CKD(cudnnCreateTensorDescriptor(&x));
        CKD(cudnnCreateTensorDescriptor(&y));
        CKD(cudnnCreateFilterDescriptor(&w));
        CKD(cudnnCreateConvolutionDescriptor(&conv));
        CKD(cudnnSetTensor4dDescriptor(x, format, dt, s.N, s.C, s.H, s.W));
        CKD(cudnnSetTensor4dDescriptor(y, format, dt, s.N, s.K, s.P, s.Q));
        CKD(cudnnSetFilter4dDescriptor(w, dt, format, s.K, s.C, s.R, s.S)); /* NHWC: KRSC */
        CKD(cudnnSetConvolution2dDescriptor(conv, s.pad_h, s.pad_w, s.stride_h, s.stride_w, 1, 1,
                                            CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
        for (cudnnMathType_t m : maths) {
            CKD(cudnnSetConvolutionMathType(conv, m));
            int got = 0;
            cudnnStatus_t st;
            if (d == CONV_FWD) {
                cudnnConvolutionFwdAlgoPerf_t p[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
                st = cudnnFindConvolutionForwardAlgorithm(g_cudnn, x, w, conv, y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                                          &got, p);
                if (st == CUDNN_STATUS_SUCCESS) consider(p, got, fma_only);
            } else if (d == CONV_BWD_DATA) {
                cudnnConvolutionBwdDataAlgoPerf_t p[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
                st = cudnnFindConvolutionBackwardDataAlgorithm(g_cudnn, w, y, conv, x,
                                                               CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, p);
                if (st == CUDNN_STATUS_SUCCESS) consider(p, got, fma_only);
            } else {
                cudnnConvolutionBwdFilterAlgoPerf_t p[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
                st = cudnnFindConvolutionBackwardFilterAlgorithm(g_cudnn, x, y, conv, w,
                                                                 CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got, p);
                if (st == CUDNN_STATUS_SUCCESS) consider(p, got, fma_only);
            }
            if (st != CUDNN_STATUS_SUCCESS) find_status = st;
        }
        if (!ok) return;
        CKD(cudnnSetConvolutionMathType(conv, math));
        if (ws_bytes) CK(cudaMalloc(&ws, ws_bytes));
    }
    /* Find's times of different calls are compared as they are: each list is sorted by its own timing */
    template <class Perf>
    void consider(const Perf *p, int n, bool fma_only) {
        for (int i = 0; i < n; i++) {
            if (p[i].status != CUDNN_STATUS_SUCCESS || (fma_only && p[i].mathType != CUDNN_FMA_MATH)) continue;
            if (ok && !(p[i].time < best_ms)) continue;
            ok = true;
            algo = (int)p[i].algo;
            math = p[i].mathType;
            best_ms = p[i].time;
            ws_bytes = p[i].memory;
        }
    }
    ~DnDir() {
        if (ws) cudaFree(ws);
        cudnnDestroyTensorDescriptor(x);
        cudnnDestroyTensorDescriptor(y);
        cudnnDestroyFilterDescriptor(w);
        cudnnDestroyConvolutionDescriptor(conv);
    }
    DnDir(const DnDir &) = delete;
    DnDir &operator=(const DnDir &) = delete;
    /* fwd: a = x, b = w, out = y; bwd_data: a = dy, b = w, out = dx; bwd_weight: a = x, b = dy, out = dw
     * (pointers to the descriptors' data type) */
    void run(const void *a, const void *b, void *out) {
        const float one = 1.0f, zero = 0.0f; /* float scaling factors for float and bfloat16 tensors alike */
        if (dir == CONV_FWD)
            CKD(cudnnConvolutionForward(g_cudnn, &one, x, a, w, b, conv, (cudnnConvolutionFwdAlgo_t)algo, ws, ws_bytes,
                                        &zero, y, out));
        else if (dir == CONV_BWD_DATA)
            CKD(cudnnConvolutionBackwardData(g_cudnn, &one, w, b, y, a, conv, (cudnnConvolutionBwdDataAlgo_t)algo, ws,
                                             ws_bytes, &zero, x, out));
        else
            CKD(cudnnConvolutionBackwardFilter(g_cudnn, &one, x, a, y, b, conv, (cudnnConvolutionBwdFilterAlgo_t)algo,
                                               ws, ws_bytes, &zero, w, out));
    }
    std::string chose() const { return fmt("%s %s", dn_algo_name(dir, algo), dn_math_name(math)); }
};
#endif /* ODL_BENCH_HAVE_CUDNN */

/* One pass (dir) of one convolution: the FP32 reference and fp32 time once, then a tf32 and a bf16 row. */
static void conv_tc_case(const char *name, const odl_conv2d_shape &s, ConvDir dir) {
    const size_t nx = (size_t)s.N * s.C * s.H * s.W, nw = (size_t)s.K * s.C * s.R * s.S,
                 ny = (size_t)s.N * s.K * s.P * s.Q;
    /* the pass's operands a, b and output o, in DnDir::run's order */
    const size_t na = dir == CONV_BWD_DATA ? ny : nx;
    const size_t nb = dir == CONV_BWD_WEIGHT ? ny : nw;
    const size_t no = dir == CONV_FWD ? ny : dir == CONV_BWD_DATA ? nx : nw;
    const bool rot_b = dir == CONV_BWD_WEIGHT; /* b is dy there; the weights stay put, as in conv_time */
    const int sets = rotation_for((nx + nw + ny) * 4);
    const size_t sb = rot_b ? nb : 0;
    Buf A(na * sets), B(rot_b ? nb * sets : nb), O(no * sets), Ref(no);
    fill_uniform(A.p, A.n, 71 + dir);
    fill_uniform(B.p, B.n, 74 + dir);
    auto a32 = [&](int r) { return A.p + (size_t)(r % sets) * na; };
    auto b32 = [&](int r) { return B.p + (size_t)(r % sets) * sb; };
    auto o32 = [&](int r) { return O.p + (size_t)(r % sets) * no; };
    auto own = [&](int r, odl_precision p, float *out) {
        if (dir == CONV_FWD) CKO(odl_cuda_conv2d_fwd_lowp(&s, a32(r), b32(r), nullptr, out, p));
        else if (dir == CONV_BWD_DATA) CKO(odl_cuda_conv2d_bwd_data_lowp(&s, a32(r), b32(r), nullptr, out, p));
        else CKO(odl_cuda_conv2d_bwd_weight_lowp(&s, a32(r), b32(r), out, nullptr, p));
    };
    auto fp32 = [&](int r, float *out) {
        if (dir == CONV_FWD) CKO(odl_cuda_conv2d_fwd(&s, a32(r), b32(r), nullptr, out));
        else if (dir == CONV_BWD_DATA) CKO(odl_cuda_conv2d_bwd_data(&s, a32(r), b32(r), nullptr, out));
        else CKO(odl_cuda_conv2d_bwd_weight(&s, a32(r), b32(r), out, nullptr));
    };
    const double flops = 2.0 * s.N * s.K * s.P * (double)s.Q * s.C * s.R * s.S, bytes = (nx + nw + ny) * 4.0;
    const int reps = reps_for(flops / 150e12 * 1e6 + 10), reps_fp32 = reps_for(flops / 25e12 * 1e6 + 10);
    const std::string shape = fmt("N%d %d->%d %dx%d k%d s%d p%d", s.N, s.C, s.K, s.H, s.W, s.R, s.stride_h, s.pad_h);

    /* the reference: float32, no TF32 (cuDNN's FMA math; without cuDNN, odl's float32 kernel) */
#ifdef ODL_BENCH_HAVE_CUDNN
    {
        DnDir ref(s, dir, CUDNN_DATA_FLOAT, {CUDNN_FMA_MATH}, true);
        if (!ref.ok) {
            fprintf(stderr, "odl_bench_kernels: cuDNN found no FMA-math %s algorithm for %s %s\n", kConvDirName[dir],
                    name, shape.c_str());
            exit(2);
        }
        ref.run(A.p, B.p, Ref.p);
    }
    const char *ref_name = "cuDNN";
#else
    fp32(0, Ref.p);
    const char *ref_name = "odl fp32";
#endif
    const double t_fp32 = time_gpu_us([&](int r) { fp32(r, o32(r)); }, reps_fp32);

    for (TcPrec tp : {TC_TF32, TC_BF16}) {
        const odl_precision prec = tp == TC_BF16 ? ODL_PRECISION_BF16 : ODL_PRECISION_TF32;
        poison(O.p, no);
        own(0, prec, O.p);
        const double rel = rel_l2(O.p, Ref.p, no);
        g_checks++;
        const bool ok = rel < (tp == TC_BF16 ? 1.6e-2 : 2e-3);
        if (!ok) g_bad++;
        auto own_fn = [&](int r) { own(r, prec, o32(r)); };
        double t_own = 0.0, t_dnn = 0.0, rel_dnn = NAN;
        std::string chose = "-";
#ifdef ODL_BENCH_HAVE_CUDNN
        if (tp == TC_TF32) {
            DnDir dn(s, dir, CUDNN_DATA_FLOAT, {CUDNN_DEFAULT_MATH, CUDNN_TENSOR_OP_MATH}, false);
            if (dn.ok) {
                poison(O.p, no);
                dn.run(A.p, B.p, O.p);
                rel_dnn = rel_l2(O.p, Ref.p, no);
                time_pair_us([&](int r) { dn.run(a32(r), b32(r), o32(r)); }, own_fn, reps, &t_dnn, &t_own);
                chose = dn.chose();
            } else {
                chose = fmt("none (%s)", cudnnGetErrorString(dn.find_status));
            }
        } else {
            /* bfloat16 copies of the inputs (untimed); cuDNN's bfloat16 output lands in O's first half */
            Buf Ah((A.n + 1) / 2), Bh((B.n + 1) / 2), Of(no);
            __nv_bfloat16 *ah = reinterpret_cast<__nv_bfloat16 *>(Ah.p), *bh = reinterpret_cast<__nv_bfloat16 *>(Bh.p),
                          *oh = reinterpret_cast<__nv_bfloat16 *>(O.p);
            to_bf16_kernel<<<1024, 256, 0, g_stream>>>(A.p, ah, A.n);
            to_bf16_kernel<<<1024, 256, 0, g_stream>>>(B.p, bh, B.n);
            CK(cudaGetLastError());
            auto a16 = [&](int r) { return ah + (size_t)(r % sets) * na; };
            auto b16 = [&](int r) { return bh + (size_t)(r % sets) * sb; };
            auto o16 = [&](int r) { return oh + (size_t)(r % sets) * no; };
            DnDir dn(s, dir, CUDNN_DATA_BFLOAT16, {CUDNN_TENSOR_OP_MATH}, false);
            if (dn.ok) {
                poison(O.p, no);
                dn.run(ah, bh, oh);
                from_bf16_kernel<<<1024, 256, 0, g_stream>>>(oh, Of.p, no);
                CK(cudaGetLastError());
                rel_dnn = rel_l2(Of.p, Ref.p, no);
                time_pair_us([&](int r) { dn.run(a16(r), b16(r), o16(r)); }, own_fn, reps, &t_dnn, &t_own);
                chose = dn.chose();
            } else {
                chose = fmt("none (%s)", cudnnGetErrorString(dn.find_status));
            }
        }
#endif
        if (t_own == 0.0) t_own = time_gpu_us(own_fn, reps);
        ConvTcSum &sum = g_convtc_sum[tp];
        sum.n++;
        sum.log_fp32 += std::log(t_fp32 / t_own);
        if (t_dnn > 0) {
            sum.n_dnn++;
            sum.log_dnn += std::log(t_dnn / t_own);
        }
        const double sol = flops / t_own * 1e6 / g_peak_tc[tp];
        const std::string row = fmt("%s %s %s", name, kConvDirName[dir], kTcPrecName[tp]);
        printf("%-32s %-28s %9.1f %8.1f %6.3f %10s %8s %9.1f %8.2f  rel %.2e (%s) %s  %s\n", row.c_str(),
               shape.c_str(), t_own, flops / t_own * 1e-6, sol, t_dnn > 0 ? fmt("%.1f", t_dnn).c_str() : "-",
               t_dnn > 0 ? fmt("%.3f", t_dnn / t_own).c_str() : "-", t_fp32, t_fp32 / t_own, rel,
               t_dnn > 0 ? fmt("cuDNN %.2e", rel_dnn).c_str() : fmt("vs %s", ref_name).c_str(), ok ? "OK" : "BAD",
               chose.c_str());
        fflush(stdout);
        if (g_csv)
            fprintf(g_csv, "%s,%s,%.3f,%.4f,%.1f,%.4f,%.3f,%s,%s,%.3f,%.3e\n", row.c_str(), shape.c_str(), t_own,
                    flops / t_own * 1e-6, bytes / t_own * 1e-3, sol, t_dnn, ok ? "OK" : "BAD", chose.c_str(), t_fp32,
                    rel);
    }
}

static void conv_tc_rows() {
    timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    printf("\n== tensor-core convolutions (TF32 / BF16) vs cuDNN in the same precision; SOL vs TF32 %.0f / BF16 %.0f "
           "TFLOP/s (dense GEMM ceilings) ==\n", g_peak_tc[TC_TF32] * 1e-12, g_peak_tc[TC_BF16] * 1e-12);
#ifndef ODL_BENCH_HAVE_CUDNN
    printf("(built without cuDNN: own and fp32 times only, checked against odl's float32 kernel)\n");
#endif
    printf("%-32s %-28s %9s %8s %6s %10s %8s %9s %8s  check  cudnn algo / math\n", "name", "shape", "own_us",
           "TFLOP/s", "SOL", "cudnn_us", "dnn/own", "fp32_us", "fp32/own");
    for (int N : {64, 512}) {
        if (g_opt.quick && N > 64) continue;
        const odl_conv2d_shape c1 = conv_shape(N, 1, 28, 28, 32, 3, 3, 1, 0), c2 = conv_shape(N, 32, 26, 26, 64, 3, 3, 1, 0);
        conv_tc_case(fmt("conv1 N%d", N).c_str(), c1, CONV_FWD);
        conv_tc_case(fmt("conv1 N%d", N).c_str(), c1, CONV_BWD_WEIGHT); /* conv1's dx is never needed */
        for (ConvDir d : {CONV_FWD, CONV_BWD_DATA, CONV_BWD_WEIGHT}) conv_tc_case(fmt("conv2 N%d", N).c_str(), c2, d);
    }
    for (const YoloConv &c : kYoloConvs) {
        const odl_conv2d_shape s = conv_shape(1, c.C, c.HW, c.HW, c.K, c.RS, c.RS, c.stride, c.pad);
        for (ConvDir d : {CONV_FWD, CONV_BWD_DATA, CONV_BWD_WEIGHT}) conv_tc_case(c.name, s, d);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    for (TcPrec tp : {TC_TF32, TC_BF16}) {
        const ConvTcSum &sum = g_convtc_sum[tp];
        if (!sum.n) continue;
        if (sum.n_dnn)
            printf("convtc %s: geomean cuDNN/own %.3f over %d rows (> 1: odl faster), fp32/own %.2f over %d\n",
                   kTcPrecName[tp], std::exp(sum.log_dnn / sum.n_dnn), sum.n_dnn, std::exp(sum.log_fp32 / sum.n), sum.n);
        else
            printf("convtc %s: no cuDNN rows; geomean fp32/own %.2f over %d rows\n", kTcPrecName[tp],
                   std::exp(sum.log_fp32 / sum.n), sum.n);
    }
    printf("convtc: %.1f s\n", (t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec));
}
