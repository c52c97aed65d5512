#include "odl/loader.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { SLOT_FREE = 0, SLOT_READY = 1, SLOT_IN_USE = 2 };

static int64_t sample_elems(const odl_loader_config *c) {
    int64_t n = 1;
    for (int i = 0; i < c->sample_ndim; i++) n *= c->sample_shape[i];
    return n;
}

odl_status odl_loader_gather(const uint8_t *images, const uint8_t *labels, int64_t n, int64_t elems, float mean,
                             float std, const int64_t *idx, int count, float *x, int32_t *y) {
    const float scale = 1.0f / 255.0f, inv_std = 1.0f / std;
    for (int b = 0; b < count; b++) {
        if (idx[b] < 0 || idx[b] >= n)
            return ODL_ERR(ODL_E_INVAL, "sample %lld (row %d of the batch) is outside the data set's %lld samples",
                           (long long)idx[b], b, (long long)n);
        const uint8_t *src = images + idx[b] * elems;
        float *dst = x + (int64_t)b * elems;
        for (int64_t i = 0; i < elems; i++) dst[i] = ((float)src[i] * scale - mean) * inv_std;
        y[b] = labels[idx[b]];
    }
    return ODL_OK;
}

/* Fill one slot with the step at (epoch, cursor). Called on the loader thread. */
static odl_status fill_slot(odl_loader *L, odl_batch *b, int64_t epoch, int64_t cursor) {
    const odl_loader_config *c = &L->cfg;
    if (b->used_before && b->consumed) ODL_CHECK(odl_event_synchronize(b->consumed));
    if (L->sampler.epoch != epoch) ODL_CHECK(odl_sampler_set_epoch(&L->sampler, epoch));
    int local, global;
    ODL_CHECK(odl_sampler_batch(&L->sampler, cursor, c->batch, b->idx, &local, &global));
    int64_t elems = sample_elems(c);
    ODL_CHECK(odl_loader_gather(c->images, c->labels, c->n, elems, c->mean, c->std, b->idx, local, b->h_x, b->h_y));
    if (c->device.type == ODL_DEV_CUDA && local > 0) {
        ODL_CHECK(odl_memcpy_async(b->x.data, c->device, b->h_x, odl_cpu(), (size_t)local * (size_t)elems * sizeof(float),
                                   L->copy_stream));
        ODL_CHECK(odl_memcpy_async(b->y.data, c->device, b->h_y, odl_cpu(), (size_t)local * sizeof(int32_t),
                                   L->copy_stream));
    }
    if (b->ready) ODL_CHECK(odl_event_record(b->ready, L->copy_stream));
    b->epoch = epoch;
    b->cursor = cursor;
    b->local = local;
    b->global = global;
    b->used_before = 1;
    return ODL_OK;
}

static void *loader_main(void *arg) {
    odl_loader *L = arg;
    const odl_loader_config *c = &L->cfg;
    if (c->device.type == ODL_DEV_CUDA) odl_cuda_init(c->device.index, 0); /* sets this thread's device */
    int64_t epoch = c->start_epoch, cursor = c->start_cursor;
    int64_t step_span = (int64_t)c->world_size * c->batch;
    for (;;) {
        if (cursor >= c->n) {
            epoch++;
            cursor = 0;
        }
        int finished = epoch >= c->end_epoch;
        pthread_mutex_lock(&L->mu);
        odl_batch *b = &L->slots[L->produced % ODL_LOADER_SLOTS];
        while (!L->stop && !finished && b->state != SLOT_FREE) pthread_cond_wait(&L->cv, &L->mu);
        if (L->stop || finished) {
            L->done = 1;
            pthread_cond_broadcast(&L->cv);
            pthread_mutex_unlock(&L->mu);
            return NULL;
        }
        pthread_mutex_unlock(&L->mu);
        odl_status s = fill_slot(L, b, epoch, cursor);
        pthread_mutex_lock(&L->mu);
        if (s != ODL_OK) {
            L->error = s;
            snprintf(L->error_msg, sizeof L->error_msg, "%s", odl_error_msg());
            L->done = 1;
            pthread_cond_broadcast(&L->cv);
            pthread_mutex_unlock(&L->mu);
            return NULL;
        }
        b->state = SLOT_READY;
        L->produced++;
        pthread_cond_broadcast(&L->cv);
        pthread_mutex_unlock(&L->mu);
        cursor += step_span;
    }
}

odl_status odl_loader_start(odl_loader *L, const odl_loader_config *cfg) {
    memset(L, 0, sizeof *L);
    L->cfg = *cfg;
    const odl_loader_config *c = &L->cfg;
    if (c->batch < 1 || c->n < 1 || c->start_cursor < 0 || c->start_cursor >= c->n || c->sample_ndim < 1 ||
        c->sample_ndim > 3 || !(c->std > 0))
        return ODL_ERR(ODL_E_INVAL, "loader: bad configuration (batch %d, n %lld, cursor %lld)", c->batch,
                       (long long)c->n, (long long)c->start_cursor);
    pthread_mutex_init(&L->mu, NULL);
    pthread_cond_init(&L->cv, NULL);
    odl_status s = ODL_OK;
    ODL_CHECK_GOTO(odl_sampler_init(&L->sampler, c->n, c->rank, c->world_size, c->seed, c->shuffle), s, fail);
    int64_t elems = sample_elems(c);
    int64_t xs[4] = {c->batch, c->sample_shape[0], c->sample_shape[1], c->sample_shape[2]};
    int64_t ys[1] = {c->batch};
    if (c->device.type == ODL_DEV_CUDA) ODL_CHECK_GOTO(odl_stream_create(&L->copy_stream), s, fail);
    for (int i = 0; i < ODL_LOADER_SLOTS; i++) {
        odl_batch *b = &L->slots[i];
        b->idx = malloc((size_t)c->batch * sizeof *b->idx);
        if (!b->idx) {
            s = ODL_ERR(ODL_E_NOMEM, "loader index buffer");
            goto fail;
        }
        ODL_CHECK_GOTO(odl_host_alloc_pinned((size_t)(c->batch * elems) * sizeof(float), (void **)&b->h_x), s, fail);
        ODL_CHECK_GOTO(odl_host_alloc_pinned((size_t)c->batch * sizeof(int32_t), (void **)&b->h_y), s, fail);
        if (c->device.type == ODL_DEV_CUDA) {
            ODL_CHECK_GOTO(odl_tensor_alloc(&b->x, c->device, ODL_F32, 1 + c->sample_ndim, xs), s, fail);
            ODL_CHECK_GOTO(odl_tensor_alloc(&b->y, c->device, ODL_I32, 1, ys), s, fail);
            ODL_CHECK_GOTO(odl_event_create(&b->ready), s, fail);
            ODL_CHECK_GOTO(odl_event_create(&b->consumed), s, fail);
        } else {
            memset(&b->x, 0, sizeof b->x);
            b->x.data = b->h_x; b->x.dtype = ODL_F32; b->x.device = odl_cpu(); b->x.ndim = 1 + c->sample_ndim;
            for (int d = 0; d < b->x.ndim; d++) b->x.shape[d] = xs[d];
            for (int d = b->x.ndim; d < ODL_MAX_DIMS; d++) b->x.shape[d] = 1;
            memset(&b->y, 0, sizeof b->y);
            b->y.data = b->h_y; b->y.dtype = ODL_I32; b->y.device = odl_cpu(); b->y.ndim = 1; b->y.shape[0] = c->batch;
            for (int d = 1; d < ODL_MAX_DIMS; d++) b->y.shape[d] = 1;
        }
    }
    if (pthread_create(&L->thread, NULL, loader_main, L) != 0) {
        s = ODL_ERR(ODL_E_INTERNAL, "loader: pthread_create failed");
        goto fail;
    }
    L->thread_started = 1;
    return ODL_OK;
fail:
    odl_loader_stop(L);
    return s;
}

odl_status odl_loader_next(odl_loader *L, odl_batch **out) {
    *out = NULL;
    pthread_mutex_lock(&L->mu);
    odl_batch *b = &L->slots[L->consumed % ODL_LOADER_SLOTS];
    while (b->state != SLOT_READY && !(L->done && L->consumed >= L->produced) && L->error == ODL_OK)
        pthread_cond_wait(&L->cv, &L->mu);
    if (L->error != ODL_OK && b->state != SLOT_READY) {
        odl_status e = L->error;
        pthread_mutex_unlock(&L->mu);
        return odl_error_set(e, __FILE__, __LINE__, "data loader: %s", L->error_msg);
    }
    if (b->state != SLOT_READY) { /* finished */
        pthread_mutex_unlock(&L->mu);
        return ODL_OK;
    }
    b->state = SLOT_IN_USE;
    L->consumed++;
    pthread_mutex_unlock(&L->mu);
    if (b->ready) ODL_CHECK(odl_stream_wait_event(odl_stream_current(), b->ready));
    *out = b;
    return ODL_OK;
}

odl_status odl_loader_release(odl_loader *L, odl_batch *b) {
    odl_status s = ODL_OK;
    if (b->consumed) s = odl_event_record(b->consumed, odl_stream_current());
    pthread_mutex_lock(&L->mu);
    b->state = SLOT_FREE;
    pthread_cond_broadcast(&L->cv);
    pthread_mutex_unlock(&L->mu);
    return s;
}

void odl_loader_stop(odl_loader *L) {
    if (L->thread_started) {
        pthread_mutex_lock(&L->mu);
        L->stop = 1;
        pthread_cond_broadcast(&L->cv);
        pthread_mutex_unlock(&L->mu);
        pthread_join(L->thread, NULL);
        L->thread_started = 0;
    }
    if (L->cfg.device.type == ODL_DEV_CUDA) odl_device_synchronize(L->cfg.device);
    for (int i = ODL_LOADER_SLOTS - 1; i >= 0; i--) {
        odl_batch *b = &L->slots[i];
        odl_event_destroy(b->consumed);
        odl_event_destroy(b->ready);
        if (L->cfg.device.type == ODL_DEV_CUDA) {
            odl_tensor_free(&b->y);
            odl_tensor_free(&b->x);
        }
        odl_host_free_pinned(b->h_y);
        odl_host_free_pinned(b->h_x);
        free(b->idx);
        memset(b, 0, sizeof *b);
    }
    if (L->copy_stream) odl_stream_destroy(L->copy_stream);
    L->copy_stream = NULL;
    odl_sampler_free(&L->sampler);
}
