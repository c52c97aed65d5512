/* CPU reference of odl_backend.conv2d_{fwd,bwd_data,bwd_weight}_lowp (odl/backend.h, odl/precision.h):
 * the TF32 / BF16 convolutions as the tensor cores compute them, for the CPU backend and as the CUDA
 * kernels' twin (kernels/cuda/conv2d_tc.cu) in tests.
 *
 * Both operands of each product are rounded once, element by element, to the precision's format
 * (odl_round_mantissa: nearest even, as the CUDA kernels round) into copies; the float32 entries of
 * conv2d.c then compute with float32 accumulation and apply the epilogue. Products of rounded inputs are
 * exact in float32, so the GPU differs only in the order of the float32 sums. The bias gradient is the
 * float32 dy's (the rounded copy of dy feeds dw only), as on CUDA.
 */
#include <stdlib.h>

#include "kernels/cpu/cpu.h"

/* A rounded copy of n floats in *out (free it); ODL_E_NOMEM naming `what`. */
static odl_status rounded_copy(const float *src, int64_t n, odl_precision prec, const char *op, const char *what,
                               float **out) {
    const int keep = prec == ODL_PRECISION_TF32 ? 10 : 7;
    float *d = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    if (!d)
        return ODL_ERR(ODL_E_NOMEM, "%s (%s): rounded copy of %s (%lld floats)", op, odl_precision_name(prec), what,
                       (long long)n);
    odl_cpu_round_copy(src, 1, n, n, keep, d);
    *out = d;
    return ODL_OK;
}

static odl_status check_prec(odl_precision prec, const char *op) {
    if (prec != ODL_PRECISION_TF32 && prec != ODL_PRECISION_BF16)
        return ODL_ERR(ODL_E_INVAL, "%s: unknown precision %d", op, (int)prec);
    return ODL_OK;
}

static int64_t x_elems(const odl_conv2d_shape *s) { return (int64_t)s->N * s->C * s->H * s->W; }
static int64_t w_elems(const odl_conv2d_shape *s) { return (int64_t)s->K * s->C * s->R * s->S; }
static int64_t y_elems(const odl_conv2d_shape *s) { return (int64_t)s->N * s->K * s->P * s->Q; }

odl_status odl_cpu_conv2d_fwd_lowp(const odl_conv2d_shape *s, const float *x, const float *w, const odl_epilogue *ep,
                                   float *y, odl_precision prec) {
    static const char *op = "conv2d_fwd_lowp";
    if (prec == ODL_PRECISION_FP32) return odl_cpu_conv2d_fwd(s, x, w, ep, y);
    ODL_CHECK(check_prec(prec, op));
    float *xr = NULL, *wr = NULL;
    odl_status st = rounded_copy(x, x_elems(s), prec, op, "x", &xr);
    if (st == ODL_OK) st = rounded_copy(w, w_elems(s), prec, op, "w", &wr);
    if (st == ODL_OK) st = odl_cpu_conv2d_fwd(s, xr, wr, ep, y);
    free(xr);
    free(wr);
    return st;
}

odl_status odl_cpu_conv2d_bwd_data_lowp(const odl_conv2d_shape *s, const float *dy, const float *w,
                                        const float *relu_x, float *dx, odl_precision prec) {
    static const char *op = "conv2d_bwd_data_lowp";
    if (prec == ODL_PRECISION_FP32) return odl_cpu_conv2d_bwd_data(s, dy, w, relu_x, dx);
    ODL_CHECK(check_prec(prec, op));
    float *dyr = NULL, *wr = NULL;
    odl_status st = rounded_copy(dy, y_elems(s), prec, op, "dy", &dyr);
    if (st == ODL_OK) st = rounded_copy(w, w_elems(s), prec, op, "w", &wr);
    if (st == ODL_OK) st = odl_cpu_conv2d_bwd_data(s, dyr, wr, relu_x, dx);
    free(dyr);
    free(wr);
    return st;
}

odl_status odl_cpu_conv2d_bwd_weight_lowp(const odl_conv2d_shape *s, const float *x, const float *dy, float *dw,
                                          float *db, odl_precision prec) {
    static const char *op = "conv2d_bwd_weight_lowp";
    if (prec == ODL_PRECISION_FP32) return odl_cpu_conv2d_bwd_weight(s, x, dy, dw, db);
    ODL_CHECK(check_prec(prec, op));
    float *xr = NULL, *dyr = NULL;
    odl_status st = rounded_copy(x, x_elems(s), prec, op, "x", &xr);
    if (st == ODL_OK) st = rounded_copy(dy, y_elems(s), prec, op, "dy", &dyr);
    if (st == ODL_OK) st = odl_cpu_conv2d_bwd_weight(s, xr, dyr, dw, NULL);
    if (st == ODL_OK && db) st = odl_cpu_conv2d_bias_grad(s, dy, db);
    free(xr);
    free(dyr);
    return st;
}
