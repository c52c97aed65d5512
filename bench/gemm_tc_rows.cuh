/* odl_bench_kernels --only tc: the kernel-lab rows of the tensor-core GEMMs (kernels/cuda/gemm_sm90.cu on
 * compute capability 9.0, kernels/cuda/gemm_tc.cu elsewhere) beside cuBLAS in the same precision and
 * layout. Included by kernels_bench.cu after its GEMM section; uses its buffers, timing (time_us: events,
 * warm-up, median), check and CSV helpers.
 *
 * Two ways in, both row-major C = op(A) op(B) with float32 C:
 *   typed  odl_cuda_gemm_typed on operands already in the precision's storage (bfloat16, float16, or float32
 *          for TF32), as cuBLAS is given them: the kernel against cuBLAS, byte for byte the same inputs;
 *   lowp   odl_cuda_gemm_lowp on float32 operands (what --precision tf32|bf16 training calls): for bf16 this
 *          includes the pass that converts A and B, which cuBLAS (given bfloat16 copies) does not pay.
 * cuBLAS: cublasGemmEx, CUBLAS_COMPUTE_32F_FAST_TF32 on float32 operands (tf32), CUBLAS_COMPUTE_32F on
 * CUDA_R_16BF / CUDA_R_16F operands (bf16 / fp16), float32 C, CUBLAS_GEMM_DEFAULT.
 * Rows: square 2048 / 4096 / 8192 NN in each precision and way, 4096 / 8192 NT and TN, every configuration
 * forced at 4096^3 (cfgN, odl_cuda_gemm_lowp_config_name), and the MNIST network's fc1 GEMMs at batch 64
 * and 512 (forward NT, data gradient NN, weight gradient TN).
 * SOL = achieved / ceiling, the ceiling of each precision cuBLAS's rate at 8192^3 NN (4096^3 with --quick)
 * measured in this process (the precision's first row); --fixed-peaks uses the stored baselines.json ones.
 * Own and cuBLAS are timed in alternation, GPU time only (time_pair_us): clock drift falls on both, and
 * neither pays its host-side launch cost (a training step replays them in a CUDA graph).
 * Check: rel L2 of own C against cuBLAS SGEMM without TF32 below 2e-3 (tf32), 1.6e-2 (bf16), 2e-3 (fp16)
 * (a few times one input rounding); the same-precision cuBLAS result's rel L2 is printed beside it. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>

enum TcPrec { TC_TF32 = 0, TC_BF16 = 1, TC_FP16 = 2 };
static const char *const kTcPrecName[3] = {"tf32", "bf16", "fp16"};
/* FLOP/s ceilings per precision; replaced by the ceiling row's cuBLAS rate unless --fixed-peaks */
static double g_peak_tc[3] = {400.5e12, 750.1e12, 750.1e12}; /* baselines.json gemm_*_8192_tflops */

__global__ void to_bf16_kernel(const float *x, __nv_bfloat16 *y, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        y[i] = __float2bfloat16_rn(x[i]);
}
__global__ void to_f16_kernel(const float *x, __half *y, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        y[i] = __float2half_rn(x[i]);
}

/* The configuration a row runs with: the forced one, else the wgmma plan (ODL_GEMM_CONFIG, the tuned table or
 * the built-in one) as gemm_sm90 sees the product (gemm_lowp's bf16 packs both operands K-major first), or
 * the mma.sync path on other GPUs. */
static std::string tc_config_of(TcPrec prec, bool typed, int ta, int tb, int M, int N, int K, int cfg) {
    if (cfg >= 0) return fmt("cfg%d", cfg);
    if (!odlk::sm90::available()) return "mma.sync plan";
    odl_gemm_typed_args a;
    memset(&a, 0, sizeof a);
    a.M = M;
    a.N = N;
    a.K = K;
    a.trans_a = ta;
    a.trans_b = tb;
    a.ab_type = prec == TC_BF16 ? ODL_BF16 : prec == TC_FP16 ? ODL_F16 : ODL_F32;
    if (prec == TC_BF16 && !typed) a.trans_a = 0, a.trans_b = 1;
    int t = 0, s = 0;
    odlk::sm90::plan(a, &t, &s);
    return fmt("%s split %d", odlk::sm90::tile_short_name(t), s);
}

/* One row: C[M,N] = op(A) op(B). typed: the typed entry on prec's storage, else gemm_lowp on float32
 * (fp16 only typed). with_fp32: also time the FMA path. cfg: -1 the plan, else a forced configuration.
 * sets_peak: this row's cuBLAS rate becomes prec's SOL ceiling. */
static void gemm_tc_row(const char *name, TcPrec prec, bool typed, int ta, int tb, int M, int N, int K,
                        bool with_fp32, int cfg = -1, bool sets_peak = false) {
    const bool half16 = prec != TC_TF32;
    const int lda = ta ? M : K, ldb = tb ? K : N;
    const size_t nA = (size_t)M * K, nB = (size_t)K * N, nC = (size_t)M * N;
    const int sets = rotation_for((nA + nB) * (half16 ? 2 : 4) + nC * 4);
    Buf A(nA * sets), B(nB * sets), C(nC * sets), Cref(nC), Cblas(nC);
    Buf Ah(half16 ? (nA * sets + 1) / 2 : 1), Bh(half16 ? (nB * sets + 1) / 2 : 1); /* 16-bit copies */
    fill_uniform(A.p, A.n, 41);
    fill_uniform(B.p, B.n, 42);
    if (prec == TC_BF16) {
        to_bf16_kernel<<<1024, 256, 0, g_stream>>>(A.p, reinterpret_cast<__nv_bfloat16 *>(Ah.p), A.n);
        to_bf16_kernel<<<1024, 256, 0, g_stream>>>(B.p, reinterpret_cast<__nv_bfloat16 *>(Bh.p), B.n);
    } else if (prec == TC_FP16) {
        to_f16_kernel<<<1024, 256, 0, g_stream>>>(A.p, reinterpret_cast<__half *>(Ah.p), A.n);
        to_f16_kernel<<<1024, 256, 0, g_stream>>>(B.p, reinterpret_cast<__half *>(Bh.p), B.n);
    }
    CK(cudaGetLastError());
    const size_t esz = half16 ? 2 : 4;
    auto a16 = [&](int r) { return (const void *)((const char *)Ah.p + (size_t)(r % sets) * nA * esz); };
    auto b16 = [&](int r) { return (const void *)((const char *)Bh.p + (size_t)(r % sets) * nB * esz); };
    const double flops = 2.0 * M * N * (double)K, bytes = (nA + nB) * (double)esz + nC * 4.0;
    double peak = g_peak_tc[prec];
    const int reps = reps_for(flops / peak * 2e6 + 5);
    const float one = 1.0f, zero = 0.0f;
    /* cuBLAS, column-major: C^T[N,M] = op(B)^T op(A)^T */
    const cublasOperation_t opA = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opB = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    auto blas = [&](int r, float *c) {
        const size_t s = (size_t)(r % sets);
        if (prec == TC_TF32)
            CKB(cublasGemmEx(g_cublas, opB, opA, N, M, K, &one, B.p + s * nB, CUDA_R_32F, ldb, A.p + s * nA,
                             CUDA_R_32F, lda, &zero, c, CUDA_R_32F, N, CUBLAS_COMPUTE_32F_FAST_TF32,
                             CUBLAS_GEMM_DEFAULT));
        else {
            const cudaDataType t = prec == TC_BF16 ? CUDA_R_16BF : CUDA_R_16F;
            CKB(cublasGemmEx(g_cublas, opB, opA, N, M, K, &one, b16(r), t, ldb, a16(r), t, lda, &zero, c, CUDA_R_32F,
                             N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        }
    };
    auto own = [&](int r, bool fp32) {
        const size_t s = (size_t)(r % sets);
        float *c = C.p + s * nC;
        if (typed && !fp32) {
            odl_gemm_typed_args g;
            memset(&g, 0, sizeof g);
            g.trans_a = ta;
            g.trans_b = tb;
            g.M = M;
            g.N = N;
            g.K = K;
            g.alpha = 1.0f;
            g.A = half16 ? a16(r) : A.p + s * nA;
            g.lda = lda;
            g.B = half16 ? b16(r) : B.p + s * nB;
            g.ldb = ldb;
            g.C = c;
            g.ldc = N;
            g.ab_type = prec == TC_BF16 ? ODL_BF16 : prec == TC_FP16 ? ODL_F16 : ODL_F32;
            g.c_type = ODL_F32;
            CKO(odl_cuda_gemm_typed(&g));
            return;
        }
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
        g.C = c;
        g.ldc = N;
        if (fp32) CKO(odl_cuda_gemm_lowp_ex(&g, ODL_PRECISION_FP32, -1, 0));
        else CKO(odl_cuda_gemm_lowp_ex(&g, prec == TC_BF16 ? ODL_PRECISION_BF16 : ODL_PRECISION_TF32, cfg, 0));
    };
    /* the reference: float32 SGEMM of the inputs as rounded for the product (bf16 / fp16 copies' values) */
    cublas_gemm(ta, tb, M, N, K, 1.0f, A.p, lda, B.p, ldb, 0.0f, Cref.p, N); /* float32 (CUBLAS_DEFAULT_MATH) */
    blas(0, Cblas.p);
    poison(C.p, nC);
    own(0, false);
    const double rel = rel_l2(C.p, Cref.p, nC), rel_blas = rel_l2(Cblas.p, Cref.p, nC);
    g_checks++;
    const bool ok = rel < (prec == TC_BF16 ? 1.6e-2 : 2e-3);
    if (!ok) g_bad++;
    double t_blas = 0.0, t_own = 0.0;
    time_pair_us([&](int r) { blas(r, Cblas.p); }, [&](int r) { own(r, false); }, reps, &t_blas, &t_own);
    if (sets_peak && !g_opt.fixed_peaks) peak = g_peak_tc[prec] = flops / t_blas * 1e6;
    const double t_fp32 = with_fp32 ? time_gpu_us([&](int r) { own(r, true); }, reps) : 0.0;
    const std::string shape = fmt("%dx%dx%d %c%c", M, N, K, ta ? 'T' : 'N', tb ? 'T' : 'N');
    const std::string row = fmt("%s %s %s", kTcPrecName[prec], typed ? "typed" : "lowp", name);
    const std::string chose = tc_config_of(prec, typed, ta, tb, M, N, K, cfg);
    printf("%-28s %-20s %9.1f %8.1f %6.3f %10.1f %8.3f %9s  rel %.2e (cuBLAS %.2e) %s  %s\n", row.c_str(),
           shape.c_str(), t_own, flops / t_own * 1e-6, flops / t_own * 1e6 / peak, t_blas, t_blas / t_own,
           with_fp32 ? fmt("%.1f", t_fp32).c_str() : "-", rel, rel_blas, ok ? "OK" : "BAD", chose.c_str());
    fflush(stdout);
    if (g_csv)
        fprintf(g_csv, "%s,%s,%.3f,%.4f,%.1f,%.4f,%.3f,%s,%s\n", row.c_str(), shape.c_str(), t_own,
                flops / t_own * 1e-6, bytes / t_own * 1e-3, flops / t_own * 1e6 / peak, t_blas, ok ? "OK" : "BAD",
                chose.c_str());
}

/* --only tcq: one bf16 row at 4096^3 NN, typed, and its cuBLAS twin (for a profiler: ncu -k regex:gemm_sm90) */
static void gemm_tc_quick() {
    printf("%-28s %-20s %9s %8s %6s %10s %8s %9s\n", "name", "shape", "own_us", "TFLOP/s", "SOL", "cublas_us",
           "blas/own", "fp32_us");
    gemm_tc_row("gemm 4096", TC_BF16, true, 0, 0, 4096, 4096, 4096, false);
}

/* The MNIST network's fc1 GEMMs (9216 -> 128) at batch 64 and 512: forward, data and weight gradient, each
 * precision, typed and (tf32, bf16) through gemm_lowp. Alone: --only fc1 (for a profiler). */
static void gemm_tc_fc1_rows() {
    for (TcPrec p : {TC_TF32, TC_BF16, TC_FP16})
        for (int typed = 1; typed >= (p == TC_FP16 ? 1 : 0); typed--)
            for (int Bn : {64, 512}) {
                gemm_tc_row(fmt("fc1 fwd B%d", Bn).c_str(), p, typed, 0, 1, Bn, 128, 9216, !typed);
                gemm_tc_row(fmt("fc1 dx B%d", Bn).c_str(), p, typed, 0, 0, Bn, 9216, 128, !typed);
                gemm_tc_row(fmt("fc1 dW B%d", Bn).c_str(), p, typed, 1, 0, 128, 9216, Bn, !typed);
            }
}

static void gemm_tc_rows() {
    const int S_peak = g_opt.quick ? 4096 : 8192;
    if (g_opt.fixed_peaks)
        printf("\n== tensor-core GEMM vs cuBLAS in the same precision; SOL vs TF32 %.0f / BF16 %.0f / FP16 %.0f "
               "TFLOP/s (fixed: baselines.json) ==\n", g_peak_tc[0] * 1e-12, g_peak_tc[1] * 1e-12, g_peak_tc[2] * 1e-12);
    else
        printf("\n== tensor-core GEMM vs cuBLAS in the same precision; SOL vs cuBLAS's rate at %d^3 NN in this run "
               "(each precision's first row) ==\n", S_peak);
    printf("%-28s %-20s %9s %8s %6s %10s %8s %9s\n", "name", "shape", "own_us", "TFLOP/s", "SOL", "cublas_us",
           "blas/own", "fp32_us");
    for (int c = 0; c < odl_cuda_gemm_lowp_num_configs(); c++) printf("cfg%d = %s\n", c, odl_cuda_gemm_lowp_config_name(c));
    const TcPrec precs[] = {TC_TF32, TC_BF16, TC_FP16};
    for (TcPrec p : precs) {
        gemm_tc_row(fmt("gemm %d", S_peak).c_str(), p, true, 0, 0, S_peak, S_peak, S_peak, false, -1, true);
        for (int S : {2048, 4096, 8192})
            if (S != S_peak && !(g_opt.quick && S > 4096)) gemm_tc_row(fmt("gemm %d", S).c_str(), p, true, 0, 0, S, S, S, false);
        for (int S : {4096, 8192}) {
            if (g_opt.quick && S > 4096) continue;
            gemm_tc_row(fmt("gemm %d", S).c_str(), p, true, 0, 1, S, S, S, false);
            gemm_tc_row(fmt("gemm %d", S).c_str(), p, true, 1, 0, S, S, S, false);
        }
        if (p != TC_FP16)
            for (int S : {2048, 4096}) gemm_tc_row(fmt("gemm %d", S).c_str(), p, false, 0, 0, S, S, S, false);
    }
    /* every tile configuration forced, at 4096^3 NN through gemm_lowp */
    for (TcPrec p : {TC_TF32, TC_BF16})
        for (int c = 0; c < odl_cuda_gemm_lowp_num_configs(); c++)
            gemm_tc_row(fmt("gemm 4096 cfg%d", c).c_str(), p, false, 0, 0, 4096, 4096, 4096, false, c);
    gemm_tc_fc1_rows();
}

/* odl_bench_kernels --tune [--tune-out FILE]: every wgmma configuration (tile x split-K) of each shape
 * training and the lab use, timed on this GPU; the fastest per shape written to the GEMM table
 * (kernels/gemm_table.h: FILE, else $ODL_GEMM_TABLE, else ~/.cache/odl/gemm_sm90.tsv) that later runs read.
 * Rows are keyed as the wgmma kernels see the product: gemm_lowp's bf16 packs both operands K-major
 * (trans_a 0, trans_b 1), its tf32 and the typed entry keep the caller's layout. */
static void gemm_tune(const std::string &out_path) {
    if (!odlk::sm90::available()) {
        printf("--tune: this GPU has no wgmma kernels (compute capability 9.0 only); nothing to tune\n");
        return;
    }
    struct Shape {
        int M, N, K, ta, tb;
    };
    std::vector<Shape> shapes = {{64, 128, 9216, 0, 1},  {64, 9216, 128, 0, 0},  {128, 9216, 64, 1, 0},
                                 {512, 128, 9216, 0, 1}, {512, 9216, 128, 0, 0}, {128, 9216, 512, 1, 0},
                                 {1024, 1024, 1024, 0, 0}, {2048, 2048, 2048, 0, 0}, {4096, 4096, 4096, 0, 0},
                                 {8192, 8192, 8192, 0, 0}};
    std::vector<odl_gemm_table_row> rows;
    const std::string dev = odlk::sm90::device_name();
    printf("\n== --tune on %s ==\n%-6s %-22s %-10s %7s %10s %10s\n", dev.c_str(), "dtype", "shape", "tile", "splits",
           "best_us", "plan_us");
    for (int pi = 0; pi < 2; pi++) {
        const bool bf16 = pi == 1;
        for (const Shape &s : shapes) {
            const size_t nA = (size_t)s.M * s.K, nB = (size_t)s.K * s.N, nC = (size_t)s.M * s.N;
            Buf A(nA), B(nB), C(nC);
            fill_uniform(A.p, A.n, 51);
            fill_uniform(B.p, B.n, 52);
            odl_gemm_args g;
            memset(&g, 0, sizeof g);
            g.trans_a = s.ta;
            g.trans_b = s.tb;
            g.M = s.M;
            g.N = s.N;
            g.K = s.K;
            g.alpha = 1.0f;
            g.A = A.p;
            g.lda = s.ta ? s.M : s.K;
            g.B = B.p;
            g.ldb = s.tb ? s.K : s.N;
            g.C = C.p;
            g.ldc = s.N;
            const odl_precision prec = bf16 ? ODL_PRECISION_BF16 : ODL_PRECISION_TF32;
            const double flops = 2.0 * s.M * s.N * (double)s.K;
            const int reps = std::max(5, std::min(30, (int)(2e5 / (flops / 400e12 * 1e6 + 5))));
            const int base = odl_cuda_gemm_lowp_num_configs() - odlk::sm90::num_tiles();
            const double t_plan = time_us([&](int) { CKO(odl_cuda_gemm_lowp_ex(&g, prec, -1, 0)); }, reps);
            double best = 1e30;
            int best_t = 0, best_s = 1;
            const int kblocks = (s.K * (bf16 ? 2 : 4) + 127) / 128;
            for (int t = 0; t < odlk::sm90::num_tiles(); t++)
                for (int sp : {1, 2, 4, 8, 16, 32}) {
                    if (sp > 1 && (sp > kblocks / 2 || (size_t)s.M * s.N >= (size_t)2048 * 2048)) continue;
                    const double us = time_us([&](int) { CKO(odl_cuda_gemm_lowp_ex(&g, prec, base + t, sp)); }, reps);
                    if (us < best) best = us, best_t = t, best_s = sp;
                }
            odl_gemm_table_row r;
            memset(&r, 0, sizeof r);
            snprintf(r.device, sizeof r.device, "%s", dev.c_str());
            snprintf(r.dtype, sizeof r.dtype, "%s", bf16 ? "bf16" : "tf32");
            r.trans_a = bf16 ? 0 : s.ta;
            r.trans_b = bf16 ? 1 : s.tb;
            r.M = s.M;
            r.N = s.N;
            r.K = s.K;
            snprintf(r.tile, sizeof r.tile, "%s", odlk::sm90::tile_short_name(best_t));
            r.splits = best_s;
            r.us = best;
            rows.push_back(r);
            printf("%-6s %-22s %-10s %7d %10.1f %10.1f\n", r.dtype,
                   fmt("%dx%dx%d %c%c", s.M, s.N, s.K, s.ta ? 'T' : 'N', s.tb ? 'T' : 'N').c_str(), r.tile, best_s,
                   best, t_plan);
        }
    }
    const std::string path = out_path.empty() ? odl_gemm_table_path() : out_path;
    const odl_status st = odl_gemm_table_write(path.c_str(), rows.data(), rows.size(),
                                               fmt("odl_bench_kernels --tune on %s", dev.c_str()).c_str());
    if (st != ODL_OK) printf("--tune: %s\n", odl_error_msg());
    else printf("--tune: %zu rows written to %s\n", rows.size(), path.c_str());
}
