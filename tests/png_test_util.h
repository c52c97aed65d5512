/* Test helper: a PNG written by libpng (the reference encoder), for the decoder's tests. */
#ifndef ODL_PNG_TEST_UTIL_H
#define ODL_PNG_TEST_UTIL_H

#include <png.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>

/* rows: h rows of `stride` bytes at `depth` bits per sample; pal/npal a palette, trns/ntrns palette
 * alphas and trns_color a grey/RGB transparent colour (tRNS), each optional (NULL). 0 on success. */
static inline int test_write_png(const char *path, int w, int h, int color_type, int depth, const uint8_t *rows,
                                 size_t stride, const png_color *pal, int npal, const png_byte *trns, int ntrns,
                                 const png_color_16 *trns_color) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    png_structp p = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(p);
    if (setjmp(png_jmpbuf(p))) {
        png_destroy_write_struct(&p, &info);
        fclose(f);
        return -1;
    }
    png_init_io(p, f);
    png_set_IHDR(p, info, (png_uint_32)w, (png_uint_32)h, depth, color_type, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    if (pal) png_set_PLTE(p, info, pal, npal);
    if (trns || trns_color) png_set_tRNS(p, info, trns, ntrns, trns_color);
    png_write_info(p, info);
    for (int y = 0; y < h; y++) png_write_row(p, (png_const_bytep)(rows + (size_t)y * stride));
    png_write_end(p, NULL);
    png_destroy_write_struct(&p, &info);
    fclose(f);
    return 0;
}

#endif
