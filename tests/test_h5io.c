/* HDF5 tensor files: round trip of every dtype with attributes, writer and reader errors, checksum
 * corruption on disk, truncated / missing / non-HDF5 files, crash safety of the commit (a writer
 * killed before commit leaves the old file), and the PyTorch reference file in the data folder. */
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "odl/h5io.h"
#include "test_util.h"

static char g_dir[256];

static const char *tpath(const char *name) {
    static char bufs[4][600];
    static int k = 0;
    char *b = bufs[k++ & 3];
    snprintf(b, 600, "%s/%s", g_dir, name);
    return b;
}

static int has(const char *a, const char *b, const char *c) {
    const char *m = odl_error_msg();
    return strstr(m, a) && (!b || strstr(m, b)) && (!c || strstr(m, c));
}
#define TMSG(a, b, c) TCHECK(has(a, b, c), "message '%s' lacks '%s' / '%s' / '%s'", odl_error_msg(), a, b ? b : "", c ? c : "")

static int file_exists(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0;
}

/* ---------------------------------------------------------------------------------------------- */

static float w_f32[2 * 3 * 4];
static double w_f64[2 * 2];
static int64_t w_i64[5];
static int32_t w_i32[3 * 2];
static uint8_t w_u8[7];

static void fill(void) {
    for (int i = 0; i < 24; i++) w_f32[i] = (float)i * 0.25f - 3.0f;
    for (int i = 0; i < 4; i++) w_f64[i] = 1.0 / (i + 3);
    for (int i = 0; i < 5; i++) w_i64[i] = (int64_t)i * 3000000000LL - 7;
    for (int i = 0; i < 6; i++) w_i32[i] = -i * 100000;
    for (int i = 0; i < 7; i++) w_u8[i] = (uint8_t)(250 + i);
}

static const char *CONFIG_YAML = "model: mnist\ntrain:\n  lr: 1.0\n  epochs: 14\n";

static void write_sample(const char *path, int64_t version) {
    odl_h5_writer *w = NULL;
    TOK(odl_h5_writer_open(path, &w));
    if (!w) return;
    TOK(odl_h5_writer_write(w, "/model/conv1/weight", ODL_F32, 3, (int64_t[]){2, 3, 4}, w_f32));
    TOK(odl_h5_writer_write(w, "model/fc/bias", ODL_F64, 2, (int64_t[]){2, 2}, w_f64));
    TOK(odl_h5_writer_write(w, "/state/cursor", ODL_I64, 1, (int64_t[]){5}, w_i64));
    TOK(odl_h5_writer_write(w, "/state/labels", ODL_I32, 2, (int64_t[]){3, 2}, w_i32));
    TOK(odl_h5_writer_write(w, "/bytes", ODL_U8, 1, (int64_t[]){7}, w_u8));
    float scalar = 42.5f;
    TOK(odl_h5_writer_write(w, "/scalar", ODL_F32, 0, NULL, &scalar));
    TOK(odl_h5_writer_write(w, "/empty", ODL_F32, 2, (int64_t[]){0, 3}, NULL));
    odl_tensor t = {.data = w_f32, .dtype = ODL_F32, .device = odl_cpu(), .ndim = 2, .shape = {4, 6}};
    TOK(odl_h5_writer_write_tensor(w, "/model/as_tensor", &t));

    TOK(odl_h5_writer_attr_i64(w, "/", "version", version));
    TOK(odl_h5_writer_attr_i64(w, "/", "step", 1234));
    TOK(odl_h5_writer_attr_f64(w, "", "lr", 0.7));
    TOK(odl_h5_writer_attr_str(w, "/", "config", CONFIG_YAML));
    TOK(odl_h5_writer_attr_str(w, "/", "config", CONFIG_YAML)); /* replacing is fine */
    TOK(odl_h5_writer_attr_str(w, "/model", "layout", "NCHW"));
    TOK(odl_h5_writer_attr_i64(w, "/train/rng", "seed", -1)); /* creates /train/rng */
    TOK(odl_h5_writer_attr_str(w, "/model/conv1/weight", "note", "attribute on a dataset"));
    TOK(odl_h5_writer_commit(w));
}

static void test_round_trip(void) {
    char path[600];
    snprintf(path, sizeof path, "%s", tpath("round.h5"));
    write_sample(path, 1);
    TCHECK(file_exists(path) && !file_exists(tpath("round.h5.tmp")), "committed, no .tmp left");

    odl_h5_reader *r = NULL;
    TOK(odl_h5_reader_open(path, &r));
    if (!r) return;
    const char *want[] = {"/bytes", "/empty", "/model/as_tensor", "/model/conv1/weight", "/model/fc/bias", "/scalar",
                          "/state/cursor", "/state/labels"};
    TCHECK(odl_h5_reader_count(r) == 8, "8 datasets, got %zu", odl_h5_reader_count(r));
    for (size_t i = 0; i < 8 && i < odl_h5_reader_count(r); i++)
        TCHECK(strcmp(odl_h5_reader_name(r, i), want[i]) == 0, "name %zu: %s", i, odl_h5_reader_name(r, i));
    TCHECK(odl_h5_reader_name(r, 8) == NULL, "name out of range");
    TCHECK(odl_h5_reader_has(r, "model/conv1/weight") && odl_h5_reader_has(r, "/scalar"), "has");
    TCHECK(!odl_h5_reader_has(r, "/model") && !odl_h5_reader_has(r, "/nope"), "groups are not datasets");
    TCHECK(strcmp(odl_h5_reader_path(r), path) == 0, "path");

    odl_h5_info info;
    TOK(odl_h5_reader_info(r, "/model/conv1/weight", &info));
    TCHECK(info.dtype == ODL_F32 && info.ndim == 3 && info.shape[0] == 2 && info.shape[1] == 3 && info.shape[2] == 4 &&
               info.numel == 24, "info f32");
    TCHECK(info.has_crc32 && info.crc32 == odl_h5_crc32(ODL_F32, w_f32, 24), "crc32 attribute");
    TOK(odl_h5_reader_info(r, "/scalar", &info));
    TCHECK(info.ndim == 0 && info.numel == 1, "scalar info");
    TOK(odl_h5_reader_info(r, "/empty", &info));
    TCHECK(info.ndim == 2 && info.numel == 0 && info.shape[0] == 0, "empty info");
    TOK(odl_h5_reader_info(r, "/state/cursor", &info));
    TCHECK(info.dtype == ODL_I64, "i64");
    TOK(odl_h5_reader_info(r, "/state/labels", &info));
    TCHECK(info.dtype == ODL_I32, "i32");
    TOK(odl_h5_reader_info(r, "/bytes", &info));
    TCHECK(info.dtype == ODL_U8, "u8");
    TFAIL(odl_h5_reader_info(r, "/model/conv2/weight", &info), ODL_E_NOTFOUND);
    TMSG("round.h5: no dataset /model/conv2/weight", NULL, NULL);

    float f32[24] = {0};
    double f64[24] = {0};
    int64_t i64[8] = {0};
    int32_t i32[7] = {0};
    uint8_t u8[7] = {0};
    TOK(odl_h5_reader_read(r, "/model/conv1/weight", ODL_F32, 3, (int64_t[]){2, 3, 4}, f32));
    TCHECK(memcmp(f32, w_f32, sizeof w_f32) == 0, "f32 data");
    TOK(odl_h5_reader_read(r, "/model/fc/bias", ODL_F64, 2, (int64_t[]){2, 2}, f64));
    TCHECK(memcmp(f64, w_f64, sizeof w_f64) == 0, "f64 data");
    TOK(odl_h5_reader_read(r, "/state/cursor", ODL_I64, 1, (int64_t[]){5}, i64));
    TCHECK(memcmp(i64, w_i64, sizeof w_i64) == 0, "i64 data");
    TOK(odl_h5_reader_read(r, "/state/labels", ODL_I32, 2, (int64_t[]){3, 2}, i32));
    TCHECK(memcmp(i32, w_i32, sizeof w_i32) == 0, "i32 data");
    TOK(odl_h5_reader_read(r, "/bytes", ODL_U8, 1, (int64_t[]){7}, u8));
    TCHECK(memcmp(u8, w_u8, sizeof w_u8) == 0, "u8 data");
    float sc = 0;
    TOK(odl_h5_reader_read(r, "/scalar", ODL_F32, 0, NULL, &sc));
    TCHECK(sc == 42.5f, "scalar %g", sc);
    TOK(odl_h5_reader_read(r, "/empty", ODL_F32, 2, (int64_t[]){0, 3}, NULL));

    /* Conversions: f64 -> f32, f32 -> f64, u8 -> i64, i32 -> i64. */
    TOK(odl_h5_reader_read(r, "/model/fc/bias", ODL_F32, 2, (int64_t[]){2, 2}, f32));
    TCHECK(f32[0] == (float)w_f64[0] && f32[3] == (float)w_f64[3], "f64 -> f32");
    TOK(odl_h5_reader_read(r, "/model/conv1/weight", ODL_F64, 3, (int64_t[]){2, 3, 4}, f64));
    TCHECK(f64[23] == (double)w_f32[23], "f32 -> f64");
    TOK(odl_h5_reader_read(r, "/bytes", ODL_I64, 1, (int64_t[]){7}, i64));
    TCHECK(i64[0] == 250 && i64[5] == 255 && i64[6] == 0, "u8 -> i64: %lld %lld", (long long)i64[5], (long long)i64[6]);
    TOK(odl_h5_reader_read(r, "/state/labels", ODL_I64, 2, (int64_t[]){3, 2}, i64));
    TCHECK(i64[5] == -500000, "i32 -> i64");
    odl_tensor t = {.data = f32, .dtype = ODL_F32, .device = odl_cpu(), .ndim = 2, .shape = {4, 6}};
    TOK(odl_h5_reader_read_tensor(r, "/model/as_tensor", &t));
    TCHECK(memcmp(f32, w_f32, sizeof w_f32) == 0, "tensor data");

    /* Shape and dtype mismatches. */
    TFAIL(odl_h5_reader_read(r, "/model/conv1/weight", ODL_F32, 3, (int64_t[]){2, 4, 3}, f32), ODL_E_INVAL);
    TMSG("round.h5:/model/conv1/weight: shape [2, 3, 4] in the file, [2, 4, 3] expected", NULL, NULL);
    TFAIL(odl_h5_reader_read(r, "/model/conv1/weight", ODL_F32, 2, (int64_t[]){6, 4}, f32), ODL_E_INVAL);
    TMSG("/model/conv1/weight: shape [2, 3, 4] in the file, [6, 4] expected", NULL, NULL);
    TFAIL(odl_h5_reader_read(r, "/state/cursor", ODL_F32, 1, (int64_t[]){5}, f32), ODL_E_INVAL);
    TMSG("/state/cursor: stored as int64, cannot be read as float32", NULL, NULL);
    TFAIL(odl_h5_reader_read(r, "/missing", ODL_F32, 1, (int64_t[]){5}, f32), ODL_E_NOTFOUND);
    t.device = odl_cuda(0);
    TFAIL(odl_h5_reader_read_tensor(r, "/model/as_tensor", &t), ODL_E_INVAL);

    /* Attributes. */
    int64_t iv = 0;
    double dv = 0;
    char sbuf[256];
    TOK(odl_h5_reader_attr_i64(r, "/", "step", &iv));
    TCHECK(iv == 1234, "step %lld", (long long)iv);
    TOK(odl_h5_reader_attr_f64(r, "/", "lr", &dv));
    TCHECK(dv == 0.7, "lr %g", dv);
    TOK(odl_h5_reader_attr_f64(r, "/", "step", &dv));
    TCHECK(dv == 1234.0, "int attribute read as f64");
    TOK(odl_h5_reader_attr_str(r, "/", "config", sbuf, sizeof sbuf));
    TCHECK(strcmp(sbuf, CONFIG_YAML) == 0, "config '%s'", sbuf);
    TOK(odl_h5_reader_attr_str(r, "model", "layout", sbuf, sizeof sbuf));
    TCHECK(strcmp(sbuf, "NCHW") == 0, "layout");
    TOK(odl_h5_reader_attr_i64(r, "/train/rng", "seed", &iv));
    TCHECK(iv == -1, "seed on a created group");
    TOK(odl_h5_reader_attr_str(r, "/model/conv1/weight", "note", sbuf, sizeof sbuf));
    TCHECK(strcmp(sbuf, "attribute on a dataset") == 0, "dataset attribute");
    TFAIL(odl_h5_reader_attr_i64(r, "/", "nope", &iv), ODL_E_NOTFOUND);
    TMSG("round.h5: / has no attribute 'nope'", NULL, NULL);
    TFAIL(odl_h5_reader_attr_i64(r, "/nogroup", "step", &iv), ODL_E_NOTFOUND);
    TMSG("no object /nogroup", NULL, NULL);
    TFAIL(odl_h5_reader_attr_i64(r, "/", "lr", &iv), ODL_E_INVAL);
    TMSG("/@lr: is a float attribute, an integer expected", NULL, NULL);
    TFAIL(odl_h5_reader_attr_f64(r, "/", "config", &dv), ODL_E_INVAL);
    TFAIL(odl_h5_reader_attr_str(r, "/", "step", sbuf, sizeof sbuf), ODL_E_INVAL);
    TFAIL(odl_h5_reader_attr_str(r, "/", "config", sbuf, 10), ODL_E_INVAL);
    TMSG("needs a buffer of", NULL, NULL);
    odl_h5_reader_close(r);
    odl_h5_reader_close(NULL);
}

static void test_writer_errors(void) {
    odl_h5_writer *w = NULL;
    float x[4] = {1, 2, 3, 4};
    TFAIL(odl_h5_writer_open(tpath("no_dir/x.h5"), &w), ODL_E_NOTFOUND);
    TMSG("no_dir/x.h5: cannot write: directory", "no_dir does not exist", NULL);
    TOK(odl_h5_writer_open(tpath("errs.h5"), &w));
    if (!w) return;
    TOK(odl_h5_writer_write(w, "/a/b", ODL_F32, 1, (int64_t[]){4}, x));
    TFAIL(odl_h5_writer_write(w, "a/b", ODL_F32, 1, (int64_t[]){4}, x), ODL_E_INVAL);
    TMSG("/a/b: already exists", NULL, NULL);
    TFAIL(odl_h5_writer_write(w, "/a//c", ODL_F32, 1, (int64_t[]){4}, x), ODL_E_INVAL);
    TFAIL(odl_h5_writer_write(w, "/a/c/", ODL_F32, 1, (int64_t[]){4}, x), ODL_E_INVAL);
    TFAIL(odl_h5_writer_write(w, "", ODL_F32, 1, (int64_t[]){4}, x), ODL_E_INVAL);
    TFAIL(odl_h5_writer_write(w, "/half", ODL_F16, 1, (int64_t[]){2}, x), ODL_E_UNSUPPORTED);
    TMSG("/half: dtype float16 cannot be stored", NULL, NULL);
    TFAIL(odl_h5_writer_write(w, "/neg", ODL_F32, 2, (int64_t[]){2, -1}, x), ODL_E_INVAL);
    TMSG("negative dimension in shape [2, -1]", NULL, NULL);
    TFAIL(odl_h5_writer_write(w, "/nodata", ODL_F32, 1, (int64_t[]){4}, NULL), ODL_E_INVAL);
    TFAIL(odl_h5_writer_write(w, "/a/b/c", ODL_F32, 1, (int64_t[]){4}, x), ODL_E_INVAL); /* under a dataset */
    TMSG("errs.h5:/a/b/c: /a/b is a dataset, not a group", NULL, NULL);
    TFAIL(odl_h5_writer_attr_i64(w, "/a/b/c", "x", 1), ODL_E_INVAL);
    TFAIL(odl_h5_writer_attr_i64(w, "/a/b", "crc32", 5), ODL_E_INVAL);
    TMSG("reserved", NULL, NULL);
    odl_tensor t = {.data = x, .dtype = ODL_F32, .device = odl_cuda(0), .ndim = 1, .shape = {4}};
    TFAIL(odl_h5_writer_write_tensor(w, "/cuda", &t), ODL_E_INVAL);
    /* The file is still usable after the errors. */
    TOK(odl_h5_writer_write(w, "/a/c", ODL_F32, 1, (int64_t[]){4}, x));
    TOK(odl_h5_writer_commit(w));
    odl_h5_reader *r = NULL;
    TOK(odl_h5_reader_open(tpath("errs.h5"), &r));
    TCHECK(odl_h5_reader_count(r) == 2, "2 datasets after errors, got %zu", odl_h5_reader_count(r));
    odl_h5_reader_close(r);
}

static void copy_prefix(const char *src, const char *dst, long nbytes) {
    FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
    char *buf = malloc((size_t)nbytes);
    size_t got = fread(buf, 1, (size_t)nbytes, in);
    fwrite(buf, 1, got, out);
    free(buf);
    fclose(in);
    fclose(out);
}

static void test_bad_files(void) {
    odl_h5_reader *r = NULL;
    /* Checksum: flip one byte inside a dataset's data on disk. */
    char path[600];
    snprintf(path, sizeof path, "%s", tpath("corrupt.h5"));
    write_sample(path, 1);
    uint64_t off = 0, nbytes = 0;
    TOK(odl_h5_reader_open(path, &r));
    if (!r) return;
    TOK(odl_h5_reader_data_offset(r, "/model/conv1/weight", &off, &nbytes));
    TCHECK(nbytes == 96 && off > 0, "offset %llu, %llu bytes", (unsigned long long)off, (unsigned long long)nbytes);
    odl_h5_reader_close(r);
    r = NULL;
    int fd = open(path, O_RDWR);
    unsigned char b = 0;
    TCHECK(pread(fd, &b, 1, (off_t)(off + 41)) == 1, "pread");
    b ^= 0x10;
    TCHECK(pwrite(fd, &b, 1, (off_t)(off + 41)) == 1, "pwrite");
    close(fd);
    TOK(odl_h5_reader_open(path, &r));
    if (!r) return;
    float f32[24];
    TFAIL(odl_h5_reader_read(r, "/model/conv1/weight", ODL_F32, 3, (int64_t[]){2, 3, 4}, f32), ODL_E_CHECKSUM);
    TMSG("corrupt.h5:/model/conv1/weight: checksum mismatch", "the file is damaged", NULL);
    TFAIL(odl_h5_reader_read(r, "/model/conv1/weight", ODL_F64, 3, (int64_t[]){2, 3, 4}, (double[24]){0}),
          ODL_E_CHECKSUM); /* verified before conversion too */
    TOK(odl_h5_reader_read(r, "/model/fc/bias", ODL_F64, 2, (int64_t[]){2, 2}, (double[4]){0}));
    odl_h5_reader_close(r);
    r = NULL;

    /* Truncated: the first half of a good file. */
    struct stat sb;
    stat(tpath("round.h5"), &sb);
    copy_prefix(tpath("round.h5"), tpath("trunc.h5"), (long)sb.st_size / 2);
    TFAIL(odl_h5_reader_open(tpath("trunc.h5"), &r), ODL_E_FORMAT);
    TMSG("trunc.h5: truncated HDF5 file", "H5Fopen failed", NULL);
    TCHECK(r == NULL, "no reader on error");
    copy_prefix(tpath("round.h5"), tpath("trunc_hdr.h5"), 20);
    TFAIL(odl_h5_reader_open(tpath("trunc_hdr.h5"), &r), ODL_E_FORMAT);

    /* Missing, not HDF5, empty, a directory. */
    TFAIL(odl_h5_reader_open(tpath("missing.h5"), &r), ODL_E_NOTFOUND);
    TMSG("missing.h5: no such file", NULL, NULL);
    FILE *f = fopen(tpath("text.h5"), "w");
    fputs("this is not an HDF5 file\n", f);
    fclose(f);
    TFAIL(odl_h5_reader_open(tpath("text.h5"), &r), ODL_E_FORMAT);
    TMSG("text.h5: not an HDF5 file", NULL, NULL);
    f = fopen(tpath("empty.h5"), "w");
    fclose(f);
    TFAIL(odl_h5_reader_open(tpath("empty.h5"), &r), ODL_E_FORMAT);
    TFAIL(odl_h5_reader_open(g_dir, &r), ODL_E_IO);
    TMSG("is a directory", NULL, NULL);
}

/* A writer killed before commit leaves the old file; abort removes the .tmp. */
static void test_crash_safety(void) {
    char path[600];
    snprintf(path, sizeof path, "%s", tpath("safe.h5"));
    write_sample(path, 1);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        odl_h5_writer *w = NULL;
        if (odl_h5_writer_open(path, &w) != ODL_OK) _exit(3);
        float big[4096] = {0};
        odl_h5_writer_write(w, "/model/conv1/weight", ODL_F32, 1, (int64_t[]){4096}, big);
        odl_h5_writer_attr_i64(w, "/", "version", 2);
        raise(SIGKILL); /* a crash between writing and commit */
        _exit(4);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    TCHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "child killed (status %d)", status);
    TCHECK(file_exists(tpath("safe.h5.tmp")), "the killed writer left its .tmp");

    odl_h5_reader *r = NULL;
    int64_t version = 0;
    float f32[24];
    TOK(odl_h5_reader_open(path, &r));
    if (r) {
        TOK(odl_h5_reader_attr_i64(r, "/", "version", &version));
        TCHECK(version == 1, "old file intact: version %lld", (long long)version);
        TOK(odl_h5_reader_read(r, "/model/conv1/weight", ODL_F32, 3, (int64_t[]){2, 3, 4}, f32));
        odl_h5_reader_close(r);
        r = NULL;
    }

    /* The next writer takes over the stale .tmp. */
    write_sample(path, 3);
    TCHECK(!file_exists(tpath("safe.h5.tmp")), "no .tmp after commit");
    TOK(odl_h5_reader_open(path, &r));
    if (r) {
        TOK(odl_h5_reader_attr_i64(r, "/", "version", &version));
        TCHECK(version == 3, "new file: version %lld", (long long)version);
        odl_h5_reader_close(r);
        r = NULL;
    }

    /* Abort: nothing changes, the .tmp goes. */
    odl_h5_writer *w = NULL;
    TOK(odl_h5_writer_open(path, &w));
    TOK(odl_h5_writer_attr_i64(w, "/", "version", 4));
    TCHECK(file_exists(tpath("safe.h5.tmp")), ".tmp while writing");
    odl_h5_writer_abort(w);
    odl_h5_writer_abort(NULL);
    TCHECK(!file_exists(tpath("safe.h5.tmp")), "abort removes the .tmp");
    TOK(odl_h5_reader_open(path, &r));
    if (r) {
        TOK(odl_h5_reader_attr_i64(r, "/", "version", &version));
        TCHECK(version == 3, "abort leaves the file: version %lld", (long long)version);
        odl_h5_reader_close(r);
    }
}

/* The PyTorch step reference (h5py-written: no crc32, float32 parameters, float64 losses). */
static void test_reference_file(void) {
    const char *path = odl_test_data_path("mnist/fashion_mnist_cnn_steps.h5");
    if (!file_exists(path)) {
        printf("SKIP part: %s not found (set ODL_TEST_DATA)\n", path);
        return;
    }
    char p[4096];
    snprintf(p, sizeof p, "%s", path);
    odl_h5_reader *r = NULL;
    TOK(odl_h5_reader_open(p, &r));
    if (!r) return;
    TCHECK(odl_h5_reader_count(r) == 27, "27 datasets, got %zu", odl_h5_reader_count(r));
    TCHECK(strcmp(odl_h5_reader_name(r, 0), "/batch_indices") == 0, "first name %s", odl_h5_reader_name(r, 0));
    TCHECK(strcmp(odl_h5_reader_name(r, 1), "/final/conv1.bias") == 0, "second name %s", odl_h5_reader_name(r, 1));
    const char *params[] = {"conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias",
                            "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"};
    const int64_t shapes[8][4] = {{32, 1, 3, 3}, {32}, {64, 32, 3, 3}, {64}, {128, 9216}, {128}, {10, 128}, {10}};
    const int ndims[8] = {4, 1, 4, 1, 2, 1, 2, 1};
    const char *groups[] = {"init", "final", "step0_grad"};
    float *buf = malloc(128 * 9216 * sizeof(float));
    for (int g = 0; g < 3; g++) {
        for (int i = 0; i < 8; i++) {
            char name[64];
            snprintf(name, sizeof name, "/%s/%s", groups[g], params[i]);
            odl_h5_info info;
            TOK(odl_h5_reader_info(r, name, &info));
            TCHECK(info.dtype == ODL_F32 && info.ndim == ndims[i] && !info.has_crc32, "%s info", name);
            TOK(odl_h5_reader_read(r, name, ODL_F32, ndims[i], shapes[i], buf));
        }
    }
    TOK(odl_h5_reader_read(r, "init/conv1.weight", ODL_F32, 4, (int64_t[]){32, 1, 3, 3}, buf));
    TCHECK(buf[0] == -0.314013839f && buf[1] == -0.0654009581f && buf[2] == -0.160103887f, "init/conv1.weight %.9g %.9g",
           buf[0], buf[1]);
    TOK(odl_h5_reader_read(r, "init/fc2.bias", ODL_F32, 1, (int64_t[]){10}, buf));
    TCHECK(buf[0] == -0.0456344262f && buf[1] == -0.00684637623f, "init/fc2.bias %.9g", buf[0]);
    TFAIL(odl_h5_reader_read(r, "init/conv1.weight", ODL_F32, 3, (int64_t[]){32, 3, 3}, buf), ODL_E_INVAL);
    TMSG("fashion_mnist_cnn_steps.h5:/init/conv1.weight: shape [32, 1, 3, 3] in the file, [32, 3, 3] expected", NULL,
         NULL);

    /* float64 losses, read converted and as stored. */
    odl_h5_info info;
    TOK(odl_h5_reader_info(r, "/losses", &info));
    TCHECK(info.dtype == ODL_F64 && info.ndim == 1 && info.shape[0] == 20, "losses info");
    double ld[20];
    float lf[20];
    TOK(odl_h5_reader_read(r, "/losses", ODL_F64, 1, (int64_t[]){20}, ld));
    TOK(odl_h5_reader_read(r, "/losses", ODL_F32, 1, (int64_t[]){20}, lf));
    TCHECK(fabs(ld[0] - 2.31320073) < 1e-8 && fabs(ld[1] - 3.14501181) < 1e-8, "losses %.9g %.9g", ld[0], ld[1]);
    int conv_ok = 1;
    for (int i = 0; i < 20; i++) conv_ok &= lf[i] == (float)ld[i];
    TCHECK(conv_ok, "float64 -> float32 rounds each value");
    int64_t idx[20 * 64];
    TOK(odl_h5_reader_read(r, "/batch_indices", ODL_I64, 2, (int64_t[]){20, 64}, idx));
    TCHECK(idx[0] == 49460 && idx[1] == 42114 && idx[4] == 53551, "batch_indices %lld", (long long)idx[0]);
    TFAIL(odl_h5_reader_read(r, "/batch_indices", ODL_I32, 2, (int64_t[]){20, 64}, idx), ODL_E_INVAL);
    TOK(odl_h5_reader_read(r, "/step0_logprobs", ODL_F32, 2, (int64_t[]){64, 10}, buf));

    /* h5py's attributes: float64 scalars and variable-length UTF-8 strings. */
    double mean = 0, std = 0;
    TOK(odl_h5_reader_attr_f64(r, "/", "normalize_mean", &mean));
    TOK(odl_h5_reader_attr_f64(r, "/", "normalize_std", &std));
    TCHECK(mean == 0.1307 && std == 0.3081, "normalize %g %g", mean, std);
    char s[4096];
    TOK(odl_h5_reader_attr_str(r, "/", "optimizer", s, sizeof s));
    TCHECK(strcmp(s, "Adadelta lr=1.0 rho=0.9 eps=1e-6 weight_decay=0") == 0, "optimizer '%s'", s);
    TOK(odl_h5_reader_attr_str(r, "/", "description", s, sizeof s));
    TCHECK(strncmp(s, "Step-by-step training reference", 31) == 0, "description '%.40s'", s);
    uint64_t off = 0, nb = 0;
    TOK(odl_h5_reader_data_offset(r, "/losses", &off, &nb));
    TCHECK(nb == 160, "losses storage %llu bytes", (unsigned long long)nb);
    free(buf);
    odl_h5_reader_close(r);
}

int main(void) {
    if (odl_test_mkdtemp(g_dir, sizeof g_dir, "test_h5io")) return 1;
    fill();
    test_round_trip();
    test_writer_errors();
    test_bad_files();
    test_crash_safety();
    test_reference_file();
    odl_test_rmtree(g_dir);
    return odl_test_finish("test_h5io");
}
