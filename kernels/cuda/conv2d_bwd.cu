/* The FMA convolutions' data and weight gradients (formulas and layouts: conv2d.cu's header; the plan and launch
 * helpers: conv2d_plan.cuh). A translation unit of their own, apart from the forward: see conv2d_plan.cuh. */
#include "conv2d_plan.cuh"

namespace odlk {

/* ---- bwd_data ---- */
__global__ void transpose_weights_kernel(const float *__restrict__ w, int K, int C, int RS, float *__restrict__ wt) {
    /* wt[c][k*RS + rs] = w[k][c][rs] */
    const int64_t total = (int64_t)K * C * RS;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        const int rs = (int)(i % RS);
        const int64_t kc = i / RS;
        const int c = (int)(kc % C), k = (int)(kc / C);
        wt[((int64_t)c * K + k) * RS + rs] = w[i];
    }
}

odl_status conv_transpose_weights(const odl_conv2d_shape *s, const float *w, float *wt) {
    const int threads = 256;
    transpose_weights_kernel<<<grid_for((int64_t)s->K * s->C * s->R * s->S, threads), threads, 0, stream()>>>(
        w, s->K, s->C, s->R * s->S, wt);
    ODL_CUDA_LAUNCH_CHECK("odl_conv2d_transpose_weights");
    return ODL_OK;
}

template <class Cfg>
static odl_status bwd_data_cfg(const odl_conv2d_shape *s, const float *dy, const float *wt, const float *relu_x,
                               float *dx, const Plan &pl, float *ws) {
    const int M = s->C, N = s->N * s->H * s->W, Kd = s->K * s->R * s->S;
    using LA = DenseTile<Cfg::BM, Cfg::BK, Cfg::THREADS, true>;
    typename LA::Params pa = {wt, (int64_t)Kd, M, Kd, Kd % 4 == 0};
    const int HW = s->H * s->W;
    OutNCHW fin, part;
    conv_nchw_outs(dx, ws, s->C, HW, M, N, HW % 4 == 0 && aligned16(dx) && !relu_x, &fin,
                   &part);
    const FastDiv fHW(s->H * s->W), fW(s->W), fRS(s->R * s->S), fS(s->S), fsh(s->stride_h), fsw(s->stride_w);
    Epi ep = epi_raw();
    ep.gate = relu_x; /* the ReLU backward of the layer below, in the store */
    if (s->stride_h == 1 && s->stride_w == 1 && gather_table(Kd))
        return run_table<Cfg, LA>(pa, conv_bwd_data_gather(s, dy), fin, part, ep, M, N, Kd, pl,
                                  "odl_conv2d_bwd_data_table");
    if (s->stride_h == 1 && s->stride_w == 1) {
        using LB = DyGatherTile<Cfg::BN, Cfg::BK, Cfg::THREADS, true>;
        typename LB::Params pb = {dy, s->K, s->P, s->Q, 1, 1, s->pad_h, s->pad_w, N, Kd, fHW, fW, fRS, fS, fsh, fsw};
        return run_implicit<Cfg, LA, LB>(pa, pb, fin, part, ep, M, N, Kd, pl.splits, pl.k_chunk,
                                         "odl_conv2d_bwd_data");
    }
    using LB = DyGatherTile<Cfg::BN, Cfg::BK, Cfg::THREADS, false>;
    typename LB::Params pb = {dy, s->K, s->P, s->Q, s->stride_h, s->stride_w, s->pad_h, s->pad_w, N, Kd,
                              fHW, fW, fRS, fS, fsh, fsw};
    return run_implicit<Cfg, LA, LB>(pa, pb, fin, part, ep, M, N, Kd, pl.splits, pl.k_chunk,
                                     "odl_conv2d_bwd_data_strided");
}

/* ---- bwd_weight ---- */
/* db (nullable): the bias gradient summed by the A loader from its own reads of dy (DyRowsSumTile), split sums
 * in dbpart ([splits][K]) added in order after. */
template <class Cfg>
static odl_status bwd_weight_cfg(const odl_conv2d_shape *s, const float *x, const float *dy, float *dw, float *db,
                                 const Plan &pl, float *ws, float *dbpart) {
    const int M = s->K, N = s->C * s->R * s->S, Kd = s->N * s->P * s->Q;
    using LA = DyRowsTile<Cfg::BM, Cfg::BK, Cfg::THREADS>;
    using LB = XColsTile<Cfg::BN, Cfg::BK, Cfg::THREADS>;
    typename LA::Params pa;
    typename LB::Params pb;
    conv_wgrad_operands<LA, LB>(s, x, dy, &pa, &pb);
    OutRowMajor fin, part;
    conv_dw_outs(dw, ws, M, N, &fin, &part);
    if (!db)
        return run_implicit<Cfg, LA, LB>(pa, pb, fin, part, epi_raw(), M, N, Kd, pl.splits, pl.k_chunk,
                                         "odl_conv2d_bwd_weight");
    using LAS = DyRowsSumTile<Cfg::BM, Cfg::BK, Cfg::THREADS>;
    const typename LAS::Params ps = {pa, dbpart};
    ODL_CHECK((run_implicit<Cfg, LAS, LB>(ps, pb, fin, part, epi_raw(), M, N, Kd, pl.splits, pl.k_chunk,
                                          "odl_conv2d_bwd_weight_db")));
    return splitk_reduce_vector(dbpart, pl.splits, M, db, "odl_conv2d_bias_grad_fma_reduce");
}

/* ---- bwd_weight for few columns (C*R*S <= 16, e.g. a first layer with C = 1): the tiled GEMM would
 * waste most of a 128-column tile, so a dedicated reduction kernel instead. Block (chunk b, channel
 * group g): warp w of the block owns output channels k0 = (g * 8 + w) * KT .. k0 + KT - 1; lane l
 * walks the reduction indices j = n*PQ + p*Q + q of chunk b with stride 32 (coalesced dy and x reads),
 * accumulating dy[n, k, pq] * x[n, c, p*sh-ph+r, q*sw-pw+s] for its KT channels and all C*R*S columns
 * in registers; a fixed xor-butterfly over the warp's lanes then adds the 32 lane sums (every lane
 * ends with the same value: IEEE addition commutes) and the block writes part[b][k][crs]. The chunks
 * are added in a fixed order by splitk_reduce: deterministic, FP32 FMAs. ---- */
template <int KT, int CRS_MAX, bool RELU>
__global__ void __launch_bounds__(256)
    bwd_weight_smalln_kernel(const float *__restrict__ x, const float *__restrict__ dy,
                             const float *__restrict__ relu_y, int K, int C, int H, int W,
                             int sh, int sw, int ph, int pw, int PQ, int NPQ, int CRS, int RS, int S, FastDiv fPQ,
                             FastDiv fQ, int chunk, float *__restrict__ part, float *__restrict__ dbpart) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int k0 = ((int)blockIdx.y * 8 + warp) * KT;
    if (k0 >= K) return; /* whole warp: no block-wide barrier below */
    const int HW = H * W;
    int coff[CRS_MAX], rr[CRS_MAX], ss[CRS_MAX];
#pragma unroll
    for (int e = 0; e < CRS_MAX; e++) {
        const int c = e / RS, rs = e % RS, r = rs / S, s_ = rs % S;
        coff[e] = c * HW + r * W + s_;
        rr[e] = e < CRS ? r : (1 << 28); /* columns past C*R*S fail every bounds check */
        ss[e] = s_;
    }
    float acc[KT][CRS_MAX], dsum[KT];
#pragma unroll
    for (int t = 0; t < KT; t++) {
        dsum[t] = 0.0f;
#pragma unroll
        for (int e = 0; e < CRS_MAX; e++) acc[t][e] = 0.0f;
    }
    const int jb = (int)blockIdx.x * chunk;
    const int je = min(NPQ, jb + chunk);
    const int64_t CHW = (int64_t)C * HW;
    for (int j = jb + lane; j < je; j += 32) {
        int img, pq, p, q;
        fPQ.divmod(j, img, pq);
        fQ.divmod(pq, p, q);
        const int h0 = p * sh - ph, w0 = q * sw - pw;
        const int64_t xbase = (int64_t)img * CHW + (int64_t)h0 * W + w0;
        const int64_t dyo = ((int64_t)img * K + k0) * PQ + pq;
        float dv[KT], rv[KT], xv[CRS_MAX];
        /* the ReLU outputs loaded beside dy, every load of the iteration issued before any is used: a load
         * under `k0 + t < K && ...` became a branch per channel, each waiting for its load in turn (SASS:
         * BSSY/BRA around LDG + FSETP), and the fused kernel took 91 us where the plain one took 43 (H200) */
#pragma unroll
        for (int t = 0; t < KT; t++) {
            const bool in = k0 + t < K;
            dv[t] = in ? __ldg(dy + dyo + (int64_t)t * PQ) : 0.0f;
            if (RELU) rv[t] = in ? __ldg(relu_y + dyo + (int64_t)t * PQ) : 1.0f;
        }
        if (RELU) {
#pragma unroll
            for (int t = 0; t < KT; t++) /* OpReluBwd's test (elementwise.cu): the same bits as act_bwd's pass */
                if (rv[t] <= 0.0f) dv[t] = 0.0f;
        }
#pragma unroll
        for (int e = 0; e < CRS_MAX; e++) {
            const int h = h0 + rr[e], w = w0 + ss[e];
            xv[e] = ((unsigned)h < (unsigned)H && (unsigned)w < (unsigned)W) ? __ldg(x + (xbase + coff[e])) : 0.0f;
        }
#pragma unroll
        for (int t = 0; t < KT; t++) {
            if (dbpart) dsum[t] += dv[t];
#pragma unroll
            for (int e = 0; e < CRS_MAX; e++) acc[t][e] = fmaf(dv[t], xv[e], acc[t][e]);
        }
    }
    float *pb = part + ((int64_t)blockIdx.x * K + k0) * CRS;
#pragma unroll
    for (int t = 0; t < KT; t++)
#pragma unroll
        for (int e = 0; e < CRS_MAX; e++) {
            float v = acc[t][e];
#pragma unroll
            for (int off = 16; off >= 1; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
            if (lane == ((t * CRS_MAX + e) & 31) && e < CRS && k0 + t < K) pb[t * CRS + e] = v;
        }
    if (!dbpart) return;
#pragma unroll
    for (int t = 0; t < KT; t++) {
        float v = dsum[t];
#pragma unroll
        for (int off = 16; off >= 1; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
        if (lane == 0 && k0 + t < K) dbpart[(int64_t)blockIdx.x * K + k0 + t] = v;
    }
}

/* db (nullable): the bias gradient from the same reads of dy (each chunk's float32 sums, then over the chunks
 * as dw's); relu_y (nullable): dy masked where it is <= 0 as it is read. */
template <int CRS_MAX>
static odl_status bwd_weight_smalln(const odl_conv2d_shape *s, const float *x, const float *dy, const float *relu_y,
                                    float *dw, float *db) {
    constexpr int KT = 4;
    const int K = s->K, CRS = s->C * s->R * s->S, PQ = s->P * s->Q, NPQ = s->N * s->P * s->Q;
    if (NPQ <= 0) { /* an empty batch: the sums are zero */
        ODL_CUDA_CALL(cudaMemsetAsync(dw, 0, (size_t)K * CRS * sizeof(float), stream()));
        if (db) ODL_CUDA_CALL(cudaMemsetAsync(db, 0, (size_t)K * sizeof(float), stream()));
        return ODL_OK;
    }
    const int groups = (int)cdiv(K, 8 * KT);
    /* about four blocks per multiprocessor in all, each chunk at least 256 reduction indices deep and a
     * multiple of 32 */
    const int64_t want = (int64_t)sm_count() * 4 / groups > 0 ? (int64_t)sm_count() * 4 / groups : 1;
    int64_t chunk = cdiv(NPQ, want);
    if (chunk < 256) chunk = 256;
    chunk = cdiv(chunk, 32) * 32;
    const int chunks = (int)cdiv(NPQ, chunk);
    void *p = nullptr;
    ODL_CHECK(workspace((size_t)chunks * K * (CRS + (db ? 1 : 0)) * sizeof(float), &p));
    float *ws = (float *)p, *dbpart = db ? ws + (size_t)chunks * K * CRS : nullptr;
    const auto kernel =
        relu_y ? bwd_weight_smalln_kernel<KT, CRS_MAX, true> : bwd_weight_smalln_kernel<KT, CRS_MAX, false>;
    kernel<<<dim3((unsigned)chunks, (unsigned)groups), 256, 0, stream()>>>(
        x, dy, relu_y, K, s->C, s->H, s->W, s->stride_h, s->stride_w, s->pad_h, s->pad_w, PQ, NPQ, CRS, s->R * s->S,
        s->S, FastDiv(PQ), FastDiv(s->Q), (int)chunk, ws, dbpart);
    ODL_CUDA_LAUNCH_CHECK("odl_conv2d_bwd_weight_smalln");
    OutRowMajor part;
    part.C = ws;
    part.ldc = CRS;
    part.zstride = (int64_t)K * CRS;
    part.vec = false;
    OutRowMajor fin = part;
    fin.C = dw;
    fin.zstride = 0;
    ODL_CHECK(splitk_reduce(part, chunks, K, CRS, fin, epi_raw(), "odl_conv2d_bwd_weight_smalln_reduce"));
    if (!db) return ODL_OK;
    return splitk_reduce_vector(dbpart, chunks, K, db, "odl_conv2d_bias_grad_smalln_reduce");
}

/* ---- bias gradient: db[k] = sum over n < N, pq < PQ of dy[n, k, pq] ----
 * Pass 1: block (k, s) sums slice s of channel k's N*PQ values (a fixed split_plan of the count) in
 * double with block_sum's fixed tree; pass 2 adds each channel's slices in order. */
__global__ void bias_grad_partial_kernel(const float *__restrict__ dy, int K, int PQ, int NPQ, FastDiv fPQ, int64_t per,
                                         double *__restrict__ part, float *__restrict__ db) {
    __shared__ double sh[32];
    const int k = blockIdx.x, s = blockIdx.y;
    const int64_t begin = (int64_t)s * per, end = min((int64_t)NPQ, begin + per);
    double acc = 0.0;
    for (int64_t j = begin + threadIdx.x; j < end; j += blockDim.x) {
        int img, pq;
        fPQ.divmod((int)j, img, pq);
        acc += (double)dy[((int64_t)img * K + k) * PQ + pq];
    }
    acc = block_sum(acc, sh);
    if (threadIdx.x == 0) {
        if (gridDim.y == 1) db[k] = (float)acc;
        else part[(int64_t)k * gridDim.y + s] = acc;
    }
}

__global__ void bias_grad_final_kernel(const double *__restrict__ part, int K, int parts, float *__restrict__ db) {
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= K) return;
    double acc = 0.0;
    for (int s = 0; s < parts; s++) acc += part[(int64_t)k * parts + s];
    db[k] = (float)acc;
}

odl_status conv_bias_grad(const odl_conv2d_shape *s, const float *dy, float *db) {
    const int K = s->K, PQ = s->P * s->Q, NPQ = s->N * s->P * s->Q;
    if (K <= 0) return ODL_OK;
    const Split sp = split_plan(NPQ, 16384, 256);
    double *part = nullptr;
    if (sp.parts > 1) {
        void *p = nullptr;
        ODL_CHECK(workspace((size_t)K * sp.parts * sizeof(double), &p));
        part = (double *)p;
    }
    bias_grad_partial_kernel<<<dim3((unsigned)K, (unsigned)sp.parts), kThreads, 0, stream()>>>(
        dy, K, PQ, NPQ, FastDiv(PQ > 0 ? PQ : 1), sp.per, part, db);
    ODL_CUDA_LAUNCH_CHECK("odl_conv2d_bias_grad");
    if (sp.parts > 1) {
        bias_grad_final_kernel<<<(unsigned)cdiv(K, 128), 128, 0, stream()>>>(part, K, sp.parts, db);
        ODL_CUDA_LAUNCH_CHECK("odl_conv2d_bias_grad_final");
    }
    return ODL_OK;
}

static odl_status conv_bwd_data(const odl_conv2d_shape *s, const float *dy, const float *w, const float *relu_x,
                                float *dx) {
    ODL_CHECK(conv_check_sizes(s, "conv2d_bwd_data"));
    const int M = s->C, N = s->N * s->H * s->W, Kd = s->K * s->R * s->S;
    if (M <= 0 || N <= 0) return ODL_OK;
    const Plan pl = plan_for(M, N, Kd, true, true, false);
    float *wt = nullptr, *ws = nullptr;
    ODL_CHECK(conv_workspace2((size_t)s->K * s->C * s->R * s->S, pl.splits > 1 ? (size_t)pl.splits * M * N : 0, &wt, &ws));
    ODL_CHECK(conv_transpose_weights(s, w, wt));
    ODL_CONV_DISPATCH(bwd_data_cfg, pl.cfg, s, dy, wt, relu_x, dx, pl, ws)
}

static odl_status bwd_weight_smalln_any(const odl_conv2d_shape *s, const float *x, const float *dy,
                                        const float *relu_y, float *dw, float *db) {
    const int crs = s->C * s->R * s->S;
    if (crs <= 4) return bwd_weight_smalln<4>(s, x, dy, relu_y, dw, db);
    if (crs <= 9) return bwd_weight_smalln<9>(s, x, dy, relu_y, dw, db);
    return bwd_weight_smalln<16>(s, x, dy, relu_y, dw, db);
}

static odl_status conv_bwd_weight(const odl_conv2d_shape *s, const float *x, const float *dy, float *dw, float *db) {
    ODL_CHECK(conv_check_sizes(s, "conv2d_bwd_weight"));
    const int M = s->K, N = s->C * s->R * s->S, Kd = s->N * s->P * s->Q;
    if (M > 0 && N > 0 && N <= 16) {
        /* the bias gradient from the kernel's own reads of dy (ODL_CONV_WGRAD_BIAS: MNIST conv1's 44 MB pass) */
        float *dbk = db && odl_env_bool(ODL_ENV_CONV_WGRAD_BIAS) ? db : nullptr;
        ODL_CHECK(bwd_weight_smalln_any(s, x, dy, nullptr, dw, dbk));
        if (dbk) return ODL_OK;
    } else if (M > 0 && N > 0) {
        /* up to 256 k slices: enough blocks to fill every resident slot (64 x 288 x 346112 of the MNIST
         * conv2 at batch 512 had 64 slices = 192 blocks of 4 warps, 1-2 per multiprocessor) */
        const Plan pl = plan_for(M, N, Kd, true, false, false, 256);
        /* the bias gradient from the A loader's reads of dy (ODL_CONV_WGRAD_BIAS_FMA: conv2's 75 MB pass in fp32) */
        float *dbk = db && odl_env_bool(ODL_ENV_CONV_WGRAD_BIAS) && odl_env_bool(ODL_ENV_CONV_WGRAD_BIAS_FMA) ? db
                                                                                                          : nullptr;
        float *ws = nullptr, *dbpart = nullptr;
        const size_t n_ws = pl.splits > 1 ? (size_t)pl.splits * M * N : 0, n_db = dbk ? (size_t)pl.splits * M : 0;
        if (n_ws || n_db) ODL_CHECK(conv_workspace2(n_ws, n_db, &ws, &dbpart));
        odl_status st;
        switch (pl.cfg) {
        case G128x128: st = bwd_weight_cfg<Cfg128x128>(s, x, dy, dw, dbk, pl, ws, dbpart); break;
        case G64x128: st = bwd_weight_cfg<Cfg64x128>(s, x, dy, dw, dbk, pl, ws, dbpart); break;
        case G64x64: st = bwd_weight_cfg<Cfg64x64>(s, x, dy, dw, dbk, pl, ws, dbpart); break;
        case G32x128: st = bwd_weight_cfg<Cfg32x128>(s, x, dy, dw, dbk, pl, ws, dbpart); break;
        default: st = bwd_weight_cfg<Cfg16x128>(s, x, dy, dw, dbk, pl, ws, dbpart); break;
        }
        ODL_CHECK(st);
        if (dbk) return ODL_OK;
    }
    if (db) ODL_CHECK(conv_bias_grad(s, dy, db));
    return ODL_OK;
}

#undef ODL_CONV_DISPATCH

} // namespace odlk

extern "C" odl_status odl_cuda_conv2d_bwd_data(const odl_conv2d_shape *s, const float *dy, const float *w,
                                               const float *relu_x, float *dx) {
    return odlk::conv_bwd_data(s, dy, w, relu_x, dx);
}

extern "C" odl_status odl_cuda_conv2d_bwd_weight(const odl_conv2d_shape *s, const float *x, const float *dy,
                                                 float *dw, float *db) {
    return odlk::conv_bwd_weight(s, x, dy, dw, db);
}

/* The ReLU's mask inside bwd_weight_smalln where conv_bwd_weight would take it (C*R*S <= 16, in every precision:
 * conv2d_bwd_weight_lowp gives the float32 entry's result there) with the bias gradient from its own reads
 * (ODL_CONV_WGRAD_BIAS, or no db): the same dw and db bits as the mask in place and then the entry of any
 * precision. Elsewhere *fused = 0 and nothing is done (ops.c masks dy and calls the entry). */
extern "C" odl_status odl_cuda_conv2d_bwd_weight_relu(const odl_conv2d_shape *s, const float *x, const float *dy,
                                                      const float *relu_y, float *dw, float *db, int *fused) {
    const int M = s->K, N = s->C * s->R * s->S;
    *fused = M > 0 && N > 0 && N <= 16 && (!db || odl_env_bool(ODL_ENV_CONV_WGRAD_BIAS));
    if (!*fused) return ODL_OK;
    ODL_CHECK(odlk::conv_check_sizes(s, "conv2d_bwd_weight_relu"));
    return odlk::bwd_weight_smalln_any(s, x, dy, relu_y, dw, db);
}
