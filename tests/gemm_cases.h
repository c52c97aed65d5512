/* The GEMM cases of test_ops (float32 through odl_gemm and the op table's gemm) and test_gemm_tc (the op
 * table's gemm_lowp, TF32 / BF16 inputs): one table, so a shape added for one backend path is checked on
 * the other too. Odd shapes, every trans_a / trans_b, alpha and beta (0 included), bias per column or per
 * row, residual, each activation, padded leading dimensions, misaligned operands, and the shapes that take
 * the CUDA kernels' 128 x 128 tile, 64 x 64 tile and split-K (MNIST fc1 and its gradients). */
#ifndef ODL_TEST_GEMM_CASES_H
#define ODL_TEST_GEMM_CASES_H

#include <stdint.h>

#include "odl/backend.h"

typedef struct gemm_case {
    int M, N, K, ta, tb;
    float alpha, beta;
    int bias; /* 0 none, 1 per column [N], 2 per row [M] (op table only) */
    int res;
    odl_act act;
    int direct; /* test_ops: call the op table's gemm, not odl_gemm (needed for pad and a bias per row);
                   test_gemm_tc always calls the op table */
    int pad;    /* extra leading-dimension columns (op table only) */
    int shift;  /* test_gemm_tc: operands start `shift` floats into their allocation (misaligned) */
} gemm_case;

static const gemm_case GEMM_CASES[] = {
    {1, 1, 1, 0, 0, 1.f, 0.f, 0, 0, ODL_ACT_NONE, 0, 0, 0},
    {3, 17, 65, 0, 0, 1.f, 0.f, 1, 0, ODL_ACT_NONE, 0, 0, 0},
    {17, 3, 65, 1, 0, .5f, .25f, 1, 1, ODL_ACT_RELU, 0, 0, 0},
    {65, 33, 17, 0, 1, -1.5f, 1.f, 0, 1, ODL_ACT_SILU, 0, 0, 0},
    {127, 129, 65, 1, 1, 1.f, 0.f, 1, 0, ODL_ACT_SIGMOID, 0, 0, 0},
    {129, 127, 1, 0, 0, 2.f, 0.f, 0, 0, ODL_ACT_NONE, 0, 0, 0},
    {65, 17, 4099, 0, 1, 1.f, 0.f, 1, 0, ODL_ACT_NONE, 0, 0, 0},
    {1, 127, 4099, 1, 0, 1.f, .5f, 0, 0, ODL_ACT_RELU, 0, 0, 0},
    {64, 64, 64, 1, 1, 1.f, 1.f, 1, 1, ODL_ACT_SILU, 0, 0, 0},
    {128, 129, 127, 0, 0, 1.f, 0.f, 0, 0, ODL_ACT_NONE, 0, 0, 0},
    {33, 65, 17, 1, 0, 1.f, .5f, 2, 1, ODL_ACT_SILU, 1, 5, 1},
    {17, 3, 129, 0, 1, .75f, 0.f, 2, 0, ODL_ACT_RELU, 1, 3, 0},
    {1, 1, 4099, 1, 1, 1.f, 0.f, 2, 1, ODL_ACT_NONE, 1, 1, 0},
    {129, 65, 127, 0, 0, 1.f, 0.f, 1, 0, ODL_ACT_SIGMOID, 1, 4, 0},
    {3, 129, 17, 1, 1, -1.f, 2.f, 1, 1, ODL_ACT_RELU, 1, 2, 3},
    {257, 255, 513, 0, 1, 1.f, 0.f, 1, 0, ODL_ACT_SILU, 0, 0, 0},
    {100, 80, 60, 0, 0, 0.f, .5f, 1, 1, ODL_ACT_RELU, 0, 0, 0},       /* alpha 0 */
    {64, 128, 9216, 0, 1, 1.f, 0.f, 1, 0, ODL_ACT_RELU, 0, 0, 0},     /* MNIST fc1 forward, batch 64: split-K */
    {128, 9216, 64, 1, 0, 1.f, 0.f, 0, 0, ODL_ACT_NONE, 0, 0, 0},     /* its weight gradient */
    {64, 9216, 128, 0, 0, 1.f, 0.f, 0, 0, ODL_ACT_NONE, 0, 0, 0},     /* its data gradient */
    {1601, 2600, 37, 0, 0, 1.f, 0.f, 1, 1, ODL_ACT_NONE, 0, 0, 0},    /* 128 x 128 tiles on CUDA, ragged edges */
    {1539, 2817, 45, 1, 1, 1.f, .5f, 2, 0, ODL_ACT_RELU, 1, 1, 2},    /* 128 x 128, transposed, unaligned */
    {1537, 1541, 67, 0, 0, 1.f, 0.f, 1, 1, ODL_ACT_NONE, 0, 0, 0},    /* 64 x 64 tiles, no split */
    {300, 200, 2053, 1, 0, 1.f, 0.f, 0, 0, ODL_ACT_NONE, 0, 0, 0},    /* split-K, transposed A */
};
#define N_GEMM_CASES ((int)(sizeof GEMM_CASES / sizeof GEMM_CASES[0]))

/* The stored shapes of case c: op(A) is M x K, op(B) K x N, C M x N, each row-major with its leading
 * dimension; pad widens them differently so that a mixed-up ld shows. */
typedef struct gemm_dims {
    int64_t ra, ca, rb, cb; /* rows and columns of A and B as stored */
    int64_t lda, ldb, ldc;
} gemm_dims;
static inline gemm_dims gemm_case_dims(const gemm_case *c) {
    gemm_dims d;
    d.ra = c->ta ? c->K : c->M;
    d.ca = c->ta ? c->M : c->K;
    d.rb = c->tb ? c->N : c->K;
    d.cb = c->tb ? c->K : c->N;
    d.lda = d.ca + c->pad;
    d.ldb = d.cb + (c->pad ? c->pad + 1 : 0);
    d.ldc = c->N + (c->pad ? c->pad + 2 : 0);
    return d;
}

#endif
