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
#include <time.h>
#include <unistd.h>

#include "odl/json.h"
#include "odl/backend.h"
#include "odl/comm.h"
#include "odl/det_metrics.h"
#include "odl/device.h"
#include "odl/fault.h"
#include "odl/gpu_prep.h"
#include "odl/labels.h"
#include "odl/log.h"
#include "odl/nms.h"
#include "odl/pipeline.h"
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
            "  --decoder D         auto (default: JPEGs on the GPU with nvJPEG where it is there, the rest on CPU\n"
            "                      threads) or cpu (libjpeg-turbo for every image)\n");
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
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

/* Rank 0: metrics from every image's record, the table, metrics.json and the predictions. */
static odl_status report(const odl_yolov5 *net, const odl_det_dataset *ds, const eval_opts *o, const uint8_t *all,
                         size_t nbytes) {
    const int nc = odl_yolov5_num_classes(net);
    odl_status st = ODL_OK;
    int64_t n_pred = 0, n_target = 0, seen = 0, by_decoder[ODL_DECODER_COUNT] = {0};
    for (size_t off = 0; off < nbytes;) { /* count */
        rec_hdr h;
        memcpy(&h, all + off, sizeof h);
        n_pred += h.n_det;
        n_target += h.n_labels;
        seen++;
        if (h.decoder >= 0 && h.decoder < ODL_DECODER_COUNT) by_decoder[h.decoder]++;
        off += sizeof h + sizeof(rec_det) * (size_t)h.n_det + sizeof(int32_t) * (size_t)h.n_labels;
    }
    uint8_t *tp = malloc((size_t)(n_pred ? n_pred : 1) * ODL_DET_NIOU);
    float *conf = malloc(sizeof(float) * (size_t)(n_pred ? n_pred : 1));
    int *pcls = malloc(sizeof(int) * (size_t)(n_pred ? n_pred : 1)), *tcls = malloc(sizeof(int) * (size_t)(n_target ? n_target : 1));
    json_t *preds = o->save_json ? json_array() : NULL, *root = NULL;
    odl_det_metrics m;
    memset(&m, 0, sizeof m);
    if (!tp || !conf || !pcls || !tcls) {
        st = ODL_ERR(ODL_E_NOMEM, "statistics of %lld predictions", (long long)n_pred);
        goto out;
    }
    int64_t kp = 0, kt = 0;
    for (size_t off = 0; off < nbytes;) {
        rec_hdr h;
        memcpy(&h, all + off, sizeof h);
        off += sizeof h;
        const rec_det *d = (const rec_det *)(all + off);
        for (int k = 0; k < h.n_det; k++, kp++) {
            rec_det r;
            memcpy(&r, all + off + sizeof r * (size_t)k, sizeof r);
            memcpy(tp + kp * ODL_DET_NIOU, r.correct, ODL_DET_NIOU);
            conf[kp] = r.conf;
            pcls[kp] = r.cls;
        }
        if (preds) ODL_CHECK_GOTO(add_json_preds(preds, ds->samples[h.index].image, d, h.n_det, nc), st, out);
        off += sizeof(rec_det) * (size_t)h.n_det;
        memcpy(tcls + kt, all + off, sizeof(int32_t) * (size_t)h.n_labels);
        kt += h.n_labels;
        off += sizeof(int32_t) * (size_t)h.n_labels;
    }
    ODL_CHECK_GOTO(odl_det_ap_per_class(tp, conf, pcls, n_pred, tcls, n_target, nc, &m), st, out);

    /* val.py's table */
    printf("%22s%11s%11s%11s%11s%11s%11s\n", "Class", "Images", "Instances", "P", "R", "mAP50", "mAP50-95");
    printf("%22s%11lld%11lld%11.3g%11.3g%11.3g%11.3g\n", "all", (long long)seen, (long long)n_target, m.mp, m.mr, m.map50,
           m.map50_95);
    if (n_target == 0)
        fprintf(stderr, "odl_worker: warning: no labels found in %s, can not compute metrics without labels\n", o->data);
    if ((o->verbose || nc < 50) && nc > 1 && m.n_classes_with_labels > 0 && n_pred > 0)
        for (int c = 0; c < nc; c++) {
            const odl_det_class_metrics *pc = &m.per_class[c];
            if (!pc->n_labels) continue;
            printf("%22s%11lld%11lld%11.3g%11.3g%11.3g%11.3g\n", class_name(ds, net, c), (long long)seen,
                   (long long)pc->n_labels, pc->p, pc->r, pc->ap50, pc->ap50_95);
        }
    fflush(stdout);

    root = json_object();
    json_t *per = json_object(), *classes = json_array();
    json_object_set_new(root, "mp", odl_json_num(m.mp, -1));
    json_object_set_new(root, "mr", odl_json_num(m.mr, -1));
    json_object_set_new(root, "map50", odl_json_num(m.map50, -1));
    json_object_set_new(root, "map50_95", odl_json_num(m.map50_95, -1));
    for (int c = 0; c < nc; c++) {
        const odl_det_class_metrics *pc = &m.per_class[c];
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
    json_object_set_new(root, "images", json_integer(seen));
    /* which decoder read how many images (every rank's, from the records): nvJPEG's IDCT differs from
     * libjpeg-turbo's within a few levels, so the metrics may differ within docs/eval.md's tolerance */
    json_t *dec = json_object();
    char dline[256];
    int dl = 0;
    for (int d = 0; d < ODL_DECODER_COUNT; d++) {
        json_object_set_new(dec, odl_decoder_name(d), json_integer(by_decoder[d]));
        if (by_decoder[d] && dl < (int)sizeof dline)
            dl += snprintf(dline + dl, sizeof dline - (size_t)dl, "%s%lld by %s", dl ? ", " : "", (long long)by_decoder[d],
                           odl_decoder_name(d));
    }
    json_object_set_new(root, "decoded", dec);
    if (dl) fprintf(stderr, "odl_worker: images decoded: %s\n", dline);
    json_object_set_new(root, "instances", json_integer(n_target));
    json_object_set_new(root, "predictions", json_integer(n_pred));
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
    json_object_set_new(set, "decoder", json_string(o->decoder));
    json_object_set_new(root, "settings", set);
    char path[4096];
    snprintf(path, sizeof path, "%s/metrics.json", o->output);
    if (json_dump_file(root, path, JSON_INDENT(1) | JSON_SORT_KEYS) != 0) {
        st = ODL_ERR(ODL_E_IO, "%s: cannot write", path);
        goto out;
    }
    fprintf(stderr, "odl_worker: metrics in %s\n", path);
    if (preds) {
        char stem[1024];
        snprintf(stem, sizeof stem, "%s", base_name(o->weights));
        char *dot = strrchr(stem, '.');
        if (dot) *dot = 0;
        snprintf(path, sizeof path, "%s/%s_predictions.json", o->output, stem);
        if (json_dump_file(preds, path, JSON_REAL_PRECISION(10)) != 0) {
            st = ODL_ERR(ODL_E_IO, "%s: cannot write", path);
            goto out;
        }
        fprintf(stderr, "odl_worker: %lld COCO-format predictions in %s (pycocotools)\n", (long long)n_pred, path);
    }
out:
    odl_det_metrics_free(&m);
    json_decref(root);
    json_decref(preds);
    free(tp);
    free(conf);
    free(pcls);
    free(tcls);
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
             "half=%d backend_post=%d device=%s decoder=%s", o->weights, o->data, n, o->img_size, o->batch, o->conf, o->iou,
             o->max_det, !o->square, o->half, o->backend_post, dev.type == ODL_DEV_CUDA ? "cuda" : "cpu", o->decoder);
}

int odl_task_eval_yolov5_main(int argc, char **argv) {
    eval_opts o;
    int pr = parse_opts(argc, argv, &o);
    if (pr == 3) {
        eval_usage(stdout);
        return 0;
    }
    if (pr) return 2;

    odl_launch_info li;
    if (odl_launch_detect(&li) != ODL_OK) {
        fprintf(stderr, "odl_worker: error: %s\n", odl_error_msg_user());
        return 2;
    }
    odl_comm *comm = NULL;
    odl_device dev = odl_cpu();
    int rank = 0, world = 1, rc = 1;
    if (li.launched) {
        int want_cuda = !strncmp(o.device, "cuda", 4) || (!strcmp(o.device, "auto") && odl_cuda_device_count() > 0);
        odl_comm_options co = {.device_type = want_cuda ? ODL_DEV_CUDA : ODL_DEV_CPU, .cuda_index = -1,
                               .timeout_s = o.timeout_s};
        const odl_status cs = odl_comm_init(&li, &co, &comm);
        if (cs != ODL_OK) {
            if (cs == ODL_E_UNSUPPORTED) { /* no MPI in this build: nothing to abort, a usage error */
                fprintf(stderr, "odl_worker: error: %s\n", odl_error_msg_user());
                return 2;
            }
            odl_comm_abort_job(NULL, ODL_COMM_EXIT_ERROR, "%s", odl_error_msg_user());
        }
        rank = odl_comm_rank(comm);
        world = odl_comm_size(comm);
        odl_log_set_rank(rank, world);
        dev = odl_comm_device(comm);
        if (dev.type == ODL_DEV_CUDA && odl_cuda_init(dev.index, odl_cli_pool_fraction(o.pool_fraction)) != ODL_OK)
            odl_comm_abort_job(comm, ODL_COMM_EXIT_ERROR, "rank %d: %s", rank, odl_error_msg_user());
    } else if (odl_cli_pick_device(o.device, o.pool_fraction, &dev) != ODL_OK) {
        fprintf(stderr, "odl_worker: error: %s\n", odl_error_msg_user());
        return 1;
    }
    /* ODL_FAULT and, under odl_coordinator, the registration (a bad value is a usage error, exit 2) */
    odl_worker_coord *wc = NULL;
    if (odl_worker_coord_start_eval(&wc, rank, world, comm) != ODL_OK) {
        if (comm) odl_comm_abort_job(comm, 2, "rank %d: %s", rank, odl_error_msg_user());
        fprintf(stderr, "odl_worker: error: %s\n", odl_error_msg_user());
        if (dev.type == ODL_DEV_CUDA) odl_cuda_shutdown();
        return 2;
    }
    odl_coord_client *coord = odl_worker_coord_client_of(wc);
    int64_t batches = 0, n_mine = 0;

    odl_yolov5 *net = NULL;
    odl_det_dataset ds;
    memset(&ds, 0, sizeof ds);
    int *order = NULL, *shape = NULL;
    bytes stats = {0};
    eval_ctx *ec = NULL;
    uint8_t *all = NULL;
    size_t all_n = 0;
    double t[3] = {0, 0, 0}, t_start = now_ms();
    odl_status st = ODL_OK;
    const char *stage = "setup";

    /* Every step before the gather is agreed on, so that no rank waits for one that has failed. */
    st = odl_yolov5_load(o.weights, dev, &net);
    if (st != ODL_OK) odl_error_prefix("--weights %s", o.weights);
    if (st == ODL_OK && o.half && (st = odl_yolov5_set_half(net, 1)) != ODL_OK) odl_error_prefix("--half");
    if (st == ODL_OK) st = odl_det_dataset_open(o.data, odl_yolov5_num_classes(net), &ds);
    if (st == ODL_OK && rank == 0) st = odl_output_mkdir_p("--output", o.output);
    if (st == ODL_OK) {
        order = malloc(sizeof(int) * (size_t)ds.n);
        shape = malloc(sizeof(int) * 2 * (size_t)ds.n);
        st = order && shape ? odl_det_dataset_plan(&ds, o.img_size, o.batch, odl_yolov5_max_stride(net), 0.5, !o.square,
                                                   order, shape)
                            : ODL_ERR(ODL_E_NOMEM, "batch plan");
    }
    if (st == ODL_OK) st = eval_ctx_create(net, &o, &ec);
    if (comm) st = odl_comm_agree(comm, st, stage);
    if (st != ODL_OK) goto out;
    const int lo = coord ? 0 : (int)((int64_t)ds.n * rank / world), hi = coord ? 0 : (int)((int64_t)ds.n * (rank + 1) / world);
    if (rank == 0)
        fprintf(stderr,
                "odl_worker: eval yolov5 %s on %s, %s; %s: %d images (%d backgrounds: %d missing and %d empty label files, "
                "%d duplicate labels removed); %s letterbox %d, batch %d, conf %g, IoU %g, max_det %d; %d rank(s)\n",
                o.weights, odl_device_name(dev), o.half ? "float16" : "float32", o.data, ds.n, ds.n_missing + ds.n_empty,
                ds.n_missing, ds.n_empty, ds.n_duplicates, o.square ? "square" : "rectangular", o.img_size, o.batch,
                o.conf, o.iou, o.max_det, world);
    if (rank == 0) fprintf(stderr, "odl_worker: decoding: %s\n", eval_ctx_decoder_note(ec));
    stage = "evaluation";
    if (coord) {
        /* No collective from here on: a rank that dies or lags holds up no other; the coordinator
         * relaunches the job on a death, and re-hands a straggler's chunk. */
        char key[8192];
        queue_key(&o, dev, ds.n, key, sizeof key);
        queue_ctx qc = {ec, net, &ds, &o, order, shape, rank, odl_worker_coord_faults(wc), &batches, t};
        odl_eval_queue_ops ops = {&qc, queue_eval, queue_check};
        st = odl_eval_queue_run(coord, key, ds.n, o.batch, rank, &ops, &all, &all_n, &n_mine);
        if (st != ODL_OK) {
            odl_error_prefix("rank %d", rank);
            fprintf(stderr, "odl_worker: error: %s\n", odl_error_msg_user());
            rc = 1;
            goto out_free;
        }
    } else {
        st = eval_shard(ec, &ds, order, shape, lo, hi, rank, odl_worker_coord_faults(wc), &batches, &stats, t);
        n_mine = hi - lo;
        if (st != ODL_OK) odl_error_prefix("rank %d", rank);
        if (comm) st = odl_comm_agree(comm, st, stage);
        if (st != ODL_OK) goto out;
        if (comm) {
            stage = "gathering statistics";
            st = odl_comm_gather_host_bytes(comm, stats.p, stats.n, 0, (void **)&all, &all_n);
            if (st != ODL_OK) odl_comm_abort_job(comm, ODL_COMM_EXIT_ERROR, "%s", odl_error_msg_user());
        } else {
            all = stats.p;
            all_n = stats.n;
            stats.p = NULL;
        }
    }
    if (rank == 0) {
        st = report(net, &ds, &o, all, all_n);
        double wall = now_ms() - t_start;
        /* val.py: "Speed: %.1fms pre-process, %.1fms inference, %.1fms NMS per image" (rank 0's shard) */
        if (n_mine > 0) {
            double fwd_ms = 0, nms_ms = 0;
            int64_t nb = 0;
            const double loop = t[0] + t[1] + t[2], dev_ms = eval_ctx_device_ms(ec, &fwd_ms, &nms_ms, &nb);
            char busy[160] = "";
            if (dev_ms > 0)
                snprintf(busy, sizeof busy, "; device busy %.0f%% of the loop (per batch %.2f ms letterbox+forward, %.2f ms NMS)",
                         100 * dev_ms / loop, fwd_ms / nb, nms_ms / nb);
            fprintf(stderr,
                    "odl_worker: speed on rank 0: %.2f ms waiting for decode+letterbox, %.2f ms forward+NMS, "
                    "%.2f ms matching per image; pipeline %.1f images/s on rank 0%s; %d images in %.2f s wall (%.1f "
                    "images/s over %d rank(s))\n",
                    t[0] / n_mine, t[1] / n_mine, t[2] / n_mine, n_mine / (loop / 1e3), busy, ds.n, wall / 1e3,
                    ds.n / (wall / 1e3), world);
        }
    }
    if (comm && !coord) st = odl_comm_agree(comm, st, "writing the results");
out:
    if (st != ODL_OK) {
        if (rank == 0 || !comm) fprintf(stderr, "odl_worker: error: %s\n", odl_error_msg_user());
        rc = 1;
    } else {
        rc = 0;
    }
out_free:
    if (rc) odl_worker_coord_fail(wc, odl_error_msg_user());
    odl_worker_coord_finish(wc, NULL, rc);
    free(all);
    free(stats.p);
    free(order);
    free(shape);
    eval_ctx_free(ec);
    odl_det_dataset_free(&ds);
    odl_yolov5_free(net);
    if (comm && odl_comm_finalize(comm) != ODL_OK && rc == 0) {
        fprintf(stderr, "odl_worker: error: %s\n", odl_error_msg_user());
        rc = 1;
    }
    if (dev.type == ODL_DEV_CUDA) odl_cuda_shutdown();
    return rc;
}
