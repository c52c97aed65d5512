#include "odl/tensor.h"
#include "odl/strbuf.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "odl/device.h"

size_t odl_dtype_size(odl_dtype t) {
    switch (t) {
    case ODL_F32: return 4;
    case ODL_F64: return 8;
    case ODL_F16: return 2;
    case ODL_BF16: return 2;
    case ODL_I32: return 4;
    case ODL_I64: return 8;
    case ODL_U8: return 1;
    }
    return 0;
}

const char *odl_dtype_name(odl_dtype t) {
    static const char *names[] = {"float32", "float64", "float16", "bfloat16", "int32", "int64", "uint8"};
    return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "?";
}

const char *odl_device_name(odl_device d) {
    static _Thread_local char buf[32];
    if (d.type == ODL_DEV_CPU) return "cpu";
    snprintf(buf, sizeof buf, "cuda:%d", d.index);
    return buf;
}

int64_t odl_tensor_numel(const odl_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

size_t odl_tensor_nbytes(const odl_tensor *t) { return (size_t)odl_tensor_numel(t) * odl_dtype_size(t->dtype); }

static odl_status set_shape(odl_tensor *t, int ndim, const int64_t *shape) {
    if (ndim < 0 || ndim > ODL_MAX_DIMS) return ODL_ERR(ODL_E_INVAL, "tensor rank %d outside 0..%d", ndim, ODL_MAX_DIMS);
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0) return ODL_ERR(ODL_E_INVAL, "negative dimension %" PRId64 " at axis %d", shape[i], i);
    t->ndim = ndim;
    for (int i = 0; i < ODL_MAX_DIMS; i++) t->shape[i] = i < ndim ? shape[i] : 1;
    return ODL_OK;
}

odl_status odl_tensor_alloc(odl_tensor *t, odl_device dev, odl_dtype dtype, int ndim, const int64_t *shape) {
    if (!t) return ODL_ERR(ODL_E_INVAL, "odl_tensor_alloc: NULL tensor");
    memset(t, 0, sizeof *t);
    if (odl_dtype_size(dtype) == 0) return ODL_ERR(ODL_E_INVAL, "unknown dtype %d", (int)dtype);
    ODL_CHECK(set_shape(t, ndim, shape));
    t->dtype = dtype;
    t->device = dev;
    size_t n = odl_tensor_nbytes(t);
    void *p = NULL;
    ODL_CHECK(odl_mem_alloc(dev, n ? n : 1, &p));
    t->data = p;
    t->owns = 1;
    return ODL_OK;
}

odl_status odl_tensor_zeros(odl_tensor *t, odl_device dev, odl_dtype dtype, int ndim, const int64_t *shape) {
    ODL_CHECK(odl_tensor_alloc(t, dev, dtype, ndim, shape));
    size_t n = odl_tensor_nbytes(t);
    if (dev.type == ODL_DEV_CPU) {
        memset(t->data, 0, n);
        return ODL_OK;
    }
    void *zero = calloc(1, n ? n : 1);
    if (!zero) return ODL_ERR(ODL_E_NOMEM, "host buffer of %zu bytes", n);
    odl_status s = odl_tensor_copy_from_host(t, zero, n);
    free(zero);
    if (s != ODL_OK) odl_error_trace(__FILE__, __LINE__);
    return s;
}

void odl_tensor_free(odl_tensor *t) {
    if (!t) return;
    if (t->owns && t->data) odl_mem_free(t->device, t->data);
    memset(t, 0, sizeof *t);
}

odl_status odl_tensor_view_rows(const odl_tensor *t, int64_t first, int64_t count, odl_tensor *view) {
    if (!t || !view || !t->data) return ODL_ERR(ODL_E_INVAL, "odl_tensor_view_rows: NULL tensor");
    if (t->ndim < 1) return ODL_ERR(ODL_E_INVAL, "odl_tensor_view_rows: scalar tensor has no rows");
    if (first < 0 || count < 0 || first + count > t->shape[0])
        return ODL_ERR(ODL_E_INVAL, "rows [%" PRId64 ", %" PRId64 ") outside a tensor of %" PRId64 " rows", first,
                       first + count, t->shape[0]);
    odl_tensor v = *t;
    size_t row_bytes = odl_tensor_nbytes(t) / (t->shape[0] ? (size_t)t->shape[0] : 1);
    if (t->shape[0] == 0) row_bytes = 0;
    v.data = (char *)t->data + (size_t)first * row_bytes;
    v.shape[0] = count;
    v.owns = 0;
    *view = v;
    return ODL_OK;
}

odl_status odl_tensor_reshape(const odl_tensor *t, int ndim, const int64_t *shape, odl_tensor *view) {
    if (!t || !view) return ODL_ERR(ODL_E_INVAL, "odl_tensor_reshape: NULL tensor");
    odl_tensor v = *t;
    ODL_CHECK(set_shape(&v, ndim, shape));
    if (odl_tensor_numel(&v) != odl_tensor_numel(t)) {
        char a[96], b[96];
        return ODL_ERR(ODL_E_INVAL, "cannot reshape %s to %s", odl_shape_str(t, a, sizeof a),
                       odl_shape_str(&v, b, sizeof b));
    }
    v.owns = 0;
    *view = v;
    return ODL_OK;
}

odl_status odl_tensor_copy(odl_tensor *dst, const odl_tensor *src) {
    if (!dst || !src || !dst->data || !src->data) return ODL_ERR(ODL_E_INVAL, "odl_tensor_copy: NULL tensor");
    if (dst->dtype != src->dtype || odl_tensor_numel(dst) != odl_tensor_numel(src)) {
        char a[96], b[96];
        return ODL_ERR(ODL_E_INVAL, "odl_tensor_copy: %s %s into %s %s", odl_dtype_name(src->dtype),
                       odl_shape_str(src, a, sizeof a), odl_dtype_name(dst->dtype), odl_shape_str(dst, b, sizeof b));
    }
    ODL_CHECK(odl_memcpy_async(dst->data, dst->device, src->data, src->device, odl_tensor_nbytes(src),
                               odl_stream_current()));
    if (dst->device.type == ODL_DEV_CPU && src->device.type != ODL_DEV_CPU)
        ODL_CHECK(odl_stream_synchronize(odl_stream_current()));
    return ODL_OK;
}

odl_status odl_tensor_copy_from_host(odl_tensor *t, const void *host, size_t nbytes) {
    if (!t || !t->data || !host) return ODL_ERR(ODL_E_INVAL, "odl_tensor_copy_from_host: NULL pointer");
    if (nbytes != odl_tensor_nbytes(t))
        return ODL_ERR(ODL_E_INVAL, "copy of %zu bytes into a tensor of %zu bytes", nbytes, odl_tensor_nbytes(t));
    ODL_CHECK(odl_memcpy_async(t->data, t->device, host, odl_cpu(), nbytes, odl_stream_current()));
    if (t->device.type != ODL_DEV_CPU) ODL_CHECK(odl_stream_synchronize(odl_stream_current()));
    return ODL_OK;
}

odl_status odl_tensor_copy_to_host(const odl_tensor *t, void *host, size_t nbytes) {
    if (!t || !t->data || !host) return ODL_ERR(ODL_E_INVAL, "odl_tensor_copy_to_host: NULL pointer");
    if (nbytes != odl_tensor_nbytes(t))
        return ODL_ERR(ODL_E_INVAL, "copy of a tensor of %zu bytes into %zu bytes", odl_tensor_nbytes(t), nbytes);
    ODL_CHECK(odl_memcpy_async(host, odl_cpu(), t->data, t->device, nbytes, odl_stream_current()));
    if (t->device.type != ODL_DEV_CPU) ODL_CHECK(odl_stream_synchronize(odl_stream_current()));
    return ODL_OK;
}

const char *odl_dims_str(int ndim, const int64_t *shape, char *buf, size_t cap) {
    odl_strbuf b;
    odl_strbuf_fixed(&b, buf, cap);
    odl_strbuf_printf(&b, "[");
    for (int i = 0; i < ndim; i++) odl_strbuf_printf(&b, i ? ", %" PRId64 : "%" PRId64, shape[i]);
    odl_strbuf_printf(&b, "]");
    return buf;
}

const char *odl_shape_str(const odl_tensor *t, char *buf, size_t cap) {
    return odl_dims_str(t ? t->ndim : 0, t ? t->shape : NULL, buf, cap);
}

odl_status odl_tensor_check(const odl_tensor *t, const char *name, odl_dtype dtype, odl_device dev, int ndim,
                            const int64_t *shape) {
    if (!t || !t->data) return ODL_ERR(ODL_E_INVAL, "%s: NULL tensor", name);
    if (t->dtype != dtype)
        return ODL_ERR(ODL_E_INVAL, "%s: dtype %s, expected %s", name, odl_dtype_name(t->dtype), odl_dtype_name(dtype));
    if (!odl_device_eq(t->device, dev)) {
        char d1[32];
        snprintf(d1, sizeof d1, "%s", odl_device_name(t->device));
        return ODL_ERR(ODL_E_INVAL, "%s: on %s, expected %s", name, d1, odl_device_name(dev));
    }
    int ok = t->ndim == ndim;
    for (int i = 0; ok && i < ndim; i++)
        if (shape[i] >= 0 && shape[i] != t->shape[i]) ok = 0;
    if (!ok) {
        char a[128], b[128];
        odl_tensor e;
        memset(&e, 0, sizeof e);
        e.ndim = ndim;
        for (int i = 0; i < ndim && i < ODL_MAX_DIMS; i++) e.shape[i] = shape[i];
        return ODL_ERR(ODL_E_INVAL, "%s: shape %s, expected %s", name, odl_shape_str(t, a, sizeof a),
                       odl_shape_str(&e, b, sizeof b));
    }
    return ODL_OK;
}
