/* CPU max-pooling over NCHW planes (PyTorch MaxPool2d, floor mode, dilation 1). Shapes: backend.h.
 *
 * Padding cells count as -inf, so they are never the maximum of a window that holds an input cell. The
 * maximum is the first in scan order (r, then s) among equal values; a NaN is taken as the maximum (the
 * last NaN of the window), exactly as PyTorch's CPU kernel (`if (val > max || isnan(val))`); a window of
 * only -inf values gives the index of its first input cell, also as PyTorch. argmax holds the flat index ih*W + iw inside the input
 * plane. A window with no input cell (impossible when pad <= kernel/2, which odl_maxpool2d_fwd checks)
 * gives -inf and the index of the clamped window start.
 * Threads: planes (n, c) are independent; backward scatters within a plane only.
 */
#include "kernels/cpu/cpu.h"

#include <math.h>
#include <string.h>

typedef struct pool_job {
    const odl_pool2d_shape *s;
    const float *x, *dy, *relu_y; /* relu_y: bwd only, NULL or the forward's y (odl/backend.h maxpool2d_bwd) */
    float *y, *dx;
    int32_t *argmax;
    const int32_t *argmax_in;
} pool_job;

/* The common 2x2 window with stride 2 and no padding: the same comparisons in the same order as the
 * general loop (starting from the first cell is equivalent to starting from -inf with that cell next). */
static void fwd_plane_2x2s2(const odl_pool2d_shape *s, const float *x, float *y, int32_t *am) {
    for (int p = 0; p < s->P; p++) {
        const float *r0 = x + (int64_t)(2 * p) * s->W, *r1 = r0 + s->W;
        const int32_t base = (int32_t)(2 * p * s->W);
        float *yr = y + (int64_t)p * s->Q;
        int32_t *ar = am ? am + (int64_t)p * s->Q : NULL;
        for (int q = 0; q < s->Q; q++) { /* branch-free selects (the data decide, not the predictor) */
            float m = r0[2 * q], v;
            int32_t idx = base + 2 * q;
            int t;
            v = r0[2 * q + 1];
            t = (v > m) | (v != v);
            m = t ? v : m;
            idx = t ? base + 2 * q + 1 : idx;
            v = r1[2 * q];
            t = (v > m) | (v != v);
            m = t ? v : m;
            idx = t ? base + s->W + 2 * q : idx;
            v = r1[2 * q + 1];
            t = (v > m) | (v != v);
            m = t ? v : m;
            idx = t ? base + s->W + 2 * q + 1 : idx;
            yr[q] = m;
            if (ar) ar[q] = idx;
        }
    }
}

static void fwd_plane(const odl_pool2d_shape *s, const float *x, float *y, int32_t *am) {
    for (int p = 0; p < s->P; p++) {
        int h0 = p * s->stride_h - s->pad_h, h1 = h0 + s->kh;
        if (h0 < 0) h0 = 0;
        if (h1 > s->H) h1 = s->H;
        for (int q = 0; q < s->Q; q++) {
            int w0 = q * s->stride_w - s->pad_w, w1 = w0 + s->kw;
            if (w0 < 0) w0 = 0;
            if (w1 > s->W) w1 = s->W;
            float m = -INFINITY;
            int32_t idx = (int32_t)(h0 < s->H ? h0 : s->H - 1) * s->W + (w0 < s->W ? w0 : s->W - 1);
            for (int ih = h0; ih < h1; ih++) {
                const float *row = x + (int64_t)ih * s->W;
                for (int iw = w0; iw < w1; iw++) {
                    float v = row[iw];
                    if (v > m || isnan(v)) {
                        m = v;
                        idx = (int32_t)(ih * s->W + iw);
                    }
                }
            }
            y[(int64_t)p * s->Q + q] = m;
            if (am) am[(int64_t)p * s->Q + q] = idx;
        }
    }
}

static odl_status fwd_planes(void *ctx, int chunk, int64_t begin, int64_t end) {
    (void)chunk;
    const pool_job *J = (const pool_job *)ctx;
    const odl_pool2d_shape *s = J->s;
    const int64_t HW = (int64_t)s->H * s->W, PQ = (int64_t)s->P * s->Q;
    const int fast = s->kh == 2 && s->kw == 2 && s->stride_h == 2 && s->stride_w == 2 && s->pad_h == 0 &&
                     s->pad_w == 0;
    for (int64_t pl = begin; pl < end; pl++) {
        int32_t *am = J->argmax ? J->argmax + pl * PQ : NULL;
        if (fast)
            fwd_plane_2x2s2(s, J->x + pl * HW, J->y + pl * PQ, am);
        else
            fwd_plane(s, J->x + pl * HW, J->y + pl * PQ, am);
    }
    return ODL_OK;
}

odl_status odl_cpu_maxpool2d_fwd(const odl_pool2d_shape *s, const float *x, float *y, int32_t *argmax) {
    pool_job J = {s, x, NULL, NULL, y, NULL, argmax, NULL};
    int64_t planes = (int64_t)s->N * s->C;
    int64_t work = (int64_t)s->P * s->Q * s->kh * s->kw;
    int64_t grain = work >= 8192 ? 1 : 8192 / (work > 0 ? work : 1);
    return odl_cpu_parallel_for(planes, grain, fwd_planes, &J, NULL);
}

static odl_status bwd_planes(void *ctx, int chunk, int64_t begin, int64_t end) {
    (void)chunk;
    const pool_job *J = (const pool_job *)ctx;
    const odl_pool2d_shape *s = J->s;
    const int64_t HW = (int64_t)s->H * s->W, PQ = (int64_t)s->P * s->Q;
    for (int64_t pl = begin; pl < end; pl++) {
        float *dx = J->dx + pl * HW;
        const float *dy = J->dy + pl * PQ;
        const int32_t *am = J->argmax_in + pl * PQ;
        const float *ry = J->relu_y ? J->relu_y + pl * PQ : NULL;
        memset(dx, 0, (size_t)HW * sizeof(float));
        for (int64_t i = 0; i < PQ; i++) {
            int32_t k = am[i];
            if (k >= 0 && k < HW && !(ry && ry[i] <= 0.0f)) dx[k] += dy[i]; /* as act_bwd's ReLU: x <= 0 stops */
        }
    }
    return ODL_OK;
}

odl_status odl_cpu_maxpool2d_bwd(const odl_pool2d_shape *s, const float *dy, const int32_t *argmax, const float *relu_y,
                                 float *dx) {
    pool_job J = {s, NULL, dy, relu_y, NULL, dx, NULL, argmax};
    int64_t planes = (int64_t)s->N * s->C;
    int64_t work = (int64_t)s->H * s->W + (int64_t)s->P * s->Q;
    int64_t grain = work >= 16384 ? 1 : 16384 / (work > 0 ? work : 1);
    return odl_cpu_parallel_for(planes, grain, bwd_planes, &J, NULL);
}
