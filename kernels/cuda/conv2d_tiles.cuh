/* The implicit-GEMM tile loaders of the convolutions (conv2d.cu: FMA kernels of gemm_core.cuh;
 * conv2d_tc.cu: tensor-core kernels of gemm_mma.cuh). Each gathers a BK-deep slice of one operand of a
 * convolution's implicit GEMM from global memory into registers (`fetch`, zero outside the tensor) and
 * writes it to shared memory k-major (`stash`), rows ROWS + PAD floats apart: PAD 4 for the FMA kernels'
 * float4 fragment reads, PAD 8 for the tensor-core kernels' (their fragment reads t * LDS + g are then
 * conflict-free). The formulas of each operand are in conv2d.cu's file comment. Im2colTile and DyGatherTile
 * split each element's reduction row k into (c, r, s) by two FastDiv in every thread; GatherTableTile (at the
 * end, ODL_CONV_GATHER_TABLE) reads those of the block's rows from a table in shared memory that the block
 * writes once, for the FMA kernels' forward and stride-1 data gradient. */
#ifndef ODL_KERNELS_CUDA_CONV2D_TILES_CUH
#define ODL_KERNELS_CUDA_CONV2D_TILES_CUH

#include "gemm_core.cuh"
#include "mma_util.cuh"

namespace odlk {

/* Where element e of a thread's share of a BK x COLS gather tile lies, when consecutive threads take
 * consecutive columns (coalesced along the output's contiguous index): column and reduction row. */
template <int COLS, int BK, int THREADS>
struct ColMajorShare {
    static_assert(THREADS % COLS == 0 || COLS % THREADS == 0, "threads and columns must nest");
    static constexpr int ELEMS = COLS * BK / THREADS;
    static constexpr int NCOL = THREADS >= COLS ? 1 : COLS / THREADS; /* distinct columns per thread */
    __device__ __forceinline__ static int col(int e) {
        return THREADS >= COLS ? (int)threadIdx.x % COLS : (int)threadIdx.x + (e % NCOL) * THREADS;
    }
    __device__ __forceinline__ static int row(int e) {
        return THREADS >= COLS ? (int)threadIdx.x / COLS + e * (THREADS / COLS) : e / NCOL;
    }
};

/* Where element e lies when consecutive threads take consecutive reduction rows (coalesced along the
 * reduction index n*P*Q + p*Q + q of the weight gradient): one row per thread, ELEMS columns. */
template <int COLS, int BK, int THREADS>
struct RowMajorShare {
    static_assert(THREADS % BK == 0, "threads must cover the reduction rows");
    static constexpr int ELEMS = COLS * BK / THREADS;
    __device__ __forceinline__ static int row() { return (int)threadIdx.x % BK; }
    __device__ __forceinline__ static int col(int e) { return (int)threadIdx.x / BK + e * (THREADS / BK); }
};

/* ---- forward: B operand = im2col(x), element (k = c*RS + r*S + s, column n*PQ + p*Q + q) ----
 * (with ODL_CONV_GATHER_TABLE on, conv2d.cu gathers a K1 == false operand with GatherTableTile instead) */
template <int BN, int BK, int THREADS, bool K1, int PAD = 4>
struct Im2colTile {
    struct Params {
        const float *x;
        int C, H, W, sh, sw, ph, pw;
        int NPQ, CRS;
        FastDiv fPQ, fQ, fRS, fS;
    };
    using Share = ColMajorShare<BN, BK, THREADS>;
    static constexpr int ELEMS = Share::ELEMS, NCOL = Share::NCOL, LDS = BN + PAD;
    static constexpr int OUT = -(1 << 28); /* hb of a column outside the output: every h fails */

    const float *xb[NCOL]; /* image of the column (K1: its pixel) */
    int hb[NCOL], wb[NCOL]; /* top-left input row and column of the column's window */
    int H, W, HW, CRS, k0;
    FastDiv fRS, fS;
    float reg[ELEMS];

    __device__ __forceinline__ Im2colTile(const Params &pr, int n0, int kb)
        : H(pr.H), W(pr.W), HW(pr.H * pr.W), CRS(pr.CRS), k0(kb), fRS(pr.fRS), fS(pr.fS) {
#pragma unroll
        for (int c = 0; c < NCOL; c++) {
            const int col = n0 + Share::col(c);
            int img = 0, pq = 0, p = 0, q = 0;
            if (col < pr.NPQ) {
                pr.fPQ.divmod(col, img, pq);
                pr.fQ.divmod(pq, p, q);
            }
            const int64_t ibase = (int64_t)img * pr.C * HW;
            hb[c] = col < pr.NPQ ? p * pr.sh - pr.ph : OUT;
            wb[c] = q * pr.sw - pr.pw;
            xb[c] = pr.x + (K1 ? ibase + pq : ibase);
        }
    }

    __device__ __forceinline__ void fetch() {
#pragma unroll
        for (int e = 0; e < ELEMS; e++) {
            const int ci = e % NCOL;
            const int k = k0 + Share::row(e);
            if (K1) {
                const bool ok = k < CRS && hb[ci] >= 0;
                reg[e] = ok ? __ldg(xb[ci] + k * HW) : 0.0f;
            } else {
                int c, rs, r, s;
                fRS.divmod(k, c, rs);
                fS.divmod(rs, r, s);
                const int h = hb[ci] + r, w = wb[ci] + s;
                const bool ok = k < CRS && (unsigned)h < (unsigned)H && (unsigned)w < (unsigned)W;
                reg[e] = ok ? __ldg(xb[ci] + (c * HW + h * W + w)) : 0.0f;
            }
        }
        k0 += BK;
    }

    __device__ __forceinline__ void stash(float *s) const {
#pragma unroll
        for (int e = 0; e < ELEMS; e++) s[Share::row(e) * LDS + Share::col(e)] = reg[e];
    }
};

/* ---- bwd_data: B operand, element (kk = k*RS + r*S + s, column n*HW + h*W + w) =
 *      dy[n, k, (h+ph-r)/sh, (w+pw-s)/sw] when both divisions are exact and inside dy, else 0 ----
 * Every thread splits each row kk of its share into (k, r, s), two FastDiv per row, although the BK rows
 * of a slice are the same for the whole block: with M = C = 32 (MNIST conv2) a gathered element feeds only
 * 32 FMAs and this index arithmetic bounds the kernel. With ODL_CONV_GATHER_TABLE on, conv2d.cu gathers the
 * UNIT case with GatherTableTile instead (conv2d_tc.cu's strided data gradient keeps this tile). */
template <int BN, int BK, int THREADS, bool UNIT, int PAD = 4>
struct DyGatherTile {
    struct Params {
        const float *dy;
        int K, P, Q, sh, sw, ph, pw;
        int NHW, KRS;
        FastDiv fHW, fW, fRS, fS, fsh, fsw;
    };
    using Share = ColMajorShare<BN, BK, THREADS>;
    static constexpr int ELEMS = Share::ELEMS, NCOL = Share::NCOL, LDS = BN + PAD;
    static constexpr int OUT = -(1 << 28);

    const float *db[NCOL]; /* dy of the column's image */
    int hp[NCOL], wp[NCOL]; /* h + ph, w + pw of the column */
    int P, Q, PQ, KRS, sh, sw, k0;
    FastDiv fRS, fS, fsh, fsw;
    float reg[ELEMS];

    __device__ __forceinline__ DyGatherTile(const Params &pr, int n0, int kb)
        : P(pr.P), Q(pr.Q), PQ(pr.P * pr.Q), KRS(pr.KRS), sh(pr.sh), sw(pr.sw), k0(kb), fRS(pr.fRS), fS(pr.fS),
          fsh(pr.fsh), fsw(pr.fsw) {
#pragma unroll
        for (int c = 0; c < NCOL; c++) {
            const int col = n0 + Share::col(c);
            int img = 0, hw = 0, h = 0, w = 0;
            if (col < pr.NHW) {
                pr.fHW.divmod(col, img, hw);
                pr.fW.divmod(hw, h, w);
            }
            db[c] = pr.dy + (int64_t)img * pr.K * PQ;
            hp[c] = col < pr.NHW ? h + pr.ph : OUT;
            wp[c] = w + pr.pw;
        }
    }

    __device__ __forceinline__ void fetch() {
#pragma unroll
        for (int e = 0; e < ELEMS; e++) {
            const int ci = e % NCOL;
            const int kk = k0 + Share::row(e);
            int k, rs, r, s;
            fRS.divmod(kk, k, rs);
            fS.divmod(rs, r, s);
            const int th = hp[ci] - r, tw = wp[ci] - s;
            int p, q;
            bool ok;
            if (UNIT) {
                p = th;
                q = tw;
                ok = true;
            } else {
                ok = th >= 0 && tw >= 0;
                p = fsh.div(ok ? th : 0);
                q = fsw.div(ok ? tw : 0);
                ok = ok && p * sh == th && q * sw == tw;
            }
            ok = ok && kk < KRS && (unsigned)p < (unsigned)P && (unsigned)q < (unsigned)Q;
            reg[e] = ok ? __ldg(db[ci] + (k * PQ + p * Q + q)) : 0.0f;
        }
        k0 += BK;
    }

    __device__ __forceinline__ void stash(float *s) const {
#pragma unroll
        for (int e = 0; e < ELEMS; e++) s[Share::row(e) * LDS + Share::col(e)] = reg[e];
    }
};

/* ---- bwd_weight: A operand, element (m = output channel, j = n*PQ + pq) = dy[n, m, pq] ---- */
template <int BM, int BK, int THREADS, int PAD = 4>
struct DyRowsTile {
    struct Params {
        const float *dy;
        int K, PQ, NPQ;
        FastDiv fPQ;
    };
    using Share = RowMajorShare<BM, BK, THREADS>;
    static constexpr int ELEMS = Share::ELEMS, LDS = BM + PAD;

    const float *dy;
    int K, PQ, NPQ, m0, k0;
    FastDiv fPQ;
    float reg[ELEMS];

    __device__ __forceinline__ DyRowsTile(const Params &pr, int m0_, int kb)
        : dy(pr.dy), K(pr.K), PQ(pr.PQ), NPQ(pr.NPQ), m0(m0_), k0(kb), fPQ(pr.fPQ) {}

    __device__ __forceinline__ void fetch() {
        const int j = k0 + Share::row();
        int img, pq;
        fPQ.divmod(j < NPQ ? j : 0, img, pq);
        const float *base = dy + (int64_t)img * K * PQ + pq;
#pragma unroll
        for (int e = 0; e < ELEMS; e++) {
            const int m = m0 + Share::col(e);
            reg[e] = (j < NPQ && m < K) ? __ldg(base + (int64_t)m * PQ) : 0.0f;
        }
        k0 += BK;
    }

    __device__ __forceinline__ void stash(float *s) const {
#pragma unroll
        for (int e = 0; e < ELEMS; e++) s[Share::row() * LDS + Share::col(e)] = reg[e];
    }
};

/* DyRowsTile that also sums, per channel, the dy values it loads: the bias gradient db[k] = sum over j of
 * dy[k, j] from the weight gradient's own reads (ODL_CONV_WGRAD_BIAS_FMA). A thread keeps ELEMS sums (its
 * channels, its reduction row j % BK of every slice); finish() adds the BK threads of a channel (consecutive
 * lanes) with a fixed xor butterfly and the tiles of the first column (n0 == 0) write dbpart[z][k]: split z's
 * sum, added over the splits in order afterwards (deterministic; float32, as the wgmma kernel's). fetch is
 * called once per slice of the split's range (mainloop), so no value is summed twice. */
template <int BM, int BK, int THREADS, int PAD = 4>
struct DyRowsSumTile : DyRowsTile<BM, BK, THREADS, PAD> {
    using Base = DyRowsTile<BM, BK, THREADS, PAD>;
    using Share = typename Base::Share;
    static constexpr int ELEMS = Base::ELEMS;
    static_assert(BK <= 32 && (BK & (BK - 1)) == 0, "a channel's BK threads are lanes of one warp");
    struct Params {
        typename Base::Params base;
        float *dbpart; /* [splits][K] */
    };
    float *dbpart;
    float sum[ELEMS];

    __device__ __forceinline__ DyRowsSumTile(const Params &pr, int m0_, int kb) : Base(pr.base, m0_, kb),
                                                                                  dbpart(pr.dbpart) {
#pragma unroll
        for (int e = 0; e < ELEMS; e++) sum[e] = 0.0f;
    }

    __device__ __forceinline__ void fetch() {
        Base::fetch();
#pragma unroll
        for (int e = 0; e < ELEMS; e++) sum[e] += this->reg[e];
    }

    __device__ __forceinline__ void finish(int n0, int z) {
#pragma unroll
        for (int e = 0; e < ELEMS; e++) {
            float v = sum[e];
#pragma unroll
            for (int off = 1; off < BK; off <<= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
            const int m = this->m0 + Share::col(e);
            if (n0 == 0 && Share::row() == 0 && m < this->K) dbpart[(int64_t)z * this->K + m] = v;
        }
    }
};

/* ---- bwd_weight: B operand, element (column c*RS + r*S + s, j = n*PQ + p*Q + q) =
 *      x[n, c, p*sh-ph+r, q*sw-pw+s] (0 outside the image) ---- */
template <int BN, int BK, int THREADS, int PAD = 4>
struct XColsTile {
    struct Params {
        const float *x;
        int C, H, W, sh, sw, ph, pw;
        int CRS, NPQ;
        FastDiv fPQ, fQ, fRS, fS;
    };
    using Share = RowMajorShare<BN, BK, THREADS>;
    static constexpr int ELEMS = Share::ELEMS, LDS = BN + PAD;
    static constexpr int OUT = 1 << 28; /* r of a column outside dw: every h fails */

    const float *x;
    int coff[ELEMS], rr[ELEMS], ss[ELEMS]; /* c*HW + r*W + s, r, s of each column */
    int H, W, CHW, sh, sw, ph, pw, NPQ, k0;
    FastDiv fPQ, fQ;
    float reg[ELEMS];

    __device__ __forceinline__ XColsTile(const Params &pr, int n0, int kb)
        : x(pr.x), H(pr.H), W(pr.W), CHW(pr.C * pr.H * pr.W), sh(pr.sh), sw(pr.sw), ph(pr.ph), pw(pr.pw),
          NPQ(pr.NPQ), k0(kb), fPQ(pr.fPQ), fQ(pr.fQ) {
#pragma unroll
        for (int e = 0; e < ELEMS; e++) {
            const int col = n0 + Share::col(e);
            int c, rs, r, s;
            pr.fRS.divmod(col, c, rs);
            pr.fS.divmod(rs, r, s);
            coff[e] = c * H * W + r * W + s;
            rr[e] = col < pr.CRS ? r : OUT;
            ss[e] = s;
        }
    }

    __device__ __forceinline__ void fetch() {
        const int j = k0 + Share::row();
        int img, pq, p, q;
        fPQ.divmod(j < NPQ ? j : 0, img, pq);
        fQ.divmod(pq, p, q);
        const int h0 = p * sh - ph, w0 = q * sw - pw;
        const int64_t base = (int64_t)img * CHW + (int64_t)h0 * W + w0;
#pragma unroll
        for (int e = 0; e < ELEMS; e++) {
            const int h = h0 + rr[e], w = w0 + ss[e];
            const bool ok = j < NPQ && (unsigned)h < (unsigned)H && (unsigned)w < (unsigned)W;
            reg[e] = ok ? __ldg(x + (base + coff[e])) : 0.0f;
        }
        k0 += BK;
    }

    __device__ __forceinline__ void stash(float *s) const {
#pragma unroll
        for (int e = 0; e < ELEMS; e++) s[Share::row() * LDS + Share::col(e)] = reg[e];
    }
};

/* The gathered operand of GatherTc below, as its fields: shared with the Hopper kernels of conv2d_sm90.cu. */
struct ConvGatherParams {
    const float *src;
    int plane, Hs, Ws, img_stride; /* Hs*Ws, source rows and columns, Ch*Hs*Ws */
    int rows, cols;
    int mul_h, mul_w, add_h, add_w, sgn;
    FastDiv fPlane, fRow, fRS, fS;
};

/* Outside every bound check of a gathered element: the window row of a column past the operand, and the
 * shift of a row past it. Their sum stays negative, so an element that is both fails as well. */
constexpr int kGatherColOut = -(1 << 29), kGatherRowOut = 1 << 28;

/* Column col of g's operand (below): the source offset of its window origin, and the origin's row hb
 * (kGatherColOut past the columns) and column wb. */
__device__ __forceinline__ void conv_gather_col(const ConvGatherParams &g, int col, int &base, int &hb, int &wb) {
    int img = 0, rem = 0, a = 0, b = 0;
    if (col < g.cols) {
        g.fPlane.divmod(col, img, rem);
        g.fRow.divmod(rem, a, b);
    }
    hb = col < g.cols ? a * g.mul_h + g.add_h : kGatherColOut;
    wb = b * g.mul_w + g.add_w;
    base = col < g.cols ? img * g.img_stride + hb * g.Ws + wb : 0;
}
/* Row k of g's operand: the offset of its (c, r, s) from a column's base, and its window shift dr
 * (kGatherRowOut past the rows), ds. */
__device__ __forceinline__ void conv_gather_row(const ConvGatherParams &g, int k, int &off, int &dr, int &ds) {
    int c, rs, r, s;
    g.fRS.divmod(k, c, rs);
    g.fS.divmod(rs, r, s);
    dr = k < g.rows ? g.sgn * r : kGatherRowOut;
    ds = g.sgn * s;
    off = c * g.plane + g.sgn * (r * g.Ws + s);
}
/* Whether the element of a column (hb, wb) shifted by a row's (dr, ds) lies inside the source plane. */
__device__ __forceinline__ bool conv_gather_inside(const ConvGatherParams &g, int hb, int wb, int dr, int ds) {
    return (unsigned)(hb + dr) < (unsigned)g.Hs && (unsigned)(wb + ds) < (unsigned)g.Ws;
}

/* The weight gradient's operands (M = K, N = C*R*S, reduction N*P*Q): dy's rows for DyRowsTile (A) and x's
 * gathered columns for XColsTile (B), of any tile and padding (conv2d_bwd.cu's FMA kernels, conv2d_tc.cu's). */
template <class LA, class LB>
static inline void conv_wgrad_operands(const odl_conv2d_shape *s, const float *x, const float *dy,
                                       typename LA::Params *pa, typename LB::Params *pb) {
    const int CRS = s->C * s->R * s->S, NPQ = s->N * s->P * s->Q;
    const FastDiv fPQ(s->P * s->Q), fQ(s->Q), fRS(s->R * s->S), fS(s->S);
    *pa = {dy, s->K, s->P * s->Q, NPQ, fPQ};
    *pb = {x, s->C, s->H, s->W, s->stride_h, s->stride_w, s->pad_h, s->pad_w, CRS, NPQ, fPQ, fQ, fRS, fS};
}

/* The gathered operand of the forward: im2col(x), columns (n, p, q). */
static inline ConvGatherParams conv_fwd_gather(const odl_conv2d_shape *s, const float *x) {
    return {x, s->H * s->W, s->H, s->W, s->C * s->H * s->W, s->C * s->R * s->S, s->N * s->P * s->Q, s->stride_h,
            s->stride_w, -s->pad_h, -s->pad_w, 1, FastDiv(s->P * s->Q), FastDiv(s->Q), FastDiv(s->R * s->S),
            FastDiv(s->S)};
}

/* ... of the stride-1 data gradient: dy with the window mirrored, columns (n, h, w):
 * dx[c, (n,h,w)] = sum_(k,r,s) wt[c][k,r,s] * dy[n, k, h+ph-r, w+pw-s]. */
static inline ConvGatherParams conv_bwd_data_gather(const odl_conv2d_shape *s, const float *dy) {
    return {dy, s->P * s->Q, s->P, s->Q, s->K * s->P * s->Q, s->K * s->R * s->S, s->N * s->H * s->W, 1, 1, s->pad_h,
            s->pad_w, -1, FastDiv(s->H * s->W), FastDiv(s->W), FastDiv(s->R * s->S), FastDiv(s->S)};
}

/* ---- the gathered operand of the tensor-core kernels (conv2d_tc.cu): forward im2col(x), and dy of the
 * stride-1 bwd_data, which is the same gather with the window mirrored ----
 * Element (row k = c*RS + r*S + s, column j) of a [rows x cols] operand read from src [N][Ch][Hs][Ws]:
 *   column j -> (img, a, b) by the output plane (fPlane, fRow); hb = a * mul_h + add_h, wb likewise;
 *   value = src[img][c][hb + sgn*r][wb + sgn*s], zero outside the source plane or past the rows.
 *   forward:  src = x,  columns (n, p, q), hb = p*sh - ph, sgn = +1
 *   bwd_data: src = dy, columns (n, h, w), hb = h + ph,    sgn = -1 (stride 1)
 * Work split for few instructions per element: warp w owns rows RPT*w .. RPT*w + RPT-1 of the slice and
 * lane l the columns l, l + 32, ... (each load instruction of a warp covers 32 consecutive columns, and a
 * copy to shared memory 32 consecutive floats of one row). A row's (c, r, s) is two FastDiv per slice,
 * shared by the lane's BN/32 columns; a column's image base, hb and wb are set once. Per element: two adds,
 * two unsigned compares, one add and the load. Indices are 32-bit: the source must have fewer than 2^31
 * elements (the caller checks). */
template <int BN, int BK, int THREADS, int PAD = 8>
struct GatherTc {
    using Params = ConvGatherParams;
    static constexpr int WARPS = THREADS / 32;
    static constexpr int RPT = BK / WARPS;  /* rows per thread */
    static constexpr int CPT = BN / 32;     /* columns per thread */
    static constexpr int LDS = BN + PAD;
    static_assert(BK % WARPS == 0 && BN % 32 == 0, "warps must split the rows, lanes the columns");

    const Params g;
    int base[CPT], hb[CPT], wb[CPT];
    int k0;

    __device__ __forceinline__ GatherTc(const Params &pr, int n0, int kb) : g(pr), k0(kb) {
        const int lane = threadIdx.x % 32;
#pragma unroll
        for (int j = 0; j < CPT; j++) conv_gather_col(g, n0 + lane + 32 * j, base[j], hb[j], wb[j]);
    }

    /* The current slice straight into shared memory ([BK][LDS], k-major) by cp.async, zero-filled outside
     * the source, for the pipelined kernel of gemm_mma.cuh (which rounds the elements as it reads them);
     * then move to the next slice. */
    __device__ __forceinline__ void issue(float *sm) {
        const int lane = threadIdx.x % 32, r0 = (int)(threadIdx.x / 32) * RPT;
#pragma unroll
        for (int i = 0; i < RPT; i++) {
            int off, dr, ds;
            conv_gather_row(g, k0 + r0 + i, off, dr, ds);
            const uint32_t d = smem_u32(sm + (r0 + i) * LDS + lane);
#pragma unroll
            for (int j = 0; j < CPT; j++) {
                const bool ok = conv_gather_inside(g, hb[j], wb[j], dr, ds);
                cp_async4(d + 128 * j, ok ? g.src + (base[j] + off) : g.src, ok);
            }
        }
        k0 += BK;
    }
};

/* ---- the weight operand of the pipelined tensor-core kernels: A [rows][K] row-major (ld = K: w of the
 * forward, the transposed weights of bwd_data), slice (r, k) to shared memory [k][r] by 4-byte cp.async;
 * consecutive threads take consecutive k of a row (coalesced reads). ---- */
template <int ROWS, int BK, int THREADS, int PAD = 8>
struct WeightsTc {
    struct Params {
        const float *p;
        int rows, K;
    };
    static constexpr int ELEMS = ROWS * BK / THREADS, LDS = ROWS + PAD;
    static_assert((ROWS * BK) % THREADS == 0 && THREADS % BK == 0, "threads must split the slice by rows");
    const float *p;
    int rows, K, r0, k0;
    __device__ __forceinline__ WeightsTc(const Params &pr, int r0_, int kb) : p(pr.p), rows(pr.rows), K(pr.K), r0(r0_), k0(kb) {}
    __device__ __forceinline__ void issue(float *sm) {
        const int k = (int)threadIdx.x % BK, gk = k0 + k;
#pragma unroll
        for (int e = 0; e < ELEMS; e++) {
            const int r = (int)threadIdx.x / BK + e * (THREADS / BK), gr = r0 + r;
            const bool ok = gr < rows && gk < K;
            cp_async4(smem_u32(sm + k * LDS + r), ok ? p + ((int64_t)gr * K + gk) : p, ok);
        }
        k0 += BK;
    }
};

/* ---- the gathered operand of the FMA kernels from a table of its rows (ODL_CONV_GATHER_TABLE): GatherTc's
 * operand (forward im2col(x) at any stride, dy of the stride-1 bwd_data), loaded as Im2colTile and
 * DyGatherTile load theirs ----
 * Those two split each row k of a thread's share into (c, r, s) in every thread, two FastDiv per row and
 * thread, though a slice's BK rows are the same for the whole block. Here the block writes once, before its
 * main loop, one int4 per row of its reduction range [kb, kb + min(span, rows - kb)), padded to whole
 * slices: {c*plane + sgn*(r*Ws + s), dr, ds, 0} (conv_gather_row; rows past the operand or the range get
 * dr = kGatherRowOut and fail every bound check, so fetch has no row test). fetch() then reads one entry
 * per row of the thread's share (the lanes of a warp read the same entry: a broadcast) and per element adds
 * dr and ds to the column's hb and wb, compares both unsigned against the source plane, adds the entry's
 * offset to the column's pointer and loads under that predicate. The thread-to-element map is
 * ColMajorShare's, as theirs (coalesced along the columns), and so is stash.
 * The table lives in the kernel's dynamic shared memory, beside tiled_gemm_kernel's static stages:
 * table_bytes(span) of it, at most kGatherTableMax entries (conv2d.cu takes this loader only for reductions
 * of at most that many rows). A column's pointer src + img*img_stride + hb*Ws + wb is formed by integer
 * arithmetic: for a window that starts in the padding it lies before the image, and only the sums with the
 * offsets of in-bound rows are dereferenced. Row offsets are 32-bit (one image of the source is below 2^31
 * elements: conv_check_sizes), the image offset 64-bit, so the source itself may be larger. */
constexpr int kGatherTableMax = 1152;

template <int BN, int BK, int THREADS, int PAD = 4>
struct GatherTableTile {
    struct Params {
        ConvGatherParams g;
        int span; /* the reduction range of a block: the launch's k_chunk */
    };
    using Share = ColMajorShare<BN, BK, THREADS>;
    static constexpr int ELEMS = Share::ELEMS, NCOL = Share::NCOL, LDS = BN + PAD;

    /* Dynamic shared memory of a launch whose blocks cover `span` rows each. */
    static size_t table_bytes(int span) { return (size_t)((span + BK - 1) / BK * BK) * sizeof(int4); }

    const float *cp[NCOL]; /* the column's window origin in the source (see above; src past the columns) */
    int hb[NCOL], wb[NCOL]; /* its row (kGatherColOut past the columns) and column */
    int Hs, Ws, t0;         /* t0: the current slice's first entry */
    float reg[ELEMS];

    __device__ __forceinline__ static int4 *table() {
        extern __shared__ __align__(16) int4 conv_gather_table[];
        return conv_gather_table;
    }

    __device__ __forceinline__ GatherTableTile(const Params &pr, int n0, int kb) : Hs(pr.g.Hs), Ws(pr.g.Ws), t0(0) {
        const ConvGatherParams &g = pr.g;
#pragma unroll
        for (int c = 0; c < NCOL; c++) {
            const int col = n0 + Share::col(c);
            int base; /* 32-bit: unused here (the compiler drops it and shares the division by the plane) */
            conv_gather_col(g, col, base, hb[c], wb[c]);
            const int img = col < g.cols ? g.fPlane.div(col) : 0;
            const int64_t o = col < g.cols ? (int64_t)img * g.img_stride + (int64_t)hb[c] * g.Ws + wb[c] : 0;
            cp[c] = reinterpret_cast<const float *>(reinterpret_cast<uintptr_t>(g.src) +
                                                    (uintptr_t)(o * (int64_t)sizeof(float)));
        }
        const int n = min(pr.span, g.rows - kb), len = (n + BK - 1) / BK * BK;
        int4 *t = table();
        for (int i = (int)threadIdx.x; i < len; i += THREADS) {
            int off, dr, ds;
            conv_gather_row(g, kb + i, off, dr, ds);
            t[i] = make_int4(off, i < n ? dr : kGatherRowOut, ds, 0);
        }
        __syncthreads();
    }

    __device__ __forceinline__ void fetch() {
        const int4 *t = table() + t0;
#pragma unroll
        for (int e = 0; e < ELEMS; e++) {
            const int ci = e % NCOL;
            const int4 row = t[Share::row(e)];
            const bool ok = (unsigned)(hb[ci] + row.y) < (unsigned)Hs && (unsigned)(wb[ci] + row.z) < (unsigned)Ws;
            reg[e] = ok ? __ldg(cp[ci] + row.x) : 0.0f;
        }
        t0 += BK;
    }

    __device__ __forceinline__ void stash(float *s) const {
#pragma unroll
        for (int e = 0; e < ELEMS; e++) s[Share::row(e) * LDS + Share::col(e)] = reg[e];
    }
};

} // namespace odlk

#endif
