/* CPU GEMM with fused epilogue, the reference and CPU runtime of odl_backend.gemm (formula in backend.h):
 *   C[M,N] = act(alpha * op(A) op(B) + beta * C + bias) + residual      (row-major, BLAS sgemm semantics)
 *
 * Structure (Goto / BLIS, "Anatomy of High-Performance Matrix Multiplication", Goto & van de Geijn 2008):
 *   for jc over N in NC columns:
 *     for pc over K in KC:           pack op(B)[pc:+KC, jc:+NC] into NR-wide panels (L2/L3 resident)
 *       for ic over M in MC rows:    pack op(A)[ic:+MC, pc:+KC] into MR-tall panels (L2 resident)
 *         for jr, ir:                MR x NR micro-kernel over KC, result merged into C
 * Packing absorbs trans_a/trans_b and zero-pads edge panels, so the micro-kernel sees one layout and every
 * shape (edges, size-1 dimensions, K not a multiple of KC) takes the same path. KC depends on K only
 * (k_block: K <= 384 is one block). Each K block's tile is merged into C (alpha, beta); the epilogue
 * (bias, act, residual) is applied when the last K block of a tile is merged.
 *
 * The micro-kernel is plain C written so that gcc -O3 keeps the 4 x 8 accumulators in vector registers
 * (SSE2 baseline: 8 xmm registers; AVX2: 4 ymm). On x86-64 gcc/clang also emit an AVX2 clone of it (target_clones), chosen at
 * load time; it performs exactly the same float operations in the same order (no FMA: nothing enables
 * it, and ISO C mode compiles with -ffp-contract=off), so results are bitwise identical on either path.
 * Define ODL_CPU_NO_CLONES to build the baseline only (done automatically under ThreadSanitizer).
 *
 * Determinism: each element of C is a sum over K computed in KC blocks in increasing order, each block
 * accumulated in increasing k; work is split between threads by whole MR rows or NR columns only, which
 * does not change that order. Same inputs give bitwise the same C for any thread count.
 */
#include "kernels/cpu/cpu.h"

#include <string.h>

#define MR 4
#define NR 8
#define KC_MAX 384 /* K is cut into ceil(K / KC_MAX) blocks of equal size (multiple of 8) */
#define MC 128 /* multiple of MR */
#define NC 2048 /* multiple of NR */

/* Below this many multiply-adds a GEMM runs on the calling thread. */
#define GEMM_PARALLEL_MIN_MACS (1 << 20)

/* out[MR*NR] = sum_p a[p*MR + i] * b[p*NR + j], for packed panels of kc steps. */
ODL_CPU_CLONES static void gemm_micro(int64_t kc, const float *restrict a, const float *restrict b,
                                      float *restrict out) {
    float acc[MR][NR];
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NR; j++) acc[i][j] = 0.0f;
    for (int64_t p = 0; p < kc; p++) {
        const float *ap = a + p * MR;
        const float *bp = b + p * NR;
        for (int i = 0; i < MR; i++) {
            float ai = ap[i];
            for (int j = 0; j < NR; j++) acc[i][j] += ai * bp[j];
        }
    }
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NR; j++) out[i * NR + j] = acc[i][j];
}

/* Pack op(A)[i0:i0+mc, p0:p0+kc] into ceil(mc/MR) panels of [kc][MR], zero-padding the last panel. */
static void pack_a(const odl_gemm_args *g, int64_t i0, int64_t mc, int64_t p0, int64_t kc, float *restrict dst) {
    for (int64_t ir = 0; ir < mc; ir += MR) {
        int mr = (int)(mc - ir < MR ? mc - ir : MR);
        float *d = dst + ir * kc;
        if (!g->trans_a) { /* A is [M, lda]: element (i, p) at A[i*lda + p] */
            for (int i = 0; i < mr; i++) {
                const float *src = g->A + (i0 + ir + i) * g->lda + p0;
                for (int64_t p = 0; p < kc; p++) d[p * MR + i] = src[p];
            }
        } else { /* A is [K, lda]: element (i, p) at A[p*lda + i] */
            for (int64_t p = 0; p < kc; p++) {
                const float *src = g->A + (p0 + p) * g->lda + i0 + ir;
                for (int i = 0; i < mr; i++) d[p * MR + i] = src[i];
            }
        }
        if (mr < MR)
            for (int64_t p = 0; p < kc; p++)
                for (int i = mr; i < MR; i++) d[p * MR + i] = 0.0f;
    }
}

/* Pack op(B)[p0:p0+kc, j0:j0+nc] into ceil(nc/NR) panels of [kc][NR], zero-padding the last panel. */
static void pack_b(const odl_gemm_args *g, int64_t p0, int64_t kc, int64_t j0, int64_t nc, float *restrict dst) {
    for (int64_t jr = 0; jr < nc; jr += NR) {
        int nr = (int)(nc - jr < NR ? nc - jr : NR);
        float *d = dst + jr * kc;
        if (!g->trans_b) { /* B is [K, ldb]: element (p, j) at B[p*ldb + j] */
            if (nr == NR) {
                for (int64_t p = 0; p < kc; p++) {
                    const float *src = g->B + (p0 + p) * g->ldb + j0 + jr;
                    for (int j = 0; j < NR; j++) d[p * NR + j] = src[j];
                }
            } else {
                for (int64_t p = 0; p < kc; p++) {
                    const float *src = g->B + (p0 + p) * g->ldb + j0 + jr;
                    for (int j = 0; j < NR; j++) d[p * NR + j] = j < nr ? src[j] : 0.0f;
                }
            }
        } else { /* B is [N, ldb]: element (p, j) at B[j*ldb + p] */
            for (int j = 0; j < nr; j++) {
                const float *src = g->B + (j0 + jr + j) * g->ldb + p0;
                for (int64_t p = 0; p < kc; p++) d[p * NR + j] = src[p];
            }
            if (nr < NR)
                for (int64_t p = 0; p < kc; p++)
                    for (int j = nr; j < NR; j++) d[p * NR + j] = 0.0f;
        }
    }
}

/* The epilogue on one value that already holds alpha*op(A)op(B) + beta*C. */
static inline float epilogue1(const odl_gemm_args *g, int64_t i, int64_t j, float v) {
    const odl_epilogue *ep = &g->ep;
    if (ep->bias) v += ep->bias_per_row ? ep->bias[i] : ep->bias[j];
    v = odl_cpu_act1(ep->act, v);
    if (ep->residual) v += ep->residual[i * g->ldc + j];
    return v;
}

/* The epilogue on n values c[0..n) of row i starting at column j0, in place: bias, act, residual, in that
 * order (the same operations as epilogue1, written as loops the compiler vectorises). */
static void epilogue_row(const odl_gemm_args *g, int64_t i, int64_t j0, int n, float *restrict c) {
    const odl_epilogue *ep = &g->ep;
    if (ep->bias) {
        if (ep->bias_per_row) {
            const float b = ep->bias[i];
            for (int j = 0; j < n; j++) c[j] += b;
        } else {
            const float *restrict b = ep->bias + j0;
            for (int j = 0; j < n; j++) c[j] += b[j];
        }
    }
    switch (ep->act) {
    case ODL_ACT_RELU:
        for (int j = 0; j < n; j++) c[j] = odl_cpu_relu1(c[j]);
        break;
    case ODL_ACT_SILU:
        for (int j = 0; j < n; j++) c[j] = odl_cpu_silu1(c[j]);
        break;
    case ODL_ACT_SIGMOID:
        for (int j = 0; j < n; j++) c[j] = odl_cpu_sigmoid1(c[j]);
        break;
    default:
        break;
    }
    if (ep->residual) {
        const float *restrict r = ep->residual + i * g->ldc + j0;
        for (int j = 0; j < n; j++) c[j] += r[j];
    }
}

/* Merge an MR x NR accumulator tile (valid part mr x nr) at C[i0, j0]. first: the first K block
 * (C = alpha*acc + beta*C, C not read when beta == 0); otherwise C += alpha*acc. last: apply the epilogue. */
static void merge_tile(const odl_gemm_args *g, int64_t i0, int64_t j0, int mr, int nr, const float *acc, int first,
                       int last) {
    const float alpha = g->alpha, beta = g->beta;
    const int has_ep = g->ep.bias || g->ep.residual || g->ep.act != ODL_ACT_NONE;
    for (int i = 0; i < mr; i++) {
        float *restrict c = g->C + (i0 + i) * g->ldc + j0;
        const float *restrict a = acc + i * NR;
        if (nr == NR) { /* full tile: constant trip count */
            if (first && beta == 0.0f)
                for (int j = 0; j < NR; j++) c[j] = alpha * a[j];
            else if (first)
                for (int j = 0; j < NR; j++) c[j] = alpha * a[j] + beta * c[j];
            else
                for (int j = 0; j < NR; j++) c[j] = alpha * a[j] + c[j];
        } else {
            if (first && beta == 0.0f)
                for (int j = 0; j < nr; j++) c[j] = alpha * a[j];
            else if (first)
                for (int j = 0; j < nr; j++) c[j] = alpha * a[j] + beta * c[j];
            else
                for (int j = 0; j < nr; j++) c[j] = alpha * a[j] + c[j];
        }
        if (last && has_ep) epilogue_row(g, i0 + i, j0, nr, c);
    }
}

/* The K block size: depends on K only (never on the thread split), so that every element is summed in
 * the same order; K <= KC_MAX is one block, larger K is cut into near-equal blocks. */
static int64_t k_block(int64_t K) {
    int64_t nb = (K + KC_MAX - 1) / KC_MAX;
    int64_t kc = (K + nb - 1) / nb;
    kc = (kc + 7) & ~(int64_t)7;
    return kc < KC_MAX ? kc : KC_MAX;
}

/* C[m0:m1, n0:n1] on the calling thread. */
static odl_status gemm_block(const odl_gemm_args *g, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
    if (m1 <= m0 || n1 <= n0) return ODL_OK;
    const int64_t KC = k_block(g->K);
    int64_t ncols = n1 - n0 < NC ? n1 - n0 : NC;
    int64_t kmax = g->K < KC ? g->K : KC;
    int64_t mrows = m1 - m0 < MC ? m1 - m0 : MC;
    float *Ap, *Bp;
    ODL_CHECK(odl_cpu_scratch(ODL_SCRATCH_GEMM_A, (size_t)(((mrows + MR - 1) / MR) * MR * kmax), &Ap));
    ODL_CHECK(odl_cpu_scratch(ODL_SCRATCH_GEMM_B, (size_t)(((ncols + NR - 1) / NR) * NR * kmax), &Bp));
    float acc[MR * NR];

    for (int64_t jc = n0; jc < n1; jc += NC) {
        int64_t nc = n1 - jc < NC ? n1 - jc : NC;
        for (int64_t pc = 0; pc < g->K; pc += KC) {
            int64_t kc = g->K - pc < KC ? g->K - pc : KC;
            int first = pc == 0, last = pc + kc >= g->K;
            pack_b(g, pc, kc, jc, nc, Bp);
            for (int64_t ic = m0; ic < m1; ic += MC) {
                int64_t mc = m1 - ic < MC ? m1 - ic : MC;
                pack_a(g, ic, mc, pc, kc, Ap);
                for (int64_t jr = 0; jr < nc; jr += NR) {
                    int nr = (int)(nc - jr < NR ? nc - jr : NR);
                    for (int64_t ir = 0; ir < mc; ir += MR) {
                        int mr = (int)(mc - ir < MR ? mc - ir : MR);
                        gemm_micro(kc, Ap + ir * kc, Bp + jr * kc, acc);
                        merge_tile(g, ic + ir, jc + jr, mr, nr, acc, first, last);
                    }
                }
            }
        }
    }
    return ODL_OK;
}

/* K == 0 or alpha == 0: C = beta*C (0 when beta == 0, C unread), then the epilogue; A and B unread. */
static void gemm_scale_only(const odl_gemm_args *g) {
    for (int64_t i = 0; i < g->M; i++) {
        float *c = g->C + i * g->ldc;
        for (int64_t j = 0; j < g->N; j++) {
            float v = g->beta == 0.0f ? 0.0f : g->beta * c[j];
            c[j] = epilogue1(g, i, j, v);
        }
    }
}

typedef struct gemm_split {
    const odl_gemm_args *g;
    int split_m; /* 1: chunks are MR-row tiles; 0: NR-column tiles */
} gemm_split;

static odl_status gemm_chunk(void *ctx, int chunk, int64_t begin, int64_t end) {
    (void)chunk;
    const gemm_split *s = (const gemm_split *)ctx;
    const odl_gemm_args *g = s->g;
    if (s->split_m) {
        int64_t m1 = end * MR < g->M ? end * MR : g->M;
        return gemm_block(g, begin * MR, m1, 0, g->N);
    }
    int64_t n1 = end * NR < g->N ? end * NR : g->N;
    return gemm_block(g, 0, g->M, begin * NR, n1);
}

odl_status odl_cpu_gemm(const odl_gemm_args *g) {
    if (g->M <= 0 || g->N <= 0) return ODL_OK;
    if (g->K <= 0 || g->alpha == 0.0f) {
        gemm_scale_only(g);
        return ODL_OK;
    }
    int64_t mt = (g->M + MR - 1) / MR, nt = (g->N + NR - 1) / NR;
    int threads = odl_cpu_num_threads();
    double macs = (double)g->M * (double)g->N * (double)g->K;
    if (threads <= 1 || macs < GEMM_PARALLEL_MIN_MACS) return gemm_block(g, 0, g->M, 0, g->N);

    /* Splitting M makes every thread pack all of op(B) (K x N values), splitting N all of op(A) (M x K):
     * split the dimension that duplicates less, provided it has a tile for every thread. */
    gemm_split s = {g, 1};
    if (g->N > g->M) s.split_m = 0;
    if (s.split_m && mt < threads && nt > mt) s.split_m = 0;
    if (!s.split_m && nt < threads && mt > nt) s.split_m = 1;
    ODL_CHECK(odl_cpu_parallel_for(s.split_m ? mt : nt, 1, gemm_chunk, &s, NULL));
    return ODL_OK;
}
