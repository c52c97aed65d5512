/* Test helper: JPEGs written by libjpeg-turbo (the reference encoder) for the decoders' tests: baseline or
 * progressive, RGB (YCbCr 4:2:0), grey or CMYK (Adobe, inverted as Photoshop writes it), with an optional
 * EXIF orientation (an APP1 "Exif" TIFF block holding tag 0x0112) and an optional COM text. */
#ifndef ODL_JPEG_TEST_UTIL_H
#define ODL_JPEG_TEST_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h> /* after stdio.h: it uses FILE and size_t */

/* TJ_CORNERS: RGB, grey 128 with a red 16 x 16 block in the top-left corner and a green one top-right. */
enum { TJ_RGB = 0, TJ_GREY = 1, TJ_CMYK = 2, TJ_CORNERS = 3 };

static inline uint8_t test_corners(int x, int y, int c, int w) {
    if (y < 16 && x < 16) return c == 0 ? 230 : 20;
    if (y < 16 && x >= w - 16) return c == 1 ? 230 : 20;
    return 128;
}

/* A smooth picture with edges (so that chroma and the resize matter): channel c of pixel (x, y). */
static inline uint8_t test_pattern(int x, int y, int c, int w, int h) {
    int v = (c == 0 ? 255 * x / (w > 1 ? w - 1 : 1) : c == 1 ? 255 * y / (h > 1 ? h - 1 : 1) : ((x / 7 + y / 5) & 1) * 180 + 30);
    if (((x - w / 3) * (x - w / 3) + (y - h / 2) * (y - h / 2)) < (h / 4) * (h / 4)) v = 255 - v; /* a disc */
    return (uint8_t)v;
}

/* w x h of test_pattern in `kind` (TJ_RGB / TJ_GREY / TJ_CMYK) at quality 90; 0 on success. */
static inline int test_write_jpeg(const char *path, int w, int h, int kind, int progressive, int orientation,
                                  const char *comment) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr e;
    c.err = jpeg_std_error(&e);
    jpeg_create_compress(&c);
    jpeg_stdio_dest(&c, f);
    c.image_width = (JDIMENSION)w;
    c.image_height = (JDIMENSION)h;
    c.input_components = kind == TJ_GREY ? 1 : kind == TJ_CMYK ? 4 : 3;
    c.in_color_space = kind == TJ_GREY ? JCS_GRAYSCALE : kind == TJ_CMYK ? JCS_CMYK : JCS_RGB;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, 90, TRUE);
    if (progressive) jpeg_simple_progression(&c);
    jpeg_start_compress(&c, TRUE);
    if (orientation >= 1 && orientation <= 8) { /* Exif\0\0, big-endian TIFF, IFD0 with one SHORT entry */
        const uint8_t exif[] = {'E', 'x', 'i', 'f', 0, 0, 'M', 'M', 0, 42, 0, 0, 0, 8, 0, 1, 0x01, 0x12, 0, 3, 0, 0, 0, 1,
                                0, (uint8_t)orientation, 0, 0, 0, 0, 0, 0};
        jpeg_write_marker(&c, JPEG_APP0 + 1, exif, sizeof exif);
    }
    if (comment) jpeg_write_marker(&c, JPEG_COM, (const JOCTET *)comment, (unsigned)strlen(comment));
    uint8_t *row = malloc((size_t)w * 4);
    while (c.next_scanline < c.image_height) {
        const int y = (int)c.next_scanline;
        for (int x = 0; x < w; x++)
            for (int k = 0; k < c.input_components; k++)
                row[x * c.input_components + k] = kind == TJ_CMYK && k == 3 ? (uint8_t)(200 + (x + y) % 50)
                                                  : kind == TJ_CORNERS             ? test_corners(x, y, k, w)
                                                                                   : test_pattern(x, y, k, w, h);
        JSAMPROW rp = row;
        jpeg_write_scanlines(&c, &rp, 1);
    }
    free(row);
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    return fclose(f) == 0 ? 0 : -1;
}

#endif
