/* odl_worker --task=eval: YOLOv5 evaluation with val.py's mAP (YOLOv5 v7.0 val.py, task 'val'), on one
 * process or on the ranks of an mpirun / srun job.
 *
 * Each rank takes a contiguous shard of the evaluation order (no padding with duplicates, unlike
 * PyTorch's DistributedSampler), runs letterbox, forward, multi-label NMS and val.py's matching, and
 * the per-image statistics (detections with their true-positive flags, label classes) are gathered to
 * rank 0 in image order; rank 0 computes ap_per_class once, prints val.py's table and writes
 * DIR/metrics.json (and with --save-json DIR/<weights>_predictions.json, COCO format). Because every
 * image's statistics are the same whichever rank computes them and rank 0 sees them in one order, the
 * metrics do not depend on the world size. Under odl_coordinator the images come in chunks from its
 * work queue instead (worker/eval_queue.c, docs/eval.md "Under the coordinator").
 *
 * Exit status: 0 ok; 1 when the run fails (weights, dataset, a bad label line, an image that cannot be
 * decoded, a failed rank: every rank stops with the failing rank's message); 2 for a usage error. */
#include <jansson.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "odl/backend.h"
#include "odl/clock.h"
#include "odl/comm.h"
#include "odl/det_metrics.h"
#include "odl/device.h"
#include "odl/fault.h"
#include "odl/gpu_prep.h"
#include "odl/json.h"
#include "odl/labels.h"
#include "odl/log.h"
#include "odl/nms.h"
#include "odl/pipeline.h"
#include "odl/strbuf.h"
#include "odl/yolov5.h"
#include "worker/cli.h"
#include "worker/coord.h"
#include "worker/eval_queue.h"
#include "worker/eval_shard.h"
#include "worker/outputs.h"
#include "worker/tasks.h"

static void eval_usage(FILE *f) {
    fprintf(f,
            "usage: odl_worker --task=eval --model=yolov5 --weights=W.h5 --data=D [options]\n"
            "  D is a folder with images/ and labels/ (YOLO format, subfolders taken recursively) or a YOLOv5\n"
            "  dataset yaml (path, val, names). Under mpirun/srun each rank evaluates a contiguous shard; under\n"
            "  odl_coordinator the ranks take chunks of --batch-size images from its work queue (docs/eval.md).\n"
            "  --img-size N        inference size (default 640, a multiple of 32)\n"
            "  --batch-size B      images per forward (default 32)\n"
            "  --conf-thres X      confidence threshold (default 0.001)\n"
            "  --iou-thres X       NMS IoU threshold (default 0.6)\n"
            "  --max-det N         at most N boxes per image (default 300)\n"
            "  --square            letterbox every image to N x N (default: val.py's rectangular batches)\n"
            "  --half              float16 inference\n"
            "  --precision P       fp32 (default), tf32 or bf16: the float32 network's convolutions on tensor cores\n"
            "                      with TF32 / BF16 operands, float32 accumulation (docs/PRECISION.md)\n"
            "  --workers N         image decoding threads per rank (default 8, at most the cores per rank)\n"
            "  --device D          auto (default), cpu, cuda or cuda:N\n"
            "  --memory.preallocate_fraction F  GPU memory the pool reserves at start (default 0: grow on demand)\n"
            "  --output DIR        where metrics.json goes (default runs/val)\n"
            "  --save-json         also write COCO-format predictions (DIR/<weights>_predictions.json)\n"
            "  --verbose           per-class lines even with 50 classes or more (val.py --verbose)\n"
            "  --timeout-s S       end the job when a rank does not reach the final gather within S seconds\n"
            "                      of the others (default 0: wait; mpirun ends the job when a rank dies)\n"
            "  --backend-post      on the CPU too, the device pipeline: letterbox and NMS through the backend\n"
            "                      entries, as CUDA does (a check of that path; the metrics are the same)\n"
            "  --decoder D         auto or nvjpeg (default: JPEGs on the GPU with nvJPEG where it is there, the\n"
            "                      rest on CPU threads) or cpu (libjpeg-turbo for every image)\n"
            "  --cuda-graph on|off replay the forward of each batch size from a CUDA graph (default off: not yet\n"
            "                      measured on a GPU; the boxes are bitwise the same either way)\n");
}

/* Returns 0 ok, 2 usage error (message printed), 3 for --help. */
static int parse_opts(int argc, char **argv, eval_opts *o) {
    memset(o, 0, sizeof *o);
    o->model = "yolov5";
    o->output = "runs/val";
    o->device = "auto";
    o->img_size = 640;
    o->batch = 32;
    o->max_det = 300;
    o->workers = 8;
    o->decoder = "auto";
    o->conf = 0.001f;
    o->iou = 0.6f;
    const char *task = NULL; /* handled by main() */
    const odl_cli_opt opts[] = {
        ODL_CLI_STR_OPT("--task", NULL, &task),
        ODL_CLI_STR_OPT("--model", NULL, &o->model),
        ODL_CLI_STR_OPT("--weights", NULL, &o->weights),
        ODL_CLI_STR_OPT("--data", NULL, &o->data),
        ODL_CLI_STR_OPT("--output", NULL, &o->output),
        ODL_CLI_STR_OPT("--device", NULL, &o->device),
        ODL_CLI_INT_OPT("--img-size", NULL, &o->img_size, 32, 8192, "a multiple of 32 in 32..8192"),
        /* val.py v7.0's spellings (--imgsz, --img and --img-size are one option there) */
        ODL_CLI_INT_OPT("--imgsz", "--img-size", &o->img_size, 32, 8192, "a multiple of 32 in 32..8192"),
        ODL_CLI_INT_OPT("--img", "--img-size", &o->img_size, 32, 8192, "a multiple of 32 in 32..8192"),
        ODL_CLI_INT_OPT("--batch-size", NULL, &o->batch, 1, 4096, "an integer in 1..4096"),
        ODL_CLI_INT_OPT("--max-det", NULL, &o->max_det, 1, 100000, "an integer in 1..100000"),
        ODL_CLI_INT_OPT("--workers", NULL, &o->workers, 0, 256, "an integer in 0..256"),
        ODL_CLI_FLOAT_OPT("--conf-thres", NULL, &o->conf, 0, 1, "a number in [0, 1]"),
        ODL_CLI_FLOAT_OPT("--iou-thres", NULL, &o->iou, 0, 1, "a number in [0, 1]"),
        ODL_CLI_FLOAT_OPT("--timeout-s", NULL, &o->timeout_s, 0, 1e6, "seconds >= 0"),
        ODL_CLI_POOL_OPTS(&o->pool_fraction),
        ODL_CLI_BOOL_OPT("--square", &o->square, 1),
        ODL_CLI_BOOL_OPT("--half", &o->half, 1),
        ODL_CLI_BOOL_OPT("--save-json", &o->save_json, 1),
        ODL_CLI_BOOL_OPT("--verbose", &o->verbose, 1),
        ODL_CLI_BOOL_OPT("--backend-post", &o->backend_post, 1),
        ODL_CLI_STR_OPT("--decoder", NULL, &o->decoder),
        ODL_CLI_STR_OPT("--precision", NULL, &o->precision_name),
        ODL_CLI_STR_OPT("--cuda-graph", NULL, &o->cuda_graph_name),
    };
    const size_t n_opts = sizeof opts / sizeof *opts;
    static const char *const extra[] = {"help"};
    odl_cli_seen seen;
    memset(&seen, 0, sizeof seen);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return 3;
        int r = odl_cli_take(argc, argv, &i, opts, n_opts, &seen);
        if (r < 0) return 2;
        if (r) continue;
        odl_cli_reject(argv[i], opts, n_opts, extra, 1, "--task=eval --model=yolov5 --help");
        return 2;
    }
    if (odl_cli_yolo_precision(o->precision_name, o->half, &o->precision)) return 2;
    if (strcmp(o->model, "yolov5") != 0) {
        fprintf(stderr, "odl_worker: error: --task=eval supports --model=yolov5, not '%s'\n", o->model);
        return 2;
    }
    if (!o->weights) {
        fprintf(stderr, "odl_worker: error: --task=eval needs --weights=W.h5 (convert a .pt with tools/convert_yolov5.py)\n");
        return 2;
    }
    if (!o->data) {
        fprintf(stderr, "odl_worker: error: --task=eval needs --data=D (a folder with images/ and labels/, or a dataset yaml)\n");
        return 2;
    }
    if (o->img_size % 32) {
        fprintf(stderr, "odl_worker: error: --img-size %d: must be a multiple of 32\n", o->img_size);
        return 2;
    }
    if (odl_cli_cuda_graph(o->cuda_graph_name, &o->cuda_graph)) return 2;
    return odl_cli_check_decoder(o->decoder);
}

/* utils/general.py coco80_to_coco91_class(). */
static const int COCO91[80] = {1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 13, 14, 15, 16, 17, 18, 19, 20, 21,
                               22, 23, 24, 25, 27, 28, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44,
                               46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65,
                               67, 70, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 84, 85, 86, 87, 88, 89, 90};

static const char *base_name(const char *p) {
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

/* val.py's save_one_json: image_id the file stem (an integer when it is numeric), category_id COCO's
 * 91-class id for an 80-class model (class index otherwise), bbox [x, y, w, h] rounded to 3 decimals,
 * score to 5. */
static odl_status add_json_preds(json_t *arr, const char *image, const rec_det *d, int n, int nc) {
    char stem[1024];
    snprintf(stem, sizeof stem, "%s", base_name(image));
    char *dot = strrchr(stem, '.');
    if (dot) *dot = 0;
    int numeric = stem[0] != 0;
    for (const char *c = stem; *c; c++) numeric &= *c >= '0' && *c <= '9';
    for (int k = 0; k < n; k++) {
        json_t *o = json_object();
        json_object_set_new(o, "image_id", numeric ? json_integer(strtoll(stem, NULL, 10)) : json_string(stem));
        json_object_set_new(o, "category_id", json_integer(nc == 80 ? COCO91[d[k].cls] : d[k].cls));
        json_t *bb = json_array();
        double v[4] = {d[k].box[0], d[k].box[1], (double)d[k].box[2] - d[k].box[0], (double)d[k].box[3] - d[k].box[1]};
        for (int i = 0; i < 4; i++) json_array_append_new(bb, json_real(round(v[i] * 1000) / 1000));
        json_object_set_new(o, "bbox", bb);
        json_object_set_new(o, "score", json_real(round((double)d[k].conf * 100000) / 100000));
        if (json_array_append_new(arr, o)) return ODL_ERR(ODL_E_NOMEM, "predictions json");
    }
    return ODL_OK;
}

static const char *class_name(const odl_det_dataset *ds, const odl_yolov5 *net, int c) {
    if (ds->names && c < ds->n_names && ds->names[c]) return ds->names[c];
    return odl_yolov5_class_name(net, c);
}

/* Every image's record (worker/eval_shard.h), flattened for odl_det_ap_per_class. */
typedef struct eval_stats {
    int64_t n_pred, n_target, seen, by_decoder[ODL_DECODER_COUNT];
    uint8_t *tp; /* [n_pred][ODL_DET_NIOU] */
    float *conf;
    int *pcls, *tcls;
} eval_stats;

static void stats_free(eval_stats *s) {
    free(s->tp);
    free(s->conf);
    free(s->pcls);
    free(s->tcls);
}

/* The records all[0, nbytes) into *s, and each image's predictions into preds (NULL: none). */
static odl_status stats_collect(const uint8_t *all, size_t nbytes, const odl_det_dataset *ds, int nc, json_t *preds,
                                eval_stats *s) {
    memset(s, 0, sizeof *s);
    for (size_t off = 0; off < nbytes;) { /* count */
        rec_hdr h;
        memcpy(&h, all + off, sizeof h);
        s->n_pred += h.n_det;
        s->n_target += h.n_labels;
        s->seen++;
        if (h.decoder >= 0 && h.decoder < ODL_DECODER_COUNT) s->by_decoder[h.decoder]++;
        off += sizeof h + sizeof(rec_det) * (size_t)h.n_det + sizeof(int32_t) * (size_t)h.n_labels;
    }
    const size_t np = (size_t)(s->n_pred ? s->n_pred : 1), nt = (size_t)(s->n_target ? s->n_target : 1);
    s->tp = malloc(np * ODL_DET_NIOU);
    s->conf = malloc(sizeof(float) * np);
    s->pcls = malloc(sizeof(int) * np);
    s->tcls = malloc(sizeof(int) * nt);
    if (!s->tp || !s->conf || !s->pcls || !s->tcls)
        return ODL_ERR(ODL_E_NOMEM, "statistics of %lld predictions", (long long)s->n_pred);
    int64_t kp = 0, kt = 0;
    for (size_t off = 0; off < nbytes;) {
        rec_hdr h;
        memcpy(&h, all + off, sizeof h);
        off += sizeof h;
        const rec_det *d = (const rec_det *)(all + off);
        for (int k = 0; k < h.n_det; k++, kp++) {
            rec_det r;
            memcpy(&r, all + off + sizeof r * (size_t)k, sizeof r);
            memcpy(s->tp + kp * ODL_DET_NIOU, r.correct, ODL_DET_NIOU);
            s->conf[kp] = r.conf;
            s->pcls[kp] = r.cls;
        }
        if (preds) ODL_CHECK(add_json_preds(preds, ds->samples[h.index].image, d, h.n_det, nc));
        off += sizeof(rec_det) * (size_t)h.n_det;
        memcpy(s->tcls + kt, all + off, sizeof(int32_t) * (size_t)h.n_labels);
        kt += h.n_labels;
        off += sizeof(int32_t) * (size_t)h.n_labels;
    }
    return ODL_OK;
}

/* val.py's table: "all", then each class with labels (with --verbose, or under 50 classes). */
static void print_table(const odl_yolov5 *net, const odl_det_dataset *ds, const eval_opts *o, const eval_stats *s,
                        const odl_det_metrics *m) {
    const int nc = odl_yolov5_num_classes(net);
    printf("%22s%11s%11s%11s%11s%11s%11s\n", "Class", "Images", "Instances", "P", "R", "mAP50", "mAP50-95");
    printf("%22s%11lld%11lld%11.3g%11.3g%11.3g%11.3g\n", "all", (long long)s->seen, (long long)s->n_target, m->mp, m->mr,
           m->map50, m->map50_95);
    if (s->n_target == 0)
        fprintf(stderr, "odl_worker: warning: no labels found in %s, can not compute metrics without labels\n", o->data);
    if ((o->verbose || nc < 50) && nc > 1 && m->n_classes_with_labels > 0 && s->n_pred > 0)
        for (int c = 0; c < nc; c++) {
            const odl_det_class_metrics *pc = &m->per_class[c];
            if (!pc->n_labels) continue;
            printf("%22s%11lld%11lld%11.3g%11.3g%11.3g%11.3g\n", class_name(ds, net, c), (long long)s->seen,
                   (long long)pc->n_labels, pc->p, pc->r, pc->ap50, pc->ap50_95);
        }
    fflush(stdout);
}

/* metrics.json's object (docs/eval.md); says on stderr which decoder read how many images. */
static json_t *metrics_json(const odl_yolov5 *net, const odl_det_dataset *ds, const eval_opts *o, const eval_stats *s,
                            const odl_det_metrics *m) {
    const int nc = odl_yolov5_num_classes(net);
    json_t *root = json_object(), *per = json_object(), *classes = json_array();
    json_object_set_new(root, "mp", odl_json_num(m->mp, -1));
    json_object_set_new(root, "mr", odl_json_num(m->mr, -1));
    json_object_set_new(root, "map50", odl_json_num(m->map50, -1));
    json_object_set_new(root, "map50_95", odl_json_num(m->map50_95, -1));
    for (int c = 0; c < nc; c++) {
        const odl_det_class_metrics *pc = &m->per_class[c];
        if (!pc->n_labels) continue;
        json_object_set_new(per, class_name(ds, net, c), odl_json_num(pc->ap50_95, -1));
        json_t *e = json_object();
        json_object_set_new(e, "class_id", json_integer(c));
        json_object_set_new(e, "name", json_string(class_name(ds, net, c)));
        json_object_set_new(e, "instances", json_integer(pc->n_labels));
        json_object_set_new(e, "predictions", json_integer(pc->n_pred));
        json_object_set_new(e, "p", odl_json_num(pc->p, -1));
        json_object_set_new(e, "r", odl_json_num(pc->r, -1));
        json_object_set_new(e, "map50", odl_json_num(pc->ap50, -1));
        json_object_set_new(e, "map50_95", odl_json_num(pc->ap50_95, -1));
        json_array_append_new(classes, e);
    }
    json_object_set_new(root, "per_class", per);
    json_object_set_new(root, "classes", classes);
    json_object_set_new(root, "images", json_integer(s->seen));
    /* which decoder read how many images (every rank's, from the records): nvJPEG's IDCT differs from
     * libjpeg-turbo's within a few levels, so the metrics may differ within docs/eval.md's tolerance */
    json_t *dec = json_object();
    char dline[256];
    odl_strbuf b;
    odl_strbuf_fixed(&b, dline, sizeof dline);
    for (int d = 0; d < ODL_DECODER_COUNT; d++) {
        json_object_set_new(dec, odl_decoder_name(d), json_integer(s->by_decoder[d]));
        if (s->by_decoder[d])
            odl_strbuf_printf(&b, "%s%lld by %s", b.len ? ", " : "", (long long)s->by_decoder[d], odl_decoder_name(d));
    }
    json_object_set_new(root, "decoded", dec);
    if (b.len) fprintf(stderr, "odl_worker: images decoded: %s\n", dline);
    json_object_set_new(root, "instances", json_integer(s->n_target));
    json_object_set_new(root, "predictions", json_integer(s->n_pred));
    json_t *set = json_object();
    json_object_set_new(set, "weights", json_string(o->weights));
    json_object_set_new(set, "data", json_string(o->data));
    json_object_set_new(set, "img_size", json_integer(o->img_size));
    json_object_set_new(set, "batch_size", json_integer(o->batch));
    json_object_set_new(set, "conf_thres", odl_json_num(o->conf, -1));
    json_object_set_new(set, "iou_thres", odl_json_num(o->iou, -1));
    json_object_set_new(set, "max_det", json_integer(o->max_det));
    json_object_set_new(set, "rect", json_boolean(!o->square));
    json_object_set_new(set, "half", json_boolean(o->half));
    json_object_set_new(set, "precision", json_string(odl_precision_name(o->precision)));
    json_object_set_new(set, "decoder", json_string(o->decoder));
    json_object_set_new(root, "settings", set);
    return root;
}

/* DIR/metrics.json, and with --save-json DIR/<weights stem>_predictions.json, each replaced durably. */
static odl_status save_results(const eval_opts *o, const json_t *root, const json_t *preds, int64_t n_pred) {
    char path[4096];
    snprintf(path, sizeof path, "%s/metrics.json", o->output);
    ODL_CHECK(odl_json_save_file(path, root, JSON_INDENT(1) | JSON_SORT_KEYS));
    fprintf(stderr, "odl_worker: metrics in %s\n", path);
    if (!preds) return ODL_OK;
    char stem[1024];
    snprintf(stem, sizeof stem, "%s", base_name(o->weights));
    char *dot = strrchr(stem, '.');
    if (dot) *dot = 0;
    snprintf(path, sizeof path, "%s/%s_predictions.json", o->output, stem);
    ODL_CHECK(odl_json_save_file(path, preds, JSON_REAL_PRECISION(10)));
    fprintf(stderr, "odl_worker: %lld COCO-format predictions in %s (pycocotools)\n", (long long)n_pred, path);
    return ODL_OK;
}

/* Rank 0: metrics from every image's record (val.py's ap_per_class), the table, metrics.json and the
 * predictions. */
static odl_status report(const odl_yolov5 *net, const odl_det_dataset *ds, const eval_opts *o, const uint8_t *all,
                         size_t nbytes) {
    eval_stats s;
    odl_det_metrics m;
    memset(&m, 0, sizeof m);
    json_t *preds = o->save_json ? json_array() : NULL, *root = NULL;
    odl_status st = stats_collect(all, nbytes, ds, odl_yolov5_num_classes(net), preds, &s);
    if (st == ODL_OK)
        st = odl_det_ap_per_class(s.tp, s.conf, s.pcls, s.n_pred, s.tcls, s.n_target, odl_yolov5_num_classes(net), &m);
    if (st == ODL_OK) {
        print_table(net, ds, o, &s, &m);
        root = metrics_json(net, ds, o, &s, &m);
        st = save_results(o, root, preds, s.n_pred);
    }
    odl_det_metrics_free(&m);
    json_decref(root);
    json_decref(preds);
    stats_free(&s);
    return st;
}

/* ---- under the coordinator: chunks from its work queue (worker/eval_queue.c) ---- */
typedef struct queue_ctx {
    eval_ctx *ec;
    odl_yolov5 *net;
    const odl_det_dataset *ds;
    const eval_opts *o;
    const int *order, *shape;
    int rank;
    const odl_fault_plan *faults;
    int64_t *batches;
    double *t;
} queue_ctx;

static odl_status queue_eval(void *ctx, int64_t first, int64_t count, uint8_t **out, size_t *n) {
    queue_ctx *q = ctx;
    bytes b = {0};
    odl_status s = eval_shard(q->ec, q->ds, q->order, q->shape, (int)first, (int)(first + count), q->rank, q->faults,
                              q->batches, &b, q->t);
    if (s != ODL_OK) {
        free(b.p);
        return s;
    }
    *out = b.p;
    *n = b.n;
    return ODL_OK;
}

/* A chunk's records read back from its file: one per image of order[first, first + count), in order,
 * with this dataset's label counts, classes of the model and true-positive flags 0/1. */
static odl_status queue_check(void *ctx, const uint8_t *p, size_t n, int64_t first, int64_t count) {
    const queue_ctx *q = ctx;
    const int nc = odl_yolov5_num_classes(q->net);
    size_t off = 0;
    for (int64_t j = 0; j < count; j++) {
        rec_hdr h;
        if (n - off < sizeof h) return ODL_ERR(ODL_E_FORMAT, "ends before the record of image %" PRId64, first + j);
        memcpy(&h, p + off, sizeof h);
        off += sizeof h;
        const int idx = q->order[first + j];
        if (h.index != idx || h.n_det < 0 || h.n_det > q->o->max_det || h.n_labels != q->ds->samples[idx].n_labels ||
            h.decoder < 0 || h.decoder >= ODL_DECODER_COUNT)
            return ODL_ERR(ODL_E_FORMAT, "record %" PRId64 " is of image %d with %d detections and %d labels, not of "
                           "image %d with its %d labels", j, h.index, h.n_det, h.n_labels, idx, q->ds->samples[idx].n_labels);
        size_t need = sizeof(rec_det) * (size_t)h.n_det + sizeof(int32_t) * (size_t)h.n_labels;
        if (n - off < need) return ODL_ERR(ODL_E_FORMAT, "record %" PRId64 " is truncated", j);
        for (int k = 0; k < h.n_det; k++) {
            rec_det r;
            memcpy(&r, p + off + sizeof r * (size_t)k, sizeof r);
            int bad = r.cls < 0 || r.cls >= nc;
            for (int i = 0; i < ODL_DET_NIOU; i++) bad |= r.correct[i] > 1;
            if (bad) return ODL_ERR(ODL_E_FORMAT, "record %" PRId64 ": detection %d is damaged", j, k);
        }
        off += sizeof(rec_det) * (size_t)h.n_det;
        for (int l = 0; l < h.n_labels; l++) {
            int32_t c;
            memcpy(&c, p + off + sizeof c * (size_t)l, sizeof c);
            if (c < 0 || c >= nc) return ODL_ERR(ODL_E_FORMAT, "record %" PRId64 ": label class %d", j, c);
        }
        off += sizeof(int32_t) * (size_t)h.n_labels;
    }
    if (off != n) return ODL_ERR(ODL_E_FORMAT, "%zu bytes after the last record", n - off);
    return ODL_OK;
}

/* The evaluation's identity for the work queue: everything that changes an image's statistics. */
static void queue_key(const eval_opts *o, odl_device dev, int n, char *key, size_t cap) {
    snprintf(key, cap, "yolov5 weights=%s data=%s images=%d img_size=%d batch=%d conf=%.9g iou=%.9g max_det=%d rect=%d "
             "half=%d precision=%s backend_post=%d device=%s decoder=%s", o->weights, o->data, n, o->img_size, o->batch, o->conf,
             o->iou, o->max_det, !o->square, o->half, odl_precision_name(o->precision), o->backend_post, dev.type == ODL_DEV_CUDA ? "cuda" : "cpu", o->decoder);
}

/* One --task=eval run of YOLOv5: what its phases share. */
typedef struct eval_run {
    eval_opts o;
    odl_comm *comm;            /* under mpirun / srun, else NULL */
    odl_device dev;
    int rank, world;
    odl_worker_coord *wc;      /* ODL_FAULT and, under odl_coordinator, the registration */
    odl_coord_client *coord;   /* NULL without a coordinator */
    odl_yolov5 *net;
    odl_det_dataset ds;
    int *order, *shape;        /* the evaluation order and each position's letterbox */
    eval_ctx *ec;
    bytes stats;               /* this rank's records */
    uint8_t *all;              /* every rank's records, on rank 0 */
    size_t all_n;
    int64_t batches, n_mine;
    double t[3], t_start;      /* waiting for decoding, forward + NMS, matching (ms) */
} eval_run;

/* The launch (alone, or a rank of mpirun / srun) and the device. 0, or the exit status after the error
 * line (a rank whose communicator or device fails aborts the job). */
static int eval_launch(eval_run *r) {
    odl_launch_info li;
    if (odl_launch_detect(&li) != ODL_OK) {
        fprintf(stderr, "odl_worker: error: %s\n", odl_error_msg_user());
        return 2;
    }
    if (!li.launched) {
        if (odl_cli_pick_device(r->o.device, r->o.pool_fraction, &r->dev) == ODL_OK) return 0;
        fprintf(stderr, "odl_worker: error: %s\n", odl_error_msg_user());
        return 1;
    }
    const int want_cuda = !strncmp(r->o.device, "cuda", 4) || (!strcmp(r->o.device, "auto") && odl_cuda_device_count() > 0);
    odl_comm_options co = {.device_type = want_cuda ? ODL_DEV_CUDA : ODL_DEV_CPU, .cuda_index = -1,
                           .timeout_s = r->o.timeout_s};
    const odl_status cs = odl_comm_init(&li, &co, &r->comm);
    if (cs != ODL_OK) {
        if (cs == ODL_E_UNSUPPORTED) { /* no MPI in this build: nothing to abort, a usage error */
            fprintf(stderr, "odl_worker: error: %s\n", odl_error_msg_user());
            return 2;
        }
        odl_comm_abort_job(NULL, ODL_COMM_EXIT_ERROR, "%s", odl_error_msg_user());
    }
    r->rank = odl_comm_rank(r->comm);
    r->world = odl_comm_size(r->comm);
    odl_log_set_rank(r->rank, r->world);
    r->dev = odl_comm_device(r->comm);
    if (r->dev.type == ODL_DEV_CUDA && odl_cuda_init(r->dev.index, odl_cli_pool_fraction(r->o.pool_fraction)) != ODL_OK)
        odl_comm_abort_job(r->comm, ODL_COMM_EXIT_ERROR, "rank %d: %s", r->rank, odl_error_msg_user());
    return 0;
}

/* ODL_FAULT and the coordinator's registration: 0, or 2 after the error line (a bad value is a usage
 * error; the device is shut down). */
static int eval_register(eval_run *r) {
    if (odl_worker_coord_start_eval(&r->wc, r->rank, r->world, r->comm) == ODL_OK) {
        r->coord = odl_worker_coord_client_of(r->wc);
        return 0;
    }
    if (r->comm) odl_comm_abort_job(r->comm, 2, "rank %d: %s", r->rank, odl_error_msg_user());
    fprintf(stderr, "odl_worker: error: %s\n", odl_error_msg_user());
    if (r->dev.type == ODL_DEV_CUDA) odl_cuda_shutdown();
    return 2;
}

/* The weights, the data set and its batch plan, the loop's machinery; every rank's outcome agreed on,
 * so that no rank waits for one that has failed. */
static odl_status eval_setup(eval_run *r) {
    const eval_opts *o = &r->o;
    odl_status st = odl_yolov5_load(o->weights, r->dev, &r->net);
    if (st != ODL_OK) odl_error_prefix("--weights %s", o->weights);
    if (st == ODL_OK && o->half && (st = odl_yolov5_set_half(r->net, 1)) != ODL_OK) odl_error_prefix("--half");
    if (st == ODL_OK && o->cuda_graph) st = odl_yolov5_set_graphs(r->net, 1);
    odl_set_matmul_precision(o->precision);
    if (st == ODL_OK) st = odl_det_dataset_open(o->data, odl_yolov5_num_classes(r->net), &r->ds);
    if (st == ODL_OK && r->rank == 0) st = odl_output_mkdir_p("--output", o->output);
    if (st == ODL_OK) {
        r->order = malloc(sizeof(int) * (size_t)r->ds.n);
        r->shape = malloc(sizeof(int) * 2 * (size_t)r->ds.n);
        st = r->order && r->shape ? odl_det_dataset_plan(&r->ds, o->img_size, o->batch, odl_yolov5_max_stride(r->net), 0.5,
                                                         !o->square, r->order, r->shape)
                                  : ODL_ERR(ODL_E_NOMEM, "batch plan");
    }
    if (st == ODL_OK) st = eval_ctx_create(r->net, o, &r->ec);
    if (r->comm) st = odl_comm_agree(r->comm, st, "setup");
    if (st != ODL_OK || r->rank) return st;
    const odl_det_dataset *ds = &r->ds;
    fprintf(stderr,
            "odl_worker: eval yolov5 %s on %s, %s; %s: %d images (%d backgrounds: %d missing and %d empty label files, "
            "%d duplicate labels removed); %s letterbox %d, batch %d, conf %g, IoU %g, max_det %d; %d rank(s)\n",
            o->weights, odl_device_name(r->dev), odl_cli_yolo_precision_note(o->half, o->precision), o->data, ds->n,
            ds->n_missing + ds->n_empty, ds->n_missing, ds->n_empty, ds->n_duplicates, o->square ? "square" : "rectangular",
            o->img_size, o->batch, o->conf, o->iou, o->max_det, r->world);
    fprintf(stderr, "odl_worker: decoding: %s\n", eval_ctx_decoder_note(r->ec));
    return ODL_OK;
}

/* Under odl_coordinator: chunks of the work queue, no collective (a rank that dies or lags holds up no
 * other; the coordinator relaunches the job on a death and re-hands a straggler's chunk). 0, or 1 after
 * the error line. */
static int eval_queue(eval_run *r) {
    char key[8192];
    queue_key(&r->o, r->dev, r->ds.n, key, sizeof key);
    queue_ctx qc = {r->ec, r->net, &r->ds, &r->o, r->order, r->shape, r->rank, odl_worker_coord_faults(r->wc), &r->batches,
                    r->t};
    odl_eval_queue_ops ops = {&qc, queue_eval, queue_check};
    if (odl_eval_queue_run(r->coord, key, r->ds.n, r->o.batch, r->rank, &ops, &r->all, &r->all_n, &r->n_mine) == ODL_OK)
        return 0;
    odl_error_prefix("rank %d", r->rank);
    fprintf(stderr, "odl_worker: error: %s\n", odl_error_msg_user());
    return 1;
}

/* Alone or under mpirun: this rank's contiguous share, agreed on, then every rank's records gathered to
 * rank 0. */
static odl_status eval_shards(eval_run *r) {
    const int lo = (int)((int64_t)r->ds.n * r->rank / r->world), hi = (int)((int64_t)r->ds.n * (r->rank + 1) / r->world);
    odl_status st = eval_shard(r->ec, &r->ds, r->order, r->shape, lo, hi, r->rank, odl_worker_coord_faults(r->wc),
                               &r->batches, &r->stats, r->t);
    r->n_mine = hi - lo;
    if (st != ODL_OK) odl_error_prefix("rank %d", r->rank);
    if (r->comm) st = odl_comm_agree(r->comm, st, "evaluation");
    if (st != ODL_OK) return st;
    if (!r->comm) {
        r->all = r->stats.p;
        r->all_n = r->stats.n;
        r->stats.p = NULL;
        return ODL_OK;
    }
    st = odl_comm_gather_host_bytes(r->comm, r->stats.p, r->stats.n, 0, (void **)&r->all, &r->all_n);
    if (st != ODL_OK) odl_comm_abort_job(r->comm, ODL_COMM_EXIT_ERROR, "%s", odl_error_msg_user());
    return ODL_OK;
}

/* Rank 0: the metrics and files (report), then val.py's speed line for rank 0's share ("Speed: %.1fms
 * pre-process, %.1fms inference, %.1fms NMS per image"). */
static odl_status eval_results(eval_run *r) {
    const odl_status st = report(r->net, &r->ds, &r->o, r->all, r->all_n);
    const double wall = odl_mono_ms() - r->t_start;
    if (r->n_mine <= 0) return st;
    double fwd_ms = 0, nms_ms = 0;
    int64_t nb = 0;
    const double *t = r->t, loop = t[0] + t[1] + t[2], dev_ms = eval_ctx_device_ms(r->ec, &fwd_ms, &nms_ms, &nb);
    char busy[240] = "", graphs[80] = "";
    int64_t g_cap = 0, g_rep = 0;
    odl_yolov5_graph_counts(r->net, &g_cap, &g_rep);
    if (g_cap) snprintf(graphs, sizeof graphs, " (%" PRId64 " CUDA graphs, %" PRId64 " replays)", g_cap, g_rep);
    if (dev_ms > 0)
        snprintf(busy, sizeof busy, "; device busy %.0f%% of the loop (per batch %.2f ms letterbox+forward%s, %.2f ms NMS)",
                 100 * dev_ms / loop, fwd_ms / nb, graphs, nms_ms / nb);
    const double n = (double)r->n_mine;
    fprintf(stderr,
            "odl_worker: speed on rank 0: %.2f ms waiting for decode+letterbox, %.2f ms forward+NMS, "
            "%.2f ms matching per image; pipeline %.1f images/s on rank 0%s; %d images in %.2f s wall (%.1f "
            "images/s over %d rank(s))\n",
            t[0] / n, t[1] / n, t[2] / n, n / (loop / 1e3), busy, r->ds.n, wall / 1e3, r->ds.n / (wall / 1e3), r->world);
    odl_gpu_prep_stats ps;
    if (eval_ctx_prep_stats(r->ec, &ps) && ps.batches > 0) {
        const double b = (double)ps.batches;
        fprintf(stderr,
                "odl_worker: image prep on rank 0, %d feeder thread%s, per batch: %.2f ms waiting for file reads+headers, "
                "%.2f ms nvJPEG header checks, %.2f ms slot reuse, %.2f ms in nvJPEG's batched decode call, %.2f ms "
                "waiting for CPU decodes, %.2f ms uploads; busy %.0f%% of the loop; %" PRId64 " images to nvJPEG, %" PRId64
                " on the CPU\n",
                ps.feeders, ps.feeders == 1 ? "" : "s", ps.stage1_wait_ms / b, ps.nvjpeg_check_ms / b, ps.reuse_ms / b,
                ps.nvjpeg_call_ms / b, ps.stage2_wait_ms / b, ps.upload_ms / b, 100 * ps.busy_ms / (loop * ps.feeders),
                ps.images_nvjpeg, ps.images_cpu);
    }
    return st;
}

/* The coordinator told of the outcome, everything freed, the communicator and the device closed. */
static int eval_release(eval_run *r, int rc) {
    if (rc) odl_worker_coord_fail(r->wc, odl_error_msg_user());
    odl_worker_coord_finish(r->wc, NULL, rc);
    free(r->all);
    free(r->stats.p);
    free(r->order);
    free(r->shape);
    eval_ctx_free(r->ec);
    odl_det_dataset_free(&r->ds);
    odl_yolov5_free(r->net);
    if (r->comm && odl_comm_finalize(r->comm) != ODL_OK && rc == 0) {
        fprintf(stderr, "odl_worker: error: %s\n", odl_error_msg_user());
        rc = 1;
    }
    if (r->dev.type == ODL_DEV_CUDA) odl_cuda_shutdown();
    return rc;
}

/* odl_worker --task=eval --model=yolov5: val.py's run as named phases; exit status 0, 1 (a failed
 * step), 2 (usage). */
int odl_task_eval_yolov5_main(int argc, char **argv) {
    eval_run r;
    memset(&r, 0, sizeof r);
    r.dev = odl_cpu();
    r.world = 1;
    const int pr = parse_opts(argc, argv, &r.o);
    if (pr == 3) {
        eval_usage(stdout);
        return 0;
    }
    if (pr) return 2;
    int rc = eval_launch(&r);
    if (!rc) rc = eval_register(&r);
    if (rc) return rc;
    r.t_start = odl_mono_ms();

    odl_status st = eval_setup(&r);
    if (st == ODL_OK && r.coord && (rc = eval_queue(&r)) != 0) return eval_release(&r, rc); /* its error is said */
    if (st == ODL_OK && !r.coord) st = eval_shards(&r);
    if (st == ODL_OK) {
        if (r.rank == 0) st = eval_results(&r);
        /* every rank, whatever rank 0's outcome: the others wait here for it */
        if (r.comm && !r.coord) st = odl_comm_agree(r.comm, st, "writing the results");
    }
    if (st != ODL_OK) {
        if (r.rank == 0 || !r.comm) fprintf(stderr, "odl_worker: error: %s\n", odl_error_msg_user());
        rc = 1;
    }
    return eval_release(&r, rc);
}
