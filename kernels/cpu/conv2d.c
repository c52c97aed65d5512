/* CPU 2-D convolution (dilation 1, groups 1), forward and both backward passes, by unfolding each image
 * (im2col, as Caffe and darknet do) and calling the CPU GEMM (gemm.c). Shapes and formulas: backend.h.
 *
 * For image n, with col = im2col(x_n) of shape [C*R*S, P*Q] (row (c, r, s), column (p, q) holds
 * x_n[c, p*stride_h - pad_h + r, q*stride_w - pad_w + s], 0 outside the image):
 *   forward      y_n[K, PQ]    = act(w[K, CRS] col + bias) + residual_n      (epilogue fused in the GEMM)
 *   bwd_data     col           = w^T dy_n[K, PQ];  dx_n = col2im(col)          (scatter-add, fixed order)
 *   bwd_weight   dw[K, CRS]   += dy_n col^T, images in order 0..N-1;  db[k] = sum over n, p, q of dy
 * The P*Q columns are processed in blocks of COL_BLOCK so that the unfolded buffer stays bounded for
 * large images. A 1x1 convolution with stride 1 and no padding uses x_n itself as col.
 *
 * Threads: forward and bwd_data give whole images to threads when there are at least as many images as
 * threads (each thread unfolds into its own scratch buffer), otherwise they go image by image with the
 * GEMM and the unfolding split between threads. bwd_weight sums over images, so it always goes image by
 * image in order and splits each GEMM. Either way the float operations done for each output element do
 * not depend on the number of threads, so results are bitwise reproducible.
 */
#include "kernels/cpu/cpu.h"

#include <string.h>

/* Columns (output pixels) of the unfolded matrix handled per GEMM. */
#define COL_BLOCK 4096

static int is_pointwise(const odl_conv2d_shape *s) {
    return s->R == 1 && s->S == 1 && s->stride_h == 1 && s->stride_w == 1 && s->pad_h == 0 && s->pad_w == 0;
}

/* Range of q in [0, Q) for which iw = q*stride - pad + s lies in [0, W): [*lo, *hi). */
static void valid_q(const odl_conv2d_shape *sh, int s, int *lo, int *hi) {
    int a = sh->pad_w - s; /* need q*stride >= a */
    int l = a <= 0 ? 0 : (a + sh->stride_w - 1) / sh->stride_w;
    int b = sh->W - 1 + sh->pad_w - s; /* need q*stride <= b */
    int h = b < 0 ? 0 : b / sh->stride_w + 1;
    if (h > sh->Q) h = sh->Q;
    if (l > h) l = h;
    *lo = l;
    *hi = h;
}

/* col[(c*R + r)*S + s][j - j0] for channels [c0, c1) and output pixels j in [j0, j1) of one image. */
static void im2col_block(const odl_conv2d_shape *sh, const float *x, int c0, int c1, int64_t j0, int64_t j1,
                         float *col) {
    const int64_t nb = j1 - j0, HW = (int64_t)sh->H * sh->W;
    const int p_first = (int)(j0 / sh->Q), p_last = (int)((j1 - 1) / sh->Q);
    const int sw = sh->stride_w;
    for (int c = c0; c < c1; c++) {
        const float *xc = x + (int64_t)c * HW;
        for (int r = 0; r < sh->R; r++) {
            for (int s = 0; s < sh->S; s++) {
                const int64_t row = ((int64_t)c * sh->R + r) * sh->S + s;
                int qlo, qhi;
                valid_q(sh, s, &qlo, &qhi);
                for (int p = p_first; p <= p_last; p++) {
                    const int64_t rowj = (int64_t)p * sh->Q;
                    const int qa = j0 > rowj ? (int)(j0 - rowj) : 0;
                    const int qb = j1 < rowj + sh->Q ? (int)(j1 - rowj) : sh->Q;
                    float *d = col + row * nb + (rowj + qa - j0); /* d[q - qa] is column (p, q) */
                    const int ih = p * sh->stride_h - sh->pad_h + r;
                    if (ih < 0 || ih >= sh->H) {
                        for (int q = qa; q < qb; q++) d[q - qa] = 0.0f;
                        continue;
                    }
                    int l = qlo > qa ? qlo : qa, h = qhi < qb ? qhi : qb;
                    if (l > h) l = h;
                    for (int q = qa; q < l; q++) d[q - qa] = 0.0f;
                    if (h > l) {
                        /* first valid input column: iw = l*sw - pad_w + s >= 0 */
                        const float *src = xc + (int64_t)ih * sh->W + ((int64_t)l * sw - sh->pad_w + s);
                        if (sw == 1)
                            memcpy(d + (l - qa), src, (size_t)(h - l) * sizeof(float));
                        else
                            for (int q = l; q < h; q++) d[q - qa] = src[(int64_t)(q - l) * sw];
                    }
                    for (int q = h; q < qb; q++) d[q - qa] = 0.0f;
                }
            }
        }
    }
}

/* dx[c, ih, iw] += col[(c*R + r)*S + s][j - j0] for channels [c0, c1), pixels [j0, j1); loop order
 * c, r, s, p, q (fixed, hence deterministic). */
static void col2im_block(const odl_conv2d_shape *sh, const float *col, int c0, int c1, int64_t j0, int64_t j1,
                         float *dx) {
    const int64_t nb = j1 - j0, HW = (int64_t)sh->H * sh->W;
    const int p_first = (int)(j0 / sh->Q), p_last = (int)((j1 - 1) / sh->Q);
    const int sw = sh->stride_w;
    for (int c = c0; c < c1; c++) {
        float *xc = dx + (int64_t)c * HW;
        for (int r = 0; r < sh->R; r++) {
            for (int s = 0; s < sh->S; s++) {
                const int64_t row = ((int64_t)c * sh->R + r) * sh->S + s;
                int qlo, qhi;
                valid_q(sh, s, &qlo, &qhi);
                for (int p = p_first; p <= p_last; p++) {
                    const int ih = p * sh->stride_h - sh->pad_h + r;
                    if (ih < 0 || ih >= sh->H) continue;
                    const int64_t rowj = (int64_t)p * sh->Q;
                    const int qa = j0 > rowj ? (int)(j0 - rowj) : 0;
                    const int qb = j1 < rowj + sh->Q ? (int)(j1 - rowj) : sh->Q;
                    const int l = qlo > qa ? qlo : qa, h = qhi < qb ? qhi : qb;
                    if (h <= l) continue;
                    const float *src = col + row * nb + (rowj + l - j0);
                    float *d = xc + (int64_t)ih * sh->W + ((int64_t)l * sw - sh->pad_w + s);
                    if (sw == 1)
                        for (int q = 0; q < h - l; q++) d[q] += src[q];
                    else
                        for (int q = 0; q < h - l; q++) d[(int64_t)q * sw] += src[q];
                }
            }
        }
    }
}

/* ---- unfolding split over channels (used when images are not given to threads) ---- */
typedef struct unfold_job {
    const odl_conv2d_shape *sh;
    const float *in;
    float *out;
    int64_t j0, j1;
    int to_col; /* 1: im2col(in = x) -> out = col; 0: col2im(in = col) -> out = dx */
} unfold_job;

static odl_status unfold_chunk(void *ctx, int chunk, int64_t begin, int64_t end) {
    (void)chunk;
    const unfold_job *u = (const unfold_job *)ctx;
    if (u->to_col)
        im2col_block(u->sh, u->in, (int)begin, (int)end, u->j0, u->j1, u->out);
    else
        col2im_block(u->sh, u->in, (int)begin, (int)end, u->j0, u->j1, u->out);
    return ODL_OK;
}

static odl_status unfold(const odl_conv2d_shape *sh, const float *in, float *out, int64_t j0, int64_t j1,
                         int to_col) {
    unfold_job u = {sh, in, out, j0, j1, to_col};
    int64_t per_c = (int64_t)sh->R * sh->S * (j1 - j0);
    int64_t grain = per_c >= 16384 ? 1 : 16384 / (per_c > 0 ? per_c : 1);
    return odl_cpu_parallel_for(sh->C, grain, unfold_chunk, &u, NULL);
}

static int64_t col_block(const odl_conv2d_shape *s) {
    int64_t pq = (int64_t)s->P * s->Q;
    return pq < COL_BLOCK ? pq : COL_BLOCK;
}

/* ---- forward ---- */
typedef struct conv_job {
    const odl_conv2d_shape *s;
    const float *x, *w, *dy;
    const odl_epilogue *ep;
    float *y, *dx;
    const float *relu_x; /* bwd_data: NULL, or the input whose ReLU backward is fused (odl/backend.h) */
} conv_job;

static odl_status fwd_image(const conv_job *J, int64_t n) {
    const odl_conv2d_shape *s = J->s;
    const int64_t PQ = (int64_t)s->P * s->Q, CRS = (int64_t)s->C * s->R * s->S;
    const int64_t nbmax = col_block(s);
    const float *xn = J->x + n * (int64_t)s->C * s->H * s->W;
    float *yn = J->y + n * (int64_t)s->K * PQ;
    const float *rn = J->ep && J->ep->residual ? J->ep->residual + n * (int64_t)s->K * PQ : NULL;
    const int pw = is_pointwise(s);
    float *col = NULL;
    if (!pw) ODL_CHECK(odl_cpu_scratch(ODL_SCRATCH_CONV, (size_t)(CRS * nbmax), &col));
    for (int64_t j0 = 0; j0 < PQ; j0 += nbmax) {
        int64_t j1 = j0 + nbmax < PQ ? j0 + nbmax : PQ, nb = j1 - j0;
        odl_gemm_args g;
        memset(&g, 0, sizeof g);
        g.M = s->K;
        g.N = nb;
        g.K = CRS;
        g.alpha = 1.0f;
        g.A = J->w;
        g.lda = CRS;
        if (pw) {
            g.B = xn + j0;
            g.ldb = PQ;
        } else {
            ODL_CHECK(unfold(s, xn, col, j0, j1, 1));
            g.B = col;
            g.ldb = nb;
        }
        g.beta = 0.0f;
        g.C = yn + j0;
        g.ldc = PQ;
        if (J->ep) {
            g.ep.bias = J->ep->bias;
            g.ep.bias_per_row = 1; /* per output channel = per GEMM row */
            g.ep.residual = rn ? rn + j0 : NULL;
            g.ep.act = J->ep->act;
        }
        ODL_CHECK(odl_cpu_gemm(&g));
    }
    return ODL_OK;
}

static odl_status fwd_chunk(void *ctx, int chunk, int64_t begin, int64_t end) {
    (void)chunk;
    for (int64_t n = begin; n < end; n++) ODL_CHECK(fwd_image((const conv_job *)ctx, n));
    return ODL_OK;
}

odl_status odl_cpu_conv2d_fwd(const odl_conv2d_shape *s, const float *x, const float *w, const odl_epilogue *ep,
                              float *y) {
    conv_job J = {s, x, w, NULL, ep, y, NULL, NULL};
    if (s->N <= 0 || s->K <= 0 || s->P <= 0 || s->Q <= 0) return ODL_OK;
    if (s->N >= odl_cpu_num_threads()) return odl_cpu_parallel_for(s->N, 1, fwd_chunk, &J, NULL);
    return fwd_chunk(&J, 0, 0, s->N); /* one image at a time; the GEMM and unfolding use the threads */
}

/* ---- backward data ---- */
static odl_status bwd_data_image(const conv_job *J, int64_t n) {
    const odl_conv2d_shape *s = J->s;
    const int64_t PQ = (int64_t)s->P * s->Q, CRS = (int64_t)s->C * s->R * s->S, HW = (int64_t)s->H * s->W;
    const int64_t nbmax = col_block(s);
    const float *dyn = J->dy + n * (int64_t)s->K * PQ;
    float *dxn = J->dx + n * (int64_t)s->C * HW;
    odl_gemm_args g;
    memset(&g, 0, sizeof g);
    g.trans_a = 1; /* op(A) = w^T: [CRS, K] */
    g.M = CRS;
    g.K = s->K;
    g.alpha = 1.0f;
    g.A = J->w;
    g.lda = CRS;
    g.beta = 0.0f;
    if (is_pointwise(s)) { /* dx_n[C, HW] = w^T dy_n */
        g.N = PQ;
        g.B = dyn;
        g.ldb = PQ;
        g.C = dxn;
        g.ldc = PQ;
        return odl_cpu_gemm(&g);
    }
    float *col;
    ODL_CHECK(odl_cpu_scratch(ODL_SCRATCH_CONV, (size_t)(CRS * nbmax), &col));
    memset(dxn, 0, (size_t)(s->C * HW) * sizeof(float));
    for (int64_t j0 = 0; j0 < PQ; j0 += nbmax) {
        int64_t j1 = j0 + nbmax < PQ ? j0 + nbmax : PQ, nb = j1 - j0;
        g.N = nb;
        g.B = dyn + j0;
        g.ldb = PQ;
        g.C = col;
        g.ldc = nb;
        ODL_CHECK(odl_cpu_gemm(&g));
        ODL_CHECK(unfold(s, col, dxn, j0, j1, 0));
    }
    return ODL_OK;
}

/* Image n's dx = 0 where relu_x <= 0 (the ReLU backward's select, kernels/cpu/elementwise.c), while its
 * dx is still in cache. */
static void bwd_data_relu_image(const conv_job *J, int64_t n) {
    const int64_t CHW = (int64_t)J->s->C * J->s->H * J->s->W;
    const float *xn = J->relu_x + n * CHW;
    float *dxn = J->dx + n * CHW;
    for (int64_t i = 0; i < CHW; i++)
        if (xn[i] <= 0.0f) dxn[i] = 0.0f;
}

static odl_status bwd_data_chunk(void *ctx, int chunk, int64_t begin, int64_t end) {
    (void)chunk;
    const conv_job *J = (const conv_job *)ctx;
    for (int64_t n = begin; n < end; n++) {
        ODL_CHECK(bwd_data_image(J, n));
        if (J->relu_x) bwd_data_relu_image(J, n);
    }
    return ODL_OK;
}

odl_status odl_cpu_conv2d_bwd_data(const odl_conv2d_shape *s, const float *dy, const float *w, const float *relu_x,
                                   float *dx) {
    conv_job J = {s, NULL, w, dy, NULL, NULL, dx, relu_x};
    if (s->N <= 0 || s->C <= 0 || s->H <= 0 || s->W <= 0) return ODL_OK;
    if (s->K <= 0 || s->P <= 0 || s->Q <= 0) { /* no terms: 0, which the ReLU's select leaves 0 */
        memset(dx, 0, (size_t)s->N * s->C * s->H * s->W * sizeof(float));
        return ODL_OK;
    }
    if (s->N >= odl_cpu_num_threads()) return odl_cpu_parallel_for(s->N, 1, bwd_data_chunk, &J, NULL);
    return bwd_data_chunk(&J, 0, 0, s->N);
}

/* ---- backward weight ---- */
typedef struct db_job {
    const odl_conv2d_shape *s;
    const float *dy;
    float *db;
} db_job;

/* db[k] = sum over n of (sum over p, q of dy[n, k]) in double, images in order. */
static odl_status db_chunk(void *ctx, int chunk, int64_t begin, int64_t end) {
    (void)chunk;
    const db_job *J = (const db_job *)ctx;
    const int64_t PQ = (int64_t)J->s->P * J->s->Q;
    for (int64_t k = begin; k < end; k++) {
        double acc = 0.0;
        for (int64_t n = 0; n < J->s->N; n++) acc += odl_cpu_sum_f64(J->dy + (n * J->s->K + k) * PQ, PQ);
        J->db[k] = (float)acc;
    }
    return ODL_OK;
}

odl_status odl_cpu_conv2d_bias_grad(const odl_conv2d_shape *s, const float *dy, float *db) {
    if (s->K <= 0) return ODL_OK;
    db_job D = {s, dy, db};
    return odl_cpu_parallel_for(s->K, 1, db_chunk, &D, NULL);
}

odl_status odl_cpu_conv2d_bwd_weight(const odl_conv2d_shape *s, const float *x, const float *dy, float *dw,
                                     float *db) {
    const int64_t PQ = (int64_t)s->P * s->Q, CRS = (int64_t)s->C * s->R * s->S;
    const int64_t nbmax = col_block(s);
    if (s->K <= 0) return ODL_OK;
    if (db) ODL_CHECK(odl_cpu_conv2d_bias_grad(s, dy, db));
    if (CRS <= 0) return ODL_OK;
    if (s->N <= 0 || PQ <= 0) {
        memset(dw, 0, (size_t)(s->K * CRS) * sizeof(float));
        return ODL_OK;
    }
    const int pw = is_pointwise(s);
    float *col = NULL;
    if (!pw) ODL_CHECK(odl_cpu_scratch(ODL_SCRATCH_CONV, (size_t)(CRS * nbmax), &col));
    int first = 1;
    for (int64_t n = 0; n < s->N; n++) {
        const float *xn = x + n * (int64_t)s->C * s->H * s->W;
        const float *dyn = dy + n * (int64_t)s->K * PQ;
        for (int64_t j0 = 0; j0 < PQ; j0 += nbmax) {
            int64_t j1 = j0 + nbmax < PQ ? j0 + nbmax : PQ, nb = j1 - j0;
            odl_gemm_args g;
            memset(&g, 0, sizeof g);
            g.trans_b = 1; /* op(B) = col^T: [nb, CRS] */
            g.M = s->K;
            g.N = CRS;
            g.K = nb;
            g.alpha = 1.0f;
            g.A = dyn + j0;
            g.lda = PQ;
            if (pw) {
                g.B = xn + j0;
                g.ldb = PQ;
            } else {
                ODL_CHECK(unfold(s, xn, col, j0, j1, 1));
                g.B = col;
                g.ldb = nb;
            }
            g.beta = first ? 0.0f : 1.0f;
            g.C = dw;
            g.ldc = CRS;
            ODL_CHECK(odl_cpu_gemm(&g));
            first = 0;
        }
    }
    return ODL_OK;
}
