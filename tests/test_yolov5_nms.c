/* NMS: torchvision.ops.nms semantics (suppression when IoU > threshold, strictly; decreasing score
 * order; ties keep index order) and YOLOv5's non_max_suppression (objectness filter, conf = obj * cls,
 * class-aware offsets, max_det, multi-label), on hand-made cases and on the official Detect output for
 * bus_640 against detect.py's boxes for that input (detect_square640.json, bus.jpg). */
#include "yolov5_test_util.h"

/* One prediction row: centre, size, objectness, class scores. */
static void row(float *r, int nc, float cx, float cy, float w, float h, float obj, int cls, float score) {
    memset(r, 0, sizeof(float) * (5 + nc));
    r[0] = cx;
    r[1] = cy;
    r[2] = w;
    r[3] = h;
    r[4] = obj;
    r[5 + cls] = score;
}

static void plain_nms(void) {
    /* b0 and b1 overlap with IoU 81/119 = 0.68; b2 apart; b3 touches b0 at IoU exactly 0.5 */
    float boxes[] = {0, 0, 10, 10, 1, 1, 11, 11, 50, 50, 60, 60, 0, 0, 10, 5};
    float scores[] = {0.9f, 0.95f, 0.5f, 0.3f};
    int keep[4], nk = 0;
    TOK(odl_nms(boxes, scores, 4, 0.5f, keep, &nk));
    /* b1 first; b0 suppressed (0.68 > 0.5); b3 vs b1: inter 9*4=36, union 100+50-36=114 -> 0.316 kept; b2 kept */
    TCHECK(nk == 3 && keep[0] == 1 && keep[1] == 2 && keep[2] == 3, "nk %d keep %d %d %d", nk, keep[0], keep[1], keep[2]);
    /* IoU exactly at the threshold is kept (strict >): b0 vs b3: 50 / 100 = 0.5 */
    float b2[] = {0, 0, 10, 10, 0, 0, 10, 5};
    float s2[] = {0.9f, 0.8f};
    TOK(odl_nms(b2, s2, 2, 0.5f, keep, &nk));
    TCHECK(nk == 2, "IoU == threshold must be kept, kept %d", nk);
    TOK(odl_nms(b2, s2, 2, 0.49f, keep, &nk));
    TCHECK(nk == 1 && keep[0] == 0, "IoU > threshold suppressed");
    /* equal scores keep index order */
    float s3[] = {0.7f, 0.7f};
    TOK(odl_nms(b2, s3, 2, 0.9f, keep, &nk));
    TCHECK(nk == 2 && keep[0] == 0 && keep[1] == 1, "tie order");
    TOK(odl_nms(b2, s3, 0, 0.5f, keep, &nk));
    TCHECK(nk == 0, "empty");
    TFAIL(odl_nms(NULL, s3, 2, 0.5f, keep, &nk), ODL_E_INVAL);
    float a[4] = {0, 0, 2, 2}, b[4] = {1, 1, 3, 3};
    TCHECK(fabsf(odl_box_iou(a, b) - 1.0f / 7.0f) < 1e-6f, "iou");
}

static void yolo_nms(void) {
    const int nc = 3, no = 8;
    float p[6 * 8];
    row(p + 0 * no, nc, 50, 50, 20, 20, 0.9f, 0, 0.9f);  /* conf 0.81 class 0 */
    row(p + 1 * no, nc, 51, 51, 20, 20, 0.9f, 1, 0.8f);  /* same place, class 1: kept (class-aware) */
    row(p + 2 * no, nc, 52, 50, 20, 20, 0.8f, 0, 0.9f);  /* overlaps row 0, class 0: suppressed */
    row(p + 3 * no, nc, 200, 200, 10, 10, 0.2f, 2, 1.0f); /* objectness 0.2 <= 0.25: dropped */
    row(p + 4 * no, nc, 300, 300, 10, 10, 0.5f, 2, 0.5f); /* conf 0.25, not > 0.25: dropped */
    row(p + 5 * no, nc, 400, 400, 10, 10, 0.6f, 2, 0.6f); /* conf 0.36 kept */
    p[5 * no + 5 + 1] = 0.55f;                           /* second class for multi-label: 0.33 */
    odl_nms_params q = odl_nms_defaults();
    odl_detection d[16];
    int n = 0;
    TOK(odl_yolo_nms(p, 6, nc, &q, d, 16, &n));
    TCHECK(n == 3, "single-label: %d boxes", n);
    if (n == 3) {
        TCHECK(d[0].class_id == 0 && fabsf(d[0].conf - 0.81f) < 1e-6f && d[0].x1 == 40.f && d[0].y2 == 60.f, "first box");
        TCHECK(d[1].class_id == 1 && fabsf(d[1].conf - 0.72f) < 1e-6f, "second box (other class, same place)");
        TCHECK(d[2].class_id == 2 && fabsf(d[2].conf - 0.36f) < 1e-6f, "third box");
    }
    q.agnostic = 1;
    TOK(odl_yolo_nms(p, 6, nc, &q, d, 16, &n));
    TCHECK(n == 2, "agnostic: %d boxes", n);
    q.agnostic = 0;
    q.multi_label = 1;
    TOK(odl_yolo_nms(p, 6, nc, &q, d, 16, &n));
    TCHECK(n == 4, "multi-label: %d boxes", n); /* adds (row 5, class 1, 0.33) */
    q.multi_label = 0;
    q.max_det = 2;
    TOK(odl_yolo_nms(p, 6, nc, &q, d, 16, &n));
    TCHECK(n == 2 && d[1].class_id == 1, "max_det");
    TFAIL(odl_yolo_nms(p, 6, 0, &q, d, 16, &n), ODL_E_INVAL);
}

static void official_bus(void) {
    char ref[4096];
    snprintf(ref, sizeof ref, "%s", odl_test_data_path("yolov5/reference/yolov5n_reference.h5"));
    int64_t n = 0;
    float *pred = ref_read_f32(ref, "bus_640/output", &n);
    TCHECK(pred && n == 25200 * 85, "reference bus_640/output");
    json_t *root = j_load(odl_test_data_path("yolov5/reference/detect_square640.json"));
    TCHECK(root != NULL, "detect_square640.json");
    if (!pred || !root) return;
    const json_t *dets = j_get(j_get(j_get(root, "images"), "bus.jpg"), "detections_xyxy_conf_cls");
    const int n_dets = (int)json_array_size(dets);
    odl_nms_params q = odl_nms_defaults();
    odl_detection d[1000];
    int nd = 0;
    TOK(odl_yolo_nms(pred, 25200, 80, &q, d, 1000, &nd));
    odl_letterbox g;
    TOK(odl_letterbox_geometry(810, 1080, 640, 0, 32, &g));
    TCHECK(dets && n_dets == nd, "bus: %d boxes, reference %d", nd, dets ? n_dets : -1);
    double worst = 0;
    for (int i = 0; dets && i < nd && i < n_dets; i++) {
        float b[4] = {d[i].x1, d[i].y1, d[i].x2, d[i].y2};
        odl_letterbox_unmap(&g, b);
        const json_t *r = json_array_get(dets, (size_t)i);
        for (int k = 0; k < 4; k++) worst = fmax(worst, fabs(b[k] - j_at(r, (size_t)k)));
        TCHECK(fabs(d[i].conf - j_at(r, 4)) < 1e-4 && d[i].class_id == (int)j_at(r, 5), "box %d", i);
    }
    printf("bus_640 official output -> %d boxes, max coordinate difference %.5f px\n", nd, worst);
    TCHECK(worst < 1e-3, "coordinates differ by %.5f", worst);
    json_decref(root);
    free(pred);
}

int main(void) {
    plain_nms();
    yolo_nms();
    if (!odl_test_have_data("yolov5/reference/yolov5n_reference.h5") ||
        !odl_test_have_data("yolov5/reference/detect_square640.json"))
        return odl_test_finish_skipped("test_yolov5_nms");
    official_bus();
    return odl_test_finish("test_yolov5_nms");
}
