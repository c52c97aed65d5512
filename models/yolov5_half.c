/* YOLOv5 in float16 (odl_yolov5_set_half): the forward pass on NHWC float16 activations through the
 * backend's float16 entries (odl/backend.h, "float16 NHWC inference").
 *
 * Why NHWC: the tensor-core convolution reads 8 channels of a pixel as one 16-byte vector, and with a
 * pixel stride every activation can be a channel slice of a wider buffer. Each Concat (and each C3's and
 * SPPF's inner concatenation) then costs nothing: the layers that feed it write straight into their slice
 * of its buffer, and readers of those layers read the slice with the buffer's stride. A layer that feeds
 * two Concat layers (none does in the YOLOv5 P5 models) writes its own buffer and is copied into the
 * second. The network input [N, 3, H, W] float32 is converted to [N, H, W, 8] float16 with zero channels
 * 3..7, and the first convolution's weights get zero input channels to match.
 *
 * YOLOv5 v6+ starts with Conv(3, c, 6, 2, 2), which replaced the Focus layer (space-to-depth, then a 3x3
 * convolution). It is run as such: the input becomes [N, H/2, W/2, 16] with channel (i*2 + j)*3 + c =
 * x[c, 2h + i, 2w + j] (12 used), and with r = 2r' + i, s = 2s' + j
 *   y[p, q] = sum_{r,s<6} x[2p - 2 + r, 2q - 2 + s] w[r, s] = sum_{r',s'<3} z[p - 1 + r', q - 1 + s'] w'[r', s'],
 * a 3x3, stride-1, pad-1 convolution with w'[k, r', s', (i*2 + j)*3 + c] = w[k, c, 2r' + i, 2s' + j]. Same
 * products, same sums; the reduction shrinks from 36 x 8 to 9 x 16 and the input to a quarter.
 */
#include <stdlib.h>
#include <string.h>

#include "models/yolov5_impl.h"
#include "odl/half.h"

#define IMG_CPAD 8

static int round8(int c) { return (c + 7) / 8 * 8; }

/* Stage dst->wh = float16 [c2, k/b, k/b, c1p] with c1p = round8(b*b*c1) and
 *   w'[o, r', s', (i*b + j)*c1 + c] = w[o, c, r'*b + i, s'*b + j]   (zero in the padding channels)
 * from src's folded float32 weights [c2, c1, k, k], read from w32, the host copy of the model's float32
 * arena; sets dst->c1p. b = 1 is the plain KRSC layout, b = 2 the space-to-depth form of the first
 * convolution (file comment). */
static odl_status weights_to_half(odl_yolov5 *m, const unsigned char *w32, const yconv *src, int b, yconv *dst) {
    const int K = src->c2, C = src->c1, k = src->k, kb = k / b, Cp = round8(b * b * C);
    const size_t nh = (size_t)K * kb * kb * Cp;
    const float *w = (const float *)(w32 + ((const unsigned char *)src->w.data - (const unsigned char *)m->warena.data));
    odl_half *h = calloc(nh, sizeof(odl_half));
    if (!h) return ODL_ERR(ODL_E_NOMEM, "yolov5 --half: weights of a %dx%d convolution", K, C);
    for (int o = 0; o < K; o++)
        for (int c = 0; c < C; c++)
            for (int r = 0; r < k; r++)
                for (int q = 0; q < k; q++) {
                    const int cc = ((r % b) * b + q % b) * C + c;
                    h[(((size_t)o * kb + r / b) * kb + q / b) * Cp + cc] =
                        odl_float_to_half(w[(((size_t)o * C + c) * k + r) * k + q]);
                }
    int64_t shape[4] = {K, kb, kb, Cp};
    dst->c1p = Cp;
    odl_status st = yolov5_stage(m, &dst->wh, ODL_F16, 4, shape, h);
    free(h);
    return st;
}

/* Layer 0 as a 3x3 convolution over the space-to-depth input (file comment), when it is YOLOv5's 6x6
 * stride-2 pad-2 convolution of the 3-channel image. */
static odl_status prepare_s2d0(odl_yolov5 *m, const unsigned char *w32) {
    const yconv *c = &m->L[0].conv;
    m->use_s2d0 = m->L[0].type == YL_CONV && m->L[0].from[0] == -1 && c->c1 == 3 && c->k == 6 && c->s == 2 &&
                  c->p == 2;
    if (!m->use_s2d0) return ODL_OK;
    yconv *d = &m->s2d0;
    d->c1 = 4 * c->c1;
    d->c2 = c->c2;
    d->k = c->k / 2;
    d->s = 1;
    d->p = c->p / 2;
    d->b = c->b;
    d->b.owns = 0;
    return weights_to_half(m, w32, c, 2, d);
}

/* Float16 weights of every convolution of layer L. */
static odl_status layer_convs_to_half(odl_yolov5 *m, const unsigned char *w32, ylayer *L) {
    switch (L->type) {
    case YL_CONV: return weights_to_half(m, w32, &L->conv, 1, &L->conv);
    case YL_C3:
        ODL_CHECK(weights_to_half(m, w32, &L->cv3, 1, &L->cv3));
        for (int j = 0; j < L->nb; j++) {
            ODL_CHECK(weights_to_half(m, w32, &L->bcv1[j], 1, &L->bcv1[j]));
            ODL_CHECK(weights_to_half(m, w32, &L->bcv2[j], 1, &L->bcv2[j]));
        }
        ODL_CHECK(weights_to_half(m, w32, &L->cv1, 1, &L->cv1));
        return weights_to_half(m, w32, &L->cv2, 1, &L->cv2);
    case YL_SPPF:
        ODL_CHECK(weights_to_half(m, w32, &L->cv1, 1, &L->cv1));
        return weights_to_half(m, w32, &L->cv2, 1, &L->cv2);
    case YL_DETECT:
        for (int l = 0; l < m->nl; l++) ODL_CHECK(weights_to_half(m, w32, &L->heads[l], 1, &L->heads[l]));
        return ODL_OK;
    default: return ODL_OK;
    }
}

/* Every float16 weight, once: the float32 arena read back in one copy, converted on the host, staged and
 * uploaded in one copy (m->harena). */
static odl_status weights_half(odl_yolov5 *m) {
    if (m->harena.data) return ODL_OK;
    const size_t n = odl_tensor_nbytes(&m->warena);
    unsigned char *w32 = malloc(n ? n : 1);
    if (!w32) return ODL_ERR(ODL_E_NOMEM, "yolov5 --half: a host copy of %zu bytes of weights", n);
    odl_status st = odl_tensor_copy_to_host(&m->warena, w32, n);
    if (st == ODL_OK) st = prepare_s2d0(m, w32);
    for (int i = 0; st == ODL_OK && i < m->nlayers; i++) st = layer_convs_to_half(m, w32, &m->L[i]);
    free(w32);
    if (st == ODL_OK) st = yolov5_stage_commit(m, &m->harena);
    yolov5_stage_free(&m->stage);
    return st;
}

static void free_half_conv(yconv *c) { odl_tensor_free(&c->wh); }

void yolov5_half_release(odl_yolov5 *m) {
    if (!m) return;
    odl_tensor_free(&m->hinput);
    m->hinput_cap = 0;
    free_half_conv(&m->s2d0);
    m->use_s2d0 = 0;
    odl_tensor_free(&m->harena); /* the weights' memory; their views are reset below */
    if (!m->L) return;
    for (int i = 0; i < m->nlayers; i++) {
        ylayer *L = &m->L[i];
        odl_tensor_free(&L->hbuf);
        L->hbuf_cap = 0;
        memset(&L->hv, 0, sizeof L->hv);
        free_half_conv(&L->conv);
        free_half_conv(&L->cv1);
        free_half_conv(&L->cv2);
        free_half_conv(&L->cv3);
        for (int j = 0; j < L->nb; j++) {
            if (L->bcv1) free_half_conv(&L->bcv1[j]);
            if (L->bcv2) free_half_conv(&L->bcv2[j]);
        }
        if (L->heads)
            for (int l = 0; l < m->nl; l++) free_half_conv(&L->heads[l]);
    }
}

/* Which Concat buffer each layer writes into (see the file comment). */
static void plan_concat_slices(odl_yolov5 *m) {
    for (int i = 0; i < m->nlayers; i++) m->L[i].cat_into = -1;
    for (int i = 0; i < m->nlayers; i++) {
        ylayer *L = &m->L[i];
        if (L->type != YL_CONCAT) continue;
        int off = 0;
        for (int j = 0; j < L->nfrom; j++) {
            const int src = L->from[j];
            if (src >= 0 && m->L[src].cat_into < 0 && m->L[src].type != YL_CONCAT) {
                m->L[src].cat_into = i;
                m->L[src].cat_off = off;
            }
            off += src >= 0 ? m->L[src].c_out : 3;
        }
    }
}

odl_status yolov5_half_prepare(odl_yolov5 *m, int N, int H, int W) {
    plan_concat_slices(m);
    ODL_CHECK(weights_half(m));
    for (int i = 0; i < m->nlayers; i++) {
        ylayer *L = &m->L[i];
        if (L->type == YL_DETECT || L->cat_into >= 0) continue;
        const int h = H / L->down, w = W / L->down;
        ODL_CHECK(yolov5_buf_set(m, &L->hbuf, &L->hbuf_cap, ODL_F16, N, h, w, L->c_out));
        L->hv.p = (odl_half *)L->hbuf.data;
        L->hv.C = L->c_out;
        L->hv.ld = L->c_out;
    }
    for (int i = 0; i < m->nlayers; i++) {
        ylayer *L = &m->L[i];
        if (L->cat_into < 0) continue;
        const ylayer *cat = &m->L[L->cat_into];
        L->hv.p = (odl_half *)cat->hbuf.data + L->cat_off;
        L->hv.C = L->c_out;
        L->hv.ld = cat->c_out;
    }
    return yolov5_buf_set(m, &m->hinput, &m->hinput_cap, ODL_F16, N, H, W, IMG_CPAD);
}

/* ------------------------------------------------------------------------------------------------
 * Forward
 * ---------------------------------------------------------------------------------------------- */

typedef struct hctx {
    odl_yolov5 *m;
    const odl_backend *be;
    int N;
} hctx;

/* The arguments of y = act(conv(x) + b) + res for x an [N, H, W, x.C] view; y half (y_f32 = 0) or float32
 * with pixel stride ldy. */
static odl_status hconv_args(const hctx *c, const yconv *cv, hview x, int H, int W, const hview *res, odl_act act,
                             void *y, int64_t ldy, int y_f32, odl_conv2d_f16_args *a) {
    if (x.C != cv->c1p)
        return ODL_ERR(ODL_E_UNSUPPORTED,
                       "yolov5 --half: a convolution reads %d channels but its weights have %d (float16 needs channel "
                       "counts that are multiples of 8)", x.C, cv->c1p);
    memset(a, 0, sizeof *a);
    a->s.N = c->N;
    a->s.C = cv->c1p;
    a->s.H = H;
    a->s.W = W;
    a->s.K = cv->c2;
    a->s.R = a->s.S = cv->k;
    a->s.stride_h = a->s.stride_w = cv->s;
    a->s.pad_h = a->s.pad_w = cv->p;
    a->s.P = (H + 2 * cv->p - cv->k) / cv->s + 1;
    a->s.Q = (W + 2 * cv->p - cv->k) / cv->s + 1;
    a->x = x.p;
    a->ldx = x.ld;
    a->w = (const odl_half *)cv->wh.data;
    a->bias = (const float *)cv->b.data;
    a->act = act;
    if (res) {
        a->residual = res->p;
        a->ldr = res->ld;
    }
    a->y = y;
    a->ldy = ldy;
    a->y_f32 = y_f32;
    return odl_conv2d_f16_check(a);
}

static odl_status hconv(const hctx *c, const yconv *cv, hview x, int H, int W, const hview *res, odl_act act, void *y,
                        int64_t ldy, int y_f32) {
    odl_conv2d_f16_args a;
    ODL_CHECK(hconv_args(c, cv, x, H, W, res, act, y, ldy, y_f32, &a));
    return c->be->conv2d_f16(&a);
}

static odl_status hconv_silu(const hctx *c, const yconv *cv, hview x, int H, int W, const hview *res, hview y) {
    return hconv(c, cv, x, H, W, res, ODL_ACT_SILU, y.p, y.ld, 0);
}

static hview scratch_view(odl_yolov5 *m, int slot, int C, int64_t ld, int c0) {
    hview v = {(odl_half *)m->scratch[slot].data + c0, C, ld};
    return v;
}

static hview input_view(odl_yolov5 *m, int idx) {
    if (idx >= 0) return m->L[idx].hv;
    const int C = m->use_s2d0 ? 16 : IMG_CPAD;
    hview v = {(odl_half *)m->hinput.data, C, C};
    return v;
}

static odl_status half_layer(const hctx *c, int i) {
    odl_yolov5 *m = c->m;
    ylayer *L = &m->L[i];
    const int N = c->N, h = m->H / L->down, w = m->W / L->down;
    const int hin = L->from[0] >= 0 ? m->H / m->L[L->from[0]].down : m->H;
    const int win = L->from[0] >= 0 ? m->W / m->L[L->from[0]].down : m->W;
    const hview in = input_view(m, L->from[0]);
    switch (L->type) {
    case YL_CONV:
        if (i == 0 && m->use_s2d0) return hconv_silu(c, &m->s2d0, in, hin / 2, win / 2, NULL, L->hv);
        return hconv_silu(c, &L->conv, in, hin, win, NULL, L->hv);
    case YL_C3: {
        /* scratch: 0 = cv1 out, 1 = bottleneck middle, 2/3 = bottleneck outputs, 5 = the concatenation */
        const int c_ = L->cv1.c2;
        const hview lo = scratch_view(m, 5, c_, 2 * c_, 0), hi = scratch_view(m, 5, c_, 2 * c_, c_);
        const hview cat = scratch_view(m, 5, 2 * c_, 2 * c_, 0);
        const hview t = scratch_view(m, 1, c_, c_, 0);
        hview cur = L->nb == 0 ? lo : scratch_view(m, 0, c_, c_, 0);
        ODL_CHECK(hconv_silu(c, &L->cv1, in, hin, win, NULL, cur));
        for (int j = 0; j < L->nb; j++) {
            const hview nxt = j == L->nb - 1 ? lo : scratch_view(m, 2 + (j & 1), c_, c_, 0);
            ODL_CHECK(hconv_silu(c, &L->bcv1[j], cur, h, w, NULL, t));
            ODL_CHECK(hconv_silu(c, &L->bcv2[j], t, h, w, L->shortcut ? &cur : NULL, nxt));
            cur = nxt;
        }
        ODL_CHECK(hconv_silu(c, &L->cv2, in, hin, win, NULL, hi));
        return hconv_silu(c, &L->cv3, cat, h, w, NULL, L->hv);
    }
    case YL_SPPF: {
        const int c_ = L->cv1.c2, k = L->pool_k;
        hview y[4];
        for (int s = 0; s < 4; s++) y[s] = scratch_view(m, 4, c_, 4 * c_, s * c_);
        ODL_CHECK(hconv_silu(c, &L->cv1, in, hin, win, NULL, y[0]));
        odl_pool2d_shape ps = {N, c_, h, w, k, k, 1, 1, k / 2, k / 2, h, w};
        for (int s = 1; s < 4; s++) ODL_CHECK(c->be->maxpool2d_f16(&ps, y[s - 1].p, y[s - 1].ld, y[s].p, y[s].ld));
        const hview cat = scratch_view(m, 4, 4 * c_, 4 * c_, 0);
        return hconv_silu(c, &L->cv2, cat, h, w, NULL, L->hv);
    }
    case YL_UPSAMPLE:
        return c->be->upsample2x_f16(N, hin, win, in.C, in.p, in.ld, L->hv.p, L->hv.ld);
    case YL_CONCAT: {
        int off = 0;
        for (int j = 0; j < L->nfrom; j++) {
            const int src = L->from[j];
            if (src < 0) return ODL_ERR(ODL_E_UNSUPPORTED, "yolov5 --half: Concat of the network input");
            const hview v = m->L[src].hv;
            if (m->L[src].cat_into != i)
                ODL_CHECK(c->be->copy_f16((int64_t)N * h * w, v.C, v.p, v.ld, L->hv.p + off, L->hv.ld));
            off += v.C;
        }
        return ODL_OK;
    }
    case YL_DETECT: {
        const int64_t rows = L->out.shape[1];
        int64_t off = 0;
        float *head = (float *)m->scratch[0].data; /* [N, ny, nx, na * no] float32 */
        for (int l = 0; l < m->nl; l++) {
            const int src = L->from[l];
            const int ny = m->H / m->L[src].down, nx = m->W / m->L[src].down;
            const int64_t ldh = (int64_t)m->na * m->no;
            if (c->be->yolov5_detect_head_f16) {
                /* decoding fused into the head's epilogue: the head output never reaches memory */
                odl_conv2d_f16_args a;
                odl_detect_args d = {(float *)L->out.data, N, m->na, m->no, ny, nx, rows, off, m->strides[l],
                                     &m->anchors[l][0][0]};
                ODL_CHECK(hconv_args(c, &L->heads[l], m->L[src].hv, ny, nx, NULL, ODL_ACT_NONE, head, ldh, 1, &a));
                ODL_CHECK(c->be->yolov5_detect_head_f16(&a, &d));
                off += (int64_t)m->na * ny * nx;
                continue;
            }
            ODL_CHECK(hconv(c, &L->heads[l], m->L[src].hv, ny, nx, NULL, ODL_ACT_NONE, head, ldh, 1));
            ODL_CHECK(yolov5_detect_decode(m, head, (float *)L->out.data, ny, nx, rows, off, l, 1));
            off += (int64_t)m->na * ny * nx;
        }
        return ODL_OK;
    }
    }
    return ODL_ERR(ODL_E_INTERNAL, "yolov5: layer %d has unknown type %d", i, (int)L->type);
}

odl_status yolov5_half_forward(odl_yolov5 *m, const odl_tensor *x) {
    hctx c = {m, odl_backend_for(m->dev), m->N};
    if (!c.be || !c.be->conv2d_f16)
        return ODL_ERR(ODL_E_UNSUPPORTED, "yolov5 --half: no float16 kernels on %s", odl_device_name(m->dev));
    const int block = m->use_s2d0 ? 2 : 1;
    ODL_CHECK(c.be->nchw_f32_to_nhwc_f16(m->N, 3, m->H, m->W, (const float *)x->data, block, m->use_s2d0 ? 16 : IMG_CPAD,
                                         (odl_half *)m->hinput.data));
    for (int i = 0; i < m->nlayers; i++) {
        odl_status st = half_layer(&c, i);
        if (st != ODL_OK) {
            odl_error_prefix("yolov5 --half layer %d (%s)", i, odl_yolov5_layer_type(m, i));
            return st;
        }
        ODL_CHECK(yolov5_prof_mark(m, i + 1));
    }
    return ODL_OK;
}

odl_status yolov5_half_layer_to_host(const odl_yolov5 *m, int i, float *dst, size_t count) {
    const ylayer *L = &m->L[i];
    const int N = m->N, h = m->H / L->down, w = m->W / L->down, C = L->hv.C;
    const int64_t pix = (int64_t)N * h * w;
    if ((size_t)(pix * C) != count)
        return ODL_ERR(ODL_E_INVAL, "odl_yolov5_layer_output_host: layer %d has %lld values, %zu asked for", i,
                       (long long)(pix * C), count);
    /* the pixels' span of the (possibly wider) buffer, from this layer's first channel */
    const int64_t span = (pix - 1) * L->hv.ld + C;
    odl_half *tmp = malloc((size_t)span * sizeof(odl_half));
    if (!tmp) return ODL_ERR(ODL_E_NOMEM, "layer %d output: %lld bytes", i, (long long)(span * 2));
    odl_tensor v;
    memset(&v, 0, sizeof v);
    v.data = L->hv.p;
    v.dtype = ODL_F16;
    v.device = m->dev;
    v.ndim = 1;
    v.shape[0] = span;
    odl_status st = odl_tensor_copy_to_host(&v, tmp, (size_t)span * sizeof(odl_half));
    if (st == ODL_OK)
        for (int n = 0; n < N; n++)
            for (int c = 0; c < C; c++)
                for (int64_t p = 0; p < (int64_t)h * w; p++)
                    dst[((int64_t)n * C + c) * h * w + p] = odl_half_to_float(tmp[((int64_t)n * h * w + p) * L->hv.ld + c]);
    free(tmp);
    return st;
}
