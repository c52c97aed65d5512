/* Images for YOLOv5: letterbox geometry (YOLOv5's letterbox arithmetic, with its rounding), the
 * bilinear resize byte for byte against the official pre-processing (bus_640/input_rgb_u8 of the
 * reference file, made by cv2.imread + letterbox) and against a per-pixel writing of OpenCV's formulas
 * on random images, box mapping back to the original image, EXIF orientations 1..8 (JPEGs written here
 * with an APP1 Exif block: where the stored corners show), grey and CMYK JPEGs, PNG decoding (grey, RGBA,
 * 16-bit, palette written here with libpng), JPEG writing and reading back, drawing, and bad files:
 * missing, a directory, empty, text, truncated JPEG and PNG. */
#include <png.h>
#include <unistd.h>

#include "jpeg_test_util.h"
#include "png_test_util.h"
#include "yolov5_test_util.h"

static void geometry(void) {
    odl_letterbox g;
    /* bus.jpg 810x1080 -> r = 640/1080, unpad 480x640; rect: dw = 160 % 32 = 0; square: 80 each side */
    TOK(odl_letterbox_geometry(810, 1080, 640, 1, 32, &g));
    TCHECK(g.unpad_w == 480 && g.unpad_h == 640 && g.out_w == 480 && g.out_h == 640 && g.left == 0 && g.top == 0,
           "bus rect: unpad %dx%d out %dx%d", g.unpad_w, g.unpad_h, g.out_w, g.out_h);
    TOK(odl_letterbox_geometry(810, 1080, 640, 0, 32, &g));
    TCHECK(g.out_w == 640 && g.out_h == 640 && g.left == 80 && g.right == 80 && g.top == 0, "bus square");
    /* zidane.jpg 1280x720 -> 640x360; rect: dh = 280 % 32 = 24 -> 12 + 12 = 384; square: 140 + 140 */
    TOK(odl_letterbox_geometry(1280, 720, 640, 1, 32, &g));
    TCHECK(g.out_w == 640 && g.out_h == 384 && g.top == 12 && g.bottom == 12, "zidane rect: %dx%d top %d", g.out_w,
           g.out_h, g.top);
    TOK(odl_letterbox_geometry(1280, 720, 640, 0, 32, &g));
    TCHECK(g.out_h == 640 && g.top == 140 && g.bottom == 140, "zidane square");
    /* 500x375 (000000000077.jpg): r = 1.28 -> 640x480, dh = 160 % 32 = 0 */
    TOK(odl_letterbox_geometry(500, 375, 640, 1, 32, &g));
    TCHECK(g.unpad_w == 640 && g.unpad_h == 480 && g.out_h == 480, "500x375 rect");
    /* 381x500 (000000000049.jpg): r = 1.28, unpad round(487.68) = 488 x 640; dw = 152 % 32 = 24 -> 12 + 12 = 512 */
    TOK(odl_letterbox_geometry(381, 500, 640, 1, 32, &g));
    TCHECK(g.unpad_w == 488 && g.out_w == 512 && g.left == 12 && g.right == 12, "381x500 rect: unpad %d out %d",
           g.unpad_w, g.out_w);
    /* Odd padding splits as round(d - 0.1), round(d + 0.1): 640x427 square: dh = 213 / 2 = 106.5 -> 106 top, 107 bottom */
    TOK(odl_letterbox_geometry(640, 427, 640, 0, 32, &g));
    TCHECK(g.unpad_h == 427 && g.top == 106 && g.bottom == 107 && g.out_h == 640, "odd split: top %d bottom %d",
           g.top, g.bottom);
    /* rect of the same: dh = 213 % 32 = 21 -> 10.5 -> 10 + 11 = 448 (reference input_hw of 000000000294.jpg) */
    TOK(odl_letterbox_geometry(640, 427, 640, 1, 32, &g));
    TCHECK(g.top == 10 && g.bottom == 11 && g.out_h == 448, "odd rect split");
    /* r = 1: no resize, no padding */
    TOK(odl_letterbox_geometry(2, 5, 5, 0, 1, &g));
    TCHECK(g.unpad_w == 2 && g.unpad_h == 5, "tiny: %dx%d", g.unpad_w, g.unpad_h);
    TOK(odl_letterbox_geometry(5, 2, 4, 0, 1, &g)); /* r = 0.8 -> 4 x round(1.6) = 2, dh = 1 -> round(0.9), round(1.1) */
    TCHECK(g.unpad_w == 4 && g.unpad_h == 2 && g.top == 1 && g.bottom == 1, "ties");
    TFAIL(odl_letterbox_geometry(0, 10, 640, 1, 32, &g), ODL_E_INVAL);
    TFAIL(odl_letterbox_geometry(10, 10, 640, 1, 0, &g), ODL_E_INVAL);

    /* Mapping back (scale_boxes): bus square, gain 640/1080, pad x 80 */
    TOK(odl_letterbox_geometry(810, 1080, 640, 0, 32, &g));
    float b[4] = {80.f, 0.f, 560.f, 640.f};
    odl_letterbox_unmap(&g, b);
    TCHECK(fabsf(b[0]) < 1e-3f && fabsf(b[1]) < 1e-3f && fabsf(b[2] - 810.f) < 1e-2f && fabsf(b[3] - 1080.f) < 1e-2f,
           "unmap corners: %g %g %g %g", b[0], b[1], b[2], b[3]);
    float c[4] = {-5.f, -5.f, 700.f, 700.f};
    odl_letterbox_unmap(&g, c);
    TCHECK(c[0] == 0.f && c[1] == 0.f && c[2] == 810.f && c[3] == 1080.f, "unmap clips");
}

static void resize_vs_reference(const char *dir) {
    char ref[4096];
    snprintf(ref, sizeof ref, "%s", odl_test_data_path("yolov5/reference/yolov5n_reference.h5"));
    int64_t n = 0;
    float *want = ref_read_f32(ref, "bus_640/input_rgb_u8", &n);
    TCHECK(want && n == 640 * 640 * 3, "reference bus_640/input_rgb_u8");
    odl_image img, lb;
    odl_letterbox g;
    TOK(odl_image_load(odl_test_data_path("yolov5/images/bus.jpg"), &img));
    TCHECK(img.width == 810 && img.height == 1080, "bus.jpg size %dx%d", img.width, img.height);
    TOK(odl_image_letterbox(&img, 640, 0, 32, 114, &lb, &g));
    if (want && lb.data) {
        int maxd = 0;
        int64_t ndiff = 0;
        for (int64_t i = 0; i < n; i++) {
            int d = abs((int)want[i] - (int)lb.data[i]);
            if (d > maxd) maxd = d;
            ndiff += d != 0;
        }
        printf("bus.jpg letterbox 640 vs official: max byte difference %d, %lld of %lld differ\n", maxd,
               (long long)ndiff, (long long)n);
        TCHECK(maxd <= 1 && ndiff < n / 1000, "letterbox differs from the official one: max %d, %lld bytes", maxd,
               (long long)ndiff);
        TCHECK(lb.data[0] == 114 && lb.data[(640 * 640 - 1) * 3] == 114, "pad colour");
    }
    free(want);
    /* CHW / 255 */
    float *chw = malloc(sizeof(float) * 3 * 640 * 640);
    odl_image_to_chw(&lb, chw);
    TCHECK(chw[0] == 114.0f / 255.0f && chw[640 * 640 + 100 * 640 + 320] == lb.data[(100 * 640 + 320) * 3 + 1] / 255.0f,
           "to_chw");
    free(chw);

    /* Drawing and JPEG round trip */
    uint8_t red[3] = {255, 0, 0};
    odl_image_draw_box(&img, 100, 100, 300, 400, red, 3, "person 0.87", 2);
    TCHECK(img.data[(200 * 810 + 100) * 3] == 255 && img.data[(200 * 810 + 100) * 3 + 1] == 0, "box edge drawn");
    {
        /* The label sits above the box: 22 px high (7 rows x 2 + 2 x 4 padding), characters 12 px apart from
         * x = 104, y = 82. The space (character 6) must leave its 10 x 14 cell in the red background; 'p'
         * (character 0) must put white text pixels in its cell. */
        int space_white = 0, p_white = 0;
        for (int y = 82; y < 96; y++)
            for (int x = 0; x < 10; x++) {
                space_white += img.data[((size_t)y * 810 + 176 + x) * 3 + 1] == 255;
                p_white += img.data[((size_t)y * 810 + 104 + x) * 3 + 1] == 255;
            }
        TCHECK(space_white == 0, "label space drawn with %d text pixels", space_white);
        TCHECK(p_white > 0, "label text not drawn");
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/drawn.jpg", dir);
    TOK(odl_image_save_jpeg(&img, path, 95));
    odl_image back;
    TOK(odl_image_load(path, &back));
    TCHECK(back.width == 810 && back.height == 1080, "jpeg round trip size");
    if (back.data) {
        double err = 0;
        for (size_t i = 0; i < (size_t)810 * 1080 * 3; i++) err += abs((int)back.data[i] - (int)img.data[i]);
        err /= 810.0 * 1080 * 3;
        TCHECK(err < 3.0, "jpeg round trip mean abs error %.2f", err);
    }
    unlink(path);
    TFAIL(odl_image_save_jpeg(&img, "/nonexistent-dir/x.jpg", 90), ODL_E_IO);
    odl_image_free(&back);
    odl_image_free(&img);
    odl_image_free(&lb);
}

/* cv2.resize INTER_LINEAR for 8-bit images written per output pixel, straight from OpenCV's formulas
 * (resizeGeneric: coordinates (d + 0.5) * scale - 0.5 clamped, 11-bit weights rounded half to even;
 * HResizeLinear's integer sums; VResizeLinearVec_32s8u's 16-bit high products and (v + 2) >> 2):
 * the reference of odl_image_resize_linear's row-cached, SIMD version. */
static void ref_coef(int d, int dsize, int ssize, int *s0, int *s1, int *a0, int *a1) {
    const double scale = 1.0 / ((double)dsize / ssize);
    float f = (float)((d + 0.5) * scale - 0.5);
    int s = (int)floorf(f);
    f -= (float)s;
    if (s < 0) s = 0, f = 0.f;
    if (s >= ssize - 1) s = ssize - 1, f = 0.f;
    *s0 = s;
    *s1 = s + 1 < ssize ? s + 1 : ssize - 1;
    *a0 = (int)nearbyintf((1.f - f) * 2048);
    *a1 = (int)nearbyintf(f * 2048);
}

static uint8_t ref_pixel(const uint8_t *src, int sw, int sh, int cn, int dw, int dh, int x, int y, int c) {
    int x0, x1, a0, a1, y0, y1, b0, b1;
    ref_coef(x, dw, sw, &x0, &x1, &a0, &a1);
    ref_coef(y, dh, sh, &y0, &y1, &b0, &b1);
    const int h0 = src[((size_t)y0 * sw + x0) * cn + c] * a0 + src[((size_t)y0 * sw + x1) * cn + c] * a1;
    const int h1 = src[((size_t)y1 * sw + x0) * cn + c] * a0 + src[((size_t)y1 * sw + x1) * cn + c] * a1;
    int v = (((h0 >> 4) * b0) >> 16) + (((h1 >> 4) * b1) >> 16);
    v = (v + 2) >> 2;
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* Random images, up- and downscaled by odd and even factors, 1, 3 and 4 channels, 1-pixel edges:
 * every byte as the reference's. */
static void resize_exact(void) {
    static const int sizes[][4] = {{810, 1080, 480, 640}, {1280, 720, 640, 360}, {500, 375, 640, 480}, {7, 5, 13, 11},
                                   {640, 427, 640, 427}, {1, 1, 4, 3},          {3, 9, 1, 1},         {333, 77, 17, 91},
                                   {2, 2, 1, 7},         {61, 640, 31, 333}};
    uint32_t seed = 1234567u;
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++)
        for (int cn = 1; cn <= 4; cn += (cn == 1 ? 2 : 1)) {
            const int sw = sizes[k][0], sh = sizes[k][1], dw = sizes[k][2], dh = sizes[k][3];
            uint8_t *src = malloc((size_t)sw * sh * cn), *dst = malloc((size_t)dw * dh * cn);
            for (size_t i = 0; i < (size_t)sw * sh * cn; i++) {
                seed = seed * 1664525u + 1013904223u;
                src[i] = (uint8_t)(seed >> 24);
            }
            TOK(odl_image_resize_linear(src, sw, sh, cn, dst, dw, dh));
            int64_t bad = 0;
            for (int y = 0; y < dh; y++)
                for (int x = 0; x < dw; x++)
                    for (int c = 0; c < cn; c++)
                        bad += dst[((size_t)y * dw + x) * cn + c] != ref_pixel(src, sw, sh, cn, dw, dh, x, y, c);
            TCHECK(bad == 0, "resize %dx%d -> %dx%d, %d channels: %lld bytes differ from the reference", sw, sh, dw, dh, cn,
                   (long long)bad);
            free(src);
            free(dst);
        }
}

/* EXIF orientation as the standard defines it (EXIF 2.3, tag 0x0112): where the stored image's top-left
 * (red) and top-right (green) corners show. 5..8 turn the stored rows into columns. */
static void exif_orientations(const char *dir) {
    /* visual corner of the stored top-left and top-right: 0 TL, 1 TR, 2 BR, 3 BL */
    static const int tl[9] = {0, 0, 1, 2, 3, 0, 1, 2, 3}, tr[9] = {0, 1, 0, 3, 2, 3, 2, 1, 0};
    const int W = 96, H = 64;
    for (int o = 1; o <= 8; o++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/corners%d.jpg", dir, o);
        TCHECK(test_write_jpeg(path, W, H, TJ_CORNERS, 0, o, NULL) == 0, "write %s", path);
        odl_image im;
        TOK(odl_image_load(path, &im));
        int pw = 0, ph = 0;
        TOK(odl_image_probe(path, &pw, &ph));
        const int swap = o >= 5;
        TCHECK(im.width == (swap ? H : W) && im.height == (swap ? W : H) && pw == im.width && ph == im.height,
               "orientation %d: %dx%d (probe %dx%d)", o, im.width, im.height, pw, ph);
        if (!im.data) continue;
        /* the mean of each channel over the 8 x 8 inside each visual corner */
        double mean[4][3] = {{0}};
        for (int q = 0; q < 4; q++)
            for (int y = 0; y < 8; y++)
                for (int x = 0; x < 8; x++) {
                    const int cx = q == 0 || q == 3 ? 4 + x : im.width - 12 + x, cy = q < 2 ? 4 + y : im.height - 12 + y;
                    for (int c = 0; c < 3; c++) mean[q][c] += im.data[((size_t)cy * im.width + cx) * 3 + c] / 64.0;
                }
        TCHECK(mean[tl[o]][0] > 180 && mean[tl[o]][1] < 70, "orientation %d: the red corner is not at corner %d", o, tl[o]);
        TCHECK(mean[tr[o]][1] > 180 && mean[tr[o]][0] < 70, "orientation %d: the green corner is not at corner %d", o, tr[o]);
        for (int q = 0; q < 4; q++)
            if (q != tl[o] && q != tr[o])
                TCHECK(fabs(mean[q][0] - 128) < 20 && fabs(mean[q][1] - 128) < 20, "orientation %d: corner %d not grey", o, q);
        odl_image_free(&im);
    }
    /* grey JPEGs come out with R = G = B; CMYK ones (Adobe's inverted inks) as OpenCV: R = C K / 255 */
    char path[4096];
    odl_image im;
    snprintf(path, sizeof path, "%s/grey.jpg", dir);
    TCHECK(test_write_jpeg(path, 61, 43, TJ_GREY, 0, 0, NULL) == 0, "write grey.jpg");
    TOK(odl_image_load(path, &im));
    int bad = 0, far = 0;
    for (int i = 0; im.data && i < 61 * 43; i++) {
        bad += im.data[3 * i] != im.data[3 * i + 1] || im.data[3 * i] != im.data[3 * i + 2];
        far += abs(im.data[3 * i] - test_pattern(i % 61, i / 61, 0, 61, 43)) > 24;
    }
    TCHECK(im.data && bad == 0 && far < 61 * 43 / 20, "grey JPEG: %d pixels not grey, %d far from the picture", bad, far);
    odl_image_free(&im);
    snprintf(path, sizeof path, "%s/cmyk.jpg", dir);
    TCHECK(test_write_jpeg(path, 61, 43, TJ_CMYK, 0, 0, NULL) == 0, "write cmyk.jpg");
    TOK(odl_image_load(path, &im));
    far = 0;
    for (int i = 0; im.data && i < 61 * 43; i++) {
        const int x = i % 61, y = i / 61, k = 200 + (x + y) % 50;
        for (int c = 0; c < 3; c++) far += abs(im.data[3 * i + c] - test_pattern(x, y, c, 61, 43) * k / 255) > 24;
    }
    TCHECK(im.data && far < 61 * 43 * 3 / 20, "CMYK JPEG: %d values far from C K / 255", far);
    odl_image_free(&im);
}

static void png_cases(const char *dir) {
    char path[4096];
    odl_image im;
    /* RGBA 8-bit: alpha dropped */
    uint8_t rgba[2 * 3 * 4];
    for (int i = 0; i < 6; i++) {
        rgba[4 * i] = (uint8_t)(10 * i);
        rgba[4 * i + 1] = (uint8_t)(20 * i);
        rgba[4 * i + 2] = (uint8_t)(30 * i);
        rgba[4 * i + 3] = 7;
    }
    snprintf(path, sizeof path, "%s/rgba.png", dir);
    TCHECK(test_write_png(path, 3, 2, PNG_COLOR_TYPE_RGB_ALPHA, 8, rgba, 12, NULL, 0, NULL, 0, NULL) == 0, "write rgba png");
    TOK(odl_image_load(path, &im));
    TCHECK(im.width == 3 && im.height == 2 && im.data && im.data[3 * 5] == 50 && im.data[3 * 5 + 1] == 100 &&
               im.data[3 * 5 + 2] == 150, "rgba png pixels");
    odl_image_free(&im);
    /* grey 16-bit: high byte kept, replicated */
    uint8_t g16[4 * 2] = {0x12, 0x34, 0xAB, 0xCD, 0xFF, 0xFF, 0x00, 0x01};
    snprintf(path, sizeof path, "%s/grey16.png", dir);
    TCHECK(test_write_png(path, 2, 2, PNG_COLOR_TYPE_GRAY, 16, g16, 4, NULL, 0, NULL, 0, NULL) == 0, "write grey16 png");
    TOK(odl_image_load(path, &im));
    TCHECK(im.data && im.data[0] == 0x12 && im.data[1] == 0x12 && im.data[3] == 0xAB && im.data[9] == 0x00,
           "grey16 png pixels");
    odl_image_free(&im);
    /* palette 4-bit */
    png_color pal[2] = {{1, 2, 3}, {200, 100, 50}};
    uint8_t idx[2] = {0x01, 0x10}; /* 2x2, 4 bits per pixel: row0 = 0,1; row1 = 1,0 */
    snprintf(path, sizeof path, "%s/pal.png", dir);
    TCHECK(test_write_png(path, 2, 2, PNG_COLOR_TYPE_PALETTE, 4, idx, 1, pal, 2, NULL, 0, NULL) == 0, "write palette png");
    TOK(odl_image_load(path, &im));
    TCHECK(im.data && im.data[0] == 1 && im.data[3] == 200 && im.data[6] == 200 && im.data[9] == 1, "palette png pixels");
    odl_image_free(&im);
    /* truncated PNG */
    FILE *f = fopen(path, "rb");
    uint8_t buf[4096];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    snprintf(path, sizeof path, "%s/trunc.png", dir);
    f = fopen(path, "wb");
    fwrite(buf, 1, n - 20, f);
    fclose(f);
    TFAIL(odl_image_load(path, &im), ODL_E_FORMAT);
    TCHECK(strstr(odl_error_msg(), "trunc.png") != NULL, "message names the file: %s", odl_error_msg());
    printf("truncated PNG: %s\n", odl_error_msg());
}

static void bad_files(const char *dir) {
    char path[4096];
    odl_image im;
    snprintf(path, sizeof path, "%s/missing.jpg", dir);
    TFAIL(odl_image_load(path, &im), ODL_E_NOTFOUND);
    TCHECK(strstr(odl_error_msg(), "missing.jpg") != NULL, "names the file: %s", odl_error_msg());
    TFAIL(odl_image_load(dir, &im), ODL_E_IO);
    snprintf(path, sizeof path, "%s/empty.jpg", dir);
    FILE *f = fopen(path, "wb");
    fclose(f);
    TFAIL(odl_image_load(path, &im), ODL_E_FORMAT);
    snprintf(path, sizeof path, "%s/text.jpg", dir);
    f = fopen(path, "wb");
    fputs("this is not an image\n", f);
    fclose(f);
    TFAIL(odl_image_load(path, &im), ODL_E_FORMAT);
    TCHECK(strstr(odl_error_msg(), "text.jpg") && strstr(odl_error_msg(), "not a JPEG or PNG"), "%s", odl_error_msg());
    /* truncated JPEG: the first half of bus.jpg */
    FILE *src = fopen(odl_test_data_path("yolov5/images/bus.jpg"), "rb");
    TCHECK(src != NULL, "bus.jpg");
    if (!src) return;
    uint8_t *buf = malloc(1 << 20);
    size_t n = fread(buf, 1, 1 << 20, src);
    fclose(src);
    snprintf(path, sizeof path, "%s/trunc.jpg", dir);
    f = fopen(path, "wb");
    fwrite(buf, 1, n / 2, f);
    fclose(f);
    TFAIL(odl_image_load(path, &im), ODL_E_FORMAT);
    TCHECK(strstr(odl_error_msg(), "trunc.jpg") && strstr(odl_error_msg(), "truncated"), "%s", odl_error_msg());
    printf("truncated JPEG: %s\n", odl_error_msg());
    /* corrupt JPEG header */
    buf[3] ^= 0xFF;
    buf[20] ^= 0x55;
    memset(buf + 4, 0xFF, 200);
    snprintf(path, sizeof path, "%s/corrupt.jpg", dir);
    f = fopen(path, "wb");
    fwrite(buf, 1, 4096, f);
    fclose(f);
    TFAIL(odl_image_load(path, &im), ODL_E_FORMAT);
    printf("corrupt JPEG: %s\n", odl_error_msg());
    free(buf);
}

int main(void) {
    char dir[1024]; /* the test's files */
    if (odl_test_mkdtemp(dir, sizeof dir, "yolov5_image")) return 1;
    geometry();
    resize_exact();
    exif_orientations(dir);
    png_cases(dir);
    if (!odl_test_have_data("yolov5/reference/yolov5n_reference.h5") || !odl_test_have_data("yolov5/images/bus.jpg")) {
        odl_test_rmtree(dir);
        return odl_test_finish_skipped("test_yolov5_image");
    }
    resize_vs_reference(dir);
    bad_files(dir);
    return odl_test_finish_in("test_yolov5_image", dir);
}
