/* odl_worker --task=infer: YOLOv5 detection on an image or a directory of images, as YOLOv5's
 * detect.py (letterbox, forward, NMS, boxes in original-image pixels), writing DIR/detections.json and,
 * unless --no-save-images, copies of the images with the boxes drawn.
 *
 * Exit status: 0 when every image was processed; 1 when the run could not start (bad weights, no
 * device) or when any image failed (the others are still processed and written; the failures are listed
 * at the end); 2 for a usage error. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "odl/backend.h"
#include "odl/clock.h"
#include "odl/device.h"
#include "odl/gpu_prep.h"
#include "odl/image.h"
#include "odl/json.h"
#include "odl/log.h"
#include "odl/nms.h"
#include "odl/pipeline.h"
#include "odl/strbuf.h"
#include "odl/yolov5.h"
#include "worker/cli.h"
#include "worker/outputs.h"
#include "worker/tasks.h"

#define MAX_CLASS_FILTER 1024

typedef struct infer_opts {
    const char *model, *weights, *input, *output, *device, *decoder, *precision_name, *cuda_graph_name;
    int cuda_graph; /* --cuda-graph on: the forward replayed from CUDA graphs (odl_yolov5_set_graphs) */
    odl_precision precision; /* --precision: the float32 network's convolutions */
    int img_size, max_det, square, batch, save_images, half, backend_post;
    int agnostic, save_txt, save_conf;
    int classes[MAX_CLASS_FILTER], n_classes; /* --classes: keep only these (detect.py) */
    float conf, iou;
    float pool_fraction; /* memory.preallocate_fraction; 0: the pool grows on demand */
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
            "  --precision P       fp32 (default), tf32 or bf16: the float32 network's convolutions on tensor cores\n"
            "                      with TF32 / BF16 operands, float32 accumulation (docs/PRECISION.md)\n"
            "  --device D          auto (default), cpu, cuda or cuda:N\n"
            "  --memory.preallocate_fraction F  GPU memory the pool reserves at start (default 0: grow on demand)\n"
            "  --output DIR        where detections.json and the drawn images go (default runs/detect)\n"
            "  --no-save-images    write detections.json only\n"
            "  --classes C [C ...] keep only these class ids (also --classes=0,2)\n"
            "  --agnostic-nms      NMS across classes\n"
            "  --save-txt          YOLO label files DIR/labels/NAME.txt (class cx cy w h, normalised)\n"
            "  --save-conf         with --save-txt, the confidence as a sixth column\n"
            "  --decoder D         auto (default: nvjpeg for runs of 64 images or more, else cpu), nvjpeg (JPEGs on\n"
            "                      the GPU with nvJPEG where it is there, the rest on CPU threads) or cpu (libjpeg-turbo)\n"
            "  --backend-post      on the CPU too, the device pipeline (letterbox and candidate rows through the\n"
            "                      backend entries, as CUDA does; a check of that path: the detections are the same)\n"
            "  --cuda-graph on|off replay the forward of each batch shape from a CUDA graph (captured at its second\n"
            "                      batch; default off: not yet measured on a GPU; the boxes are bitwise the same)\n"
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
    o->decoder = "auto";
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
        ODL_CLI_POOL_OPTS(&o->pool_fraction),
        ODL_CLI_BOOL_OPT("--square", &o->square, 1),
        ODL_CLI_BOOL_OPT("--half", &o->half, 1),
        ODL_CLI_BOOL_OPT("--agnostic-nms", &o->agnostic, 1),
        ODL_CLI_BOOL_OPT("--save-txt", &o->save_txt, 1),
        ODL_CLI_BOOL_OPT("--save-conf", &o->save_conf, 1),
        ODL_CLI_BOOL_OPT("--no-save-images", &o->save_images, 0),
        ODL_CLI_BOOL_OPT("--backend-post", &o->backend_post, 1),
        ODL_CLI_STR_OPT("--decoder", NULL, &o->decoder),
        ODL_CLI_STR_OPT("--precision", NULL, &o->precision_name),
        ODL_CLI_STR_OPT("--cuda-graph", NULL, &o->cuda_graph_name),
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
    if (odl_cli_yolo_precision(o->precision_name, o->half, &o->precision)) return 2;
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
    if (odl_cli_cuda_graph(o->cuda_graph_name, &o->cuda_graph)) return 2;
    return odl_cli_check_decoder(o->decoder);
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
        return ODL_ERR(errno == ENOENT ? ODL_E_NOTFOUND : ODL_E_IO, "--source %s: %s", input, strerror(errno));
    if (!S_ISDIR(sb.st_mode)) {
        if (list_push(out, input)) return ODL_ERR(ODL_E_NOMEM, "input list");
        return ODL_OK;
    }
    *is_dir = 1;
    DIR *d = opendir(input);
    if (!d) return ODL_ERR(ODL_E_IO, "--source %s: cannot read the directory: %s", input, strerror(errno));
    struct dirent *e;
    char buf[4096];
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' || !image_ext(e->d_name)) continue;
        const size_t n = strlen(input); /* "images/" as "images": one slash before the name */
        snprintf(buf, sizeof buf, "%s%s%s", input, n && input[n - 1] == '/' ? "" : "/", e->d_name);
        if (list_push(out, buf)) {
            closedir(d);
            return ODL_ERR(ODL_E_NOMEM, "input list");
        }
    }
    closedir(d);
    qsort(out->v, (size_t)out->n, sizeof(char *), cmp_str);
    if (out->n == 0) return ODL_ERR(ODL_E_NOTFOUND, "--source %s: no images (jpg, jpeg, png) in the directory", input);
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

/* detect.py's NMS settings from the options. */
static odl_nms_params nms_params(const infer_opts *o) {
    odl_nms_params p = odl_nms_defaults();
    p.conf_thres = o->conf;
    p.iou_thres = o->iou;
    p.max_det = o->max_det;
    p.agnostic = o->agnostic;
    p.classes = o->n_classes ? o->classes : NULL;
    p.n_classes = o->n_classes;
    return p;
}

/* The image's boxes from `n_rows` prediction rows (all of its rows, or the candidates among them: the
 * NMS takes only those), mapped back to the image; `bad` of its all_rows rows have a NaN or an infinity,
 * and then the image fails (exit status 1) and its boxes are not written. */
static odl_status item_detect(item *it, const float *pred, int64_t n_rows, int nc, int64_t bad, int64_t all_rows,
                              const odl_nms_params *p, int max_det) {
    it->det = malloc(sizeof(odl_detection) * (size_t)max_det);
    if (!it->det) return ODL_ERR(ODL_E_NOMEM, "detections");
    if (bad) { /* broken weights or input */
        snprintf(it->err, sizeof it->err, "%s: the model output has NaN or Inf in %lld of %lld rows (broken weights or "
                 "input); the image is left out of detections.json", it->path, (long long)bad, (long long)all_rows);
        it->ok = 0;
        return ODL_OK;
    }
    ODL_CHECK(odl_yolo_nms(pred, n_rows, nc, p, it->det, max_det, &it->ndet));
    for (int k = 0; k < it->ndet; k++) {
        float bx[4] = {it->det[k].x1, it->det[k].y1, it->det[k].x2, it->det[k].y2};
        odl_letterbox_unmap(&it->geo, bx);
        it->det[k].x1 = bx[0];
        it->det[k].y1 = bx[1];
        it->det[k].x2 = bx[2];
        it->det[k].y2 = bx[3];
    }
    it->done = 1;
    return ODL_OK;
}

/* Run the network on items[idx[0..n)] which share one letterboxed size. */
static odl_status run_group(odl_yolov5 *net, item *items, const int *idx, int n, const infer_opts *o, float **host_in,
                            size_t *host_in_cap, float **host_out, size_t *host_out_cap, double *t_fwd, double *t_nms) {
    const int H = items[idx[0]].lb.height, W = items[idx[0]].lb.width;
    const size_t per = (size_t)3 * H * W;
    if (*host_in_cap < per * n) {
        free(*host_in);
        *host_in = malloc(sizeof(float) * per * n);
        *host_in_cap = *host_in ? per * n : 0;
        if (!*host_in) return ODL_ERR(ODL_E_NOMEM, "input batch of %d x %zu floats", n, per);
    }
    for (int b = 0; b < n; b++) odl_image_to_chw(&items[idx[b]].lb, *host_in + per * b);
    double t0 = odl_mono_ms();
    int64_t rows;
    int no;
    ODL_CHECK(odl_yolov5_forward_host(net, *host_in, n, H, W, host_out, host_out_cap, &rows, &no));
    double t1 = odl_mono_ms();
    const odl_nms_params p = nms_params(o);
    for (int b = 0; b < n; b++) {
        const float *pred = *host_out + (size_t)b * rows * no;
        ODL_CHECK(item_detect(&items[idx[b]], pred, rows, (int)no - 5, odl_yolo_nonfinite_rows(pred, rows, (int)no - 5), rows, &p,
                              o->max_det));
        items[idx[b]].fwd_ms = (t1 - t0) / n;
    }
    *t_fwd += t1 - t0;
    *t_nms += odl_mono_ms() - t1;
    return ODL_OK;
}

/* ---- the CPU path: decode and letterbox on the pool, then groups of one letterboxed size ---- */
static odl_status cpu_batch(odl_prep_pool *pool, odl_yolov5 *net, item *items, char **paths, int start, int end,
                            const infer_opts *o, int stride, float **hin, size_t *hin_cap, float **hout, size_t *hout_cap,
                            double *t_pre, double *t_fwd, double *t_nms) {
    double t0 = odl_mono_ms();
    decode_ctx dc = {items, paths, start, o, stride};
    ODL_CHECK(odl_prep_pool_for(pool, end - start, decode_one, &dc)); /* decoding on a thread pool */
    *t_pre += odl_mono_ms() - t0;
    /* Group images of one letterboxed size into one forward (rectangular letterboxes differ). */
    int idx[4096];
    char used[4096] = {0};
    for (int i = start; i < end; i++) {
        if (!items[i].ok || used[i - start]) continue;
        int n = 0;
        for (int j = i; j < end; j++)
            if (items[j].ok && !used[j - start] && items[j].lb.width == items[i].lb.width &&
                items[j].lb.height == items[i].lb.height) {
                idx[n++] = j;
                used[j - start] = 1;
            }
        odl_status st = run_group(net, items, idx, n, o, hin, hin_cap, hout, hout_cap, t_fwd, t_nms);
        if (st != ODL_OK) {
            odl_error_prefix("inference on %s", items[i].path);
            return st;
        }
    }
    return ODL_OK;
}

/* ---- the device path (CUDA, or the CPU with --backend-post): the device image pipeline ----
 * (odl/gpu_prep.h: nvJPEG unless --decoder cpu, the rest on CPU threads; letterbox on the device) and
 * the backend's yolo_candidates, so that only the rows NMS can take come back to the host, where
 * odl_yolo_nms runs as on the CPU path. Groups of one letterbox size go through two at a time: the next
 * group decodes while one computes. */
typedef struct dev_infer {
    odl_gpu_prep *gp;
    const odl_backend *be;
    odl_device dev;
    int B, cap;                       /* images per group, candidate rows per image */
    float *d_rows, *h_rows, *h_all;   /* candidates on the device and back; all rows of an overflowing image */
    size_t h_all_cap;
    int32_t *d_cnt, *h_cnt, *d_bad, *h_bad;
    odl_prep_job *jobs[2];
    odl_prep_result *res[2];
    int *gidx[2], gn[2];              /* the items of the groups in flight */
    odl_gpu_prep_batch *b[2];
    char note[1400];
} dev_infer;

static void dev_infer_free(dev_infer *d) {
    if (!d) return;
    odl_gpu_prep_free(d->gp);
    odl_mem_free(d->dev, d->d_rows);
    odl_mem_free(d->dev, d->d_cnt);
    odl_mem_free(d->dev, d->d_bad);
    odl_host_free_pinned(d->h_rows);
    odl_host_free_pinned(d->h_cnt);
    odl_host_free_pinned(d->h_bad);
    free(d->h_all);
    for (int s = 0; s < 2; s++) {
        free(d->jobs[s]);
        free(d->res[s]);
        free(d->gidx[s]);
    }
    free(d);
}

/* --decoder auto takes nvJPEG for runs of at least this many images. Its set-up (the H200's hardware
 * decoder) took 630 ms in a one-image run, where libjpeg-turbo decodes bus.jpg in 11 ms and nvJPEG in
 * 1.3 ms (bench/results/2026-12-02/eval.md): below about 64 images the CPU decodes sooner. */
#define NVJPEG_MIN_IMAGES 64

static odl_status dev_infer_create(odl_yolov5 *net, const infer_opts *o, int B, int threads, int n_images,
                                   dev_infer **out) {
    dev_infer *d = calloc(1, sizeof *d);
    if (!d) return ODL_ERR(ODL_E_NOMEM, "device pipeline");
    odl_status st = ODL_OK;
    d->dev = odl_yolov5_device(net);
    d->B = B;
    d->cap = 4096;
    const size_t no = (size_t)odl_yolov5_num_classes(net) + 5, rows = (size_t)B * d->cap * no;
    if (!(d->be = odl_backend_for(d->dev))) {
        st = ODL_ERR(ODL_E_NODEV, "%s", odl_error_msg_user());
        goto fail;
    }
    const int few = strcmp(o->decoder, "auto") == 0 && n_images < NVJPEG_MIN_IMAGES; /* --decoder nvjpeg: any */
    const odl_gpu_prep_options po = {.threads = threads, .max_batch = B,
                                     .nvjpeg = strcmp(o->decoder, "cpu") != 0 && !few, .keep_host = o->save_images,
                                     .cpu_share = strcmp(o->decoder, "auto") == 0 ? -1 : 0};
    ODL_CHECK_GOTO(odl_gpu_prep_create(d->dev, &po, &d->gp), st, fail);
    ODL_CHECK_GOTO(odl_mem_alloc(d->dev, sizeof(float) * rows, (void **)&d->d_rows), st, fail);
    ODL_CHECK_GOTO(odl_mem_alloc(d->dev, sizeof(int32_t) * (size_t)B, (void **)&d->d_cnt), st, fail);
    ODL_CHECK_GOTO(odl_mem_alloc(d->dev, sizeof(int32_t) * (size_t)B, (void **)&d->d_bad), st, fail);
    ODL_CHECK_GOTO(odl_host_alloc_pinned(sizeof(float) * rows, (void **)&d->h_rows), st, fail);
    ODL_CHECK_GOTO(odl_host_alloc_pinned(sizeof(int32_t) * (size_t)B, (void **)&d->h_cnt), st, fail);
    ODL_CHECK_GOTO(odl_host_alloc_pinned(sizeof(int32_t) * (size_t)B, (void **)&d->h_bad), st, fail);
    for (int s = 0; s < 2; s++) {
        d->jobs[s] = calloc((size_t)B, sizeof *d->jobs[s]);
        d->res[s] = calloc((size_t)B, sizeof *d->res[s]);
        d->gidx[s] = calloc((size_t)B, sizeof *d->gidx[s]);
        if (!d->jobs[s] || !d->res[s] || !d->gidx[s]) {
            st = ODL_ERR(ODL_E_NOMEM, "device pipeline");
            goto fail;
        }
    }
    if (few)
        snprintf(d->note, sizeof d->note,
                 "libjpeg-turbo on the CPU (--decoder auto with fewer than %d images, where nvJPEG's set-up costs more "
                 "than it saves; --decoder nvjpeg takes it); letterbox on %s",
                 NVJPEG_MIN_IMAGES, odl_device_name(d->dev));
    else
        snprintf(d->note, sizeof d->note, "%s; letterbox on %s", odl_gpu_prep_nvjpeg_note(d->gp), odl_device_name(d->dev));
    *out = d;
    return ODL_OK;
fail:
    dev_infer_free(d);
    return st;
}

/* The geometry of items[start + k] from its headers (the decode comes later, on the device path). */
static void probe_one(void *ctx, int k) {
    decode_ctx *c = ctx;
    item *it = &c->items[c->start + k];
    it->path = c->paths[c->start + k];
    odl_error_clear();
    int w = 0, h = 0;
    if (odl_image_probe(it->path, &w, &h) != ODL_OK ||
        odl_letterbox_geometry(w, h, c->o->img_size, !c->o->square, c->stride, &it->geo) != ODL_OK) {
        snprintf(it->err, sizeof it->err, "%s", odl_error_msg_user());
        return;
    }
    it->ok = 1; /* until its decode says otherwise */
}

/* Queue the decoding of items[gidx[0..n)] (one letterbox size) into slot s. */
static odl_status dev_submit(dev_infer *d, int s, item *items) {
    for (int k = 0; k < d->gn[s]; k++) {
        const item *it = &items[d->gidx[s][k]];
        d->jobs[s][k] = (odl_prep_job){it->path, 0, it->geo.out_w, it->geo.out_h, 1};
    }
    return odl_gpu_prep_submit(d->gp, d->jobs[s], d->gn[s], d->res[s], &d->b[s]);
}

/* The group in slot s: its decoding's outcome per image, then letterbox, forward, candidates, NMS. */
static odl_status dev_group(dev_infer *d, int s, odl_yolov5 *net, item *items, const infer_opts *o, double *t_pre,
                            double *t_fwd, double *t_nms) {
    double t0 = odl_mono_ms();
    ODL_CHECK(odl_gpu_prep_wait(d->b[s]));
    int idx[4096], m = 0;
    for (int k = 0; k < d->gn[s]; k++) {
        item *it = &items[d->gidx[s][k]];
        const odl_prep_result *r = &d->res[s][k];
        if (r->status != ODL_OK) {
            snprintf(it->err, sizeof it->err, "%s", r->err);
            char *at = strstr(it->err, " [at "); /* the user's message: no source locations */
            if (at) *at = 0;
            it->ok = 0;
            continue;
        }
        if (o->save_images) ODL_CHECK(odl_gpu_prep_host_image(d->b[s], k, &it->img));
        idx[m++] = k;
    }
    double t1 = odl_mono_ms();
    *t_pre += t1 - t0;
    if (m) {
        const int H = d->jobs[s][0].out_h, W = d->jobs[s][0].out_w;
        const odl_stream st = odl_stream_current();
        odl_tensor *x;
        const odl_tensor *y;
        ODL_CHECK(odl_yolov5_input(net, m, H, W, &x));
        ODL_CHECK(odl_gpu_prep_letterbox(d->b[s], idx, m, (float *)x->data, st));
        ODL_CHECK(odl_yolov5_forward(net, x, &y));
        const int64_t rows = y->shape[1];
        const int nc = (int)y->shape[2] - 5, no = nc + 5;
        odl_yolo_cand_args a = {.N = m, .rows = rows, .nc = nc, .pred = (const float *)y->data, .conf_thres = o->conf,
                                .cap = d->cap, .out = d->d_rows, .count = d->d_cnt, .nonfinite = d->d_bad};
        ODL_CHECK(d->be->yolo_candidates(&a));
        ODL_CHECK(odl_memcpy_async(d->h_cnt, odl_cpu(), d->d_cnt, d->dev, sizeof(int32_t) * m, st));
        ODL_CHECK(odl_memcpy_async(d->h_bad, odl_cpu(), d->d_bad, d->dev, sizeof(int32_t) * m, st));
        ODL_CHECK(odl_stream_synchronize(st));
        /* each image's own rows only: past its count the rows were never written (initcheck, 2026-12-07) */
        for (int b = 0; b < m; b++) {
            const int n_b = d->h_cnt[b] < d->cap ? d->h_cnt[b] : d->cap;
            if (n_b > 0)
                ODL_CHECK(odl_memcpy_async(d->h_rows + (size_t)b * d->cap * no, odl_cpu(), d->d_rows + (size_t)b * d->cap * no,
                                           d->dev, sizeof(float) * (size_t)n_b * no, st));
        }
        ODL_CHECK(odl_stream_synchronize(st));
        double t2 = odl_mono_ms();
        const odl_nms_params p = nms_params(o);
        for (int b = 0; b < m; b++) {
            item *it = &items[d->gidx[s][idx[b]]];
            const float *pr = d->h_rows + (size_t)b * d->cap * no;
            int64_t n_rows = d->h_cnt[b];
            if (n_rows > d->cap) { /* too many candidates (a low --conf-thres): all of its rows */
                const size_t rn = (size_t)rows * no;
                if (d->h_all_cap < rn) {
                    free(d->h_all);
                    d->h_all_cap = 0;
                    if (!(d->h_all = malloc(sizeof(float) * rn))) return ODL_ERR(ODL_E_NOMEM, "prediction rows");
                    d->h_all_cap = rn;
                }
                ODL_CHECK(odl_memcpy_async(d->h_all, odl_cpu(), (const float *)y->data + rn * b, d->dev, sizeof(float) * rn, st));
                ODL_CHECK(odl_stream_synchronize(st));
                pr = d->h_all;
                n_rows = rows;
            }
            ODL_CHECK(item_detect(it, pr, n_rows, nc, d->h_bad[b], rows, &p, o->max_det));
            it->fwd_ms = (t2 - t1) / m;
        }
        *t_fwd += t2 - t1;
        *t_nms += odl_mono_ms() - t2;
    }
    odl_gpu_prep_release(d->b[s]);
    d->b[s] = NULL;
    return ODL_OK;
}

/* Items [start, end): headers on the pool, groups of one letterbox size, two groups in flight. */
static odl_status dev_batch(dev_infer *d, odl_prep_pool *pool, odl_yolov5 *net, item *items, char **paths, int start,
                            int end, const infer_opts *o, int stride, double *t_pre, double *t_fwd, double *t_nms) {
    double t0 = odl_mono_ms();
    decode_ctx pc = {items, paths, start, o, stride};
    ODL_CHECK(odl_prep_pool_for(pool, end - start, probe_one, &pc));
    *t_pre += odl_mono_ms() - t0;
    char used[4096] = {0};
    int s = 0, pend = -1; /* the slot the next group takes; the slot of the group decoding, not computed yet */
    odl_status st = ODL_OK;
    for (int i = start; i < end; i++) {
        if (!items[i].ok || used[i - start]) continue;
        d->gn[s] = 0; /* the first unused item and those of its letterbox size */
        for (int j = i; j < end; j++)
            if (items[j].ok && !used[j - start] && items[j].geo.out_w == items[i].geo.out_w &&
                items[j].geo.out_h == items[i].geo.out_h) {
                d->gidx[s][d->gn[s]++] = j;
                used[j - start] = 1;
            }
        ODL_CHECK_GOTO(dev_submit(d, s, items), st, fail);
        if (pend >= 0) ODL_CHECK_GOTO(dev_group(d, pend, net, items, o, t_pre, t_fwd, t_nms), st, fail);
        pend = s;
        s ^= 1;
    }
    if (pend >= 0) ODL_CHECK_GOTO(dev_group(d, pend, net, items, o, t_pre, t_fwd, t_nms), st, fail);
    return ODL_OK;
fail:
    for (int k = 0; k < 2; k++)
        if (d->b[k]) {
            odl_gpu_prep_wait(d->b[k]);
            odl_gpu_prep_release(d->b[k]);
            d->b[k] = NULL;
        }
    return st;
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
    odl_strbuf_printf(&b, "image %d/%d %s: %dx%d ", i + 1, n, it->path, it->geo.out_h, it->geo.out_w);
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

/* ---- start-up: the device is chosen and set up (the driver's start, the CUDA context, the pool) on a
 * thread while this one reads and folds the weights (odl_yolov5_read, no device call); the weights then
 * go up in one copy (odl_yolov5_upload) ---- */
typedef struct dev_start {
    pthread_t th;
    const char *spec;
    double fraction, ms;
    odl_device dev;
    odl_status st;
    char err[1024];
    int running;
} dev_start;

static void *dev_start_main(void *arg) {
    dev_start *c = arg;
    const double t0 = odl_mono_ms();
    c->st = odl_cli_pick_device(c->spec, c->fraction, &c->dev);
    if (c->st != ODL_OK) snprintf(c->err, sizeof c->err, "%s", odl_error_msg_user());
    c->ms = odl_mono_ms() - t0;
    return NULL;
}

static void dev_start_begin(dev_start *c, const char *spec, double fraction) {
    memset(c, 0, sizeof *c);
    c->spec = spec;
    c->fraction = fraction;
    if (!strcmp(spec, "cpu")) { /* nothing to wait for */
        c->dev = odl_cpu();
        return;
    }
    c->running = pthread_create(&c->th, NULL, dev_start_main, c) == 0;
    if (!c->running) dev_start_main(c); /* no thread: in line */
}

/* Wait for the set-up; this thread then uses the device too. */
static odl_status dev_start_end(dev_start *c) {
    if (c->running) pthread_join(c->th, NULL);
    c->running = 0;
    if (c->st != ODL_OK) return odl_error_set(c->st, __FILE__, __LINE__, "%s", c->err);
    return c->dev.type == ODL_DEV_CUDA ? odl_cuda_init(c->dev.index, odl_cli_pool_fraction(c->fraction)) : ODL_OK;
}

/* The phases of the run, for the last log line (what a one-image run spends before its first box). */
enum { PH_READ, PH_DEVICE_WAIT, PH_UPLOAD, PH_PIPELINE, PH_DECODE, PH_FIRST_FWD, PH_NMS, PH_OUTPUTS, PH_SHUTDOWN, PH_N };
static const char *const k_phase[PH_N] = {"weights read", "waiting for the device", "weights upload",
                                          "pipeline set-up", "decode+letterbox",
                                          "first forward", "NMS", "outputs", "shutdown"};

/* One --task=infer run: what its phases share. */
typedef struct infer_run {
    infer_opts o;
    dev_start ds;
    odl_device dev;
    odl_yolov5 *net;
    path_list files;
    item *items;
    int is_dir, stride, n_fail, n_groups;
    float *hin, *hout; /* the CPU path's batch buffers */
    size_t hin_cap, hout_cap;
    odl_prep_pool *pool;
    dev_infer *di;
    double t_start, t_mark, ph[PH_N];
    double t_pre, t_fwd, t_nms; /* decode+letterbox, forward, NMS: all batches */
    int64_t graphs_captured, graph_replays; /* --cuda-graph on */
} infer_run;

/* The time since the last mark goes to phase k. */
static void phase(infer_run *r, int k) {
    const double t = odl_mono_ms();
    r->ph[k] += t - r->t_mark;
    r->t_mark = t;
}

/* 1, after the error line: what, then the error's user message. */
static int fail_user(const char *what) {
    fprintf(stderr, "odl_worker: error: %s%s\n", what, odl_error_msg_user());
    return 1;
}

/* The device (set up on a thread while the weights file is read), the weights on it, --half. */
static int infer_load(infer_run *r) {
    dev_start_begin(&r->ds, r->o.device, r->o.pool_fraction);
    r->dev = r->ds.dev; /* the CPU until the set-up ends */
    if (odl_yolov5_read(r->o.weights, &r->net) != ODL_OK) {
        fail_user("--weights ");
        dev_start_end(&r->ds); /* the thread ends before the run does */
        r->dev = r->ds.dev;
        return 1;
    }
    phase(r, PH_READ);
    const odl_status dss = dev_start_end(&r->ds);
    r->dev = r->ds.dev;
    if (dss != ODL_OK) return fail_user("");
    phase(r, PH_DEVICE_WAIT);
    if (odl_yolov5_upload(r->net, r->dev) != ODL_OK) return fail_user("--weights ");
    phase(r, PH_UPLOAD);
    if (r->o.half && odl_yolov5_set_half(r->net, 1) != ODL_OK) return fail_user("--half: ");
    if (r->o.cuda_graph && odl_yolov5_set_graphs(r->net, 1) != ODL_OK) return fail_user("--cuda-graph: ");
    odl_set_matmul_precision(r->o.precision);
    return 0;
}

/* The input files, the output folders, one item per file; detect.py's checks of --img-size and
 * --classes against the model; the run's first line. */
static int infer_inputs(infer_run *r) {
    infer_opts *o = &r->o;
    if (list_inputs(o->input, &r->files, &r->is_dir) != ODL_OK) return fail_user("");
    char labels_dir[4096];
    snprintf(labels_dir, sizeof labels_dir, "%s/labels", o->output);
    if (odl_output_mkdir_p("--output", o->output) != ODL_OK ||
        (o->save_txt && odl_output_mkdir_p("--output", labels_dir) != ODL_OK))
        return fail_user("");
    if (!(r->items = calloc((size_t)r->files.n, sizeof(item)))) {
        fprintf(stderr, "odl_worker: error: out of memory for %d images\n", r->files.n);
        return 1;
    }
    r->stride = odl_yolov5_max_stride(r->net);
    if (o->img_size % r->stride) { /* detect.py's check_img_size */
        int up = (o->img_size + r->stride - 1) / r->stride * r->stride;
        ODL_LOG_WARN("--img-size %d must be multiple of max stride %d, updating to %d", o->img_size, r->stride, up);
        o->img_size = up;
    }
    const int nc = odl_yolov5_num_classes(r->net);
    for (int c = 0; c < o->n_classes; c++)
        if (o->classes[c] >= nc) ODL_LOG_WARN("--classes %d: the model has classes 0..%d", o->classes[c], nc - 1);
    ODL_LOG_INFO("yolov5 %s on %s, %s: %d classes, %lld parameters; %d image(s), %s letterbox %d", o->weights,
                 odl_device_name(r->dev), odl_cli_yolo_precision_note(o->half, o->precision), nc, (long long)odl_yolov5_num_params(r->net),
                 r->files.n, o->square ? "square" : "rectangular", o->img_size);
    return 0;
}

/* Batches of --batch-size for a folder (one image at a time otherwise). */
static int infer_batch_size(const infer_run *r) { return r->is_dir ? r->o.batch : 1; }

/* The decoding threads, and on CUDA (or with --backend-post) the device pipeline. */
static int infer_pipeline(infer_run *r) {
    const int B = infer_batch_size(r);
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    const int threads = B > 1 ? (int)(cores < 1 ? 1 : cores > 8 ? 8 : cores) : 0;
    if (odl_prep_pool_create(threads, &r->pool) != ODL_OK ||
        ((r->dev.type == ODL_DEV_CUDA || r->o.backend_post) &&
         dev_infer_create(r->net, &r->o, B, threads ? threads : 1, r->files.n, &r->di) != ODL_OK))
        return fail_user("");
    phase(r, PH_PIPELINE);
    ODL_LOG_INFO("decoding: %s", r->di ? r->di->note : "CPU (libjpeg-turbo, libpng); letterbox and NMS on the CPU");
    return 0;
}

/* Each image's line and its files (labels, the drawn copy); a failed one counts, the run goes on. */
static void infer_outputs(infer_run *r, int start, int end) {
    for (int i = start; i < end; i++) {
        item *it = &r->items[i];
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
}

/* Every batch: decode, letterbox, forward, NMS (device or CPU path), then its outputs. A failed
 * forward or device call is not an image's fault: the run stops. */
static int infer_images(infer_run *r) {
    const int B = infer_batch_size(r);
    for (int start = 0; start < r->files.n; start += B) {
        const int end = start + B < r->files.n ? start + B : r->files.n;
        const odl_status st =
            r->di ? dev_batch(r->di, r->pool, r->net, r->items, r->files.v, start, end, &r->o, r->stride, &r->t_pre,
                              &r->t_fwd, &r->t_nms)
                  : cpu_batch(r->pool, r->net, r->items, r->files.v, start, end, &r->o, r->stride, &r->hin, &r->hin_cap,
                              &r->hout, &r->hout_cap, &r->t_pre, &r->t_fwd, &r->t_nms);
        if (st != ODL_OK) return fail_user("");
        if (r->n_groups++ == 0) r->ph[PH_FIRST_FWD] = r->t_fwd; /* decode .. boxes of the first batch's forward */
        r->t_mark = odl_mono_ms();
        infer_outputs(r, start, end);
        phase(r, PH_OUTPUTS);
    }
    return 0;
}

/* detections.json, the summary line, and the failed images listed again: 0, or 1 when any failed. */
static int infer_finish(infer_run *r) {
    char jpath[4096];
    snprintf(jpath, sizeof jpath, "%s/detections.json", r->o.output);
    if (write_detections(jpath, r->net, r->items, r->files.n) != ODL_OK) return fail_user("");
    phase(r, PH_OUTPUTS);
    ODL_LOG_INFO("%d image(s) done, %d failed; %.1f ms decode+letterbox, %.1f ms forward, %.1f ms NMS in all; results "
                 "in %s%s", r->files.n - r->n_fail, r->n_fail, r->t_pre, r->t_fwd, r->t_nms, jpath,
                 r->o.save_txt ? " and labels/" : "");
    if (!r->n_fail) return 0;
    fprintf(stderr, "odl_worker: error: %d of %d image(s) failed:\n", r->n_fail, r->files.n);
    for (int i = 0; i < r->files.n; i++)
        if (r->items[i].err[0]) fprintf(stderr, "  %s\n", r->items[i].err);
    return 1;
}

/* Everything the run holds, the device last; the time it takes is the shutdown phase. */
static void infer_release(infer_run *r) {
    const double t0 = odl_mono_ms();
    dev_infer_free(r->di);
    odl_prep_pool_free(r->pool);
    if (r->items) {
        for (int i = 0; i < r->files.n; i++) {
            item_release(&r->items[i]);
            free(r->items[i].det);
        }
        free(r->items);
    }
    free(r->hin);
    free(r->hout);
    list_free(&r->files);
    odl_yolov5_graph_counts(r->net, &r->graphs_captured, &r->graph_replays); /* for the timeline */
    odl_yolov5_free(r->net);
    r->net = NULL;
    if (r->dev.type == ODL_DEV_CUDA) odl_cuda_shutdown();
    r->t_mark = odl_mono_ms();
    r->ph[PH_SHUTDOWN] = r->t_mark - t0;
}

/* Where the run's time went, start-up first (docs/yolov5.md, "Start-up"). */
static void infer_timeline(const infer_run *r) {
    double ph[PH_N];
    memcpy(ph, r->ph, sizeof ph);
    ph[PH_DECODE] = r->t_pre;
    ph[PH_NMS] = r->t_nms;
    char line[1024];
    odl_strbuf b;
    odl_strbuf_fixed(&b, line, sizeof line);
    odl_strbuf_printf(&b, "timeline (ms): ");
    for (int i = 0; i < PH_N; i++) odl_strbuf_printf(&b, "%s%s %.1f", i ? ", " : "", k_phase[i], ph[i]);
    if (r->dev.type == ODL_DEV_CUDA) odl_strbuf_printf(&b, "; driver, CUDA context and pool %.1f on a thread", r->ds.ms);
    if (r->n_groups > 1)
        odl_strbuf_printf(&b, "; later forwards %.1f each (%d)", (r->t_fwd - ph[PH_FIRST_FWD]) / (r->n_groups - 1),
                          r->n_groups - 1);
    if (r->graphs_captured)
        odl_strbuf_printf(&b, "; %" PRId64 " CUDA graphs, %" PRId64 " replays", r->graphs_captured, r->graph_replays);
    odl_strbuf_printf(&b, "; %.1f since the task started", r->t_mark - r->t_start);
    ODL_LOG_INFO("%s", line);
}

/* odl_worker --task=infer: detect.py's run as named phases; exit status 0, 1 (a failed image or
 * step), 2 (usage). */
int odl_task_infer_main(int argc, char **argv) {
    infer_run r;
    memset(&r, 0, sizeof r);
    r.t_start = r.t_mark = odl_mono_ms();
    r.dev = odl_cpu();
    const int pr = parse_opts(argc, argv, &r.o);
    if (pr == 3) {
        infer_usage(stdout);
        return 0;
    }
    if (pr) return 2;
    if (odl_output_check_dir("--output", r.o.output) != ODL_OK) return fail_user("");

    int rc = infer_load(&r);
    if (!rc) rc = infer_inputs(&r);
    if (!rc) rc = infer_pipeline(&r);
    if (!rc) rc = infer_images(&r);
    if (!rc) rc = infer_finish(&r);
    const int timeline = rc == 0 || r.n_fail; /* a run that got through its images */
    infer_release(&r);
    if (timeline) infer_timeline(&r);
    return rc;
}
