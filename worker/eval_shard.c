/* The evaluation loop (worker/eval_shard.h).
 *
 * CPU: decoding threads fill the float input of the group after the current one while the current one
 * runs through the network; NMS with odl_yolo_nms.
 * Device (CUDA, or the CPU with --backend-post): the device image pipeline decodes and uploads group k+1
 * (nvJPEG and CPU threads, its prep stream) while group k runs; on the compute stream each group is
 * letterbox_u8 -> forward -> yolo_nms -> copy of the kept boxes to pinned memory, and the host reads
 * group k-1's boxes and matches them while group k computes. Group k-1's results are read before group
 * k's forward is queued (its prediction rows are still there for the CPU NMS of an image whose
 * candidates overflow the GPU's buffer), so the device waits only for those few microseconds. */
#include "worker/eval_shard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "odl/backend.h"
#include "odl/clock.h"
#include "odl/device.h"
#include "odl/gpu_prep.h"
#include "odl/nms.h"
#include "odl/pipeline.h"

static odl_status bytes_put(bytes *b, const void *src, size_t n) {
    if (b->n + n > b->cap) {
        size_t nc = b->cap ? b->cap : 65536;
        while (nc < b->n + n) nc *= 2;
        uint8_t *np_ = realloc(b->p, nc);
        if (!np_) return ODL_ERR(ODL_E_NOMEM, "statistics buffer of %zu bytes", nc);
        b->p = np_;
        b->cap = nc;
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
    return ODL_OK;
}

/* A group of consecutive images of one letterbox shape, at most --batch-size. */
typedef struct group {
    int first, n, H, W;
    odl_prep_job *jobs;
    odl_prep_result *res;
    float *in;                /* CPU: the network input */
    odl_prep_batch *pending;  /* CPU: its decoding */
    odl_gpu_prep_batch *b;    /* device: its decoding */
    /* device: its NMS, read back after the next group's letterbox is queued */
    int slot;
    int64_t rows;
    int nc;
    const float *pred;
} group;

/* Groups alive at once on the device path: the one whose statistics are pending and up to
 * ODL_GPU_PREP_DEPTH decoding or computing (the CPU path uses two). */
#define NGROUPS (ODL_GPU_PREP_DEPTH + 1)

/* The device NMS buffers of one group in flight. */
typedef struct nms_slot {
    float *out, *h_out;
    int32_t *cnt, *h_cnt;
    odl_event start, mid, end; /* around letterbox + forward, and NMS + copy */
} nms_slot;

struct eval_ctx {
    odl_yolov5 *net;
    const eval_opts *o;
    odl_device dev;
    const odl_backend *be; /* device path: the backend of letterbox_u8 and yolo_nms */
    int cuda;
    odl_prep_pool *pool;   /* CPU path */
    odl_gpu_prep *gp;      /* device path */
    odl_nms_params np;
    group g[NGROUPS];
    nms_slot ns[2];
    int *nd;
    odl_detection *det;
    uint8_t *correct;
    float *lbox, *hout, *h_pred;
    int *lcls, lab_cap;
    size_t hout_cap, h_pred_cap;
    double device_ms[2]; /* letterbox + forward, NMS + copy */
    int64_t device_batches;
    char note[1400];
};

odl_status eval_ctx_create(odl_yolov5 *net, const eval_opts *o, eval_ctx **out) {
    eval_ctx *c = calloc(1, sizeof *c);
    if (!c) return ODL_ERR(ODL_E_NOMEM, "evaluation buffers");
    odl_status st = ODL_OK;
    c->net = net;
    c->o = o;
    c->dev = odl_yolov5_device(net);
    c->cuda = c->dev.type == ODL_DEV_CUDA;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int threads = o->workers;
    if (cores > 0 && threads > cores) threads = (int)cores;
    c->np = odl_nms_defaults();
    c->np.conf_thres = o->conf;
    c->np.iou_thres = o->iou;
    c->np.max_det = o->max_det;
    c->np.multi_label = 1; /* val.py: non_max_suppression(..., multi_label=True) */
    const int B = o->batch;
    c->nd = malloc(sizeof(int) * (size_t)B);
    c->det = malloc(sizeof *c->det * (size_t)o->max_det * B);
    c->correct = malloc((size_t)o->max_det * ODL_DET_NIOU);
    if (!c->nd || !c->det || !c->correct) {
        st = ODL_ERR(ODL_E_NOMEM, "evaluation buffers");
        goto fail;
    }
    for (int k = 0; k < NGROUPS; k++) {
        c->g[k].jobs = calloc((size_t)B, sizeof(odl_prep_job));
        c->g[k].res = calloc((size_t)B, sizeof(odl_prep_result));
        if (!c->g[k].jobs || !c->g[k].res) {
            st = ODL_ERR(ODL_E_NOMEM, "evaluation buffers");
            goto fail;
        }
    }
    if (c->cuda || o->backend_post) {
        if (!(c->be = odl_backend_for(c->dev))) {
            st = ODL_ERR(ODL_E_NODEV, "%s", odl_error_msg_user());
            goto fail;
        }
        const odl_gpu_prep_options po = {.threads = threads < 1 ? 1 : threads, .max_batch = B,
                                         .nvjpeg = strcmp(o->decoder, "cpu") != 0, .keep_host = 0,
                                         .cpu_share = strcmp(o->decoder, "auto") == 0 ? -1 : 0};
        ODL_CHECK_GOTO(odl_gpu_prep_create(c->dev, &po, &c->gp), st, fail);
        /* every row of the NMS output defined once: a batch's copy back takes all max_det rows of each image,
         * of which NMS writes the image's count (compute-sanitizer initcheck read the rest as never written) */
        const size_t out_bytes = sizeof(float) * 6 * (size_t)o->max_det * B;
        for (int s = 0; s < 2; s++) {
            nms_slot *n = &c->ns[s];
            ODL_CHECK_GOTO(odl_mem_alloc(c->dev, out_bytes, (void **)&n->out), st, fail);
            ODL_CHECK_GOTO(odl_mem_alloc(c->dev, sizeof(int32_t) * (size_t)B, (void **)&n->cnt), st, fail);
            ODL_CHECK_GOTO(odl_host_alloc_pinned(out_bytes, (void **)&n->h_out), st, fail);
            ODL_CHECK_GOTO(odl_host_alloc_pinned(sizeof(int32_t) * (size_t)B, (void **)&n->h_cnt), st, fail);
            /* on the current stream, ahead of every NMS launch and copy back on it */
            ODL_CHECK_GOTO(c->be->fill((int64_t)out_bytes / (int64_t)sizeof(float), 0.0f, n->out), st, fail);
            if (c->cuda) {
                ODL_CHECK_GOTO(odl_event_create(&n->start), st, fail);
                ODL_CHECK_GOTO(odl_event_create(&n->mid), st, fail);
                ODL_CHECK_GOTO(odl_event_create(&n->end), st, fail);
            }
        }
        snprintf(c->note, sizeof c->note, "%s%s; letterbox and NMS on %s", odl_gpu_prep_nvjpeg_note(c->gp),
                 odl_gpu_prep_decoder(c->gp) == ODL_DECODER_CPU ? "" : ", the other images on the CPU",
                 odl_device_name(c->dev));
    } else {
        ODL_CHECK_GOTO(odl_prep_pool_create(threads, &c->pool), st, fail);
        snprintf(c->note, sizeof c->note, "CPU (libjpeg-turbo, libpng), %d thread(s)", threads);
    }
    *out = c;
    return ODL_OK;
fail:
    eval_ctx_free(c);
    return st;
}

void eval_ctx_free(eval_ctx *c) {
    if (!c) return;
    for (int k = 0; k < NGROUPS; k++) {
        odl_prep_wait(c->g[k].pending); /* never leave the pool writing into freed buffers */
        free(c->g[k].jobs);
        free(c->g[k].res);
        free(c->g[k].in);
    }
    odl_prep_pool_free(c->pool);
    odl_gpu_prep_free(c->gp);
    for (int s = 0; s < 2; s++) {
        odl_mem_free(c->dev, c->ns[s].out);
        odl_mem_free(c->dev, c->ns[s].cnt);
        odl_host_free_pinned(c->ns[s].h_out);
        odl_host_free_pinned(c->ns[s].h_cnt);
        if (c->cuda) {
            odl_event_destroy(c->ns[s].start);
            odl_event_destroy(c->ns[s].mid);
            odl_event_destroy(c->ns[s].end);
        }
    }
    free(c->nd);
    free(c->det);
    free(c->correct);
    free(c->lbox);
    free(c->lcls);
    free(c->hout);
    free(c->h_pred);
    free(c);
}

const char *eval_ctx_decoder_note(const eval_ctx *c) { return c->note; }
double eval_ctx_device_ms(const eval_ctx *c, double *forward_ms, double *nms_ms, int64_t *batches) {
    if (forward_ms) *forward_ms = c->device_ms[0];
    if (nms_ms) *nms_ms = c->device_ms[1];
    if (batches) *batches = c->device_batches;
    return c->device_ms[0] + c->device_ms[1];
}

int eval_ctx_prep_stats(const eval_ctx *c, odl_gpu_prep_stats *out) {
    if (!c->gp) return 0;
    odl_gpu_prep_get_stats(c->gp, out);
    return 1;
}

/* Statistics of one image from its nd detections after NMS (letterboxed pixels; mapped here). */
static odl_status image_stats(eval_ctx *c, odl_detection *det, int nd, const odl_det_sample *s, const odl_prep_result *pr,
                              int index, bytes *out) {
    if (s->n_labels > c->lab_cap) {
        free(c->lbox);
        free(c->lcls);
        c->lab_cap = 0;
        c->lbox = malloc(sizeof(float) * 4 * (size_t)s->n_labels);
        c->lcls = malloc(sizeof(int) * (size_t)s->n_labels);
        if (!c->lbox || !c->lcls) return ODL_ERR(ODL_E_NOMEM, "labels of %d boxes", s->n_labels);
        c->lab_cap = s->n_labels;
    }
    float *lbox = c->lbox;
    int *lcls = c->lcls;
    for (int k = 0; k < nd; k++) {
        float b[4] = {det[k].x1, det[k].y1, det[k].x2, det[k].y2};
        odl_prep_unmap(pr, b);
        det[k].x1 = b[0];
        det[k].y1 = b[1];
        det[k].x2 = b[2];
        det[k].y2 = b[3];
    }
    /* Labels in original pixels (val.py: xywh2xyxy, scale_boxes with clip_boxes). */
    const float W = (float)pr->src_w, H = (float)pr->src_h;
    for (int l = 0; l < s->n_labels; l++) {
        const odl_box_label *lb = &s->labels[l];
        float v[4] = {(lb->cx - lb->w / 2) * W, (lb->cy - lb->h / 2) * H, (lb->cx + lb->w / 2) * W,
                      (lb->cy + lb->h / 2) * H};
        for (int i = 0; i < 4; i++) {
            float lim = (i & 1) ? H : W;
            lbox[4 * l + i] = v[i] < 0 ? 0 : v[i] > lim ? lim : v[i];
        }
        lcls[l] = lb->class_id;
    }
    ODL_CHECK(odl_det_match(det, nd, lbox, lcls, s->n_labels, c->correct));
    rec_hdr h = {index, nd, s->n_labels, pr->decoder};
    ODL_CHECK(bytes_put(out, &h, sizeof h));
    for (int k = 0; k < nd; k++) {
        rec_det r;
        memset(&r, 0, sizeof r);
        r.box[0] = det[k].x1;
        r.box[1] = det[k].y1;
        r.box[2] = det[k].x2;
        r.box[3] = det[k].y2;
        r.conf = det[k].conf;
        r.cls = det[k].class_id;
        memcpy(r.correct, c->correct + (size_t)k * ODL_DET_NIOU, ODL_DET_NIOU);
        ODL_CHECK(bytes_put(out, &r, sizeof r));
    }
    return bytes_put(out, lcls, sizeof(int32_t) * (size_t)s->n_labels);
}

/* Fill q with the images from *next on that share its letterbox shape (at most --batch-size, stopping
 * at hi), and advance *next. */
static void form_group(const eval_opts *o, group *q, const odl_det_dataset *ds, const int *order, const int *shape,
                       int *next, int hi) {
    q->first = *next;
    q->H = shape[2 * *next];
    q->W = shape[2 * *next + 1];
    q->n = 0;
    while (*next < hi && q->n < o->batch && shape[2 * *next] == q->H && shape[2 * *next + 1] == q->W) {
        q->jobs[q->n++] = (odl_prep_job){ds->samples[order[*next]].image, o->img_size, q->W, q->H, 0};
        ++*next;
    }
}

/* The group's statistics, then the faults of its step. */
static odl_status group_stats(eval_ctx *c, const group *q, const odl_det_dataset *ds, const int *order, int rank,
                              const odl_fault_plan *faults, int64_t *batches, bytes *out) {
    for (int b = 0; b < q->n; b++) {
        const int idx = order[q->first + b];
        ODL_CHECK(image_stats(c, c->det + (size_t)b * c->o->max_det, c->nd[b], &ds->samples[idx], &q->res[b], idx, out));
    }
    odl_fault_after_step(faults, rank, ++*batches);
    return ODL_OK;
}

static odl_status decode_errors(const group *q) {
    for (int b = 0; b < q->n; b++)
        if (q->res[b].status != ODL_OK) return ODL_ERR(q->res[b].status, "%s", q->res[b].err);
    return ODL_OK;
}

/* ---- CPU ---- */
static odl_status cpu_submit(eval_ctx *c, group *q, const odl_det_dataset *ds, const int *order, const int *shape, int *next,
                             int hi) {
    form_group(c->o, q, ds, order, shape, next, hi);
    float *nb = realloc(q->in, sizeof(float) * 3 * (size_t)q->H * q->W * q->n);
    if (!nb) return ODL_ERR(ODL_E_NOMEM, "input batch %d x 3 x %d x %d", q->n, q->H, q->W);
    q->in = nb;
    return odl_prep_submit(c->pool, q->jobs, q->n, q->in, q->res, &q->pending);
}

static odl_status cpu_loop(eval_ctx *c, const odl_det_dataset *ds, const int *order, const int *shape, int lo, int hi,
                           int rank, const odl_fault_plan *faults, int64_t *batches, bytes *out, double t[3]) {
    const int nc = odl_yolov5_num_classes(c->net);
    /* Double buffering: the group after the current one decodes on the pool during its forward. */
    int next = lo, cur = 0;
    if (next < hi) ODL_CHECK(cpu_submit(c, &c->g[0], ds, order, shape, &next, hi));
    while (c->g[cur].pending) {
        group *q = &c->g[cur];
        double t0 = odl_mono_ms();
        if (next < hi) ODL_CHECK(cpu_submit(c, &c->g[cur ^ 1], ds, order, shape, &next, hi));
        odl_prep_wait(q->pending);
        q->pending = NULL;
        double t1 = odl_mono_ms();
        t[0] += t1 - t0;
        ODL_CHECK(decode_errors(q));
        int64_t rows;
        int no;
        ODL_CHECK(odl_yolov5_forward_host(c->net, q->in, q->n, q->H, q->W, &c->hout, &c->hout_cap, &rows, &no));
        for (int b = 0; b < q->n; b++)
            ODL_CHECK(odl_yolo_nms(c->hout + (size_t)b * rows * no, rows, nc, &c->np, c->det + (size_t)b * c->o->max_det,
                                   c->o->max_det, &c->nd[b]));
        double t2 = odl_mono_ms();
        t[1] += t2 - t1;
        ODL_CHECK(group_stats(c, q, ds, order, rank, faults, batches, out));
        t[2] += odl_mono_ms() - t2;
        cur ^= 1;
    }
    return ODL_OK;
}

static odl_status cpu_shard(eval_ctx *c, const odl_det_dataset *ds, const int *order, const int *shape, int lo, int hi,
                            int rank, const odl_fault_plan *faults, int64_t *batches, bytes *out, double t[3]) {
    odl_status st = cpu_loop(c, ds, order, shape, lo, hi, rank, faults, batches, out, t);
    for (int k = 0; k < 2; k++) { /* after a failure midway: never leave the pool writing into the buffers */
        odl_prep_wait(c->g[k].pending);
        c->g[k].pending = NULL;
    }
    return st;
}

/* ---- device ---- */

/* Queue the group's letterbox (after its decoding), forward, NMS and the copy of the kept boxes on the
 * current stream. */
static odl_status dev_launch(eval_ctx *c, group *q) {
    const odl_stream st = odl_stream_current();
    nms_slot *ns = &c->ns[q->slot];
    if (c->cuda) ODL_CHECK(odl_event_record(ns->start, st));
    odl_tensor *x;
    const odl_tensor *y;
    ODL_CHECK(odl_yolov5_input(c->net, q->n, q->H, q->W, &x));
    int idx[4096];
    for (int b = 0; b < q->n; b++) idx[b] = b;
    ODL_CHECK(odl_gpu_prep_letterbox(q->b, idx, q->n, (float *)x->data, st));
    ODL_CHECK(odl_yolov5_forward(c->net, x, &y));
    q->rows = y->shape[1];
    q->nc = (int)y->shape[2] - 5;
    q->pred = (const float *)y->data;
    if (c->cuda) ODL_CHECK(odl_event_record(ns->mid, st));
    const odl_nms_params *np_ = &c->np;
    odl_yolo_nms_args a = {.N = q->n, .rows = q->rows, .nc = q->nc, .pred = q->pred, .conf_thres = np_->conf_thres,
                           .iou_thres = np_->iou_thres, .max_wh = np_->max_wh, .multi_label = np_->multi_label,
                           .agnostic = np_->agnostic, .max_nms = np_->max_nms, .max_det = np_->max_det,
                           .cand_cap = 1 << 16, .out = ns->out, .count = ns->cnt};
    ODL_CHECK(c->be->yolo_nms(&a));
    ODL_CHECK(odl_memcpy_async(ns->h_cnt, odl_cpu(), ns->cnt, c->dev, sizeof(int32_t) * q->n, st));
    ODL_CHECK(odl_memcpy_async(ns->h_out, odl_cpu(), ns->out, c->dev, sizeof(float) * 6 * np_->max_det * q->n, st));
    if (c->cuda) ODL_CHECK(odl_event_record(ns->end, st));
    return ODL_OK;
}

/* Wait for the group's boxes and turn them into c->det / c->nd; an image with more candidates than the
 * GPU buffer holds goes through odl_yolo_nms on its copied rows (still the group's: the next forward is
 * queued after this). */
static odl_status dev_finish(eval_ctx *c, group *q) {
    nms_slot *ns = &c->ns[q->slot];
    const odl_nms_params *np_ = &c->np;
    if (c->cuda) {
        ODL_CHECK(odl_event_synchronize(ns->end));
        float f = 0, n = 0;
        ODL_CHECK(odl_event_elapsed_ms(ns->start, ns->mid, &f));
        ODL_CHECK(odl_event_elapsed_ms(ns->mid, ns->end, &n));
        c->device_ms[0] += f;
        c->device_ms[1] += n;
        c->device_batches++;
    }
    for (int b = 0; b < q->n; b++) {
        odl_detection *d = c->det + (size_t)b * np_->max_det;
        if (ns->h_cnt[b] < 0) {
            size_t rn = (size_t)q->rows * (5 + q->nc);
            if (c->h_pred_cap < rn) {
                free(c->h_pred);
                c->h_pred_cap = 0;
                if (!(c->h_pred = malloc(sizeof(float) * rn))) return ODL_ERR(ODL_E_NOMEM, "prediction rows");
                c->h_pred_cap = rn;
            }
            ODL_CHECK(odl_memcpy_async(c->h_pred, odl_cpu(), q->pred + rn * b, c->dev, sizeof(float) * rn, odl_stream_current()));
            ODL_CHECK(odl_stream_synchronize(odl_stream_current()));
            ODL_CHECK(odl_yolo_nms(c->h_pred, q->rows, q->nc, np_, d, np_->max_det, &c->nd[b]));
            continue;
        }
        c->nd[b] = ns->h_cnt[b];
        for (int k = 0; k < c->nd[b]; k++) {
            const float *o = ns->h_out + ((size_t)b * np_->max_det + k) * 6;
            d[k] = (odl_detection){o[0], o[1], o[2], o[3], o[4], (int)o[5]};
        }
    }
    return ODL_OK;
}

/* Keep the image prep full: groups formed and submitted until ODL_GPU_PREP_DEPTH are in flight or the
 * shard is used up. c->g is the ring, *tail its next free entry, *queued the groups submitted and not
 * yet launched. */
static odl_status dev_top_up(eval_ctx *c, const odl_det_dataset *ds, const int *order, const int *shape, int *next, int hi,
                             int *tail, int *queued) {
    while (*queued < ODL_GPU_PREP_DEPTH && *next < hi) {
        group *q = &c->g[*tail];
        form_group(c->o, q, ds, order, shape, next, hi);
        ODL_CHECK(odl_gpu_prep_submit(c->gp, q->jobs, q->n, q->res, &q->b));
        *tail = (*tail + 1) % NGROUPS;
        (*queued)++;
    }
    return ODL_OK;
}

/* The device loop over a ring of groups: while group cur computes, the one before it is matched against
 * its labels and up to ODL_GPU_PREP_DEPTH - 1 after it decode. */
static odl_status dev_shard(eval_ctx *c, const odl_det_dataset *ds, const int *order, const int *shape, int lo, int hi,
                            int rank, const odl_fault_plan *faults, int64_t *batches, bytes *out, double t[3]) {
    if (c->o->batch > 4096) return ODL_ERR(ODL_E_INVAL, "--batch-size %d: at most 4096 on a device", c->o->batch);
    int next = lo, cur = 0, prev = -1, slot = 0, tail = 0, queued = 0;
    odl_status st = ODL_OK;
    group *g = c->g;
    for (int k = 0; k < NGROUPS; k++) g[k].b = NULL;
    for (;;) {
        double t0 = odl_mono_ms();
        ODL_CHECK_GOTO(dev_top_up(c, ds, order, shape, &next, hi, &tail, &queued), st, out);
        if (!queued) break;
        group *q = &g[cur];
        ODL_CHECK_GOTO(odl_gpu_prep_wait(q->b), st, out);
        ODL_CHECK_GOTO(decode_errors(q), st, out);
        double t1 = odl_mono_ms();
        t[0] += t1 - t0;
        if (prev >= 0) ODL_CHECK_GOTO(dev_finish(c, &g[prev]), st, out);
        q->slot = slot;
        slot ^= 1;
        ODL_CHECK_GOTO(dev_launch(c, q), st, out);
        odl_gpu_prep_release(q->b);
        q->b = NULL;
        queued--;
        double t2 = odl_mono_ms();
        t[1] += t2 - t1;
        if (prev >= 0) ODL_CHECK_GOTO(group_stats(c, &g[prev], ds, order, rank, faults, batches, out), st, out);
        t[2] += odl_mono_ms() - t2;
        prev = cur;
        cur = (cur + 1) % NGROUPS;
    }
    if (prev >= 0) {
        double t1 = odl_mono_ms();
        ODL_CHECK_GOTO(dev_finish(c, &g[prev]), st, out);
        double t2 = odl_mono_ms();
        t[1] += t2 - t1;
        ODL_CHECK_GOTO(group_stats(c, &g[prev], ds, order, rank, faults, batches, out), st, out);
        t[2] += odl_mono_ms() - t2;
    }
out:
    for (int k = 0; k < NGROUPS; k++)
        if (g[k].b) { /* a failure midway: hand the prep its batches back */
            odl_gpu_prep_wait(g[k].b);
            odl_gpu_prep_release(g[k].b);
            g[k].b = NULL;
        }
    if (st != ODL_OK && c->cuda) odl_stream_synchronize(odl_stream_current());
    return st;
}

odl_status eval_shard(eval_ctx *c, const odl_det_dataset *ds, const int *order, const int *shape, int lo, int hi, int rank,
                      const odl_fault_plan *faults, int64_t *batches, bytes *out, double t[3]) {
    return c->gp ? dev_shard(c, ds, order, shape, lo, hi, rank, faults, batches, out, t)
                 : cpu_shard(c, ds, order, shape, lo, hi, rank, faults, batches, out, t);
}
