/* Images for detection: JPEG/PNG decoding, YOLOv5's letterbox, box drawing and JPEG writing.
 *
 * An odl_image is 8-bit RGB, interleaved, row-major (HWC): pixel (x, y) channel c is
 * data[(y * width + x) * 3 + c]. Decoding follows OpenCV's cv2.imread(path, IMREAD_COLOR), which is
 * what YOLOv5's detect.py uses: JPEG through libjpeg(-turbo) with its default (islow) DCT and fancy
 * upsampling, EXIF orientation applied; PNG through libpng with 16-bit samples stripped to 8, alpha
 * dropped, grey and palette images expanded to RGB. The channel order here is RGB (detect.py's
 * BGR->RGB flip is already done).
 */
#ifndef ODL_IMAGE_H
#define ODL_IMAGE_H

#include "odl/api.h"
#include <stddef.h>
#include <stdint.h>

#include "odl/api.h"
#include "odl/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct odl_image {
    int width, height; /* pixels */
    uint8_t *data;     /* width * height * 3 bytes, RGB, owned (free with odl_image_free) */
} odl_image;

/* Allocate a width x height image filled with one RGB colour. Errors: ODL_E_INVAL (size <= 0 or over
 * 65535), ODL_E_NOMEM. */
ODL_API odl_status odl_image_alloc(odl_image *img, int width, int height, uint8_t r, uint8_t g, uint8_t b);
ODL_API void odl_image_free(odl_image *img);

/* Decode a JPEG or PNG file (the format is told by its first bytes, not its name).
 * Errors naming the path: ODL_E_NOTFOUND (missing), ODL_E_IO (unreadable, e.g. a directory or no
 * permission), ODL_E_FORMAT (neither JPEG nor PNG, truncated or corrupt data, a JPEG that ends early),
 * ODL_E_UNSUPPORTED (this build lacks libjpeg or libpng). */
ODL_API odl_status odl_image_load(const char *path, odl_image *out);
/* Width and height of a JPEG or PNG file as odl_image_load would decode it (EXIF orientations 5..8
 * swap them), from the headers only, without decoding pixels. YOLOv5's dataloader reads the same
 * (PIL's size with exif_size) to plan its rectangular batches. Errors: as odl_image_load. */
ODL_API odl_status odl_image_probe(const char *path, int *width, int *height);
/* Same from memory; `name` is used in messages. */
ODL_API odl_status odl_image_decode(const void *buf, size_t nbytes, const char *name, odl_image *out);

/* A whole file into *out (malloc'd, free it; *nbytes its size), growing past what stat said (pipes).
 * Errors naming the path: ODL_E_NOTFOUND, ODL_E_IO (a directory, no permission, a read error), ODL_E_NOMEM. */
ODL_API odl_status odl_file_read(const char *path, uint8_t **out, size_t *nbytes);

/* What an image's headers say, without decoding pixels (the JPEG header through libjpeg, the EXIF
 * orientation of its APP1 segment; a PNG's IHDR). */
typedef enum odl_image_format { ODL_IMAGE_JPEG = 1, ODL_IMAGE_PNG = 2 } odl_image_format;
typedef struct odl_image_info {
    int format;                 /* odl_image_format */
    int width, height;          /* as stored */
    int orientation;            /* EXIF orientation 1..8 (1: none, and always for PNG) */
    int oriented_w, oriented_h; /* as odl_image_load returns it (5..8 swap width and height) */
    int components;             /* JPEG: 1 grey, 3 YCbCr or RGB, 4 CMYK or YCCK; PNG: 3 */
    int cmyk;                   /* JPEG in CMYK or YCCK */
    int progressive;            /* JPEG progressive, arithmetic-coded or not 8-bit */
    int complete;               /* JPEG: an EOI marker follows the scans (a file cut short has none); PNG: 1 */
} odl_image_info;
/* Errors as odl_image_decode's, naming `name`: ODL_E_FORMAT for a header libjpeg rejects, an unusable size
 * or neither JPEG nor PNG, ODL_E_UNSUPPORTED without libjpeg. */
ODL_API odl_status odl_image_info_of(const void *buf, size_t nbytes, const char *name, odl_image_info *out);

/* Apply EXIF orientation `orientation` (the tag's 1..8; 1 and other values: nothing) to *img, as
 * odl_image_load does after decoding: 2 mirror, 3 rotate 180, 4 flip, 5 transpose, 6 rotate 90 clockwise,
 * 7 transverse, 8 rotate 270 clockwise; 5..8 swap width and height. The pixels move to a new buffer.
 * Errors: ODL_E_INVAL (NULL image), ODL_E_NOMEM. */
ODL_API odl_status odl_image_apply_orientation(odl_image *img, int orientation);

/* YOLOv5's letterbox (utils/augmentations.py, letterbox(im, new_shape, color=(114,114,114), auto,
 * scaleFill=False, scaleup=True, stride)) for a square target new_size:
 *   r = min(new_size / h, new_size / w); unpad = (round(w * r), round(h * r)) (Python round: ties to
 *   even); dw = new_size - unpad_w, dh = new_size - unpad_h; with auto_pad, dw %= stride, dh %= stride;
 *   dw /= 2, dh /= 2; left = round(dw - 0.1), right = round(dw + 0.1), top/bottom likewise.
 * The output is (unpad_w + left + right) x (unpad_h + top + bottom). */
typedef struct odl_letterbox {
    int src_w, src_h;    /* original image */
    double ratio;        /* r */
    int unpad_w, unpad_h; /* resized image inside the box */
    double dw, dh;       /* half paddings (YOLOv5's returned (dw, dh)) */
    int left, right, top, bottom;
    int out_w, out_h;    /* letterboxed size */
} odl_letterbox;

/* Geometry only. Errors: ODL_E_INVAL for a non-positive size or stride. */
ODL_API odl_status odl_letterbox_geometry(int src_w, int src_h, int new_size, int auto_pad, int stride, odl_letterbox *g);

/* The same for an out_w x out_h target (val.py's rectangular batch shapes): r = min(out_h / h, out_w / w),
 * and with scaleup = 0 at most 1 (letterbox(..., scaleup=False) as val.py's dataloader calls it). */
ODL_API odl_status odl_letterbox_geometry_hw(int src_w, int src_h, int out_w, int out_h, int auto_pad, int stride, int scaleup,
                                     odl_letterbox *g);

/* Letterbox src into *dst (allocated here): resize with odl_image_resize_linear when the size changes
 * (cv2 resizes only then), then pad with `pad` (114 in YOLOv5) around it. */
ODL_API odl_status odl_image_letterbox(const odl_image *src, int new_size, int auto_pad, int stride, uint8_t pad,
                               odl_image *dst, odl_letterbox *g);

/* Letterbox src into *dst (allocated here) along a geometry g made for src's size. */
ODL_API odl_status odl_image_letterbox_apply(const odl_image *src, const odl_letterbox *g, uint8_t pad, odl_image *dst);

/* Bilinear resize of interleaved 8-bit images with `channels` channels, as cv2.resize(...,
 * INTER_LINEAR): source coordinate of output pixel d is (d + 0.5) * (src/dst) - 0.5 (pixel centres
 * aligned, clamped to the border), weights quantised to 11 bits, the horizontal pass in integers and
 * the vertical pass rounded as OpenCV's SIMD path ((((a>>4)*b0)>>16) + (((c>>4)*b1)>>16) + 2) >> 2. */
ODL_API odl_status odl_image_resize_linear(const uint8_t *src, int src_w, int src_h, int channels, uint8_t *dst, int dst_w,
                                   int dst_h);

/* Write an image as CHW float32 into out[3 * H * W] (one plane per channel R, G, B), value / 255
 * (YOLOv5's `im /= 255`). */
ODL_API void odl_image_to_chw(const odl_image *img, float *out);

/* Map a box [x1, y1, x2, y2] from letterboxed pixels back to the original image, as YOLOv5's
 * scale_boxes(img1_shape, boxes, img0_shape) + clip_boxes: gain = min(out_h / src_h, out_w / src_w),
 * pad = ((out_w - src_w * gain) / 2, (out_h - src_h * gain) / 2), x = (x - pad_x) / gain, clipped to
 * [0, src_w] (y to [0, src_h]). */
ODL_API void odl_letterbox_unmap(const odl_letterbox *g, float xyxy[4]);

/* Where a label of `len` characters at `text_scale` goes for a box whose top-left corner is (x1, y1):
 * above the corner, or inside the box at its top when there is no room above, always wholly inside the
 * image: the scale shrinks (down to 1) until the label fits, then the text is cut to `chars`
 * characters (0 only in an image too small for one character at scale 1, 9 x 11 px: no label).
 * Pixels; the label box is [x, x + w) x [y, y + h). */
typedef struct odl_label_box {
    int x, y, w, h, scale, chars;
} odl_label_box;
ODL_API void odl_image_label_box(int img_w, int img_h, int x1, int y1, int len, int text_scale, odl_label_box *out);

/* Draw a rectangle outline of `thickness` pixels (clipped to the image) and, when label is not NULL,
 * the label in a filled box of the same colour placed by odl_image_label_box. Text uses a built-in 5x7
 * font, scaled by `text_scale` (1, 2, ...). */
ODL_API void odl_image_draw_box(odl_image *img, float x1, float y1, float x2, float y2, const uint8_t rgb[3], int thickness,
                        const char *label, int text_scale);
/* A distinct colour for a class id (fixed palette). */
ODL_API void odl_class_color(int class_id, uint8_t rgb[3]);

/* Write a baseline JPEG (quality 1..100). Errors: ODL_E_IO naming the path, ODL_E_UNSUPPORTED without
 * libjpeg. */
ODL_API odl_status odl_image_save_jpeg(const odl_image *img, const char *path, int quality);

#ifdef __cplusplus
}
#endif
#endif
