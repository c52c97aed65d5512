/* Detection metrics as YOLOv5 v7.0's val.py: true positives at IoU 0.50:0.05:0.95 (process_batch),
 * average precision per class (utils/metrics.py ap_per_class, compute_ap) and the mean P, R, mAP50 and
 * mAP50-95 val.py prints. Plain CPU code, float64 (confidences and IoUs float32, as YOLOv5's tensors).
 * The NMS val.py runs before is odl_yolo_nms with multi_label = 1 (include/odl/nms.h).
 */
#ifndef ODL_DET_METRICS_H
#define ODL_DET_METRICS_H

#include <stdint.h>

#include "odl/nms.h"
#include "odl/api.h"
#include "odl/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* IoU thresholds: torch.linspace(0.5, 0.95, 10) in float32. */
#define ODL_DET_NIOU 10
ODL_API void odl_det_iou_thresholds(float iouv[ODL_DET_NIOU]);

/* val.py's process_batch for one image. det[n_det] are the image's detections after NMS in NMS order
 * (decreasing confidence), boxes xyxy in original-image pixels; labels are xyxy boxes [n_labels, 4] in
 * the same pixels with their classes. correct[n_det * ODL_DET_NIOU] receives 1 where detection d is a
 * true positive at threshold t:
 *   IoU (box_iou, float32, eps 1e-7) >= iouv[t] and the same class makes a candidate pair;
 *   each detection keeps its highest-IoU candidate label (ties: the higher label index, as numpy's
 *   reversed argsort for short arrays); then each label keeps the first, i.e. most confident,
 *   detection that chose it (val.py's np.unique(matches[:, 0]) on matches ordered by detection).
 * Errors: ODL_E_INVAL, ODL_E_NOMEM. */
ODL_API odl_status odl_det_match(const odl_detection *det, int n_det, const float *label_xyxy, const int *label_cls,
                         int n_labels, uint8_t *correct);

typedef struct odl_det_class_metrics {
    int64_t n_labels;   /* instances (val.py's nt[c]) */
    int64_t n_pred;     /* detections of this class */
    double p, r;        /* at the confidence of the maximum of the smoothed mean F1 */
    double ap50, ap50_95;
} odl_det_class_metrics;

typedef struct odl_det_metrics {
    int nc;                            /* classes of the model */
    odl_det_class_metrics *per_class;  /* [nc], malloc'd; classes without labels have n_labels 0 and are
                                          not in the means */
    int n_classes_with_labels;
    double mp, mr, map50, map50_95;    /* means over the classes with labels; 0 when no detection is a
                                          true positive (val.py: `if stats[0].any()`) */
    double best_conf_index;            /* the F1 argmax on val.py's px = linspace(0, 1, 1000) grid */
} odl_det_metrics;

/* ap_per_class(tp, conf, pred_cls, target_cls) over a whole dataset:
 *   predictions sorted by decreasing conf (a stable sort; numpy's argsort(-conf) is not stable, so
 *   equal confidences may be ordered differently there);
 *   per class c with labels: tpc, fpc cumulative sums; recall = tpc / (n_l + 1e-16),
 *   precision = tpc / (tpc + fpc); AP per threshold by compute_ap: precision envelope (running
 *   maximum from the right) of [1, precision, 0] over [0, recall, 1], sampled at 101 points
 *   linspace(0, 1, 101) with np.interp and integrated with the trapezoid rule (COCO's 101-point
 *   interpolation); a class with labels and no predictions has AP 0;
 *   P and R curves: np.interp(-px, -conf, precision or recall at IoU 0.5, left = 1 or 0) on
 *   px = linspace(0, 1, 1000); F1 = 2PR / (P + R + 1e-16); the index of the maximum of the mean F1
 *   over classes, smoothed by a 0.1-fraction box filter (utils/metrics.py smooth), picks P and R.
 * tp[n_pred * ODL_DET_NIOU] (from odl_det_match), conf[n_pred], pred_cls[n_pred], target_cls[n_target].
 * Classes must be in [0, nc). Errors: ODL_E_INVAL, ODL_E_NOMEM. Free with odl_det_metrics_free. */
ODL_API odl_status odl_det_ap_per_class(const uint8_t *tp, const float *conf, const int *pred_cls, int64_t n_pred,
                                const int *target_cls, int64_t n_target, int nc, odl_det_metrics *out);
ODL_API void odl_det_metrics_free(odl_det_metrics *m);

/* numpy.interp(x, xp, fp, left, right) for nondecreasing xp[n] (n >= 1): below xp[0] left, above
 * xp[n-1] right, at x == xp[j] for the last such j fp[j], otherwise linear between the neighbours. */
ODL_API double odl_np_interp(double x, const double *xp, const double *fp, int64_t n, double left, double right);

#ifdef __cplusplus
}
#endif
#endif
