/* Non-maximum suppression on the CPU, as YOLOv5 (utils/general.py non_max_suppression, release v7.0)
 * with torchvision.ops.nms inside.
 *
 * Boxes are [x1, y1, x2, y2] float32 in pixels. IoU = inter / (area_a + area_b - inter) with
 * area = (x2 - x1) * (y2 - y1) and no +1 (torchvision); a box is suppressed when its IoU with a kept,
 * higher-scored box is strictly greater than the threshold.
 */
#ifndef ODL_NMS_H
#define ODL_NMS_H

#include "odl/api.h"
#include <stdint.h>

#include "odl/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct odl_detection {
    float x1, y1, x2, y2; /* pixels of the image the predictions refer to */
    float conf;           /* objectness * class score */
    int class_id;
} odl_detection;

typedef struct odl_nms_params {
    float conf_thres;  /* 0.25 for detect.py, 0.001 for val.py */
    float iou_thres;   /* 0.45 for detect.py, 0.6 for val.py */
    int max_det;       /* 1000 for detect.py, 300 for val.py */
    int multi_label;   /* 0: best class per box; 1: every class with score > conf_thres (val.py) */
    int agnostic;      /* 1: NMS across classes */
    int max_nms;       /* boxes kept before NMS, by confidence (YOLOv5: 30000) */
    float max_wh;      /* class offset of the batched-NMS trick (YOLOv5: 7680) */
    const int *classes; /* NULL: every class; else keep only candidates of these n_classes ids (--classes) */
    int n_classes;
} odl_nms_params;

/* detect.py's defaults: conf 0.25, IoU 0.45, max_det 1000, single label, class-aware, 30000, 7680, every
 * class. */
ODL_API odl_nms_params odl_nms_defaults(void);

/* torchvision.ops.nms: indices of the kept boxes in decreasing score order.
 * boxes [n, 4], scores [n]; keep has room for n; *n_keep receives the count.
 * Ties in score keep the lower index first (a stable sort). Errors: ODL_E_INVAL, ODL_E_NOMEM. */
ODL_API odl_status odl_nms(const float *boxes, const float *scores, int n, float iou_thres, int *keep, int *n_keep);

/* YOLOv5's non_max_suppression for one image: pred [n_anchors, 5 + nc] rows of
 * (cx, cy, w, h, objectness, nc class scores), sigmoid applied (the Detect layer's inference output).
 *   candidates: objectness > conf_thres; conf = objectness * class score;
 *   single label: best class j, kept if conf > conf_thres; multi-label: every (box, j) with conf > conf_thres;
 *   with p->classes, only candidates of those classes (YOLOv5 filters after picking the class, before NMS);
 *   at most max_nms by decreasing conf; class-aware NMS by offsetting boxes by class_id * max_wh, the
 *   offset widened to 1.25 x the span of the candidates' coordinates where that exceeds max_wh (YOLOv5's
 *   fixed 7680 lets classes touch at --img-size 8192); at most max_det results, decreasing conf.
 *   Rows whose box, objectness or score is NaN or infinite are never candidates (count them with
 *   odl_yolo_nonfinite_rows to report them).
 * out has room for `cap` detections (cap >= p->max_det suffices); *n_out receives the count.
 * Errors: ODL_E_INVAL (bad arguments), ODL_E_NOMEM. */
ODL_API odl_status odl_yolo_nms(const float *pred, int64_t n_anchors, int nc, const odl_nms_params *p, odl_detection *out,
                        int cap, int *n_out);

/* Rows of pred [n_anchors, 5 + nc] holding a NaN or an infinity (a broken model or input). */
ODL_API int64_t odl_yolo_nonfinite_rows(const float *pred, int64_t n_anchors, int nc);

/* IoU of two xyxy boxes (0 when the union is empty). */
ODL_API float odl_box_iou(const float a[4], const float b[4]);

#ifdef __cplusplus
}
#endif
#endif
