/* A stand-in libnvjpeg for the tests of the nvJPEG path without a GPU (ODL_NVJPEG_LIBRARY points at it):
 * the calls datasets/nvjpeg.c makes, on the CPU device's memory (host memory), decoding with libjpeg-turbo
 * as the CPU path does (islow DCT, fancy upsampling, no EXIF orientation: nvJPEG applies none), so
 * that an image it decodes must come out of the pipeline bitwise as the CPU-decoded one. Knobs:
 *   FAKE_NVJPEG_NO_HW=1   nvjpegCreateEx(HARDWARE) reports NVJPEG_STATUS_ARCH_MISMATCH (a GPU without
 *                         JPEG engines: the hybrid backend is taken);
 *   a COM segment "fake-nvjpeg: unsupported"  nvjpegDecodeBatchedSupported says no;
 *   a COM segment "fake-nvjpeg: fail"         nvjpegDecodeBatched fails for the whole batch
 *                                             (NVJPEG_STATUS_EXECUTION_FAILED);
 *   FAKE_NVJPEG_LOG=FILE  one line per batched call: "batch N" (N images decoded) or "fail N";
 *   FAKE_NVJPEG_SLEEP_MS=N  each batched call takes N ms more (a stalled decoder, for the stall report).
 * Enum values and signatures as NVIDIA's nvjpeg.h. */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jpeglib.h> /* after stdio.h: it uses FILE and size_t */

typedef int st_t;
enum { OK = 0, INVALID = 2, BAD_JPEG = 3, EXECUTION_FAILED = 6, ARCH_MISMATCH = 7 };
enum { BACKEND_HARDWARE = 3, OUTPUT_RGBI = 5 };

typedef struct {
    unsigned char *channel[4];
    size_t pitch[4];
} image_t;
typedef struct { int backend; } handle;
typedef struct { int batch, fmt; } state;
typedef struct { int encoding, comps, css, unsupported; } jstream;

typedef struct {
    struct jpeg_error_mgr mgr;
    jmp_buf jb;
} err_t;
static void err_exit(j_common_ptr c) { longjmp(((err_t *)c->err)->jb, 1); }
static void err_emit(j_common_ptr c, int level) { (void)c; (void)level; }

/* libjpeg on data with its errors sent to e's setjmp (which the caller has set), COM segments kept. */
static void read_header(struct jpeg_decompress_struct *c, err_t *e, const unsigned char *data, size_t len) {
    c->err = jpeg_std_error(&e->mgr);
    e->mgr.error_exit = err_exit;
    e->mgr.emit_message = err_emit;
    jpeg_create_decompress(c);
    jpeg_mem_src(c, data, (unsigned long)len);
    jpeg_save_markers(c, JPEG_COM, 0xFFFF);
    jpeg_read_header(c, TRUE);
}

static int has_com(struct jpeg_decompress_struct *c, const char *text) {
    for (jpeg_saved_marker_ptr m = c->marker_list; m; m = m->next)
        if (m->marker == JPEG_COM && m->data_length >= strlen(text) && !memcmp(m->data, text, strlen(text))) return 1;
    return 0;
}

static void log_line(const char *what, int n) {
    const char *p = getenv("FAKE_NVJPEG_LOG");
    if (!p || !p[0]) return;
    FILE *f = fopen(p, "a");
    if (!f) return;
    fprintf(f, "%s %d\n", what, n);
    fclose(f);
}

st_t nvjpegGetProperty(int type, int *value) {
    *value = type == 0 ? 13 : 0;
    return OK;
}

st_t nvjpegCreateEx(int backend, void *dev_alloc, void *pinned_alloc, unsigned flags, handle **out) {
    (void)dev_alloc, (void)pinned_alloc, (void)flags;
    const char *nohw = getenv("FAKE_NVJPEG_NO_HW");
    if (backend == BACKEND_HARDWARE && nohw && nohw[0] == '1') return ARCH_MISMATCH;
    *out = calloc(1, sizeof **out);
    (*out)->backend = backend;
    return OK;
}
st_t nvjpegDestroy(handle *h) { free(h); return OK; }
st_t nvjpegJpegStateCreate(handle *h, state **out) { (void)h; *out = calloc(1, sizeof **out); return OK; }
st_t nvjpegJpegStateDestroy(state *s) { free(s); return OK; }
st_t nvjpegJpegStreamCreate(handle *h, jstream **out) { (void)h; *out = calloc(1, sizeof **out); return OK; }
st_t nvjpegJpegStreamDestroy(jstream *s) { free(s); return OK; }

st_t nvjpegJpegStreamParseHeader(handle *h, const unsigned char *data, size_t len, jstream *js) {
    (void)h;
    struct jpeg_decompress_struct c;
    err_t e;
    if (setjmp(e.jb)) {
        jpeg_destroy_decompress(&c);
        return BAD_JPEG;
    }
    read_header(&c, &e, data, len);
    js->encoding = c.progressive_mode ? 0xc2 : c.arith_code ? 0xc9 : 0xc0;
    js->comps = c.num_components;
    js->css = -1;
    if (c.num_components == 1) js->css = 6;
    else if (c.num_components == 3 && c.comp_info[1].h_samp_factor == 1 && c.comp_info[1].v_samp_factor == 1 &&
             c.comp_info[2].h_samp_factor == 1 && c.comp_info[2].v_samp_factor == 1) {
        const int h = c.comp_info[0].h_samp_factor, v = c.comp_info[0].v_samp_factor;
        js->css = h == 1 && v == 1 ? 0 : h == 2 && v == 1 ? 1 : h == 2 && v == 2 ? 2 : h == 1 && v == 2 ? 3 : h == 4 && v == 1 ? 4 : -1;
    }
    js->unsupported = has_com(&c, "fake-nvjpeg: unsupported");
    jpeg_destroy_decompress(&c);
    return OK;
}
st_t nvjpegJpegStreamGetJpegEncoding(jstream *js, int *enc) { *enc = js->encoding; return OK; }
st_t nvjpegJpegStreamGetComponentsNum(jstream *js, unsigned *n) { *n = (unsigned)js->comps; return OK; }
st_t nvjpegJpegStreamGetChromaSubsampling(jstream *js, int *css) { *css = js->css; return OK; }
st_t nvjpegDecodeBatchedSupported(handle *h, jstream *js, int *is_supported) {
    (void)h;
    *is_supported = js->unsupported || js->encoding != 0xc0 || js->css < 0; /* 0 means supported */
    return OK;
}
st_t nvjpegDecodeBatchedInitialize(handle *h, state *s, int batch, int threads, int fmt) {
    (void)h, (void)threads;
    if (fmt != OUTPUT_RGBI || batch < 1) return INVALID;
    s->batch = batch;
    s->fmt = fmt;
    return OK;
}

/* One image into dst (pitch bytes a row); 0, or 1 when it carries the "fail" marker or is not a JPEG. */
static int decode_one(const unsigned char *data, size_t len, const image_t *dst) {
    struct jpeg_decompress_struct c;
    err_t e;
    if (setjmp(e.jb)) {
        jpeg_destroy_decompress(&c);
        return 1;
    }
    read_header(&c, &e, data, len);
    if (has_com(&c, "fake-nvjpeg: fail")) {
        jpeg_destroy_decompress(&c);
        return 1;
    }
    c.out_color_space = JCS_RGB;
    jpeg_start_decompress(&c);
    while (c.output_scanline < c.output_height) {
        JSAMPROW row = dst->channel[0] + (size_t)c.output_scanline * dst->pitch[0];
        jpeg_read_scanlines(&c, &row, 1);
    }
    jpeg_finish_decompress(&c);
    jpeg_destroy_decompress(&c);
    return 0;
}

st_t nvjpegDecodeBatched(handle *h, state *s, const unsigned char *const *data, const size_t *lengths, image_t *dst,
                         void *stream) {
    (void)h, (void)stream;
    const char *sleep_ms = getenv("FAKE_NVJPEG_SLEEP_MS");
    if (sleep_ms && atoi(sleep_ms) > 0) {
        const long ms = atol(sleep_ms);
        struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
        while (nanosleep(&t, &t) != 0) {
        }
    }
    for (int i = 0; i < s->batch; i++)
        if (decode_one(data[i], lengths[i], &dst[i])) {
            log_line("fail", s->batch);
            return EXECUTION_FAILED;
        }
    log_line("batch", s->batch);
    return OK;
}
