/* YOLOv5 inference network built from the description stored with its weights. See
 * include/odl/yolov5.h for the model definition and the sources of every formula. */
#include "odl/yolov5.h"

#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "odl/ops.h"
#include "models/yolov5_decode.h"
#include "models/yolov5_impl.h"

static void prof_free(odl_yolov5 *m);

/* ------------------------------------------------------------------------------------------------
 * HDF5 helpers (the HDF5 C API directly; errors carry the file path and the object name)
 * ---------------------------------------------------------------------------------------------- */

static int h5_exists(hid_t loc, const char *name) {
    /* H5Lexists on each path component, so that a missing group does not raise an HDF5 error. */
    char buf[512];
    size_t n = strlen(name);
    if (n >= sizeof buf) return 0;
    memcpy(buf, name, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] == '/' || buf[i] == 0) {
            char c = buf[i];
            buf[i] = 0;
            if (H5Lexists(loc, buf, H5P_DEFAULT) <= 0) return 0;
            buf[i] = c;
        }
    }
    return 1;
}

/* String attribute (variable-length or fixed). *found = 0 when absent. */
static odl_status h5_attr_str(hid_t obj, const char *name, char *out, size_t cap, const char *path, int *found) {
    *found = 0;
    out[0] = 0;
    if (H5Aexists(obj, name) <= 0) return ODL_OK;
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    if (a < 0) return ODL_ERR(ODL_E_HDF5, "%s: cannot open attribute '%s'", path, name);
    hid_t t = H5Aget_type(a);
    odl_status st = ODL_OK;
    if (H5Tget_class(t) != H5T_STRING) {
        st = ODL_ERR(ODL_E_FORMAT, "%s: attribute '%s' is not a string", path, name);
    } else if (H5Tis_variable_str(t) > 0) {
        hid_t mt = H5Tcopy(H5T_C_S1);
        H5Tset_size(mt, H5T_VARIABLE);
        H5Tset_cset(mt, H5Tget_cset(t));
        char *s = NULL;
        if (H5Aread(a, mt, &s) < 0) st = ODL_ERR(ODL_E_HDF5, "%s: cannot read attribute '%s'", path, name);
        else {
            snprintf(out, cap, "%s", s ? s : "");
            H5free_memory(s);
            *found = 1;
        }
        H5Tclose(mt);
    } else {
        size_t sz = H5Tget_size(t);
        char *s = calloc(sz + 1, 1);
        hid_t mt = H5Tcopy(H5T_C_S1);
        H5Tset_size(mt, sz);
        if (!s) st = ODL_ERR(ODL_E_NOMEM, "%s: attribute '%s'", path, name);
        else if (H5Aread(a, mt, s) < 0) st = ODL_ERR(ODL_E_HDF5, "%s: cannot read attribute '%s'", path, name);
        else {
            snprintf(out, cap, "%s", s);
            *found = 1;
        }
        free(s);
        H5Tclose(mt);
    }
    H5Tclose(t);
    H5Aclose(a);
    return st;
}

/* Numeric attribute(s), converted to int or double by HDF5. n_out = element count. */
static odl_status h5_attr_num(hid_t obj, const char *name, hid_t memtype, void *out, int cap, int *n_out,
                              const char *path, const char *where) {
    if (H5Aexists(obj, name) <= 0) return ODL_ERR(ODL_E_FORMAT, "%s: %s lacks attribute '%s'", path, where, name);
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    if (a < 0) return ODL_ERR(ODL_E_HDF5, "%s: cannot open attribute '%s' of %s", path, name, where);
    hid_t sp = H5Aget_space(a);
    hssize_t n = H5Sget_simple_extent_npoints(sp);
    hid_t t = H5Aget_type(a);
    H5T_class_t cls = H5Tget_class(t);
    odl_status st = ODL_OK;
    if (cls != H5T_INTEGER && cls != H5T_FLOAT)
        st = ODL_ERR(ODL_E_FORMAT, "%s: attribute '%s' of %s is not numeric", path, name, where);
    else if (n < 1 || n > cap)
        st = ODL_ERR(ODL_E_FORMAT, "%s: attribute '%s' of %s has %lld values (1..%d expected)", path, name, where,
                     (long long)n, cap);
    else if (H5Aread(a, memtype, out) < 0)
        st = ODL_ERR(ODL_E_HDF5, "%s: cannot read attribute '%s' of %s", path, name, where);
    if (n_out) *n_out = (int)n;
    H5Tclose(t);
    H5Sclose(sp);
    H5Aclose(a);
    return st;
}

static const char *shape_text(int ndim, const int64_t *shape, char *buf, size_t cap) {
    size_t o = 0;
    o += (size_t)snprintf(buf + o, cap - o, "[");
    for (int i = 0; i < ndim && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (o < cap) snprintf(buf + o, cap - o, "]");
    return buf;
}

/* Read a float dataset as float32 with the expected shape (a -1 matches anything). */
static odl_status h5_read_f32(hid_t f, const char *name, int ndim, const int64_t *expect, float **data,
                              int64_t *shape_out, const char *path, const char *what) {
    *data = NULL;
    if (!h5_exists(f, name))
        return ODL_ERR(ODL_E_FORMAT, "%s: missing tensor /%s (%s)", path, name, what);
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    if (d < 0) return ODL_ERR(ODL_E_HDF5, "%s: cannot open dataset /%s", path, name);
    hid_t sp = H5Dget_space(d);
    int nd = H5Sget_simple_extent_ndims(sp);
    hsize_t dims[8] = {0};
    odl_status st = ODL_OK;
    int64_t got[8] = {0};
    if (nd < 0 || nd > 8) {
        st = ODL_ERR(ODL_E_FORMAT, "%s: dataset /%s has %d dimensions", path, name, nd);
        goto out;
    }
    H5Sget_simple_extent_dims(sp, dims, NULL);
    for (int i = 0; i < nd; i++) got[i] = (int64_t)dims[i];
    int ok = nd == ndim;
    for (int i = 0; ok && i < nd; i++)
        if (expect[i] >= 0 && expect[i] != got[i]) ok = 0;
    if (!ok) {
        char a[128], b[128];
        st = ODL_ERR(ODL_E_FORMAT, "%s: tensor /%s has shape %s but %s implies %s", path, name,
                     shape_text(nd, got, a, sizeof a), what, shape_text(ndim, expect, b, sizeof b));
        goto out;
    }
    hid_t t = H5Dget_type(d);
    H5T_class_t cls = H5Tget_class(t);
    H5Tclose(t);
    if (cls != H5T_FLOAT && cls != H5T_INTEGER) {
        st = ODL_ERR(ODL_E_FORMAT, "%s: tensor /%s is not numeric", path, name);
        goto out;
    }
    hssize_t n = H5Sget_simple_extent_npoints(sp);
    float *buf = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    if (!buf) {
        st = ODL_ERR(ODL_E_NOMEM, "%s: cannot allocate %lld floats for /%s", path, (long long)n, name);
        goto out;
    }
    if (H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) {
        free(buf);
        st = ODL_ERR(ODL_E_HDF5, "%s: cannot read /%s", path, name);
        goto out;
    }
    /* The crc32 attribute of docs/checkpoint_format.md, when present, over the float32 LE bytes. */
    if (H5Aexists(d, "crc32") > 0) {
        hid_t ft = H5Dget_type(d);
        int f32le = H5Tequal(ft, H5T_IEEE_F32LE) > 0;
        H5Tclose(ft);
        unsigned long long want = 0;
        hid_t a = H5Aopen(d, "crc32", H5P_DEFAULT);
        herr_t rr = a >= 0 ? H5Aread(a, H5T_NATIVE_ULLONG, &want) : -1;
        if (a >= 0) H5Aclose(a);
        if (f32le && rr >= 0) {
            uLong crc = crc32(0L, Z_NULL, 0);
            const unsigned char *bytes = (const unsigned char *)buf;
            size_t left = sizeof(float) * (size_t)n;
            while (left) { /* zlib takes uInt lengths */
                uInt chunk = left > (1u << 30) ? (1u << 30) : (uInt)left;
                crc = crc32(crc, bytes, chunk);
                bytes += chunk;
                left -= chunk;
            }
            if ((unsigned long long)crc != want) {
                free(buf);
                st = ODL_ERR(ODL_E_CHECKSUM, "%s: tensor /%s: crc32 %08llx, stored %08llx (corrupt file)", path, name,
                             (unsigned long long)crc, want);
                goto out;
            }
        }
    }
    *data = buf;
    if (shape_out)
        for (int i = 0; i < nd; i++) shape_out[i] = got[i];
out:
    H5Sclose(sp);
    H5Dclose(d);
    return st;
}

/* ------------------------------------------------------------------------------------------------
 * Building
 * ---------------------------------------------------------------------------------------------- */

static odl_status upload(odl_device dev, odl_tensor *t, int ndim, const int64_t *shape, const float *host) {
    ODL_CHECK(odl_tensor_alloc(t, dev, ODL_F32, ndim, shape));
    odl_status st = odl_tensor_copy_from_host(t, host, odl_tensor_nbytes(t));
    if (st != ODL_OK) {
        odl_error_trace(__FILE__, __LINE__);
        odl_tensor_free(t);
    }
    return st;
}

/* Load prefix/conv/weight and prefix/bn/{weight,bias,running_mean,running_var}, fold BN. */
static odl_status load_conv(odl_yolov5 *m, hid_t f, const char *prefix, int c1, int c2, int k, int s, int p,
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
    ODL_CHECK_GOTO(upload(m->dev, &cv->w, 4, ws, w), st, out);
    ODL_CHECK_GOTO(upload(m->dev, &cv->b, 1, cs, b), st, out);
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

static odl_status build_layer(odl_yolov5 *m, hid_t f, int i, double gd, double gw, float eps, const int *ch,
                              const int *down) {
    ylayer *L = &m->L[i];
    char gname[64], what[96], s[64];
    int found = 0;
    snprintf(gname, sizeof gname, "yolov5/layers/%02d", i);
    if (!h5_exists(f, gname)) return ODL_ERR(ODL_E_FORMAT, "%s: missing /%s (layer %d of the description)", m->path, gname, i);
    hid_t g = H5Gopen2(f, gname, H5P_DEFAULT);
    if (g < 0) return ODL_ERR(ODL_E_HDF5, "%s: cannot open /%s", m->path, gname);
    odl_status st = ODL_OK;
    int from[Y_MAX_FROM], nfrom = 0, n = 1, c2 = 0, k = 1, sv = 1, p = -1, shortcut = 1, nc = 0;
    ODL_CHECK_GOTO(h5_attr_str(g, "type", s, sizeof s, m->path, &found), st, out);
    if (!found) {
        st = ODL_ERR(ODL_E_FORMAT, "%s: layer %d has no 'type'", m->path, i);
        goto out;
    }
    int t = -1;
    for (int j = 0; j < 6; j++)
        if (!strcmp(s, YTYPE_NAMES[j])) t = j;
    if (t < 0) {
        st = ODL_ERR(ODL_E_FORMAT, "%s: layer %d has unsupported type '%s'", m->path, i, s);
        goto out;
    }
    L->type = (ytype)t;
    snprintf(what, sizeof what, "layer %d (%s)", i, s);
    ODL_CHECK_GOTO(h5_attr_num(g, "from", H5T_NATIVE_INT, from, Y_MAX_FROM, &nfrom, m->path, what), st, out);
    ODL_CHECK_GOTO(h5_attr_num(g, "n", H5T_NATIVE_INT, &n, 1, NULL, m->path, what), st, out);
    L->nfrom = nfrom;
    for (int j = 0; j < nfrom; j++) {
        int a = from[j] < 0 ? i + from[j] : from[j];
        if (a < -1 || a >= i || (a == -1 && i != 0)) {
            st = ODL_ERR(ODL_E_FORMAT, "%s: %s reads layer %d, which does not precede it", m->path, what, from[j]);
            goto out;
        }
        L->from[j] = a;
    }
    if (L->type != YL_CONCAT && L->type != YL_DETECT && nfrom != 1) {
        st = ODL_ERR(ODL_E_FORMAT, "%s: %s must have one input, has %d", m->path, what, nfrom);
        goto out;
    }
    /* ch[] and down[] are indexed by layer + 1 (slot 0 = the network input). */
    int c1 = ch[L->from[0] + 1], d1 = down[L->from[0] + 1];
    char prefix[128];
    switch (L->type) {
    case YL_CONV:
        ODL_CHECK_GOTO(h5_attr_num(g, "c2", H5T_NATIVE_INT, &c2, 1, NULL, m->path, what), st, out);
        ODL_CHECK_GOTO(h5_attr_num(g, "k", H5T_NATIVE_INT, &k, 1, NULL, m->path, what), st, out);
        ODL_CHECK_GOTO(h5_attr_num(g, "s", H5T_NATIVE_INT, &sv, 1, NULL, m->path, what), st, out);
        ODL_CHECK_GOTO(h5_attr_num(g, "p", H5T_NATIVE_INT, &p, 1, NULL, m->path, what), st, out);
        if (k < 1 || sv < 1 || sv > 2 || n != 1) {
            st = ODL_ERR(ODL_E_FORMAT, "%s: %s: unsupported k=%d s=%d n=%d", m->path, what, k, sv, n);
            goto out;
        }
        if (p < 0) p = k / 2;
        L->c_out = scale_width(c2, gw);
        snprintf(prefix, sizeof prefix, "model/%d", i);
        ODL_CHECK_GOTO(load_conv(m, f, prefix, c1, L->c_out, k, sv, p, eps, what, &L->conv), st, out);
        if (2 * p < k - sv || 2 * p > k - 1) { /* output must be exactly input / s */
            st = ODL_ERR(ODL_E_FORMAT, "%s: %s: padding %d with kernel %d does not keep the size / %d", m->path,
                         what, p, k, sv);
            goto out;
        }
        L->down = d1 * sv;
        break;
    case YL_C3: {
        ODL_CHECK_GOTO(h5_attr_num(g, "c2", H5T_NATIVE_INT, &c2, 1, NULL, m->path, what), st, out);
        ODL_CHECK_GOTO(h5_attr_num(g, "shortcut", H5T_NATIVE_INT, &shortcut, 1, NULL, m->path, what), st, out);
        L->c_out = scale_width(c2, gw);
        int c_ = L->c_out / 2; /* int(c2 * 0.5) */
        L->nb = scale_depth(n, gd);
        L->shortcut = shortcut != 0;
        snprintf(prefix, sizeof prefix, "model/%d/cv1", i);
        ODL_CHECK_GOTO(load_conv(m, f, prefix, c1, c_, 1, 1, 0, eps, what, &L->cv1), st, out);
        snprintf(prefix, sizeof prefix, "model/%d/cv2", i);
        ODL_CHECK_GOTO(load_conv(m, f, prefix, c1, c_, 1, 1, 0, eps, what, &L->cv2), st, out);
        snprintf(prefix, sizeof prefix, "model/%d/cv3", i);
        ODL_CHECK_GOTO(load_conv(m, f, prefix, 2 * c_, L->c_out, 1, 1, 0, eps, what, &L->cv3), st, out);
        L->bcv1 = calloc((size_t)(L->nb ? L->nb : 1), sizeof(yconv));
        L->bcv2 = calloc((size_t)(L->nb ? L->nb : 1), sizeof(yconv));
        if (!L->bcv1 || !L->bcv2) {
            st = ODL_ERR(ODL_E_NOMEM, "%s: %s", m->path, what);
            goto out;
        }
        for (int j = 0; j < L->nb; j++) {
            snprintf(prefix, sizeof prefix, "model/%d/m/%d/cv1", i, j);
            ODL_CHECK_GOTO(load_conv(m, f, prefix, c_, c_, 1, 1, 0, eps, what, &L->bcv1[j]), st, out);
            snprintf(prefix, sizeof prefix, "model/%d/m/%d/cv2", i, j);
            ODL_CHECK_GOTO(load_conv(m, f, prefix, c_, c_, 3, 1, 1, eps, what, &L->bcv2[j]), st, out);
        }
        snprintf(prefix, sizeof prefix, "model/%d/m/%d", i, L->nb);
        if (h5_exists(f, prefix)) {
            st = ODL_ERR(ODL_E_FORMAT, "%s: %s holds more than the %d bottlenecks its description implies "
                                       "(depth_multiple mismatch?)", m->path, what, L->nb);
            goto out;
        }
        L->down = d1;
        break;
    }
    case YL_SPPF: {
        ODL_CHECK_GOTO(h5_attr_num(g, "c2", H5T_NATIVE_INT, &c2, 1, NULL, m->path, what), st, out);
        ODL_CHECK_GOTO(h5_attr_num(g, "k", H5T_NATIVE_INT, &k, 1, NULL, m->path, what), st, out);
        if (k < 1 || k % 2 == 0) {
            st = ODL_ERR(ODL_E_FORMAT, "%s: %s: pool size %d must be odd", m->path, what, k);
            goto out;
        }
        L->c_out = scale_width(c2, gw);
        int c_ = c1 / 2;
        L->pool_k = k;
        snprintf(prefix, sizeof prefix, "model/%d/cv1", i);
        ODL_CHECK_GOTO(load_conv(m, f, prefix, c1, c_, 1, 1, 0, eps, what, &L->cv1), st, out);
        snprintf(prefix, sizeof prefix, "model/%d/cv2", i);
        ODL_CHECK_GOTO(load_conv(m, f, prefix, 4 * c_, L->c_out, 1, 1, 0, eps, what, &L->cv2), st, out);
        L->down = d1;
        break;
    }
    case YL_UPSAMPLE:
        L->c_out = c1;
        if (d1 % 2) {
            st = ODL_ERR(ODL_E_FORMAT, "%s: %s upsamples an input of stride %d", m->path, what, d1);
            goto out;
        }
        L->down = d1 / 2;
        break;
    case YL_CONCAT:
        L->c_out = 0;
        for (int j = 0; j < nfrom; j++) {
            L->c_out += ch[L->from[j] + 1];
            if (down[L->from[j] + 1] != d1) {
                st = ODL_ERR(ODL_E_FORMAT, "%s: %s joins layers of strides %d and %d", m->path, what, d1,
                             down[L->from[j] + 1]);
                goto out;
            }
        }
        L->down = d1;
        break;
    case YL_DETECT:
        ODL_CHECK_GOTO(h5_attr_num(g, "nc", H5T_NATIVE_INT, &nc, 1, NULL, m->path, what), st, out);
        if (nc != m->nc || nfrom != m->nl) {
            st = ODL_ERR(ODL_E_FORMAT, "%s: %s has %d classes and %d inputs; the model has %d classes, %d anchor levels",
                         m->path, what, nc, nfrom, m->nc, m->nl);
            goto out;
        }
        L->heads = calloc((size_t)m->nl, sizeof(yconv));
        if (!L->heads) {
            st = ODL_ERR(ODL_E_NOMEM, "%s: %s", m->path, what);
            goto out;
        }
        for (int l = 0; l < m->nl; l++) {
            int cl = ch[L->from[l] + 1];
            yconv *h = &L->heads[l];
            h->c1 = cl;
            h->c2 = m->na * m->no;
            h->k = h->s = 1;
            h->p = 0;
            float *w = NULL, *b = NULL;
            int64_t ws[4] = {h->c2, cl, 1, 1}, bs[1] = {h->c2};
            snprintf(prefix, sizeof prefix, "model/%d/m/%d/weight", i, l);
            ODL_CHECK_GOTO(h5_read_f32(f, prefix, 4, ws, &w, NULL, m->path, what), st, out);
            snprintf(prefix, sizeof prefix, "model/%d/m/%d/bias", i, l);
            st = h5_read_f32(f, prefix, 1, bs, &b, NULL, m->path, what);
            if (st == ODL_OK) st = upload(m->dev, &h->w, 4, ws, w);
            if (st == ODL_OK) st = upload(m->dev, &h->b, 1, bs, b);
            free(w);
            free(b);
            if (st != ODL_OK) goto out;
            m->n_params += h->c2 * cl + h->c2;
            int dl = down[L->from[l] + 1];
            if ((float)dl != m->strides[l]) {
                st = ODL_ERR(ODL_E_FORMAT, "%s: Detect level %d reads layer %d of stride %d, the stored stride is %g",
                             m->path, l, L->from[l], dl, m->strides[l]);
                goto out;
            }
        }
        L->c_out = m->no;
        L->down = 1;
        break;
    }
out:
    H5Gclose(g);
    return st;
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
    yolov5_half_release(m);
    prof_free(m);
    free_layers(m);
    for (int i = 0; i < Y_NSCRATCH; i++) odl_tensor_free(&m->scratch[i]);
    odl_tensor_free(&m->input);
    if (m->names)
        for (int i = 0; i < m->nc; i++) free(m->names[i]);
    free(m->names);
    free(m);
}

static odl_status read_names(odl_yolov5 *m, hid_t f) {
    m->names = calloc((size_t)m->nc, sizeof(char *));
    if (!m->names) return ODL_ERR(ODL_E_NOMEM, "%s: class names", m->path);
    if (!h5_exists(f, "yolov5/names")) return ODL_ERR(ODL_E_FORMAT, "%s: missing /yolov5/names", m->path);
    hid_t d = H5Dopen2(f, "yolov5/names", H5P_DEFAULT);
    if (d < 0) return ODL_ERR(ODL_E_HDF5, "%s: cannot open /yolov5/names", m->path);
    hid_t sp = H5Dget_space(d), t = H5Dget_type(d);
    hssize_t n = H5Sget_simple_extent_npoints(sp);
    odl_status st = ODL_OK;
    if (H5Tget_class(t) != H5T_STRING || n != m->nc) {
        st = ODL_ERR(ODL_E_FORMAT, "%s: /yolov5/names must hold %d strings (has %lld)", m->path, m->nc, (long long)n);
    } else if (H5Tis_variable_str(t) > 0) {
        char **v = calloc((size_t)n, sizeof(char *));
        hid_t mt = H5Tcopy(H5T_C_S1);
        H5Tset_size(mt, H5T_VARIABLE);
        H5Tset_cset(mt, H5Tget_cset(t));
        if (!v) st = ODL_ERR(ODL_E_NOMEM, "%s: class names", m->path);
        else if (H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) < 0)
            st = ODL_ERR(ODL_E_HDF5, "%s: cannot read /yolov5/names", m->path);
        else
            for (hssize_t i = 0; i < n; i++) {
                m->names[i] = strdup(v[i] ? v[i] : "");
                H5free_memory(v[i]);
                if (!m->names[i]) st = ODL_ERR(ODL_E_NOMEM, "%s: class names", m->path);
            }
        free(v);
        H5Tclose(mt);
    } else {
        size_t sz = H5Tget_size(t);
        char *buf = calloc((size_t)n, sz + 1);
        hid_t mt = H5Tcopy(H5T_C_S1);
        H5Tset_size(mt, sz + 1);
        if (!buf) st = ODL_ERR(ODL_E_NOMEM, "%s: class names", m->path);
        else if (H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0)
            st = ODL_ERR(ODL_E_HDF5, "%s: cannot read /yolov5/names", m->path);
        else
            for (hssize_t i = 0; i < n; i++) m->names[i] = strndup(buf + i * (sz + 1), sz);
        free(buf);
        H5Tclose(mt);
    }
    H5Tclose(t);
    H5Sclose(sp);
    H5Dclose(d);
    return st;
}

odl_status odl_yolov5_load(const char *path, odl_device dev, odl_yolov5 **out) {
    if (!path || !out) return ODL_ERR(ODL_E_INVAL, "odl_yolov5_load: NULL argument");
    *out = NULL;
    struct stat sb;
    if (stat(path, &sb) != 0) return ODL_ERR(ODL_E_NOTFOUND, "%s: no such weights file", path);
    if (S_ISDIR(sb.st_mode)) return ODL_ERR(ODL_E_IO, "%s: is a directory, not a weights file", path);
    /* Keep HDF5's own error stack off stderr: every failure is reported through odl_status. */
    H5E_auto2_t old_fn;
    void *old_data;
    H5Eget_auto2(H5E_DEFAULT, &old_fn, &old_data);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    odl_status st = ODL_OK;
    hid_t f = -1, y = -1;
    odl_yolov5 *m = calloc(1, sizeof *m);
    if (!m) {
        st = ODL_ERR(ODL_E_NOMEM, "odl_yolov5_load");
        goto out;
    }
    m->dev = dev;
    snprintf(m->path, sizeof m->path, "%s", path);
    if (H5Fis_hdf5(path) <= 0) {
        st = ODL_ERR(ODL_E_FORMAT, "%s: not an HDF5 weights file (convert a YOLOv5 .pt with tools/convert_yolov5.py)", path);
        goto out;
    }
    f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) {
        st = ODL_ERR(ODL_E_HDF5, "%s: cannot open the HDF5 file (damaged or truncated?)", path);
        goto out;
    }
    char kind[64];
    int found = 0;
    ODL_CHECK_GOTO(h5_attr_str(f, "model", kind, sizeof kind, path, &found), st, out);
    if (!found || strcmp(kind, "yolov5") != 0 || !h5_exists(f, "yolov5")) {
        st = ODL_ERR(ODL_E_FORMAT, "%s: not YOLOv5 weights (root attribute model = '%s'%s); convert a YOLOv5 .pt with "
                     "tools/convert_yolov5.py", path, found ? kind : "(none)",
                     h5_exists(f, "yolov5") ? "" : ", no /yolov5 description");
        goto out;
    }
    y = H5Gopen2(f, "yolov5", H5P_DEFAULT);
    if (y < 0) {
        st = ODL_ERR(ODL_E_HDF5, "%s: cannot open /yolov5", path);
        goto out;
    }
    double gd = 0, gw = 0, eps = 0;
    ODL_CHECK_GOTO(h5_attr_num(y, "nc", H5T_NATIVE_INT, &m->nc, 1, NULL, path, "/yolov5"), st, out);
    ODL_CHECK_GOTO(h5_attr_num(y, "num_layers", H5T_NATIVE_INT, &m->nlayers, 1, NULL, path, "/yolov5"), st, out);
    ODL_CHECK_GOTO(h5_attr_num(y, "depth_multiple", H5T_NATIVE_DOUBLE, &gd, 1, NULL, path, "/yolov5"), st, out);
    ODL_CHECK_GOTO(h5_attr_num(y, "width_multiple", H5T_NATIVE_DOUBLE, &gw, 1, NULL, path, "/yolov5"), st, out);
    ODL_CHECK_GOTO(h5_attr_num(y, "bn_eps", H5T_NATIVE_DOUBLE, &eps, 1, NULL, path, "/yolov5"), st, out);
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
    if (st != ODL_OK) goto out;
out:
    if (y >= 0) H5Gclose(y);
    if (f >= 0) H5Fclose(f);
    H5Eset_auto2(H5E_DEFAULT, old_fn, old_data);
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

odl_status yolov5_buf_set(odl_device dev, odl_tensor *t, size_t *cap, odl_dtype dtype, int64_t a, int64_t b, int64_t c,
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
    ODL_CHECK(odl_tensor_alloc(t, dev, dtype, nd, shape));
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
            ODL_CHECK(yolov5_buf_set(m->dev, &L->out, &L->out_cap, ODL_F32, N, odl_yolov5_num_predictions(m, H, W), m->no, -1));
            for (int l = 0; l < m->nl; l++) {
                int s = (int)m->strides[l];
                need_scr(need, 0, N, m->na * m->no, H / s, W / s);
            }
            continue;
        }
        ODL_CHECK(yolov5_buf_set(m->dev, &L->out, &L->out_cap, ODL_F32, N, L->c_out, h, w));
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
        if (need[s]) ODL_CHECK(yolov5_buf_set(m->dev, &m->scratch[s], &m->scratch_cap[s], ODL_F32, (int64_t)(need[s] / sizeof(float)), 1, 1, 1));
    ODL_CHECK(yolov5_buf_set(m->dev, &m->input, &m->input_cap, ODL_F32, N, 3, H, W));
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

void yolov5_detect_decode_cpu(const float *head, float *out, int N, int na, int no, int ny, int nx, int64_t rows_total,
                              int64_t row_offset, float stride, const float (*anchors)[2], int nhwc) {
    const int64_t plane = (int64_t)ny * nx;
    for (int n = 0; n < N; n++)
        for (int a = 0; a < na; a++)
            for (int yy = 0; yy < ny; yy++)
                for (int xx = 0; xx < nx; xx++) {
                    const int64_t pix = (int64_t)yy * nx + xx;
                    float *row = out + ((int64_t)n * rows_total + row_offset + (int64_t)a * plane + pix) * no;
                    /* element k of this anchor's outputs is h[k * hs] */
                    const float *h = nhwc ? head + (((int64_t)n * plane + pix) * na + a) * no
                                          : head + ((int64_t)n * na * no + (int64_t)a * no) * plane + pix;
                    const int64_t hs = nhwc ? 1 : plane;
                    for (int k = 0; k < no; k++)
                        row[k] = yolov5_decode(h[(int64_t)k * hs], k, (float)xx - 0.5f, (float)yy - 0.5f, stride,
                                               k == 2 || k == 3 ? anchors[a][k - 2] : 0.0f);
                }
}

odl_status yolov5_detect_decode(const odl_yolov5 *m, const float *head, float *out, int ny, int nx, int64_t rows_total,
                                int64_t row_offset, int l) {
    if (m->dev.type == ODL_DEV_CPU) {
        yolov5_detect_decode_cpu(head, out, m->N, m->na, m->no, ny, nx, rows_total, row_offset, m->strides[l],
                                 (const float (*)[2])m->anchors[l], 0);
        return ODL_OK;
    }
#ifdef ODL_HAVE_CUDA
    return odl_cuda_yolov5_detect_decode(head, out, m->N, m->na, m->no, ny, nx, rows_total, row_offset, m->strides[l],
                                         &m->anchors[l][0][0]);
#else
    return ODL_ERR(ODL_E_UNSUPPORTED, "yolov5 Detect: no decoder for device %s", odl_device_name(m->dev));
#endif
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
            ODL_CHECK(yolov5_detect_decode(m, (const float *)hd->data, (float *)L->out.data, ny, nx, rows, off, l));
            off += (int64_t)m->na * ny * nx;
        }
        return ODL_OK;
    }
    }
    return ODL_ERR(ODL_E_INTERNAL, "yolov5: layer %d has unknown type %d", i, (int)L->type);
}

odl_status odl_yolov5_forward(odl_yolov5 *m, const odl_tensor *x, const odl_tensor **out) {
    if (!m || !x) return ODL_ERR(ODL_E_INVAL, "odl_yolov5_forward: NULL argument");
    if (x->ndim != 4 || x->shape[1] != 3 || x->dtype != ODL_F32 || !odl_device_eq(x->device, m->dev)) {
        char b[64];
        return ODL_ERR(ODL_E_INVAL, "yolov5 forward: input %s %s on %s; [N, 3, H, W] float32 on %s expected",
                       odl_shape_str(x, b, sizeof b), odl_dtype_name(x->dtype), odl_device_name(x->device),
                       odl_device_name(m->dev));
    }
    ODL_CHECK(odl_yolov5_prepare(m, (int)x->shape[0], (int)x->shape[2], (int)x->shape[3]));
    ODL_CHECK(yolov5_prof_mark(m, 0));
    if (m->half) {
        ODL_CHECK(yolov5_half_forward(m, x));
        if (out) *out = &m->L[m->nlayers - 1].out;
        return ODL_OK;
    }
    for (int i = 0; i < m->nlayers; i++) {
        odl_status st = run_layer(m, x, i);
        if (st != ODL_OK) {
            odl_error_prefix("yolov5 layer %d (%s)", i, YTYPE_NAMES[m->L[i].type]);
            return st;
        }
        ODL_CHECK(yolov5_prof_mark(m, i + 1));
    }
    if (out) *out = &m->L[m->nlayers - 1].out;
    return ODL_OK;
}
