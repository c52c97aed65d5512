/* odl_bench_kernels --only convf16: the float16 NHWC convolutions of YOLOv5 --half (odl_cuda_conv2d_f16_ex,
 * kernels/cuda/conv2d_f16.cu and, on compute capability 9.0, conv2d_f16_sm90.cu) beside cuDNN in the same
 * precision, in this process. Included by kernels_bench.cu after conv_tc_rows.cuh; uses its DnDir (cuDNN's
 * fastest algorithm of cudnnFind*), buffers, timing and CSV.
 *
 *   mma    the mma.sync kernel, the tile odl picks for the output channels (configurations 0..3)
 *   wgmma  the wgmma kernel, the tile it picks (configurations 4..7; '-' off compute capability 9.0)
 *   cuDNN  CUDNN_TENSOR_NHWC CUDNN_DATA_HALF x / w / y (the weights KRSC, as odl's), compute type
 *          CUDNN_DATA_FLOAT, CUDNN_TENSOR_OP_MATH: what PyTorch runs for a channels_last float16 convolution
 *          under cudnn.benchmark.
 * odl's rows run the fused epilogue of the network (bias, SiLU) and write half; cuDNN's the plain convolution
 * (which slightly favours cuDNN, as the float32 rows of --only conv). Timing: time_pair_us, cuDNN and odl
 * alternating, inputs rotated past twice the L2.
 * Rows: the convolutions of YOLOv5n at 640x640, batch 32 (--quick: batch 8), one of each shape the network
 * has from the stem (as odl runs it: space-to-depth, 16 channels, 3x3) to SPPF.
 * Check: each kernel once without bias and activation against cuDNN's half output: rel L2 below 4e-3 (a few
 * half roundings, 2^-11). Last line: the geometric means of cuDNN/odl for both kernels. */

__global__ void from_f16_kernel(const __half *x, float *y, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        y[i] = __half2float(x[i]);
}

struct ConvF16Row {
    const char *name;
    int C, HW, K, RS, stride, pad;
};
/* YOLOv5n (v7.0 yolov5n.yaml, width 0.25, depth 0.33) at 640x640: one row per distinct shape, by layer */
static const ConvF16Row kYoloF16[] = {
    {"L0 stem (s2d) 3x3", 16, 320, 16, 3, 1, 1}, {"L1 down 3x3 s2", 16, 320, 32, 3, 2, 1},
    {"L2 C3 cv1 1x1", 32, 160, 16, 1, 1, 0},     {"L2 bneck 3x3", 16, 160, 16, 3, 1, 1},
    {"L2 C3 cv3 1x1", 32, 160, 32, 1, 1, 0},     {"L3 down 3x3 s2", 32, 160, 64, 3, 2, 1},
    {"L4 C3 cv1 1x1", 64, 80, 32, 1, 1, 0},      {"L4 bneck 3x3", 32, 80, 32, 3, 1, 1},
    {"L4 C3 cv3 1x1", 64, 80, 64, 1, 1, 0},      {"L5 down 3x3 s2", 64, 80, 128, 3, 2, 1},
    {"L6 bneck 3x3", 64, 40, 64, 3, 1, 1},       {"L6 C3 cv3 1x1", 128, 40, 128, 1, 1, 0},
    {"L7 down 3x3 s2", 128, 40, 256, 3, 2, 1},   {"L8 bneck 3x3", 128, 20, 128, 3, 1, 1},
    {"L9 SPPF cv2 1x1", 512, 20, 256, 1, 1, 0},  {"L18 down 3x3 s2", 64, 80, 64, 3, 2, 1},
};

static double g_convf16_log[2];
static int g_convf16_n[2];

static void conv_f16_case(const ConvF16Row &c, int N) {
    const odl_conv2d_shape s = conv_shape(N, c.C, c.HW, c.HW, c.K, c.RS, c.RS, c.stride, c.pad);
    const size_t nx = (size_t)N * c.HW * c.HW * c.C, nw = (size_t)c.K * c.RS * c.RS * c.C, ny = (size_t)N * s.P * s.Q * c.K;
    const int sets = rotation_for((nx + ny) * 2);
    /* float sources, converted to half once (untimed); the weights scaled as a network's are */
    Buf Xf(nx), Wf(nw), Bias(c.K), Ref(ny), Got(ny), X16((nx * sets + 1) / 2), W16((nw + 1) / 2), Y16((ny * sets + 1) / 2);
    fill_uniform(Xf.p, nx, 91);
    fill_uniform(Wf.p, nw, 92, -1.0f / sqrtf((float)(c.RS * c.RS * c.C)), 1.0f / sqrtf((float)(c.RS * c.RS * c.C)));
    fill_uniform(Bias.p, c.K, 93, -0.5f, 0.5f);
    __half *x16 = reinterpret_cast<__half *>(X16.p), *w16 = reinterpret_cast<__half *>(W16.p),
           *y16 = reinterpret_cast<__half *>(Y16.p);
    for (int r = 0; r < sets; r++) to_f16_kernel<<<1024, 256, 0, g_stream>>>(Xf.p, x16 + (size_t)r * nx, nx);
    to_f16_kernel<<<1024, 256, 0, g_stream>>>(Wf.p, w16, nw);
    CK(cudaGetLastError());
    auto args = [&](int r, bool epi) {
        odl_conv2d_f16_args a;
        memset(&a, 0, sizeof a);
        a.s = s;
        a.x = reinterpret_cast<const odl_half *>(x16 + (size_t)(r % sets) * nx);
        a.ldx = c.C;
        a.w = reinterpret_cast<const odl_half *>(w16);
        a.bias = epi ? Bias.p : nullptr;
        a.act = epi ? ODL_ACT_SILU : ODL_ACT_NONE;
        a.y = y16 + (size_t)(r % sets) * ny;
        a.ldy = c.K;
        return a;
    };
    const int cfg[2] = {c.K <= 16 ? 0 : c.K <= 32 ? 1 : c.K <= 64 ? 2 : 3, c.K <= 16 ? 4 : c.K <= 32 ? 5 : c.K <= 64 ? 6 : 7};
    const double flops = 2.0 * N * c.K * s.P * (double)s.Q * c.C * c.RS * c.RS;
    const int reps = reps_for(flops / 200e12 * 1e6 + 10);
    const std::string shape = fmt("N%d %d->%d %dx%d k%d s%d", N, c.C, c.K, c.HW, c.HW, c.RS, c.stride);
    std::string chose = "-";
#ifdef ODL_BENCH_HAVE_CUDNN
    DnDir dn(s, CONV_FWD, CUDNN_DATA_HALF, {CUDNN_TENSOR_OP_MATH}, false, CUDNN_TENSOR_NHWC);
    if (dn.ok) {
        dn.run(x16, w16, y16);
        from_f16_kernel<<<1024, 256, 0, g_stream>>>(y16, Ref.p, ny);
        CK(cudaGetLastError());
        chose = dn.chose();
    }
#endif
    for (int k = 0; k < 2; k++) {
        odl_conv2d_f16_args a0 = args(0, false);
        CK(cudaMemsetAsync(y16, 0xff, ny * 2, g_stream)); /* NaN halves */
        const odl_status st = odl_cuda_conv2d_f16_ex(&a0, cfg[k]);
        if (st != ODL_OK) {
            printf("%-34s %-28s %9s  (%s)\n", fmt("%s %s", c.name, k ? "wgmma" : "mma").c_str(), shape.c_str(), "-",
                   odl_error_msg());
            continue;
        }
        from_f16_kernel<<<1024, 256, 0, g_stream>>>(y16, Got.p, ny);
        CK(cudaGetLastError());
        double rel = NAN, t_own = 0.0, t_dnn = 0.0;
        auto own_fn = [&](int r) {
            odl_conv2d_f16_args a = args(r, true);
            CKO(odl_cuda_conv2d_f16_ex(&a, cfg[k]));
        };
#ifdef ODL_BENCH_HAVE_CUDNN
        if (dn.ok) {
            rel = rel_l2(Got.p, Ref.p, ny);
            g_checks++;
            if (!(rel < 4e-3)) g_bad++;
            time_pair_us([&](int r) { dn.run(x16 + (size_t)(r % sets) * nx, w16, y16 + (size_t)(r % sets) * ny); }, own_fn,
                         reps, &t_dnn, &t_own);
            g_convf16_log[k] += std::log(t_dnn / t_own);
            g_convf16_n[k]++;
        }
#endif
        if (t_own == 0.0) t_own = time_gpu_us(own_fn, reps);
        const bool ok = !(rel >= 4e-3);
        const std::string row = fmt("%s %s", c.name, k ? "wgmma" : "mma");
        printf("%-34s %-28s %9.1f %8.1f %10s %8s  rel %.2e %s  %s\n", row.c_str(), shape.c_str(), t_own,
               flops / t_own * 1e-6, t_dnn > 0 ? fmt("%.1f", t_dnn).c_str() : "-",
               t_dnn > 0 ? fmt("%.3f", t_dnn / t_own).c_str() : "-", rel, ok ? "OK" : "BAD", chose.c_str());
        fflush(stdout);
        if (g_csv)
            fprintf(g_csv, "%s,%s,%.3f,%.4f,%.1f,%.4f,%.3f,%s,%s,%.3e\n", row.c_str(), shape.c_str(), t_own,
                    flops / t_own * 1e-6, (nx + nw + ny) * 2.0 / t_own * 1e-3, 0.0, t_dnn, ok ? "OK" : "BAD",
                    chose.c_str(), rel);
    }
}

static void conv_f16_rows() {
    const int N = g_opt.quick ? 8 : 32;
    printf("\n== float16 NHWC convolutions (YOLOv5 --half), batch %d, vs cuDNN float16 NHWC (tensor ops) ==\n", N);
#ifndef ODL_BENCH_HAVE_CUDNN
    printf("(built without cuDNN: odl's times only, unchecked)\n");
#endif
    printf("%-34s %-28s %9s %8s %10s %8s  check  cudnn algo / math\n", "name", "shape", "own_us", "TFLOP/s", "cudnn_us",
           "dnn/own");
    for (const ConvF16Row &c : kYoloF16) conv_f16_case(c, N);
    for (int k = 0; k < 2; k++)
        if (g_convf16_n[k])
            printf("convf16 %s: geomean cuDNN/own %.3f over %d rows (> 1: odl faster)\n", k ? "wgmma" : "mma",
                   std::exp(g_convf16_log[k] / g_convf16_n[k]), g_convf16_n[k]);
}
