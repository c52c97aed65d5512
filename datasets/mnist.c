/* MNIST IDX loader (plain or gzip through zlib, which reads plain files transparently). */
#include "odl/mnist.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#define IDX_MAGIC_IMAGES 2051u /* 0x00000803: uint8 (0x08), 3 dimensions */
#define IDX_MAGIC_LABELS 2049u /* 0x00000801: uint8 (0x08), 1 dimension */
#define MAX_SIDE 65536         /* rows and cols above this are not an image */
#define MAX_BYTES ((uint64_t)1 << 36)
#define CHUNK ((unsigned)1 << 20)

static uint32_t be32(const unsigned char *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

/* Read up to n bytes; returns the count read (short at end of file), or -1 on a zlib/read error with
 * the message in *why. */
static int64_t read_full(gzFile gz, void *buf, uint64_t n, const char **why) {
    uint64_t got = 0;
    while (got < n) {
        uint64_t want = n - got < CHUNK ? n - got : CHUNK;
        int r = gzread(gz, (unsigned char *)buf + got, (unsigned)want);
        if (r < 0) {
            int err = 0;
            *why = gzerror(gz, &err);
            if (err == Z_ERRNO) *why = strerror(errno);
            return -1;
        }
        got += (uint64_t)r;
        if ((uint64_t)r < want) {
            int err = 0;
            const char *m = gzerror(gz, &err);
            if (err != Z_OK && err != Z_BUF_ERROR) { /* Z_BUF_ERROR: the gzip stream ends early */
                *why = err == Z_ERRNO ? strerror(errno) : m;
                return -1;
            }
            break;
        }
    }
    return (int64_t)got;
}

/* 1 when the stream is a gzip stream whose end came early (gzerror Z_BUF_ERROR). */
static int gz_ended_early(gzFile gz) {
    int err = 0;
    gzerror(gz, &err);
    return err == Z_BUF_ERROR;
}

/* Read up to n bytes into *buf, allocated as the data arrives (at most n bytes, starting from 16 MiB).
 * Returns the count read, -1 on a read error (message in *why), -2 when memory runs out. */
static int64_t read_growing(gzFile gz, uint64_t n, uint8_t **buf, const char **why) {
    uint64_t cap = 0, got = 0;
    *buf = NULL;
    while (got < n) {
        if (got == cap) {
            uint64_t nc = cap ? cap * 2 : (uint64_t)16 << 20;
            if (nc > n) nc = n;
            uint8_t *nb = realloc(*buf, nc);
            if (!nb) return -2;
            *buf = nb;
            cap = nc;
        }
        int64_t r = read_full(gz, *buf + got, cap - got, why);
        if (r < 0) return -1;
        got += (uint64_t)r;
        if (got < cap) break; /* end of the stream */
    }
    return (int64_t)got;
}

/* One IDX file with the given magic and number of dimensions: dims[] and a malloc'ed payload. */
static odl_status read_idx(const char *path, uint32_t magic, int ndim, uint32_t *dims, uint8_t **data,
                           uint64_t *nbytes) {
    odl_status st = ODL_OK;
    const char *what = magic == IDX_MAGIC_IMAGES ? "IDX3 uint8 images" : "IDX1 uint8 labels";
    const char *why = NULL;
    unsigned char hdr[16];
    uint8_t *buf = NULL;
    *data = NULL;

    errno = 0;
    gzFile gz = gzopen(path, "rb");
    if (!gz) {
        int e = errno;
        if (e == ENOENT) return ODL_ERR(ODL_E_NOTFOUND, "%s: no such file", path);
        return ODL_ERR(ODL_E_IO, "%s: cannot open: %s", path, e ? strerror(e) : "out of memory");
    }
    gzbuffer(gz, 1 << 17);

    size_t hlen = 4 + 4 * (size_t)ndim;
    int64_t got = read_full(gz, hdr, hlen, &why);
    if (got < 0) {
        st = ODL_ERR(ODL_E_IO, "%s: read error: %s", path, why);
        goto out;
    }
    if (got >= 4 && be32(hdr) != magic) {
        uint32_t m = be32(hdr);
        const char *hint = m == IDX_MAGIC_IMAGES ? " (an images file)"
                           : m == IDX_MAGIC_LABELS ? " (a labels file)"
                           : (hdr[0] == 0x1f && hdr[1] == 0x8b) ? " (a damaged gzip file)" : "";
        st = ODL_ERR(ODL_E_FORMAT, "%s: wrong magic number %" PRIu32 " (0x%08" PRIx32 ")%s; expected %" PRIu32
                     " (0x%08" PRIx32 ", %s)", path, m, m, hint, magic, magic, what);
        goto out;
    }
    if ((size_t)got < hlen) {
        st = ODL_ERR(ODL_E_FORMAT, "%s: truncated: the %s header needs %zu bytes, file has %" PRId64 "%s", path, what,
                     hlen, got, gz_ended_early(gz) ? " (gzip stream ends early)" : "");
        goto out;
    }
    uint64_t total = 1;
    for (int i = 0; i < ndim; i++) {
        dims[i] = be32(hdr + 4 + 4 * i);
        if (dims[i] == 0 || dims[i] > 0x7fffffffu || (i > 0 && dims[i] > MAX_SIDE)) {
            st = ODL_ERR(ODL_E_FORMAT, "%s: dimension %d is %" PRIu32 ", not a plausible %s size", path, i, dims[i],
                         i == 0 ? "count" : "image side");
            goto out;
        }
        total *= dims[i];
    }
    if (total > MAX_BYTES) {
        st = ODL_ERR(ODL_E_FORMAT, "%s: header says %" PRIu64 " bytes of data, more than the %" PRIu64 " this loader takes",
                     path, total, (uint64_t)MAX_BYTES);
        goto out;
    }
    char says[160];
    if (ndim == 3)
        snprintf(says, sizeof says, "%" PRIu32 " images of %" PRIu32 "x%" PRIu32 " (%" PRIu64 " bytes)", dims[0],
                 dims[1], dims[2], total);
    else
        snprintf(says, sizeof says, "%" PRIu32 " labels (%" PRIu64 " bytes)", dims[0], total);

    /* The header's claim is checked against the file before it sizes an allocation: a plain file by
     * its size, a gzip stream (whose length is known only once read) by growing the buffer with the
     * data actually read, so a 2 KB file claiming 80 million images is "truncated", not out of memory. */
    if (gzdirect(gz)) {
        struct stat sb;
        if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode) && (uint64_t)sb.st_size < hlen + total) {
            st = ODL_ERR(ODL_E_FORMAT, "%s: truncated: header says %s, file has %" PRIu64 " bytes of data", path, says,
                         (uint64_t)sb.st_size - hlen);
            goto out;
        }
    }
    got = read_growing(gz, total, &buf, &why);
    if (got == -2) {
        st = ODL_ERR(ODL_E_NOMEM, "%s: cannot allocate memory for %s", path, says);
        goto out;
    }
    if (got < 0) {
        st = ODL_ERR(ODL_E_IO, "%s: read error (header says %s): %s", path, says, why);
        goto out;
    }
    if ((uint64_t)got < total) {
        st = ODL_ERR(ODL_E_FORMAT, "%s: truncated: header says %s, file has %" PRId64 " bytes of data%s", path, says, got,
                     gz_ended_early(gz) ? " (gzip stream ends early)" : "");
        goto out;
    }
    /* Nothing may follow. */
    {
        unsigned char tail[4096];
        uint64_t extra = 0;
        for (;;) {
            int64_t r = read_full(gz, tail, sizeof tail, &why);
            if (r < 0) {
                st = ODL_ERR(ODL_E_IO, "%s: read error after the data: %s", path, why);
                goto out;
            }
            extra += (uint64_t)r;
            if (r < (int64_t)sizeof tail) break;
        }
        if (extra) {
            st = ODL_ERR(ODL_E_FORMAT, "%s: trailing data: header says %s, file has %" PRIu64 " (%" PRIu64
                         " bytes too many)", path, says, total + extra, extra);
            goto out;
        }
    }
    *data = buf;
    *nbytes = total;
    buf = NULL;
out:
    free(buf);
    gzclose(gz);
    return st;
}

odl_status odl_mnist_load_files(const char *images_path, const char *labels_path, odl_mnist *out) {
    if (!images_path || !labels_path || !out) return ODL_ERR(ODL_E_INVAL, "odl_mnist_load_files: NULL argument");
    memset(out, 0, sizeof *out);
    uint32_t idims[3], ldims[1];
    uint8_t *images = NULL, *labels = NULL;
    uint64_t ibytes = 0, lbytes = 0;
    odl_status st;
    ODL_CHECK_GOTO(read_idx(images_path, IDX_MAGIC_IMAGES, 3, idims, &images, &ibytes), st, fail);
    ODL_CHECK_GOTO(read_idx(labels_path, IDX_MAGIC_LABELS, 1, ldims, &labels, &lbytes), st, fail);
    if (idims[0] != ldims[0]) {
        st = ODL_ERR(ODL_E_FORMAT, "%s has %" PRIu32 " labels but %s has %" PRIu32 " images", labels_path, ldims[0],
                     images_path, idims[0]);
        goto fail;
    }
    for (uint64_t i = 0; i < lbytes; i++) {
        if (labels[i] >= ODL_MNIST_CLASSES) {
            st = ODL_ERR(ODL_E_FORMAT, "%s: label %u at index %" PRIu64 " is not a class 0..%d", labels_path,
                         (unsigned)labels[i], i, ODL_MNIST_CLASSES - 1);
            goto fail;
        }
    }
    out->n = (int64_t)idims[0];
    out->rows = (int)idims[1];
    out->cols = (int)idims[2];
    out->images = images;
    out->labels = labels;
    return ODL_OK;
fail:
    free(images);
    free(labels);
    return st;
}

static int is_file(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && !S_ISDIR(sb.st_mode);
}

/* "<dir>/<base>" if it exists, else "<dir>/<base>.gz" if that exists, else 0. */
static int find_file(const char *dir, const char *base, char *path, size_t cap) {
    snprintf(path, cap, "%s/%s", dir, base);
    if (is_file(path)) return 1;
    snprintf(path, cap, "%s/%s.gz", dir, base);
    return is_file(path);
}

odl_status odl_mnist_load(const char *dir, const char *split, odl_mnist *out) {
    if (!dir || !split || !out) return ODL_ERR(ODL_E_INVAL, "odl_mnist_load: NULL argument");
    memset(out, 0, sizeof *out);
    if (strcmp(split, "test") == 0) split = "t10k";
    if (strcmp(split, "train") != 0 && strcmp(split, "t10k") != 0)
        return ODL_ERR(ODL_E_INVAL, "odl_mnist_load: split '%s' is not train or t10k", split);

    char ibase[64], lbase[64], ipath[4200], lpath[4200];
    snprintf(ibase, sizeof ibase, "%s-images-idx3-ubyte", split);
    snprintf(lbase, sizeof lbase, "%s-labels-idx1-ubyte", split);
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return ODL_ERR(ODL_E_NOTFOUND, "%s: %s; expected a directory holding %s[.gz] and %s[.gz]", dir,
                       stat(dir, &sb) != 0 ? "no such directory" : "not a directory", ibase, lbase);
    int have_i = find_file(dir, ibase, ipath, sizeof ipath);
    int have_l = find_file(dir, lbase, lpath, sizeof lpath);
    if (!have_i || !have_l)
        return ODL_ERR(ODL_E_NOTFOUND, "%s: MNIST %s split not found: missing %s%s%s; expected %s[.gz] and %s[.gz]", dir,
                       split, have_i ? "" : ibase, (!have_i && !have_l) ? " and " : "", have_l ? "" : lbase, ibase,
                       lbase);
    return odl_mnist_load_files(ipath, lpath, out);
}

void odl_mnist_free(odl_mnist *m) {
    if (!m) return;
    free(m->images);
    free(m->labels);
    memset(m, 0, sizeof *m);
}
