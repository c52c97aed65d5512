/* CPU element-wise kernels: activations and their gradients, dropout, arithmetic, fill and reductions.
 * Formulas: backend.h. Activation formulas follow PyTorch's CPU kernels:
 *   relu' : dx = x <= 0 ? 0 : dy           (threshold_backward; a NaN input passes the gradient)
 *   silu' : s = 1/(1 + exp(-x)); dx = dy * s * (1 + x * (1 - s))       (silu_backward)
 *   sigmoid': dx = dy * (1 - y) * y, y the forward output (recomputed from x when y is NULL)
 * Dropout multiplies kept elements by scale = 1/(1 - p) computed once in float (PyTorch's fused and CPU
 * dropout both multiply by that scale rather than dividing each element).
 * Reductions accumulate in double. Element-wise loops are split between threads in contiguous chunks;
 * sum() adds fixed blocks of SUM_BLOCK elements, so its result does not depend on the thread count.
 */
#include "kernels/cpu/cpu.h"

#include <stdlib.h>
#include <string.h>

#include "odl/rng.h"

#define EW_GRAIN 32768
#define SUM_BLOCK 65536

double odl_cpu_sum_f64(const float *x, int64_t n) {
    double l[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) l[k] += (double)x[i + k];
    for (int k = 0; i < n; i++, k++) l[k] += (double)x[i];
    return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

/* ---- one generic job for the element-wise loops ---- */
typedef enum ew_kind {
    EW_ACT_FWD, EW_ACT_BWD, EW_DROPOUT, EW_ADD, EW_MUL, EW_SCALE, EW_AXPY, EW_FILL
} ew_kind;

typedef struct ew_job {
    ew_kind kind;
    odl_act act;
    const float *a, *b, *c;
    float *y;
    float alpha, p;
    uint64_t seed, offset;
} ew_job;

static void act_fwd_range(odl_act act, const float *x, float *y, int64_t b, int64_t e) {
    switch (act) {
    case ODL_ACT_RELU:
        for (int64_t i = b; i < e; i++) y[i] = odl_cpu_relu1(x[i]);
        break;
    case ODL_ACT_SILU:
        for (int64_t i = b; i < e; i++) y[i] = odl_cpu_silu1(x[i]);
        break;
    case ODL_ACT_SIGMOID:
        for (int64_t i = b; i < e; i++) y[i] = odl_cpu_sigmoid1(x[i]);
        break;
    default:
        if (y != x) memmove(y + b, x + b, (size_t)(e - b) * sizeof(float));
        break;
    }
}

static void act_bwd_range(odl_act act, const float *x, const float *y, const float *dy, float *dx, int64_t b,
                          int64_t e) {
    switch (act) {
    case ODL_ACT_RELU:
        for (int64_t i = b; i < e; i++) dx[i] = x[i] <= 0.0f ? 0.0f : dy[i];
        break;
    case ODL_ACT_SILU:
        for (int64_t i = b; i < e; i++) {
            float s = odl_cpu_sigmoid1(x[i]);
            dx[i] = dy[i] * s * (1.0f + x[i] * (1.0f - s));
        }
        break;
    case ODL_ACT_SIGMOID:
        if (y) {
            for (int64_t i = b; i < e; i++) dx[i] = dy[i] * (1.0f - y[i]) * y[i];
        } else {
            for (int64_t i = b; i < e; i++) {
                float s = odl_cpu_sigmoid1(x[i]);
                dx[i] = dy[i] * (1.0f - s) * s;
            }
        }
        break;
    default:
        if (dx != dy) memmove(dx + b, dy + b, (size_t)(e - b) * sizeof(float));
        break;
    }
}

/* Philox4x32-10 (odl/rng.h) for PHILOX_LANES consecutive counter blocks at once, written lane-wise so
 * that the compiler runs the lanes in vector registers; integer arithmetic, so bitwise the same as
 * odl_philox4x32_10. Writes the uniforms of elements 4*first .. 4*first + 4*PHILOX_LANES - 1:
 * u[4*l + w] = (word w of block first + l) >> 8, times 2^-24, as odl_philox_uniform. */
#define PHILOX_LANES 8
ODL_CPU_CLONES static void philox_uniforms(uint64_t first, uint64_t offset, uint64_t seed,
                                           float u[4 * PHILOX_LANES]) {
    uint32_t c0[PHILOX_LANES], c1[PHILOX_LANES], c2[PHILOX_LANES], c3[PHILOX_LANES];
    for (int l = 0; l < PHILOX_LANES; l++) {
        uint64_t blk = first + (uint64_t)l;
        c0[l] = (uint32_t)blk;
        c1[l] = (uint32_t)(blk >> 32);
        c2[l] = (uint32_t)offset;
        c3[l] = (uint32_t)(offset >> 32);
    }
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int r = 0; r < 10; r++) {
        for (int l = 0; l < PHILOX_LANES; l++) {
            uint64_t p0 = (uint64_t)0xD2511F53u * c0[l];
            uint64_t p1 = (uint64_t)0xCD9E8D57u * c2[l];
            uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1[l] ^ k0, n1 = (uint32_t)p1;
            uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3[l] ^ k1, n3 = (uint32_t)p0;
            c0[l] = n0;
            c1[l] = n1;
            c2[l] = n2;
            c3[l] = n3;
        }
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    for (int l = 0; l < PHILOX_LANES; l++) {
        u[4 * l + 0] = (float)(c0[l] >> 8) * (1.0f / 16777216.0f);
        u[4 * l + 1] = (float)(c1[l] >> 8) * (1.0f / 16777216.0f);
        u[4 * l + 2] = (float)(c2[l] >> 8) * (1.0f / 16777216.0f);
        u[4 * l + 3] = (float)(c3[l] >> 8) * (1.0f / 16777216.0f);
    }
}

/* y[k] = u[k] >= p ? x[k] * scale : 0 for one batch of n <= 4*PHILOX_LANES elements; the product is
 * computed for every element and selected through a bit mask, so there is no data-dependent branch and
 * the loop vectorises (a dropped inf or NaN still gives 0). x may equal y. */
static inline void dropout_select(int n, const float *u, float p, float scale, const float *x, float *y) {
    for (int k = 0; k < n; k++) {
        float v = x[k] * scale;
        uint32_t bits;
        memcpy(&bits, &v, sizeof bits);
        bits &= (uint32_t)0 - (uint32_t)(u[k] >= p);
        memcpy(&y[k], &bits, sizeof bits);
    }
}

/* y = keep ? x * scale : 0 with keep = uniform(seed, offset, i) >= p (odl/rng.h stream layout: block j
 * gives elements 4j..4j+3). */
ODL_CPU_CLONES static void dropout_range(float p, uint64_t seed, uint64_t offset, const float *x, float *y,
                                         int64_t b, int64_t e) {
    const float scale = 1.0f / (1.0f - p);
    const int64_t per = 4 * PHILOX_LANES;
    float u[4 * PHILOX_LANES];
    for (int64_t i0 = b & ~(int64_t)3; i0 < e; i0 += per) {
        philox_uniforms((uint64_t)i0 >> 2, offset, seed, u);
        int64_t lo = i0 < b ? b : i0, hi = i0 + per < e ? i0 + per : e;
        if (lo == i0 && hi == i0 + per)
            dropout_select(4 * PHILOX_LANES, u, p, scale, x + i0, y + i0);
        else
            dropout_select((int)(hi - lo), u + (lo - i0), p, scale, x + lo, y + lo);
    }
}

static odl_status ew_chunk(void *ctx, int chunk, int64_t b, int64_t e) {
    (void)chunk;
    const ew_job *J = (const ew_job *)ctx;
    float *y = J->y;
    switch (J->kind) {
    case EW_ACT_FWD: act_fwd_range(J->act, J->a, y, b, e); break;
    case EW_ACT_BWD: act_bwd_range(J->act, J->a, J->b, J->c, y, b, e); break;
    case EW_DROPOUT: dropout_range(J->p, J->seed, J->offset, J->a, y, b, e); break;
    case EW_ADD:
        for (int64_t i = b; i < e; i++) y[i] = J->a[i] + J->b[i];
        break;
    case EW_MUL:
        for (int64_t i = b; i < e; i++) y[i] = J->a[i] * J->b[i];
        break;
    case EW_SCALE:
        for (int64_t i = b; i < e; i++) y[i] = J->alpha * J->a[i];
        break;
    case EW_AXPY:
        for (int64_t i = b; i < e; i++) y[i] += J->alpha * J->a[i];
        break;
    case EW_FILL:
        for (int64_t i = b; i < e; i++) y[i] = J->alpha;
        break;
    }
    return ODL_OK;
}

static odl_status ew_run(ew_job *J, int64_t n, int64_t grain) {
    return odl_cpu_parallel_for(n, grain, ew_chunk, J, NULL);
}

odl_status odl_cpu_act_fwd(odl_act act, int64_t n, const float *x, float *y) {
    ew_job J = {EW_ACT_FWD, act, x, NULL, NULL, y, 0, 0, 0, 0};
    return ew_run(&J, n, act == ODL_ACT_RELU || act == ODL_ACT_NONE ? EW_GRAIN : EW_GRAIN / 8);
}

odl_status odl_cpu_act_bwd(odl_act act, int64_t n, const float *x, const float *y, const float *dy, float *dx) {
    ew_job J = {EW_ACT_BWD, act, x, y, dy, dx, 0, 0, 0, 0};
    return ew_run(&J, n, act == ODL_ACT_RELU || act == ODL_ACT_NONE ? EW_GRAIN : EW_GRAIN / 8);
}

odl_status odl_cpu_dropout_fwd(int64_t n, float p, uint64_t seed, uint64_t offset, const float *x, float *y) {
    ew_job J = {EW_DROPOUT, ODL_ACT_NONE, x, NULL, NULL, y, 0, p, seed, offset};
    return ew_run(&J, n, EW_GRAIN / 8);
}

/* Same mask as the forward pass: dx = keep ? dy * scale : 0. */
odl_status odl_cpu_dropout_bwd(int64_t n, float p, uint64_t seed, uint64_t offset, const float *dy, float *dx) {
    return odl_cpu_dropout_fwd(n, p, seed, offset, dy, dx);
}

odl_status odl_cpu_dropout_fwd_at(int64_t n, float p, uint64_t seed, const odl_step_scalars *s, uint64_t layer,
                                  const float *x, float *y) {
    return odl_cpu_dropout_fwd(n, p, seed, s->rng_offset + layer, x, y);
}

odl_status odl_cpu_dropout_bwd_at(int64_t n, float p, uint64_t seed, const odl_step_scalars *s, uint64_t layer,
                                  const float *dy, float *dx) {
    return odl_cpu_dropout_fwd(n, p, seed, s->rng_offset + layer, dy, dx);
}

odl_status odl_cpu_add(int64_t n, const float *a, const float *b, float *y) {
    ew_job J = {EW_ADD, ODL_ACT_NONE, a, b, NULL, y, 0, 0, 0, 0};
    return ew_run(&J, n, EW_GRAIN);
}

odl_status odl_cpu_mul(int64_t n, const float *a, const float *b, float *y) {
    ew_job J = {EW_MUL, ODL_ACT_NONE, a, b, NULL, y, 0, 0, 0, 0};
    return ew_run(&J, n, EW_GRAIN);
}

odl_status odl_cpu_scale(int64_t n, float alpha, const float *x, float *y) {
    ew_job J = {EW_SCALE, ODL_ACT_NONE, x, NULL, NULL, y, alpha, 0, 0, 0};
    return ew_run(&J, n, EW_GRAIN);
}

odl_status odl_cpu_axpy(int64_t n, float alpha, const float *x, float *y) {
    ew_job J = {EW_AXPY, ODL_ACT_NONE, x, NULL, NULL, y, alpha, 0, 0, 0};
    return ew_run(&J, n, EW_GRAIN);
}

odl_status odl_cpu_fill(int64_t n, float value, float *y) {
    ew_job J = {EW_FILL, ODL_ACT_NONE, NULL, NULL, NULL, y, value, 0, 0, 0};
    return ew_run(&J, n, EW_GRAIN);
}

/* ---- reductions ---- */
#define SUM_ROWS_COLS 256

typedef struct sum_rows_job {
    int64_t M, N;
    const float *x;
    float *y;
} sum_rows_job;

/* Column blocks [b, e) of SUM_ROWS_COLS columns; each column summed over rows in order, in double. */
static odl_status sum_rows_chunk(void *ctx, int chunk, int64_t b, int64_t e) {
    (void)chunk;
    const sum_rows_job *J = (const sum_rows_job *)ctx;
    double acc[SUM_ROWS_COLS];
    for (int64_t blk = b; blk < e; blk++) {
        int64_t j0 = blk * SUM_ROWS_COLS;
        int64_t nb = J->N - j0 < SUM_ROWS_COLS ? J->N - j0 : SUM_ROWS_COLS;
        for (int64_t j = 0; j < nb; j++) acc[j] = 0.0;
        for (int64_t m = 0; m < J->M; m++) {
            const float *row = J->x + m * J->N + j0;
            for (int64_t j = 0; j < nb; j++) acc[j] += (double)row[j];
        }
        for (int64_t j = 0; j < nb; j++) J->y[j0 + j] = (float)acc[j];
    }
    return ODL_OK;
}

odl_status odl_cpu_sum_rows(int64_t M, int64_t N, const float *x, float *y) {
    sum_rows_job J = {M, N, x, y};
    int64_t blocks = (N + SUM_ROWS_COLS - 1) / SUM_ROWS_COLS;
    int64_t per_block = M * SUM_ROWS_COLS;
    int64_t grain = per_block >= EW_GRAIN ? 1 : EW_GRAIN / (per_block > 0 ? per_block : 1);
    return odl_cpu_parallel_for(blocks, grain, sum_rows_chunk, &J, NULL);
}

typedef struct sum_job {
    const float *x;
    int64_t n;
    double *partial;
} sum_job;

static odl_status sum_chunk(void *ctx, int chunk, int64_t b, int64_t e) {
    (void)chunk;
    const sum_job *J = (const sum_job *)ctx;
    for (int64_t blk = b; blk < e; blk++) {
        int64_t i0 = blk * SUM_BLOCK;
        int64_t nb = J->n - i0 < SUM_BLOCK ? J->n - i0 : SUM_BLOCK;
        J->partial[blk] = odl_cpu_sum_f64(J->x + i0, nb);
    }
    return ODL_OK;
}

odl_status odl_cpu_sum(int64_t n, const float *x, float *out) {
    int64_t blocks = (n + SUM_BLOCK - 1) / SUM_BLOCK;
    if (blocks <= 1) {
        *out = (float)odl_cpu_sum_f64(x, n > 0 ? n : 0);
        return ODL_OK;
    }
    double *partial = (double *)malloc((size_t)blocks * sizeof(double));
    if (!partial) return ODL_ERR(ODL_E_NOMEM, "sum: cannot allocate %lld partial sums", (long long)blocks);
    sum_job J = {x, n, partial};
    odl_status st = odl_cpu_parallel_for(blocks, 1, sum_chunk, &J, NULL);
    if (st == ODL_OK) {
        double s = 0.0;
        for (int64_t b = 0; b < blocks; b++) s += partial[b];
        *out = (float)s;
    }
    free(partial);
    return st;
}
