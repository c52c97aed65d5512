/* HDF5 tensor files: the container of weights and checkpoints (docs/checkpoint_format.md).
 *
 * A file holds whole tensors as datasets at slash paths ("/model/conv1/weight"), stored little-endian,
 * C order (row-major), contiguous and uncompressed, so h5py and h5dump read them as they are. Each
 * dataset written here carries a scalar uint32 attribute "crc32": zlib's crc32 (the same as Python's
 * zlib.crc32) over the dataset's raw little-endian bytes in C order. Groups (and the root) carry scalar
 * attributes: int64, float64 or UTF-8 variable-length strings.
 *
 * Writing is crash-safe: odl_h5_writer_open creates "<path>.tmp"; odl_h5_writer_commit flushes and
 * closes it, fsyncs it, renames it onto <path> and fsyncs the directory. A process that dies before the
 * commit leaves the old <path> as it was (and a stale .tmp that the next writer truncates).
 *
 * Reading verifies a dataset's crc32 when the attribute is present (files written by h5py without it
 * read fine), converts float64 to float32 and other widening conversions on request, and checks the
 * shape the caller expects. HDF5's own error printing is silenced while these functions run; its
 * innermost message goes into odl_error_msg() instead.
 *
 * Handles are not shared between threads; different handles may be used from different threads.
 */
#ifndef ODL_H5IO_H
#define ODL_H5IO_H

#include "odl/api.h"
#include <stddef.h>
#include <stdint.h>

#include "odl/status.h"
#include "odl/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ODL_H5_CRC_ATTR "crc32"

/* ------------------------------------------------------------------------------------------------ */
/* Writer                                                                                             */

typedef struct odl_h5_writer odl_h5_writer;

/* Create "<path>.tmp" (truncating a stale one) for writing.
 * Errors: ODL_E_NOTFOUND (the directory of path does not exist), ODL_E_HDF5 (H5Fcreate, naming the
 * path and HDF5's reason), ODL_E_INVAL, ODL_E_NOMEM. */
ODL_API odl_status odl_h5_writer_open(const char *path, odl_h5_writer **out);

/* Write a dataset of dtype F32, F64, I64, I32 or U8 with shape[ndim] (ndim 0..ODL_MAX_DIMS; ndim 0 is
 * a scalar) from contiguous host memory `data` (numel * dtype size bytes; may be NULL when numel is 0).
 * `dset` is a slash path, leading '/' optional; missing intermediate groups are created. Adds the crc32
 * attribute. Errors: ODL_E_INVAL (bad path, dataset already exists, negative dimension),
 * ODL_E_UNSUPPORTED (F16/BF16), ODL_E_HDF5 (the failing call, the file and the dataset). */
ODL_API odl_status odl_h5_writer_write(odl_h5_writer *w, const char *dset, odl_dtype dtype, int ndim, const int64_t *shape,
                               const void *data);
/* The same for a CPU tensor (its dtype, shape and data). A CUDA tensor is ODL_E_INVAL: copy it to the
 * host first. */
ODL_API odl_status odl_h5_writer_write_tensor(odl_h5_writer *w, const char *dset, const odl_tensor *t);

/* Scalar attribute `name` on the object at `obj` ("/" or "" = the root; a group or dataset path).
 * A missing group is created; an existing attribute of that name is replaced. "crc32" on a dataset is
 * reserved. Errors: ODL_E_INVAL, ODL_E_HDF5. */
ODL_API odl_status odl_h5_writer_attr_i64(odl_h5_writer *w, const char *obj, const char *name, int64_t value);
ODL_API odl_status odl_h5_writer_attr_f64(odl_h5_writer *w, const char *obj, const char *name, double value);
ODL_API odl_status odl_h5_writer_attr_str(odl_h5_writer *w, const char *obj, const char *name, const char *value);

/* Make the file durable and visible at <path>: H5Fflush, H5Fclose, fsync(<path>.tmp),
 * rename(<path>.tmp, <path>), fsync(directory). Always releases w. On failure the .tmp is removed and
 * <path> is as it was (unless only the final directory fsync failed: then the new file is in place but
 * the rename may not survive a power loss; the error says so).
 * Errors: ODL_E_HDF5, ODL_E_IO (naming the call, the path and errno's text). */
ODL_API odl_status odl_h5_writer_commit(odl_h5_writer *w);

/* Drop everything written: close and remove <path>.tmp, release w. NULL is fine. */
ODL_API void odl_h5_writer_abort(odl_h5_writer *w);

/* ------------------------------------------------------------------------------------------------ */
/* Reader                                                                                             */

typedef struct odl_h5_reader odl_h5_reader;

/* Open a file read-only and list its datasets.
 * Errors: ODL_E_NOTFOUND (no such file), ODL_E_IO (cannot stat/read, a directory),
 * ODL_E_FORMAT (not an HDF5 file; truncated or damaged HDF5 file, with HDF5's reason), ODL_E_HDF5. */
ODL_API odl_status odl_h5_reader_open(const char *path, odl_h5_reader **out);
ODL_API void odl_h5_reader_close(odl_h5_reader *r);
ODL_API const char *odl_h5_reader_path(const odl_h5_reader *r);

/* Datasets of the file, absolute paths ("/init/conv1.weight"), in HDF5's name order (the order h5dump
 * shows). Valid until odl_h5_reader_close. */
ODL_API size_t odl_h5_reader_count(const odl_h5_reader *r);
ODL_API const char *odl_h5_reader_name(const odl_h5_reader *r, size_t i);
/* 1 when `dset` is a dataset of the file (leading '/' optional). */
ODL_API int odl_h5_reader_has(const odl_h5_reader *r, const char *dset);

typedef struct odl_h5_info {
    odl_dtype dtype; /* as stored: F32, F64, I64, I32 or U8 */
    int ndim;        /* 0 for a scalar */
    int64_t shape[ODL_MAX_DIMS];
    int64_t numel;
    int has_crc32;   /* 1 when the dataset has a crc32 attribute */
    uint32_t crc32;
} odl_h5_info;

/* Errors: ODL_E_NOTFOUND (no such dataset, naming the file), ODL_E_UNSUPPORTED (a stored type other
 * than the five, or more than ODL_MAX_DIMS dimensions), ODL_E_HDF5. */
ODL_API odl_status odl_h5_reader_info(odl_h5_reader *r, const char *dset, odl_h5_info *info);

/* Read a whole dataset into buf (numel * odl_dtype_size(dtype) bytes, C order) as `dtype`, checking
 * that its shape is exactly shape[ndim], then verifying its crc32 if present (over the stored bytes,
 * before any conversion).
 * Conversions: float32 <- float64 (rounded to nearest), float64 <- float32, int64 <- int32 or uint8,
 * int32 <- uint8; otherwise the dtype must be the stored one.
 * Errors: ODL_E_INVAL (shape differs: "<file>:<dset>: shape [32, 1, 3, 3] in the file, [32, 3, 3]
 * expected"; a conversion not listed), ODL_E_CHECKSUM (names the dataset, both crc values),
 * ODL_E_NOTFOUND, ODL_E_UNSUPPORTED, ODL_E_NOMEM, ODL_E_HDF5. */
ODL_API odl_status odl_h5_reader_read(odl_h5_reader *r, const char *dset, odl_dtype dtype, int ndim, const int64_t *shape,
                              void *buf);
/* The same into a CPU tensor: its dtype and shape are the expected ones. */
ODL_API odl_status odl_h5_reader_read_tensor(odl_h5_reader *r, const char *dset, odl_tensor *t);

/* Scalar (or one-element) attribute of the object at `obj` ("/" = root).
 * _i64 reads any integer attribute; _f64 any integer or float attribute; _str a fixed- or
 * variable-length string into buf (NUL-terminated).
 * Errors: ODL_E_NOTFOUND (no such object or attribute), ODL_E_INVAL (wrong kind of attribute, more
 * than one element, buffer too small: names the size needed), ODL_E_HDF5. */
ODL_API odl_status odl_h5_reader_attr_i64(odl_h5_reader *r, const char *obj, const char *name, int64_t *value);
ODL_API odl_status odl_h5_reader_attr_f64(odl_h5_reader *r, const char *obj, const char *name, double *value);
ODL_API odl_status odl_h5_reader_attr_str(odl_h5_reader *r, const char *obj, const char *name, char *buf, size_t cap);

/* 1..cap numbers of an integer or float attribute (scalar or 1-D) as float64, their count in *n (integers
 * up to 2^53 are exact). Errors: ODL_E_NOTFOUND (no such object or attribute), ODL_E_INVAL (not numeric,
 * no element or more than cap), ODL_E_HDF5. */
ODL_API odl_status odl_h5_reader_attr_f64s(odl_h5_reader *r, const char *obj, const char *name, double *values, int cap,
                                   int *n);

/* 1 when a group or dataset exists at the slash path `obj` ("/" = the root), else 0; never an error. */
ODL_API int odl_h5_reader_exists(odl_h5_reader *r, const char *obj);

/* The n strings of a string dataset (variable-length or fixed-size, e.g. h5py's string arrays) as n
 * malloc'd NUL-terminated copies in out[0..n-1]; the caller frees each. On failure out[] is all NULL.
 * Errors: ODL_E_NOTFOUND, ODL_E_INVAL (not a string dataset, or not exactly n elements: names both
 * counts), ODL_E_NOMEM, ODL_E_HDF5. */
ODL_API odl_status odl_h5_reader_read_strings(odl_h5_reader *r, const char *dset, int64_t n, char **out);

/* Where a contiguous dataset's bytes lie in the file (H5Dget_offset, H5Dget_storage_size), for tools
 * and tests. Errors: ODL_E_UNSUPPORTED (chunked, compact or not allocated), ODL_E_NOTFOUND. */
ODL_API odl_status odl_h5_reader_data_offset(odl_h5_reader *r, const char *dset, uint64_t *offset, uint64_t *nbytes);

/* zlib crc32 of n elements of `dtype` at data, over their little-endian bytes (what the crc32
 * attribute holds). */
ODL_API uint32_t odl_h5_crc32(odl_dtype dtype, const void *data, int64_t numel);

#ifdef __cplusplus
}
#endif
#endif
