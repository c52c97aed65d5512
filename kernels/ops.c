/* Tensor-level operations (odl/ops.h): check every argument (NULL, dtype, device, shape), compute the
 * geometry, then call the op table of the tensors' device (odl_backend_for). Formulas and layouts are in
 * odl/backend.h. Every message starts with the public function's name and names the argument; shape
 * mismatches print the shape found and the shape expected (odl_tensor_check), or both tensors' shapes.
 */
#include "odl/ops.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "odl/backend.h"
#include "odl/tensor.h"

odl_status odl_tensor_fill(odl_tensor *t, float value) {
    if (!t || !t->data) return ODL_ERR(ODL_E_INVAL, "odl_tensor_fill: NULL tensor");
    if (t->dtype != ODL_F32) return ODL_ERR(ODL_E_INVAL, "odl_tensor_fill: %s tensor, need float32", odl_dtype_name(t->dtype));
    const odl_backend *be = odl_backend_for(t->device);
    if (!be) return ODL_ERR(ODL_E_NODEV, "no backend for %s", odl_device_name(t->device));
    ODL_CHECK(be->fill(odl_tensor_numel(t), value, (float *)t->data));
    return ODL_OK;
}

#define SHAPE_CAP 96

/* ---- argument checks ---- */

/* Non-NULL tensor with data, of `dtype`, on `dev`; any shape. */
static odl_status check_any(const char *op, const odl_tensor *t, const char *name, odl_dtype dtype, odl_device dev) {
    if (!t) return ODL_ERR(ODL_E_INVAL, "%s: %s is NULL", op, name);
    if (t->dtype != dtype)
        return ODL_ERR(ODL_E_INVAL, "%s: %s has dtype %s, expected %s", op, name, odl_dtype_name(t->dtype),
                       odl_dtype_name(dtype));
    if (!odl_device_eq(t->device, dev)) {
        char have[32], want[32];
        snprintf(have, sizeof have, "%s", odl_device_name(t->device));
        snprintf(want, sizeof want, "%s", odl_device_name(dev));
        return ODL_ERR(ODL_E_INVAL, "%s: %s is on %s but the other tensors of the call are on %s", op, name, have,
                       want);
    }
    if (!t->data && odl_tensor_numel(t) > 0) return ODL_ERR(ODL_E_INVAL, "%s: %s has no data", op, name);
    return ODL_OK;
}

/* odl_tensor_check with the operation's name (and, when given, a related tensor's shape) in front. */
static odl_status check_shape(const char *op, const odl_tensor *t, const char *name, odl_dtype dtype, odl_device dev,
                              int ndim, const int64_t *shape, const odl_tensor *ref, const char *ref_name) {
    odl_status st = check_any(op, t, name, dtype, dev);
    if (st != ODL_OK) return st;
    st = odl_tensor_check(t, name, dtype, dev, ndim, shape);
    if (st != ODL_OK) {
        if (ref) {
            char rs[SHAPE_CAP];
            odl_error_prefix("%s (with %s %s)", op, ref_name, odl_shape_str(ref, rs, sizeof rs));
        } else {
            odl_error_prefix("%s", op);
        }
    }
    return st;
}

/* Tensor of the same number of elements as ref (any shape), float32 on dev. */
static odl_status check_numel(const char *op, const odl_tensor *t, const char *name, odl_device dev,
                              const odl_tensor *ref, const char *ref_name) {
    ODL_CHECK(check_any(op, t, name, ODL_F32, dev));
    if (odl_tensor_numel(t) != odl_tensor_numel(ref)) {
        char a[SHAPE_CAP], b[SHAPE_CAP];
        return ODL_ERR(ODL_E_INVAL, "%s: %s %s has %lld elements but %s %s has %lld", op, name,
                       odl_shape_str(t, a, sizeof a), (long long)odl_tensor_numel(t), ref_name,
                       odl_shape_str(ref, b, sizeof b), (long long)odl_tensor_numel(ref));
    }
    return ODL_OK;
}

/* A float32 tensor holding exactly one element (shape [1], [] or [1, 1] ...). */
static odl_status check_scalar(const char *op, const odl_tensor *t, const char *name, odl_device dev) {
    ODL_CHECK(check_any(op, t, name, ODL_F32, dev));
    if (odl_tensor_numel(t) != 1) {
        char a[SHAPE_CAP];
        return ODL_ERR(ODL_E_INVAL, "%s: %s must hold one element ([1]), got %s", op, name,
                       odl_shape_str(t, a, sizeof a));
    }
    return ODL_OK;
}

static odl_status check_ndim(const char *op, const odl_tensor *t, const char *name, odl_dtype dtype, int ndim) {
    ODL_CHECK(check_any(op, t, name, dtype, t ? t->device : odl_cpu()));
    if (t->ndim != ndim) {
        char a[SHAPE_CAP];
        return ODL_ERR(ODL_E_INVAL, "%s: %s must be %d-D, got %s", op, name, ndim, odl_shape_str(t, a, sizeof a));
    }
    return ODL_OK;
}

/* Each of the given dimensions of t must fit the backend's int arguments. */
static odl_status check_int_dims(const char *op, const odl_tensor *t, const char *name) {
    for (int i = 0; i < t->ndim; i++) {
        if (t->shape[i] > INT_MAX) {
            char a[SHAPE_CAP];
            return ODL_ERR(ODL_E_INVAL, "%s: %s %s: dimension %d exceeds %d", op, name, odl_shape_str(t, a, sizeof a),
                           i, INT_MAX);
        }
    }
    return ODL_OK;
}

static odl_status check_act(const char *op, odl_act act) {
    if (act != ODL_ACT_NONE && act != ODL_ACT_RELU && act != ODL_ACT_SILU && act != ODL_ACT_SIGMOID)
        return ODL_ERR(ODL_E_INVAL, "%s: unknown activation %d", op, (int)act);
    return ODL_OK;
}

static odl_status get_backend(const char *op, odl_device dev, const odl_backend **out) {
    *out = odl_backend_for(dev);
    if (!*out) {
        odl_error_prefix("%s", op);
        return ODL_E_NODEV;
    }
    return ODL_OK;
}

/* ---- linear algebra ---- */

/* The GEMM of odl_gemm and the linear layers, in the process's matmul precision (odl/precision.h):
 * fp32 is the op table's float32 gemm, tf32 / bf16 its gemm_lowp. */
static odl_status matmul(const odl_backend *be, const odl_gemm_args *g) {
    const odl_precision p = odl_matmul_precision();
    if (p == ODL_PRECISION_FP32) return be->gemm(g);
    if (!be->gemm_lowp)
        return ODL_ERR(ODL_E_UNSUPPORTED, "the %s backend has no %s GEMM", be->name, odl_precision_name(p));
    return be->gemm_lowp(g, p);
}

odl_status odl_gemm(int trans_a, int trans_b, float alpha, const odl_tensor *A, const odl_tensor *B, float beta,
                    odl_tensor *C, const odl_tensor *bias, const odl_tensor *residual, odl_act act) {
    static const char *op = "odl_gemm";
    ODL_CHECK(check_ndim(op, A, "A", ODL_F32, 2));
    const odl_device dev = A->device;
    const int64_t M = trans_a ? A->shape[1] : A->shape[0], K = trans_a ? A->shape[0] : A->shape[1];
    const int64_t bshape[2] = {trans_b ? -1 : K, trans_b ? K : -1};
    ODL_CHECK(check_shape(op, B, trans_b ? "B (transposed)" : "B", ODL_F32, dev, 2, bshape, A,
                          trans_a ? "A (transposed)" : "A"));
    const int64_t N = trans_b ? B->shape[0] : B->shape[1];
    const int64_t cshape[2] = {M, N};
    ODL_CHECK(check_shape(op, C, "C", ODL_F32, dev, 2, cshape, B, "B"));
    if (bias) ODL_CHECK(check_shape(op, bias, "bias", ODL_F32, dev, 1, &N, C, "C"));
    if (residual) ODL_CHECK(check_shape(op, residual, "residual", ODL_F32, dev, 2, cshape, C, "C"));
    ODL_CHECK(check_act(op, act));
    const odl_backend *be;
    ODL_CHECK(get_backend(op, dev, &be));
    odl_gemm_args g;
    memset(&g, 0, sizeof g);
    g.trans_a = trans_a != 0;
    g.trans_b = trans_b != 0;
    g.M = M;
    g.N = N;
    g.K = K;
    g.alpha = alpha;
    g.A = (const float *)A->data;
    g.lda = A->shape[1];
    g.B = (const float *)B->data;
    g.ldb = B->shape[1];
    g.beta = beta;
    g.C = (float *)C->data;
    g.ldc = N;
    g.ep.bias = bias ? (const float *)bias->data : NULL;
    g.ep.bias_per_row = 0;
    g.ep.residual = residual ? (const float *)residual->data : NULL;
    g.ep.act = act;
    ODL_CHECK(matmul(be, &g));
    return ODL_OK;
}

odl_status odl_linear_fwd(const odl_tensor *x, const odl_tensor *w, const odl_tensor *b, odl_act act, odl_tensor *y) {
    static const char *op = "odl_linear_fwd";
    ODL_CHECK(check_ndim(op, x, "x", ODL_F32, 2));
    const odl_device dev = x->device;
    const int64_t wshape[2] = {-1, x->shape[1]};
    ODL_CHECK(check_shape(op, w, "w", ODL_F32, dev, 2, wshape, x, "x"));
    const int64_t out = w->shape[0];
    if (b) ODL_CHECK(check_shape(op, b, "b", ODL_F32, dev, 1, &out, w, "w"));
    const int64_t yshape[2] = {x->shape[0], out};
    ODL_CHECK(check_shape(op, y, "y", ODL_F32, dev, 2, yshape, w, "w"));
    ODL_CHECK(check_act(op, act));
    const odl_backend *be;
    ODL_CHECK(get_backend(op, dev, &be));
    odl_gemm_args g;
    memset(&g, 0, sizeof g);
    g.trans_b = 1; /* y = x w^T */
    g.M = x->shape[0];
    g.N = out;
    g.K = x->shape[1];
    g.alpha = 1.0f;
    g.A = (const float *)x->data;
    g.lda = x->shape[1];
    g.B = (const float *)w->data;
    g.ldb = w->shape[1];
    g.beta = 0.0f;
    g.C = (float *)y->data;
    g.ldc = out;
    g.ep.bias = b ? (const float *)b->data : NULL;
    g.ep.act = act;
    ODL_CHECK(matmul(be, &g));
    return ODL_OK;
}

odl_status odl_linear_bwd(const odl_tensor *x, const odl_tensor *w, const odl_tensor *dy, odl_tensor *dx,
                          odl_tensor *dw, odl_tensor *db) {
    static const char *op = "odl_linear_bwd";
    ODL_CHECK(check_ndim(op, x, "x", ODL_F32, 2));
    const odl_device dev = x->device;
    const int64_t Bn = x->shape[0], in = x->shape[1];
    const int64_t wshape[2] = {-1, in};
    ODL_CHECK(check_shape(op, w, "w", ODL_F32, dev, 2, wshape, x, "x"));
    const int64_t out = w->shape[0];
    const int64_t dyshape[2] = {Bn, out};
    ODL_CHECK(check_shape(op, dy, "dy", ODL_F32, dev, 2, dyshape, w, "w"));
    if (dx) ODL_CHECK(check_shape(op, dx, "dx", ODL_F32, dev, 2, x->shape, x, "x"));
    ODL_CHECK(check_shape(op, dw, "dw", ODL_F32, dev, 2, w->shape, w, "w"));
    if (db) ODL_CHECK(check_shape(op, db, "db", ODL_F32, dev, 1, &out, w, "w"));
    const odl_backend *be;
    ODL_CHECK(get_backend(op, dev, &be));
    odl_gemm_args g;
    if (dx) { /* dx[B, in] = dy[B, out] w[out, in] */
        memset(&g, 0, sizeof g);
        g.M = Bn;
        g.N = in;
        g.K = out;
        g.alpha = 1.0f;
        g.A = (const float *)dy->data;
        g.lda = out;
        g.B = (const float *)w->data;
        g.ldb = in;
        g.C = (float *)dx->data;
        g.ldc = in;
        ODL_CHECK(matmul(be, &g));
    }
    /* dw[out, in] = dy^T[out, B] x[B, in] */
    memset(&g, 0, sizeof g);
    g.trans_a = 1;
    g.M = out;
    g.N = in;
    g.K = Bn;
    g.alpha = 1.0f;
    g.A = (const float *)dy->data;
    g.lda = out;
    g.B = (const float *)x->data;
    g.ldb = in;
    g.C = (float *)dw->data;
    g.ldc = in;
    ODL_CHECK(matmul(be, &g));
    if (db) ODL_CHECK(be->sum_rows(Bn, out, (const float *)dy->data, (float *)db->data));
    return ODL_OK;
}

/* ---- convolution ---- */

/* Geometry of a convolution of x [N,C,H,W] (float32) with w [K,C,R,S] on x's device; checks both
 * operands, stride, pad and that the output is not empty. The forward and the backward pass share it. */
static odl_status conv_geometry(const char *op, const odl_tensor *x, const odl_tensor *w, int stride, int pad,
                                odl_conv2d_shape *s) {
    char xs[SHAPE_CAP], ws[SHAPE_CAP];
    ODL_CHECK(check_ndim(op, x, "x", ODL_F32, 4));
    const int64_t wshape[4] = {-1, x->shape[1], -1, -1};
    ODL_CHECK(check_shape(op, w, "w", ODL_F32, x->device, 4, wshape, x, "x"));
    if (stride < 1) return ODL_ERR(ODL_E_INVAL, "%s: stride must be >= 1, got %d", op, stride);
    if (pad < 0) return ODL_ERR(ODL_E_INVAL, "%s: pad must be >= 0, got %d", op, pad);
    ODL_CHECK(check_int_dims(op, x, "x"));
    ODL_CHECK(check_int_dims(op, w, "w"));
    memset(s, 0, sizeof *s);
    s->N = (int)x->shape[0];
    s->C = (int)x->shape[1];
    s->H = (int)x->shape[2];
    s->W = (int)x->shape[3];
    s->K = (int)w->shape[0];
    s->R = (int)w->shape[2];
    s->S = (int)w->shape[3];
    s->stride_h = s->stride_w = stride;
    s->pad_h = s->pad_w = pad;
    if ((int64_t)s->H + 2 * (int64_t)pad < s->R || (int64_t)s->W + 2 * (int64_t)pad < s->S || s->R < 1 || s->S < 1)
        return ODL_ERR(ODL_E_INVAL, "%s: kernel of w %s does not fit input x %s with pad %d", op,
                       odl_shape_str(w, ws, sizeof ws), odl_shape_str(x, xs, sizeof xs), pad);
    s->P = odl_conv_out_size(s->H, s->R, stride, pad);
    s->Q = odl_conv_out_size(s->W, s->S, stride, pad);
    return ODL_OK;
}

/* Convolutions follow the process's matmul precision (odl/precision.h), as cuDNN's TF32 mode and autocast's
 * bfloat16 convolutions: fp32 is the op table's float32 entries, tf32 / bf16 its conv2d_*_lowp. */
static odl_status conv_lowp_check(const odl_backend *be, odl_precision p) {
    if (p != ODL_PRECISION_FP32 && (!be->conv2d_fwd_lowp || !be->conv2d_bwd_data_lowp || !be->conv2d_bwd_weight_lowp))
        return ODL_ERR(ODL_E_UNSUPPORTED, "the %s backend has no %s convolution", be->name, odl_precision_name(p));
    return ODL_OK;
}

odl_status odl_conv2d_fwd(const odl_tensor *x, const odl_tensor *w, const odl_tensor *b, const odl_tensor *residual,
                          odl_act act, int stride, int pad, odl_tensor *y) {
    static const char *op = "odl_conv2d_fwd";
    odl_conv2d_shape s;
    ODL_CHECK(conv_geometry(op, x, w, stride, pad, &s));
    const odl_device dev = x->device;
    const int64_t K = s.K, yshape[4] = {s.N, s.K, s.P, s.Q};
    if (b) ODL_CHECK(check_shape(op, b, "b", ODL_F32, dev, 1, &K, w, "w"));
    if (residual) ODL_CHECK(check_shape(op, residual, "residual", ODL_F32, dev, 4, yshape, x, "x"));
    ODL_CHECK(check_shape(op, y, "y", ODL_F32, dev, 4, yshape, x, "x"));
    ODL_CHECK(check_act(op, act));
    const odl_backend *be;
    ODL_CHECK(get_backend(op, dev, &be));
    odl_epilogue ep;
    memset(&ep, 0, sizeof ep);
    ep.bias = b ? (const float *)b->data : NULL;
    ep.bias_per_row = 1;
    ep.residual = residual ? (const float *)residual->data : NULL;
    ep.act = act;
    const odl_precision p = odl_matmul_precision();
    ODL_CHECK(conv_lowp_check(be, p));
    if (p == ODL_PRECISION_FP32)
        ODL_CHECK(be->conv2d_fwd(&s, (const float *)x->data, (const float *)w->data, &ep, (float *)y->data));
    else
        ODL_CHECK(be->conv2d_fwd_lowp(&s, (const float *)x->data, (const float *)w->data, &ep, (float *)y->data, p));
    return ODL_OK;
}

/* The checks every convolution backward makes (x, w, dy [N,K,P,Q], dx nullable, dw, db nullable; y nullable, of
 * dy's shape), then its geometry, backend and precision. */
static odl_status conv_bwd_setup(const char *op, const odl_tensor *x, const odl_tensor *w, const odl_tensor *y,
                                 const odl_tensor *dy, int stride, int pad, const odl_tensor *dx, const odl_tensor *dw,
                                 const odl_tensor *db, odl_conv2d_shape *s, const odl_backend **be, odl_precision *p) {
    ODL_CHECK(conv_geometry(op, x, w, stride, pad, s));
    const odl_device dev = x->device;
    const int64_t K = s->K, dyshape[4] = {s->N, s->K, s->P, s->Q};
    ODL_CHECK(check_shape(op, dy, "dy", ODL_F32, dev, 4, dyshape, x, "x"));
    if (y) ODL_CHECK(check_shape(op, y, "y", ODL_F32, dev, 4, dyshape, x, "x"));
    if (dx) ODL_CHECK(check_shape(op, dx, "dx", ODL_F32, dev, 4, x->shape, x, "x"));
    ODL_CHECK(check_shape(op, dw, "dw", ODL_F32, dev, 4, w->shape, w, "w"));
    if (db) ODL_CHECK(check_shape(op, db, "db", ODL_F32, dev, 1, &K, w, "w"));
    ODL_CHECK(get_backend(op, dev, be));
    *p = odl_matmul_precision();
    return conv_lowp_check(*be, *p);
}

/* The weight gradient's entry of precision p (fp32: the float32 entry). */
static odl_status conv_bwd_weight_at(const odl_backend *be, const odl_conv2d_shape *s, const float *x, const float *dy,
                                     float *dw, float *db, odl_precision p) {
    if (p == ODL_PRECISION_FP32) return be->conv2d_bwd_weight(s, x, dy, dw, db);
    return be->conv2d_bwd_weight_lowp(s, x, dy, dw, db, p);
}

/* relu: x is a ReLU's output, whose backward dx gets (odl_conv2d_relu_bwd). */
static odl_status conv2d_bwd(const char *op, const odl_tensor *x, const odl_tensor *w, const odl_tensor *dy, int stride,
                             int pad, int relu, odl_tensor *dx, odl_tensor *dw, odl_tensor *db) {
    odl_conv2d_shape s;
    const odl_backend *be;
    odl_precision p;
    ODL_CHECK(conv_bwd_setup(op, x, w, NULL, dy, stride, pad, dx, dw, db, &s, &be, &p));
    const float *xd = (const float *)x->data, *wd = (const float *)w->data, *dyd = (const float *)dy->data;
    float *dbd = db ? (float *)db->data : NULL;
    const float *relu_x = relu ? xd : NULL;
    if (dx && p == ODL_PRECISION_FP32) ODL_CHECK(be->conv2d_bwd_data(&s, dyd, wd, relu_x, (float *)dx->data));
    else if (dx) ODL_CHECK(be->conv2d_bwd_data_lowp(&s, dyd, wd, relu_x, (float *)dx->data, p));
    ODL_CHECK(conv_bwd_weight_at(be, &s, xd, dyd, (float *)dw->data, dbd, p));
    return ODL_OK;
}

odl_status odl_conv2d_bwd(const odl_tensor *x, const odl_tensor *w, const odl_tensor *dy, int stride, int pad,
                          odl_tensor *dx, odl_tensor *dw, odl_tensor *db) {
    return conv2d_bwd("odl_conv2d_bwd", x, w, dy, stride, pad, 0, dx, dw, db);
}

odl_status odl_conv2d_relu_bwd(const odl_tensor *x, const odl_tensor *w, const odl_tensor *dy, int stride, int pad,
                               odl_tensor *dx, odl_tensor *dw, odl_tensor *db) {
    return conv2d_bwd("odl_conv2d_relu_bwd", x, w, dy, stride, pad, 1, dx, dw, db);
}

odl_status odl_conv2d_relu_out_bwd_weight(const odl_tensor *x, const odl_tensor *w, const odl_tensor *y,
                                          odl_tensor *dy, int stride, int pad, odl_tensor *dw, odl_tensor *db) {
    odl_conv2d_shape s;
    const odl_backend *be;
    odl_precision p;
    static const char *op = "odl_conv2d_relu_out_bwd_weight";
    if (!y) return ODL_ERR(ODL_E_INVAL, "%s: NULL y (the ReLU's output)", op);
    ODL_CHECK(conv_bwd_setup(op, x, w, y, dy, stride, pad, NULL, dw, db, &s, &be, &p));
    const float *xd = (const float *)x->data, *yd = (const float *)y->data;
    float *dyd = (float *)dy->data, *dwd = (float *)dw->data, *dbd = db ? (float *)db->data : NULL;
    int fused = 0;
    if (be->conv2d_bwd_weight_relu) ODL_CHECK(be->conv2d_bwd_weight_relu(&s, xd, dyd, yd, dwd, dbd, &fused));
    if (fused) return ODL_OK;
    ODL_CHECK(be->act_bwd(ODL_ACT_RELU, odl_tensor_numel(dy), yd, yd, dyd, dyd));
    ODL_CHECK(conv_bwd_weight_at(be, &s, xd, dyd, dwd, dbd, p));
    return ODL_OK;
}

/* ---- pooling ---- */

/* Geometry of a max-pool over an [N,C,H,W] tensor t; PyTorch's limits: kernel >= 1, stride >= 1,
 * 0 <= pad <= kernel/2, non-empty output. */
static odl_status pool_geometry(const char *op, const odl_tensor *t, const char *name, int kernel, int stride,
                                int pad, odl_pool2d_shape *s) {
    char ts[SHAPE_CAP];
    if (kernel < 1) return ODL_ERR(ODL_E_INVAL, "%s: kernel must be >= 1, got %d", op, kernel);
    if (stride < 1) return ODL_ERR(ODL_E_INVAL, "%s: stride must be >= 1, got %d", op, stride);
    if (pad < 0 || pad > kernel / 2)
        return ODL_ERR(ODL_E_INVAL, "%s: pad must be in [0, kernel/2] = [0, %d], got %d", op, kernel / 2, pad);
    ODL_CHECK(check_int_dims(op, t, name));
    memset(s, 0, sizeof *s);
    s->N = (int)t->shape[0];
    s->C = (int)t->shape[1];
    s->H = (int)t->shape[2];
    s->W = (int)t->shape[3];
    s->kh = s->kw = kernel;
    s->stride_h = s->stride_w = stride;
    s->pad_h = s->pad_w = pad;
    if ((int64_t)s->H + 2 * (int64_t)pad < kernel || (int64_t)s->W + 2 * (int64_t)pad < kernel)
        return ODL_ERR(ODL_E_INVAL, "%s: kernel %d with pad %d does not fit %s %s", op, kernel, pad, name,
                       odl_shape_str(t, ts, sizeof ts));
    if ((int64_t)s->H * s->W > INT32_MAX)
        return ODL_ERR(ODL_E_INVAL, "%s: %s %s: a plane has more than 2^31-1 elements (int32 argmax)", op, name,
                       odl_shape_str(t, ts, sizeof ts));
    s->P = odl_conv_out_size(s->H, kernel, stride, pad);
    s->Q = odl_conv_out_size(s->W, kernel, stride, pad);
    return ODL_OK;
}

odl_status odl_maxpool2d_fwd(const odl_tensor *x, int kernel, int stride, int pad, odl_tensor *y,
                             odl_tensor *argmax) {
    static const char *op = "odl_maxpool2d_fwd";
    ODL_CHECK(check_ndim(op, x, "x", ODL_F32, 4));
    const odl_device dev = x->device;
    odl_pool2d_shape s;
    ODL_CHECK(pool_geometry(op, x, "x", kernel, stride, pad, &s));
    const int64_t yshape[4] = {s.N, s.C, s.P, s.Q};
    ODL_CHECK(check_shape(op, y, "y", ODL_F32, dev, 4, yshape, x, "x"));
    if (argmax) ODL_CHECK(check_shape(op, argmax, "argmax", ODL_I32, dev, 4, yshape, x, "x"));
    const odl_backend *be;
    ODL_CHECK(get_backend(op, dev, &be));
    ODL_CHECK(be->maxpool2d_fwd(&s, (const float *)x->data, (float *)y->data,
                                argmax ? (int32_t *)argmax->data : NULL));
    return ODL_OK;
}

static odl_status maxpool2d_bwd(const char *op, const odl_tensor *dy, const odl_tensor *argmax, const odl_tensor *relu_y,
                                int kernel, int stride, int pad, odl_tensor *dx) {
    ODL_CHECK(check_ndim(op, dx, "dx", ODL_F32, 4));
    const odl_device dev = dx->device;
    odl_pool2d_shape s;
    ODL_CHECK(pool_geometry(op, dx, "dx", kernel, stride, pad, &s));
    const int64_t yshape[4] = {s.N, s.C, s.P, s.Q};
    ODL_CHECK(check_shape(op, dy, "dy", ODL_F32, dev, 4, yshape, dx, "dx"));
    ODL_CHECK(check_shape(op, argmax, "argmax", ODL_I32, dev, 4, yshape, dx, "dx"));
    if (relu_y) ODL_CHECK(check_shape(op, relu_y, "y", ODL_F32, dev, 4, yshape, dx, "dx"));
    const odl_backend *be;
    ODL_CHECK(get_backend(op, dev, &be));
    ODL_CHECK(be->maxpool2d_bwd(&s, (const float *)dy->data, (const int32_t *)argmax->data,
                                relu_y ? (const float *)relu_y->data : NULL, (float *)dx->data));
    return ODL_OK;
}

odl_status odl_maxpool2d_bwd(const odl_tensor *dy, const odl_tensor *argmax, int kernel, int stride, int pad,
                             odl_tensor *dx) {
    return maxpool2d_bwd("odl_maxpool2d_bwd", dy, argmax, NULL, kernel, stride, pad, dx);
}

odl_status odl_maxpool2d_relu_bwd(const odl_tensor *dy, const odl_tensor *argmax, const odl_tensor *y, int kernel,
                                  int stride, int pad, odl_tensor *dx) {
    if (!y) return ODL_ERR(ODL_E_INVAL, "odl_maxpool2d_relu_bwd: NULL y");
    return maxpool2d_bwd("odl_maxpool2d_relu_bwd", dy, argmax, y, kernel, stride, pad, dx);
}

/* ---- activations and dropout ---- */

odl_status odl_act_fwd(odl_act act, const odl_tensor *x, odl_tensor *y) {
    static const char *op = "odl_act_fwd";
    ODL_CHECK(check_any(op, x, "x", ODL_F32, x ? x->device : odl_cpu()));
    ODL_CHECK(check_numel(op, y, "y", x->device, x, "x"));
    ODL_CHECK(check_act(op, act));
    const odl_backend *be;
    ODL_CHECK(get_backend(op, x->device, &be));
    ODL_CHECK(be->act_fwd(act, odl_tensor_numel(x), (const float *)x->data, (float *)y->data));
    return ODL_OK;
}

odl_status odl_act_bwd(odl_act act, const odl_tensor *x, const odl_tensor *y, const odl_tensor *dy, odl_tensor *dx) {
    static const char *op = "odl_act_bwd";
    ODL_CHECK(check_any(op, x, "x", ODL_F32, x ? x->device : odl_cpu()));
    const odl_device dev = x->device;
    if (y) ODL_CHECK(check_numel(op, y, "y", dev, x, "x"));
    ODL_CHECK(check_numel(op, dy, "dy", dev, x, "x"));
    ODL_CHECK(check_numel(op, dx, "dx", dev, x, "x"));
    ODL_CHECK(check_act(op, act));
    const odl_backend *be;
    ODL_CHECK(get_backend(op, dev, &be));
    ODL_CHECK(be->act_bwd(act, odl_tensor_numel(x), (const float *)x->data, y ? (const float *)y->data : NULL,
                          (const float *)dy->data, (float *)dx->data));
    return ODL_OK;
}

/* fwd: y = dropout(x); bwd: dx = dropout mask applied to dy. In place (out == in) is fine. With s, the
 * offset is s->rng_offset + offset, read when the kernel runs. */
static odl_status dropout_common(const char *op, int fwd, float p, uint64_t seed, uint64_t offset,
                                 const odl_step_scalars *s, const odl_tensor *in, const char *in_name, odl_tensor *out,
                                 const char *out_name) {
    ODL_CHECK(check_any(op, in, in_name, ODL_F32, in ? in->device : odl_cpu()));
    ODL_CHECK(check_numel(op, out, out_name, in->device, in, in_name));
    if (!(p >= 0.0f && p < 1.0f)) return ODL_ERR(ODL_E_INVAL, "%s: p must be in [0, 1), got %g", op, (double)p);
    const odl_backend *be;
    ODL_CHECK(get_backend(op, in->device, &be));
    const int64_t n = odl_tensor_numel(in);
    if (p == 0.0f) { /* identity: copy */
        if (out->data != in->data) ODL_CHECK(be->scale(n, 1.0f, (const float *)in->data, (float *)out->data));
        return ODL_OK;
    }
    const float *x = (const float *)in->data;
    float *y = (float *)out->data;
    if (s && !(fwd ? be->dropout_fwd_at : be->dropout_bwd_at))
        return ODL_ERR(ODL_E_UNSUPPORTED, "%s: the %s backend reads no step scalars", op, be->name);
    if (s) ODL_CHECK(fwd ? be->dropout_fwd_at(n, p, seed, s, offset, x, y) : be->dropout_bwd_at(n, p, seed, s, offset, x, y));
    else ODL_CHECK(fwd ? be->dropout_fwd(n, p, seed, offset, x, y) : be->dropout_bwd(n, p, seed, offset, x, y));
    return ODL_OK;
}

odl_status odl_dropout_fwd(float p, uint64_t seed, uint64_t offset, const odl_tensor *x, odl_tensor *y) {
    return dropout_common("odl_dropout_fwd", 1, p, seed, offset, NULL, x, "x", y, "y");
}

odl_status odl_dropout_bwd(float p, uint64_t seed, uint64_t offset, const odl_tensor *dy, odl_tensor *dx) {
    return dropout_common("odl_dropout_bwd", 0, p, seed, offset, NULL, dy, "dy", dx, "dx");
}

odl_status odl_dropout_fwd_at(float p, uint64_t seed, const odl_step_scalars *s, uint64_t layer, const odl_tensor *x,
                              odl_tensor *y) {
    if (!s) return ODL_ERR(ODL_E_INVAL, "odl_dropout_fwd_at: NULL step scalars");
    return dropout_common("odl_dropout_fwd_at", 1, p, seed, layer, s, x, "x", y, "y");
}

odl_status odl_dropout_bwd_at(float p, uint64_t seed, const odl_step_scalars *s, uint64_t layer, const odl_tensor *dy,
                              odl_tensor *dx) {
    if (!s) return ODL_ERR(ODL_E_INVAL, "odl_dropout_bwd_at: NULL step scalars");
    return dropout_common("odl_dropout_bwd_at", 0, p, seed, layer, s, dy, "dy", dx, "dx");
}

/* ---- batch normalisation ---- */

static odl_status bn_check_x(const char *op, const odl_tensor *x, const char *name) {
    ODL_CHECK(check_ndim(op, x, name, ODL_F32, 4));
    ODL_CHECK(check_int_dims(op, x, name));
    return ODL_OK;
}

odl_status odl_batchnorm_infer(const odl_tensor *x, const odl_tensor *gamma, const odl_tensor *beta,
                               const odl_tensor *mean, const odl_tensor *var, float eps, odl_tensor *y) {
    static const char *op = "odl_batchnorm_infer";
    ODL_CHECK(bn_check_x(op, x, "x"));
    const odl_device dev = x->device;
    const int64_t C = x->shape[1];
    ODL_CHECK(check_shape(op, gamma, "gamma", ODL_F32, dev, 1, &C, x, "x"));
    ODL_CHECK(check_shape(op, beta, "beta", ODL_F32, dev, 1, &C, x, "x"));
    ODL_CHECK(check_shape(op, mean, "mean", ODL_F32, dev, 1, &C, x, "x"));
    ODL_CHECK(check_shape(op, var, "var", ODL_F32, dev, 1, &C, x, "x"));
    ODL_CHECK(check_shape(op, y, "y", ODL_F32, dev, 4, x->shape, x, "x"));
    const odl_backend *be;
    ODL_CHECK(get_backend(op, dev, &be));
    ODL_CHECK(be->batchnorm_infer((int)x->shape[0], (int)C, x->shape[2] * x->shape[3], (const float *)x->data,
                                  (const float *)gamma->data, (const float *)beta->data, (const float *)mean->data,
                                  (const float *)var->data, eps, (float *)y->data));
    return ODL_OK;
}

odl_status odl_batchnorm_train_fwd(const odl_tensor *x, const odl_tensor *gamma, const odl_tensor *beta,
                                   odl_tensor *running_mean, odl_tensor *running_var, float momentum, float eps,
                                   odl_tensor *y, odl_tensor *save_mean, odl_tensor *save_invstd) {
    static const char *op = "odl_batchnorm_train_fwd";
    ODL_CHECK(bn_check_x(op, x, "x"));
    const odl_device dev = x->device;
    const int64_t C = x->shape[1];
    ODL_CHECK(check_shape(op, gamma, "gamma", ODL_F32, dev, 1, &C, x, "x"));
    ODL_CHECK(check_shape(op, beta, "beta", ODL_F32, dev, 1, &C, x, "x"));
    ODL_CHECK(check_shape(op, running_mean, "running_mean", ODL_F32, dev, 1, &C, x, "x"));
    ODL_CHECK(check_shape(op, running_var, "running_var", ODL_F32, dev, 1, &C, x, "x"));
    ODL_CHECK(check_shape(op, y, "y", ODL_F32, dev, 4, x->shape, x, "x"));
    ODL_CHECK(check_shape(op, save_mean, "save_mean", ODL_F32, dev, 1, &C, x, "x"));
    ODL_CHECK(check_shape(op, save_invstd, "save_invstd", ODL_F32, dev, 1, &C, x, "x"));
    const int64_t per_channel = x->shape[0] * x->shape[2] * x->shape[3];
    if (per_channel <= 1) {
        char xs[SHAPE_CAP];
        return ODL_ERR(ODL_E_INVAL, "%s: expected more than 1 value per channel when training, got x %s", op,
                       odl_shape_str(x, xs, sizeof xs));
    }
    const odl_backend *be;
    ODL_CHECK(get_backend(op, dev, &be));
    ODL_CHECK(be->batchnorm_train_fwd((int)x->shape[0], (int)C, x->shape[2] * x->shape[3], (const float *)x->data,
                                      (const float *)gamma->data, (const float *)beta->data,
                                      (float *)running_mean->data, (float *)running_var->data, momentum, eps,
                                      (float *)y->data, (float *)save_mean->data, (float *)save_invstd->data));
    return ODL_OK;
}

odl_status odl_batchnorm_bwd(const odl_tensor *x, const odl_tensor *dy, const odl_tensor *gamma,
                             const odl_tensor *save_mean, const odl_tensor *save_invstd, odl_tensor *dx,
                             odl_tensor *dgamma, odl_tensor *dbeta) {
    static const char *op = "odl_batchnorm_bwd";
    ODL_CHECK(bn_check_x(op, x, "x"));
    const odl_device dev = x->device;
    const int64_t C = x->shape[1];
    ODL_CHECK(check_shape(op, dy, "dy", ODL_F32, dev, 4, x->shape, x, "x"));
    ODL_CHECK(check_shape(op, gamma, "gamma", ODL_F32, dev, 1, &C, x, "x"));
    ODL_CHECK(check_shape(op, save_mean, "save_mean", ODL_F32, dev, 1, &C, x, "x"));
    ODL_CHECK(check_shape(op, save_invstd, "save_invstd", ODL_F32, dev, 1, &C, x, "x"));
    ODL_CHECK(check_shape(op, dx, "dx", ODL_F32, dev, 4, x->shape, x, "x"));
    ODL_CHECK(check_shape(op, dgamma, "dgamma", ODL_F32, dev, 1, &C, x, "x"));
    ODL_CHECK(check_shape(op, dbeta, "dbeta", ODL_F32, dev, 1, &C, x, "x"));
    const odl_backend *be;
    ODL_CHECK(get_backend(op, dev, &be));
    ODL_CHECK(be->batchnorm_bwd((int)x->shape[0], (int)C, x->shape[2] * x->shape[3], (const float *)x->data,
                                (const float *)dy->data, (const float *)gamma->data, (const float *)save_mean->data,
                                (const float *)save_invstd->data, (float *)dx->data, (float *)dgamma->data,
                                (float *)dbeta->data));
    return ODL_OK;
}

/* ---- upsampling and concat ---- */

/* The operands of a 2x upsampling, forward and backward: `small` [N,C,H,W] and `big` [N,C,2H,2W],
 * float32 on small's device; *be is that device's backend. */
static odl_status upsample2x_operands(const char *op, const odl_tensor *small, const char *sname,
                                      const odl_tensor *big, const char *bname, const odl_backend **be) {
    ODL_CHECK(check_ndim(op, small, sname, ODL_F32, 4));
    ODL_CHECK(check_int_dims(op, small, sname));
    const int64_t bshape[4] = {small->shape[0], small->shape[1], 2 * small->shape[2], 2 * small->shape[3]};
    ODL_CHECK(check_shape(op, big, bname, ODL_F32, small->device, 4, bshape, small, sname));
    ODL_CHECK(check_int_dims(op, big, bname));
    return get_backend(op, small->device, be);
}

odl_status odl_upsample2x_fwd(const odl_tensor *x, odl_tensor *y) {
    static const char *op = "odl_upsample2x_fwd";
    const odl_backend *be;
    ODL_CHECK(upsample2x_operands(op, x, "x", y, "y", &be));
    ODL_CHECK(be->upsample2x_fwd((int)x->shape[0], (int)x->shape[1], (int)x->shape[2], (int)x->shape[3],
                                 (const float *)x->data, (float *)y->data));
    return ODL_OK;
}

odl_status odl_upsample2x_bwd(const odl_tensor *dy, odl_tensor *dx) {
    static const char *op = "odl_upsample2x_bwd";
    const odl_backend *be;
    ODL_CHECK(upsample2x_operands(op, dx, "dx", dy, "dy", &be));
    ODL_CHECK(be->upsample2x_bwd((int)dx->shape[0], (int)dx->shape[1], (int)dx->shape[2], (int)dx->shape[3],
                                 (const float *)dy->data, (float *)dx->data));
    return ODL_OK;
}

odl_status odl_concat_channels_fwd(int n, const odl_tensor *const *xs, odl_tensor *y) {
    static const char *op = "odl_concat_channels_fwd";
    ODL_CHECK(check_ndim(op, y, "y", ODL_F32, 4));
    ODL_CHECK(check_int_dims(op, y, "y"));
    const odl_device dev = y->device;
    if (n < 1 || !xs) return ODL_ERR(ODL_E_INVAL, "%s: need at least one input, got n = %d", op, n);
    int64_t csum = 0;
    for (int i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof name, "xs[%d]", i);
        const int64_t shape[4] = {y->shape[0], -1, y->shape[2], y->shape[3]};
        ODL_CHECK(check_shape(op, xs[i], name, ODL_F32, dev, 4, shape, y, "y"));
        csum += xs[i]->shape[1];
    }
    if (csum != y->shape[1]) {
        char ys[SHAPE_CAP];
        return ODL_ERR(ODL_E_INVAL, "%s: inputs have %lld channels in all but y %s has %lld", op, (long long)csum,
                       odl_shape_str(y, ys, sizeof ys), (long long)y->shape[1]);
    }
    const odl_backend *be;
    ODL_CHECK(get_backend(op, dev, &be));
    const int64_t HW = y->shape[2] * y->shape[3];
    int off = 0;
    for (int i = 0; i < n; i++) {
        int ci = (int)xs[i]->shape[1];
        ODL_CHECK(be->channel_copy((int)y->shape[0], HW, (float *)xs[i]->data, ci, (float *)y->data, (int)y->shape[1],
                                   off, 1));
        off += ci;
    }
    return ODL_OK;
}

/* dxs entries may be NULL. The channel offset of each entry needs the channel counts of the entries
 * before it, so a NULL entry must be either the only NULL one (its count is what remains of dy's) or
 * after the last non-NULL entry. */
odl_status odl_concat_channels_bwd(const odl_tensor *dy, int n, odl_tensor *const *dxs) {
    static const char *op = "odl_concat_channels_bwd";
    ODL_CHECK(check_ndim(op, dy, "dy", ODL_F32, 4));
    ODL_CHECK(check_int_dims(op, dy, "dy"));
    const odl_device dev = dy->device;
    if (n < 1 || !dxs) return ODL_ERR(ODL_E_INVAL, "%s: need at least one output, got n = %d", op, n);
    int64_t csum = 0;
    int nulls = 0, last_set = -1;
    for (int i = 0; i < n; i++) {
        if (!dxs[i]) {
            nulls++;
            continue;
        }
        char name[32];
        snprintf(name, sizeof name, "dxs[%d]", i);
        const int64_t shape[4] = {dy->shape[0], -1, dy->shape[2], dy->shape[3]};
        ODL_CHECK(check_shape(op, dxs[i], name, ODL_F32, dev, 4, shape, dy, "dy"));
        csum += dxs[i]->shape[1];
        last_set = i;
    }
    int64_t null_c = 0; /* channels of the single NULL entry, when there is exactly one */
    char ds[SHAPE_CAP];
    if (nulls == 0 && csum != dy->shape[1])
        return ODL_ERR(ODL_E_INVAL, "%s: outputs have %lld channels in all but dy %s has %lld", op, (long long)csum,
                       odl_shape_str(dy, ds, sizeof ds), (long long)dy->shape[1]);
    if (nulls > 0 && csum > dy->shape[1])
        return ODL_ERR(ODL_E_INVAL, "%s: outputs have %lld channels, more than dy %s has (%lld)", op,
                       (long long)csum, odl_shape_str(dy, ds, sizeof ds), (long long)dy->shape[1]);
    if (nulls == 1) {
        null_c = dy->shape[1] - csum;
    } else if (nulls > 1) {
        for (int i = 0; i < last_set; i++)
            if (!dxs[i])
                return ODL_ERR(ODL_E_INVAL,
                               "%s: dxs[%d] is NULL and is followed by other outputs: with more than one NULL "
                               "entry the channel offsets are unknown (pass NULL only after the last output)",
                               op, i);
    }
    const odl_backend *be;
    ODL_CHECK(get_backend(op, dev, &be));
    const int64_t HW = dy->shape[2] * dy->shape[3];
    int64_t off = 0;
    for (int i = 0; i < n; i++) {
        if (!dxs[i]) {
            off += null_c;
            continue;
        }
        int ci = (int)dxs[i]->shape[1];
        ODL_CHECK(be->channel_copy((int)dy->shape[0], HW, (float *)dxs[i]->data, ci, (float *)dy->data,
                                   (int)dy->shape[1], (int)off, 0));
        off += ci;
    }
    return ODL_OK;
}

/* ---- losses ---- */

static odl_status check_rows_labels(const char *op, const odl_tensor *x, const char *xname, const odl_tensor *labels) {
    ODL_CHECK(check_ndim(op, x, xname, ODL_F32, 2));
    ODL_CHECK(check_int_dims(op, x, xname));
    if (x->shape[1] < 1) {
        char xs[SHAPE_CAP];
        return ODL_ERR(ODL_E_INVAL, "%s: %s %s has no classes", op, xname, odl_shape_str(x, xs, sizeof xs));
    }
    const int64_t B = x->shape[0];
    ODL_CHECK(check_shape(op, labels, "labels", ODL_I32, x->device, 1, &B, x, xname));
    return ODL_OK;
}

odl_status odl_log_softmax_nll_fwd(const odl_tensor *logits, const odl_tensor *labels, odl_tensor *logprobs,
                                   odl_tensor *loss) {
    static const char *op = "odl_log_softmax_nll_fwd";
    ODL_CHECK(check_rows_labels(op, logits, "logits", labels));
    const odl_device dev = logits->device;
    ODL_CHECK(check_shape(op, logprobs, "logprobs", ODL_F32, dev, 2, logits->shape, logits, "logits"));
    ODL_CHECK(check_scalar(op, loss, "loss", dev));
    const odl_backend *be;
    ODL_CHECK(get_backend(op, dev, &be));
    ODL_CHECK(be->log_softmax_nll_fwd((int)logits->shape[0], (int)logits->shape[1], (const float *)logits->data,
                                      (const int32_t *)labels->data, (float *)logprobs->data, (float *)loss->data));
    return ODL_OK;
}

odl_status odl_log_softmax_nll_bwd(const odl_tensor *logprobs, const odl_tensor *labels, float dloss,
                                   odl_tensor *dlogits) {
    static const char *op = "odl_log_softmax_nll_bwd";
    ODL_CHECK(check_rows_labels(op, logprobs, "logprobs", labels));
    const odl_device dev = logprobs->device;
    ODL_CHECK(check_shape(op, dlogits, "dlogits", ODL_F32, dev, 2, logprobs->shape, logprobs, "logprobs"));
    const odl_backend *be;
    ODL_CHECK(get_backend(op, dev, &be));
    ODL_CHECK(be->log_softmax_nll_bwd((int)logprobs->shape[0], (int)logprobs->shape[1],
                                      (const float *)logprobs->data, (const int32_t *)labels->data, dloss,
                                      (float *)dlogits->data));
    return ODL_OK;
}

odl_status odl_argmax_rows(const odl_tensor *x, odl_tensor *out) {
    static const char *op = "odl_argmax_rows";
    ODL_CHECK(check_ndim(op, x, "x", ODL_F32, 2));
    ODL_CHECK(check_int_dims(op, x, "x"));
    if (x->shape[1] < 1) {
        char xs[SHAPE_CAP];
        return ODL_ERR(ODL_E_INVAL, "%s: x %s has no columns", op, odl_shape_str(x, xs, sizeof xs));
    }
    const int64_t B = x->shape[0];
    ODL_CHECK(check_shape(op, out, "out", ODL_I32, x->device, 1, &B, x, "x"));
    const odl_backend *be;
    ODL_CHECK(get_backend(op, x->device, &be));
    ODL_CHECK(be->argmax_rows((int)B, (int)x->shape[1], (const float *)x->data, (int32_t *)out->data));
    return ODL_OK;
}

/* ---- element-wise arithmetic and reductions ---- */

/* The operands of an element-wise a (op) b -> y: float32, as many elements as a, on a's device; *be is that
 * device's backend. */
static odl_status binary_operands(const char *op, const odl_tensor *a, const odl_tensor *b, const odl_tensor *y,
                                  const odl_backend **be) {
    ODL_CHECK(check_any(op, a, "a", ODL_F32, a ? a->device : odl_cpu()));
    ODL_CHECK(check_numel(op, b, "b", a->device, a, "a"));
    ODL_CHECK(check_numel(op, y, "y", a->device, a, "a"));
    return get_backend(op, a->device, be);
}

odl_status odl_add(const odl_tensor *a, const odl_tensor *b, odl_tensor *y) {
    const odl_backend *be;
    ODL_CHECK(binary_operands("odl_add", a, b, y, &be));
    ODL_CHECK(be->add(odl_tensor_numel(a), (const float *)a->data, (const float *)b->data, (float *)y->data));
    return ODL_OK;
}

odl_status odl_mul(const odl_tensor *a, const odl_tensor *b, odl_tensor *y) {
    const odl_backend *be;
    ODL_CHECK(binary_operands("odl_mul", a, b, y, &be));
    ODL_CHECK(be->mul(odl_tensor_numel(a), (const float *)a->data, (const float *)b->data, (float *)y->data));
    return ODL_OK;
}

odl_status odl_scale(float alpha, const odl_tensor *x, odl_tensor *y) {
    static const char *op = "odl_scale";
    ODL_CHECK(check_any(op, x, "x", ODL_F32, x ? x->device : odl_cpu()));
    ODL_CHECK(check_numel(op, y, "y", x->device, x, "x"));
    const odl_backend *be;
    ODL_CHECK(get_backend(op, x->device, &be));
    ODL_CHECK(be->scale(odl_tensor_numel(x), alpha, (const float *)x->data, (float *)y->data));
    return ODL_OK;
}

odl_status odl_axpy(float alpha, const odl_tensor *x, odl_tensor *y) {
    static const char *op = "odl_axpy";
    ODL_CHECK(check_any(op, x, "x", ODL_F32, x ? x->device : odl_cpu()));
    ODL_CHECK(check_numel(op, y, "y", x->device, x, "x"));
    const odl_backend *be;
    ODL_CHECK(get_backend(op, x->device, &be));
    ODL_CHECK(be->axpy(odl_tensor_numel(x), alpha, (const float *)x->data, (float *)y->data));
    return ODL_OK;
}

odl_status odl_sum_rows(const odl_tensor *x, odl_tensor *y) {
    static const char *op = "odl_sum_rows";
    ODL_CHECK(check_ndim(op, x, "x", ODL_F32, 2));
    const int64_t N = x->shape[1];
    ODL_CHECK(check_shape(op, y, "y", ODL_F32, x->device, 1, &N, x, "x"));
    const odl_backend *be;
    ODL_CHECK(get_backend(op, x->device, &be));
    ODL_CHECK(be->sum_rows(x->shape[0], N, (const float *)x->data, (float *)y->data));
    return ODL_OK;
}

odl_status odl_sum(const odl_tensor *x, odl_tensor *out) {
    static const char *op = "odl_sum";
    ODL_CHECK(check_any(op, x, "x", ODL_F32, x ? x->device : odl_cpu()));
    ODL_CHECK(check_scalar(op, out, "out", x->device));
    const odl_backend *be;
    ODL_CHECK(get_backend(op, x->device, &be));
    ODL_CHECK(be->sum(odl_tensor_numel(x), (const float *)x->data, (float *)out->data));
    return ODL_OK;
}

/* ---- optimisers ---- */

static odl_status check_step(const char *op, int64_t step) {
    if (step < 1) return ODL_ERR(ODL_E_INVAL, "%s: step counts from 1, got %lld", op, (long long)step);
    return ODL_OK;
}

/* The arguments of an SGD update other than lr and step; buf may be NULL when momentum == 0
 * (torch.optim.SGD keeps none then). */
static odl_status check_sgd(const char *op, odl_tensor *p, const odl_tensor *g, odl_tensor *buf, float momentum,
                            float dampening, int nesterov, const odl_backend **be) {
    ODL_CHECK(check_any(op, p, "p", ODL_F32, p ? p->device : odl_cpu()));
    ODL_CHECK(check_numel(op, g, "g", p->device, p, "p"));
    if (buf || momentum != 0.0f) ODL_CHECK(check_numel(op, buf, "buf", p->device, p, "p"));
    if (nesterov && (momentum <= 0.0f || dampening != 0.0f))
        return ODL_ERR(ODL_E_INVAL, "%s: Nesterov momentum requires a momentum > 0 and zero dampening (got %g, %g)",
                       op, (double)momentum, (double)dampening);
    return get_backend(op, p->device, be);
}

static odl_status check_adam(const char *op, odl_tensor *p, const odl_tensor *g, odl_tensor *m, odl_tensor *v,
                             float beta1, float beta2, const odl_backend **be) {
    ODL_CHECK(check_any(op, p, "p", ODL_F32, p ? p->device : odl_cpu()));
    ODL_CHECK(check_numel(op, g, "g", p->device, p, "p"));
    ODL_CHECK(check_numel(op, m, "m", p->device, p, "p"));
    ODL_CHECK(check_numel(op, v, "v", p->device, p, "p"));
    if (!(beta1 >= 0.0f && beta1 < 1.0f) || !(beta2 >= 0.0f && beta2 < 1.0f))
        return ODL_ERR(ODL_E_INVAL, "%s: betas must be in [0, 1), got (%g, %g)", op, (double)beta1, (double)beta2);
    return get_backend(op, p->device, be);
}

static odl_status check_adadelta(const char *op, odl_tensor *p, const odl_tensor *g, odl_tensor *sq, odl_tensor *acc,
                                 float rho, const odl_backend **be) {
    ODL_CHECK(check_any(op, p, "p", ODL_F32, p ? p->device : odl_cpu()));
    ODL_CHECK(check_numel(op, g, "g", p->device, p, "p"));
    ODL_CHECK(check_numel(op, sq, "sq", p->device, p, "p"));
    ODL_CHECK(check_numel(op, acc, "acc", p->device, p, "p"));
    if (!(rho >= 0.0f && rho <= 1.0f)) return ODL_ERR(ODL_E_INVAL, "%s: rho must be in [0, 1], got %g", op, (double)rho);
    return get_backend(op, p->device, be);
}

/* The step scalars of a *_at update, and the backend entry that reads them. */
static odl_status check_at(const char *op, const odl_step_scalars *s, const odl_backend *be, int has_entry) {
    if (!s) return ODL_ERR(ODL_E_INVAL, "%s: NULL step scalars", op);
    if (!has_entry) return ODL_ERR(ODL_E_UNSUPPORTED, "%s: the %s backend reads no step scalars", op, be->name);
    return ODL_OK;
}

odl_status odl_sgd_step(odl_tensor *p, const odl_tensor *g, odl_tensor *buf, float lr, float momentum,
                        float dampening, float weight_decay, int nesterov, int64_t step) {
    static const char *op = "odl_sgd_step";
    const odl_backend *be = NULL;
    ODL_CHECK(check_sgd(op, p, g, buf, momentum, dampening, nesterov, &be));
    ODL_CHECK(check_step(op, step));
    ODL_CHECK(be->sgd_step(odl_tensor_numel(p), (float *)p->data, (const float *)g->data,
                           buf ? (float *)buf->data : NULL, lr, momentum, dampening, weight_decay, nesterov, step));
    return ODL_OK;
}

odl_status odl_adam_step(odl_tensor *p, const odl_tensor *g, odl_tensor *m, odl_tensor *v, float lr, float beta1,
                         float beta2, float eps, float weight_decay, int decoupled, int64_t step) {
    static const char *op = "odl_adam_step";
    const odl_backend *be = NULL;
    ODL_CHECK(check_adam(op, p, g, m, v, beta1, beta2, &be));
    ODL_CHECK(check_step(op, step));
    ODL_CHECK(be->adam_step(odl_tensor_numel(p), (float *)p->data, (const float *)g->data, (float *)m->data,
                            (float *)v->data, lr, beta1, beta2, eps, weight_decay, decoupled, step));
    return ODL_OK;
}

odl_status odl_adadelta_step(odl_tensor *p, const odl_tensor *g, odl_tensor *sq, odl_tensor *acc, float lr,
                             float rho, float eps, float weight_decay) {
    static const char *op = "odl_adadelta_step";
    const odl_backend *be = NULL;
    ODL_CHECK(check_adadelta(op, p, g, sq, acc, rho, &be));
    ODL_CHECK(be->adadelta_step(odl_tensor_numel(p), (float *)p->data, (const float *)g->data, (float *)sq->data,
                                (float *)acc->data, lr, rho, eps, weight_decay));
    return ODL_OK;
}

/* ---- the same with the step's scalars in device memory ---- */

odl_status odl_step_scalars_advance(odl_device dev, odl_step_scalars *s, const odl_step_hyper *h) {
    static const char *op = "odl_step_scalars_advance";
    if (!h) return ODL_ERR(ODL_E_INVAL, "%s: NULL hyperparameters", op);
    if (h->world_size < 1 || h->rank < 0 || h->rank >= h->world_size)
        return ODL_ERR(ODL_E_INVAL, "%s: rank %d of a world of %d", op, h->rank, h->world_size);
    const odl_backend *be = NULL;
    ODL_CHECK(get_backend(op, dev, &be));
    ODL_CHECK(check_at(op, s, be, be->step_scalars_advance != NULL));
    ODL_CHECK(be->step_scalars_advance(s, h));
    return ODL_OK;
}

odl_status odl_sgd_step_at(odl_tensor *p, const odl_tensor *g, odl_tensor *buf, const odl_step_scalars *s,
                           float momentum, float dampening, float weight_decay, int nesterov) {
    static const char *op = "odl_sgd_step_at";
    const odl_backend *be = NULL;
    ODL_CHECK(check_sgd(op, p, g, buf, momentum, dampening, nesterov, &be));
    ODL_CHECK(check_at(op, s, be, be->sgd_step_at != NULL));
    ODL_CHECK(be->sgd_step_at(odl_tensor_numel(p), (float *)p->data, (const float *)g->data,
                              buf ? (float *)buf->data : NULL, s, momentum, dampening, weight_decay, nesterov));
    return ODL_OK;
}

odl_status odl_adam_step_at(odl_tensor *p, const odl_tensor *g, odl_tensor *m, odl_tensor *v,
                            const odl_step_scalars *s, float beta1, float beta2, float eps, float weight_decay,
                            int decoupled) {
    static const char *op = "odl_adam_step_at";
    const odl_backend *be = NULL;
    ODL_CHECK(check_adam(op, p, g, m, v, beta1, beta2, &be));
    ODL_CHECK(check_at(op, s, be, be->adam_step_at != NULL));
    ODL_CHECK(be->adam_step_at(odl_tensor_numel(p), (float *)p->data, (const float *)g->data, (float *)m->data,
                               (float *)v->data, s, beta1, beta2, eps, weight_decay, decoupled));
    return ODL_OK;
}

odl_status odl_adadelta_step_at(odl_tensor *p, const odl_tensor *g, odl_tensor *sq, odl_tensor *acc,
                                const odl_step_scalars *s, float rho, float eps, float weight_decay) {
    static const char *op = "odl_adadelta_step_at";
    const odl_backend *be = NULL;
    ODL_CHECK(check_adadelta(op, p, g, sq, acc, rho, &be));
    ODL_CHECK(check_at(op, s, be, be->adadelta_step_at != NULL));
    ODL_CHECK(be->adadelta_step_at(odl_tensor_numel(p), (float *)p->data, (const float *)g->data, (float *)sq->data,
                                   (float *)acc->data, s, rho, eps, weight_decay));
    return ODL_OK;
}

/* ---- grouped *_at updates: every entry checked, then one backend call per ODL_OPTIM_GROUP_MAX entries ---- */

/* Entry i's check (st, from its twin's check, which also gave its backend bi): the entries' backends and
 * devices must be one. */
static odl_status group_entry(const char *op, int i, int count, odl_status st, odl_tensor *const *p,
                              const odl_backend *bi, const odl_backend **be) {
    if (st == ODL_OK && i > 0 && !odl_device_eq(p[i]->device, p[0]->device))
        st = ODL_ERR(ODL_E_INVAL, "%s: entries on two devices", op);
    if (st != ODL_OK) {
        odl_error_prefix("entry %d of %d", i, count);
        return st;
    }
    *be = bi;
    return ODL_OK;
}

static odl_status group_args(const char *op, int count, const void *p, const void *g, const odl_step_scalars *s) {
    if (count < 0) return ODL_ERR(ODL_E_INVAL, "%s: %d entries", op, count);
    if (count > 0 && (!p || !g)) return ODL_ERR(ODL_E_INVAL, "%s: NULL parameter or gradient list", op);
    if (!s) return ODL_ERR(ODL_E_INVAL, "%s: NULL step scalars", op);
    return ODL_OK;
}

/* One optimiser's hyper-parameters, so that one loop serves the three grouped updates. */
typedef enum { OPTIM_SGD, OPTIM_ADAM, OPTIM_ADADELTA } optim_kind;
typedef struct {
    optim_kind kind;
    float a, b, c, d; /* SGD: momentum, dampening, weight_decay; Adam: beta1, beta2, eps, weight_decay;
                       * Adadelta: rho, eps, weight_decay */
    int flag;         /* SGD: nesterov; Adam: decoupled */
} optim_hyper;

/* Group t on its backend: in one call where the backend has the grouped entry, else entry by entry
 * through the twin's *_at (the CPU backend). */
static odl_status group_run(const odl_backend *be, const odl_optim_group *t, const odl_step_scalars *s,
                            const optim_hyper *h) {
    switch (h->kind) {
    case OPTIM_SGD:
        if (be->sgd_step_group_at) {
            ODL_CHECK(be->sgd_step_group_at(t, s, h->a, h->b, h->c, h->flag));
            return ODL_OK;
        }
        for (int k = 0; k < t->count; k++)
            ODL_CHECK(be->sgd_step_at(t->n[k], t->p[k], t->g[k], t->s1[k], s, h->a, h->b, h->c, h->flag));
        return ODL_OK;
    case OPTIM_ADAM:
        if (be->adam_step_group_at) {
            ODL_CHECK(be->adam_step_group_at(t, s, h->a, h->b, h->c, h->d, h->flag));
            return ODL_OK;
        }
        for (int k = 0; k < t->count; k++)
            ODL_CHECK(be->adam_step_at(t->n[k], t->p[k], t->g[k], t->s1[k], t->s2[k], s, h->a, h->b, h->c, h->d,
                                       h->flag));
        return ODL_OK;
    case OPTIM_ADADELTA:
        if (be->adadelta_step_group_at) {
            ODL_CHECK(be->adadelta_step_group_at(t, s, h->a, h->b, h->c));
            return ODL_OK;
        }
        for (int k = 0; k < t->count; k++)
            ODL_CHECK(be->adadelta_step_at(t->n[k], t->p[k], t->g[k], t->s1[k], t->s2[k], s, h->a, h->b, h->c));
        return ODL_OK;
    }
    return ODL_ERR(ODL_E_INVAL, "optimiser kind %d", (int)h->kind);
}

/* The checked entries (s1, s2: the state lists, NULL where the optimiser has none) in groups of at most
 * ODL_OPTIM_GROUP_MAX. */
static odl_status group_all(int count, odl_tensor *const *p, odl_tensor *const *g, odl_tensor *const *s1,
                            odl_tensor *const *s2, const odl_backend *be, const odl_step_scalars *s,
                            const optim_hyper *h) {
    odl_optim_group t = {0};
    for (int i = 0; i < count; i++) {
        const int k = t.count++;
        t.n[k] = odl_tensor_numel(p[i]);
        t.p[k] = (float *)p[i]->data;
        t.g[k] = (const float *)g[i]->data;
        t.s1[k] = s1 && s1[i] ? (float *)s1[i]->data : NULL;
        t.s2[k] = s2 && s2[i] ? (float *)s2[i]->data : NULL;
        if (t.count < ODL_OPTIM_GROUP_MAX && i < count - 1) continue;
        ODL_CHECK(group_run(be, &t, s, h));
        t.count = 0;
    }
    return ODL_OK;
}

odl_status odl_sgd_step_group_at(int count, odl_tensor *const *p, odl_tensor *const *g, odl_tensor *const *buf,
                                 const odl_step_scalars *s, float momentum, float dampening, float weight_decay,
                                 int nesterov) {
    static const char *op = "odl_sgd_step_group_at";
    ODL_CHECK(group_args(op, count, p, g, s));
    const odl_backend *be = NULL, *bi = NULL;
    for (int i = 0; i < count; i++) /* all checked before any runs */
        ODL_CHECK(group_entry(op, i, count, check_sgd(op, p[i], g[i], buf ? buf[i] : NULL, momentum, dampening,
                                                      nesterov, &bi), p, bi, &be));
    if (count == 0) return ODL_OK;
    ODL_CHECK(check_at(op, s, be, be->sgd_step_at != NULL));
    const optim_hyper h = {OPTIM_SGD, momentum, dampening, weight_decay, 0, nesterov};
    return group_all(count, p, g, buf, NULL, be, s, &h);
}

odl_status odl_adam_step_group_at(int count, odl_tensor *const *p, odl_tensor *const *g, odl_tensor *const *m,
                                  odl_tensor *const *v, const odl_step_scalars *s, float beta1, float beta2, float eps,
                                  float weight_decay, int decoupled) {
    static const char *op = "odl_adam_step_group_at";
    ODL_CHECK(group_args(op, count, p, g, s));
    if (count > 0 && (!m || !v)) return ODL_ERR(ODL_E_INVAL, "%s: NULL state list", op);
    const odl_backend *be = NULL, *bi = NULL;
    for (int i = 0; i < count; i++) /* all checked before any runs */
        ODL_CHECK(group_entry(op, i, count, check_adam(op, p[i], g[i], m[i], v[i], beta1, beta2, &bi), p, bi, &be));
    if (count == 0) return ODL_OK;
    ODL_CHECK(check_at(op, s, be, be->adam_step_at != NULL));
    const optim_hyper h = {OPTIM_ADAM, beta1, beta2, eps, weight_decay, decoupled};
    return group_all(count, p, g, m, v, be, s, &h);
}

odl_status odl_adadelta_step_group_at(int count, odl_tensor *const *p, odl_tensor *const *g, odl_tensor *const *sq,
                                      odl_tensor *const *acc, const odl_step_scalars *s, float rho, float eps,
                                      float weight_decay) {
    static const char *op = "odl_adadelta_step_group_at";
    ODL_CHECK(group_args(op, count, p, g, s));
    if (count > 0 && (!sq || !acc)) return ODL_ERR(ODL_E_INVAL, "%s: NULL state list", op);
    const odl_backend *be = NULL, *bi = NULL;
    for (int i = 0; i < count; i++) /* all checked before any runs */
        ODL_CHECK(group_entry(op, i, count, check_adadelta(op, p[i], g[i], sq[i], acc[i], rho, &bi), p, bi, &be));
    if (count == 0) return ODL_OK;
    ODL_CHECK(check_at(op, s, be, be->adadelta_step_at != NULL));
    const optim_hyper h = {OPTIM_ADADELTA, rho, eps, weight_decay, 0, 0};
    return group_all(count, p, g, sq, acc, be, s, &h);
}
