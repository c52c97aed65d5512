/* Detection metrics, YOLOv5 v7.0 val.py process_batch and utils/metrics.py ap_per_class / compute_ap /
 * smooth. See include/odl/det_metrics.h for each rule and its source. */
#include "odl/det_metrics.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void odl_det_iou_thresholds(float iouv[ODL_DET_NIOU]) {
    /* torch.linspace (aten RangeFactories, float): step in float32, the first half counted from the
     * start, the second half back from the end. */
    const float start = 0.5f, end = 0.95f, step = (end - start) / (float)(ODL_DET_NIOU - 1);
    const int half = ODL_DET_NIOU / 2;
    for (int i = 0; i < ODL_DET_NIOU; i++)
        iouv[i] = i < half ? start + step * (float)i : end - step * (float)(ODL_DET_NIOU - i - 1);
}

/* utils/metrics.py box_iou (eps 1e-7), float32. */
static float iou_f32(const float *a, const float *b) {
    float w = fminf(a[2], b[2]) - fmaxf(a[0], b[0]);
    float h = fminf(a[3], b[3]) - fmaxf(a[1], b[1]);
    float inter = fmaxf(w, 0.f) * fmaxf(h, 0.f);
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter + 1e-7f);
}

odl_status odl_det_match(const odl_detection *det, int n_det, const float *label_xyxy, const int *label_cls,
                         int n_labels, uint8_t *correct) {
    if (n_det < 0 || n_labels < 0 || (n_det > 0 && (!det || !correct)) || (n_labels > 0 && (!label_xyxy || !label_cls)))
        return ODL_ERR(ODL_E_INVAL, "odl_det_match: bad arguments (%d detections, %d labels)", n_det, n_labels);
    if (n_det == 0) return ODL_OK;
    memset(correct, 0, (size_t)n_det * ODL_DET_NIOU);
    if (n_labels == 0) return ODL_OK;
    float *iou = malloc(sizeof(float) * (size_t)n_det * n_labels);
    int *best = malloc(sizeof(int) * (size_t)n_det);
    int *taken = malloc(sizeof(int) * (size_t)n_labels);
    if (!iou || !best || !taken) {
        free(iou);
        free(best);
        free(taken);
        return ODL_ERR(ODL_E_NOMEM, "odl_det_match: %d x %d IoU matrix", n_labels, n_det);
    }
    for (int d = 0; d < n_det; d++) {
        const float db[4] = {det[d].x1, det[d].y1, det[d].x2, det[d].y2};
        for (int l = 0; l < n_labels; l++) iou[(size_t)d * n_labels + l] = iou_f32(label_xyxy + 4 * l, db);
    }
    float iouv[ODL_DET_NIOU];
    odl_det_iou_thresholds(iouv);
    for (int t = 0; t < ODL_DET_NIOU; t++) {
        /* Each detection's best candidate label (highest IoU; ties the higher label index). */
        for (int d = 0; d < n_det; d++) {
            best[d] = -1;
            float bi = -1.f;
            for (int l = 0; l < n_labels; l++) {
                float v = iou[(size_t)d * n_labels + l];
                if (v >= iouv[t] && label_cls[l] == det[d].class_id && v >= bi) {
                    bi = v;
                    best[d] = l;
                }
            }
        }
        /* Each label keeps the lowest detection index (highest confidence) among those that chose it. */
        for (int l = 0; l < n_labels; l++) taken[l] = 0;
        for (int d = 0; d < n_det; d++)
            if (best[d] >= 0 && !taken[best[d]]) {
                taken[best[d]] = 1;
                correct[(size_t)d * ODL_DET_NIOU + t] = 1;
            }
    }
    free(iou);
    free(best);
    free(taken);
    return ODL_OK;
}

double odl_np_interp(double x, const double *xp, const double *fp, int64_t n, double left, double right) {
    if (x < xp[0]) return left;
    if (x > xp[n - 1]) return right;
    /* numpy's binary_search_with_guess: the last j with xp[j] <= x. */
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + ((hi - lo) >> 1);
        if (x >= xp[mid]) lo = mid + 1;
        else hi = mid;
    }
    int64_t j = lo - 1;
    if (j == n - 1) return fp[j];
    if (xp[j] == x) return fp[j];
    double slope = (fp[j + 1] - fp[j]) / (xp[j + 1] - xp[j]);
    double r = slope * (x - xp[j]) + fp[j];
    if (isnan(r)) { /* numpy: if NaN one way, try the other */
        r = slope * (x - xp[j + 1]) + fp[j + 1];
        if (isnan(r) && fp[j] == fp[j + 1]) r = fp[j];
    }
    return r;
}

/* compute_ap: 101-point interpolated area under the precision envelope. */
static double compute_ap(const double *recall, const double *precision, int64_t n, double *mrec, double *mpre) {
    mrec[0] = 0.0;
    mpre[0] = 1.0;
    for (int64_t i = 0; i < n; i++) {
        mrec[i + 1] = recall[i];
        mpre[i + 1] = precision[i];
    }
    mrec[n + 1] = 1.0;
    mpre[n + 1] = 0.0;
    for (int64_t i = n; i >= 0; i--) mpre[i] = fmax(mpre[i], mpre[i + 1]); /* np.maximum.accumulate of the flip */
    double ap = 0, prev_x = 0, prev_y = 0;
    for (int k = 0; k <= 100; k++) {
        double x = k == 100 ? 1.0 : k * (1.0 / 100); /* np.linspace(0, 1, 101) */
        double y = odl_np_interp(x, mrec, mpre, n + 2, mpre[0], mpre[n + 1]);
        if (k) ap += (x - prev_x) * (y + prev_y) / 2.0; /* np.trapz */
        prev_x = x;
        prev_y = y;
    }
    return ap;
}

typedef struct conf_idx {
    float c;
    int64_t i;
} conf_idx;
static int cmp_conf_desc(const void *a, const void *b) {
    const conf_idx *x = a, *y = b;
    if (x->c != y->c) return x->c > y->c ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i; /* stable */
}

void odl_det_metrics_free(odl_det_metrics *m) {
    if (!m) return;
    free(m->per_class);
    memset(m, 0, sizeof *m);
}

#define NPX 1000

/* Phase 1: validate the classes, count labels and predictions per class. *any_tp: some prediction is a
 * true positive at some IoU threshold. */
static odl_status count_classes(const uint8_t *tp, const int *pred_cls, int64_t n_pred, const int *target_cls,
                                int64_t n_target, int nc, odl_det_metrics *out, int *any_tp) {
    *any_tp = 0;
    for (int64_t i = 0; i < n_target; i++) {
        if (target_cls[i] < 0 || target_cls[i] >= nc)
            return ODL_ERR(ODL_E_INVAL, "odl_det_ap_per_class: label class %d outside 0..%d", target_cls[i], nc - 1);
        out->per_class[target_cls[i]].n_labels++;
    }
    for (int64_t i = 0; i < n_pred; i++) {
        if (pred_cls[i] < 0 || pred_cls[i] >= nc)
            return ODL_ERR(ODL_E_INVAL, "odl_det_ap_per_class: predicted class %d outside 0..%d", pred_cls[i], nc - 1);
        out->per_class[pred_cls[i]].n_pred++;
        for (int t = 0; t < ODL_DET_NIOU; t++) *any_tp |= tp[i * ODL_DET_NIOU + t];
    }
    for (int c = 0; c < nc; c++) out->n_classes_with_labels += out->per_class[c].n_labels > 0;
    return ODL_OK;
}

/* The working arrays of one computation (n predictions, nu classes with labels). */
typedef struct ap_work {
    conf_idx *ord;        /* predictions by confidence, descending */
    int64_t *cls_start;   /* [nc + 1]: class c's predictions are by_cls[cls_start[c] .. cls_start[c + 1]) */
    int64_t *by_cls;      /* prediction indices, grouped by class, by confidence within a class */
    double *rec, *prec;   /* [ODL_DET_NIOU][n]: one class's cumulative recall and precision */
    double *xp, *mrec, *mpre;
    double *pc, *rc;      /* [nu][NPX]: precision and recall curves at NPX confidences */
    int *ucls;            /* [nu]: the classes with labels */
} ap_work;

static void ap_work_free(ap_work *w) {
    free(w->ord);
    free(w->cls_start);
    free(w->by_cls);
    free(w->rec);
    free(w->prec);
    free(w->xp);
    free(w->mrec);
    free(w->mpre);
    free(w->pc);
    free(w->rc);
    free(w->ucls);
}

static odl_status ap_work_alloc(ap_work *w, int64_t n_pred, int nc, int nu) {
    memset(w, 0, sizeof *w);
    size_t n = (size_t)(n_pred ? n_pred : 1), n2 = (size_t)(n_pred + 2);
    w->ord = malloc(sizeof *w->ord * n);
    w->cls_start = calloc((size_t)nc + 1, sizeof(int64_t));
    w->by_cls = malloc(sizeof(int64_t) * n);
    w->rec = malloc(sizeof(double) * n2 * ODL_DET_NIOU);
    w->prec = malloc(sizeof(double) * n2 * ODL_DET_NIOU);
    w->xp = malloc(sizeof(double) * n2);
    w->mrec = malloc(sizeof(double) * n2);
    w->mpre = malloc(sizeof(double) * n2);
    w->pc = calloc((size_t)nu * NPX, sizeof(double));
    w->rc = calloc((size_t)nu * NPX, sizeof(double));
    w->ucls = malloc(sizeof(int) * (size_t)nu);
    if (w->ord && w->cls_start && w->by_cls && w->rec && w->prec && w->xp && w->mrec && w->mpre && w->pc && w->rc && w->ucls)
        return ODL_OK;
    ap_work_free(w);
    return ODL_ERR(ODL_E_NOMEM, "odl_det_ap_per_class: %lld predictions", (long long)n_pred);
}

/* Phase 2: the predictions sorted by confidence, then grouped by class (a counting sort keeps the order). */
static odl_status sort_by_class(ap_work *w, const float *conf, const int *pred_cls, int64_t n_pred, int nc) {
    for (int64_t i = 0; i < n_pred; i++) {
        w->ord[i].c = conf[i];
        w->ord[i].i = i;
    }
    qsort(w->ord, (size_t)n_pred, sizeof *w->ord, cmp_conf_desc);
    for (int64_t k = 0; k < n_pred; k++) w->cls_start[pred_cls[w->ord[k].i] + 1]++;
    for (int c = 0; c < nc; c++) w->cls_start[c + 1] += w->cls_start[c];
    int64_t *fill = malloc(sizeof(int64_t) * (size_t)nc);
    if (!fill) return ODL_ERR(ODL_E_NOMEM, "class index");
    memcpy(fill, w->cls_start, sizeof(int64_t) * (size_t)nc);
    for (int64_t k = 0; k < n_pred; k++) w->by_cls[fill[pred_cls[w->ord[k].i]]++] = w->ord[k].i;
    free(fill);
    return ODL_OK;
}

/* Phase 3, one class with labels (row ci of the curves): cumulative recall and precision, their curves
 * at NPX confidences, AP at each IoU threshold. */
static void class_curves(ap_work *w, const uint8_t *tp, const float *conf, int c, int ci, odl_det_class_metrics *m) {
    w->ucls[ci] = c;
    const int64_t np_ = w->cls_start[c + 1] - w->cls_start[c];
    const int64_t *idx = w->by_cls + w->cls_start[c];
    if (np_ == 0) return; /* AP 0, P and R curves 0 */
    double *rec = w->rec, *prec = w->prec;
    int64_t tpc[ODL_DET_NIOU] = {0};
    for (int64_t k = 0; k < np_; k++) {
        int64_t i = idx[k];
        for (int t = 0; t < ODL_DET_NIOU; t++) {
            tpc[t] += tp[i * ODL_DET_NIOU + t];
            int64_t fpc = (k + 1) - tpc[t];
            rec[t * np_ + k] = (double)tpc[t] / ((double)m->n_labels + 1e-16);
            prec[t * np_ + k] = (double)tpc[t] / (double)(tpc[t] + fpc);
        }
        w->xp[k] = -(double)conf[i];
    }
    for (int k = 0; k < NPX; k++) {
        double x = -(k == NPX - 1 ? 1.0 : k * (1.0 / (NPX - 1)));
        w->rc[(size_t)ci * NPX + k] = odl_np_interp(x, w->xp, rec, np_, 0.0, rec[np_ - 1]);
        w->pc[(size_t)ci * NPX + k] = odl_np_interp(x, w->xp, prec, np_, 1.0, prec[np_ - 1]);
    }
    double sum = 0;
    for (int t = 0; t < ODL_DET_NIOU; t++) {
        double ap = compute_ap(rec + t * np_, prec + t * np_, np_, w->mrec, w->mpre);
        if (t == 0) m->ap50 = ap;
        sum += ap;
    }
    m->ap50_95 = sum / ODL_DET_NIOU;
}

/* Phase 4: the confidence of the best mean F1 over classes, smoothed (smooth(y, 0.1): a box filter of
 * nf = round(1000 * 0.2) // 2 + 1 = 101 taps over y padded with nf // 2 copies of its end values; its
 * first maximum), and P, R there with the means. */
static void best_f1(const ap_work *w, int nu, odl_det_metrics *out) {
    enum { NF = 101, HALF = NF / 2 };
    double f1m[NPX], yp[NPX + 2 * HALF];
    for (int k = 0; k < NPX; k++) {
        double s = 0;
        for (int u = 0; u < nu; u++) {
            double p = w->pc[(size_t)u * NPX + k], r = w->rc[(size_t)u * NPX + k];
            s += 2 * p * r / (p + r + 1e-16);
        }
        f1m[k] = s / nu;
    }
    for (int k = 0; k < HALF; k++) {
        yp[k] = f1m[0];
        yp[HALF + NPX + k] = f1m[NPX - 1];
    }
    memcpy(yp + HALF, f1m, sizeof f1m);
    int best = 0;
    double bv = -INFINITY;
    for (int k = 0; k < NPX; k++) {
        double s = 0;
        for (int q = 0; q < NF; q++) s += yp[k + q] * (1.0 / NF);
        if (s > bv) {
            bv = s;
            best = k;
        }
    }
    out->best_conf_index = best;
    double sp = 0, sr = 0, s50 = 0, sap = 0;
    for (int u = 0; u < nu; u++) {
        odl_det_class_metrics *m = &out->per_class[w->ucls[u]];
        m->p = w->pc[(size_t)u * NPX + best];
        m->r = w->rc[(size_t)u * NPX + best];
        sp += m->p;
        sr += m->r;
        s50 += m->ap50;
        sap += m->ap50_95;
    }
    out->mp = sp / nu;
    out->mr = sr / nu;
    out->map50 = s50 / nu;
    out->map50_95 = sap / nu;
}

odl_status odl_det_ap_per_class(const uint8_t *tp, const float *conf, const int *pred_cls, int64_t n_pred,
                                const int *target_cls, int64_t n_target, int nc, odl_det_metrics *out) {
    if (!out || nc <= 0 || n_pred < 0 || n_target < 0 || (n_pred > 0 && (!tp || !conf || !pred_cls)) ||
        (n_target > 0 && !target_cls))
        return ODL_ERR(ODL_E_INVAL, "odl_det_ap_per_class: bad arguments");
    memset(out, 0, sizeof *out);
    out->nc = nc;
    out->per_class = calloc((size_t)nc, sizeof *out->per_class);
    if (!out->per_class) return ODL_ERR(ODL_E_NOMEM, "metrics of %d classes", nc);
    int any_tp = 0;
    odl_status st = count_classes(tp, pred_cls, n_pred, target_cls, n_target, nc, out, &any_tp);
    const int nu = out->n_classes_with_labels;
    if (st != ODL_OK) {
        odl_det_metrics_free(out);
        return st;
    }
    if (!any_tp || nu == 0) return ODL_OK; /* val.py: metrics stay 0 unless stats[0].any() */
    ap_work w;
    ODL_CHECK_GOTO(ap_work_alloc(&w, n_pred, nc, nu), st, fail);
    st = sort_by_class(&w, conf, pred_cls, n_pred, nc);
    for (int c = 0, ci = 0; st == ODL_OK && c < nc; c++)
        if (out->per_class[c].n_labels) class_curves(&w, tp, conf, c, ci++, &out->per_class[c]);
    if (st == ODL_OK) best_f1(&w, nu, out);
    ap_work_free(&w);
    if (st == ODL_OK) return ODL_OK;
fail:
    odl_det_metrics_free(out);
    return st;
}
