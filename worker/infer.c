/* odl_worker --task=infer: YOLOv5 detection on an image or a directory of images, as YOLOv5's
 * detect.py (letterbox, forward, NMS, boxes in original-image pixels), writing DIR/detections.json and,
 * unless --no-save-images, copies of the images with the boxes drawn.
 *
 * Exit status: 0 when every image was processed; 1 when the run could not start (bad weights, no
 * device) or when any image failed (the others are still processed and written; the failures are listed
 * at the end); 2 for a usage error. */
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "odl/clock.h"
#include "odl/json.h"
#include "odl/device.h"
#include "odl/image.h"
#include "odl/log.h"
#include "odl/nms.h"
#include "odl/pipeline.h"
#include "odl/yolov5.h"
#include "odl/strbuf.h"
#include "worker/cli.h"
#include "worker/detect.h"
#include "worker/outputs.h"
#include "worker/tasks.h"

#define MAX_CLASS_FILTER 1024

typedef struct infer_opts {
    const char *model, *weights, *input, *output, *device;
    int img_size, max_det, square, batch, save_images, half;
    int agnostic, save_txt, save_conf;
    int classes[MAX_CLASS_FILTER], n_classes; /* --classes: keep only these (detect.py) */
    float conf, iou;
} infer_opts;

static void infer_usage(FILE *f) {
    fprintf(f,
            "usage: odl_worker --task=infer --model=yolov5 --weights=W.h5 --source=IMAGE|DIR [options]\n"
            "  --source, --input   an image or a folder of images\n"
            "  --img-size N        letterbox size (default 640; rounded up to a multiple of the stride, 32)\n"
            "  --conf-thres X      confidence threshold (default 0.25)\n"
            "  --iou-thres X       NMS IoU threshold (default 0.45)\n"
            "  --max-det N         at most N boxes per image (default 1000)\n"
            "  --square            letterbox to an N x N square (default: minimum stride-32 padding)\n"
            "  --batch-size B      images per forward for a directory (default 8)\n"
            "  --half              float16 inference (YOLOv5's --half; tensor cores on CUDA)\n"
            "  --device D          auto (default), cpu, cuda or cuda:N\n"
            "  --output DIR        where detections.json and the drawn images go (default runs/detect)\n"
            "  --no-save-images    write detections.json only\n"
            "  --classes C [C ...] keep only these class ids (also --classes=0,2)\n"
            "  --agnostic-nms      NMS across classes\n"
            "  --save-txt          YOLO label files DIR/labels/NAME.txt (class cx cy w h, normalised)\n"
            "  --save-conf         with --save-txt, the confidence as a sixth column\n"
            "Weights: convert an official YOLOv5 .pt with tools/convert_yolov5.py.\n");
}

/* --classes 0 2 3 (detect.py's nargs='+') or --classes=0,2,3. Returns the index of the last argument
 * used, or -1 after printing an error. */
static int parse_classes(int argc, char **argv, int i, const char *inline_val, infer_opts *o) {
    char buf[4096];
    int last = i;
    if (inline_val) snprintf(buf, sizeof buf, "%s", inline_val);
    else {
        buf[0] = 0;
        for (int j = i + 1; j < argc && argv[j][0] != '-'; j++) {
            size_t n = strlen(buf);
            snprintf(buf + n, sizeof buf - n, "%s%s", n ? "," : "", argv[j]);
            last = j;
        }
    }
    char *save = NULL;
    for (char *t = strtok_r(buf, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
        int c;
        if (odl_cli_parse_int(t, 0, 1 << 20, &c) || o->n_classes == MAX_CLASS_FILTER) {
            fprintf(stderr, "odl_worker: error: --classes '%s': expected class ids (integers >= 0)\n", t);
            return -1;
        }
        o->classes[o->n_classes++] = c;
    }
    if (!o->n_classes) {
        fprintf(stderr, "odl_worker: error: --classes needs at least one class id\n");
        return -1;
    }
    return last;
}

/* Returns 0 ok, 2 usage error (message printed), 3 for --help. A flag given twice (under any of its
 * names, --input/--source) is an error; a mistyped one gets a "did you mean". */
static int parse_opts(int argc, char **argv, infer_opts *o) {
    memset(o, 0, sizeof *o);
    o->model = "yolov5";
    o->output = "runs/detect";
    o->device = "auto";
    o->img_size = 640;
    o->max_det = 1000;
    o->batch = 8;
    o->save_images = 1;
    o->conf = 0.25f;
    o->iou = 0.45f;
    const char *task = NULL; /* handled by main() */
    const odl_cli_opt opts[] = {
        ODL_CLI_STR_OPT("--task", NULL, &task),
        ODL_CLI_STR_OPT("--model", NULL, &o->model),
        ODL_CLI_STR_OPT("--weights", NULL, &o->weights),
        ODL_CLI_STR_OPT("--source", NULL, &o->input), /* detect.py's --source */
        ODL_CLI_STR_OPT("--input", "--source", &o->input),
        ODL_CLI_STR_OPT("--output", NULL, &o->output),
        ODL_CLI_STR_OPT("--device", NULL, &o->device),
        ODL_CLI_INT_OPT("--img-size", NULL, &o->img_size, 1, 8192, "an integer in 1..8192"),
        ODL_CLI_INT_OPT("--imgsz", "--img-size", &o->img_size, 1, 8192, "an integer in 1..8192"),
        ODL_CLI_INT_OPT("--img", "--img-size", &o->img_size, 1, 8192, "an integer in 1..8192"),
        ODL_CLI_INT_OPT("--max-det", NULL, &o->max_det, 1, 100000, "an integer in 1..100000"),
        ODL_CLI_INT_OPT("--batch-size", NULL, &o->batch, 1, 4096, "an integer in 1..4096"),
        ODL_CLI_FLOAT_OPT("--conf-thres", NULL, &o->conf, 0, 1, "a number in [0, 1]"),
        ODL_CLI_FLOAT_OPT("--iou-thres", NULL, &o->iou, 0, 1, "a number in [0, 1]"),
        ODL_CLI_BOOL_OPT("--square", &o->square, 1),
        ODL_CLI_BOOL_OPT("--half", &o->half, 1),
        ODL_CLI_BOOL_OPT("--agnostic-nms", &o->agnostic, 1),
        ODL_CLI_BOOL_OPT("--save-txt", &o->save_txt, 1),
        ODL_CLI_BOOL_OPT("--save-conf", &o->save_conf, 1),
        ODL_CLI_BOOL_OPT("--no-save-images", &o->save_images, 0),
    };
    const size_t n_opts = sizeof opts / sizeof *opts;
    static const char *const extra[] = {"classes", "verbose", "help"};
    odl_cli_seen seen;
    memset(&seen, 0, sizeof seen);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return 3;
        if (!strcmp(a, "--verbose") || !strcmp(a, "-v")) {
            if (odl_cli_once(&seen, "--verbose", a)) return 2;
            odl_log_set_level(ODL_LOG_LEVEL_DEBUG);
            continue;
        }
        if (!strcmp(a, "--classes") || !strncmp(a, "--classes=", 10)) {
            if (odl_cli_once(&seen, "--classes", a)) return 2;
            int last = parse_classes(argc, argv, i, a[9] == '=' ? a + 10 : NULL, o);
            if (last < 0) return 2;
            i = last;
            continue;
        }
        int r = odl_cli_take(argc, argv, &i, opts, n_opts, &seen);
        if (r < 0) return 2;
        if (r) continue;
        odl_cli_reject(a, opts, n_opts, extra, sizeof extra / sizeof *extra, "--task=infer --help");
        return 2;
    }
    if (strcmp(o->model, "yolov5") != 0) {
        fprintf(stderr, "odl_worker: error: --task=infer supports --model=yolov5, not '%s'\n", o->model);
        return 2;
    }
    if (!o->weights) {
        fprintf(stderr, "odl_worker: error: --task=infer needs --weights=W.h5 (convert a .pt with tools/convert_yolov5.py)\n");
        return 2;
    }
    if (!o->input) {
        fprintf(stderr, "odl_worker: error: --task=infer needs --source=IMAGE|DIR (or --input)\n");
        return 2;
    }
    if (o->save_conf && !o->save_txt) {
        fprintf(stderr, "odl_worker: error: --save-conf goes with --save-txt\n");
        return 2;
    }
    return 0;
}

/* ---- input listing ---- */
typedef struct path_list {
    char **v;
    int n, cap;
} path_list;

static int list_push(path_list *l, const char *s) {
    if (l->n == l->cap) {
        int nc = l->cap ? l->cap * 2 : 64;
        char **nv = realloc(l->v, sizeof(char *) * nc);
        if (!nv) return -1;
        l->v = nv;
        l->cap = nc;
    }
    l->v[l->n] = strdup(s);
    return l->v[l->n] ? (l->n++, 0) : -1;
}
static void list_free(path_list *l) {
    for (int i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
    l->v = NULL;
    l->n = l->cap = 0;
}
static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Extensions YOLOv5's LoadImages takes from a directory (utils/dataloaders.py IMG_FORMATS); other files
 * are ignored there as here. Of these, JPEG and PNG are decoded; the others are reported as failures. */
static int image_ext(const char *name) {
    static const char *const ext[] = {"jpg", "jpeg", "png", "bmp", "dng", "mpo", "tif", "tiff", "webp", "pfm"};
    const char *d = strrchr(name, '.');
    if (!d) return 0;
    for (size_t i = 0; i < sizeof ext / sizeof *ext; i++)
        if (!strcasecmp(d + 1, ext[i])) return 1;
    return 0;
}

static odl_status list_inputs(const char *input, path_list *out, int *is_dir) {
    struct stat sb;
    *is_dir = 0;
    if (stat(input, &sb) != 0)
        return ODL_ERR(errno == ENOENT ? ODL_E_NOTFOUND : ODL_E_IO, "--input %s: %s", input, strerror(errno));
    if (!S_ISDIR(sb.st_mode)) {
        if (list_push(out, input)) return ODL_ERR(ODL_E_NOMEM, "input list");
        return ODL_OK;
    }
    *is_dir = 1;
    DIR *d = opendir(input);
    if (!d) return ODL_ERR(ODL_E_IO, "--input %s: cannot read the directory: %s", input, strerror(errno));
    struct dirent *e;
    char buf[4096];
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' || !image_ext(e->d_name)) continue;
        snprintf(buf, sizeof buf, "%s/%s", input, e->d_name);
        if (list_push(out, buf)) {
            closedir(d);
            return ODL_ERR(ODL_E_NOMEM, "input list");
        }
    }
    closedir(d);
    qsort(out->v, (size_t)out->n, sizeof(char *), cmp_str);
    if (out->n == 0) return ODL_ERR(ODL_E_NOTFOUND, "--input %s: no images (jpg, jpeg, png) in the directory", input);
    return ODL_OK;
}

static const char *base_name(const char *p) {
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

/* ---- per-image state ---- */
typedef struct item {
    const char *path;
    odl_image img, lb;
    odl_letterbox geo;
    odl_detection *det;
    int ndet;
    int ok;      /* decoded and letterboxed */
    int done;    /* detections computed */
    double fwd_ms; /* this image's share of its batch's forward */
    char err[1024];
} item;

static void item_release(item *it) {
    odl_image_free(&it->img);
    odl_image_free(&it->lb);
}

/* Decode and letterbox items[start + k] (odl_prep_pool_for runs it on the pool's threads). */
typedef struct decode_ctx {
    item *items;
    char **paths;
    int start;
    const infer_opts *o;
    int stride;
} decode_ctx;
static void decode_one(void *ctx, int k) {
    decode_ctx *c = ctx;
    item *it = &c->items[c->start + k];
    it->path = c->paths[c->start + k];
    odl_error_clear();
    if (odl_image_load(it->path, &it->img) != ODL_OK ||
        odl_image_letterbox(&it->img, c->o->img_size, !c->o->square, c->stride, 114, &it->lb, &it->geo) != ODL_OK) {
        snprintf(it->err, sizeof it->err, "%s", odl_error_msg_user());
        item_release(it);
        return;
    }
    it->ok = 1;
}

/* Run the network on items[idx[0..n)] which share one letterboxed size (worker/detect.h), and map the
 * kept boxes back to each original image. host_in: the batch's CHW input, grown on demand; det, nd, bad:
 * room for n images. */
static odl_status run_group(odl_detector *dt, item *items, const int *idx, int n, const infer_opts *o, float **host_in,
                            size_t *host_in_cap, odl_detection *det, int *nd, int64_t *bad, double *t_fwd,
                            double *t_nms) {
    const int H = items[idx[0]].lb.height, W = items[idx[0]].lb.width;
    const size_t per = (size_t)3 * H * W;
    if (*host_in_cap < per * n) {
        free(*host_in);
        *host_in = malloc(sizeof(float) * per * n);
        *host_in_cap = *host_in ? per * n : 0;
        if (!*host_in) return ODL_ERR(ODL_E_NOMEM, "input batch of %d x %zu floats", n, per);
    }
    for (int b = 0; b < n; b++) odl_image_to_chw(&items[idx[b]].lb, *host_in + per * b);
    odl_nms_params p = odl_nms_defaults();
    p.conf_thres = o->conf;
    p.iou_thres = o->iou;
    p.max_det = o->max_det;
    p.agnostic = o->agnostic;
    p.classes = o->n_classes ? o->classes : NULL;
    p.n_classes = o->n_classes;
    const odl_detect_batch batch = {n, H, W, *host_in, NULL, NULL};
    double t0 = odl_mono_ms(), fwd = 0;
    ODL_CHECK(odl_detector_run(dt, &batch, &p, det, nd, bad, &fwd));
    for (int b = 0; b < n; b++) {
        item *it = &items[idx[b]];
        if (bad[b]) { /* broken weights or input: the image fails (exit status 1), its boxes are not written */
            snprintf(it->err, sizeof it->err, "%s: the model output has NaN or Inf in %lld of %lld rows (broken weights or "
                     "input); the image is left out of detections.json", it->path, (long long)bad[b], (long long)dt->rows);
            it->ok = 0;
            continue;
        }
        it->det = malloc(sizeof(odl_detection) * (size_t)(nd[b] ? nd[b] : 1));
        if (!it->det) return ODL_ERR(ODL_E_NOMEM, "detections");
        it->ndet = nd[b];
        for (int k = 0; k < it->ndet; k++) {
            odl_detection d = det[(size_t)b * o->max_det + k];
            float bx[4] = {d.x1, d.y1, d.x2, d.y2};
            odl_letterbox_unmap(&it->geo, bx);
            d.x1 = bx[0];
            d.y1 = bx[1];
            d.x2 = bx[2];
            d.y2 = bx[3];
            it->det[k] = d;
        }
        it->done = 1;
        it->fwd_ms = fwd / n;
    }
    *t_fwd += fwd;
    *t_nms += odl_mono_ms() - t0 - fwd;
    return ODL_OK;
}

/* NAME without its extension (detect.py's Path.stem). */
static void stem_of(const char *path, char *out, size_t cap) {
    snprintf(out, cap, "%s", base_name(path));
    char *dot = strrchr(out, '.');
    if (dot && dot != out) *dot = 0;
}

/* detect.py's per-image line: "image 1/10 PATH: 640x480 4 persons, 1 bus, 3.1ms" (letterboxed height x
 * width; per class in class order, "s" when more than one; "(no detections), " when none; the forward
 * time of the image). */
static void log_image_line(const odl_yolov5 *net, const item *it, int i, int n) {
    char buf[4096];
    odl_strbuf b;
    odl_strbuf_fixed(&b, buf, sizeof buf);
    odl_strbuf_printf(&b, "image %d/%d %s: %dx%d ", i + 1, n, it->path, it->lb.height, it->lb.width);
    const int nc = odl_yolov5_num_classes(net);
    for (int c = 0; c < nc; c++) {
        int cnt = 0;
        for (int d = 0; d < it->ndet; d++) cnt += it->det[d].class_id == c;
        if (cnt) odl_strbuf_printf(&b, "%d %s%s, ", cnt, odl_yolov5_class_name(net, c), cnt > 1 ? "s" : "");
    }
    if (!it->ndet) odl_strbuf_printf(&b, "(no detections), ");
    odl_strbuf_printf(&b, "%.1fms", it->fwd_ms);
    ODL_LOG_INFO("%s", buf);
}

/* --save-txt: DIR/labels/STEM.txt as detect.py writes it: a line "class cx cy w h [conf]" per box, in
 * increasing confidence (its reversed(det)), centre and size normalised by the original image, '%g'. */
static odl_status save_txt(const item *it, const char *outdir, int with_conf) {
    char path[4096], stem[1024];
    stem_of(it->path, stem, sizeof stem);
    snprintf(path, sizeof path, "%s/labels/%s.txt", outdir, stem);
    FILE *f = fopen(path, "w");
    if (!f) return ODL_ERR(ODL_E_IO, "%s: cannot write: %s", path, strerror(errno));
    const double gw = it->geo.src_w, gh = it->geo.src_h;
    for (int k = it->ndet - 1; k >= 0; k--) {
        const odl_detection *d = &it->det[k];
        fprintf(f, "%d %g %g %g %g", d->class_id, (d->x1 + d->x2) / 2.0 / gw, (d->y1 + d->y2) / 2.0 / gh,
                (d->x2 - d->x1) / gw, (d->y2 - d->y1) / gh);
        if (with_conf) fprintf(f, " %g", d->conf);
        fputc('\n', f);
    }
    if (fclose(f) != 0) return ODL_ERR(ODL_E_IO, "%s: write failed: %s", path, strerror(errno));
    return ODL_OK;
}

static odl_status save_drawn(const odl_yolov5 *net, item *it, const char *outdir) {
    /* detect.py's line width; the text at least 2 (14 px) on images of 320 px and more, so a label reads
     * at any size; odl_image_label_box keeps it inside the image. */
    int lw = (int)nearbyint((it->img.width + it->img.height) / 2.0 * 0.003);
    if (lw < 2) lw = 2;
    const int small = it->img.width < 320 || it->img.height < 320;
    const int text_scale = lw > 2 ? lw - 1 : small ? 1 : 2;
    for (int k = 0; k < it->ndet; k++) {
        const odl_detection *d = &it->det[k];
        uint8_t c[3];
        odl_class_color(d->class_id, c);
        char label[128];
        snprintf(label, sizeof label, "%s %.2f", odl_yolov5_class_name(net, d->class_id), d->conf);
        odl_image_draw_box(&it->img, d->x1, d->y1, d->x2, d->y2, c, lw, label, text_scale);
    }
    char path[4096], name[1024];
    snprintf(name, sizeof name, "%s", base_name(it->path));
    char *dot = strrchr(name, '.');
    if (dot && (!strcasecmp(dot, ".jpg") || !strcasecmp(dot, ".jpeg"))) *dot = 0;
    snprintf(path, sizeof path, "%s/%s.jpg", outdir, name);
    return odl_image_save_jpeg(&it->img, path, 95);
}

/* DIR/detections.json through jansson: one object per processed image, one image per line. Coordinates
 * are in original-image pixels with 4 decimals, confidences with 5; NMS never keeps a non-finite box,
 * and odl_json_num would write null for one. */
static odl_status write_detections(const char *path, const odl_yolov5 *net, const item *items, int n) {
    FILE *f = fopen(path, "w");
    if (!f) return ODL_ERR(ODL_E_IO, "%s: cannot write: %s", path, strerror(errno));
    odl_status s = ODL_OK;
    int first = 1;
    if (fputs("[", f) == EOF) s = ODL_ERR(ODL_E_IO, "%s: write failed", path);
    for (int i = 0; i < n && s == ODL_OK; i++) {
        const item *it = &items[i];
        if (!it->done) continue;
        json_t *dets = json_array();
        for (int k = 0; k < it->ndet; k++) {
            const odl_detection *d = &it->det[k];
            json_array_append_new(dets, json_pack("{s:[o,o,o,o],s:o,s:i,s:s}", "xyxy", odl_json_num(d->x1, 4),
                                                  odl_json_num(d->y1, 4), odl_json_num(d->x2, 4), odl_json_num(d->y2, 4),
                                                  "conf", odl_json_num(d->conf, 5), "class_id", d->class_id, "class_name",
                                                  odl_yolov5_class_name(net, d->class_id)));
        }
        json_t *o = json_pack("{s:s,s:i,s:i,s:o}", "file", base_name(it->path), "width", it->geo.src_w, "height",
                              it->geo.src_h, "detections", dets);
        char *line = o ? json_dumps(o, ODL_JSON_FLAGS) : NULL;
        if (!line) s = ODL_ERR(ODL_E_INTERNAL, "%s: cannot encode the detections of %s", path, it->path);
        else if (fprintf(f, "%s\n  %s", first ? "" : ",", line) < 0) s = ODL_ERR(ODL_E_IO, "%s: write failed", path);
        first = 0;
        free(line);
        json_decref(o);
    }
    if (s == ODL_OK && fputs("\n]\n", f) == EOF) s = ODL_ERR(ODL_E_IO, "%s: write failed", path);
    if (fclose(f) != 0 && s == ODL_OK) s = ODL_ERR(ODL_E_IO, "%s: write failed: %s", path, strerror(errno));
    return s;
}

/* One run of --task=infer, for its phases below. */
typedef struct infer_run {
    infer_opts o;
    odl_device dev;
    odl_yolov5 *net;
    path_list files;
    int is_dir, stride, batch;
    item *items;
    odl_prep_pool *pool;
    odl_detector dt;
    int have_dt;
    float *hin;
    size_t hin_cap;
    odl_detection *det; /* room for a batch: batch x max_det */
    int *nd;
    int64_t *bad;
    int n_fail;
    double t_pre, t_fwd, t_nms;
} infer_run;

/* Phase 1: outputs checked, device, weights, the inputs listed, folders made, buffers. Each failure
 * prints its one line; returns 0 or 1. */
static int infer_setup(infer_run *r) {
    infer_opts *o = &r->o;
    if (odl_output_check_dir("--output", o->output) != ODL_OK || odl_cli_pick_device(o->device, &r->dev) != ODL_OK) {
        fprintf(stderr, "odl_worker: error: %s\n", odl_error_msg_user());
        return 1;
    }
    if (odl_yolov5_load(o->weights, r->dev, &r->net) != ODL_OK) {
        fprintf(stderr, "odl_worker: error: --weights %s\n", odl_error_msg_user());
        return 1;
    }
    if (o->half && odl_yolov5_set_half(r->net, 1) != ODL_OK) {
        fprintf(stderr, "odl_worker: error: --half: %s\n", odl_error_msg_user());
        return 1;
    }
    char labels_dir[4096];
    snprintf(labels_dir, sizeof labels_dir, "%s/labels", o->output);
    if (list_inputs(o->input, &r->files, &r->is_dir) != ODL_OK || odl_output_mkdir_p("--output", o->output) != ODL_OK ||
        (o->save_txt && odl_output_mkdir_p("--output", labels_dir) != ODL_OK)) {
        fprintf(stderr, "odl_worker: error: %s\n", odl_error_msg_user());
        return 1;
    }
    r->stride = odl_yolov5_max_stride(r->net);
    if (o->img_size % r->stride) { /* detect.py's check_img_size */
        int up = (o->img_size + r->stride - 1) / r->stride * r->stride;
        ODL_LOG_WARN("--img-size %d must be multiple of max stride %d, updating to %d", o->img_size, r->stride, up);
        o->img_size = up;
    }
    for (int c = 0; c < o->n_classes; c++)
        if (o->classes[c] >= odl_yolov5_num_classes(r->net))
            ODL_LOG_WARN("--classes %d: the model has classes 0..%d", o->classes[c], odl_yolov5_num_classes(r->net) - 1);
    ODL_LOG_INFO("yolov5 %s on %s, %s: %d classes, %lld parameters; %d image(s), %s letterbox %d",
            o->weights, odl_device_name(r->dev), o->half ? "float16" : "float32", odl_yolov5_num_classes(r->net),
            (long long)odl_yolov5_num_params(r->net), r->files.n, o->square ? "square" : "rectangular", o->img_size);
    r->batch = r->is_dir ? o->batch : 1;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    r->items = calloc((size_t)r->files.n, sizeof(item));
    r->det = malloc(sizeof *r->det * (size_t)o->max_det * r->batch);
    r->nd = malloc(sizeof *r->nd * (size_t)r->batch);
    r->bad = malloc(sizeof *r->bad * (size_t)r->batch);
    if (!r->items || !r->det || !r->nd || !r->bad) {
        fprintf(stderr, "odl_worker: error: out of memory for %d images\n", r->files.n);
        return 1;
    }
    if (odl_prep_pool_create(r->batch > 1 ? (int)(cores < 1 ? 1 : cores > 8 ? 8 : cores) : 0, &r->pool) != ODL_OK ||
        odl_detector_init(&r->dt, r->net, 0) != ODL_OK) { /* NMS on the host, as detect.py */
        fprintf(stderr, "odl_worker: error: %s\n", odl_error_msg_user());
        return 1;
    }
    r->have_dt = 1;
    return 0;
}

/* Phase 2, for images [start, end): decode and letterbox them on the pool, detect in groups of one
 * letterboxed size (rectangular letterboxes differ), then detect.py's line and the files of each. */
static int infer_chunk(infer_run *r, int start, int end) {
    item *items = r->items;
    double t0 = odl_mono_ms();
    decode_ctx dc = {items, r->files.v, start, &r->o, r->stride};
    if (odl_prep_pool_for(r->pool, end - start, decode_one, &dc) != ODL_OK) { /* decoding on a thread pool */
        fprintf(stderr, "odl_worker: error: %s\n", odl_error_msg_user());
        return 1;
    }
    r->t_pre += odl_mono_ms() - t0;
    int *idx = malloc(sizeof(int) * (size_t)(end - start)), rc = 0;
    char *used = calloc((size_t)(end - start), 1);
    if (!idx || !used) {
        free(idx);
        free(used);
        fprintf(stderr, "odl_worker: error: out of memory\n");
        return 1;
    }
    for (int i = start; i < end && !rc; i++) {
        if (!items[i].ok || used[i - start]) continue;
        int n = 0;
        for (int j = i; j < end; j++)
            if (items[j].ok && !used[j - start] && items[j].lb.width == items[i].lb.width &&
                items[j].lb.height == items[i].lb.height) {
                idx[n++] = j;
                used[j - start] = 1;
            }
        if (run_group(&r->dt, items, idx, n, &r->o, &r->hin, &r->hin_cap, r->det, r->nd, r->bad, &r->t_fwd, &r->t_nms) !=
            ODL_OK) { /* a failed forward is not an image's fault: stop */
            fprintf(stderr, "odl_worker: error: inference on %s: %s\n", items[i].path, odl_error_msg_user());
            rc = 1;
        }
    }
    free(idx);
    free(used);
    if (rc) return rc;
    for (int i = start; i < end; i++) {
        item *it = &items[i];
        if (!it->ok) {
            fprintf(stderr, "odl_worker: error: %s\n", it->err);
            r->n_fail++;
            continue;
        }
        log_image_line(r->net, it, i, r->files.n);
        if ((r->o.save_txt && save_txt(it, r->o.output, r->o.save_conf) != ODL_OK) ||
            (r->o.save_images && save_drawn(r->net, it, r->o.output) != ODL_OK)) {
            snprintf(it->err, sizeof it->err, "%s", odl_error_msg_user());
            fprintf(stderr, "odl_worker: error: %s\n", it->err);
            r->n_fail++;
        }
        odl_image_free(&it->lb);
        odl_image_free(&it->img);
    }
    return 0;
}

/* Phase 3: detections.json, the summary, and every failed image named. Returns the exit status. */
static int infer_report(infer_run *r) {
    char jpath[4096];
    snprintf(jpath, sizeof jpath, "%s/detections.json", r->o.output);
    if (write_detections(jpath, r->net, r->items, r->files.n) != ODL_OK) {
        fprintf(stderr, "odl_worker: error: %s\n", odl_error_msg_user());
        return 1;
    }
    ODL_LOG_INFO("%d image(s) done, %d failed; %.1f ms decode+letterbox, %.1f ms forward, %.1f ms NMS in all; results "
                 "in %s%s", r->files.n - r->n_fail, r->n_fail, r->t_pre, r->t_fwd, r->t_nms, jpath,
                 r->o.save_txt ? " and labels/" : "");
    if (!r->n_fail) return 0;
    fprintf(stderr, "odl_worker: error: %d of %d image(s) failed:\n", r->n_fail, r->files.n);
    for (int i = 0; i < r->files.n; i++)
        if (r->items[i].err[0]) fprintf(stderr, "  %s\n", r->items[i].err);
    return 1;
}

/* Phase 4, in reverse order of set-up. */
static void infer_teardown(infer_run *r) {
    odl_prep_pool_free(r->pool);
    if (r->have_dt) odl_detector_free(&r->dt);
    if (r->items) {
        for (int i = 0; i < r->files.n; i++) {
            item_release(&r->items[i]);
            free(r->items[i].det);
        }
        free(r->items);
    }
    free(r->hin);
    free(r->det);
    free(r->nd);
    free(r->bad);
    list_free(&r->files);
    odl_yolov5_free(r->net);
    if (r->dev.type == ODL_DEV_CUDA) odl_cuda_shutdown();
}

int odl_task_infer_main(int argc, char **argv) {
    static infer_run r; /* large: not on the stack */
    memset(&r, 0, sizeof r);
    int pr = parse_opts(argc, argv, &r.o);
    if (pr == 3) {
        infer_usage(stdout);
        return 0;
    }
    if (pr) return 2;
    r.dev = odl_cpu();
    int rc = infer_setup(&r);
    for (int start = 0; !rc && start < r.files.n; start += r.batch)
        rc = infer_chunk(&r, start, start + r.batch < r.files.n ? start + r.batch : r.files.n);
    if (!rc) rc = infer_report(&r);
    infer_teardown(&r);
    return rc;
}
