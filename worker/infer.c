/* odl_worker --task=infer: YOLOv5 detection on an image or a directory of images, as YOLOv5's
 * detect.py (letterbox, forward, NMS, boxes in original-image pixels), writing DIR/detections.json and,
 * unless --no-save-images, copies of the images with the boxes drawn.
 *
 * Exit status: 0 when every image was processed; 1 when the run could not start (bad weights, no
 * device) or when any image failed (the others are still processed and written; the failures are listed
 * at the end); 2 for a usage error. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "odl/device.h"
#include "odl/image.h"
#include "odl/nms.h"
#include "odl/pipeline.h"
#include "odl/yolov5.h"
#include "worker/tasks.h"

typedef struct infer_opts {
    const char *model, *weights, *input, *output, *device;
    int img_size, max_det, square, batch, save_images, half;
    float conf, iou;
} infer_opts;

static void infer_usage(FILE *f) {
    fprintf(f,
            "usage: odl_worker --task=infer --model=yolov5 --weights=W.h5 --input=IMAGE|DIR [options]\n"
            "  --img-size N        letterbox size (default 640, a multiple of 32)\n"
            "  --conf-thres X      confidence threshold (default 0.25)\n"
            "  --iou-thres X       NMS IoU threshold (default 0.45)\n"
            "  --max-det N         at most N boxes per image (default 1000)\n"
            "  --square            letterbox to an N x N square (default: minimum stride-32 padding)\n"
            "  --batch-size B      images per forward for a directory (default 8)\n"
            "  --half              float16 inference (YOLOv5's --half; tensor cores on CUDA)\n"
            "  --device D          auto (default), cpu, cuda or cuda:N\n"
            "  --output DIR        where detections.json and the drawn images go (default runs/detect)\n"
            "  --no-save-images    write detections.json only\n"
            "Weights: convert an official YOLOv5 .pt with tools/convert_yolov5.py.\n");
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* --name=value or --name value; returns the value or NULL. *i advances past a separate value. */
static const char *flag_value(int argc, char **argv, int *i, const char *name, int *matched) {
    size_t n = strlen(name);
    const char *a = argv[*i];
    *matched = 0;
    if (strncmp(a, name, n) != 0) return NULL;
    if (a[n] == '=') {
        *matched = 1;
        return a + n + 1;
    }
    if (a[n] == 0) {
        *matched = 1;
        if (*i + 1 < argc) return argv[++*i];
        return NULL;
    }
    return NULL;
}

static int parse_int(const char *s, int lo, int hi, int *out) {
    if (!s || !*s) return -1;
    char *e;
    errno = 0;
    long v = strtol(s, &e, 10);
    if (*e || errno || v < lo || v > hi) return -1;
    *out = (int)v;
    return 0;
}
static int parse_float(const char *s, float lo, float hi, float *out) {
    if (!s || !*s) return -1;
    char *e;
    errno = 0;
    double v = strtod(s, &e);
    if (*e || errno || !(v >= lo && v <= hi)) return -1;
    *out = (float)v;
    return 0;
}

/* Returns 0 ok, 2 usage error (message printed), 3 for --help. */
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
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        int m;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return 3;
        if (!strcmp(a, "--square")) { o->square = 1; continue; }
        if (!strcmp(a, "--no-save-images")) { o->save_images = 0; continue; }
        if (!strcmp(a, "--half")) { o->half = 1; continue; }
#define STR_FLAG(name, field)                                                                      \
        v = flag_value(argc, argv, &i, name, &m);                                                  \
        if (m) {                                                                                   \
            if (!v || !*v) { fprintf(stderr, "odl_worker: error: %s needs a value\n", name); return 2; } \
            o->field = v;                                                                          \
            continue;                                                                              \
        }
        v = flag_value(argc, argv, &i, "--task", &m); /* handled by main() */
        if (m) continue;
        STR_FLAG("--model", model)
        STR_FLAG("--weights", weights)
        STR_FLAG("--input", input)
        STR_FLAG("--output", output)
        STR_FLAG("--device", device)
#undef STR_FLAG
#define NUM_FLAG(name, parse, lo, hi, field, what)                                                 \
        v = flag_value(argc, argv, &i, name, &m);                                                  \
        if (m) {                                                                                   \
            if (parse(v, lo, hi, &o->field)) {                                                     \
                fprintf(stderr, "odl_worker: error: %s '%s': expected %s\n", name, v ? v : "", what); \
                return 2;                                                                          \
            }                                                                                      \
            continue;                                                                              \
        }
        NUM_FLAG("--img-size", parse_int, 32, 8192, img_size, "a multiple of 32 in 32..8192")
        NUM_FLAG("--max-det", parse_int, 1, 100000, max_det, "an integer in 1..100000")
        NUM_FLAG("--batch-size", parse_int, 1, 4096, batch, "an integer in 1..4096")
        NUM_FLAG("--conf-thres", parse_float, 0.0f, 1.0f, conf, "a number in [0, 1]")
        NUM_FLAG("--iou-thres", parse_float, 0.0f, 1.0f, iou, "a number in [0, 1]")
#undef NUM_FLAG
        fprintf(stderr, "odl_worker: error: unknown option '%s' for --task=infer (see --task=infer --help)\n", a);
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
        fprintf(stderr, "odl_worker: error: --task=infer needs --input=IMAGE|DIR\n");
        return 2;
    }
    if (o->img_size % 32) {
        fprintf(stderr, "odl_worker: error: --img-size %d: must be a multiple of 32\n", o->img_size);
        return 2;
    }
    return 0;
}

static odl_status pick_device(const char *spec, odl_device *dev) {
    int n = odl_cuda_device_count();
    if (!strcmp(spec, "cpu") || (!strcmp(spec, "auto") && n == 0)) {
        *dev = odl_cpu();
        return ODL_OK;
    }
    int idx = 0;
    if (!strcmp(spec, "auto") || !strcmp(spec, "cuda")) idx = 0;
    else if (!strncmp(spec, "cuda:", 5) && spec[5]) {
        char *e;
        long v = strtol(spec + 5, &e, 10);
        if (*e || v < 0 || v > 1024) return ODL_ERR(ODL_E_INVAL, "--device '%s': expected auto, cpu, cuda or cuda:N", spec);
        idx = (int)v;
    } else {
        return ODL_ERR(ODL_E_INVAL, "--device '%s': expected auto, cpu, cuda or cuda:N", spec);
    }
    if (n == 0)
        return ODL_ERR(ODL_E_NODEV, "--device %s: no CUDA device is usable (%s)", spec,
                       odl_cuda_built() ? "no GPU or driver found" : "this build has no CUDA backend");
    if (idx >= n) return ODL_ERR(ODL_E_NODEV, "--device %s: only %d CUDA device(s)", spec, n);
    ODL_CHECK(odl_cuda_init(idx, 0.5));
    *dev = odl_cuda(idx);
    return ODL_OK;
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

static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

static odl_status mkdir_p(const char *path) {
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == 0) {
            char c = *p;
            *p = 0;
            if (mkdir(buf, 0777) != 0 && errno != EEXIST)
                return ODL_ERR(ODL_E_IO, "--output %s: cannot create %s: %s", path, buf, strerror(errno));
            *p = c;
            if (!c) break;
        }
    }
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode)) return ODL_ERR(ODL_E_IO, "--output %s: not a directory", path);
    return ODL_OK;
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
        snprintf(it->err, sizeof it->err, "%s", odl_error_msg());
        item_release(it);
        return;
    }
    it->ok = 1;
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
    odl_tensor *x;
    double t0 = now_ms();
    ODL_CHECK(odl_yolov5_input(net, n, H, W, &x));
    ODL_CHECK(odl_tensor_copy_from_host(x, *host_in, sizeof(float) * per * n));
    const odl_tensor *y;
    ODL_CHECK(odl_yolov5_forward(net, x, &y));
    const int64_t rows = y->shape[1], no = y->shape[2];
    size_t outn = (size_t)(n * rows * no);
    if (*host_out_cap < outn) {
        free(*host_out);
        *host_out = malloc(sizeof(float) * outn);
        *host_out_cap = *host_out ? outn : 0;
        if (!*host_out) return ODL_ERR(ODL_E_NOMEM, "output batch of %zu floats", outn);
    }
    ODL_CHECK(odl_tensor_copy_to_host(y, *host_out, sizeof(float) * outn)); /* synchronises */
    double t1 = now_ms();
    odl_nms_params p = odl_nms_defaults();
    p.conf_thres = o->conf;
    p.iou_thres = o->iou;
    p.max_det = o->max_det;
    for (int b = 0; b < n; b++) {
        item *it = &items[idx[b]];
        it->det = malloc(sizeof(odl_detection) * (size_t)o->max_det);
        if (!it->det) return ODL_ERR(ODL_E_NOMEM, "detections");
        ODL_CHECK(odl_yolo_nms(*host_out + (size_t)b * rows * no, rows, (int)no - 5, &p, it->det, o->max_det, &it->ndet));
        for (int k = 0; k < it->ndet; k++) {
            float bx[4] = {it->det[k].x1, it->det[k].y1, it->det[k].x2, it->det[k].y2};
            odl_letterbox_unmap(&it->geo, bx);
            it->det[k].x1 = bx[0];
            it->det[k].y1 = bx[1];
            it->det[k].x2 = bx[2];
            it->det[k].y2 = bx[3];
        }
        it->done = 1;
    }
    *t_fwd += t1 - t0;
    *t_nms += now_ms() - t1;
    return ODL_OK;
}

static odl_status save_drawn(const odl_yolov5 *net, item *it, const char *outdir) {
    int lw = (int)nearbyint((it->img.width + it->img.height) / 2.0 * 0.003);
    if (lw < 2) lw = 2;
    for (int k = 0; k < it->ndet; k++) {
        const odl_detection *d = &it->det[k];
        uint8_t c[3];
        odl_class_color(d->class_id, c);
        char label[128];
        snprintf(label, sizeof label, "%s %.2f", odl_yolov5_class_name(net, d->class_id), d->conf);
        odl_image_draw_box(&it->img, d->x1, d->y1, d->x2, d->y2, c, lw, label, lw > 2 ? lw - 1 : 1);
    }
    char path[4096], name[1024];
    snprintf(name, sizeof name, "%s", base_name(it->path));
    char *dot = strrchr(name, '.');
    if (dot && (!strcasecmp(dot, ".jpg") || !strcasecmp(dot, ".jpeg"))) *dot = 0;
    snprintf(path, sizeof path, "%s/%s.jpg", outdir, name);
    return odl_image_save_jpeg(&it->img, path, 95);
}

int odl_task_infer_main(int argc, char **argv) {
    infer_opts o;
    int pr = parse_opts(argc, argv, &o);
    if (pr == 3) {
        infer_usage(stdout);
        return 0;
    }
    if (pr) return 2;

    odl_device dev;
    odl_yolov5 *net = NULL;
    path_list files = {0};
    item *items = NULL;
    float *hin = NULL, *hout = NULL;
    size_t hin_cap = 0, hout_cap = 0;
    FILE *jf = NULL;
    odl_prep_pool *pool = NULL;
    int rc = 1, is_dir = 0, n_fail = 0;
    double t_pre = 0, t_fwd = 0, t_nms = 0;

    if (pick_device(o.device, &dev) != ODL_OK) {
        fprintf(stderr, "odl_worker: error: %s\n", odl_error_msg());
        return 1;
    }
    if (odl_yolov5_load(o.weights, dev, &net) != ODL_OK) {
        fprintf(stderr, "odl_worker: error: --weights %s\n", odl_error_msg());
        goto out;
    }
    if (o.half && odl_yolov5_set_half(net, 1) != ODL_OK) {
        fprintf(stderr, "odl_worker: error: --half: %s\n", odl_error_msg());
        goto out;
    }
    if (list_inputs(o.input, &files, &is_dir) != ODL_OK) {
        fprintf(stderr, "odl_worker: error: %s\n", odl_error_msg());
        goto out;
    }
    if (mkdir_p(o.output) != ODL_OK) {
        fprintf(stderr, "odl_worker: error: %s\n", odl_error_msg());
        goto out;
    }
    items = calloc((size_t)files.n, sizeof(item));
    if (!items) {
        fprintf(stderr, "odl_worker: error: out of memory for %d images\n", files.n);
        goto out;
    }
    const int stride = odl_yolov5_max_stride(net);
    fprintf(stderr, "odl_worker: yolov5 %s on %s, %s: %d classes, %lld parameters; %d image(s), %s letterbox %d\n",
            o.weights, odl_device_name(dev), o.half ? "float16" : "float32", odl_yolov5_num_classes(net),
            (long long)odl_yolov5_num_params(net), files.n, o.square ? "square" : "rectangular", o.img_size);

    int B = is_dir ? o.batch : 1;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (odl_prep_pool_create(B > 1 ? (int)(cores < 1 ? 1 : cores > 8 ? 8 : cores) : 0, &pool) != ODL_OK) {
        fprintf(stderr, "odl_worker: error: %s\n", odl_error_msg());
        goto out;
    }
    for (int start = 0; start < files.n; start += B) {
        int end = start + B < files.n ? start + B : files.n;
        double t0 = now_ms();
        decode_ctx dc = {items, files.v, start, &o, stride};
        if (odl_prep_pool_for(pool, end - start, decode_one, &dc) != ODL_OK) { /* decoding on a thread pool */
            fprintf(stderr, "odl_worker: error: %s\n", odl_error_msg());
            goto out;
        }
        t_pre += now_ms() - t0;
        /* Group images of one letterboxed size into one forward (rectangular letterboxes differ). */
        int *idx = malloc(sizeof(int) * (size_t)(end - start));
        char *used = calloc((size_t)(end - start), 1);
        if (!idx || !used) {
            free(idx);
            free(used);
            fprintf(stderr, "odl_worker: error: out of memory\n");
            goto out;
        }
        for (int i = start; i < end; i++) {
            if (!items[i].ok || used[i - start]) continue;
            int n = 0;
            for (int j = i; j < end; j++)
                if (items[j].ok && !used[j - start] && items[j].lb.width == items[i].lb.width &&
                    items[j].lb.height == items[i].lb.height) {
                    idx[n++] = j;
                    used[j - start] = 1;
                }
            if (run_group(net, items, idx, n, &o, &hin, &hin_cap, &hout, &hout_cap, &t_fwd, &t_nms) != ODL_OK) {
                /* A failed forward is not an image's fault: stop. */
                fprintf(stderr, "odl_worker: error: inference on %s: %s\n", items[i].path, odl_error_msg());
                free(idx);
                free(used);
                goto out;
            }
        }
        free(idx);
        free(used);
        for (int i = start; i < end; i++) {
            item *it = &items[i];
            if (!it->ok) {
                fprintf(stderr, "odl_worker: error: %s\n", it->err);
                n_fail++;
                continue;
            }
            /* detect.py-style summary line */
            fprintf(stderr, "image %d/%d %s: %dx%d %d detection(s)\n", i + 1, files.n, it->path, it->lb.width,
                    it->lb.height, it->ndet);
            if (o.save_images && save_drawn(net, it, o.output) != ODL_OK) {
                snprintf(it->err, sizeof it->err, "%s", odl_error_msg());
                fprintf(stderr, "odl_worker: error: %s\n", it->err);
                n_fail++;
            }
            odl_image_free(&it->lb);
            odl_image_free(&it->img);
        }
    }

    char jpath[4096];
    snprintf(jpath, sizeof jpath, "%s/detections.json", o.output);
    jf = fopen(jpath, "w");
    if (!jf) {
        fprintf(stderr, "odl_worker: error: %s: cannot write: %s\n", jpath, strerror(errno));
        goto out;
    }
    fprintf(jf, "[");
    int first = 1;
    for (int i = 0; i < files.n; i++) {
        item *it = &items[i];
        if (!it->done) continue;
        fprintf(jf, "%s\n  {\"file\": ", first ? "" : ",");
        first = 0;
        json_str(jf, base_name(it->path));
        fprintf(jf, ", \"width\": %d, \"height\": %d, \"detections\": [", it->geo.src_w, it->geo.src_h);
        for (int k = 0; k < it->ndet; k++) {
            const odl_detection *d = &it->det[k];
            fprintf(jf, "%s\n    {\"xyxy\": [%.4f, %.4f, %.4f, %.4f], \"conf\": %.5f, \"class_id\": %d, \"class_name\": ",
                    k ? "," : "", d->x1, d->y1, d->x2, d->y2, d->conf, d->class_id);
            json_str(jf, odl_yolov5_class_name(net, d->class_id));
            fprintf(jf, "}");
        }
        fprintf(jf, "%s]}", it->ndet ? "\n  " : "");
    }
    fprintf(jf, "\n]\n");
    if (fclose(jf) != 0) {
        jf = NULL;
        fprintf(stderr, "odl_worker: error: %s: write failed\n", jpath);
        goto out;
    }
    jf = NULL;
    int n_ok = files.n - n_fail;
    fprintf(stderr, "odl_worker: %d image(s) done, %d failed; %.1f ms decode+letterbox, %.1f ms forward, %.1f ms NMS "
            "in all; results in %s\n", n_ok, n_fail, t_pre, t_fwd, t_nms, jpath);
    if (n_fail) {
        fprintf(stderr, "odl_worker: error: %d of %d image(s) failed:\n", n_fail, files.n);
        for (int i = 0; i < files.n; i++)
            if (items[i].err[0]) fprintf(stderr, "  %s\n", items[i].err);
        rc = 1;
    } else {
        rc = 0;
    }
out:
    odl_prep_pool_free(pool);
    if (jf) fclose(jf);
    if (items) {
        for (int i = 0; i < files.n; i++) {
            item_release(&items[i]);
            free(items[i].det);
        }
        free(items);
    }
    free(hin);
    free(hout);
    list_free(&files);
    odl_yolov5_free(net);
    if (dev.type == ODL_DEV_CUDA) odl_cuda_shutdown();
    return rc;
}
