/* MNIST IDX loader: the real MNIST t10k files (gz), Fashion-MNIST when installed, and generated bad
 * files: truncated, trailing data, wrong magic, count mismatch, bad label, missing files and dirs. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "odl/loader.h"
#include "odl/mnist.h"
#include "test_util.h"

static char g_dir[256];

static void put_be32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

/* Write an IDX file (plain, or gzip when the name ends in .gz) into dir/name: a header with `magic`
 * and the dims, then `nbytes` payload bytes from gen(i). */
static void write_idx(const char *dir, const char *name, uint32_t magic, int ndim, const uint32_t *dims,
                      uint64_t nbytes, int label_mod) {
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    size_t hl = 4 + 4 * (size_t)ndim;
    unsigned char *buf = malloc(hl + nbytes + 1);
    put_be32(buf, magic);
    for (int i = 0; i < ndim; i++) put_be32(buf + 4 + 4 * i, dims[i]);
    for (uint64_t i = 0; i < nbytes; i++) buf[hl + i] = (unsigned char)(label_mod ? i % (uint64_t)label_mod : i * 7);
    size_t n = strlen(name);
    if (n > 3 && strcmp(name + n - 3, ".gz") == 0) {
        gzFile gz = gzopen(path, "wb");
        gzwrite(gz, buf, (unsigned)(hl + nbytes));
        gzclose(gz);
    } else {
        FILE *f = fopen(path, "wb");
        fwrite(buf, 1, hl + nbytes, f);
        fclose(f);
    }
    free(buf);
}

static const char *mkdir_case(const char *name) {
    static char path[600];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    mkdir(path, 0700);
    return path;
}

/* A good pair of n images of 4x3 and n labels in dir, for split, plain or gz. */
static void good_pair(const char *dir, const char *split, uint32_t n, int gz) {
    char iname[64], lname[64];
    snprintf(iname, sizeof iname, "%s-images-idx3-ubyte%s", split, gz ? ".gz" : "");
    snprintf(lname, sizeof lname, "%s-labels-idx1-ubyte%s", split, gz ? ".gz" : "");
    uint32_t idims[3] = {n, 4, 3}, ldims[1] = {n};
    write_idx(dir, iname, 2051, 3, idims, (uint64_t)n * 12, 0);
    write_idx(dir, lname, 2049, 1, ldims, n, 10);
}

static int has(const char *a, const char *b, const char *c) {
    const char *m = odl_error_msg();
    return strstr(m, a) && (!b || strstr(m, b)) && (!c || strstr(m, c));
}
#define TMSG(a, b, c) TCHECK(has(a, b, c), "message '%s' lacks '%s' / '%s' / '%s'", odl_error_msg(), a, b ? b : "", c ? c : "")

static void check_histogram(const odl_mnist *m, const int64_t *want) {
    int64_t hist[10] = {0}, sum = 0;
    for (int64_t i = 0; i < m->n; i++) hist[m->labels[i]]++;
    for (int c = 0; c < 10; c++) {
        TCHECK(hist[c] == want[c], "class %d: %lld labels, want %lld", c, (long long)hist[c], (long long)want[c]);
        sum += hist[c];
    }
    TCHECK(sum == m->n, "histogram sums to n");
}

static uint64_t pixel_sum(const uint8_t *p, uint64_t n) {
    uint64_t s = 0;
    for (uint64_t i = 0; i < n; i++) s += p[i];
    return s;
}

static void test_real_mnist(void) {
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/mnist", odl_test_data_dir());
    struct stat sb;
    if (stat(dir, &sb) != 0) {
        printf("SKIP part: %s not found (set ODL_TEST_DATA to the reference data folder)\n", dir);
        return;
    }
    odl_mnist m;
    TOK(odl_mnist_load(dir, "t10k", &m));
    if (!m.images) return;
    TCHECK(m.n == 10000 && m.rows == 28 && m.cols == 28, "t10k: n %lld, %dx%d", (long long)m.n, m.rows, m.cols);
    /* MNIST t10k starts 7, 2, 1, 0, 4, 1, 4, 9, 5, 9; class counts from the published set. */
    const uint8_t first[10] = {7, 2, 1, 0, 4, 1, 4, 9, 5, 9};
    TCHECK(memcmp(m.labels, first, 10) == 0, "first labels %d %d %d", m.labels[0], m.labels[1], m.labels[2]);
    const int64_t hist[10] = {980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009};
    check_histogram(&m, hist);
    /* Pixel sums of the first image and of the whole set (computed with Python's gzip module). */
    TCHECK(pixel_sum(m.images, 784) == 18454, "first image pixel sum %llu", (unsigned long long)pixel_sum(m.images, 784));
    TCHECK(pixel_sum(m.images, 7840000) == 264923200ull, "all pixels sum %llu",
           (unsigned long long)pixel_sum(m.images, 7840000));
    TCHECK(m.images[0] == 0 && m.images[783] == 0, "corners are background");
    /* A batch's indices past the set's end are an error naming the index, never a read past it. */
    {
        static float x[2 * 784];
        int32_t y[2] = {-1, -1};
        int64_t ok_idx[2] = {0, 9999}, bad_idx[2] = {5, 10000};
        TOK(odl_loader_gather(m.images, m.labels, m.n, 784, 0.1307f, 0.3081f, ok_idx, 2, x, y));
        TCHECK(y[0] == m.labels[0] && y[1] == m.labels[9999], "gathered labels %d %d", y[0], y[1]);
        TFAIL(odl_loader_gather(m.images, m.labels, m.n, 784, 0.1307f, 0.3081f, bad_idx, 2, x, y), ODL_E_INVAL);
        TMSG("sample 10000", "outside the data set's 10000 samples", NULL);
    }
    odl_mnist_free(&m);
    TCHECK(m.images == NULL && m.labels == NULL && m.n == 0, "free resets");
    odl_mnist_free(&m); /* twice is fine */
    odl_mnist_free(NULL);

    /* "test" is an alias of t10k; the train split is not shipped in the reference folder. */
    TOK(odl_mnist_load(dir, "test", &m));
    TCHECK(m.n == 10000, "test alias");
    odl_mnist_free(&m);
    TFAIL(odl_mnist_load(dir, "train", &m), ODL_E_NOTFOUND);
    TMSG(dir, "train-images-idx3-ubyte[.gz]", "train-labels-idx1-ubyte[.gz]");
}

static void test_fashion(void) {
    const char *dir = "/usr/share/datasets/fashion-mnist";
    struct stat sb;
    if (stat(dir, &sb) != 0) {
        printf("SKIP part: %s not installed (apt-get install dataset-fashion-mnist)\n", dir);
        return;
    }
    odl_mnist tr, te;
    TOK(odl_mnist_load(dir, "train", &tr));
    TOK(odl_mnist_load(dir, "t10k", &te));
    if (tr.images) {
        TCHECK(tr.n == 60000 && tr.rows == 28 && tr.cols == 28, "train n %lld", (long long)tr.n);
        const uint8_t first[10] = {9, 0, 0, 3, 0, 2, 7, 2, 5, 5};
        TCHECK(memcmp(tr.labels, first, 10) == 0, "first train labels");
        const int64_t hist[10] = {6000, 6000, 6000, 6000, 6000, 6000, 6000, 6000, 6000, 6000};
        check_histogram(&tr, hist);
        TCHECK(pixel_sum(tr.images, 784) == 76247, "first image sum");
        TCHECK(pixel_sum(tr.images, 47040000) == 3431114169ull, "train pixel sum %llu",
               (unsigned long long)pixel_sum(tr.images, 47040000));
    }
    if (te.images) {
        TCHECK(te.n == 10000, "t10k n");
        const int64_t hist[10] = {1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000};
        check_histogram(&te, hist);
        TCHECK(te.labels[0] == 9 && te.labels[1] == 2, "first test labels");
    }
    odl_mnist_free(&tr);
    odl_mnist_free(&te);
}

static void test_generated(void) {
    odl_mnist m;
    char path[700];

    /* Plain and gz pairs load; the plain file wins over .gz. */
    const char *d = mkdir_case("plain");
    good_pair(d, "train", 5, 0);
    TOK(odl_mnist_load(d, "train", &m));
    TCHECK(m.n == 5 && m.rows == 4 && m.cols == 3, "plain: n %lld %dx%d", (long long)m.n, m.rows, m.cols);
    TCHECK(m.images && m.images[13] == (uint8_t)(13 * 7) && m.labels[4] == 4, "plain content");
    odl_mnist_free(&m);
    d = mkdir_case("gz");
    good_pair(d, "t10k", 7, 1);
    TOK(odl_mnist_load(d, "t10k", &m));
    TCHECK(m.n == 7 && m.labels[6] == 6, "gz");
    odl_mnist_free(&m);

    /* Truncated image file (plain): names the file, what the header says and what the file has. */
    d = mkdir_case("trunc");
    good_pair(d, "train", 5, 0);
    {
        uint32_t dims[3] = {60000, 28, 28};
        write_idx(d, "train-images-idx3-ubyte", 2051, 3, dims, 1234, 0);
    }
    TFAIL(odl_mnist_load(d, "train", &m), ODL_E_FORMAT);
    snprintf(path, sizeof path, "%s/train-images-idx3-ubyte: truncated: header says 60000 images of 28x28 "
             "(47040000 bytes), file has 1234", d);
    TMSG(path, NULL, NULL);
    TCHECK(m.images == NULL && m.n == 0, "nothing left on error");

    /* Truncated gzip stream. */
    d = mkdir_case("truncgz");
    good_pair(d, "t10k", 300, 1);
    {
        char gzpath[700];
        snprintf(gzpath, sizeof gzpath, "%s/t10k-images-idx3-ubyte.gz", d);
        struct stat sb;
        stat(gzpath, &sb);
        TCHECK(truncate(gzpath, sb.st_size / 2) == 0, "truncate");
    }
    TFAIL(odl_mnist_load(d, "t10k", &m), ODL_E_FORMAT);
    TMSG("t10k-images-idx3-ubyte.gz: truncated: header says 300 images of 4x3 (3600 bytes), file has", "gzip stream ends early",
         NULL);

    /* Header cut short. */
    d = mkdir_case("shorthdr");
    good_pair(d, "train", 5, 0);
    snprintf(path, sizeof path, "%s/train-labels-idx1-ubyte", d);
    TCHECK(truncate(path, 6) == 0, "truncate");
    TFAIL(odl_mnist_load(d, "train", &m), ODL_E_FORMAT);
    TMSG("train-labels-idx1-ubyte: truncated: the IDX1 uint8 labels header needs 8 bytes, file has 6", NULL, NULL);

    /* Trailing data. */
    d = mkdir_case("trailing");
    good_pair(d, "train", 5, 0);
    {
        uint32_t dims[1] = {5};
        write_idx(d, "train-labels-idx1-ubyte", 2049, 1, dims, 8, 5);
    }
    TFAIL(odl_mnist_load(d, "train", &m), ODL_E_FORMAT);
    TMSG("train-labels-idx1-ubyte: trailing data: header says 5 labels (5 bytes), file has 8 (3 bytes too many)", NULL,
         NULL);

    /* Wrong magic: a labels file where the images should be. */
    d = mkdir_case("magic");
    good_pair(d, "train", 5, 0);
    {
        uint32_t dims[1] = {5};
        write_idx(d, "train-images-idx3-ubyte", 2049, 1, dims, 5, 10);
    }
    TFAIL(odl_mnist_load(d, "train", &m), ODL_E_FORMAT);
    TMSG("train-images-idx3-ubyte: wrong magic number 2049 (0x00000801) (a labels file); expected 2051", NULL, NULL);
    {
        uint32_t dims[3] = {5, 4, 3};
        write_idx(d, "train-images-idx3-ubyte", 0x12345678u, 3, dims, 60, 0);
    }
    TFAIL(odl_mnist_load(d, "train", &m), ODL_E_FORMAT);
    TMSG("wrong magic number 305419896 (0x12345678); expected 2051 (0x00000803, IDX3 uint8 images)", NULL, NULL);

    /* Label count differs from image count. */
    d = mkdir_case("count");
    good_pair(d, "train", 5, 1);
    {
        uint32_t dims[1] = {4};
        write_idx(d, "train-labels-idx1-ubyte.gz", 2049, 1, dims, 4, 10);
    }
    TFAIL(odl_mnist_load(d, "train", &m), ODL_E_FORMAT);
    TMSG("train-labels-idx1-ubyte.gz has 4 labels but", "train-images-idx3-ubyte.gz has 5 images", NULL);

    /* Label outside 0..9. */
    d = mkdir_case("label");
    good_pair(d, "train", 20, 0);
    {
        uint32_t dims[1] = {20};
        write_idx(d, "train-labels-idx1-ubyte", 2049, 1, dims, 20, 13);
    }
    TFAIL(odl_mnist_load(d, "train", &m), ODL_E_FORMAT);
    TMSG("train-labels-idx1-ubyte: label 10 at index 10 is not a class 0..9", NULL, NULL);

    /* Zero and absurd dimensions. */
    d = mkdir_case("dims");
    good_pair(d, "train", 5, 0);
    {
        uint32_t dims[3] = {5, 0, 3};
        write_idx(d, "train-images-idx3-ubyte", 2051, 3, dims, 0, 0);
    }
    TFAIL(odl_mnist_load(d, "train", &m), ODL_E_FORMAT);
    TMSG("dimension 1 is 0", NULL, NULL);
    {
        uint32_t dims[3] = {0x7fffffff, 60000, 60000};
        write_idx(d, "train-images-idx3-ubyte", 2051, 3, dims, 16, 0);
    }
    TFAIL(odl_mnist_load(d, "train", &m), ODL_E_FORMAT);
    TMSG("more than", NULL, NULL);

    /* Missing files and directories. */
    d = mkdir_case("half");
    good_pair(d, "train", 5, 0);
    snprintf(path, sizeof path, "%s/train-labels-idx1-ubyte", d);
    unlink(path);
    TFAIL(odl_mnist_load(d, "train", &m), ODL_E_NOTFOUND);
    TMSG(d, "missing train-labels-idx1-ubyte;", "expected train-images-idx3-ubyte[.gz] and train-labels-idx1-ubyte[.gz]");
    d = mkdir_case("empty");
    TFAIL(odl_mnist_load(d, "t10k", &m), ODL_E_NOTFOUND);
    TMSG("missing t10k-images-idx3-ubyte and t10k-labels-idx1-ubyte", NULL, NULL);
    snprintf(path, sizeof path, "%s/does_not_exist", g_dir);
    TFAIL(odl_mnist_load(path, "train", &m), ODL_E_NOTFOUND);
    TMSG(path, "no such directory", "train-images-idx3-ubyte[.gz]");
    TFAIL(odl_mnist_load(g_dir, "validation", &m), ODL_E_INVAL);
    TMSG("validation", NULL, NULL);
    TFAIL(odl_mnist_load(NULL, "train", &m), ODL_E_INVAL);
    snprintf(path, sizeof path, "%s/nope-images", g_dir);
    TFAIL(odl_mnist_load_files(path, path, &m), ODL_E_NOTFOUND);
    TMSG(path, "no such file", NULL);
}

int main(void) {
    if (odl_test_mkdtemp(g_dir, sizeof g_dir, "test_mnist")) return 1;
    test_real_mnist();
    test_fashion();
    test_generated();
    odl_test_rmtree(g_dir);
    return odl_test_finish("test_mnist_idx");
}
