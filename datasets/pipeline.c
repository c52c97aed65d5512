/* Image preparation on a pool of threads. See include/odl/pipeline.h. */
#include "odl/pipeline.h"

#include "datasets/prep_internal.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

odl_status odl_prep_plan(const odl_prep_job *job, int w, int h, odl_prep_result *res, int *w1, int *h1) {
    res->src_w = w;
    res->src_h = h;
    *w1 = w;
    *h1 = h;
    if (job->load_size > 0) {
        double r = (double)job->load_size / (w > h ? w : h);
        if (r != 1) {
            *w1 = (int)ceil(w * r);
            *h1 = (int)ceil(h * r);
        }
    }
    ODL_CHECK(odl_letterbox_geometry_hw(*w1, *h1, job->out_w, job->out_h, 0, 32, job->scaleup, &res->geo));
    if (res->geo.out_w != job->out_w || res->geo.out_h != job->out_h)
        return ODL_ERR(ODL_E_INTERNAL, "%s: letterbox gave %dx%d for a %dx%d target", job->path, res->geo.out_w,
                       res->geo.out_h, job->out_w, job->out_h);
    res->gain = (double)*h1 / h * res->geo.ratio;
    res->pad_x = res->geo.dw;
    res->pad_y = res->geo.dh;
    return ODL_OK;
}

odl_status odl_prep_image(const odl_prep_job *job, float *dst, odl_prep_result *res) {
    if (!job || !job->path || !dst || !res || job->out_w <= 0 || job->out_h <= 0)
        return ODL_ERR(ODL_E_INVAL, "odl_prep_image: bad arguments");
    memset(res, 0, sizeof *res);
    odl_image img = {0}, rs = {0}, lb = {0};
    int w1, h1;
    odl_status st = odl_image_load(job->path, &img);
    if (st != ODL_OK) goto out;
    ODL_CHECK_GOTO(odl_prep_plan(job, img.width, img.height, res, &w1, &h1), st, out);
    const odl_image *cur = &img;
    if (w1 != img.width || h1 != img.height) {
        ODL_CHECK_GOTO(odl_image_alloc(&rs, w1, h1, 0, 0, 0), st, out);
        ODL_CHECK_GOTO(odl_image_resize_linear(img.data, img.width, img.height, 3, rs.data, w1, h1), st, out);
        cur = &rs;
    }
    ODL_CHECK_GOTO(odl_image_letterbox_apply(cur, &res->geo, 114, &lb), st, out);
    odl_image_to_chw(&lb, dst);
out:
    if (st != ODL_OK && !strstr(odl_error_msg(), job->path)) odl_error_prefix("%s", job->path);
    odl_image_free(&img);
    odl_image_free(&rs);
    odl_image_free(&lb);
    return st;
}

void odl_prep_unmap(const odl_prep_result *res, float xyxy[4]) {
    const float px = (float)res->pad_x, py = (float)res->pad_y, g = (float)res->gain;
    xyxy[0] = (xyxy[0] - px) / g;
    xyxy[2] = (xyxy[2] - px) / g;
    xyxy[1] = (xyxy[1] - py) / g;
    xyxy[3] = (xyxy[3] - py) / g;
    for (int i = 0; i < 4; i++) {
        float lim = (float)((i & 1) ? res->src_h : res->src_w);
        xyxy[i] = xyxy[i] < 0 ? 0 : xyxy[i] > lim ? lim : xyxy[i];
    }
}

/* ---- the pool: one FIFO of jobs, each pointing back at its batch ---- */
struct odl_prep_batch {
    odl_prep_pool *pool;
    int pending;
};

typedef struct task {
    const odl_prep_job *job;
    float *dst;
    odl_prep_result *res;
    odl_prep_batch *batch;
    void (*fn)(void *ctx, int i); /* odl_prep_pool_for: fn(ctx, i) instead of a job */
    void *ctx;
    int i;
} task;

struct odl_prep_pool {
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    task *q;
    int head, count, cap;
    int stop, n_threads;
    pthread_t *threads;
};

static void run_task(const task *t) {
    odl_error_clear();
    odl_status st = odl_prep_image(t->job, t->dst, t->res);
    t->res->status = st;
    if (st != ODL_OK) snprintf(t->res->err, sizeof t->res->err, "%s", odl_error_msg());
}

static void *worker(void *arg) {
    odl_prep_pool *p = arg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->count && !p->stop) pthread_cond_wait(&p->work, &p->mu);
        if (!p->count && p->stop) break;
        task t = p->q[p->head];
        p->head = (p->head + 1) % p->cap;
        p->count--;
        pthread_mutex_unlock(&p->mu);
        if (t.fn) t.fn(t.ctx, t.i);
        else run_task(&t);
        pthread_mutex_lock(&p->mu);
        if (--t.batch->pending == 0) pthread_cond_broadcast(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

odl_status odl_prep_pool_create(int n_threads, odl_prep_pool **out) {
    if (!out || n_threads < 0 || n_threads > 1024) return ODL_ERR(ODL_E_INVAL, "odl_prep_pool_create: %d threads", n_threads);
    odl_prep_pool *p = calloc(1, sizeof *p);
    if (!p) return ODL_ERR(ODL_E_NOMEM, "image pool");
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->done, NULL);
    p->threads = calloc((size_t)(n_threads ? n_threads : 1), sizeof(pthread_t));
    if (!p->threads) {
        odl_prep_pool_free(p);
        return ODL_ERR(ODL_E_NOMEM, "image pool");
    }
    for (int i = 0; i < n_threads; i++) {
        if (pthread_create(&p->threads[i], NULL, worker, p) != 0) {
            odl_prep_pool_free(p);
            return ODL_ERR(ODL_E_NOMEM, "image pool: cannot start thread %d of %d", i + 1, n_threads);
        }
        p->n_threads++;
    }
    *out = p;
    return ODL_OK;
}

void odl_prep_pool_free(odl_prep_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n_threads; i++) pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->work);
    pthread_cond_destroy(&p->done);
    free(p->threads);
    free(p->q);
    free(p);
}

/* Room for n more tasks (called with mu held). */
static odl_status queue_reserve(odl_prep_pool *p, int n) {
    if (p->count + n <= p->cap) return ODL_OK;
    int nc = p->cap ? p->cap : 64;
    while (nc < p->count + n) nc *= 2;
    task *nq = malloc(sizeof(task) * (size_t)nc);
    if (!nq) return ODL_E_NOMEM;
    for (int i = 0; i < p->count; i++) nq[i] = p->q[(p->head + i) % p->cap];
    free(p->q);
    p->q = nq;
    p->head = 0;
    p->cap = nc;
    return ODL_OK;
}

odl_status odl_prep_submit(odl_prep_pool *p, const odl_prep_job *jobs, int n, float *dst, odl_prep_result *res,
                           odl_prep_batch **out) {
    if (!p || n < 0 || (n > 0 && (!jobs || !dst || !res)) || !out)
        return ODL_ERR(ODL_E_INVAL, "odl_prep_submit: bad arguments");
    odl_prep_batch *b = calloc(1, sizeof *b);
    if (!b) return ODL_ERR(ODL_E_NOMEM, "image batch");
    b->pool = p;
    if (p->n_threads == 0) { /* synchronous */
        size_t off = 0;
        for (int k = 0; k < n; k++) {
            task t = {&jobs[k], dst ? dst + off : NULL, &res[k], b, NULL, NULL, 0};
            run_task(&t);
            off += (size_t)3 * jobs[k].out_h * jobs[k].out_w;
        }
        *out = b;
        return ODL_OK;
    }
    pthread_mutex_lock(&p->mu);
    if (queue_reserve(p, n) != ODL_OK) {
        pthread_mutex_unlock(&p->mu);
        free(b);
        return ODL_ERR(ODL_E_NOMEM, "image queue of %d", p->count + n);
    }
    size_t off = 0;
    for (int k = 0; k < n; k++) {
        task t = {&jobs[k], dst ? dst + off : NULL, &res[k], b, NULL, NULL, 0};
        p->q[(p->head + p->count) % p->cap] = t;
        p->count++;
        off += (size_t)3 * jobs[k].out_h * jobs[k].out_w;
    }
    b->pending = n;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
    *out = b;
    return ODL_OK;
}

void odl_prep_wait(odl_prep_batch *b) {
    if (!b) return;
    odl_prep_pool *p = b->pool;
    pthread_mutex_lock(&p->mu);
    while (b->pending > 0) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
    free(b);
}

odl_status odl_prep_pool_run(odl_prep_pool *p, int n, void (*fn)(void *ctx, int i), void *ctx, odl_prep_batch **out) {
    if (!p || n < 0 || !fn || !out) return ODL_ERR(ODL_E_INVAL, "odl_prep_pool_run: bad arguments");
    odl_prep_batch *b = calloc(1, sizeof *b);
    if (!b) return ODL_ERR(ODL_E_NOMEM, "image batch");
    b->pool = p;
    *out = b;
    if (p->n_threads == 0) {
        for (int i = 0; i < n; i++) fn(ctx, i);
        return ODL_OK;
    }
    pthread_mutex_lock(&p->mu);
    if (queue_reserve(p, n) != ODL_OK) {
        pthread_mutex_unlock(&p->mu);
        free(b);
        *out = NULL;
        return ODL_ERR(ODL_E_NOMEM, "image queue of %d", p->count + n);
    }
    for (int i = 0; i < n; i++) {
        task t = {NULL, NULL, NULL, b, fn, ctx, i};
        p->q[(p->head + p->count) % p->cap] = t;
        p->count++;
    }
    b->pending = n;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
    return ODL_OK;
}

odl_status odl_prep_pool_for(odl_prep_pool *p, int n, void (*fn)(void *ctx, int i), void *ctx) {
    odl_prep_batch *b = NULL;
    ODL_CHECK(odl_prep_pool_run(p, n, fn, ctx, &b));
    odl_prep_wait(b);
    return ODL_OK;
}
