/* Batched YOLOv5 detection, the one path of --task=eval (worker/eval.c) and --task=infer
 * (worker/infer.c): a batch of letterboxed images of one size through the network, then val.py's and
 * detect.py's non_max_suppression, image by image. Two ways in:
 *   - CHW floats on the host (letterboxed and normalised by the caller), NMS on the host
 *     (odl_yolo_nms), or on the backend when the detector has one;
 *   - decoded and resized uint8 images (pinned host memory) that the backend letterboxes
 *     (letterbox_u8_to_chw) straight into the network's input, NMS on the backend (yolo_nms); an image
 *     with more candidates than the backend's buffer falls back to odl_yolo_nms on its copied rows.
 * Buffers grow on demand and are kept across batches. */
#ifndef ODL_WORKER_DETECT_H
#define ODL_WORKER_DETECT_H

#include <stddef.h>
#include <stdint.h>

#include "odl/backend.h"
#include "odl/nms.h"
#include "odl/pipeline.h"
#include "odl/yolov5.h"

typedef struct odl_detector {
    odl_yolov5 *net;
    odl_device dev;
    const odl_backend *be; /* letterbox and NMS on this backend; NULL: NMS on the host */
    uint8_t *src;          /* device: the batch's uint8 images */
    size_t src_cap;
    int64_t *off, *h_off;  /* each image's offset in src */
    int32_t *geo, *h_geo, *cnt, *h_cnt;
    float *out, *h_out;    /* the backend NMS's kept boxes, 6 floats each, max_det per image */
    int cap_n, cap_det;
    float *h_pred;         /* the network's output on the host (host NMS, or the backend's fallback) */
    size_t h_pred_cap;
    int64_t rows;          /* output rows per image (anchors x cells) of the last batch */
} odl_detector;

/* One batch: n images of H x W (the letterboxed size). Exactly one of chw and u8. */
typedef struct odl_detect_batch {
    int n, H, W;
    const float *chw;           /* host [n, 3, H, W]: the network's input */
    const uint8_t *u8;          /* pinned host, image b at u8 + 3 H W b: RGB HWC of geo[b] (needs a backend) */
    const odl_prep_result *res; /* with u8: res[b].geo, each image's unpadded size and its place in the box */
} odl_detect_batch;

/* backend_post: letterbox and NMS on the network device's backend (always on CUDA; on the CPU only when
 * asked, which checks the CPU backend's entries against odl_yolo_nms). Errors: ODL_E_NODEV. */
odl_status odl_detector_init(odl_detector *d, odl_yolov5 *net, int backend_post);
/* Detect: image b's boxes (letterboxed pixels) at det[b * p->max_det ...], nd[b] of them. bad (NULL:
 * not asked; host NMS only, 0 on a backend): the rows of image b's output that hold NaN or Inf (broken
 * weights or input) -- such an image gets no boxes. *t_forward_ms (may be NULL): the time to the
 * network's output on the host (with the backend's NMS, to the kept boxes). Errors: the forward's,
 * ODL_E_NOMEM, ODL_E_INVAL (u8 without a backend). */
odl_status odl_detector_run(odl_detector *d, const odl_detect_batch *b, const odl_nms_params *p, odl_detection *det,
                            int *nd, int64_t *bad, double *t_forward_ms);
void odl_detector_free(odl_detector *d);

#endif
