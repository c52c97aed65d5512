/* Bad inputs a new user meets first (issue 17): palette/grey/RGB PNGs with a tRNS chunk decode like their
 * opaque twins; an IDX header claiming far more data than the file holds is "truncated" with both sizes,
 * before any allocation of the claimed size; NaN/Inf predictions never survive NMS and are counted;
 * class-aware NMS keeps classes apart at every --img-size the CLI accepts (32..8192); box labels stay
 * inside the image at every size. */
#include <math.h>
#include <png.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "odl/image.h"
#include "odl/mnist.h"
#include "odl/nms.h"
#include "png_test_util.h"
#include "test_util.h"

static void png_trns(const char *dir) {
    char path[4096];
    odl_image a = {0}, b = {0};
    /* Palette with transparency (colour type 3 + tRNS) and its RGB twin. */
    png_color pal[3] = {{10, 20, 30}, {200, 100, 50}, {0, 255, 7}};
    png_byte alpha[3] = {0, 128, 255};
    uint8_t idx[2 * 3] = {0, 1, 2, 2, 1, 0};
    uint8_t rgb[2 * 3 * 3];
    for (int i = 0; i < 6; i++) memcpy(rgb + 3 * i, &pal[idx[i]], 3);
    snprintf(path, sizeof path, "%s/pal_trns.png", dir);
    TCHECK(test_write_png(path, 3, 2, PNG_COLOR_TYPE_PALETTE, 8, idx, 3, pal, 3, alpha, 3, NULL) == 0, "write palette+tRNS");
    TOK(odl_image_load(path, &a));
    snprintf(path, sizeof path, "%s/pal_twin.png", dir);
    TCHECK(test_write_png(path, 3, 2, PNG_COLOR_TYPE_RGB, 8, rgb, 9, NULL, 0, NULL, 0, NULL) == 0, "write RGB twin");
    TOK(odl_image_load(path, &b));
    TCHECK(a.data && b.data && a.width == 3 && a.height == 2 && !memcmp(a.data, b.data, sizeof rgb),
           "palette+tRNS decodes as its RGB twin");
    TCHECK(a.data && a.data[3] == 200 && a.data[4] == 100 && a.data[5] == 50, "palette+tRNS pixel 1");
    odl_image_free(&a);
    odl_image_free(&b);
    /* Grey with a transparent colour (colour type 0 + tRNS). */
    uint8_t g[4] = {0, 77, 77, 255};
    png_color_16 tc = {0};
    tc.gray = 77;
    snprintf(path, sizeof path, "%s/grey_trns.png", dir);
    TCHECK(test_write_png(path, 2, 2, PNG_COLOR_TYPE_GRAY, 8, g, 2, NULL, 0, NULL, 0, &tc) == 0, "write grey+tRNS");
    TOK(odl_image_load(path, &a));
    TCHECK(a.data && a.data[3] == 77 && a.data[4] == 77 && a.data[5] == 77 && a.data[9] == 255, "grey+tRNS pixels");
    odl_image_free(&a);
    /* RGB with a transparent colour (colour type 2 + tRNS). */
    png_color_16 rc = {0};
    rc.red = 200;
    rc.green = 100;
    rc.blue = 50;
    snprintf(path, sizeof path, "%s/rgb_trns.png", dir);
    TCHECK(test_write_png(path, 3, 2, PNG_COLOR_TYPE_RGB, 8, rgb, 9, NULL, 0, NULL, 0, &rc) == 0, "write RGB+tRNS");
    TOK(odl_image_load(path, &a));
    TCHECK(a.data && !memcmp(a.data, rgb, sizeof rgb), "RGB+tRNS decodes as plain RGB");
    odl_image_free(&a);
}

static void be32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

/* A 2 KB images file whose header claims 80 million 28x28 images: "truncated" with both sizes. */
static void idx_claims(const char *dir) {
    unsigned char hdr[16], body[2048] = {0};
    be32(hdr, 2051);
    be32(hdr + 4, 80000000u);
    be32(hdr + 8, 28);
    be32(hdr + 12, 28);
    char d[4096], path[4200];
    for (int gz = 0; gz < 2; gz++) {
        snprintf(d, sizeof d, "%s/idx%d", dir, gz);
        mkdir(d, 0777);
        snprintf(path, sizeof path, "%s/train-images-idx3-ubyte%s", d, gz ? ".gz" : "");
        gzFile f = gzopen(path, gz ? "wb" : "wbT"); /* T: no compression */
        gzwrite(f, hdr, sizeof hdr);
        gzwrite(f, body, sizeof body);
        gzclose(f);
        unsigned char lh[8];
        be32(lh, 2049);
        be32(lh + 4, 80000000u);
        snprintf(path, sizeof path, "%s/train-labels-idx1-ubyte", d);
        FILE *lf = fopen(path, "wb");
        fwrite(lh, 1, 8, lf);
        fclose(lf);
        odl_mnist m;
        TFAIL(odl_mnist_load(d, "train", &m), ODL_E_FORMAT);
        const char *msg = odl_error_msg();
        printf("%s: %s\n", gz ? "gzip" : "plain", msg);
        TCHECK(strstr(msg, "truncated") && strstr(msg, "80000000 images") && strstr(msg, "62720000000 bytes") &&
                   strstr(msg, "file has 2048"),
               "message gives both sizes: %s", msg);
        TCHECK(!strstr(msg, "allocate"), "no allocation of the claimed size: %s", msg);
    }
}

#define NC 3
#define NO (5 + NC)

static void row(float *r, float cx, float cy, float w, float h, float obj, int cls, float score) {
    r[0] = cx;
    r[1] = cy;
    r[2] = w;
    r[3] = h;
    r[4] = obj;
    for (int j = 0; j < NC; j++) r[5 + j] = j == cls ? score : 0.01f;
}

static void nms_nonfinite(void) {
    float pred[6 * NO];
    row(pred + 0 * NO, 50, 50, 20, 20, 0.9f, 0, 0.9f);
    row(pred + 1 * NO, NAN, 50, 20, 20, 0.95f, 0, 0.95f);      /* NaN centre */
    row(pred + 2 * NO, 50, 50, INFINITY, 20, 0.95f, 1, 0.95f); /* infinite width */
    row(pred + 3 * NO, 300, 300, 20, 20, NAN, 1, 0.95f);       /* NaN objectness */
    row(pred + 4 * NO, 500, 500, 20, 20, 0.9f, 2, INFINITY);   /* infinite score */
    row(pred + 5 * NO, 700, 700, 20, 20, 0.9f, 2, 0.8f);
    odl_nms_params p = odl_nms_defaults();
    odl_detection d[8];
    int n = -1;
    TOK(odl_yolo_nms(pred, 6, NC, &p, d, 8, &n));
    TCHECK(n == 2, "%d boxes kept, expected the 2 finite ones", n);
    for (int k = 0; k < n; k++)
        TCHECK(isfinite(d[k].x1) && isfinite(d[k].y1) && isfinite(d[k].x2) && isfinite(d[k].y2) && isfinite(d[k].conf),
               "box %d finite", k);
    TCHECK(n == 2 && fabsf(d[0].x1 - 40) < 1e-4f && fabsf(d[1].x1 - 690) < 1e-4f, "the finite boxes survive");
    TCHECK(odl_yolo_nonfinite_rows(pred, 6, NC) == 4, "4 non-finite rows, counted %lld",
           (long long)odl_yolo_nonfinite_rows(pred, 6, NC));
    p.multi_label = 1;
    TOK(odl_yolo_nms(pred, 6, NC, &p, d, 8, &n));
    TCHECK(n == 2, "multi-label: %d boxes kept, expected 2", n);
}

/* At every letterbox size the CLI accepts, boxes of different classes never suppress one another, and
 * agnostic NMS does. The second pair is placed where YOLOv5's fixed 7680 offset would overlay class 1's
 * box on class 0's. */
static void nms_classes_apart(void) {
    static const int sizes[] = {32, 64, 320, 640, 1280, 4096, 7680, 7712, 8192};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        const float S = (float)sizes[s];
        float pred[4 * NO];
        float bw = S / 8;
        row(pred + 0 * NO, S - bw, S - bw, bw, bw, 0.9f, 0, 0.9f);
        row(pred + 1 * NO, S - bw, S - bw, bw, bw, 0.9f, 1, 0.8f); /* same box, another class */
        const float cx1 = S - bw / 2 - 7680.f; /* class 1's box + 7680 = class 0's box */
        const int shifted = cx1 >= 0;          /* the overlay exists where class 1's box fits */
        /* (the offset moves x and y alike) */
        row(pred + 2 * NO, shifted ? S - bw / 2 : S / 2, shifted ? S - bw / 2 : S / 2, bw, bw, 0.9f, 0, 0.7f);
        row(pred + 3 * NO, shifted ? cx1 : S / 4, shifted ? cx1 : S / 2, bw, bw, 0.9f, 1, 0.6f);
        odl_nms_params p = odl_nms_defaults();
        odl_detection d[8];
        int n = -1;
        TOK(odl_yolo_nms(pred, 4, NC, &p, d, 8, &n));
        int c0 = 0, c1 = 0;
        for (int k = 0; k < n; k++) c0 += d[k].class_id == 0, c1 += d[k].class_id == 1;
        TCHECK(n == 4, "size %d: %d boxes kept (class 0: %d, class 1: %d)", sizes[s], n, c0, c1);
        TCHECK(c1 >= 1 && c0 >= 1, "size %d: both classes survive", sizes[s]);
        p.agnostic = 1;
        TOK(odl_yolo_nms(pred, 2, NC, &p, d, 8, &n));
        TCHECK(n == 1 && d[0].class_id == 0, "size %d: agnostic NMS merges the two classes (%d kept)", sizes[s], n);
    }
}

/* Labels stay inside the image at every size, keep the asked scale where it fits, and are drawn. */
static void labels_inside(void) {
    static const int sizes[][2] = {{8, 8}, {17, 40}, {32, 32}, {64, 20}, {320, 240}, {640, 480}, {1920, 1080}, {4000, 3000}};
    static const int corners[][2] = {{0, 0}, {-50, -50}, {5, 3}, {300, 2}, {1e6, 1e6}, {-10, 2000}, {630, 470}};
    int bad = 0, checked = 0;
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
        for (size_t c = 0; c < sizeof corners / sizeof *corners; c++)
            for (int scale = 1; scale <= 12; scale += 5) {
                const int w = sizes[s][0], h = sizes[s][1];
                odl_label_box b;
                odl_image_label_box(w, h, corners[c][0], corners[c][1], 11, scale, &b); /* "person 0.87" */
                checked++;
                const int tiny = w < 9 || h < 11; /* one character at scale 1 is 9 x 11 */
                int inside = tiny ? b.chars == 0
                                  : b.x >= 0 && b.y >= 0 && b.x + b.w <= w && b.y + b.h <= h && b.chars >= 1 &&
                                        b.scale >= 1 && b.scale <= scale;
                /* big enough images keep the scale and the whole text */
                int keeps = w < 11 * 6 * scale + 3 * scale || h < 11 * scale || (b.scale == scale && b.chars == 11);
                if (!inside || !keeps) {
                    bad++;
                    fprintf(stderr, "image %dx%d corner (%d,%d) scale %d: box %d,%d %dx%d scale %d chars %d\n", w, h,
                            corners[c][0], corners[c][1], scale, b.x, b.y, b.w, b.h, b.scale, b.chars);
                }
            }
    TCHECK(bad == 0, "%d of %d label boxes outside the image or needlessly shrunk", bad, checked);
    /* Drawn: a box touching the top-left corner gets its label inside, in the box's colour, with text. */
    odl_image im;
    TOK(odl_image_alloc(&im, 200, 100, 0, 0, 0));
    const uint8_t red[3] = {255, 0, 0};
    odl_image_draw_box(&im, 0, 0, 120, 80, red, 2, "person 0.87", 2);
    odl_label_box b;
    odl_image_label_box(200, 100, 0, 0, 11, 2, &b);
    int fill = 0, text = 0;
    for (int y = b.y; y < b.y + b.h; y++)
        for (int x = b.x; x < b.x + b.w; x++) {
            const uint8_t *p = im.data + 3 * ((size_t)y * 200 + x);
            fill += p[0] == 255 && p[1] == 0;
            text += p[0] == 255 && p[1] == 255 && p[2] == 255; /* white text on red */
        }
    TCHECK(b.y == 0 && b.x == 0 && b.scale == 2 && b.chars == 11, "label inside the box at the top");
    TCHECK(fill > 0 && text > 11 * 8, "label drawn: %d fill, %d text pixels", fill, text);
    odl_image_free(&im);
}

int main(void) {
    char dir[256];
    if (odl_test_mkdtemp(dir, sizeof dir, "ux_inputs")) return 1;
    png_trns(dir);
    idx_claims(dir);
    nms_nonfinite();
    nms_classes_apart();
    labels_inside();
    odl_test_rmtree(dir);
    return odl_test_finish("test_ux_inputs");
}
