/* JPEG/PNG decoding, YOLOv5's letterbox with cv2.resize's bilinear convention, box drawing, JPEG
 * writing. See include/odl/image.h for the contracts and the sources of the formulas. */
#include "odl/image.h"

#include "kernels/resize_linear.h"

#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif
#ifdef ODL_HAVE_JPEG
#include <jpeglib.h>
#include <jerror.h>
#endif
#ifdef ODL_HAVE_PNG
#include <png.h>
#endif

#define ODL_IMAGE_MAX_DIM 65535

odl_status odl_image_alloc(odl_image *img, int width, int height, uint8_t r, uint8_t g, uint8_t b) {
    if (!img) return ODL_ERR(ODL_E_INVAL, "odl_image_alloc: NULL image");
    img->data = NULL;
    img->width = img->height = 0;
    if (width <= 0 || height <= 0 || width > ODL_IMAGE_MAX_DIM || height > ODL_IMAGE_MAX_DIM)
        return ODL_ERR(ODL_E_INVAL, "odl_image_alloc: bad image size %dx%d", width, height);
    size_t n = (size_t)width * (size_t)height * 3;
    uint8_t *p = malloc(n);
    if (!p) return ODL_ERR(ODL_E_NOMEM, "odl_image_alloc: cannot allocate %zu bytes for a %dx%d image", n, width, height);
    if (r == g && g == b) {
        memset(p, r, n);
    } else {
        for (size_t i = 0; i < n; i += 3) {
            p[i] = r;
            p[i + 1] = g;
            p[i + 2] = b;
        }
    }
    img->data = p;
    img->width = width;
    img->height = height;
    return ODL_OK;
}

void odl_image_free(odl_image *img) {
    if (!img) return;
    free(img->data);
    img->data = NULL;
    img->width = img->height = 0;
}

/* ------------------------------------------------------------------------------------------------
 * EXIF orientation (cv2.imread applies it to JPEGs by default)
 * ---------------------------------------------------------------------------------------------- */

static unsigned rd16(const uint8_t *p, int be) { return be ? (unsigned)(p[0] << 8 | p[1]) : (unsigned)(p[1] << 8 | p[0]); }
static uint32_t rd32(const uint8_t *p, int be) {
    return be ? ((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3])
              : ((uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0]);
}

/* Orientation tag (0x0112) of an APP1 "Exif\0\0" payload; 1 when absent or malformed. */
static int exif_orientation(const uint8_t *d, size_t n) {
    if (n < 14 || memcmp(d, "Exif\0\0", 6) != 0) return 1;
    const uint8_t *t = d + 6;
    size_t tn = n - 6;
    int be;
    if (t[0] == 'M' && t[1] == 'M') be = 1;
    else if (t[0] == 'I' && t[1] == 'I') be = 0;
    else return 1;
    uint32_t ifd = rd32(t + 4, be);
    if (ifd + 2 > tn) return 1;
    unsigned cnt = rd16(t + ifd, be);
    for (unsigned i = 0; i < cnt; i++) {
        size_t e = ifd + 2 + (size_t)i * 12;
        if (e + 12 > tn) return 1;
        if (rd16(t + e, be) == 0x0112) {
            unsigned v = rd16(t + e + 8, be);
            return (v >= 1 && v <= 8) ? (int)v : 1;
        }
    }
    return 1;
}

odl_status odl_image_apply_orientation(odl_image *img, int orient) {
    if (!img || !img->data) return ODL_ERR(ODL_E_INVAL, "odl_image_apply_orientation: NULL image");
    if (orient <= 1 || orient > 8) return ODL_OK;
    int w = img->width, h = img->height;
    int transpose = orient >= 5; /* 5..8 swap the axes */
    int ow = transpose ? h : w, oh = transpose ? w : h;
    uint8_t *o = malloc((size_t)ow * oh * 3);
    if (!o) return ODL_ERR(ODL_E_NOMEM, "EXIF rotation: cannot allocate %dx%d", ow, oh);
    for (int y = 0; y < oh; y++) {
        for (int x = 0; x < ow; x++) {
            int sx, sy; /* source pixel of output (x, y) */
            odl_orient_src(orient, w, h, x, y, &sx, &sy);
            memcpy(o + ((size_t)y * ow + x) * 3, img->data + ((size_t)sy * w + sx) * 3, 3);
        }
    }
    free(img->data);
    img->data = o;
    img->width = ow;
    img->height = oh;
    return ODL_OK;
}

/* ------------------------------------------------------------------------------------------------
 * JPEG
 * ---------------------------------------------------------------------------------------------- */
#ifdef ODL_HAVE_JPEG
typedef struct jerr_ctx {
    struct jpeg_error_mgr mgr;
    jmp_buf jb;
    char msg[JMSG_LENGTH_MAX];
    int premature_end;
} jerr_ctx;

static void jerr_exit(j_common_ptr c) {
    jerr_ctx *e = (jerr_ctx *)c->err;
    (*c->err->format_message)(c, e->msg);
    longjmp(e->jb, 1);
}

static void jerr_emit(j_common_ptr c, int level) {
    jerr_ctx *e = (jerr_ctx *)c->err;
    if (level < 0) { /* a warning: keep only the one that means the data ended early */
        if (c->err->msg_code == JWRN_JPEG_EOF) {
            e->premature_end = 1;
            (*c->err->format_message)(c, e->msg);
        }
        c->err->num_warnings++;
    }
}

/* Route libjpeg's errors to err (the caller's setjmp then catches them) and keep its warnings. */
static void jerr_init(struct jpeg_decompress_struct *cinfo, jerr_ctx *err) {
    memset(err, 0, sizeof *err);
    cinfo->err = jpeg_std_error(&err->mgr);
    err->mgr.error_exit = jerr_exit;
    err->mgr.emit_message = jerr_emit;
}

/* Read the JPEG's header from memory (errors longjmp to the caller's handler) and return its EXIF
 * orientation (1 when none), which odl_image_load applies and odl_image_probe reports. */
static int jpeg_read_header_orientation(struct jpeg_decompress_struct *cinfo, const uint8_t *buf, size_t n) {
    jpeg_mem_src(cinfo, (const unsigned char *)buf, (unsigned long)n);
    jpeg_save_markers(cinfo, JPEG_APP0 + 1, 0xFFFF);
    jpeg_read_header(cinfo, TRUE);
    int orient = 1;
    for (jpeg_saved_marker_ptr m = cinfo->marker_list; m; m = m->next)
        if (m->marker == JPEG_APP0 + 1) {
            int o = exif_orientation(m->data, m->data_length);
            if (o != 1) orient = o;
        }
    return orient;
}

static odl_status decode_jpeg(const uint8_t *buf, size_t n, const char *name, odl_image *out) {
    struct jpeg_decompress_struct cinfo;
    jerr_ctx err;
    jerr_init(&cinfo, &err);
    uint8_t *volatile pix = NULL;
    if (setjmp(err.jb)) {
        jpeg_destroy_decompress(&cinfo);
        free(pix);
        return ODL_ERR(ODL_E_FORMAT, "%s: corrupt JPEG: %s", name, err.msg);
    }
    jpeg_create_decompress(&cinfo);
    int orient = jpeg_read_header_orientation(&cinfo, buf, n);
    cinfo.out_color_space = JCS_RGB; /* also converts greyscale and (with libjpeg-turbo) CMYK/YCCK */
    if (cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK) cinfo.out_color_space = JCS_CMYK;
    jpeg_start_decompress(&cinfo);
    int w = (int)cinfo.output_width, h = (int)cinfo.output_height, nc = cinfo.output_components;
    if (w <= 0 || h <= 0 || w > ODL_IMAGE_MAX_DIM || h > ODL_IMAGE_MAX_DIM) {
        jpeg_destroy_decompress(&cinfo);
        return ODL_ERR(ODL_E_FORMAT, "%s: JPEG of unusable size %dx%d", name, w, h);
    }
    pix = malloc((size_t)w * h * 3);
    uint8_t *row = nc == 3 ? NULL : malloc((size_t)w * nc);
    if (!pix || (nc != 3 && !row)) {
        free(row);
        jpeg_destroy_decompress(&cinfo);
        free(pix);
        return ODL_ERR(ODL_E_NOMEM, "%s: cannot allocate a %dx%d image", name, w, h);
    }
    while (cinfo.output_scanline < cinfo.output_height) {
        unsigned y = cinfo.output_scanline;
        uint8_t *d = pix + (size_t)y * w * 3;
        if (nc == 3) { /* RGB rows straight into the image, as many as the decoder gives at once */
            JSAMPROW rp[16];
            unsigned k = cinfo.output_height - y < 16 ? cinfo.output_height - y : 16;
            for (unsigned i = 0; i < k; i++) rp[i] = d + (size_t)i * w * 3;
            if (jpeg_read_scanlines(&cinfo, rp, k) == 0) break;
            if (err.premature_end) break;
            continue;
        }
        JSAMPROW rp = row;
        if (jpeg_read_scanlines(&cinfo, &rp, 1) != 1) break;
        if (nc == 1) {
            for (int x = 0; x < w; x++) d[3 * x] = d[3 * x + 1] = d[3 * x + 2] = row[x];
        } else { /* CMYK as Adobe writes it (inverted): R = C * K / 255, as OpenCV */
            for (int x = 0; x < w; x++) {
                int k = row[4 * x + 3];
                d[3 * x] = (uint8_t)(row[4 * x] * k / 255);
                d[3 * x + 1] = (uint8_t)(row[4 * x + 1] * k / 255);
                d[3 * x + 2] = (uint8_t)(row[4 * x + 2] * k / 255);
            }
        }
        if (err.premature_end) break;
    }
    free(row);
    if (err.premature_end || cinfo.output_scanline < cinfo.output_height) {
        unsigned got = cinfo.output_scanline;
        jpeg_destroy_decompress(&cinfo);
        free(pix);
        return ODL_ERR(ODL_E_FORMAT, "%s: truncated JPEG (%s; %u of %d rows decoded)", name,
                       err.msg[0] ? err.msg : "data ends early", got, h);
    }
    jpeg_finish_decompress(&cinfo);
    jpeg_destroy_decompress(&cinfo);
    if (err.premature_end) {
        free(pix);
        return ODL_ERR(ODL_E_FORMAT, "%s: truncated JPEG (%s)", name, err.msg);
    }
    out->data = pix;
    out->width = w;
    out->height = h;
    odl_status st = odl_image_apply_orientation(out, orient);
    if (st != ODL_OK) {
        odl_image_free(out);
        odl_error_prefix("%s", name);
    }
    return st;
}
#endif

/* ------------------------------------------------------------------------------------------------
 * PNG
 * ---------------------------------------------------------------------------------------------- */
#ifdef ODL_HAVE_PNG
typedef struct png_src {
    const uint8_t *buf;
    size_t n, pos;
    char msg[256];
} png_src;

static void png_read_mem(png_structp p, png_bytep out, png_size_t len) {
    png_src *s = (png_src *)png_get_io_ptr(p);
    if (s->pos + len > s->n) {
        snprintf(s->msg, sizeof s->msg, "data ends early (truncated file)");
        png_error(p, "truncated");
    }
    memcpy(out, s->buf + s->pos, len);
    s->pos += len;
}

static void png_err_fn(png_structp p, png_const_charp msg) {
    png_src *s = (png_src *)png_get_error_ptr(p);
    if (!s->msg[0]) snprintf(s->msg, sizeof s->msg, "%s", msg);
    png_longjmp(p, 1);
}
static void png_warn_fn(png_structp p, png_const_charp msg) { (void)p; (void)msg; }

static odl_status decode_png(const uint8_t *buf, size_t n, const char *name, odl_image *out) {
    png_src src = {buf, n, 0, {0}};
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, png_err_fn, png_warn_fn);
    if (!png) return ODL_ERR(ODL_E_NOMEM, "%s: png_create_read_struct failed", name);
    png_infop info = png_create_info_struct(png);
    uint8_t *volatile pix = NULL;
    png_bytep *volatile rows = NULL;
    if (!info) {
        png_destroy_read_struct(&png, NULL, NULL);
        return ODL_ERR(ODL_E_NOMEM, "%s: png_create_info_struct failed", name);
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_read_struct(&png, &info, NULL);
        free(pix);
        free(rows);
        return ODL_ERR(ODL_E_FORMAT, "%s: corrupt PNG: %s", name, src.msg[0] ? src.msg : "libpng error");
    }
    png_set_read_fn(png, &src, png_read_mem);
    png_read_info(png, info);
    png_uint_32 w = png_get_image_width(png, info), h = png_get_image_height(png, info);
    int depth = png_get_bit_depth(png, info), ctype = png_get_color_type(png, info);
    if (w == 0 || h == 0 || w > ODL_IMAGE_MAX_DIM || h > ODL_IMAGE_MAX_DIM) {
        png_destroy_read_struct(&png, &info, NULL);
        return ODL_ERR(ODL_E_FORMAT, "%s: PNG of unusable size %ux%u", name, (unsigned)w, (unsigned)h);
    }
    /* As OpenCV's PNG decoder for IMREAD_COLOR: 16 -> 8 bits by dropping the low byte, palette and
     * low-depth grey expanded, alpha stripped, grey replicated to three channels. */
    if (depth == 16) png_set_strip_16(png);
    if (ctype == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
    if (ctype == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
    if (depth < 8) png_set_packing(png);
    /* A tRNS chunk (palette or single-colour transparency) would add an alpha channel: expand it, then
     * drop the alpha as for RGBA, so the image decodes like its opaque twin (OpenCV IMREAD_COLOR). */
    int trns = png_get_valid(png, info, PNG_INFO_tRNS) != 0;
    if (trns) png_set_tRNS_to_alpha(png);
    if ((ctype & PNG_COLOR_MASK_ALPHA) || trns) png_set_strip_alpha(png);
    if (ctype == PNG_COLOR_TYPE_GRAY || ctype == PNG_COLOR_TYPE_GRAY_ALPHA) png_set_gray_to_rgb(png);
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    if (png_get_rowbytes(png, info) != (size_t)w * 3) {
        png_destroy_read_struct(&png, &info, NULL);
        return ODL_ERR(ODL_E_FORMAT, "%s: PNG colour type %d depth %d did not convert to 8-bit RGB", name, ctype, depth);
    }
    pix = malloc((size_t)w * h * 3);
    rows = malloc(sizeof(png_bytep) * h);
    if (!pix || !rows) {
        png_destroy_read_struct(&png, &info, NULL);
        free(pix);
        free(rows);
        return ODL_ERR(ODL_E_NOMEM, "%s: cannot allocate a %ux%u image", name, (unsigned)w, (unsigned)h);
    }
    for (png_uint_32 y = 0; y < h; y++) rows[y] = pix + (size_t)y * w * 3;
    png_read_image(png, rows);
    png_read_end(png, NULL);
    png_destroy_read_struct(&png, &info, NULL);
    free(rows);
    out->data = pix;
    out->width = (int)w;
    out->height = (int)h;
    return ODL_OK;
}
#endif

odl_status odl_image_decode(const void *buf, size_t nbytes, const char *name, odl_image *out) {
    if (!out) return ODL_ERR(ODL_E_INVAL, "odl_image_decode: NULL output");
    out->data = NULL;
    out->width = out->height = 0;
    if (!name) name = "(memory)";
    const uint8_t *b = (const uint8_t *)buf;
    if (!b || nbytes == 0) return ODL_ERR(ODL_E_FORMAT, "%s: empty file, not an image", name);
    if (nbytes >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF) {
#ifdef ODL_HAVE_JPEG
        return decode_jpeg(b, nbytes, name, out);
#else
        return ODL_ERR(ODL_E_UNSUPPORTED, "%s: JPEG image, but this build has no libjpeg", name);
#endif
    }
    if (nbytes >= 8 && memcmp(b, "\x89PNG\r\n\x1a\n", 8) == 0) {
#ifdef ODL_HAVE_PNG
        return decode_png(b, nbytes, name, out);
#else
        return ODL_ERR(ODL_E_UNSUPPORTED, "%s: PNG image, but this build has no libpng", name);
#endif
    }
    return ODL_ERR(ODL_E_FORMAT, "%s: not a JPEG or PNG image (first bytes %02x %02x %02x %02x)", name, b[0],
                   nbytes > 1 ? b[1] : 0, nbytes > 2 ? b[2] : 0, nbytes > 3 ? b[3] : 0);
}

odl_status odl_file_read(const char *path, uint8_t **out, size_t *nbytes) {
    if (!path || !out || !nbytes) return ODL_ERR(ODL_E_INVAL, "odl_file_read: NULL argument");
    struct stat sb;
    if (stat(path, &sb) != 0) {
        if (errno == ENOENT) return ODL_ERR(ODL_E_NOTFOUND, "%s: no such file", path);
        return ODL_ERR(ODL_E_IO, "%s: cannot stat: %s", path, strerror(errno));
    }
    if (S_ISDIR(sb.st_mode)) return ODL_ERR(ODL_E_IO, "%s: is a directory, not an image", path);
    FILE *f = fopen(path, "rb");
    if (!f) return ODL_ERR(ODL_E_IO, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = sb.st_size > 0 ? (size_t)sb.st_size : 65536, n = 0;
    uint8_t *buf = malloc(cap + 1);
    if (!buf) {
        fclose(f);
        return ODL_ERR(ODL_E_NOMEM, "%s: cannot allocate %zu bytes", path, cap);
    }
    for (;;) {
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (r == 0) break;
        if (n == cap) {
            uint8_t *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                fclose(f);
                return ODL_ERR(ODL_E_NOMEM, "%s: cannot allocate %zu bytes", path, cap * 2);
            }
            buf = nb;
            cap *= 2;
        }
    }
    int rerr = ferror(f);
    fclose(f);
    if (rerr) {
        free(buf);
        return ODL_ERR(ODL_E_IO, "%s: read error", path);
    }
    *out = buf;
    *nbytes = n;
    return ODL_OK;
}

odl_status odl_image_load(const char *path, odl_image *out) {
    if (!path || !out) return ODL_ERR(ODL_E_INVAL, "odl_image_load: NULL argument");
    out->data = NULL;
    out->width = out->height = 0;
    uint8_t *buf = NULL;
    size_t n = 0;
    ODL_CHECK(odl_file_read(path, &buf, &n));
    odl_status st = odl_image_decode(buf, n, path, out);
    free(buf);
    return st;
}

#ifdef ODL_HAVE_JPEG
/* 1 when an EOI marker follows the first scan's header (at `from`): entropy-coded data never holds
 * 0xFF 0xD9 (a 0xFF there is followed by 0x00 or a restart marker), so a file cut short lacks it, and
 * libjpeg reports such a file as truncated (JWRN_JPEG_EOF). Trailing bytes after the EOI are allowed. */
static int jpeg_has_eoi(const uint8_t *b, size_t n, size_t from) {
    for (size_t i = n; i >= from + 2; i--)
        if (b[i - 2] == 0xFF && b[i - 1] == 0xD9) return 1;
    return 0;
}

static odl_status info_jpeg(const uint8_t *buf, size_t n, const char *name, odl_image_info *o) {
    struct jpeg_decompress_struct cinfo;
    jerr_ctx err;
    jerr_init(&cinfo, &err);
    if (setjmp(err.jb)) {
        jpeg_destroy_decompress(&cinfo);
        return ODL_ERR(ODL_E_FORMAT, "%s: corrupt JPEG: %s", name, err.msg);
    }
    jpeg_create_decompress(&cinfo);
    o->orientation = jpeg_read_header_orientation(&cinfo, buf, n);
    o->width = (int)cinfo.image_width;
    o->height = (int)cinfo.image_height;
    o->components = cinfo.num_components;
    o->progressive = cinfo.progressive_mode || cinfo.arith_code || cinfo.data_precision != 8;
    o->cmyk = cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK;
    o->complete = jpeg_has_eoi(buf, n, (size_t)(cinfo.src->next_input_byte - buf));
    jpeg_destroy_decompress(&cinfo);
    return ODL_OK;
}
#endif

odl_status odl_image_info_of(const void *buf, size_t n, const char *name, odl_image_info *out) {
    if (!out) return ODL_ERR(ODL_E_INVAL, "odl_image_info_of: NULL output");
    memset(out, 0, sizeof *out);
    if (!name) name = "(memory)";
    const uint8_t *b = (const uint8_t *)buf;
    odl_status st = ODL_OK;
    if (!b || n == 0) return ODL_ERR(ODL_E_FORMAT, "%s: empty file, not an image", name);
    if (n >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF) {
        out->format = ODL_IMAGE_JPEG;
#ifdef ODL_HAVE_JPEG
        st = info_jpeg(b, n, name, out);
#else
        st = ODL_ERR(ODL_E_UNSUPPORTED, "%s: JPEG image, but this build has no libjpeg", name);
#endif
    } else if (n >= 24 && memcmp(b, "\x89PNG\r\n\x1a\n", 8) == 0 && memcmp(b + 12, "IHDR", 4) == 0) {
        /* PNG: width and height are the first two big-endian words of the IHDR chunk. */
        out->format = ODL_IMAGE_PNG;
        out->width = (int)rd32(b + 16, 1);
        out->height = (int)rd32(b + 20, 1);
        out->orientation = 1;
        out->components = 3;
        out->complete = 1;
    } else {
        st = ODL_ERR(ODL_E_FORMAT, "%s: not a JPEG or PNG image (first bytes %02x %02x %02x %02x)", name, b[0],
                     n > 1 ? b[1] : 0, n > 2 ? b[2] : 0, n > 3 ? b[3] : 0);
    }
    if (st == ODL_OK &&
        (out->width <= 0 || out->height <= 0 || out->width > ODL_IMAGE_MAX_DIM || out->height > ODL_IMAGE_MAX_DIM))
        st = ODL_ERR(ODL_E_FORMAT, "%s: image of unusable size %dx%d", name, out->width, out->height);
    if (st == ODL_OK) {
        const int swap = out->orientation >= 5 && out->orientation <= 8; /* odl_image_apply_orientation transposes */
        out->oriented_w = swap ? out->height : out->width;
        out->oriented_h = swap ? out->width : out->height;
    }
    return st;
}

odl_status odl_image_probe(const char *path, int *width, int *height) {
    if (!path || !width || !height) return ODL_ERR(ODL_E_INVAL, "odl_image_probe: NULL argument");
    *width = *height = 0;
    uint8_t *b = NULL;
    size_t n = 0;
    ODL_CHECK(odl_file_read(path, &b, &n));
    odl_image_info info;
    odl_status st = odl_image_info_of(b, n, path, &info);
    free(b);
    if (st == ODL_OK) {
        *width = info.oriented_w;
        *height = info.oriented_h;
    }
    return st;
}

/* ------------------------------------------------------------------------------------------------
 * Letterbox
 * ---------------------------------------------------------------------------------------------- */

/* Python's round() of a double to an integer (ties to even). */
static int py_round(double v) { return (int)nearbyint(v); }

odl_status odl_letterbox_geometry_hw(int src_w, int src_h, int out_w, int out_h, int auto_pad, int stride, int scaleup,
                                     odl_letterbox *g) {
    if (!g) return ODL_ERR(ODL_E_INVAL, "odl_letterbox_geometry: NULL output");
    if (src_w <= 0 || src_h <= 0 || out_w <= 0 || out_h <= 0 || stride <= 0)
        return ODL_ERR(ODL_E_INVAL, "letterbox: bad sizes (image %dx%d, target %dx%d, stride %d)", src_w, src_h, out_w,
                       out_h, stride);
    memset(g, 0, sizeof *g);
    g->src_w = src_w;
    g->src_h = src_h;
    double r = fmin((double)out_h / src_h, (double)out_w / src_w);
    if (!scaleup) r = fmin(r, 1.0);
    g->ratio = r;
    g->unpad_w = py_round(src_w * r);
    g->unpad_h = py_round(src_h * r);
    if (g->unpad_w < 1) g->unpad_w = 1;
    if (g->unpad_h < 1) g->unpad_h = 1;
    double dw = out_w - g->unpad_w, dh = out_h - g->unpad_h;
    if (auto_pad) { /* np.mod, non-negative for a positive stride */
        dw = fmod(dw, stride);
        dh = fmod(dh, stride);
        if (dw < 0) dw += stride;
        if (dh < 0) dh += stride;
    }
    dw /= 2;
    dh /= 2;
    g->dw = dw;
    g->dh = dh;
    g->top = py_round(dh - 0.1);
    g->bottom = py_round(dh + 0.1);
    g->left = py_round(dw - 0.1);
    g->right = py_round(dw + 0.1);
    g->out_w = g->unpad_w + g->left + g->right;
    g->out_h = g->unpad_h + g->top + g->bottom;
    return ODL_OK;
}

odl_status odl_letterbox_geometry(int src_w, int src_h, int new_size, int auto_pad, int stride, odl_letterbox *g) {
    return odl_letterbox_geometry_hw(src_w, src_h, new_size, new_size, auto_pad, stride, 1, g);
}

/* Source taps and 11-bit weights of output coordinate d (kernels/resize_linear.h, cv2's formulas). */
static void linear_coef(int d, double scale, int ssize, int *s0, int *s1, int16_t *a0, int16_t *a1) {
    int w0, w1;
    odl_rl_coef(d, scale, ssize, s0, s1, &w0, &w1);
    *a0 = (int16_t)w0;
    *a1 = (int16_t)w1;
}

/* The horizontal pass of source rows s[0..nr) (nr 1 or 2) into o[0..nr) (dst_w * cn values each):
 * OpenCV's HResizeLinear sum p0 * a0 + p1 * a1, kept as sum >> 4, the only form of it that the
 * vertical pass uses (it fits int16: at most 255 * 2048 >> 4 = 32640), so that the vertical pass runs
 * on 16-bit lanes. Two rows at once share the column loop (a downscale needs two new rows per output
 * row). xs: source columns, 2 per output column; xa: their weights; xw: the weights packed as
 * a0 | a1 << 16. */
static void hpass(const uint8_t *const *s, int16_t *const *o, int nr, int src_w, int dst_w, int cn,
                  const int *restrict xs, const int16_t *restrict xa, const int32_t *restrict xw) {
    int x = 0;
#ifdef __SSE2__
    if (cn == 3) {
        /* One pixel per step: the two source pixels' bytes interleaved (r0 r1 g0 g1 b0 b1) against
         * (a0 a1 a0 a1 a0 a1) in one multiply-add. Each load takes 4 bytes, one past the pixel: only while
         * the right source pixel is not the row's last; the store writes a fourth lane that the next
         * pixel (or the caller's padding) takes. */
        const __m128i zero = _mm_setzero_si128();
        for (; x < dst_w && xs[2 * x + 1] < src_w - 1; x++) {
            const __m128i w = _mm_set1_epi32(xw[x]);
            const int o0 = 3 * xs[2 * x], o1 = 3 * xs[2 * x + 1];
            for (int r = 0; r < nr; r++) {
                int32_t u0, u1;
                memcpy(&u0, s[r] + o0, 4);
                memcpy(&u1, s[r] + o1, 4);
                const __m128i v = _mm_unpacklo_epi8(_mm_unpacklo_epi8(_mm_cvtsi32_si128(u0), _mm_cvtsi32_si128(u1)), zero);
                const __m128i m = _mm_srai_epi32(_mm_madd_epi16(v, w), 4);
                _mm_storel_epi64((__m128i *)(o[r] + 3 * x), _mm_packs_epi32(m, m));
            }
        }
    }
#else
    (void)src_w;
    (void)xw;
#endif
    for (int r = 0; r < nr; r++)
        for (int xx = x; xx < dst_w; xx++) {
            const uint8_t *p0 = s[r] + (size_t)xs[2 * xx] * cn, *p1 = s[r] + (size_t)xs[2 * xx + 1] * cn;
            const int a0 = xa[2 * xx], a1 = xa[2 * xx + 1];
            for (int c = 0; c < cn; c++) o[r][xx * cn + c] = (int16_t)((p0[c] * a0 + p1[c] * a1) >> 4);
        }
}

/* The vertical pass, OpenCV's VResizeLinearVec_32s8u: 16-bit high products, then (v + 2) >> 2,
 * saturated. Written on int16 lanes (mulhi) so that the compiler vectorises it. */
static void vpass(const int16_t *restrict r0, const int16_t *restrict r1, int n, int16_t b0, int16_t b1,
                  uint8_t *restrict d) {
    int i = 0;
#ifdef __SSE2__
    const __m128i c0 = _mm_set1_epi16(b0), c1 = _mm_set1_epi16(b1), two = _mm_set1_epi16(2);
    for (; i + 16 <= n; i += 16) {
        __m128i v[2];
        for (int h = 0; h < 2; h++) {
            const __m128i a = _mm_loadu_si128((const __m128i *)(r0 + i + 8 * h));
            const __m128i b = _mm_loadu_si128((const __m128i *)(r1 + i + 8 * h));
            v[h] = _mm_srai_epi16(_mm_add_epi16(_mm_add_epi16(_mm_mulhi_epi16(a, c0), _mm_mulhi_epi16(b, c1)), two), 2);
        }
        _mm_storeu_si128((__m128i *)(d + i), _mm_packus_epi16(v[0], v[1]));
    }
#endif
    for (; i < n; i++) {
        int v = (int16_t)(((int32_t)r0[i] * b0) >> 16) + (int16_t)(((int32_t)r1[i] * b1) >> 16);
        v = (v + 2) >> 2;
        d[i] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
    }
}

/* odl_image_resize_linear with output rows dst_stride bytes apart (the letterbox writes into the
 * interior of its padded image). */
static odl_status resize_linear_rows(const uint8_t *src, int src_w, int src_h, int channels, uint8_t *dst,
                                     size_t dst_stride, int dst_w, int dst_h) {
    if (!src || !dst || src_w <= 0 || src_h <= 0 || dst_w <= 0 || dst_h <= 0 || channels <= 0 || channels > 4)
        return ODL_ERR(ODL_E_INVAL, "resize: bad arguments (%dx%d -> %dx%d, %d channels)", src_w, src_h, dst_w, dst_h,
                       channels);
    const int cn = channels, n = dst_w * cn;
    const double sx_scale = odl_rl_scale(dst_w, src_w), sy_scale = odl_rl_scale(dst_h, src_h);
    int *xs = malloc(sizeof(int) * 2 * dst_w);
    int16_t *xa = malloc(sizeof(int16_t) * 2 * dst_w);
    int32_t *xw = malloc(sizeof(int32_t) * dst_w);
    int16_t *rows = malloc(sizeof(int16_t) * 2 * ((size_t)n + 4)); /* + 4: hpass's last store */
    if (!xs || !xa || !xw || !rows) {
        free(xs);
        free(xa);
        free(xw);
        free(rows);
        return ODL_ERR(ODL_E_NOMEM, "resize: cannot allocate work buffers for width %d", dst_w);
    }
    for (int x = 0; x < dst_w; x++) {
        linear_coef(x, sx_scale, src_w, &xs[2 * x], &xs[2 * x + 1], &xa[2 * x], &xa[2 * x + 1]);
        xw[x] = (int32_t)((uint32_t)(uint16_t)xa[2 * x + 1] << 16 | (uint16_t)xa[2 * x]);
    }
    /* The horizontal passes of the two source rows an output row needs, cached between output rows
     * (rows go down monotonically, so a pair shares at most its first row with the next pair). */
    int16_t *r0 = rows, *r1 = rows + n + 4;
    int have0 = -1, have1 = -1;
    for (int y = 0; y < dst_h; y++) {
        int sy0, sy1;
        int16_t b0, b1;
        linear_coef(y, sy_scale, src_h, &sy0, &sy1, &b0, &b1);
        if (have0 != sy0 && have1 == sy0) {
            int16_t *t = r0;
            r0 = r1;
            r1 = t;
            have0 = sy0;
            have1 = -1;
        }
        const uint8_t *need[2];
        int16_t *into[2];
        int nr = 0;
        if (have0 != sy0) {
            need[nr] = src + (size_t)sy0 * src_w * cn;
            into[nr++] = r0;
            have0 = sy0;
        }
        if (have1 != sy1) {
            need[nr] = src + (size_t)sy1 * src_w * cn;
            into[nr++] = r1;
            have1 = sy1;
        }
        if (nr) hpass(need, into, nr, src_w, dst_w, cn, xs, xa, xw);
        vpass(r0, r1, n, b0, b1, dst + (size_t)y * dst_stride);
    }
    free(xs);
    free(xa);
    free(xw);
    free(rows);
    return ODL_OK;
}

odl_status odl_image_resize_linear(const uint8_t *src, int src_w, int src_h, int channels, uint8_t *dst, int dst_w,
                                   int dst_h) {
    return resize_linear_rows(src, src_w, src_h, channels, dst, (size_t)dst_w * (channels > 0 ? channels : 0), dst_w,
                              dst_h);
}

odl_status odl_image_letterbox(const odl_image *src, int new_size, int auto_pad, int stride, uint8_t pad,
                               odl_image *dst, odl_letterbox *g) {
    if (!src || !src->data || !dst || !g) return ODL_ERR(ODL_E_INVAL, "odl_image_letterbox: NULL argument");
    ODL_CHECK(odl_letterbox_geometry(src->width, src->height, new_size, auto_pad, stride, g));
    return odl_image_letterbox_apply(src, g, pad, dst);
}

odl_status odl_image_letterbox_apply(const odl_image *src, const odl_letterbox *g, uint8_t pad, odl_image *dst) {
    if (!src || !src->data || !dst || !g || g->src_w != src->width || g->src_h != src->height)
        return ODL_ERR(ODL_E_INVAL, "odl_image_letterbox_apply: NULL argument or geometry of another image size");
    if (g->left < 0 || g->top < 0 || g->unpad_w + g->left > g->out_w || g->unpad_h + g->top > g->out_h)
        return ODL_ERR(ODL_E_INVAL, "odl_image_letterbox_apply: the %dx%d image at (%d, %d) is outside the %dx%d box",
                       g->unpad_w, g->unpad_h, g->left, g->top, g->out_w, g->out_h);
    if (g->out_w <= 0 || g->out_h <= 0 || g->out_w > ODL_IMAGE_MAX_DIM || g->out_h > ODL_IMAGE_MAX_DIM)
        return ODL_ERR(ODL_E_INVAL, "odl_image_letterbox_apply: bad letterbox size %dx%d", g->out_w, g->out_h);
    /* Only the border is filled; the image is resized (or copied) straight into the interior. */
    const size_t stride = (size_t)g->out_w * 3, in_w = (size_t)g->unpad_w * 3, lb = (size_t)g->left * 3;
    uint8_t *p = malloc(stride * (size_t)g->out_h);
    if (!p) return ODL_ERR(ODL_E_NOMEM, "letterbox: cannot allocate %dx%d", g->out_w, g->out_h);
    memset(p, pad, stride * (size_t)g->top);
    for (int y = g->top; y < g->top + g->unpad_h; y++) {
        memset(p + (size_t)y * stride, pad, lb);
        memset(p + (size_t)y * stride + lb + in_w, pad, stride - lb - in_w);
    }
    memset(p + (size_t)(g->top + g->unpad_h) * stride, pad, stride * (size_t)(g->out_h - g->top - g->unpad_h));
    uint8_t *in = p + (size_t)g->top * stride + lb;
    if (g->unpad_w != src->width || g->unpad_h != src->height) {
        odl_status st = resize_linear_rows(src->data, src->width, src->height, 3, in, stride, g->unpad_w, g->unpad_h);
        if (st != ODL_OK) {
            free(p);
            return st;
        }
    } else {
        for (int y = 0; y < g->unpad_h; y++) memcpy(in + (size_t)y * stride, src->data + (size_t)y * in_w, in_w);
    }
    dst->data = p;
    dst->width = g->out_w;
    dst->height = g->out_h;
    return ODL_OK;
}

void odl_image_to_chw(const odl_image *img, float *out) {
    const size_t hw = (size_t)img->width * img->height;
    const uint8_t *p = img->data;
    float *r = out, *gg = out + hw, *b = out + 2 * hw;
    float v[256]; /* the 256 quotients v / 255.0f, so that the loop looks them up instead of dividing */
    for (int i = 0; i < 256; i++) v[i] = (float)i / 255.0f;
    for (size_t i = 0; i < hw; i++) {
        r[i] = v[p[3 * i]];
        gg[i] = v[p[3 * i + 1]];
        b[i] = v[p[3 * i + 2]];
    }
}

void odl_letterbox_unmap(const odl_letterbox *g, float xyxy[4]) {
    double gain = fmin((double)g->out_h / g->src_h, (double)g->out_w / g->src_w);
    double padx = (g->out_w - g->src_w * gain) / 2, pady = (g->out_h - g->src_h * gain) / 2;
    /* YOLOv5 does these in float32 tensors with Python-float operands. */
    float px = (float)padx, py = (float)pady, gf = (float)gain;
    xyxy[0] = (xyxy[0] - px) / gf;
    xyxy[2] = (xyxy[2] - px) / gf;
    xyxy[1] = (xyxy[1] - py) / gf;
    xyxy[3] = (xyxy[3] - py) / gf;
    for (int i = 0; i < 4; i++) {
        float lim = (float)((i & 1) ? g->src_h : g->src_w);
        if (xyxy[i] < 0) xyxy[i] = 0;
        if (xyxy[i] > lim) xyxy[i] = lim;
    }
}

/* ------------------------------------------------------------------------------------------------
 * Drawing
 * ---------------------------------------------------------------------------------------------- */

/* 5x7 glyphs, one byte per row, bit 4 = leftmost column. Upper case is drawn as lower case. */
static const char FONT_CHARS[] = "0123456789abcdefghijklmnopqrstuvwxyz.-:_% ?";
static const uint8_t FONT[][7] = {
    {0x0E, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0E}, {0x04, 0x0C, 0x04, 0x04, 0x04, 0x04, 0x0E},
    {0x0E, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1F}, {0x1F, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0E},
    {0x02, 0x06, 0x0A, 0x12, 0x1F, 0x02, 0x02}, {0x1F, 0x10, 0x1E, 0x01, 0x01, 0x11, 0x0E},
    {0x06, 0x08, 0x10, 0x1E, 0x11, 0x11, 0x0E}, {0x1F, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08},
    {0x0E, 0x11, 0x11, 0x0E, 0x11, 0x11, 0x0E}, {0x0E, 0x11, 0x11, 0x0F, 0x01, 0x02, 0x0C},
    {0x00, 0x00, 0x0E, 0x01, 0x0F, 0x11, 0x0F}, {0x10, 0x10, 0x16, 0x19, 0x11, 0x11, 0x1E},
    {0x00, 0x00, 0x0E, 0x10, 0x10, 0x11, 0x0E}, {0x01, 0x01, 0x0D, 0x13, 0x11, 0x11, 0x0F},
    {0x00, 0x00, 0x0E, 0x11, 0x1F, 0x10, 0x0E}, {0x06, 0x09, 0x08, 0x1C, 0x08, 0x08, 0x08},
    {0x00, 0x0F, 0x11, 0x11, 0x0F, 0x01, 0x0E}, {0x10, 0x10, 0x16, 0x19, 0x11, 0x11, 0x11},
    {0x04, 0x00, 0x0C, 0x04, 0x04, 0x04, 0x0E}, {0x02, 0x00, 0x06, 0x02, 0x02, 0x12, 0x0C},
    {0x10, 0x10, 0x12, 0x14, 0x18, 0x14, 0x12}, {0x0C, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0E},
    {0x00, 0x00, 0x1A, 0x15, 0x15, 0x11, 0x11}, {0x00, 0x00, 0x16, 0x19, 0x11, 0x11, 0x11},
    {0x00, 0x00, 0x0E, 0x11, 0x11, 0x11, 0x0E}, {0x00, 0x00, 0x1E, 0x11, 0x1E, 0x10, 0x10},
    {0x00, 0x00, 0x0D, 0x13, 0x0F, 0x01, 0x01}, {0x00, 0x00, 0x16, 0x19, 0x10, 0x10, 0x10},
    {0x00, 0x00, 0x0E, 0x10, 0x0E, 0x01, 0x1E}, {0x08, 0x08, 0x1C, 0x08, 0x08, 0x09, 0x06},
    {0x00, 0x00, 0x11, 0x11, 0x11, 0x13, 0x0D}, {0x00, 0x00, 0x11, 0x11, 0x11, 0x0A, 0x04},
    {0x00, 0x00, 0x11, 0x11, 0x15, 0x15, 0x0A}, {0x00, 0x00, 0x11, 0x0A, 0x04, 0x0A, 0x11},
    {0x00, 0x00, 0x11, 0x11, 0x0F, 0x01, 0x0E}, {0x00, 0x00, 0x1F, 0x02, 0x04, 0x08, 0x1F},
    {0x00, 0x00, 0x00, 0x00, 0x00, 0x0C, 0x0C}, {0x00, 0x00, 0x00, 0x1F, 0x00, 0x00, 0x00},
    {0x00, 0x0C, 0x0C, 0x00, 0x0C, 0x0C, 0x00}, {0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x1F},
    {0x18, 0x19, 0x02, 0x04, 0x08, 0x13, 0x03}, {0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00},
    {0x0E, 0x11, 0x01, 0x02, 0x04, 0x00, 0x04},
};

static const uint8_t *glyph(char ch) {
    if (ch >= 'A' && ch <= 'Z') ch = (char)(ch - 'A' + 'a');
    const char *p = strchr(FONT_CHARS, ch);
    if (ch == 0 || !p) return FONT[sizeof FONT_CHARS - 2]; /* '?' */
    return FONT[p - FONT_CHARS];
}

static void fill_rect(odl_image *img, int x0, int y0, int x1, int y1, const uint8_t c[3]) {
    if (x0 < 0) x0 = 0;
    if (y0 < 0) y0 = 0;
    if (x1 > img->width) x1 = img->width;
    if (y1 > img->height) y1 = img->height;
    for (int y = y0; y < y1; y++)
        for (int x = x0; x < x1; x++) memcpy(img->data + ((size_t)y * img->width + x) * 3, c, 3);
}

void odl_class_color(int class_id, uint8_t rgb[3]) {
    static const uint8_t pal[16][3] = {
        {230, 25, 75},  {60, 180, 75},  {255, 225, 25}, {0, 130, 200},  {245, 130, 48}, {145, 30, 180},
        {70, 240, 240}, {240, 50, 230}, {210, 245, 60}, {250, 190, 212}, {0, 128, 128}, {220, 190, 255},
        {170, 110, 40}, {255, 250, 200}, {128, 0, 0},   {170, 255, 195},
    };
    int i = class_id < 0 ? 0 : class_id % 16;
    memcpy(rgb, pal[i], 3);
}

void odl_image_label_box(int img_w, int img_h, int x1, int y1, int len, int text_scale, odl_label_box *out) {
    int scale = text_scale < 1 ? 1 : text_scale;
    /* box of n characters at a scale: 6 px advance per character, 2 px padding, 7 px glyphs */
#define LB_W(n, s) ((n) * 6 * (s) + 4 * (s) - (s))
#define LB_H(s) (7 * (s) + 4 * (s))
    while (scale > 1 && (LB_W(len, scale) > img_w || LB_H(scale) > img_h)) scale--;
    int n = len;
    while (n > 0 && LB_W(n, scale) > img_w) n--;
    if (LB_H(scale) > img_h) n = 0; /* an image smaller than one character: no label */
    int bw = LB_W(n, scale), bh = LB_H(scale);
#undef LB_W
#undef LB_H
    int bx = x1, by = y1 - bh;
    if (by < 0) by = y1 < 0 ? 0 : y1; /* no room above: inside the box, at the top */
    if (by + bh > img_h) by = img_h - bh;
    if (by < 0) by = 0;
    if (bx + bw > img_w) bx = img_w - bw;
    if (bx < 0) bx = 0;
    out->x = bx;
    out->y = by;
    out->w = bw;
    out->h = bh;
    out->scale = scale;
    out->chars = n;
}

void odl_image_draw_box(odl_image *img, float x1, float y1, float x2, float y2, const uint8_t rgb[3], int thickness,
                        const char *label, int text_scale) {
    if (!img || !img->data) return;
    if (thickness < 1) thickness = 1;
    if (text_scale < 1) text_scale = 1;
    int ix1 = (int)lrintf(x1), iy1 = (int)lrintf(y1), ix2 = (int)lrintf(x2), iy2 = (int)lrintf(y2);
    fill_rect(img, ix1, iy1, ix2 + 1, iy1 + thickness, rgb);
    fill_rect(img, ix1, iy2 - thickness + 1, ix2 + 1, iy2 + 1, rgb);
    fill_rect(img, ix1, iy1, ix1 + thickness, iy2 + 1, rgb);
    fill_rect(img, ix2 - thickness + 1, iy1, ix2 + 1, iy2 + 1, rgb);
    if (!label || !label[0]) return;
    odl_label_box lb;
    odl_image_label_box(img->width, img->height, ix1, iy1, (int)strlen(label), text_scale, &lb);
    if (lb.chars == 0) return;
    const int n = lb.chars, bx = lb.x, by = lb.y, bw = lb.w, bh = lb.h;
    text_scale = lb.scale;
    const int cw = 6 * text_scale, padp = 2 * text_scale;
    fill_rect(img, bx, by, bx + bw, by + bh, rgb);
    /* White or black text, whichever reads better on the colour. */
    int lum = (299 * rgb[0] + 587 * rgb[1] + 114 * rgb[2]) / 1000;
    uint8_t tc[3];
    memset(tc, lum > 140 ? 0 : 255, 3);
    for (int i = 0; i < n; i++) {
        const uint8_t *gl = glyph(label[i]);
        int ox = bx + padp + i * cw, oy = by + padp;
        for (int r = 0; r < 7; r++)
            for (int c = 0; c < 5; c++)
                if (gl[r] & (0x10 >> c))
                    fill_rect(img, ox + c * text_scale, oy + r * text_scale, ox + (c + 1) * text_scale,
                              oy + (r + 1) * text_scale, tc);
    }
}

odl_status odl_image_save_jpeg(const odl_image *img, const char *path, int quality) {
    if (!img || !img->data || !path) return ODL_ERR(ODL_E_INVAL, "odl_image_save_jpeg: NULL argument");
#ifdef ODL_HAVE_JPEG
    FILE *f = fopen(path, "wb");
    if (!f) return ODL_ERR(ODL_E_IO, "%s: cannot open for writing: %s", path, strerror(errno));
    struct jpeg_compress_struct cinfo;
    jerr_ctx err;
    memset(&err, 0, sizeof err);
    cinfo.err = jpeg_std_error(&err.mgr);
    err.mgr.error_exit = jerr_exit;
    if (setjmp(err.jb)) {
        jpeg_destroy_compress(&cinfo);
        fclose(f);
        return ODL_ERR(ODL_E_IO, "%s: JPEG encoding failed: %s", path, err.msg);
    }
    jpeg_create_compress(&cinfo);
    jpeg_stdio_dest(&cinfo, f);
    cinfo.image_width = (JDIMENSION)img->width;
    cinfo.image_height = (JDIMENSION)img->height;
    cinfo.input_components = 3;
    cinfo.in_color_space = JCS_RGB;
    jpeg_set_defaults(&cinfo);
    jpeg_set_quality(&cinfo, quality < 1 ? 1 : quality > 100 ? 100 : quality, TRUE);
    jpeg_start_compress(&cinfo, TRUE);
    while (cinfo.next_scanline < cinfo.image_height) {
        JSAMPROW row = img->data + (size_t)cinfo.next_scanline * img->width * 3;
        jpeg_write_scanlines(&cinfo, &row, 1);
    }
    jpeg_finish_compress(&cinfo);
    jpeg_destroy_compress(&cinfo);
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) return ODL_ERR(ODL_E_IO, "%s: write failed: %s", path, strerror(errno));
    return ODL_OK;
#else
    (void)quality;
    return ODL_ERR(ODL_E_UNSUPPORTED, "%s: cannot write JPEG: this build has no libjpeg", path);
#endif
}
