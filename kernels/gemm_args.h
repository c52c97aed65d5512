/* Conversions between the two GEMM argument structs of odl/backend.h, shared by the CPU and CUDA
 * backends' gemm_typed and the CUDA tensor-core routing. Private to the kernels layer. */
#ifndef ODL_KERNELS_GEMM_ARGS_H
#define ODL_KERNELS_GEMM_ARGS_H

#include <string.h>

#include "odl/backend.h"

/* The raw product of t (alpha 1, beta 0, no epilogue: C = op(A) op(B)) on float32 operands A and B laid out
 * as t's (trans_a, trans_b, lda, ldb) into C [M, ldc]. */
static inline odl_gemm_args odl_gemm_raw_of_typed(const odl_gemm_typed_args *t, const float *A, const float *B,
                                                  float *C, int64_t ldc) {
    odl_gemm_args g;
    memset(&g, 0, sizeof g);
    g.trans_a = t->trans_a;
    g.trans_b = t->trans_b;
    g.M = t->M;
    g.N = t->N;
    g.K = t->K;
    g.alpha = 1.0f;
    g.A = A;
    g.lda = t->lda;
    g.B = B;
    g.ldb = t->ldb;
    g.C = C;
    g.ldc = ldc;
    return g;
}

/* g as a typed product: float32 operands (multiplied in TF32) and a float32 C, the same epilogue. */
static inline odl_gemm_typed_args odl_gemm_typed_of(const odl_gemm_args *g) {
    odl_gemm_typed_args t;
    memset(&t, 0, sizeof t);
    t.trans_a = g->trans_a;
    t.trans_b = g->trans_b;
    t.M = g->M;
    t.N = g->N;
    t.K = g->K;
    t.alpha = g->alpha;
    t.A = g->A;
    t.lda = g->lda;
    t.B = g->B;
    t.ldb = g->ldb;
    t.beta = g->beta;
    t.C = g->C;
    t.ldc = g->ldc;
    t.ab_type = ODL_F32;
    t.c_type = ODL_F32;
    t.ep = g->ep;
    return t;
}

#endif
