/* odl_bench_kernels --only tc: the kernel-lab rows of the TF32 and BF16 tensor-core GEMM
 * (kernels/cuda/gemm_tc.cu) beside cuBLAS in the same precision. Included by kernels_bench.cu after its
 * GEMM section; uses its buffers, timing (time_us: events, warm-up, median), check and CSV helpers.
 *
 * Rows: square row-major GEMMs 1024..8192 (NN) and the MNIST network's fc1 GEMMs at batch 64 and 512
 * (forward NT, data gradient NN, weight gradient TN), each in tf32 and bf16:
 *   own      odl_cuda_gemm_lowp (heuristic tile and split-K): float32 operands in memory, rounded to TF32 /
 *            converted to BF16 in registers;
 *   cuBLAS   tf32: cublasGemmEx on the float32 operands, CUBLAS_COMPUTE_32F_FAST_TF32;
 *            bf16: cublasGemmEx on bfloat16 copies of A and B (made once, not timed), float32 C,
 *            CUBLAS_COMPUTE_32F: cuBLAS reads half the operand bytes our kernel reads;
 *   fp32     odl_cuda_gemm (the FMA path), for the MNIST shapes;
 *   cfgN     4096^3 with tile configuration N forced (odl_cuda_gemm_lowp_config_name(N) lists them).
 * SOL = achieved / ceiling: the ceiling of each precision is cuBLAS's rate at 8192^3 (4096^3 with --quick)
 * measured in this process, the first row of that precision, as the FP32 section measures its own;
 * --fixed-peaks uses the stored ones of ../shared/data/baselines.json instead (cuBLAS 8192^3 on an H200
 * of another day: TF32 400.5, BF16 750.1 TFLOP/s). Check: rel L2 of own C against cuBLAS SGEMM without TF32
 * below 2e-3 (tf32) / 1.6e-2 (bf16), a few times one input rounding (2^-11, 2^-8); the same-precision
 * cuBLAS result's rel L2 is printed beside it. */
#include <cuda_bf16.h>

/* [tf32, bf16] FLOP/s; replaced by the ceiling row's cuBLAS rate unless --fixed-peaks */
static double g_peak_tc[2] = {400.5e12, 750.1e12}; /* baselines.json gemm_*_8192_tflops */

__global__ void to_bf16_kernel(const float *x, __nv_bfloat16 *y, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        y[i] = __float2bfloat16_rn(x[i]);
}

/* One row: C[M,N] = op(A) op(B), row-major, in prec: own vs cuBLAS (and own fp32 when with_fp32). */
/* sets_peak: this row's cuBLAS rate becomes prec's SOL ceiling (before its own SOL is printed). */
static void gemm_tc_row(const char *name, odl_precision prec, int ta, int tb, int M, int N, int K, bool with_fp32,
                        int cfg = -1, bool sets_peak = false) {
    const bool bf16 = prec == ODL_PRECISION_BF16;
    const int lda = ta ? M : K, ldb = tb ? K : N;
    const size_t nA = (size_t)M * K, nB = (size_t)K * N, nC = (size_t)M * N;
    const int sets = rotation_for((nA + nB + nC) * 4);
    Buf A(nA * sets), B(nB * sets), C(nC * sets), Cref(nC), Cblas(nC);
    Buf Ah(bf16 ? (nA * sets + 1) / 2 : 1), Bh(bf16 ? (nB * sets + 1) / 2 : 1); /* bfloat16 copies */
    __nv_bfloat16 *ah = reinterpret_cast<__nv_bfloat16 *>(Ah.p), *bh = reinterpret_cast<__nv_bfloat16 *>(Bh.p);
    fill_uniform(A.p, A.n, 41);
    fill_uniform(B.p, B.n, 42);
    if (bf16) {
        to_bf16_kernel<<<1024, 256, 0, g_stream>>>(A.p, ah, A.n);
        to_bf16_kernel<<<1024, 256, 0, g_stream>>>(B.p, bh, B.n);
        CK(cudaGetLastError());
    }
    const double flops = 2.0 * M * N * (double)K, bytes = (nA + nB + nC) * 4.0;
    double peak = g_peak_tc[bf16];
    const int reps = reps_for(flops / peak * 2e6 + 5);
    const float one = 1.0f, zero = 0.0f;
    /* cuBLAS, column-major: C^T[N,M] = op(B)^T op(A)^T */
    const cublasOperation_t opA = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opB = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    auto blas = [&](int r, float *c) {
        const size_t s = (size_t)(r % sets);
        if (!bf16)
            CKB(cublasGemmEx(g_cublas, opB, opA, N, M, K, &one, B.p + s * nB, CUDA_R_32F, ldb, A.p + s * nA,
                             CUDA_R_32F, lda, &zero, c, CUDA_R_32F, N, CUBLAS_COMPUTE_32F_FAST_TF32,
                             CUBLAS_GEMM_DEFAULT));
        else
            CKB(cublasGemmEx(g_cublas, opB, opA, N, M, K, &one, bh + s * nB, CUDA_R_16BF, ldb, ah + s * nA,
                             CUDA_R_16BF, lda, &zero, c, CUDA_R_32F, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    };
    auto own = [&](int r, odl_precision p, int c) {
        const size_t s = (size_t)(r % sets);
        odl_gemm_args g;
        memset(&g, 0, sizeof g);
        g.trans_a = ta;
        g.trans_b = tb;
        g.M = M;
        g.N = N;
        g.K = K;
        g.alpha = 1.0f;
        g.A = A.p + s * nA;
        g.lda = lda;
        g.B = B.p + s * nB;
        g.ldb = ldb;
        g.C = C.p + s * nC;
        g.ldc = N;
        CKO(odl_cuda_gemm_lowp_ex(&g, p, c, 0));
    };
    cublas_gemm(ta, tb, M, N, K, 1.0f, A.p, lda, B.p, ldb, 0.0f, Cref.p, N); /* float32 (CUBLAS_DEFAULT_MATH) */
    blas(0, Cblas.p);
    poison(C.p, nC);
    own(0, prec, cfg);
    const double rel = rel_l2(C.p, Cref.p, nC), rel_blas = rel_l2(Cblas.p, Cref.p, nC);
    g_checks++;
    const bool ok = rel < (bf16 ? 1.6e-2 : 2e-3);
    if (!ok) g_bad++;
    const double t_blas = time_us([&](int r) { blas(r, Cblas.p); }, reps);
    if (sets_peak && !g_opt.fixed_peaks) peak = g_peak_tc[bf16] = flops / t_blas * 1e6;
    const double t_own = time_us([&](int r) { own(r, prec, cfg); }, reps);
    const double t_fp32 = with_fp32 ? time_us([&](int r) { own(r, ODL_PRECISION_FP32, -1); }, reps) : 0.0;
    const std::string shape = fmt("%dx%dx%d %c%c", M, N, K, ta ? 'T' : 'N', tb ? 'T' : 'N');
    const std::string row = fmt("%s %s", odl_precision_name(prec), name);
    printf("%-22s %-20s %9.1f %8.1f %6.3f %10.1f %8.3f %9s  rel %.2e (cuBLAS %.2e) %s\n", row.c_str(), shape.c_str(),
           t_own, flops / t_own * 1e-6, flops / t_own * 1e6 / peak, t_blas, t_blas / t_own,
           with_fp32 ? fmt("%.1f", t_fp32).c_str() : "-", rel, rel_blas, ok ? "OK" : "BAD");
    fflush(stdout);
    if (g_csv)
        fprintf(g_csv, "%s,%s,%.3f,%.4f,%.1f,%.4f,%.3f,%s\n", row.c_str(), shape.c_str(), t_own, flops / t_own * 1e-6,
                bytes / t_own * 1e-3, flops / t_own * 1e6 / peak, t_blas, ok ? "OK" : "BAD");
}

static void gemm_tc_rows() {
    const int S_peak = g_opt.quick ? 4096 : 8192;
    if (g_opt.fixed_peaks)
        printf("\n== TF32 / BF16 tensor-core GEMM vs cuBLAS in the same precision; SOL vs TF32 %.0f / BF16 %.0f "
               "TFLOP/s (fixed: baselines.json) ==\n", g_peak_tc[0] * 1e-12, g_peak_tc[1] * 1e-12);
    else
        printf("\n== TF32 / BF16 tensor-core GEMM vs cuBLAS in the same precision; SOL vs cuBLAS's rate at %d^3 in "
               "this run (each precision's first row) ==\n", S_peak);
    printf("%-22s %-20s %9s %8s %6s %10s %8s %9s\n", "name", "shape", "own_us", "TFLOP/s", "SOL", "cublas_us",
           "blas/own", "fp32_us");
    for (int c = 0; c < odl_cuda_gemm_lowp_num_configs(); c++) printf("cfg%d = %s\n", c, odl_cuda_gemm_lowp_config_name(c));
    const odl_precision precs[] = {ODL_PRECISION_TF32, ODL_PRECISION_BF16};
    for (odl_precision p : precs) {
        gemm_tc_row(fmt("gemm %d", S_peak).c_str(), p, 0, 0, S_peak, S_peak, S_peak, false, -1, true); /* the ceiling */
        for (int S : {1024, 2048, 4096})
            if (S != S_peak) gemm_tc_row(fmt("gemm %d", S).c_str(), p, 0, 0, S, S, S, false);
    }
    /* every tile configuration forced, at 4096^3 */
    for (odl_precision p : precs)
        for (int c = 0; c < odl_cuda_gemm_lowp_num_configs(); c++)
            gemm_tc_row(fmt("gemm 4096 cfg%d", c).c_str(), p, 0, 0, 4096, 4096, 4096, false, c);
    for (odl_precision p : precs)
        for (int Bn : {64, 512}) {
            gemm_tc_row(fmt("fc1 fwd B%d", Bn).c_str(), p, 0, 1, Bn, 128, 9216, true);
            gemm_tc_row(fmt("fc1 dx B%d", Bn).c_str(), p, 0, 0, Bn, 9216, 128, true);
            gemm_tc_row(fmt("fc1 dW B%d", Bn).c_str(), p, 1, 0, 128, 9216, Bn, true);
        }
}
