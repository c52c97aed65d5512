/* Detection metrics (nn/det_metrics.c) on cases computed by hand from val.py's and utils/metrics.py's
 * rules: the IoU thresholds, process_batch's greedy de-duplication (a label keeps the most confident
 * detection that chose it, not the best-overlapping one), numpy.interp at repeated abscissas, the
 * 101-point AP of a three-prediction curve, classes with labels and no predictions counted as 0,
 * predictions of classes without labels ignored, P and R at the maximum of the mean F1. */
#include <stdlib.h>
#include <string.h>

#include "odl/det_metrics.h"
#include "test_util.h"

static odl_detection D(float x1, float y1, float x2, float y2, float conf, int cls) {
    odl_detection d = {x1, y1, x2, y2, conf, cls};
    return d;
}

static void test_thresholds(void) {
    float v[ODL_DET_NIOU];
    odl_det_iou_thresholds(v);
    TCHECK(v[0] == 0.5f && v[9] == 0.95f, "ends %g %g", v[0], v[9]);
    for (int i = 0; i < ODL_DET_NIOU; i++) TCHECK(fabsf(v[i] - (0.5f + 0.05f * i)) < 1e-6f, "iouv[%d] = %.9g", i, v[i]);
}

static void test_match(void) {
    uint8_t c[4 * ODL_DET_NIOU];
    /* val.py quirk: both detections choose the one label; it keeps the first (most confident) one at
     * the thresholds where that one qualifies (IoU 100/120 = 0.833: 0.50..0.80), the exact box elsewhere. */
    float L[4] = {0, 0, 10, 10};
    int lc[1] = {0};
    odl_detection d[2] = {D(0, 0, 10, 12, 0.9f, 0), D(0, 0, 10, 10, 0.8f, 0)};
    TOK(odl_det_match(d, 2, L, lc, 1, c));
    for (int t = 0; t < ODL_DET_NIOU; t++) {
        int want0 = t <= 6, want1 = t >= 7;
        TCHECK(c[t] == want0 && c[ODL_DET_NIOU + t] == want1, "t %d: %d %d", t, c[t], c[ODL_DET_NIOU + t]);
    }
    /* Two labels, two detections: each detection takes its best label; duplicates are false positives;
     * another class never matches. */
    float L2[8] = {0, 0, 10, 10, 0, 0, 10, 11};
    int lc2[2] = {0, 0};
    odl_detection d2[4] = {D(0, 0, 10, 10, 0.9f, 0), D(0, 0, 10, 10.5f, 0.8f, 0), D(0, 0, 10, 10, 0.7f, 0),
                           D(0, 0, 10, 10, 0.95f, 1)};
    TOK(odl_det_match(d2, 4, L2, lc2, 2, c));
    /* d0: IoU 1 with L0; d1: 0.952 (L0) vs 0.9545 (L1) -> L1; d2 also chooses L0, already taken by d0 */
    TCHECK(c[0] && c[9] && c[ODL_DET_NIOU + 0] && c[ODL_DET_NIOU + 9], "d0 and d1 true positives at every threshold");
    for (int t = 0; t < ODL_DET_NIOU; t++) TCHECK(!c[2 * ODL_DET_NIOU + t] && !c[3 * ODL_DET_NIOU + t], "d2, d3 at %d", t);
    /* IoU exactly 0.5 (100 / 200, eps below float32's resolution at 200): a TP at 0.50 only. */
    float L3[4] = {0, 0, 10, 20};
    odl_detection d3[1] = {D(0, 0, 10, 10, 0.5f, 0)};
    TOK(odl_det_match(d3, 1, L3, lc, 1, c));
    TCHECK(c[0] == 1 && c[1] == 0, "IoU 0.5: %d %d", c[0], c[1]);
    TOK(odl_det_match(d3, 1, L3, lc, 0, c));
    TCHECK(c[0] == 0, "no labels: no TP");
    TFAIL(odl_det_match(d3, -1, L3, lc, 1, c), ODL_E_INVAL);
}

static void test_interp(void) {
    const double xp[5] = {0, 0.5, 0.5, 1, 1}, fp[5] = {1, 1, 2.0 / 3, 2.0 / 3, 0};
    TCHECK(odl_np_interp(-0.1, xp, fp, 5, -7, 9) == -7, "left");
    TCHECK(odl_np_interp(1.1, xp, fp, 5, -7, 9) == 9, "right");
    TCHECK(odl_np_interp(0.25, xp, fp, 5, -7, 9) == 1, "inside");
    TCHECK(odl_np_interp(0.5, xp, fp, 5, -7, 9) == 2.0 / 3, "repeated abscissa: the last one's value");
    TCHECK(odl_np_interp(1.0, xp, fp, 5, -7, 9) == 0, "at the end: fp[n-1]");
    TCHECK(fabs(odl_np_interp(0.75, xp, fp, 5, -7, 9) - 2.0 / 3) < 1e-15, "flat part");
    const double xq[3] = {0, 1, 2}, fq[3] = {0, 10, 30};
    TCHECK(fabs(odl_np_interp(1.5, xq, fq, 3, 0, 0) - 20) < 1e-12, "linear");
}

static void test_ap(void) {
    /* Class 0: 2 labels; predictions 0.9 TP, 0.8 FP, 0.7 TP at every threshold. recall .5 .5 1, precision
     * 1 .5 .667; envelope over recall [0 .5 .5 1 1] is [1 1 .667 .667 0]; the 101 samples are 1 for
     * x < .5, 2/3 for .5 <= x < 1 and 0 at x = 1, so
     * AP = .49 + .01 (1 + 2/3) / 2 + .49 (2/3) + .01 (2/3) / 2 = 0.828333... */
    const double ap_ref = 0.49 + 0.01 * (1 + 2.0 / 3) / 2 + 0.49 * (2.0 / 3) + 0.01 * (2.0 / 3) / 2;
    uint8_t tp[5 * ODL_DET_NIOU];
    memset(tp, 0, sizeof tp);
    for (int t = 0; t < ODL_DET_NIOU; t++) {
        tp[0 * ODL_DET_NIOU + t] = 1;
        tp[2 * ODL_DET_NIOU + t] = 1;
    }
    /* given out of order: the metric sorts by confidence; prediction 3 is of class 2, which has no label */
    float conf[4] = {0.7f, 0.9f, 0.8f, 0.95f};
    uint8_t tps[4 * ODL_DET_NIOU];
    memcpy(tps, tp + 2 * ODL_DET_NIOU, ODL_DET_NIOU);
    memcpy(tps + ODL_DET_NIOU, tp, ODL_DET_NIOU);
    memset(tps + 2 * ODL_DET_NIOU, 0, ODL_DET_NIOU);
    memset(tps + 3 * ODL_DET_NIOU, 0, ODL_DET_NIOU);
    int pcls[4] = {0, 0, 0, 2}, tcls[2] = {0, 0};
    odl_det_metrics m;
    TOK(odl_det_ap_per_class(tps, conf, pcls, 4, tcls, 2, 3, &m));
    TCHECK(fabs(m.per_class[0].ap50 - ap_ref) < 1e-12 && fabs(m.per_class[0].ap50_95 - ap_ref) < 1e-12, "AP %.15g, want %.15g",
           m.per_class[0].ap50, ap_ref);
    TCHECK(m.n_classes_with_labels == 1 && fabs(m.map50 - ap_ref) < 1e-12, "class 2 (no labels) ignored: %g", m.map50);
    /* F1 is largest (0.8) for confidences below 0.7, where P = 2/3 and R = 1. */
    TCHECK(fabs(m.mp - 2.0 / 3) < 1e-9 && fabs(m.mr - 1) < 1e-9, "P %.12g R %.12g", m.mp, m.mr);
    odl_det_metrics_free(&m);

    /* A class with labels and no predictions counts as 0 in the means. */
    int tcls2[3] = {0, 0, 1};
    TOK(odl_det_ap_per_class(tps, conf, pcls, 4, tcls2, 3, 3, &m));
    TCHECK(m.n_classes_with_labels == 2 && m.per_class[1].ap50 == 0 && fabs(m.map50 - ap_ref / 2) < 1e-12, "map50 %g",
           m.map50);
    TCHECK(fabs(m.mr - 0.5) < 1e-9, "mean recall over both classes %g", m.mr);
    odl_det_metrics_free(&m);

    /* Only the IoU 0.5 flag set for the second TP: AP50-95 = (AP50 + 9 x AP of one TP of two) / 10. */
    for (int t = 1; t < ODL_DET_NIOU; t++) tps[t] = 0; /* prediction 0 (conf 0.7) TP only at 0.5 */
    TOK(odl_det_ap_per_class(tps, conf, pcls, 4, tcls, 2, 3, &m));
    /* one TP at the top: recall .5 .5 .5, precision 1 .5 .333; over recall [0 .5 .5 .5 1] the envelope
     * is [1 1 .5 .333 0]; np.interp gives 1 below .5, the last repeat's 1/3 at .5, then the line from
     * (.5, 1/3) to (1, 0): AP = .49 + .01 (1 + 1/3) / 2 + .5 (1/3) / 2 = 0.58 */
    double ap1 = 0.49 + 0.01 * (1 + 1.0 / 3) / 2 + 0.5 * (1.0 / 3) / 2;
    TCHECK(fabs(m.per_class[0].ap50_95 - (ap_ref + 9 * ap1) / 10) < 1e-12, "AP50-95 %.15g want %.15g", m.per_class[0].ap50_95,
           (ap_ref + 9 * ap1) / 10);
    odl_det_metrics_free(&m);

    /* No true positive anywhere: val.py leaves every metric at 0. */
    memset(tps, 0, sizeof tps);
    TOK(odl_det_ap_per_class(tps, conf, pcls, 4, tcls, 2, 3, &m));
    TCHECK(m.mp == 0 && m.mr == 0 && m.map50 == 0 && m.map50_95 == 0 && m.per_class[0].n_labels == 2, "all zero");
    odl_det_metrics_free(&m);
    int bad[1] = {3};
    TFAIL(odl_det_ap_per_class(tps, conf, pcls, 4, bad, 1, 3, &m), ODL_E_INVAL);
}

int main(void) {
    test_thresholds();
    test_match();
    test_interp();
    test_ap();
    return odl_test_finish("eval_metrics");
}
