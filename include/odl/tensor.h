/* Tensors: a typed, shaped view of host or device memory.
 *
 * An odl_tensor is plain data. Shapes are row-major (the last dimension is contiguous); image tensors
 * are NCHW. Kernels take contiguous tensors only; a view (odl_tensor_view_rows, odl_tensor_reshape) is
 * a contiguous sub-range of another tensor's memory that does not own it. Memory of a CUDA tensor comes
 * from that device's caching pool (odl/device.h), so allocation in the step loop never calls cudaMalloc.
 */
#ifndef ODL_TENSOR_H
#define ODL_TENSOR_H

#include "odl/api.h"
#include <stddef.h>
#include <stdint.h>

#include "odl/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ODL_MAX_DIMS 6

typedef enum odl_dtype {
    ODL_F32 = 0,
    ODL_F64 = 1,
    ODL_F16 = 2,
    ODL_BF16 = 3,
    ODL_I32 = 4,
    ODL_I64 = 5,
    ODL_U8 = 6,
} odl_dtype;

typedef enum odl_device_type { ODL_DEV_CPU = 0, ODL_DEV_CUDA = 1 } odl_device_type;

typedef struct odl_device {
    odl_device_type type;
    int index; /* CUDA ordinal; 0 for the CPU */
} odl_device;

static inline odl_device odl_cpu(void) { odl_device d = {ODL_DEV_CPU, 0}; return d; }
static inline odl_device odl_cuda(int index) { odl_device d = {ODL_DEV_CUDA, index}; return d; }
static inline int odl_device_eq(odl_device a, odl_device b) { return a.type == b.type && a.index == b.index; }

typedef struct odl_tensor {
    void *data;
    odl_dtype dtype;
    odl_device device;
    int ndim;
    int64_t shape[ODL_MAX_DIMS];
    int owns; /* 1 when odl_tensor_free must release data */
} odl_tensor;

ODL_API size_t odl_dtype_size(odl_dtype t);
ODL_API const char *odl_dtype_name(odl_dtype t);
ODL_API const char *odl_device_name(odl_device d); /* "cpu" or "cuda:N" (static buffer per thread) */

/* Number of elements (1 for ndim 0). */
ODL_API int64_t odl_tensor_numel(const odl_tensor *t);
ODL_API size_t odl_tensor_nbytes(const odl_tensor *t);

/* Allocate a contiguous tensor of the given shape. The contents are undefined.
 * Errors: ODL_E_INVAL (ndim out of 0..ODL_MAX_DIMS, negative dimension), ODL_E_NOMEM (names the size),
 * ODL_E_NODEV (CUDA tensor in a build or on a machine without CUDA). */
ODL_API odl_status odl_tensor_alloc(odl_tensor *t, odl_device dev, odl_dtype dtype, int ndim, const int64_t *shape);
/* Same, zero-filled. */
ODL_API odl_status odl_tensor_zeros(odl_tensor *t, odl_device dev, odl_dtype dtype, int ndim, const int64_t *shape);
/* Release the memory if owned and reset *t to an empty tensor. NULL and empty tensors are fine. */
ODL_API void odl_tensor_free(odl_tensor *t);

/* A non-owning view of `count` leading-dimension rows starting at row `first`, e.g. a batch slice of
 * [N, ...]. Errors: ODL_E_INVAL when the range is outside the tensor. */
ODL_API odl_status odl_tensor_view_rows(const odl_tensor *t, int64_t first, int64_t count, odl_tensor *view);
/* A non-owning view with another shape of the same number of elements (reshape). */
ODL_API odl_status odl_tensor_reshape(const odl_tensor *t, int ndim, const int64_t *shape, odl_tensor *view);

/* Copy all bytes of src into dst (same dtype and numel; any pair of devices). Synchronous with
 * respect to the host for device-to-host copies. */
ODL_API odl_status odl_tensor_copy(odl_tensor *dst, const odl_tensor *src);
/* Copy from/to plain host memory of nbytes == odl_tensor_nbytes(t). */
ODL_API odl_status odl_tensor_copy_from_host(odl_tensor *t, const void *host, size_t nbytes);
ODL_API odl_status odl_tensor_copy_to_host(const odl_tensor *t, void *host, size_t nbytes);
/* odl_tensor_fill, which runs a kernel, is an op: odl/ops.h. */

/* Shape checks that leave a message naming the tensor and both shapes.
 * odl_tensor_check(t, "x", ODL_F32, dev, 4, (int64_t[]){N, C, H, W}); a -1 in the expected shape
 * matches any size. Also fails for a NULL tensor or NULL data. */
ODL_API odl_status odl_tensor_check(const odl_tensor *t, const char *name, odl_dtype dtype, odl_device dev, int ndim,
                            const int64_t *shape);
/* Format a shape as "[2, 3, 4]" into buf; returns buf. */
ODL_API const char *odl_shape_str(const odl_tensor *t, char *buf, size_t cap);
/* The same for a bare shape: "[2, 3]" (cut to fit cap; "[]" for ndim 0). Returns buf. */
ODL_API const char *odl_dims_str(int ndim, const int64_t *shape, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
