/* HDF5 tensor files with per-dataset crc32 and crash-safe commits. See odl/h5io.h and
 * docs/checkpoint_format.md. Every HDF5 call is checked; a failure becomes ODL_E_HDF5 naming the call,
 * the file and the object, with the innermost message of HDF5's error stack. */
#include "odl/h5io.h"
#include "odl/file.h"

#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* ---------------------------------------------------------------------------------------------- */
/* HDF5 error handling: silence the automatic printing while we run, report the innermost message.  */

typedef struct h5_quiet {
    H5E_auto2_t func;
    void *data;
} h5_quiet;

#ifndef H5_HAVE_THREADSAFE
/* A library built without thread safety must not be entered from two threads at once. */
static pthread_mutex_t g_h5_lock = PTHREAD_MUTEX_INITIALIZER;
#define H5_LOCK() pthread_mutex_lock(&g_h5_lock)
#define H5_UNLOCK() pthread_mutex_unlock(&g_h5_lock)
#else
#define H5_LOCK() ((void)0)
#define H5_UNLOCK() ((void)0)
#endif

static void quiet_enter(h5_quiet *q) {
    H5_LOCK();
    q->func = NULL;
    q->data = NULL;
    H5Eget_auto2(H5E_DEFAULT, &q->func, &q->data);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

static void quiet_leave(h5_quiet *q) {
    H5Eclear2(H5E_DEFAULT);
    H5Eset_auto2(H5E_DEFAULT, q->func, q->data);
    H5_UNLOCK();
}

typedef struct walk_msg {
    char deepest[384];
} walk_msg;

static herr_t walk_cb(unsigned n, const H5E_error2_t *e, void *data) {
    (void)n;
    walk_msg *m = data;
    if (e->desc && e->desc[0]) snprintf(m->deepest, sizeof m->deepest, "%s", e->desc);
    else if (e->func_name) snprintf(m->deepest, sizeof m->deepest, "error in %s", e->func_name);
    return 0;
}

/* The innermost description on the thread's HDF5 error stack (then cleared). */
static const char *h5_reason(char *buf, size_t cap) {
    walk_msg m;
    m.deepest[0] = '\0';
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, walk_cb, &m);
    H5Eclear2(H5E_DEFAULT);
    snprintf(buf, cap, "%s", m.deepest[0] ? m.deepest : "no HDF5 error message");
    return buf;
}

static odl_status h5_fail_at(const char *file, int line, odl_status code, const char *call, const char *path,
                             const char *obj) {
    char why[400];
    h5_reason(why, sizeof why);
    return odl_error_set(code, file, line, "%s(%s%s%s) failed: %s", call, path, obj ? ":" : "", obj ? obj : "", why);
}
#define H5FAIL(call, path, obj) h5_fail_at(__FILE__, __LINE__, ODL_E_HDF5, (call), (path), (obj))

/* ---------------------------------------------------------------------------------------------- */
/* Types and checksums                                                                              */


static const char *dtype_name(odl_dtype t) {
    switch (t) {
    case ODL_F32: return "float32";
    case ODL_F64: return "float64";
    case ODL_F16: return "float16";
    case ODL_BF16: return "bfloat16";
    case ODL_I32: return "int32";
    case ODL_I64: return "int64";
    case ODL_U8: return "uint8";
    }
    return "?";
}

/* File (little-endian) and memory (native) types of the stored dtypes; -1 for others. */
static hid_t file_type(odl_dtype t) {
    switch (t) {
    case ODL_F32: return H5T_IEEE_F32LE;
    case ODL_F64: return H5T_IEEE_F64LE;
    case ODL_I32: return H5T_STD_I32LE;
    case ODL_I64: return H5T_STD_I64LE;
    case ODL_U8: return H5T_STD_U8LE;
    default: return -1;
    }
}

static hid_t mem_type(odl_dtype t) {
    switch (t) {
    case ODL_F32: return H5T_NATIVE_FLOAT;
    case ODL_F64: return H5T_NATIVE_DOUBLE;
    case ODL_I32: return H5T_NATIVE_INT32;
    case ODL_I64: return H5T_NATIVE_INT64;
    case ODL_U8: return H5T_NATIVE_UINT8;
    default: return -1;
    }
}

static int host_is_little_endian(void) {
    const uint16_t one = 1;
    return *(const unsigned char *)&one == 1;
}

uint32_t odl_h5_crc32(odl_dtype dtype, const void *data, int64_t numel) {
    size_t es = odl_dtype_size(dtype);
    uint64_t nbytes = numel > 0 ? (uint64_t)numel * es : 0;
    uLong crc = crc32(0L, Z_NULL, 0);
    const unsigned char *p = data;
    if (host_is_little_endian() || es == 1) {
        while (nbytes > 0) {
            uInt n = nbytes > (1u << 30) ? (1u << 30) : (uInt)nbytes;
            crc = crc32(crc, p, n);
            p += n;
            nbytes -= n;
        }
    } else {
        unsigned char tmp[4096];
        while (nbytes > 0) {
            size_t n = nbytes > sizeof tmp ? sizeof tmp : (size_t)nbytes; /* a multiple of es */
            for (size_t i = 0; i < n; i += es)
                for (size_t b = 0; b < es; b++) tmp[i + b] = p[i + es - 1 - b];
            crc = crc32(crc, tmp, (uInt)n);
            p += n;
            nbytes -= n;
        }
    }
    return (uint32_t)crc;
}

static int64_t numel_of(int ndim, const int64_t *shape) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    return n;
}

/* "/a/b" from "a/b" or "/a/b"; rejects empty names, "//", a trailing '/', "." and ".." parts. */
static odl_status norm_path(const char *in, int allow_root, char *out, size_t cap, const char *what) {
    if (!in) return ODL_ERR(ODL_E_INVAL, "%s path is NULL", what);
    const char *s = in[0] == '/' ? in + 1 : in;
    if (!s[0]) {
        if (allow_root) {
            snprintf(out, cap, "/");
            return ODL_OK;
        }
        return ODL_ERR(ODL_E_INVAL, "%s path '%s' is empty", what, in);
    }
    if (strlen(s) + 2 > cap) return ODL_ERR(ODL_E_INVAL, "%s path '%.80s...' is too long", what, in);
    const char *p = s;
    while (*p) {
        const char *e = strchr(p, '/');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
            return ODL_ERR(ODL_E_INVAL, "%s path '%s' has an empty, '.' or '..' component", what, in);
        p += n;
        if (*p == '/') {
            p++;
            if (!*p) return ODL_ERR(ODL_E_INVAL, "%s path '%s' ends with '/'", what, in);
        }
    }
    snprintf(out, cap, "/%s", s);
    return ODL_OK;
}

/* 1 if every component of the absolute path exists as a link, 0 if not, -1 on an HDF5 error (message
 * set), -2 when a component before the last is not a group (message set, ODL_E_INVAL). */
static int link_exists(hid_t file, const char *path, const char *file_name) {
    if (strcmp(path, "/") == 0) return 1;
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char save = *p;
            *p = '\0';
            htri_t ex = H5Lexists(file, buf, H5P_DEFAULT);
            if (ex < 0) {
                H5FAIL("H5Lexists", file_name, buf);
                return -1;
            }
            if (ex == 0) return 0;
            if (!save) return 1;
            hid_t o = H5Oopen(file, buf, H5P_DEFAULT);
            if (o < 0) {
                H5FAIL("H5Oopen", file_name, buf);
                return -1;
            }
            H5I_type_t t = H5Iget_type(o);
            H5Oclose(o);
            if (t != H5I_GROUP) {
                ODL_ERR(ODL_E_INVAL, "%s:%s: %s is a %s, not a group", file_name, path, buf,
                        t == H5I_DATASET ? "dataset" : "named datatype");
                return -2;
            }
            *p = save;
        }
    }
}

/* ---------------------------------------------------------------------------------------------- */
/* Writer                                                                                           */

struct odl_h5_writer {
    hid_t file;
    hid_t lcpl; /* link creation: create intermediate groups */
    char *path;
    char *tmp;
};

static void writer_free(odl_h5_writer *w) {
    if (!w) return;
    if (w->lcpl >= 0) H5Pclose(w->lcpl);
    if (w->file >= 0) H5Fclose(w->file);
    free(w->path);
    free(w->tmp);
    free(w);
}

static odl_status writer_open(const char *path, odl_h5_writer **out) {
    odl_status st = ODL_OK;
    hid_t fapl = -1;
    if (!path || !path[0] || !out) return ODL_ERR(ODL_E_INVAL, "odl_h5_writer_open: NULL or empty argument");
    *out = NULL;
    odl_h5_writer *w = calloc(1, sizeof *w);
    if (!w) return ODL_ERR(ODL_E_NOMEM, "%s: out of memory", path);
    w->file = -1;
    w->lcpl = -1;
    size_t n = strlen(path);
    w->path = strdup(path);
    w->tmp = malloc(n + 5);
    if (!w->path || !w->tmp) {
        st = ODL_ERR(ODL_E_NOMEM, "%s: out of memory", path);
        goto fail;
    }
    snprintf(w->tmp, n + 5, "%s.tmp", path);

    /* The directory must exist: say so plainly rather than through HDF5's stack. */
    {
        char *dir = strdup(path);
        if (!dir) {
            st = ODL_ERR(ODL_E_NOMEM, "%s: out of memory", path);
            goto fail;
        }
        char *slash = strrchr(dir, '/');
        struct stat sb;
        if (slash) {
            if (slash == dir) slash[1] = '\0';
            else *slash = '\0';
            if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
                st = ODL_ERR(ODL_E_NOTFOUND, "%s: cannot write: directory %s does not exist", path, dir);
                free(dir);
                goto fail;
            }
        }
        free(dir);
    }

    fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl < 0) {
        st = H5FAIL("H5Pcreate", w->tmp, NULL);
        goto fail;
    }
    /* Closing the file closes everything in it, so H5Fclose really ends the file before fsync. */
    if (H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG) < 0) {
        st = H5FAIL("H5Pset_fclose_degree", w->tmp, NULL);
        goto fail;
    }
    w->file = H5Fcreate(w->tmp, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    if (w->file < 0) {
        st = H5FAIL("H5Fcreate", w->tmp, NULL);
        goto fail;
    }
    w->lcpl = H5Pcreate(H5P_LINK_CREATE);
    if (w->lcpl < 0) {
        st = H5FAIL("H5Pcreate", w->tmp, NULL);
        goto fail;
    }
    if (H5Pset_create_intermediate_group(w->lcpl, 1) < 0) {
        st = H5FAIL("H5Pset_create_intermediate_group", w->tmp, NULL);
        goto fail;
    }
    H5Pclose(fapl);
    *out = w;
    return ODL_OK;
fail:
    if (fapl >= 0) H5Pclose(fapl);
    if (w->file >= 0) {
        H5Fclose(w->file);
        w->file = -1;
        unlink(w->tmp);
    }
    writer_free(w);
    return st;
}

odl_status odl_h5_writer_open(const char *path, odl_h5_writer **out) {
    h5_quiet q;
    quiet_enter(&q);
    odl_status st = writer_open(path, out);
    quiet_leave(&q);
    return st;
}

static odl_status write_crc_attr(odl_h5_writer *w, hid_t d, const char *dset, uint32_t crc) {
    odl_status st = ODL_OK;
    hid_t sp = H5Screate(H5S_SCALAR), a = -1;
    if (sp < 0) return H5FAIL("H5Screate", w->tmp, dset);
    a = H5Acreate2(d, ODL_H5_CRC_ATTR, H5T_STD_U32LE, sp, H5P_DEFAULT, H5P_DEFAULT);
    if (a < 0) {
        st = H5FAIL("H5Acreate2", w->tmp, dset);
        goto out;
    }
    if (H5Awrite(a, H5T_NATIVE_UINT32, &crc) < 0) st = H5FAIL("H5Awrite", w->tmp, dset);
out:
    if (a >= 0 && H5Aclose(a) < 0 && st == ODL_OK) st = H5FAIL("H5Aclose", w->tmp, dset);
    H5Sclose(sp);
    return st;
}

static odl_status writer_write(odl_h5_writer *w, const char *dset_in, odl_dtype dtype, int ndim,
                               const int64_t *shape, const void *data) {
    odl_status st = ODL_OK;
    char dset[1024];
    hid_t sp = -1, d = -1;
    if (!w) return ODL_ERR(ODL_E_INVAL, "odl_h5_writer_write: writer is NULL");
    ODL_CHECK(norm_path(dset_in, 0, dset, sizeof dset, "dataset"));
    if (ndim < 0 || ndim > ODL_MAX_DIMS || (ndim > 0 && !shape))
        return ODL_ERR(ODL_E_INVAL, "%s:%s: ndim %d outside 0..%d", w->path, dset, ndim, ODL_MAX_DIMS);
    hsize_t dims[ODL_MAX_DIMS];
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) {
            char s[160];
            odl_dims_str(ndim, shape, s, sizeof s);
            return ODL_ERR(ODL_E_INVAL, "%s:%s: negative dimension in shape %s", w->path, dset, s);
        }
        dims[i] = (hsize_t)shape[i];
    }
    hid_t ft = file_type(dtype), mt = mem_type(dtype);
    if (ft < 0 || mt < 0)
        return ODL_ERR(ODL_E_UNSUPPORTED, "%s:%s: dtype %s cannot be stored (float32, float64, int64, int32, uint8 can)",
                       w->path, dset, dtype_name(dtype));
    int64_t n = numel_of(ndim, shape);
    if (n > 0 && !data) return ODL_ERR(ODL_E_INVAL, "%s:%s: data is NULL", w->path, dset);

    int ex = link_exists(w->file, dset, w->path);
    if (ex < 0) return ex == -2 ? ODL_E_INVAL : ODL_E_HDF5;
    if (ex > 0) return ODL_ERR(ODL_E_INVAL, "%s:%s: already exists in the file being written", w->path, dset);

    sp = ndim == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(ndim, dims, NULL);
    if (sp < 0) return H5FAIL(ndim == 0 ? "H5Screate" : "H5Screate_simple", w->tmp, dset);
    d = H5Dcreate2(w->file, dset, ft, sp, w->lcpl, H5P_DEFAULT, H5P_DEFAULT);
    if (d < 0) {
        st = H5FAIL("H5Dcreate2", w->tmp, dset);
        goto out;
    }
    if (n > 0 && H5Dwrite(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0) {
        st = H5FAIL("H5Dwrite", w->tmp, dset);
        goto out;
    }
    st = write_crc_attr(w, d, dset, odl_h5_crc32(dtype, data, n));
out:
    if (d >= 0 && H5Dclose(d) < 0 && st == ODL_OK) st = H5FAIL("H5Dclose", w->tmp, dset);
    H5Sclose(sp);
    return st;
}

odl_status odl_h5_writer_write(odl_h5_writer *w, const char *dset, odl_dtype dtype, int ndim, const int64_t *shape,
                               const void *data) {
    h5_quiet q;
    quiet_enter(&q);
    odl_status st = writer_write(w, dset, dtype, ndim, shape, data);
    quiet_leave(&q);
    return st;
}

odl_status odl_h5_writer_write_tensor(odl_h5_writer *w, const char *dset, const odl_tensor *t) {
    if (!t) return ODL_ERR(ODL_E_INVAL, "odl_h5_writer_write_tensor(%s): tensor is NULL", dset ? dset : "(null)");
    if (t->device.type != ODL_DEV_CPU)
        return ODL_ERR(ODL_E_INVAL, "odl_h5_writer_write_tensor(%s): tensor is on a CUDA device; copy it to the host first",
                       dset ? dset : "(null)");
    return odl_h5_writer_write(w, dset, t->dtype, t->ndim, t->shape, t->data);
}

/* Open (creating groups when missing) the object an attribute goes on. */
static odl_status open_attr_target(odl_h5_writer *w, const char *obj, hid_t *out, int *is_dataset) {
    *out = -1;
    *is_dataset = 0;
    int ex = link_exists(w->file, obj, w->path);
    if (ex < 0) return ex == -2 ? ODL_E_INVAL : ODL_E_HDF5;
    if (ex == 0) {
        hid_t g = H5Gcreate2(w->file, obj, w->lcpl, H5P_DEFAULT, H5P_DEFAULT);
        if (g < 0) return H5FAIL("H5Gcreate2", w->tmp, obj);
        *out = g;
        return ODL_OK;
    }
    hid_t o = H5Oopen(w->file, obj, H5P_DEFAULT);
    if (o < 0) return H5FAIL("H5Oopen", w->tmp, obj);
    *is_dataset = H5Iget_type(o) == H5I_DATASET;
    *out = o;
    return ODL_OK;
}

typedef enum { ATTR_I64, ATTR_F64, ATTR_STR } attr_kind;

static odl_status writer_attr(odl_h5_writer *w, const char *obj_in, const char *name, attr_kind kind,
                              const void *value) {
    odl_status st = ODL_OK;
    char obj[1024], where[1100];
    hid_t o = -1, sp = -1, a = -1, t = -1;
    if (!w || !name || !name[0] || !value) return ODL_ERR(ODL_E_INVAL, "odl_h5_writer_attr: NULL or empty argument");
    ODL_CHECK(norm_path(obj_in ? obj_in : "/", 1, obj, sizeof obj, "object"));
    snprintf(where, sizeof where, "%s@%s", obj, name);
    int is_dataset = 0;
    ODL_CHECK(open_attr_target(w, obj, &o, &is_dataset));
    if (is_dataset && strcmp(name, ODL_H5_CRC_ATTR) == 0) {
        st = ODL_ERR(ODL_E_INVAL, "%s:%s: the attribute name crc32 is reserved for the checksum", w->path, where);
        goto out;
    }
    htri_t ex = H5Aexists(o, name);
    if (ex < 0) {
        st = H5FAIL("H5Aexists", w->tmp, where);
        goto out;
    }
    if (ex > 0 && H5Adelete(o, name) < 0) {
        st = H5FAIL("H5Adelete", w->tmp, where);
        goto out;
    }
    sp = H5Screate(H5S_SCALAR);
    if (sp < 0) {
        st = H5FAIL("H5Screate", w->tmp, where);
        goto out;
    }
    hid_t ftype, mtype;
    if (kind == ATTR_STR) {
        t = H5Tcopy(H5T_C_S1);
        if (t < 0 || H5Tset_size(t, H5T_VARIABLE) < 0 || H5Tset_cset(t, H5T_CSET_UTF8) < 0) {
            st = H5FAIL("H5Tset_size", w->tmp, where);
            goto out;
        }
        ftype = mtype = t;
    } else if (kind == ATTR_I64) {
        ftype = H5T_STD_I64LE;
        mtype = H5T_NATIVE_INT64;
    } else {
        ftype = H5T_IEEE_F64LE;
        mtype = H5T_NATIVE_DOUBLE;
    }
    a = H5Acreate2(o, name, ftype, sp, H5P_DEFAULT, H5P_DEFAULT);
    if (a < 0) {
        st = H5FAIL("H5Acreate2", w->tmp, where);
        goto out;
    }
    const void *src = value;
    const char *sval = value;
    if (kind == ATTR_STR) src = &sval; /* variable-length strings are written as char* */
    if (H5Awrite(a, mtype, src) < 0) st = H5FAIL("H5Awrite", w->tmp, where);
out:
    if (a >= 0 && H5Aclose(a) < 0 && st == ODL_OK) st = H5FAIL("H5Aclose", w->tmp, where);
    if (t >= 0) H5Tclose(t);
    if (sp >= 0) H5Sclose(sp);
    if (o >= 0) H5Oclose(o);
    return st;
}

odl_status odl_h5_writer_attr_i64(odl_h5_writer *w, const char *obj, const char *name, int64_t value) {
    h5_quiet q;
    quiet_enter(&q);
    odl_status st = writer_attr(w, obj, name, ATTR_I64, &value);
    quiet_leave(&q);
    return st;
}

odl_status odl_h5_writer_attr_f64(odl_h5_writer *w, const char *obj, const char *name, double value) {
    h5_quiet q;
    quiet_enter(&q);
    odl_status st = writer_attr(w, obj, name, ATTR_F64, &value);
    quiet_leave(&q);
    return st;
}

odl_status odl_h5_writer_attr_str(odl_h5_writer *w, const char *obj, const char *name, const char *value) {
    h5_quiet q;
    quiet_enter(&q);
    odl_status st = writer_attr(w, obj, name, ATTR_STR, value);
    quiet_leave(&q);
    return st;
}

static odl_status writer_commit(odl_h5_writer *w) {
    odl_status st = ODL_OK;
    if (H5Fflush(w->file, H5F_SCOPE_GLOBAL) < 0) {
        st = H5FAIL("H5Fflush", w->tmp, NULL);
        goto fail;
    }
    H5Pclose(w->lcpl);
    w->lcpl = -1;
    herr_t rc = H5Fclose(w->file);
    w->file = -1;
    if (rc < 0) {
        st = H5FAIL("H5Fclose", w->tmp, NULL);
        goto fail;
    }
    return odl_file_publish(w->tmp, w->path, 0, NULL); /* fsync, rename, fsync of the directory */
fail:
    if (w->file >= 0) {
        H5Fclose(w->file);
        w->file = -1;
    }
    unlink(w->tmp);
    return st;
}

odl_status odl_h5_writer_commit(odl_h5_writer *w) {
    if (!w) return ODL_ERR(ODL_E_INVAL, "odl_h5_writer_commit: writer is NULL");
    h5_quiet q;
    quiet_enter(&q);
    odl_status st = writer_commit(w);
    writer_free(w);
    quiet_leave(&q);
    return st;
}

void odl_h5_writer_abort(odl_h5_writer *w) {
    if (!w) return;
    h5_quiet q;
    quiet_enter(&q);
    if (w->lcpl >= 0) {
        H5Pclose(w->lcpl);
        w->lcpl = -1;
    }
    if (w->file >= 0) {
        H5Fclose(w->file);
        w->file = -1;
    }
    unlink(w->tmp);
    writer_free(w);
    quiet_leave(&q);
}

/* ---------------------------------------------------------------------------------------------- */
/* Reader                                                                                           */

struct odl_h5_reader {
    hid_t file;
    char *path;
    char **names;
    size_t n, cap;
};

const char *odl_h5_reader_path(const odl_h5_reader *r) { return r ? r->path : ""; }
size_t odl_h5_reader_count(const odl_h5_reader *r) { return r ? r->n : 0; }
const char *odl_h5_reader_name(const odl_h5_reader *r, size_t i) { return r && i < r->n ? r->names[i] : NULL; }

int odl_h5_reader_has(const odl_h5_reader *r, const char *dset) {
    if (!r || !dset) return 0;
    const char *s = dset[0] == '/' ? dset + 1 : dset;
    for (size_t i = 0; i < r->n; i++)
        if (strcmp(r->names[i] + 1, s) == 0) return 1;
    return 0;
}

typedef struct list_ctx {
    odl_h5_reader *r;
    odl_status st;
} list_ctx;

static herr_t list_cb(hid_t group, const char *name, const H5L_info_t *info, void *data) {
    list_ctx *c = data;
    if (info->type != H5L_TYPE_HARD) return 0;
    hid_t o = H5Oopen(group, name, H5P_DEFAULT);
    if (o < 0) {
        c->st = H5FAIL("H5Oopen", c->r->path, name);
        return -1;
    }
    H5I_type_t t = H5Iget_type(o);
    H5Oclose(o);
    if (t != H5I_DATASET) return 0;
    if (c->r->n == c->r->cap) {
        size_t cap = c->r->cap ? c->r->cap * 2 : 64;
        char **nn = realloc(c->r->names, cap * sizeof *nn);
        if (!nn) {
            c->st = ODL_ERR(ODL_E_NOMEM, "%s: out of memory listing datasets", c->r->path);
            return -1;
        }
        c->r->names = nn;
        c->r->cap = cap;
    }
    size_t len = strlen(name);
    char *s = malloc(len + 2);
    if (!s) {
        c->st = ODL_ERR(ODL_E_NOMEM, "%s: out of memory listing datasets", c->r->path);
        return -1;
    }
    s[0] = '/';
    memcpy(s + 1, name, len + 1);
    c->r->names[c->r->n++] = s;
    return 0;
}

static void reader_free(odl_h5_reader *r) {
    if (!r) return;
    if (r->file >= 0) H5Fclose(r->file);
    for (size_t i = 0; i < r->n; i++) free(r->names[i]);
    free(r->names);
    free(r->path);
    free(r);
}

static odl_status reader_open(const char *path, odl_h5_reader **out) {
    odl_status st = ODL_OK;
    hid_t fapl = -1;
    if (!path || !path[0] || !out) return ODL_ERR(ODL_E_INVAL, "odl_h5_reader_open: NULL or empty argument");
    *out = NULL;
    struct stat sb;
    if (stat(path, &sb) != 0) {
        int e = errno;
        return ODL_ERR(e == ENOENT ? ODL_E_NOTFOUND : ODL_E_IO, "%s: %s", path,
                       e == ENOENT ? "no such file" : strerror(e));
    }
    if (S_ISDIR(sb.st_mode)) return ODL_ERR(ODL_E_IO, "%s: is a directory, not an HDF5 file", path);
    if (access(path, R_OK) != 0) return ODL_ERR(ODL_E_IO, "%s: cannot read: %s", path, strerror(errno));
#if H5_VERSION_GE(1, 12, 0)
    htri_t is = H5Fis_accessible(path, H5P_DEFAULT);
#else
    htri_t is = H5Fis_hdf5(path);
#endif
    if (is == 0)
        return ODL_ERR(ODL_E_FORMAT, "%s: not an HDF5 file (no HDF5 signature in its %lld bytes)", path,
                       (long long)sb.st_size);
    if (is < 0) return H5FAIL("H5Fis_hdf5/H5Fis_accessible", path, NULL);

    odl_h5_reader *r = calloc(1, sizeof *r);
    if (!r) return ODL_ERR(ODL_E_NOMEM, "%s: out of memory", path);
    r->file = -1;
    r->path = strdup(path);
    if (!r->path) {
        st = ODL_ERR(ODL_E_NOMEM, "%s: out of memory", path);
        goto fail;
    }
    fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl < 0 || H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG) < 0) {
        st = H5FAIL("H5Pset_fclose_degree", path, NULL);
        goto fail;
    }
    r->file = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    if (r->file < 0) {
        char why[400];
        h5_reason(why, sizeof why);
        st = ODL_ERR(ODL_E_FORMAT, "%s: %s HDF5 file (%lld bytes): H5Fopen failed: %s", path,
                     strstr(why, "truncated") ? "truncated" : "damaged or unreadable", (long long)sb.st_size, why);
        goto fail;
    }
    list_ctx c = {r, ODL_OK};
    if (H5Lvisit(r->file, H5_INDEX_NAME, H5_ITER_INC, list_cb, &c) < 0) {
        st = c.st != ODL_OK ? c.st : H5FAIL("H5Lvisit", path, "/");
        goto fail;
    }
    H5Pclose(fapl);
    *out = r;
    return ODL_OK;
fail:
    if (fapl >= 0) H5Pclose(fapl);
    reader_free(r);
    return st;
}

odl_status odl_h5_reader_open(const char *path, odl_h5_reader **out) {
    h5_quiet q;
    quiet_enter(&q);
    odl_status st = reader_open(path, out);
    quiet_leave(&q);
    return st;
}

void odl_h5_reader_close(odl_h5_reader *r) {
    if (!r) return;
    h5_quiet q;
    quiet_enter(&q);
    reader_free(r);
    quiet_leave(&q);
}

/* Open a dataset by path, with a plain "no such dataset" message. */
static odl_status open_dataset(odl_h5_reader *r, const char *dset_in, char *dset, size_t cap, hid_t *out) {
    *out = -1;
    if (!r) return ODL_ERR(ODL_E_INVAL, "reader is NULL");
    ODL_CHECK(norm_path(dset_in, 0, dset, cap, "dataset"));
    if (!odl_h5_reader_has(r, dset)) return ODL_ERR(ODL_E_NOTFOUND, "%s: no dataset %s", r->path, dset);
    hid_t d = H5Dopen2(r->file, dset, H5P_DEFAULT);
    if (d < 0) return H5FAIL("H5Dopen2", r->path, dset);
    *out = d;
    return ODL_OK;
}

static odl_status dataset_info(odl_h5_reader *r, hid_t d, const char *dset, odl_h5_info *info) {
    odl_status st = ODL_OK;
    hid_t t = -1, sp = -1, a = -1;
    memset(info, 0, sizeof *info);
    t = H5Dget_type(d);
    if (t < 0) return H5FAIL("H5Dget_type", r->path, dset);
    H5T_class_t cls = H5Tget_class(t);
    size_t size = H5Tget_size(t);
    if (cls == H5T_NO_CLASS || size == 0) {
        st = H5FAIL("H5Tget_class", r->path, dset);
        goto out;
    }
    int ok = 1;
    if (cls == H5T_FLOAT && size == 4) info->dtype = ODL_F32;
    else if (cls == H5T_FLOAT && size == 8) info->dtype = ODL_F64;
    else if (cls == H5T_INTEGER) {
        H5T_sign_t sign = H5Tget_sign(t);
        if (sign == H5T_SGN_ERROR) {
            st = H5FAIL("H5Tget_sign", r->path, dset);
            goto out;
        }
        if (size == 8 && sign == H5T_SGN_2) info->dtype = ODL_I64;
        else if (size == 4 && sign == H5T_SGN_2) info->dtype = ODL_I32;
        else if (size == 1 && sign == H5T_SGN_NONE) info->dtype = ODL_U8;
        else ok = 0;
    } else ok = 0;
    if (!ok) {
        const char *cname = cls == H5T_INTEGER ? "integer" : cls == H5T_FLOAT ? "float" : cls == H5T_STRING ? "string"
                            : cls == H5T_COMPOUND ? "compound" : cls == H5T_ENUM ? "enum" : "other";
        st = ODL_ERR(ODL_E_UNSUPPORTED, "%s:%s: stored as a %zu-byte %s%s; float32, float64, int64, int32 and uint8 are read",
                     r->path, dset, size, cname,
                     cls == H5T_INTEGER ? (H5Tget_sign(t) == H5T_SGN_NONE ? " (unsigned)" : " (signed)") : "");
        goto out;
    }
    sp = H5Dget_space(d);
    if (sp < 0) {
        st = H5FAIL("H5Dget_space", r->path, dset);
        goto out;
    }
    int nd = H5Sget_simple_extent_ndims(sp);
    if (nd < 0) {
        st = H5FAIL("H5Sget_simple_extent_ndims", r->path, dset);
        goto out;
    }
    if (nd > ODL_MAX_DIMS) {
        st = ODL_ERR(ODL_E_UNSUPPORTED, "%s:%s: %d dimensions, more than %d", r->path, dset, nd, ODL_MAX_DIMS);
        goto out;
    }
    hsize_t dims[ODL_MAX_DIMS];
    if (nd > 0 && H5Sget_simple_extent_dims(sp, dims, NULL) < 0) {
        st = H5FAIL("H5Sget_simple_extent_dims", r->path, dset);
        goto out;
    }
    info->ndim = nd;
    info->numel = 1;
    for (int i = 0; i < nd; i++) {
        info->shape[i] = (int64_t)dims[i];
        info->numel *= (int64_t)dims[i];
    }
    htri_t has = H5Aexists(d, ODL_H5_CRC_ATTR);
    if (has < 0) {
        st = H5FAIL("H5Aexists", r->path, dset);
        goto out;
    }
    if (has > 0) {
        a = H5Aopen(d, ODL_H5_CRC_ATTR, H5P_DEFAULT);
        if (a < 0) {
            st = H5FAIL("H5Aopen", r->path, dset);
            goto out;
        }
        if (H5Aread(a, H5T_NATIVE_UINT32, &info->crc32) < 0) {
            st = H5FAIL("H5Aread", r->path, dset);
            goto out;
        }
        info->has_crc32 = 1;
    }
out:
    if (a >= 0) H5Aclose(a);
    if (sp >= 0) H5Sclose(sp);
    if (t >= 0) H5Tclose(t);
    return st;
}

odl_status odl_h5_reader_info(odl_h5_reader *r, const char *dset_in, odl_h5_info *info) {
    if (!info) return ODL_ERR(ODL_E_INVAL, "odl_h5_reader_info: info is NULL");
    h5_quiet q;
    quiet_enter(&q);
    char dset[1024];
    hid_t d = -1;
    odl_status st = open_dataset(r, dset_in, dset, sizeof dset, &d);
    if (st == ODL_OK) st = dataset_info(r, d, dset, info);
    if (d >= 0) H5Dclose(d);
    quiet_leave(&q);
    return st;
}

static int conversion_ok(odl_dtype to, odl_dtype from) {
    if (to == from) return 1;
    switch (to) {
    case ODL_F32: return from == ODL_F64;
    case ODL_F64: return from == ODL_F32;
    case ODL_I64: return from == ODL_I32 || from == ODL_U8;
    case ODL_I32: return from == ODL_U8;
    default: return 0;
    }
}

static void convert(odl_dtype to, void *dst, odl_dtype from, const void *src, int64_t n) {
#define CONV(TD, TS)                                                         \
    do {                                                                     \
        TD *o = dst;                                                         \
        const TS *s = src;                                                   \
        for (int64_t i = 0; i < n; i++) o[i] = (TD)s[i];                     \
    } while (0)
    if (to == ODL_F32 && from == ODL_F64) CONV(float, double);
    else if (to == ODL_F64 && from == ODL_F32) CONV(double, float);
    else if (to == ODL_I64 && from == ODL_I32) CONV(int64_t, int32_t);
    else if (to == ODL_I64 && from == ODL_U8) CONV(int64_t, uint8_t);
    else if (to == ODL_I32 && from == ODL_U8) CONV(int32_t, uint8_t);
#undef CONV
}

static odl_status reader_read(odl_h5_reader *r, const char *dset_in, odl_dtype dtype, int ndim, const int64_t *shape,
                              void *buf) {
    odl_status st = ODL_OK;
    char dset[1024];
    hid_t d = -1;
    void *tmp = NULL;
    odl_h5_info info;
    if (ndim < 0 || ndim > ODL_MAX_DIMS || (ndim > 0 && !shape))
        return ODL_ERR(ODL_E_INVAL, "odl_h5_reader_read(%s): ndim %d outside 0..%d", dset_in ? dset_in : "(null)", ndim,
                       ODL_MAX_DIMS);
    ODL_CHECK(open_dataset(r, dset_in, dset, sizeof dset, &d));
    ODL_CHECK_GOTO(dataset_info(r, d, dset, &info), st, out);
    int same = info.ndim == ndim;
    for (int i = 0; same && i < ndim; i++) same = info.shape[i] == shape[i];
    if (!same) {
        char a[160], b[160];
        odl_dims_str(info.ndim, info.shape, a, sizeof a);
        odl_dims_str(ndim, shape, b, sizeof b);
        st = ODL_ERR(ODL_E_INVAL, "%s:%s: shape %s in the file, %s expected", r->path, dset, a, b);
        goto out;
    }
    if (!conversion_ok(dtype, info.dtype)) {
        st = ODL_ERR(ODL_E_INVAL, "%s:%s: stored as %s, cannot be read as %s", r->path, dset, dtype_name(info.dtype),
                     dtype_name(dtype));
        goto out;
    }
    if (info.numel > 0 && !buf) {
        st = ODL_ERR(ODL_E_INVAL, "%s:%s: buffer is NULL", r->path, dset);
        goto out;
    }
    void *target = buf;
    if (dtype != info.dtype) {
        size_t bytes = (size_t)info.numel * odl_dtype_size(info.dtype);
        tmp = malloc(bytes ? bytes : 1);
        if (!tmp) {
            st = ODL_ERR(ODL_E_NOMEM, "%s:%s: cannot allocate %zu bytes for conversion", r->path, dset, bytes);
            goto out;
        }
        target = tmp;
    }
    if (info.numel > 0 && H5Dread(d, mem_type(info.dtype), H5S_ALL, H5S_ALL, H5P_DEFAULT, target) < 0) {
        st = H5FAIL("H5Dread", r->path, dset);
        goto out;
    }
    if (info.has_crc32) {
        uint32_t crc = odl_h5_crc32(info.dtype, target, info.numel);
        if (crc != info.crc32) {
            st = ODL_ERR(ODL_E_CHECKSUM, "%s:%s: checksum mismatch: crc32 attribute 0x%08" PRIx32 ", data 0x%08" PRIx32
                         " (%" PRId64 " %s values): the file is damaged", r->path, dset, info.crc32, crc, info.numel,
                         dtype_name(info.dtype));
            goto out;
        }
    }
    if (tmp) convert(dtype, buf, info.dtype, tmp, info.numel);
out:
    free(tmp);
    if (d >= 0) H5Dclose(d);
    return st;
}

odl_status odl_h5_reader_read(odl_h5_reader *r, const char *dset, odl_dtype dtype, int ndim, const int64_t *shape,
                              void *buf) {
    h5_quiet q;
    quiet_enter(&q);
    odl_status st = reader_read(r, dset, dtype, ndim, shape, buf);
    quiet_leave(&q);
    return st;
}

odl_status odl_h5_reader_read_tensor(odl_h5_reader *r, const char *dset, odl_tensor *t) {
    if (!t) return ODL_ERR(ODL_E_INVAL, "odl_h5_reader_read_tensor(%s): tensor is NULL", dset ? dset : "(null)");
    if (t->device.type != ODL_DEV_CPU)
        return ODL_ERR(ODL_E_INVAL, "odl_h5_reader_read_tensor(%s): tensor is on a CUDA device; read into a host tensor",
                       dset ? dset : "(null)");
    return odl_h5_reader_read(r, dset, t->dtype, t->ndim, t->shape, t->data);
}

/* Open attribute obj@name: the object and the attribute must exist. */
static odl_status open_attr(odl_h5_reader *r, const char *obj_in, const char *name, char *where, size_t cap,
                            int max_elems, int *n_out, hid_t *o_out, hid_t *a_out) {
    char obj[1024];
    *o_out = *a_out = -1;
    if (!r || !name) return ODL_ERR(ODL_E_INVAL, "odl_h5_reader_attr: NULL argument");
    ODL_CHECK(norm_path(obj_in ? obj_in : "/", 1, obj, sizeof obj, "object"));
    snprintf(where, cap, "%s@%s", obj, name);
    int ex = link_exists(r->file, obj, r->path);
    if (ex == -2) return ODL_E_NOTFOUND; /* a dataset on the way: no such object */
    if (ex < 0) return ODL_E_HDF5;
    if (ex == 0) return ODL_ERR(ODL_E_NOTFOUND, "%s: no object %s (looking for attribute %s)", r->path, obj, name);
    hid_t o = H5Oopen(r->file, obj, H5P_DEFAULT);
    if (o < 0) return H5FAIL("H5Oopen", r->path, obj);
    htri_t has = H5Aexists(o, name);
    if (has <= 0) {
        H5Oclose(o);
        if (has < 0) return H5FAIL("H5Aexists", r->path, where);
        return ODL_ERR(ODL_E_NOTFOUND, "%s: %s has no attribute '%s'", r->path, obj, name);
    }
    hid_t a = H5Aopen(o, name, H5P_DEFAULT);
    if (a < 0) {
        H5Oclose(o);
        return H5FAIL("H5Aopen", r->path, where);
    }
    /* 1..max_elems elements. */
    hid_t sp = H5Aget_space(a);
    hssize_t np = sp >= 0 ? H5Sget_simple_extent_npoints(sp) : -1;
    if (sp >= 0) H5Sclose(sp);
    if (np < 1 || np > max_elems) {
        H5Aclose(a);
        H5Oclose(o);
        if (np < 0) return H5FAIL("H5Sget_simple_extent_npoints", r->path, where);
        if (max_elems == 1)
            return ODL_ERR(ODL_E_INVAL, "%s:%s: has %lld elements, a scalar is expected", r->path, where, (long long)np);
        return ODL_ERR(ODL_E_INVAL, "%s:%s: has %lld elements, 1..%d expected", r->path, where, (long long)np,
                       max_elems);
    }
    if (n_out) *n_out = (int)np;
    *o_out = o;
    *a_out = a;
    return ODL_OK;
}

static odl_status reader_attr_num(odl_h5_reader *r, const char *obj, const char *name, int want_int, void *value,
                                  int cap, int *n) {
    char where[1200];
    hid_t o, a, t = -1;
    ODL_CHECK(open_attr(r, obj, name, where, sizeof where, cap, n, &o, &a));
    odl_status st = ODL_OK;
    t = H5Aget_type(a);
    if (t < 0) {
        st = H5FAIL("H5Aget_type", r->path, where);
        goto out;
    }
    H5T_class_t cls = H5Tget_class(t);
    if (cls != H5T_INTEGER && (want_int || cls != H5T_FLOAT)) {
        st = ODL_ERR(ODL_E_INVAL, "%s:%s: is a %s attribute, %s expected", r->path, where,
                     cls == H5T_FLOAT ? "float" : cls == H5T_STRING ? "string" : "non-numeric",
                     want_int ? "an integer" : "a number");
        goto out;
    }
    if (H5Aread(a, want_int ? H5T_NATIVE_INT64 : H5T_NATIVE_DOUBLE, value) < 0) st = H5FAIL("H5Aread", r->path, where);
out:
    if (t >= 0) H5Tclose(t);
    H5Aclose(a);
    H5Oclose(o);
    return st;
}

static odl_status reader_attr_str(odl_h5_reader *r, const char *obj, const char *name, char *buf, size_t cap) {
    char where[1200];
    hid_t o, a, t = -1, mt = -1;
    if (!buf || cap == 0) return ODL_ERR(ODL_E_INVAL, "odl_h5_reader_attr_str: empty buffer");
    ODL_CHECK(open_attr(r, obj, name, where, sizeof where, 1, NULL, &o, &a));
    odl_status st = ODL_OK;
    char *tmp = NULL;
    t = H5Aget_type(a);
    if (t < 0) {
        st = H5FAIL("H5Aget_type", r->path, where);
        goto out;
    }
    if (H5Tget_class(t) != H5T_STRING) {
        st = ODL_ERR(ODL_E_INVAL, "%s:%s: is not a string attribute", r->path, where);
        goto out;
    }
    htri_t var = H5Tis_variable_str(t);
    if (var < 0) {
        st = H5FAIL("H5Tis_variable_str", r->path, where);
        goto out;
    }
    mt = H5Tget_native_type(t, H5T_DIR_ASCEND);
    if (mt < 0) {
        st = H5FAIL("H5Tget_native_type", r->path, where);
        goto out;
    }
    const char *s = NULL;
    size_t len = 0;
    char *vs = NULL;
    if (var) {
        if (H5Aread(a, mt, &vs) < 0) {
            st = H5FAIL("H5Aread", r->path, where);
            goto out;
        }
        s = vs ? vs : "";
        len = strlen(s);
    } else {
        size_t size = H5Tget_size(t);
        tmp = calloc(size + 1, 1);
        if (!tmp) {
            st = ODL_ERR(ODL_E_NOMEM, "%s:%s: out of memory", r->path, where);
            goto out;
        }
        if (H5Aread(a, mt, tmp) < 0) {
            st = H5FAIL("H5Aread", r->path, where);
            goto out;
        }
        s = tmp;
        len = strnlen(tmp, size);
        while (len > 0 && tmp[len - 1] == ' ') len--; /* H5T_STR_SPACEPAD */
    }
    if (len + 1 > cap) st = ODL_ERR(ODL_E_INVAL, "%s:%s: string of %zu bytes needs a buffer of %zu, got %zu", r->path,
                                    where, len, len + 1, cap);
    else {
        memcpy(buf, s, len);
        buf[len] = '\0';
    }
    if (vs) H5free_memory(vs);
out:
    free(tmp);
    if (mt >= 0) H5Tclose(mt);
    if (t >= 0) H5Tclose(t);
    H5Aclose(a);
    H5Oclose(o);
    return st;
}

odl_status odl_h5_reader_attr_i64(odl_h5_reader *r, const char *obj, const char *name, int64_t *value) {
    if (!value) return ODL_ERR(ODL_E_INVAL, "odl_h5_reader_attr_i64: value is NULL");
    h5_quiet q;
    quiet_enter(&q);
    odl_status st = reader_attr_num(r, obj, name, 1, value, 1, NULL);
    quiet_leave(&q);
    return st;
}

odl_status odl_h5_reader_attr_f64(odl_h5_reader *r, const char *obj, const char *name, double *value) {
    if (!value) return ODL_ERR(ODL_E_INVAL, "odl_h5_reader_attr_f64: value is NULL");
    h5_quiet q;
    quiet_enter(&q);
    odl_status st = reader_attr_num(r, obj, name, 0, value, 1, NULL);
    quiet_leave(&q);
    return st;
}

odl_status odl_h5_reader_attr_f64s(odl_h5_reader *r, const char *obj, const char *name, double *values, int cap,
                                   int *n) {
    if (!values || !n || cap < 1) return ODL_ERR(ODL_E_INVAL, "odl_h5_reader_attr_f64s: no room for values");
    h5_quiet q;
    quiet_enter(&q);
    odl_status st = reader_attr_num(r, obj, name, 0, values, cap, n);
    quiet_leave(&q);
    return st;
}

int odl_h5_reader_exists(odl_h5_reader *r, const char *obj_in) {
    char obj[1024];
    if (!r || !obj_in) return 0;
    h5_quiet q;
    quiet_enter(&q);
    int ex = norm_path(obj_in, 1, obj, sizeof obj, "object") == ODL_OK ? link_exists(r->file, obj, r->path) : 0;
    quiet_leave(&q);
    return ex == 1;
}

/* Copy n strings of a string dataset (variable-length or fixed-size, read as HDF5 gives them) into out[]. */
static odl_status read_strings(odl_h5_reader *r, hid_t d, const char *dset, int64_t n, char **out) {
    odl_status st = ODL_OK;
    hid_t t = H5Dget_type(d), sp = H5Dget_space(d), mt = -1;
    if (t < 0 || sp < 0) {
        st = H5FAIL(t < 0 ? "H5Dget_type" : "H5Dget_space", r->path, dset);
        goto out;
    }
    hssize_t np = H5Sget_simple_extent_npoints(sp);
    if (H5Tget_class(t) != H5T_STRING || np != n) {
        st = ODL_ERR(ODL_E_INVAL, "%s:%s: must hold %lld strings (has %lld%s)", r->path, dset, (long long)n,
                     (long long)np, H5Tget_class(t) != H5T_STRING ? ", not strings" : "");
        goto out;
    }
    mt = H5Tcopy(H5T_C_S1);
    if (H5Tis_variable_str(t) > 0) {
        char **v = calloc((size_t)(n ? n : 1), sizeof(char *));
        H5Tset_size(mt, H5T_VARIABLE);
        H5Tset_cset(mt, H5Tget_cset(t));
        if (!v) st = ODL_ERR(ODL_E_NOMEM, "%s:%s: %lld strings", r->path, dset, (long long)n);
        else if (H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) < 0) st = H5FAIL("H5Dread", r->path, dset);
        else
            for (int64_t i = 0; i < n; i++) {
                out[i] = strdup(v[i] ? v[i] : "");
                H5free_memory(v[i]);
                if (!out[i]) st = ODL_ERR(ODL_E_NOMEM, "%s:%s: %lld strings", r->path, dset, (long long)n);
            }
        free(v);
    } else {
        size_t sz = H5Tget_size(t);
        char *buf = calloc((size_t)(n ? n : 1), sz + 1);
        H5Tset_size(mt, sz + 1);
        if (!buf) st = ODL_ERR(ODL_E_NOMEM, "%s:%s: %lld strings", r->path, dset, (long long)n);
        else if (H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) st = H5FAIL("H5Dread", r->path, dset);
        else
            for (int64_t i = 0; i < n; i++) {
                out[i] = strndup(buf + i * (int64_t)(sz + 1), sz);
                if (!out[i]) st = ODL_ERR(ODL_E_NOMEM, "%s:%s: %lld strings", r->path, dset, (long long)n);
            }
        free(buf);
    }
out:
    if (mt >= 0) H5Tclose(mt);
    if (sp >= 0) H5Sclose(sp);
    if (t >= 0) H5Tclose(t);
    if (st != ODL_OK)
        for (int64_t i = 0; i < n; i++) {
            free(out[i]);
            out[i] = NULL;
        }
    return st;
}

odl_status odl_h5_reader_read_strings(odl_h5_reader *r, const char *dset_in, int64_t n, char **out) {
    if (!out || n < 0) return ODL_ERR(ODL_E_INVAL, "odl_h5_reader_read_strings: no output array");
    for (int64_t i = 0; i < n; i++) out[i] = NULL;
    h5_quiet q;
    quiet_enter(&q);
    char dset[1024];
    hid_t d = -1;
    odl_status st = open_dataset(r, dset_in, dset, sizeof dset, &d);
    if (st == ODL_OK) st = read_strings(r, d, dset, n, out);
    if (d >= 0) H5Dclose(d);
    quiet_leave(&q);
    return st;
}

odl_status odl_h5_reader_attr_str(odl_h5_reader *r, const char *obj, const char *name, char *buf, size_t cap) {
    h5_quiet q;
    quiet_enter(&q);
    odl_status st = reader_attr_str(r, obj, name, buf, cap);
    quiet_leave(&q);
    return st;
}

odl_status odl_h5_reader_data_offset(odl_h5_reader *r, const char *dset_in, uint64_t *offset, uint64_t *nbytes) {
    if (!offset || !nbytes) return ODL_ERR(ODL_E_INVAL, "odl_h5_reader_data_offset: NULL output");
    h5_quiet q;
    quiet_enter(&q);
    char dset[1024];
    hid_t d = -1;
    odl_status st = open_dataset(r, dset_in, dset, sizeof dset, &d);
    if (st == ODL_OK) {
        haddr_t off = H5Dget_offset(d);
        if (off == HADDR_UNDEF) {
            H5Eclear2(H5E_DEFAULT);
            st = ODL_ERR(ODL_E_UNSUPPORTED, "%s:%s: no contiguous storage (chunked, compact or not written)", r->path,
                         dset);
        } else {
            *offset = (uint64_t)off;
            *nbytes = (uint64_t)H5Dget_storage_size(d);
        }
    }
    if (d >= 0) H5Dclose(d);
    quiet_leave(&q);
    return st;
}
