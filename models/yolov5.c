/* YOLOv5 inference network built from the description stored with its weights. See
 * include/odl/yolov5.h for the model definition and the sources of every formula. */
#include "odl/yolov5.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "odl/h5io.h"
#include "odl/ops.h"
#include "models/yolov5_impl.h"

static void prof_free(odl_yolov5 *m);

/* ------------------------------------------------------------------------------------------------
 * Reading the weights file: through odl/h5io.h (the one HDF5 reader of the library), with messages that
 * name the file, the object and the part of the description that implied it
 * ---------------------------------------------------------------------------------------------- */

/* String attribute obj@name; *found = 0 when it (or obj) is absent. */
static odl_status h5_attr_str(odl_h5_reader *r, const char *obj, const char *name, char *out, size_t cap, int *found) {
    *found = 0;
    out[0] = 0;
    odl_status st = odl_h5_reader_attr_str(r, obj, name, out, cap);
    if (st == ODL_E_NOTFOUND) return ODL_OK;
    if (st != ODL_OK) return st;
    *found = 1;
    return ODL_OK;
}

/* 1..cap numbers of attribute obj@name (integer or float) as int (as_int) or double; *n_out = count. */
static odl_status h5_attr_num(odl_h5_reader *r, const char *obj, const char *name, int as_int, void *out, int cap,
                              int *n_out, const char *path, const char *where) {
    double v[Y_MAX_FROM];
    int n = 0;
    if (cap > Y_MAX_FROM) cap = Y_MAX_FROM;
    odl_status st = odl_h5_reader_attr_f64s(r, obj, name, v, cap, &n);
    if (st == ODL_E_NOTFOUND) return ODL_ERR(ODL_E_FORMAT, "%s: %s lacks attribute '%s'", path, where, name);
    if (st != ODL_OK) {
        odl_error_prefix("%s: attribute '%s' of %s", path, name, where);
        return ODL_E_FORMAT;
    }
    for (int i = 0; i < n; i++) {
        if (as_int) ((int *)out)[i] = (int)v[i];
        else ((double *)out)[i] = v[i];
    }
    if (n_out) *n_out = n;
    return ODL_OK;
}

/* Read a float dataset as float32 with the expected shape (a -1 matches anything); the reader verifies
 * its crc32 attribute when present. */
static odl_status h5_read_f32(odl_h5_reader *r, const char *name, int ndim, const int64_t *expect, float **data,
                              int64_t *shape_out, const char *path, const char *what) {
    *data = NULL;
    if (!odl_h5_reader_has(r, name)) return ODL_ERR(ODL_E_FORMAT, "%s: missing tensor /%s (%s)", path, name, what);
    odl_h5_info info;
    ODL_CHECK(odl_h5_reader_info(r, name, &info));
    int ok = info.ndim == ndim;
    for (int i = 0; ok && i < ndim; i++)
        if (expect[i] >= 0 && expect[i] != info.shape[i]) ok = 0;
    if (!ok) {
        char a[128], b[128];
        return ODL_ERR(ODL_E_FORMAT, "%s: tensor /%s has shape %s but %s implies %s", path, name,
                       odl_dims_str(info.ndim, info.shape, a, sizeof a), what, odl_dims_str(ndim, expect, b, sizeof b));
    }
    if (info.dtype != ODL_F32 && info.dtype != ODL_F64)
        return ODL_ERR(ODL_E_FORMAT, "%s: tensor /%s is not float32 or float64", path, name);
    float *buf = malloc(sizeof(float) * (size_t)(info.numel > 0 ? info.numel : 1));
    if (!buf) return ODL_ERR(ODL_E_NOMEM, "%s: cannot allocate %lld floats for /%s", path, (long long)info.numel, name);
    odl_status st = odl_h5_reader_read(r, name, ODL_F32, info.ndim, info.shape, buf);
    if (st != ODL_OK) {
        free(buf);
        odl_error_trace(__FILE__, __LINE__);
        return st;
    }
    *data = buf;
    if (shape_out)
        for (int i = 0; i < info.ndim; i++) shape_out[i] = info.shape[i];
    return ODL_OK;
}

/* ------------------------------------------------------------------------------------------------
 * Building
 * ---------------------------------------------------------------------------------------------- */

#define Y_STAGE_ALIGN 256

odl_status yolov5_stage(odl_yolov5 *m, odl_tensor *t, odl_dtype dtype, int ndim, const int64_t *shape, const void *host) {
    ystage *s = &m->stage;
    memset(t, 0, sizeof *t);
    t->dtype = dtype;
    t->ndim = ndim;
    for (int i = 0; i < ODL_MAX_DIMS; i++) t->shape[i] = i < ndim ? shape[i] : 1;
    const size_t n = odl_tensor_nbytes(t), off = (s->len + Y_STAGE_ALIGN - 1) / Y_STAGE_ALIGN * Y_STAGE_ALIGN;
    if (off + n > s->cap) {
        size_t cap = s->cap ? s->cap * 2 : (size_t)1 << 20;
        while (cap < off + n) cap *= 2;
        unsigned char *h = realloc(s->host, cap);
        if (!h) return ODL_ERR(ODL_E_NOMEM, "%s: staging %zu bytes of weights", m->path, cap);
        s->host = h;
        s->cap = cap;
    }
    if (s->n == s->ncap) {
        int nc = s->ncap ? 2 * s->ncap : 256;
        odl_tensor **nt = realloc(s->t, (size_t)nc * sizeof *nt);
        if (nt) s->t = nt;
        size_t *no = nt ? realloc(s->off, (size_t)nc * sizeof *no) : NULL;
        if (!no) return ODL_ERR(ODL_E_NOMEM, "%s: staging %d tensors", m->path, nc);
        s->off = no;
        s->ncap = nc;
    }
    memset(s->host + s->len, 0, off - s->len);
    memcpy(s->host + off, host, n);
    s->t[s->n] = t;
    s->off[s->n++] = off;
    s->len = off + n;
    return ODL_OK;
}

odl_status yolov5_stage_commit(odl_yolov5 *m, odl_tensor *arena) {
    ystage *s = &m->stage;
    int64_t n[1] = {(int64_t)(s->len ? s->len : 1)};
    ODL_CHECK(odl_tensor_alloc(arena, m->dev, ODL_U8, 1, n));
    odl_status st = s->len ? odl_tensor_copy_from_host(arena, s->host, s->len) : ODL_OK;
    if (st != ODL_OK) {
        odl_tensor_free(arena);
        return st;
    }
    for (int i = 0; i < s->n; i++) {
        s->t[i]->data = (unsigned char *)arena->data + s->off[i];
        s->t[i]->device = m->dev;
        s->t[i]->owns = 0;
    }
    s->len = 0;
    s->n = 0;
    return ODL_OK;
}

void yolov5_stage_free(ystage *s) {
    free(s->host);
    free(s->t);
    free(s->off);
    memset(s, 0, sizeof *s);
}

static odl_status upload(odl_yolov5 *m, odl_tensor *t, int ndim, const int64_t *shape, const float *host) {
    return yolov5_stage(m, t, ODL_F32, ndim, shape, host);
}

/* Load prefix/conv/weight and prefix/bn/{weight,bias,running_mean,running_var}, fold BN. */
static odl_status load_conv(odl_yolov5 *m, odl_h5_reader *f, const char *prefix, int c1, int c2, int k, int s, int p,
                            float eps, const char *what, yconv *cv) {
    cv->c1 = c1;
    cv->c2 = c2;
    cv->k = k;
    cv->s = s;
    cv->p = p;
    char name[256];
    float *w = NULL, *g = NULL, *be = NULL, *mu = NULL, *var = NULL, *b = NULL;
    odl_status st = ODL_OK;
    int64_t ws[4] = {c2, c1, k, k}, cs[1] = {c2};
    snprintf(name, sizeof name, "%s/conv/weight", prefix);
    ODL_CHECK_GOTO(h5_read_f32(f, name, 4, ws, &w, NULL, m->path, what), st, out);
    snprintf(name, sizeof name, "%s/bn/weight", prefix);
    ODL_CHECK_GOTO(h5_read_f32(f, name, 1, cs, &g, NULL, m->path, what), st, out);
    snprintf(name, sizeof name, "%s/bn/bias", prefix);
    ODL_CHECK_GOTO(h5_read_f32(f, name, 1, cs, &be, NULL, m->path, what), st, out);
    snprintf(name, sizeof name, "%s/bn/running_mean", prefix);
    ODL_CHECK_GOTO(h5_read_f32(f, name, 1, cs, &mu, NULL, m->path, what), st, out);
    snprintf(name, sizeof name, "%s/bn/running_var", prefix);
    ODL_CHECK_GOTO(h5_read_f32(f, name, 1, cs, &var, NULL, m->path, what), st, out);
    b = malloc(sizeof(float) * c2);
    if (!b) {
        st = ODL_ERR(ODL_E_NOMEM, "%s: folding %s", m->path, prefix);
        goto out;
    }
    /* fuse_conv_and_bn (YOLOv5 utils/torch_utils.py), float32 */
    const int64_t per = (int64_t)c1 * k * k;
    for (int o = 0; o < c2; o++) {
        float sc = g[o] / sqrtf(eps + var[o]);
        for (int64_t i = 0; i < per; i++) w[o * per + i] *= sc;
        b[o] = be[o] - g[o] * mu[o] / sqrtf(var[o] + eps);
    }
    ODL_CHECK_GOTO(upload(m, &cv->w, 4, ws, w), st, out);
    ODL_CHECK_GOTO(upload(m, &cv->b, 1, cs, b), st, out);
    m->n_params += c2 * per + c2;
out:
    free(w);
    free(g);
    free(be);
    free(mu);
    free(var);
    free(b);
    return st;
}

static void free_conv(yconv *c) {
    odl_tensor_free(&c->w);
    odl_tensor_free(&c->b);
}

/* YOLOv5's make_divisible(c2 * gw, 8) */
static int scale_width(int c2, double gw) { return (int)(ceil(c2 * gw / 8.0) * 8.0); }
/* YOLOv5's n = max(round(n * gd), 1) if n > 1 else n */
static int scale_depth(int n, double gd) {
    if (n <= 1) return n;
    int v = (int)nearbyint(n * gd);
    return v < 1 ? 1 : v;
}

/* What build_layer's per-type parts share: the file, the layer's group, its inputs' channels and strides. */
typedef struct ybuild {
    odl_yolov5 *m;
    odl_h5_reader *f;
    const char *group; /* "yolov5/layers/NN" */
    const char *what;  /* "layer N (Type)", for messages */
    int i;             /* layer index */
    int n;             /* the description's repeat count */
    double gd, gw;
    float eps;
    int c1, d1;        /* channels and stride of the first input */
    const int *ch, *down;
} ybuild;

static odl_status attr_int(const ybuild *b, const char *name, int *v) {
    return h5_attr_num(b->f, b->group, name, 1, v, 1, NULL, b->m->path, b->what);
}

static odl_status build_conv(const ybuild *b, ylayer *L) {
    odl_yolov5 *m = b->m;
    int c2 = 0, k = 1, sv = 1, p = -1;
    char prefix[128];
    ODL_CHECK(attr_int(b, "c2", &c2));
    ODL_CHECK(attr_int(b, "k", &k));
    ODL_CHECK(attr_int(b, "s", &sv));
    ODL_CHECK(attr_int(b, "p", &p));
    if (k < 1 || sv < 1 || sv > 2 || b->n != 1)
        return ODL_ERR(ODL_E_FORMAT, "%s: %s: unsupported k=%d s=%d n=%d", m->path, b->what, k, sv, b->n);
    if (p < 0) p = k / 2;
    L->c_out = scale_width(c2, b->gw);
    snprintf(prefix, sizeof prefix, "model/%d", b->i);
    ODL_CHECK(load_conv(m, b->f, prefix, b->c1, L->c_out, k, sv, p, b->eps, b->what, &L->conv));
    if (2 * p < k - sv || 2 * p > k - 1) /* output must be exactly input / s */
        return ODL_ERR(ODL_E_FORMAT, "%s: %s: padding %d with kernel %d does not keep the size / %d", m->path, b->what,
                       p, k, sv);
    L->down = b->d1 * sv;
    return ODL_OK;
}

static odl_status build_c3(const ybuild *b, ylayer *L) {
    odl_yolov5 *m = b->m;
    int c2 = 0, shortcut = 1, i = b->i;
    char prefix[128];
    ODL_CHECK(attr_int(b, "c2", &c2));
    ODL_CHECK(attr_int(b, "shortcut", &shortcut));
    L->c_out = scale_width(c2, b->gw);
    int c_ = L->c_out / 2; /* int(c2 * 0.5) */
    L->nb = scale_depth(b->n, b->gd);
    L->shortcut = shortcut != 0;
    snprintf(prefix, sizeof prefix, "model/%d/cv1", i);
    ODL_CHECK(load_conv(m, b->f, prefix, b->c1, c_, 1, 1, 0, b->eps, b->what, &L->cv1));
    snprintf(prefix, sizeof prefix, "model/%d/cv2", i);
    ODL_CHECK(load_conv(m, b->f, prefix, b->c1, c_, 1, 1, 0, b->eps, b->what, &L->cv2));
    snprintf(prefix, sizeof prefix, "model/%d/cv3", i);
    ODL_CHECK(load_conv(m, b->f, prefix, 2 * c_, L->c_out, 1, 1, 0, b->eps, b->what, &L->cv3));
    L->bcv1 = calloc((size_t)(L->nb ? L->nb : 1), sizeof(yconv));
    L->bcv2 = calloc((size_t)(L->nb ? L->nb : 1), sizeof(yconv));
    if (!L->bcv1 || !L->bcv2) return ODL_ERR(ODL_E_NOMEM, "%s: %s", m->path, b->what);
    for (int j = 0; j < L->nb; j++) {
        snprintf(prefix, sizeof prefix, "model/%d/m/%d/cv1", i, j);
        ODL_CHECK(load_conv(m, b->f, prefix, c_, c_, 1, 1, 0, b->eps, b->what, &L->bcv1[j]));
        snprintf(prefix, sizeof prefix, "model/%d/m/%d/cv2", i, j);
        ODL_CHECK(load_conv(m, b->f, prefix, c_, c_, 3, 1, 1, b->eps, b->what, &L->bcv2[j]));
    }
    snprintf(prefix, sizeof prefix, "model/%d/m/%d", i, L->nb);
    if (odl_h5_reader_exists(b->f, prefix))
        return ODL_ERR(ODL_E_FORMAT, "%s: %s holds more than the %d bottlenecks its description implies "
                                     "(depth_multiple mismatch?)", m->path, b->what, L->nb);
    L->down = b->d1;
    return ODL_OK;
}

static odl_status build_sppf(const ybuild *b, ylayer *L) {
    odl_yolov5 *m = b->m;
    int c2 = 0, k = 1;
    char prefix[128];
    ODL_CHECK(attr_int(b, "c2", &c2));
    ODL_CHECK(attr_int(b, "k", &k));
    if (k < 1 || k % 2 == 0) return ODL_ERR(ODL_E_FORMAT, "%s: %s: pool size %d must be odd", m->path, b->what, k);
    L->c_out = scale_width(c2, b->gw);
    int c_ = b->c1 / 2;
    L->pool_k = k;
    snprintf(prefix, sizeof prefix, "model/%d/cv1", b->i);
    ODL_CHECK(load_conv(m, b->f, prefix, b->c1, c_, 1, 1, 0, b->eps, b->what, &L->cv1));
    snprintf(prefix, sizeof prefix, "model/%d/cv2", b->i);
    ODL_CHECK(load_conv(m, b->f, prefix, 4 * c_, L->c_out, 1, 1, 0, b->eps, b->what, &L->cv2));
    L->down = b->d1;
    return ODL_OK;
}

static odl_status build_upsample(const ybuild *b, ylayer *L) {
    L->c_out = b->c1;
    if (b->d1 % 2)
        return ODL_ERR(ODL_E_FORMAT, "%s: %s upsamples an input of stride %d", b->m->path, b->what, b->d1);
    L->down = b->d1 / 2;
    return ODL_OK;
}

static odl_status build_concat(const ybuild *b, ylayer *L) {
    L->c_out = 0;
    for (int j = 0; j < L->nfrom; j++) {
        L->c_out += b->ch[L->from[j] + 1];
        if (b->down[L->from[j] + 1] != b->d1)
            return ODL_ERR(ODL_E_FORMAT, "%s: %s joins layers of strides %d and %d", b->m->path, b->what, b->d1,
                           b->down[L->from[j] + 1]);
    }
    L->down = b->d1;
    return ODL_OK;
}

/* One Detect head: the 1x1 convolution of level l (weight and bias, no BN). */
static odl_status load_head(const ybuild *b, const ylayer *L, int l, yconv *h) {
    odl_yolov5 *m = b->m;
    int cl = b->ch[L->from[l] + 1];
    char prefix[128];
    h->c1 = cl;
    h->c2 = m->na * m->no;
    h->k = h->s = 1;
    h->p = 0;
    float *w = NULL, *bias = NULL;
    int64_t ws[4] = {h->c2, cl, 1, 1}, bs[1] = {h->c2};
    snprintf(prefix, sizeof prefix, "model/%d/m/%d/weight", b->i, l);
    ODL_CHECK(h5_read_f32(b->f, prefix, 4, ws, &w, NULL, m->path, b->what));
    snprintf(prefix, sizeof prefix, "model/%d/m/%d/bias", b->i, l);
    odl_status st = h5_read_f32(b->f, prefix, 1, bs, &bias, NULL, m->path, b->what);
    if (st == ODL_OK) st = upload(m, &h->w, 4, ws, w);
    if (st == ODL_OK) st = upload(m, &h->b, 1, bs, bias);
    free(w);
    free(bias);
    if (st != ODL_OK) return st;
    m->n_params += h->c2 * cl + h->c2;
    return ODL_OK;
}

static odl_status build_detect(const ybuild *b, ylayer *L) {
    odl_yolov5 *m = b->m;
    int nc = 0;
    ODL_CHECK(attr_int(b, "nc", &nc));
    if (nc != m->nc || L->nfrom != m->nl)
        return ODL_ERR(ODL_E_FORMAT, "%s: %s has %d classes and %d inputs; the model has %d classes, %d anchor levels",
                       m->path, b->what, nc, L->nfrom, m->nc, m->nl);
    L->heads = calloc((size_t)m->nl, sizeof(yconv));
    if (!L->heads) return ODL_ERR(ODL_E_NOMEM, "%s: %s", m->path, b->what);
    for (int l = 0; l < m->nl; l++) {
        ODL_CHECK(load_head(b, L, l, &L->heads[l]));
        int dl = b->down[L->from[l] + 1];
        if ((float)dl != m->strides[l])
            return ODL_ERR(ODL_E_FORMAT, "%s: Detect level %d reads layer %d of stride %d, the stored stride is %g",
                           m->path, l, L->from[l], dl, m->strides[l]);
    }
    L->c_out = m->no;
    L->down = 1;
    return ODL_OK;
}

/* Layer i of the description (/yolov5/layers/NN: type, from, n and the type's arguments) and its tensors.
 * ch[] and down[] are indexed by layer + 1 (slot 0 = the network input). */
static odl_status build_layer(odl_yolov5 *m, odl_h5_reader *f, int i, double gd, double gw, float eps, const int *ch,
                              const int *down) {
    typedef odl_status (*build_fn)(const ybuild *, ylayer *);
    static const build_fn BUILD[] = {build_conv, build_c3, build_sppf, build_upsample, build_concat, build_detect};
    ylayer *L = &m->L[i];
    char gname[64], what[96], s[64];
    int found = 0;
    snprintf(gname, sizeof gname, "yolov5/layers/%02d", i);
    if (!odl_h5_reader_exists(f, gname))
        return ODL_ERR(ODL_E_FORMAT, "%s: missing /%s (layer %d of the description)", m->path, gname, i);
    int from[Y_MAX_FROM], nfrom = 0, n = 1;
    ODL_CHECK(h5_attr_str(f, gname, "type", s, sizeof s, &found));
    if (!found) return ODL_ERR(ODL_E_FORMAT, "%s: layer %d has no 'type'", m->path, i);
    int t = -1;
    for (int j = 0; j < 6; j++)
        if (!strcmp(s, YTYPE_NAMES[j])) t = j;
    if (t < 0) return ODL_ERR(ODL_E_FORMAT, "%s: layer %d has unsupported type '%s'", m->path, i, s);
    L->type = (ytype)t;
    snprintf(what, sizeof what, "layer %d (%s)", i, s);
    ODL_CHECK(h5_attr_num(f, gname, "from", 1, from, Y_MAX_FROM, &nfrom, m->path, what));
    ODL_CHECK(h5_attr_num(f, gname, "n", 1, &n, 1, NULL, m->path, what));
    L->nfrom = nfrom;
    for (int j = 0; j < nfrom; j++) {
        int a = from[j] < 0 ? i + from[j] : from[j];
        if (a < -1 || a >= i || (a == -1 && i != 0))
            return ODL_ERR(ODL_E_FORMAT, "%s: %s reads layer %d, which does not precede it", m->path, what, from[j]);
        L->from[j] = a;
    }
    if (L->type != YL_CONCAT && L->type != YL_DETECT && nfrom != 1)
        return ODL_ERR(ODL_E_FORMAT, "%s: %s must have one input, has %d", m->path, what, nfrom);
    ybuild b = {m, f, gname, what, i, n, gd, gw, eps, ch[L->from[0] + 1], down[L->from[0] + 1], ch, down};
    ODL_CHECK(BUILD[L->type](&b, L));
    return ODL_OK;
}

static void free_layers(odl_yolov5 *m) {
    if (!m->L) return;
    for (int i = 0; i < m->nlayers; i++) {
        ylayer *L = &m->L[i];
        free_conv(&L->conv);
        free_conv(&L->cv1);
        free_conv(&L->cv2);
        free_conv(&L->cv3);
        for (int j = 0; j < L->nb; j++) {
            if (L->bcv1) free_conv(&L->bcv1[j]);
            if (L->bcv2) free_conv(&L->bcv2[j]);
        }
        free(L->bcv1);
        free(L->bcv2);
        if (L->heads)
            for (int l = 0; l < m->nl; l++) free_conv(&L->heads[l]);
        free(L->heads);
        odl_tensor_free(&L->out);
    }
    free(m->L);
    m->L = NULL;
}

void odl_yolov5_free(odl_yolov5 *m) {
    if (!m) return;
    yolov5_graphs_drop(m);
    yolov5_half_release(m);
    prof_free(m);
    free_layers(m);
    odl_tensor_free(&m->warena);
    yolov5_stage_free(&m->stage);
    for (int i = 0; i < Y_NSCRATCH; i++) odl_tensor_free(&m->scratch[i]);
    odl_tensor_free(&m->input);
    if (m->names)
        for (int i = 0; i < m->nc; i++) free(m->names[i]);
    free(m->names);
    free(m);
}

static odl_status read_names(odl_yolov5 *m, odl_h5_reader *f) {
    m->names = calloc((size_t)m->nc, sizeof(char *));
    if (!m->names) return ODL_ERR(ODL_E_NOMEM, "%s: class names", m->path);
    if (!odl_h5_reader_has(f, "yolov5/names")) return ODL_ERR(ODL_E_FORMAT, "%s: missing /yolov5/names", m->path);
    odl_status st = odl_h5_reader_read_strings(f, "yolov5/names", m->nc, m->names);
    if (st == ODL_E_INVAL) {
        odl_error_prefix("%s: /yolov5/names must hold %d strings", m->path, m->nc);
        return ODL_E_FORMAT;
    }
    return st;
}

odl_status odl_yolov5_load(const char *path, odl_device dev, odl_yolov5 **out) {
    ODL_CHECK(odl_yolov5_read(path, out));
    odl_status st = odl_yolov5_upload(*out, dev);
    if (st != ODL_OK) {
        odl_yolov5_free(*out);
        *out = NULL;
    }
    return st;
}

odl_status odl_yolov5_upload(odl_yolov5 *m, odl_device dev) {
    if (!m) return ODL_ERR(ODL_E_INVAL, "odl_yolov5_upload: NULL model");
    if (m->warena.data) return ODL_ERR(ODL_E_INVAL, "%s: the weights are already on %s", m->path, odl_device_name(m->dev));
    m->dev = dev;
    odl_status st = yolov5_stage_commit(m, &m->warena); /* every weight in one copy */
    if (st == ODL_OK) yolov5_stage_free(&m->stage);
    return st;
}

odl_status odl_yolov5_read(const char *path, odl_yolov5 **out) {
    if (!path || !out) return ODL_ERR(ODL_E_INVAL, "odl_yolov5_read: NULL argument");
    *out = NULL;
    struct stat sb;
    if (stat(path, &sb) != 0) return ODL_ERR(ODL_E_NOTFOUND, "%s: no such weights file", path);
    if (S_ISDIR(sb.st_mode)) return ODL_ERR(ODL_E_IO, "%s: is a directory, not a weights file", path);
    odl_status st = ODL_OK;
    odl_h5_reader *f = NULL;
    odl_yolov5 *m = calloc(1, sizeof *m);
    if (!m) {
        st = ODL_ERR(ODL_E_NOMEM, "odl_yolov5_load");
        goto out;
    }
    m->dev = odl_cpu(); /* until the upload */
    snprintf(m->path, sizeof m->path, "%s", path);
    st = odl_h5_reader_open(path, &f);
    if (st == ODL_E_FORMAT) odl_error_prefix("YOLOv5 weights (convert a .pt with tools/convert_yolov5.py)");
    if (st != ODL_OK) goto out;
    char kind[64];
    int found = 0;
    ODL_CHECK_GOTO(h5_attr_str(f, "/", "model", kind, sizeof kind, &found), st, out);
    if (!found || strcmp(kind, "yolov5") != 0 || !odl_h5_reader_exists(f, "yolov5")) {
        st = ODL_ERR(ODL_E_FORMAT, "%s: not YOLOv5 weights (root attribute model = '%s'%s); convert a YOLOv5 .pt with "
                     "tools/convert_yolov5.py", path, found ? kind : "(none)",
                     odl_h5_reader_exists(f, "yolov5") ? "" : ", no /yolov5 description");
        goto out;
    }
    double gd = 0, gw = 0, eps = 0;
    ODL_CHECK_GOTO(h5_attr_num(f, "yolov5", "nc", 1, &m->nc, 1, NULL, path, "/yolov5"), st, out);
    ODL_CHECK_GOTO(h5_attr_num(f, "yolov5", "num_layers", 1, &m->nlayers, 1, NULL, path, "/yolov5"), st, out);
    ODL_CHECK_GOTO(h5_attr_num(f, "yolov5", "depth_multiple", 0, &gd, 1, NULL, path, "/yolov5"), st, out);
    ODL_CHECK_GOTO(h5_attr_num(f, "yolov5", "width_multiple", 0, &gw, 1, NULL, path, "/yolov5"), st, out);
    ODL_CHECK_GOTO(h5_attr_num(f, "yolov5", "bn_eps", 0, &eps, 1, NULL, path, "/yolov5"), st, out);
    if (m->nc < 1 || m->nlayers < 2 || m->nlayers > 1000 || !(gd > 0) || !(gw > 0) || !(eps > 0)) {
        st = ODL_ERR(ODL_E_FORMAT, "%s: bad description: nc=%d layers=%d depth_multiple=%g width_multiple=%g bn_eps=%g",
                     path, m->nc, m->nlayers, gd, gw, eps);
        goto out;
    }
    /* anchors [nl, na, 2] in pixels, strides [nl] */
    {
        float *a = NULL, *s = NULL;
        int64_t ash[3] = {-1, -1, 2}, got[3];
        ODL_CHECK_GOTO(h5_read_f32(f, "yolov5/anchors", 3, ash, &a, got, path, "the format ([levels, anchors, 2])"), st, out);
        m->nl = (int)got[0];
        m->na = (int)got[1];
        if (m->nl < 1 || m->nl > Y_MAX_LEVELS || m->na < 1 || m->na > Y_MAX_ANCHORS) {
            free(a);
            st = ODL_ERR(ODL_E_FORMAT, "%s: %d anchor levels of %d anchors (at most %d and %d)", path, m->nl, m->na,
                         Y_MAX_LEVELS, Y_MAX_ANCHORS);
            goto out;
        }
        for (int l = 0; l < m->nl; l++)
            for (int j = 0; j < m->na; j++) {
                m->anchors[l][j][0] = a[(l * m->na + j) * 2];
                m->anchors[l][j][1] = a[(l * m->na + j) * 2 + 1];
            }
        free(a);
        int64_t ssh[1] = {m->nl};
        ODL_CHECK_GOTO(h5_read_f32(f, "yolov5/strides", 1, ssh, &s, NULL, path, "the anchors"), st, out);
        for (int l = 0; l < m->nl; l++) m->strides[l] = s[l];
        free(s);
    }
    m->no = m->nc + 5;
    ODL_CHECK_GOTO(read_names(m, f), st, out);

    m->L = calloc((size_t)m->nlayers, sizeof(ylayer));
    int *ch = calloc((size_t)m->nlayers + 1, sizeof(int)), *down = calloc((size_t)m->nlayers + 1, sizeof(int));
    if (!m->L || !ch || !down) {
        free(ch);
        free(down);
        st = ODL_ERR(ODL_E_NOMEM, "%s: layers", path);
        goto out;
    }
    ch[0] = 3;
    down[0] = 1;
    for (int i = 0; i < m->nlayers; i++) {
        st = build_layer(m, f, i, gd, gw, (float)eps, ch, down);
        if (st != ODL_OK) break;
        if ((m->L[i].type == YL_DETECT) != (i == m->nlayers - 1)) {
            st = ODL_ERR(ODL_E_FORMAT, "%s: Detect must be the last layer (layer %d is %s)", path, i,
                         YTYPE_NAMES[m->L[i].type]);
            break;
        }
        ch[i + 1] = m->L[i].c_out;
        down[i + 1] = m->L[i].down;
        if (down[i + 1] > m->max_stride) m->max_stride = down[i + 1];
    }
    free(ch);
    free(down);
out:
    odl_h5_reader_close(f);
    if (st != ODL_OK) {
        odl_yolov5_free(m);
        return st;
    }
    *out = m;
    return ODL_OK;
}

odl_device odl_yolov5_device(const odl_yolov5 *m) { return m->dev; }
int odl_yolov5_num_classes(const odl_yolov5 *m) { return m->nc; }
const char *odl_yolov5_class_name(const odl_yolov5 *m, int c) {
    return (m && c >= 0 && c < m->nc) ? m->names[c] : NULL;
}
int odl_yolov5_num_layers(const odl_yolov5 *m) { return m->nlayers; }
const char *odl_yolov5_layer_type(const odl_yolov5 *m, int i) {
    return (m && i >= 0 && i < m->nlayers) ? YTYPE_NAMES[m->L[i].type] : NULL;
}
int odl_yolov5_max_stride(const odl_yolov5 *m) { return m->max_stride; }
int64_t odl_yolov5_num_params(const odl_yolov5 *m) { return m->n_params; }

int64_t odl_yolov5_num_predictions(const odl_yolov5 *m, int H, int W) {
    int64_t a = 0;
    for (int l = 0; l < m->nl; l++) {
        int s = (int)m->strides[l];
        a += (int64_t)m->na * (H / s) * (W / s);
    }
    return a;
}

/* ------------------------------------------------------------------------------------------------
 * Buffers
 * ---------------------------------------------------------------------------------------------- */

odl_status yolov5_buf_set(odl_yolov5 *m, odl_tensor *t, size_t *cap, odl_dtype dtype, int64_t a, int64_t b, int64_t c,
                          int64_t d) {
    int64_t shape[4] = {a, b, c, d};
    int nd = d < 0 ? 3 : 4;
    size_t need = (size_t)(a * b * c * (d < 0 ? 1 : d)) * odl_dtype_size(dtype);
    if (t->data && *cap >= need) {
        t->ndim = nd;
        t->dtype = dtype;
        for (int i = 0; i < nd; i++) t->shape[i] = shape[i];
        return ODL_OK;
    }
    odl_tensor_free(t);
    *cap = 0;
    m->buf_gen++; /* whatever the allocation gives: a graph that used the old memory must not run again */
    ODL_CHECK(odl_tensor_alloc(t, m->dev, dtype, nd, shape));
    *cap = need;
    return ODL_OK;
}

/* Scratch slot shaped [N, C, H, W] for the forward (capacity ensured by prepare). */
static odl_tensor *scr(odl_yolov5 *m, int slot, int N, int C, int H, int W) {
    odl_tensor *t = &m->scratch[slot];
    t->ndim = 4;
    t->shape[0] = N;
    t->shape[1] = C;
    t->shape[2] = H;
    t->shape[3] = W;
    return t;
}

static void need_scr(size_t *need, int slot, int N, int C, int H, int W) {
    size_t b = (size_t)N * C * H * W * sizeof(float);
    if (b > need[slot]) need[slot] = b;
}

odl_status odl_yolov5_prepare(odl_yolov5 *m, int N, int H, int W) {
    if (!m) return ODL_ERR(ODL_E_INVAL, "odl_yolov5_prepare: NULL model");
    if (!m->warena.data) return ODL_ERR(ODL_E_INVAL, "%s: the weights are not on a device yet (odl_yolov5_upload)", m->path);
    if (N < 1 || H < m->max_stride || W < m->max_stride || H % m->max_stride || W % m->max_stride)
        return ODL_ERR(ODL_E_INVAL, "yolov5: input [%d, 3, %d, %d]: height and width must be positive multiples of %d",
                       N, H, W, m->max_stride);
    if (m->N == N && m->H == H && m->W == W) return ODL_OK;
    m->N = m->H = m->W = 0; /* until this prepare completes */
    size_t need[Y_NSCRATCH] = {0};
    for (int i = 0; i < m->nlayers; i++) {
        ylayer *L = &m->L[i];
        int h = H / L->down, w = W / L->down;
        if (L->type == YL_DETECT) {
            ODL_CHECK(yolov5_buf_set(m, &L->out, &L->out_cap, ODL_F32, N, odl_yolov5_num_predictions(m, H, W), m->no, -1));
            for (int l = 0; l < m->nl; l++) {
                int s = (int)m->strides[l];
                need_scr(need, 0, N, m->na * m->no, H / s, W / s);
            }
            continue;
        }
        ODL_CHECK(yolov5_buf_set(m, &L->out, &L->out_cap, ODL_F32, N, L->c_out, h, w));
        if (L->type == YL_C3) {
            int c_ = L->cv1.c2;
            for (int s = 0; s < 5; s++) need_scr(need, s, N, c_, h, w);
            need_scr(need, 5, N, 2 * c_, h, w);
        } else if (L->type == YL_SPPF) {
            int c_ = L->cv1.c2;
            for (int s = 0; s < 4; s++) need_scr(need, s, N, c_, h, w);
            need_scr(need, 4, N, 4 * c_, h, w);
        }
    }
    for (int s = 0; s < Y_NSCRATCH; s++)
        if (need[s]) ODL_CHECK(yolov5_buf_set(m, &m->scratch[s], &m->scratch_cap[s], ODL_F32, (int64_t)(need[s] / sizeof(float)), 1, 1, 1));
    ODL_CHECK(yolov5_buf_set(m, &m->input, &m->input_cap, ODL_F32, N, 3, H, W));
    if (m->half) ODL_CHECK(yolov5_half_prepare(m, N, H, W));
    m->N = N;
    m->H = H;
    m->W = W;
    return ODL_OK;
}

odl_status odl_yolov5_input(odl_yolov5 *m, int N, int H, int W, odl_tensor **x) {
    if (!x) return ODL_ERR(ODL_E_INVAL, "odl_yolov5_input: NULL output");
    ODL_CHECK(odl_yolov5_prepare(m, N, H, W));
    m->input.ndim = 4;
    m->input.shape[0] = N;
    m->input.shape[1] = 3;
    m->input.shape[2] = H;
    m->input.shape[3] = W;
    *x = &m->input;
    return ODL_OK;
}

const odl_tensor *odl_yolov5_layer_output(const odl_yolov5 *m, int i) {
    if (!m || i < 0 || i >= m->nlayers || !m->L[i].out.data || m->N == 0) return NULL;
    if (m->half && m->L[i].type != YL_DETECT) return NULL;
    return &m->L[i].out;
}

odl_status odl_yolov5_layer_output_host(const odl_yolov5 *m, int i, float *dst, size_t count) {
    if (!m || !dst || i < 0 || i >= m->nlayers || m->N == 0)
        return ODL_ERR(ODL_E_INVAL, "odl_yolov5_layer_output_host: no layer %d output (bad argument or no forward yet)", i);
    if (m->half && m->L[i].type != YL_DETECT) return yolov5_half_layer_to_host(m, i, dst, count);
    const odl_tensor *t = &m->L[i].out;
    if ((size_t)odl_tensor_numel(t) != count)
        return ODL_ERR(ODL_E_INVAL, "odl_yolov5_layer_output_host: layer %d has %lld values, %zu asked for", i,
                       (long long)odl_tensor_numel(t), count);
    return odl_tensor_copy_to_host(t, dst, count * sizeof(float));
}

odl_status odl_yolov5_set_half(odl_yolov5 *m, int half) {
    if (!m) return ODL_ERR(ODL_E_INVAL, "odl_yolov5_set_half: NULL model");
    half = half != 0;
    if (half == m->half) return ODL_OK;
    const odl_backend *be = odl_backend_for(m->dev);
    if (!be) return ODL_ERR(ODL_E_NODEV, "yolov5 --half: no backend for %s", odl_device_name(m->dev));
    if (half && !be->conv2d_f16)
        return ODL_ERR(ODL_E_UNSUPPORTED, "yolov5 --half: backend %s has no float16 kernels", be->name);
    yolov5_graphs_drop(m); /* their buffers are about to go */
    yolov5_half_release(m);
    for (int i = 0; i < m->nlayers; i++)
        if (m->L[i].type != YL_DETECT) {
            odl_tensor_free(&m->L[i].out);
            m->L[i].out_cap = 0;
        }
    m->half = half;
    m->N = m->H = m->W = 0; /* the next prepare sizes the buffers of the new mode */
    return ODL_OK;
}

int odl_yolov5_is_half(const odl_yolov5 *m) { return m ? m->half : 0; }

static void prof_free(odl_yolov5 *m) {
    if (!m->prof) return;
    for (int i = 0; i <= m->nlayers; i++)
        if (m->prof[i]) odl_event_destroy(m->prof[i]);
    free(m->prof);
    m->prof = NULL;
    m->prof_done = 0;
}

odl_status odl_yolov5_set_profile(odl_yolov5 *m, int on) {
    if (!m) return ODL_ERR(ODL_E_INVAL, "odl_yolov5_set_profile: NULL model");
    prof_free(m);
    if (!on) return ODL_OK;
    if (m->dev.type != ODL_DEV_CUDA) return ODL_ERR(ODL_E_UNSUPPORTED, "yolov5 per-layer timing needs a CUDA model");
    m->prof = calloc((size_t)m->nlayers + 1, sizeof(odl_event));
    if (!m->prof) return ODL_ERR(ODL_E_NOMEM, "yolov5 profiling events");
    for (int i = 0; i <= m->nlayers; i++) {
        odl_status st = odl_event_create(&m->prof[i]);
        if (st != ODL_OK) {
            prof_free(m);
            return st;
        }
    }
    return ODL_OK;
}

odl_status yolov5_prof_mark(odl_yolov5 *m, int k) {
    if (!m->prof) return ODL_OK;
    ODL_CHECK(odl_event_record(m->prof[k], odl_stream_current()));
    if (k == m->nlayers) m->prof_done = 1;
    return ODL_OK;
}

odl_status odl_yolov5_layer_ms(const odl_yolov5 *m, float *ms, int n) {
    if (!m || !ms || n < 0 || n > m->nlayers) return ODL_ERR(ODL_E_INVAL, "odl_yolov5_layer_ms: bad argument");
    if (!m->prof || !m->prof_done) return ODL_ERR(ODL_E_INVAL, "odl_yolov5_layer_ms: no profiled forward yet");
    ODL_CHECK(odl_event_synchronize(m->prof[m->nlayers]));
    for (int i = 0; i < n; i++) ODL_CHECK(odl_event_elapsed_ms(m->prof[i], m->prof[i + 1], &ms[i]));
    return ODL_OK;
}

/* ------------------------------------------------------------------------------------------------
 * Forward
 * ---------------------------------------------------------------------------------------------- */

static odl_status conv_fwd(const yconv *c, const odl_tensor *x, const odl_tensor *residual, odl_act act, odl_tensor *y) {
    return odl_conv2d_fwd(x, &c->w, &c->b, residual, act, c->s, c->p, y);
}

/* One Detect level through the backend's op (odl/backend.h yolov5_detect_decode); head on m's device. */
odl_status yolov5_detect_decode(const odl_yolov5 *m, const float *head, float *out, int ny, int nx, int64_t rows_total,
                                int64_t row_offset, int l, int nhwc) {
    const odl_backend *be = odl_backend_for(m->dev);
    if (!be) return ODL_E_NODEV;
    if (!be->yolov5_detect_decode)
        return ODL_ERR(ODL_E_UNSUPPORTED, "yolov5 Detect: no decoder for device %s", odl_device_name(m->dev));
    odl_detect_args d = {out, m->N, m->na, m->no, ny, nx, rows_total, row_offset, m->strides[l], &m->anchors[l][0][0]};
    return be->yolov5_detect_decode(&d, head, nhwc);
}

/* Channels [c0, c0 + c) of a [1, C, H, W] tensor: contiguous, a non-owning view. */
static odl_tensor channel_view(const odl_tensor *t, int c0, int c) {
    odl_tensor v = *t;
    v.owns = 0;
    v.shape[1] = c;
    v.data = (float *)t->data + (int64_t)c0 * t->shape[2] * t->shape[3];
    return v;
}

static const odl_tensor *layer_in(odl_yolov5 *m, const odl_tensor *x, int idx) {
    return idx < 0 ? x : &m->L[idx].out;
}

static odl_status run_layer(odl_yolov5 *m, const odl_tensor *x, int i) {
    ylayer *L = &m->L[i];
    const odl_tensor *in = layer_in(m, x, L->from[0]);
    const int N = m->N, h = m->H / L->down, w = m->W / L->down;
    switch (L->type) {
    case YL_CONV:
        return conv_fwd(&L->conv, in, NULL, ODL_ACT_SILU, &L->out);
    case YL_C3: {
        /* With N == 1 a channel range of the concat buffer is contiguous: the last bottleneck and cv2
         * write straight into its two halves and the concat copy disappears. */
        const int c_ = L->cv1.c2;
        odl_tensor *a = scr(m, 0, N, c_, h, w), *t = scr(m, 1, N, c_, h, w);
        odl_tensor *pp[2] = {scr(m, 2, N, c_, h, w), scr(m, 3, N, c_, h, w)};
        odl_tensor *b = scr(m, 4, N, c_, h, w), *cat = scr(m, 5, N, 2 * c_, h, w);
        odl_tensor lo, hi;
        const int direct = N == 1;
        if (direct) {
            lo = channel_view(cat, 0, c_);
            hi = channel_view(cat, c_, c_);
        }
        ODL_CHECK(conv_fwd(&L->cv1, in, NULL, ODL_ACT_SILU, (direct && L->nb == 0) ? &lo : a));
        odl_tensor *cur = (direct && L->nb == 0) ? &lo : a;
        for (int j = 0; j < L->nb; j++) {
            odl_tensor *nxt = (direct && j == L->nb - 1) ? &lo : pp[j & 1];
            ODL_CHECK(conv_fwd(&L->bcv1[j], cur, NULL, ODL_ACT_SILU, t));
            ODL_CHECK(conv_fwd(&L->bcv2[j], t, L->shortcut ? cur : NULL, ODL_ACT_SILU, nxt));
            cur = nxt;
        }
        ODL_CHECK(conv_fwd(&L->cv2, in, NULL, ODL_ACT_SILU, direct ? &hi : b));
        if (!direct) {
            const odl_tensor *xs[2] = {cur, b};
            ODL_CHECK(odl_concat_channels_fwd(2, xs, cat));
        }
        return conv_fwd(&L->cv3, cat, NULL, ODL_ACT_SILU, &L->out);
    }
    case YL_SPPF: {
        const int c_ = L->cv1.c2, k = L->pool_k;
        odl_tensor *y[4], yv[4];
        odl_tensor *cat = scr(m, 4, N, 4 * c_, h, w);
        for (int s = 0; s < 4; s++) {
            if (N == 1) { /* the four pieces live inside the concat buffer */
                yv[s] = channel_view(cat, s * c_, c_);
                y[s] = &yv[s];
            } else {
                y[s] = scr(m, s, N, c_, h, w);
            }
        }
        ODL_CHECK(conv_fwd(&L->cv1, in, NULL, ODL_ACT_SILU, y[0]));
        for (int s = 1; s < 4; s++) ODL_CHECK(odl_maxpool2d_fwd(y[s - 1], k, 1, k / 2, y[s], NULL));
        if (N != 1) {
            const odl_tensor *xs[4] = {y[0], y[1], y[2], y[3]};
            ODL_CHECK(odl_concat_channels_fwd(4, xs, cat));
        }
        return conv_fwd(&L->cv2, cat, NULL, ODL_ACT_SILU, &L->out);
    }
    case YL_UPSAMPLE:
        return odl_upsample2x_fwd(in, &L->out);
    case YL_CONCAT: {
        const odl_tensor *xs[Y_MAX_FROM];
        for (int j = 0; j < L->nfrom; j++) xs[j] = layer_in(m, x, L->from[j]);
        return odl_concat_channels_fwd(L->nfrom, xs, &L->out);
    }
    case YL_DETECT: {
        const int64_t rows = L->out.shape[1];
        int64_t off = 0;
        for (int l = 0; l < m->nl; l++) {
            const odl_tensor *xl = layer_in(m, x, L->from[l]);
            const int ny = (int)xl->shape[2], nx = (int)xl->shape[3];
            odl_tensor *hd = scr(m, 0, N, m->na * m->no, ny, nx);
            ODL_CHECK(conv_fwd(&L->heads[l], xl, NULL, ODL_ACT_NONE, hd));
            ODL_CHECK(yolov5_detect_decode(m, (const float *)hd->data, (float *)L->out.data, ny, nx, rows, off, l, 0));
            off += (int64_t)m->na * ny * nx;
        }
        return ODL_OK;
    }
    }
    return ODL_ERR(ODL_E_INTERNAL, "yolov5: layer %d has unknown type %d", i, (int)L->type);
}

odl_status odl_yolov5_forward_host(odl_yolov5 *m, const float *in, int N, int H, int W, float **out, size_t *cap,
                                   int64_t *rows, int *no) {
    if (!m || !in || !out || !cap || !rows || !no) return ODL_ERR(ODL_E_INVAL, "odl_yolov5_forward_host: NULL argument");
    odl_tensor *x;
    const odl_tensor *y;
    ODL_CHECK(odl_yolov5_input(m, N, H, W, &x));
    ODL_CHECK(odl_tensor_copy_from_host(x, in, sizeof(float) * 3 * (size_t)H * W * N));
    ODL_CHECK(odl_yolov5_forward(m, x, &y));
    const size_t n = (size_t)N * (size_t)y->shape[1] * (size_t)y->shape[2];
    if (*cap < n) {
        float *p = malloc(sizeof(float) * n);
        if (!p) return ODL_ERR(ODL_E_NOMEM, "yolov5: output batch of %zu floats", n);
        free(*out);
        *out = p;
        *cap = n;
    }
    ODL_CHECK(odl_tensor_copy_to_host(y, *out, sizeof(float) * n)); /* synchronises */
    *rows = y->shape[1];
    *no = (int)y->shape[2];
    return ODL_OK;
}

odl_status odl_yolov5_forward(odl_yolov5 *m, const odl_tensor *x, const odl_tensor **out) {
    if (!m || !x) return ODL_ERR(ODL_E_INVAL, "odl_yolov5_forward: NULL argument");
    if (!m->warena.data) return ODL_ERR(ODL_E_INVAL, "%s: the weights are not on a device yet (odl_yolov5_upload)", m->path);
    if (x->ndim != 4 || x->shape[1] != 3 || x->dtype != ODL_F32 || !odl_device_eq(x->device, m->dev)) {
        char b[64];
        return ODL_ERR(ODL_E_INVAL, "yolov5 forward: input %s %s on %s; [N, 3, H, W] float32 on %s expected",
                       odl_shape_str(x, b, sizeof b), odl_dtype_name(x->dtype), odl_device_name(x->device),
                       odl_device_name(m->dev));
    }
    ODL_CHECK(odl_yolov5_prepare(m, (int)x->shape[0], (int)x->shape[2], (int)x->shape[3]));
    if (m->graphs_on && !m->prof) ODL_CHECK(yolov5_graph_forward(m, x));
    else ODL_CHECK(yolov5_forward_ops(m, x));
    if (out) *out = &m->L[m->nlayers - 1].out;
    return ODL_OK;
}

odl_status yolov5_forward_ops(odl_yolov5 *m, const odl_tensor *x) {
    ODL_CHECK(yolov5_prof_mark(m, 0));
    if (m->half) return yolov5_half_forward(m, x);
    for (int i = 0; i < m->nlayers; i++) {
        odl_status st = run_layer(m, x, i);
        if (st != ODL_OK) {
            odl_error_prefix("yolov5 layer %d (%s)", i, YTYPE_NAMES[m->L[i].type]);
            return st;
        }
        ODL_CHECK(yolov5_prof_mark(m, i + 1));
    }
    return ODL_OK;
}
