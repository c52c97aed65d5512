/* Detection input on a device (include/odl/gpu_prep.h).
 *
 * Per batch (a slot; ODL_GPU_PREP_DEPTH slots, used in turn):
 *   stage 1, pool threads: read the file, parse its headers (odl_image_info_of), plan the geometry
 *     (odl_prep_plan, the CPU path's), choose the route: nvJPEG candidate or CPU;
 *   a feeder thread (options.feeders of them, each taking the next slot queued; each has its own nvJPEG
 *     handle, state and stream): nvJPEG's own header check of the candidates, the layout of
 *     the slot's arenas (each image a region of the device arena; CPU images also one of the pinned arena),
 *     stage 2 queued on the pool (CPU decodes into the pinned arena), nvJPEG's batched decode into the
 *     device arena on the prep stream, then, once stage 2 is done, the uploads of the CPU images on the
 *     prep stream and the `ready` event;
 *   caller: odl_gpu_prep_letterbox on its stream waits for `ready`, runs letterbox_u8 from the arena and
 *     records `done`, after which the slot's device arena may be written again.
 * A batch of nvJPEG's that fails as a whole is decoded again on the CPU, image by image, so that each
 * image gets its own outcome (its CPU error, or its pixels). */
#include "odl/gpu_prep.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/prep_internal.h"
#include "odl/backend.h"
#include "odl/clock.h"
#include "odl/env.h"
#include "odl/log.h"
#include "odl/nvjpeg.h"

#define NSLOTS ODL_GPU_PREP_DEPTH

enum { ROUTE_NONE = 0, ROUTE_CPU = 1, ROUTE_GPU = 2 };

/* What a feeder is doing: the report of a batch that waits too long (odl_gpu_prep_wait) names it. */
enum { PH_IDLE, PH_STAGE1, PH_CHECK, PH_REUSE, PH_NVJPEG, PH_STAGE2, PH_UPLOAD, PH_COUNT };
static const char *const phase_name[PH_COUNT] = {
    "idle",
    "waiting for its batch's file reads and headers",
    "in nvJPEG's header checks",
    "waiting for its slot's earlier use, growing its arenas",
    "in nvJPEG's batched decode call",
    "waiting for its batch's CPU decodes",
    "queuing the uploads",
};

typedef struct pimg {
    uint8_t *bytes; /* the file */
    size_t len;
    odl_image_info info;
    int route;
    int decoded;        /* CPU route: stage 2 has run on it */
    int w1, h1;         /* the CPU route's upload: oriented, after the load_size resize */
    int64_t off;        /* region in the device arena */
    int64_t pin_off;    /* CPU route: region in the pinned arena (laid out only for the CPU route) */
    odl_image host;     /* keep_host, CPU route: the decoded image */
} pimg;

struct odl_gpu_prep_batch {
    odl_gpu_prep *p;
    int busy, fed;       /* submitted and not released; the feeder is done with it */
    int n;
    const odl_prep_job *jobs;
    odl_prep_result *res;
    pimg *im;
    uint8_t *pin, *dev;  /* arenas */
    size_t pin_cap, dev_cap;
    odl_letterbox_src *h_src, *h_sub, *d_sub;
    odl_event ready, done;
    int ready_recorded, done_recorded;
    odl_prep_batch *stage;
    odl_status fail;
    char fail_msg[1024];
};

struct odl_gpu_prep {
    odl_device dev;
    int cuda;
    odl_gpu_prep_options o;
    int cpu_share; /* o.cpu_share resolved: percent of nvJPEG's candidates decoded on the CPU */
    const odl_backend *be;
    odl_prep_pool *pool;
    odl_nvjpeg *nvj; /* feeder 0's: whether nvJPEG decodes at all, and the note */
    int decoder;
    char note[1200];
    odl_stream ps; /* feeder 0's */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct feeder {
        odl_gpu_prep *p;
        pthread_t th;
        int started;
        odl_nvjpeg *nvj; /* a handle and state of its own (a state is one thread's); NULL: no nvJPEG */
        odl_stream ps;   /* its decodes, uploads and ready events */
        _Atomic int phase, phase_images; /* PH_*, and the images of its batch in nvJPEG's call */
        _Atomic int64_t phase_since_ns;  /* odl_mono_ns() when the phase began */
        /* its nvJPEG batch */
        const uint8_t **nv_data;
        size_t *nv_len, *nv_pitch;
        uint8_t **nv_dst;
        int *nv_idx;
    } fd[NSLOTS];
    int n_feeders, stop;
    double stall_ms; /* ODL_GPU_PREP_STALL_S: a wait this long logs the feeders' phases */
    struct odl_gpu_prep_batch slot[NSLOTS];
    int queue[NSLOTS], qhead, qcount; /* slots for the feeders, in submit order */
    int next;                          /* the slot the next submit takes */
    odl_gpu_prep_stats stats; /* under mu */
};

const char *odl_decoder_name(int d) {
    return d == ODL_DECODER_NVJPEG_HW ? "nvjpeg-hardware" : d == ODL_DECODER_NVJPEG_HYBRID ? "nvjpeg-gpu-hybrid" : "cpu";
}

/* ---- events and copies, which the CPU device does without (no CUDA call where no driver is) ---- */
static odl_status ev_record(odl_gpu_prep *p, odl_event e, odl_stream s) { return p->cuda ? odl_event_record(e, s) : ODL_OK; }
static odl_status ev_sync(odl_gpu_prep *p, odl_event e, int recorded) {
    return p->cuda && recorded ? odl_event_synchronize(e) : ODL_OK;
}
static odl_status ev_wait(odl_gpu_prep *p, odl_stream s, odl_event e, int recorded) {
    return p->cuda && recorded ? odl_stream_wait_event(s, e) : ODL_OK;
}

static void slot_fail(struct odl_gpu_prep_batch *b, odl_status st) {
    if (b->fail != ODL_OK) return;
    b->fail = st;
    snprintf(b->fail_msg, sizeof b->fail_msg, "%s", odl_error_msg());
}

static void img_fail(struct odl_gpu_prep_batch *b, int k, odl_status st) {
    odl_prep_result *r = &b->res[k];
    r->status = st;
    if (!strstr(odl_error_msg(), b->jobs[k].path)) odl_error_prefix("%s", b->jobs[k].path);
    snprintf(r->err, sizeof r->err, "%s", odl_error_msg());
    b->im[k].route = ROUTE_NONE;
}

/* 0 unless ODL_NVJPEG_CPU_SHARE says otherwise: at batch 32 (fp16, 16 threads) no share beat the
 * hardware decoder alone, on the H200 over 512 files (2220 images/s at 0%, 2156 at 30%, 2118 at 50%) nor
 * on the H100 over 5,120 (3,013 at 0%, 2,775-2,932 at 15-50%): the CPU decode threads slow the feeder's
 * nvJPEG call (bench/results/2026-12-03, 2026-12-06). */
int odl_gpu_prep_default_cpu_share(void) {
    if (odl_env_is_set(ODL_ENV_NVJPEG_CPU_SHARE)) return (int)odl_env_int(ODL_ENV_NVJPEG_CPU_SHARE);
    return 0;
}

/* Whether the CPU share takes the image at path: FNV-1a of its file name (not the folder: the same
 * file decodes the same way wherever the data set is), mod 100, below the share. */
static int cpu_share_takes(const odl_gpu_prep *p, const char *path) {
    if (p->cpu_share <= 0) return 0;
    const char *name = strrchr(path, '/');
    name = name ? name + 1 : path;
    uint32_t h = 2166136261u;
    for (const unsigned char *c = (const unsigned char *)name; *c; c++) h = (h ^ *c) * 16777619u;
    return (int)(h % 100) < p->cpu_share;
}

/* ---- stage 1: read, headers, plan, route (pool threads) ---- */
static void stage1(void *ctx, int k) {
    struct odl_gpu_prep_batch *b = ctx;
    const odl_prep_job *job = &b->jobs[k];
    odl_prep_result *r = &b->res[k];
    pimg *im = &b->im[k];
    memset(r, 0, sizeof *r);
    odl_error_clear();
    free(im->bytes);
    im->bytes = NULL;
    im->route = ROUTE_NONE;
    im->decoded = 0;
    odl_status st = odl_file_read(job->path, &im->bytes, &im->len);
    if (st == ODL_OK) st = odl_image_info_of(im->bytes, im->len, job->path, &im->info);
    if (st == ODL_OK) st = odl_prep_plan(job, im->info.oriented_w, im->info.oriented_h, r, &im->w1, &im->h1);
    if (st != ODL_OK) {
        img_fail(b, k, st);
        return;
    }
    const odl_image_info *f = &im->info;
    /* nvJPEG takes a baseline JPEG of 1 or 3 components that is complete (a file cut short is the CPU
     * path's "truncated" error) and needs one resize: the GPU resizes the decode once, so an image
     * that val.py resizes twice (load_size, then a letterbox that scales again) stays on the CPU. */
    const int one_resize = (im->w1 == f->oriented_w && im->h1 == f->oriented_h) ||
                           (r->geo.unpad_w == im->w1 && r->geo.unpad_h == im->h1);
    im->route = b->p->nvj && f->format == ODL_IMAGE_JPEG && !cpu_share_takes(b->p, job->path) && !f->progressive && !f->cmyk &&
                        (f->components == 1 || f->components == 3) && f->complete && one_resize
                    ? ROUTE_GPU
                    : ROUTE_CPU;
}

/* ---- stage 2: CPU decodes into the pinned arena (pool threads) ---- */
static void stage2(void *ctx, int k) {
    struct odl_gpu_prep_batch *b = ctx;
    pimg *im = &b->im[k];
    if (im->route != ROUTE_CPU || im->decoded) return;
    im->decoded = 1;
    odl_error_clear();
    odl_image img = {0};
    odl_status st = odl_image_decode(im->bytes, im->len, b->jobs[k].path, &img);
    if (st == ODL_OK && (img.width != im->info.oriented_w || img.height != im->info.oriented_h))
        st = ODL_ERR(ODL_E_FORMAT, "decoded %dx%d where the header says %dx%d", img.width, img.height, im->info.oriented_w,
                     im->info.oriented_h);
    uint8_t *dst = b->pin + im->pin_off;
    if (st == ODL_OK) {
        if (im->w1 != img.width || im->h1 != img.height)
            st = odl_image_resize_linear(img.data, img.width, img.height, 3, dst, im->w1, im->h1);
        else
            memcpy(dst, img.data, (size_t)3 * img.width * img.height);
    }
    if (st != ODL_OK) {
        odl_image_free(&img);
        img_fail(b, k, st);
        return;
    }
    b->res[k].decoder = ODL_DECODER_CPU;
    if (b->p->o.keep_host) im->host = img;
    else odl_image_free(&img);
}

/* Grow an arena to `need` bytes (the slot's earlier use must be over: the caller waited for it), a
 * pinned one keeping its first `keep` bytes (CPU images already decoded into it); a device one keeps
 * nothing and is freed first, so that the device holds one arena at a time. */
static odl_status arena(odl_gpu_prep *p, int device, uint8_t **buf, size_t *cap, size_t need, size_t keep) {
    if (need <= *cap) return ODL_OK;
    const size_t nc = need + need / 4;
    if (device) {
        odl_mem_free(p->dev, *buf);
        *buf = NULL;
        *cap = 0;
        ODL_CHECK(odl_mem_alloc(p->dev, nc, (void **)buf));
    } else {
        uint8_t *nb = NULL;
        ODL_CHECK(odl_host_alloc_pinned(nc, (void **)&nb));
        if (keep) memcpy(nb, *buf, keep);
        odl_host_free_pinned(*buf);
        *buf = nb;
    }
    *cap = nc;
    return ODL_OK;
}

static int64_t align256(int64_t v) { return (v + 255) & ~(int64_t)255; }

/* nvJPEG's output rows: 256-byte aligned, as hardware decoders like their surfaces' pitch. */
static int64_t nv_pitch(const pimg *im) { return align256((int64_t)3 * im->info.width); }

/* Milliseconds since *t, which moves to now. */
static double lap(double *t) {
    const double now = odl_mono_ms(), d = now - *t;
    *t = now;
    return d;
}

static void set_phase(struct feeder *fd, int phase, int images) {
    atomic_store(&fd->phase_images, images);
    atomic_store(&fd->phase_since_ns, odl_mono_ns());
    atomic_store(&fd->phase, phase);
}

/* The feeder's work on one slot; its phases' times added to *ts. */
static void feed(struct feeder *fd, struct odl_gpu_prep_batch *b, odl_gpu_prep_stats *ts) {
    odl_gpu_prep *p = fd->p;
    odl_error_clear();
    double t = odl_mono_ms(), t0 = t;
    set_phase(fd, PH_STAGE1, b->n);
    odl_prep_wait(b->stage);
    b->stage = NULL;
    ts->stage1_wait_ms += lap(&t);
    set_phase(fd, PH_CHECK, b->n);
    odl_status st;
    /* nvJPEG's own check of its candidates */
    for (int k = 0; k < b->n; k++)
        if (b->im[k].route == ROUTE_GPU && !odl_nvjpeg_supported(fd->nvj, b->im[k].bytes, b->im[k].len))
            b->im[k].route = ROUTE_CPU;
    ts->nvjpeg_check_ms += lap(&t);
    /* layout: every usable image a device region big enough for either route (a failed nvJPEG batch
     * falls back to the CPU), and a pinned one for the CPU route only (pinned memory is slow to allocate:
     * nvJPEG's images get theirs if their batch falls back) */
    int64_t dev_end = 0, pin_end = 0;
    for (int k = 0; k < b->n; k++) {
        pimg *im = &b->im[k];
        if (im->route == ROUTE_NONE) continue;
        const int64_t raw = nv_pitch(im) * im->info.height, cpu = (int64_t)3 * im->w1 * im->h1;
        im->off = dev_end;
        dev_end = align256(dev_end + (raw > cpu ? raw : cpu));
        im->pin_off = -1;
        if (im->route == ROUTE_CPU) {
            im->pin_off = pin_end;
            pin_end = align256(pin_end + cpu);
        }
    }
    /* the slot's earlier use: its letterbox has read the device arena, its uploads have read the pinned one */
    set_phase(fd, PH_REUSE, b->n);
    if ((st = ev_sync(p, b->done, b->done_recorded)) != ODL_OK || (st = ev_sync(p, b->ready, b->ready_recorded)) != ODL_OK ||
        (st = arena(p, 1, &b->dev, &b->dev_cap, (size_t)dev_end + 256, 0)) != ODL_OK ||
        (st = arena(p, 0, &b->pin, &b->pin_cap, (size_t)pin_end + 256, 0)) != ODL_OK) {
        slot_fail(b, st);
        goto out;
    }
    b->done_recorded = b->ready_recorded = 0;
    ts->reuse_ms += lap(&t);
    /* nvJPEG's images (listed before stage 2 runs: it may mark the images it fails) */
    int ng = 0;
    for (int k = 0; k < b->n; k++) {
        pimg *im = &b->im[k];
        if (im->route != ROUTE_GPU) continue;
        fd->nv_idx[ng] = k;
        fd->nv_data[ng] = im->bytes;
        fd->nv_len[ng] = im->len;
        fd->nv_dst[ng] = b->dev + im->off;
        fd->nv_pitch[ng] = (size_t)nv_pitch(im);
        ng++;
    }
    if ((st = odl_prep_pool_run(p->pool, b->n, stage2, b, &b->stage)) != ODL_OK) {
        slot_fail(b, st);
        goto out;
    }
    /* nvJPEG, meanwhile, on the prep stream */
    lap(&t);
    set_phase(fd, PH_NVJPEG, ng);
    if (ng) {
        st = odl_nvjpeg_decode_batch(fd->nvj, ng, fd->nv_data, fd->nv_len, fd->nv_dst, fd->nv_pitch, fd->ps);
        if (st == ODL_OK) {
            for (int g = 0; g < ng; g++) b->res[fd->nv_idx[g]].decoder = p->decoder;
        } else {
            /* the whole batch failed: its images one by one on the CPU, each with its own outcome */
            ODL_LOG_WARN("%s; decoding its %d images on the CPU", odl_error_msg(), ng);
            odl_prep_wait(b->stage);
            b->stage = NULL;
            const size_t keep = (size_t)pin_end;
            for (int g = 0; g < ng; g++) {
                pimg *im = &b->im[fd->nv_idx[g]];
                im->route = ROUTE_CPU;
                im->pin_off = pin_end;
                pin_end = align256(pin_end + (int64_t)3 * im->w1 * im->h1);
            }
            if ((st = arena(p, 0, &b->pin, &b->pin_cap, (size_t)pin_end + 256, keep)) != ODL_OK) {
                slot_fail(b, st);
                goto out;
            }
            if ((st = odl_prep_pool_run(p->pool, b->n, stage2, b, &b->stage)) != ODL_OK) {
                slot_fail(b, st);
                goto out;
            }
        }
    }
    ts->nvjpeg_call_ms += lap(&t);
    set_phase(fd, PH_STAGE2, b->n);
    odl_prep_wait(b->stage);
    b->stage = NULL;
    ts->stage2_wait_ms += lap(&t);
    set_phase(fd, PH_UPLOAD, b->n);
    /* uploads of the CPU images, the letterbox sources, `ready` */
    for (int k = 0; k < b->n; k++) {
        pimg *im = &b->im[k];
        const odl_letterbox *g = &b->res[k].geo;
        if (im->route == ROUTE_CPU) {
            ts->images_cpu++;
            st = odl_memcpy_async(b->dev + im->off, p->dev, b->pin + im->pin_off, odl_cpu(), (size_t)3 * im->w1 * im->h1, fd->ps);
            if (st != ODL_OK) {
                slot_fail(b, st);
                goto out;
            }
            b->h_src[k] = (odl_letterbox_src){im->off, 3 * im->w1, im->w1, im->h1, 1, g->unpad_w, g->unpad_h, g->left, g->top, 0};
        } else if (im->route == ROUTE_GPU) {
            ts->images_nvjpeg++;
            b->h_src[k] = (odl_letterbox_src){im->off, nv_pitch(im), im->info.width, im->info.height,
                                              im->info.orientation, g->unpad_w, g->unpad_h, g->left, g->top, 0};
        }
    }
    if ((st = ev_record(p, b->ready, fd->ps)) != ODL_OK) slot_fail(b, st);
    else b->ready_recorded = 1;
    ts->upload_ms += lap(&t);
out:
    if (b->stage) {
        odl_prep_wait(b->stage);
        b->stage = NULL;
    }
    ts->batches++;
    ts->busy_ms += odl_mono_ms() - t0;
    set_phase(fd, PH_IDLE, 0);
}

static void add_stats(odl_gpu_prep_stats *a, const odl_gpu_prep_stats *b) {
    a->batches += b->batches;
    a->images_nvjpeg += b->images_nvjpeg;
    a->images_cpu += b->images_cpu;
    a->stage1_wait_ms += b->stage1_wait_ms;
    a->nvjpeg_check_ms += b->nvjpeg_check_ms;
    a->reuse_ms += b->reuse_ms;
    a->nvjpeg_call_ms += b->nvjpeg_call_ms;
    a->stage2_wait_ms += b->stage2_wait_ms;
    a->upload_ms += b->upload_ms;
    a->busy_ms += b->busy_ms;
}

void odl_gpu_prep_get_stats(odl_gpu_prep *p, odl_gpu_prep_stats *out) {
    pthread_mutex_lock(&p->mu);
    *out = p->stats;
    pthread_mutex_unlock(&p->mu);
}

static void *feeder_main(void *arg) {
    struct feeder *fd = arg;
    odl_gpu_prep *p = fd->p;
    if (p->cuda && odl_cuda_init(p->dev.index, 0) != ODL_OK)
        ODL_LOG_ERROR("image feeder: %s", odl_error_msg()); /* every slot then fails on its first CUDA call */
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->qcount && !p->stop) pthread_cond_wait(&p->cv, &p->mu);
        if (!p->qcount && p->stop) break;
        struct odl_gpu_prep_batch *b = &p->slot[p->queue[p->qhead]];
        p->qhead = (p->qhead + 1) % NSLOTS;
        p->qcount--;
        pthread_mutex_unlock(&p->mu);
        odl_gpu_prep_stats ts = {0};
        feed(fd, b, &ts);
        pthread_mutex_lock(&p->mu);
        add_stats(&p->stats, &ts);
        b->fed = 1;
        pthread_cond_broadcast(&p->cv);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

odl_status odl_gpu_prep_create(odl_device dev, const odl_gpu_prep_options *o, odl_gpu_prep **out) {
    if (!o || !out || o->threads < 1 || o->threads > 256 || o->max_batch < 1)
        return ODL_ERR(ODL_E_INVAL, "odl_gpu_prep_create: bad options");
    *out = NULL;
    odl_gpu_prep *p = calloc(1, sizeof *p);
    if (!p) return ODL_ERR(ODL_E_NOMEM, "image prep");
    p->dev = dev;
    p->cuda = dev.type == ODL_DEV_CUDA;
    p->o = *o;
    p->cpu_share = o->cpu_share < 0 ? odl_gpu_prep_default_cpu_share() : o->cpu_share > 100 ? 100 : o->cpu_share;
    pthread_mutex_init(&p->mu, NULL);
    odl_cond_init_mono(&p->cv); /* the stall report's timed waits */
    odl_status st = ODL_OK;
    const int B = o->max_batch;
    if (!(p->be = odl_backend_for(dev)) || !p->be->letterbox_u8) {
        st = ODL_ERR(ODL_E_NODEV, "image prep: no letterbox_u8 in the backend of %s", odl_device_name(dev));
        goto fail;
    }
    ODL_CHECK_GOTO(odl_prep_pool_create(o->threads, &p->pool), st, fail);
    p->n_feeders = o->feeders > 0 ? o->feeders : (int)odl_env_int(ODL_ENV_GPU_PREP_FEEDERS);
    if (p->n_feeders < 1) p->n_feeders = 1;
    if (p->n_feeders > NSLOTS) p->n_feeders = NSLOTS;
    p->stall_ms = 1000.0 * (double)odl_env_int(ODL_ENV_GPU_PREP_STALL_S);
    for (int f = 0; f < p->n_feeders; f++) {
        struct feeder *fd = &p->fd[f];
        fd->p = p;
        if (p->cuda) ODL_CHECK_GOTO(odl_stream_create(&fd->ps), st, fail);
        fd->nv_data = calloc((size_t)B, sizeof *fd->nv_data);
        fd->nv_len = calloc((size_t)B, sizeof *fd->nv_len);
        fd->nv_pitch = calloc((size_t)B, sizeof *fd->nv_pitch);
        fd->nv_dst = calloc((size_t)B, sizeof *fd->nv_dst);
        fd->nv_idx = calloc((size_t)B, sizeof *fd->nv_idx);
        if (!fd->nv_data || !fd->nv_len || !fd->nv_pitch || !fd->nv_dst || !fd->nv_idx) {
            st = ODL_ERR(ODL_E_NOMEM, "image prep buffers");
            goto fail;
        }
    }
    p->ps = p->fd[0].ps;
    for (int s = 0; s < NSLOTS; s++) {
        struct odl_gpu_prep_batch *b = &p->slot[s];
        b->p = p;
        b->im = calloc((size_t)B, sizeof *b->im);
        b->h_src = calloc((size_t)B, sizeof *b->h_src);
        if (!b->im || !b->h_src) {
            st = ODL_ERR(ODL_E_NOMEM, "image prep buffers");
            goto fail;
        }
        ODL_CHECK_GOTO(odl_host_alloc_pinned(sizeof(odl_letterbox_src) * (size_t)B, (void **)&b->h_sub), st, fail);
        ODL_CHECK_GOTO(odl_mem_alloc(dev, sizeof(odl_letterbox_src) * (size_t)B, (void **)&b->d_sub), st, fail);
        if (p->cuda) {
            ODL_CHECK_GOTO(odl_event_create(&b->ready), st, fail);
            ODL_CHECK_GOTO(odl_event_create(&b->done), st, fail);
        }
    }
    /* nvJPEG: on CUDA devices; on the CPU only through a stand-in (tests) */
    p->decoder = ODL_DECODER_CPU;
    if (!o->nvjpeg) {
        snprintf(p->note, sizeof p->note, "nvJPEG not used (CPU decoding asked for)");
    } else if (!p->cuda && !odl_env_str(ODL_ENV_NVJPEG_LIBRARY)[0]) {
        snprintf(p->note, sizeof p->note, "nvJPEG not used on the CPU device");
    } else if (odl_nvjpeg_open(&p->fd[0].nvj) != ODL_OK) {
        snprintf(p->note, sizeof p->note, "%s; JPEGs are decoded on the CPU", odl_error_msg_user());
        odl_error_clear();
    } else {
        p->nvj = p->fd[0].nvj;
        const odl_nvjpeg_backend nb = odl_nvjpeg_backend_of(p->nvj);
        /* the other feeders' handles: on the same backend, or fewer feeders */
        for (int f = 1; f < p->n_feeders; f++) {
            if (odl_nvjpeg_open(&p->fd[f].nvj) != ODL_OK || odl_nvjpeg_backend_of(p->fd[f].nvj) != nb) {
                ODL_LOG_WARN("image prep: nvJPEG for feeder %d: %s; %d feeder%s", f,
                             p->fd[f].nvj ? "another backend" : odl_error_msg_user(), f, f == 1 ? "" : "s");
                odl_error_clear();
                odl_nvjpeg_close(p->fd[f].nvj);
                p->fd[f].nvj = NULL;
                for (int g = f; g < p->n_feeders; g++) {
                    if (p->cuda) odl_stream_destroy(p->fd[g].ps);
                    p->fd[g].ps = NULL;
                }
                p->n_feeders = f;
                break;
            }
        }
        p->decoder = nb == ODL_NVJPEG_HARDWARE ? ODL_DECODER_NVJPEG_HW : ODL_DECODER_NVJPEG_HYBRID;
        char share[64] = "", feeders[48] = "";
        if (p->cpu_share > 0)
            snprintf(share, sizeof share, "; %d%% of its JPEGs on %d CPU threads beside it", p->cpu_share, o->threads);
        if (p->n_feeders > 1) snprintf(feeders, sizeof feeders, "; %d batches at once", p->n_feeders);
        snprintf(p->note, sizeof p->note, "nvJPEG %s %s%s (%s)%s%s", odl_nvjpeg_version(p->nvj), odl_nvjpeg_backend_name(nb),
                 odl_nvjpeg_interpolated(p->nvj) ? ", chroma upsampling by interpolation" : "", odl_nvjpeg_library(p->nvj),
                 share, feeders);
    }
    p->stats.feeders = p->n_feeders;
    for (int f = 0; f < p->n_feeders; f++) {
        if (pthread_create(&p->fd[f].th, NULL, feeder_main, &p->fd[f]) != 0) {
            st = ODL_ERR(ODL_E_NOMEM, "image prep: cannot start its feeder thread");
            goto fail;
        }
        p->fd[f].started = 1;
    }
    *out = p;
    return ODL_OK;
fail:
    odl_gpu_prep_free(p);
    return st;
}

void odl_gpu_prep_free(odl_gpu_prep *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (int f = 0; f < NSLOTS; f++)
        if (p->fd[f].started) pthread_join(p->fd[f].th, NULL);
    for (int s = 0; s < NSLOTS; s++) {
        struct odl_gpu_prep_batch *b = &p->slot[s];
        odl_prep_wait(b->stage);
        ev_sync(p, b->done, b->done_recorded);
        ev_sync(p, b->ready, b->ready_recorded);
        for (int k = 0; b->im && k < p->o.max_batch; k++) {
            free(b->im[k].bytes);
            odl_image_free(&b->im[k].host);
        }
        free(b->im);
        free(b->h_src);
        odl_host_free_pinned(b->h_sub);
        odl_mem_free(p->dev, b->d_sub);
        odl_mem_free(p->dev, b->dev);
        odl_host_free_pinned(b->pin);
        if (p->cuda) {
            odl_event_destroy(b->ready);
            odl_event_destroy(b->done);
        }
    }
    for (int f = 0; f < NSLOTS; f++) {
        struct feeder *fd = &p->fd[f];
        odl_nvjpeg_close(fd->nvj);
        if (p->cuda && fd->ps) odl_stream_destroy(fd->ps);
        free(fd->nv_data);
        free(fd->nv_len);
        free(fd->nv_pitch);
        free(fd->nv_dst);
        free(fd->nv_idx);
    }
    odl_prep_pool_free(p->pool);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p);
}

int odl_gpu_prep_decoder(const odl_gpu_prep *p) { return p ? p->decoder : ODL_DECODER_CPU; }
const char *odl_gpu_prep_nvjpeg_note(const odl_gpu_prep *p) { return p ? p->note : ""; }

/* A submit that did not queue its slot gives it back; returns st. */
static odl_status slot_unbusy(odl_gpu_prep *p, struct odl_gpu_prep_batch *b, odl_status st) {
    pthread_mutex_lock(&p->mu);
    b->busy = 0;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    return st;
}

odl_status odl_gpu_prep_submit(odl_gpu_prep *p, const odl_prep_job *jobs, int n, odl_prep_result *res,
                               odl_gpu_prep_batch **out) {
    if (!p || !jobs || !res || !out || n < 1 || n > p->o.max_batch)
        return ODL_ERR(ODL_E_INVAL, "odl_gpu_prep_submit: %d jobs (1..%d)", n, p ? p->o.max_batch : 0);
    for (int k = 0; k < n; k++)
        if (!jobs[k].path || jobs[k].out_w != jobs[0].out_w || jobs[k].out_h != jobs[0].out_h || jobs[k].out_w <= 0 ||
            jobs[k].out_h <= 0)
            return ODL_ERR(ODL_E_INVAL, "odl_gpu_prep_submit: job %d: no path, or a letterbox size other than job 0's", k);
    pthread_mutex_lock(&p->mu);
    struct odl_gpu_prep_batch *b = &p->slot[p->next];
    while (b->busy) pthread_cond_wait(&p->cv, &p->mu);
    const int s = p->next;
    p->next = (p->next + 1) % NSLOTS;
    b->busy = 1;
    b->fed = 0;
    pthread_mutex_unlock(&p->mu);
    /* the slot's earlier decode may still read its files' bytes (nvJPEG's work on the prep stream), which
     * stage 1 frees and reads anew */
    odl_status st = ev_sync(p, b->ready, b->ready_recorded);
    if (st != ODL_OK) return slot_unbusy(p, b, st);
    b->n = n;
    b->jobs = jobs;
    b->res = res;
    b->fail = ODL_OK;
    b->fail_msg[0] = 0;
    for (int k = 0; k < p->o.max_batch; k++) odl_image_free(&b->im[k].host);
    st = odl_prep_pool_run(p->pool, n, stage1, b, &b->stage);
    if (st != ODL_OK) return slot_unbusy(p, b, st);
    pthread_mutex_lock(&p->mu);
    p->queue[(p->qhead + p->qcount) % NSLOTS] = s;
    p->qcount++;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    *out = b;
    return ODL_OK;
}

/* The stall report: what each feeder has been doing, and for how long, into buf. */
static void feeders_report(odl_gpu_prep *p, char *buf, size_t cap) {
    size_t n = 0;
    buf[0] = 0;
    const int64_t now = odl_mono_ns();
    for (int f = 0; f < p->n_feeders && n < cap; f++) {
        const struct feeder *fd = &p->fd[f];
        const int ph = atomic_load(&fd->phase), images = atomic_load(&fd->phase_images);
        const double since_s = (double)(now - atomic_load(&fd->phase_since_ns)) * 1e-9;
        char what[48] = "";
        if (ph != PH_IDLE) snprintf(what, sizeof what, " (%d images) for %.1f s", images, since_s);
        n += (size_t)snprintf(buf + n, cap - n, "%sfeeder %d %s%s", f ? "; " : "", f, phase_name[ph], what);
    }
}

odl_status odl_gpu_prep_wait(odl_gpu_prep_batch *b) {
    if (!b) return ODL_ERR(ODL_E_INVAL, "odl_gpu_prep_wait: NULL batch");
    odl_gpu_prep *p = b->p;
    const double t0 = odl_mono_ms();
    double report_at = t0 + p->stall_ms;
    pthread_mutex_lock(&p->mu);
    while (!b->fed) {
        const double now = odl_mono_ms();
        if (now < report_at) { /* until fed, or the next report is due */
            const struct timespec ts = odl_mono_deadline((int64_t)(report_at - now) + 1);
            pthread_cond_timedwait(&p->cv, &p->mu, &ts);
            continue;
        }
        /* a decode cannot be cancelled (nvJPEG's call, a CPU decode): say where it is, keep waiting */
        report_at = now + p->stall_ms;
        char rep[512];
        feeders_report(p, rep, sizeof rep);
        pthread_mutex_unlock(&p->mu);
        ODL_LOG_WARN("image prep: a batch of %d images has waited %.0f s for its decode: %s", b->n, (now - t0) / 1000, rep);
        pthread_mutex_lock(&p->mu);
    }
    pthread_mutex_unlock(&p->mu);
    if (b->fail != ODL_OK) return ODL_ERR(b->fail, "image prep: %s", b->fail_msg);
    return ODL_OK;
}

odl_status odl_gpu_prep_letterbox(odl_gpu_prep_batch *b, const int *idx, int m, float *y, odl_stream s) {
    if (!b || !b->fed || (m > 0 && (!idx || !y)) || m < 0 || m > b->n)
        return ODL_ERR(ODL_E_INVAL, "odl_gpu_prep_letterbox: bad arguments (after odl_gpu_prep_wait, 0..%d images)",
                       b ? b->n : 0);
    odl_gpu_prep *p = b->p;
    for (int i = 0; i < m; i++) {
        if (idx[i] < 0 || idx[i] >= b->n || b->res[idx[i]].status != ODL_OK || b->im[idx[i]].route == ROUTE_NONE)
            return ODL_ERR(ODL_E_INVAL, "odl_gpu_prep_letterbox: image %d is not a decoded image of the batch", idx[i]);
        b->h_sub[i] = b->h_src[idx[i]];
    }
    if (m == 0) return ODL_OK;
    if (p->cuda && !s) s = odl_stream_current();
    const odl_stream prev = odl_stream_current();
    ODL_CHECK(ev_wait(p, s, b->ready, b->ready_recorded));
    ODL_CHECK(odl_memcpy_async(b->d_sub, p->dev, b->h_sub, odl_cpu(), sizeof(odl_letterbox_src) * (size_t)m, s));
    odl_stream_set_current(s);
    const odl_status st = p->be->letterbox_u8(m, b->jobs[0].out_h, b->jobs[0].out_w, b->dev, b->d_sub, 114, y);
    odl_stream_set_current(prev);
    ODL_CHECK(st);
    ODL_CHECK(ev_record(p, b->done, s));
    b->done_recorded = 1;
    return ODL_OK;
}

odl_status odl_gpu_prep_host_image(odl_gpu_prep_batch *b, int k, odl_image *out) {
    if (!b || !out || k < 0 || k >= b->n || !b->p->o.keep_host || b->res[k].status != ODL_OK || !b->fed)
        return ODL_ERR(ODL_E_INVAL, "odl_gpu_prep_host_image: image %d: no keep_host, or not a decoded image", k);
    odl_gpu_prep *p = b->p;
    pimg *im = &b->im[k];
    if (im->route == ROUTE_CPU) {
        ODL_CHECK(odl_image_alloc(out, im->host.width, im->host.height, 0, 0, 0));
        memcpy(out->data, im->host.data, (size_t)3 * im->host.width * im->host.height);
        return ODL_OK;
    }
    /* the pitched rows packed by the copy: the padding after each row, which the decoder never writes, is
     * not read (compute-sanitizer initcheck) */
    const size_t row = (size_t)3 * im->info.width, pitch = (size_t)nv_pitch(im);
    ODL_CHECK(odl_image_alloc(out, im->info.width, im->info.height, 0, 0, 0));
    odl_status st = ev_sync(p, b->ready, b->ready_recorded);
    if (st == ODL_OK)
        st = odl_memcpy2d_async(out->data, row, odl_cpu(), b->dev + im->off, pitch, p->dev, row,
                                (size_t)im->info.height, p->ps);
    if (st == ODL_OK && p->cuda) st = odl_stream_synchronize(p->ps);
    if (st == ODL_OK) st = odl_image_apply_orientation(out, im->info.orientation);
    if (st != ODL_OK) odl_image_free(out);
    return st;
}

void odl_gpu_prep_release(odl_gpu_prep_batch *b) {
    if (!b) return;
    odl_gpu_prep *p = b->p;
    pthread_mutex_lock(&p->mu);
    while (!b->fed) pthread_cond_wait(&p->cv, &p->mu);
    b->busy = 0;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}
