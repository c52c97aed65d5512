/* CPU float16 NHWC inference kernels (odl/backend.h, "float16 NHWC inference"): the readable reference of
 * conv2d_f16, maxpool2d_f16, upsample2x_f16, copy_f16 and nchw_f32_to_nhwc_f16.
 *
 * Halves are only storage: every value is converted to float32 exactly (odl/half.h), computed on in
 * float32 and rounded to half once when stored. Max-pool, upsample and copy move half bits unchanged.
 *
 * conv2d_f16, for output pixel (n, p, q) and channel k:
 *   acc = sum over (r, s, c) of float(x[n, p*sh - ph + r, q*sw - pw + s, c]) * float(w[k, r, s, c])
 *         (0 for taps in the padding), as 8 interleaved float32 partial sums over the contiguous
 *         patch index i = (r*S + s)*C + c (lane i % 8), combined as ((l0 + l1) + (l2 + l3)) + ((l4 + l5) +
 *         (l6 + l7)); R*S*C is a multiple of 8 because C is;
 *   v = acc (+ bias[k]); v = act(v) (odl_cpu_act1); v += float(residual[n, p, q, k]) when given;
 *   y = half(v), or v itself when y_f32.
 * The weights are converted to float once per call (the calling thread's ODL_SCRATCH_CONV buffer, read
 * by all threads); each thread gathers the patches of two output pixels at a time into its own
 * ODL_SCRATCH_MISC buffer and computes 2 pixels x 4 output channels per pass over the patch, which reuses
 * each loaded weight and patch value. The sum for one output element does not depend on that blocking
 * nor on which thread computes it, so results are bitwise independent of the thread count.
 * Each output element is read (residual) and written (y) by one thread only, and the residual of an
 * element is read before that element of y is written, so residual may be y itself (in place).
 *
 * Threads: every kernel splits output pixels (conv, max-pool, copy, the layout conversion) or input
 * pixel rows (upsample) into contiguous ranges.
 */
#include "kernels/cpu/cpu.h"

#include <string.h>

#include "odl/half.h"

/* Work per chunk of a parallel loop, in multiply-adds or element moves. */
#define F16_GRAIN_WORK 32768

static int64_t grain_for(int64_t per_item) {
    return per_item >= F16_GRAIN_WORK ? 1 : F16_GRAIN_WORK / (per_item > 0 ? per_item : 1);
}

/* ================================================================ conv2d_f16 */

/* Output pixels per pass and output channels per pass of the micro-kernel. */
#define CONV_MP 2
#define CONV_MK 4

typedef struct conv_f16_job {
    const odl_conv2d_f16_args *a;
    const float *wf; /* [K, R*S*C] float32 */
    int64_t rsc;
} conv_f16_job;

/* out[p][k] = dot(x[p], w[k]) over n (a multiple of 8) for 2 patches and 4 weight rows, each as 8 lane
 * sums combined in the fixed order of the file comment. */
ODL_CPU_CLONES static void dot_2x4(int64_t n, const float *restrict x0, const float *restrict x1,
                                   const float *restrict w0, const float *restrict w1, const float *restrict w2,
                                   const float *restrict w3, float out[CONV_MP][CONV_MK]) {
    float acc[CONV_MP][CONV_MK][8];
    for (int p = 0; p < CONV_MP; p++)
        for (int k = 0; k < CONV_MK; k++)
            for (int j = 0; j < 8; j++) acc[p][k][j] = 0.0f;
    for (int64_t i = 0; i < n; i += 8) {
        for (int j = 0; j < 8; j++) {
            const float a0 = x0[i + j], a1 = x1[i + j];
            const float b0 = w0[i + j], b1 = w1[i + j], b2 = w2[i + j], b3 = w3[i + j];
            acc[0][0][j] += a0 * b0;
            acc[0][1][j] += a0 * b1;
            acc[0][2][j] += a0 * b2;
            acc[0][3][j] += a0 * b3;
            acc[1][0][j] += a1 * b0;
            acc[1][1][j] += a1 * b1;
            acc[1][2][j] += a1 * b2;
            acc[1][3][j] += a1 * b3;
        }
    }
    for (int p = 0; p < CONV_MP; p++)
        for (int k = 0; k < CONV_MK; k++) {
            const float *l = acc[p][k];
            out[p][k] = ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
        }
}

/* The float32 patch of output pixel j = (n*P + p)*Q + q: patch[(r*S + s)*C + c], zeros in the padding. */
static void gather_patch(const odl_conv2d_f16_args *a, int64_t j, float *restrict patch) {
    const odl_conv2d_shape *s = &a->s;
    const int q = (int)(j % s->Q), p = (int)((j / s->Q) % s->P), n = (int)(j / ((int64_t)s->P * s->Q));
    const int C = s->C;
    for (int r = 0; r < s->R; r++) {
        const int ih = p * s->stride_h - s->pad_h + r;
        for (int t = 0; t < s->S; t++) {
            const int iw = q * s->stride_w - s->pad_w + t;
            float *d = patch + ((int64_t)r * s->S + t) * C;
            if (ih < 0 || ih >= s->H || iw < 0 || iw >= s->W) {
                memset(d, 0, (size_t)C * sizeof(float));
                continue;
            }
            const odl_half *src = a->x + (((int64_t)n * s->H + ih) * s->W + iw) * a->ldx;
            odl_halfs_to_floats(src, d, (size_t)C);
        }
    }
}

/* Epilogue and store of output element (pixel j, channel k). */
static inline void conv_store(const odl_conv2d_f16_args *a, int64_t j, int k, float acc) {
    float v = acc;
    if (a->bias) v += a->bias[k];
    v = odl_cpu_act1(a->act, v);
    if (a->residual) v += odl_half_to_float(a->residual[j * a->ldr + k]);
    if (a->y_f32)
        ((float *)a->y)[j * a->ldy + k] = v;
    else
        ((odl_half *)a->y)[j * a->ldy + k] = odl_float_to_half(v);
}

static odl_status conv_f16_chunk(void *ctx, int chunk, int64_t begin, int64_t end) {
    (void)chunk;
    const conv_f16_job *J = (const conv_f16_job *)ctx;
    const odl_conv2d_f16_args *a = J->a;
    const int64_t rsc = J->rsc;
    const int K = a->s.K;
    float *patch;
    ODL_CHECK(odl_cpu_scratch(ODL_SCRATCH_MISC, (size_t)(CONV_MP * rsc), &patch));
    for (int64_t j0 = begin; j0 < end; j0 += CONV_MP) {
        const int np = end - j0 < CONV_MP ? (int)(end - j0) : CONV_MP;
        for (int p = 0; p < np; p++) gather_patch(a, j0 + p, patch + p * rsc);
        const float *x1 = np > 1 ? patch + rsc : patch; /* a missing pixel repeats the first; not stored */
        for (int k0 = 0; k0 < K; k0 += CONV_MK) {
            const int nk = K - k0 < CONV_MK ? K - k0 : CONV_MK;
            const float *wr[CONV_MK];
            for (int k = 0; k < CONV_MK; k++) wr[k] = J->wf + (int64_t)(k0 + (k < nk ? k : 0)) * rsc;
            float out[CONV_MP][CONV_MK];
            dot_2x4(rsc, patch, x1, wr[0], wr[1], wr[2], wr[3], out);
            for (int p = 0; p < np; p++)
                for (int k = 0; k < nk; k++) conv_store(a, j0 + p, k0 + k, out[p][k]);
        }
    }
    return ODL_OK;
}

odl_status odl_cpu_conv2d_f16(const odl_conv2d_f16_args *a) {
    const odl_conv2d_shape *s = &a->s;
    const int64_t rsc = (int64_t)s->R * s->S * s->C, pixels = (int64_t)s->N * s->P * s->Q;
    float *wf;
    ODL_CHECK(odl_cpu_scratch(ODL_SCRATCH_CONV, (size_t)(s->K * rsc), &wf));
    odl_halfs_to_floats(a->w, wf, (size_t)(s->K * rsc));
    conv_f16_job J = {a, wf, rsc};
    return odl_cpu_parallel_for(pixels, grain_for((int64_t)s->K * rsc), conv_f16_chunk, &J, NULL);
}

/* ================================================================ maxpool2d_f16 */

typedef struct pool_f16_job {
    const odl_pool2d_shape *s;
    const odl_half *x;
    int64_t ldx;
    odl_half *y;
    int64_t ldy;
} pool_f16_job;

/* Output pixels [begin, end): per channel the first maximum in scan order (NaN wins and stays), as the
 * float32 max-pool of pool.c; its half bits are copied, which is exact. */
static odl_status pool_f16_chunk(void *ctx, int chunk, int64_t begin, int64_t end) {
    (void)chunk;
    const pool_f16_job *J = (const pool_f16_job *)ctx;
    const odl_pool2d_shape *s = J->s;
    for (int64_t j = begin; j < end; j++) {
        const int q = (int)(j % s->Q), p = (int)((j / s->Q) % s->P), n = (int)(j / ((int64_t)s->P * s->Q));
        int h0 = p * s->stride_h - s->pad_h, h1 = h0 + s->kh, w0 = q * s->stride_w - s->pad_w, w1 = w0 + s->kw;
        if (h0 < 0) h0 = 0;
        if (h1 > s->H) h1 = s->H;
        if (w0 < 0) w0 = 0;
        if (w1 > s->W) w1 = s->W;
        const odl_half *xn = J->x + (int64_t)n * s->H * s->W * J->ldx;
        odl_half *y = J->y + j * J->ldy;
        for (int c = 0; c < s->C; c++) {
            float m = -INFINITY;
            odl_half mb = 0xFC00u; /* -inf: a window entirely in the padding */
            for (int ih = h0; ih < h1; ih++)
                for (int iw = w0; iw < w1; iw++) {
                    const odl_half b = xn[((int64_t)ih * s->W + iw) * J->ldx + c];
                    const float v = odl_half_to_float(b);
                    if (v > m || isnan(v)) {
                        m = v;
                        mb = b;
                    }
                }
            y[c] = mb;
        }
    }
    return ODL_OK;
}

odl_status odl_cpu_maxpool2d_f16(const odl_pool2d_shape *s, const odl_half *x, int64_t ldx, odl_half *y,
                                 int64_t ldy) {
    pool_f16_job J = {s, x, ldx, y, ldy};
    const int64_t pixels = (int64_t)s->N * s->P * s->Q;
    return odl_cpu_parallel_for(pixels, grain_for((int64_t)s->C * s->kh * s->kw), pool_f16_chunk, &J, NULL);
}

/* ================================================================ upsample2x_f16, copy_f16 */

typedef struct move_f16_job {
    int H, W, C;
    const odl_half *x;
    int64_t ldx;
    odl_half *y;
    int64_t ldy;
} move_f16_job;

/* Input rows [begin, end) of index n*H + h: each pixel goes to the 2x2 block of output pixels. */
static odl_status up_f16_chunk(void *ctx, int chunk, int64_t begin, int64_t end) {
    (void)chunk;
    const move_f16_job *J = (const move_f16_job *)ctx;
    const size_t bytes = (size_t)J->C * sizeof(odl_half);
    const int64_t W2 = 2 * (int64_t)J->W;
    for (int64_t row = begin; row < end; row++) { /* row = n*H + h; output rows 2*row and 2*row + 1 */
        const odl_half *xr = J->x + row * J->W * J->ldx;
        odl_half *y0 = J->y + (2 * row) * W2 * J->ldy, *y1 = y0 + W2 * J->ldy;
        for (int64_t w = 0; w < J->W; w++) {
            const odl_half *src = xr + w * J->ldx;
            memcpy(y0 + (2 * w) * J->ldy, src, bytes);
            memcpy(y0 + (2 * w + 1) * J->ldy, src, bytes);
            memcpy(y1 + (2 * w) * J->ldy, src, bytes);
            memcpy(y1 + (2 * w + 1) * J->ldy, src, bytes);
        }
    }
    return ODL_OK;
}

odl_status odl_cpu_upsample2x_f16(int N, int H, int W, int C, const odl_half *x, int64_t ldx, odl_half *y,
                                  int64_t ldy) {
    move_f16_job J = {H, W, C, x, ldx, y, ldy};
    return odl_cpu_parallel_for((int64_t)N * H, grain_for(4 * (int64_t)W * C), up_f16_chunk, &J, NULL);
}

static odl_status copy_f16_chunk(void *ctx, int chunk, int64_t begin, int64_t end) {
    (void)chunk;
    const move_f16_job *J = (const move_f16_job *)ctx;
    const size_t bytes = (size_t)J->C * sizeof(odl_half);
    for (int64_t i = begin; i < end; i++) memcpy(J->y + i * J->ldy, J->x + i * J->ldx, bytes);
    return ODL_OK;
}

odl_status odl_cpu_copy_f16(int64_t pixels, int C, const odl_half *x, int64_t ldx, odl_half *y, int64_t ldy) {
    move_f16_job J = {0, 0, C, x, ldx, y, ldy};
    return odl_cpu_parallel_for(pixels, grain_for(C), copy_f16_chunk, &J, NULL);
}

/* ================================================================ nchw_f32_to_nhwc_f16 */

typedef struct layout_f16_job {
    int C, H, W, b, C_pad;
    const float *x;
    odl_half *y;
} layout_f16_job;

/* Output pixels [begin, end) of index (n*(H/b) + h)*(W/b) + w. */
static odl_status layout_f16_chunk(void *ctx, int chunk, int64_t begin, int64_t end) {
    (void)chunk;
    const layout_f16_job *J = (const layout_f16_job *)ctx;
    const int b = J->b, Ho = J->H / b, Wo = J->W / b;
    const int64_t HW = (int64_t)J->H * J->W;
    for (int64_t i = begin; i < end; i++) {
        const int64_t n = i / ((int64_t)Ho * Wo), hw = i % ((int64_t)Ho * Wo);
        const int h = (int)(hw / Wo), w = (int)(hw % Wo);
        odl_half *y = J->y + i * J->C_pad;
        int o = 0;
        for (int di = 0; di < b; di++)
            for (int dj = 0; dj < b; dj++)
                for (int c = 0; c < J->C; c++)
                    y[o++] = odl_float_to_half(J->x[(n * J->C + c) * HW + (int64_t)(h * b + di) * J->W + (w * b + dj)]);
        for (; o < J->C_pad; o++) y[o] = 0;
    }
    return ODL_OK;
}

odl_status odl_cpu_nchw_f32_to_nhwc_f16(int N, int C, int H, int W, const float *x, int block, int C_pad,
                                       odl_half *y) {
    layout_f16_job J = {C, H, W, block, C_pad, x, y};
    return odl_cpu_parallel_for((int64_t)N * (H / block) * (W / block), grain_for(C_pad), layout_f16_chunk, &J, NULL);
}
