/* Gradient buckets reduced as soon as backward has produced them (PyTorch DDP's Reducer, simplified):
 * fixed bucket assignment in reverse parameter order, buckets launched strictly in index order so that
 * every rank issues the same sequence of collectives. See odl/comm.h. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm_internal.h"
#include "odl/device.h"
#include "odl/graph.h"
#include "odl/log.h"

typedef struct bucket {
    int first, count; /* parameters order[first .. first+count) */
    int64_t elems;
    float *flat;      /* packed gradients; NULL when the bucket holds one parameter (reduced in place) */
    int pending;      /* parameters not yet marked ready this step */
} bucket;

struct odl_grad_buckets {
    odl_comm *c;
    odl_net *net;
    int n_params, n_buckets;
    bucket *b;
    int *order;         /* parameter indices in bucket order */
    int *param_bucket;  /* parameter -> bucket */
    int64_t *param_off; /* parameter -> element offset inside its bucket */
    unsigned char *ready;
    int next_launch;    /* first bucket not launched this step */
    int64_t steps;
};

int odl_grad_buckets_count(const odl_grad_buckets *g) { return g ? g->n_buckets : 0; }

int odl_grad_buckets_of_param(const odl_grad_buckets *g, int i) {
    return g && i >= 0 && i < g->n_params ? g->param_bucket[i] : -1;
}

size_t odl_grad_buckets_bytes(const odl_grad_buckets *g, int k) {
    return g && k >= 0 && k < g->n_buckets ? (size_t)g->b[k].elems * sizeof(float) : 0;
}

void odl_grad_buckets_free(odl_grad_buckets *g) {
    if (!g) return;
    if (g->b)
        for (int k = 0; k < g->n_buckets; k++)
            if (g->b[k].flat) odl_mem_free(odl_comm_device(g->c), g->b[k].flat);
    free(g->b);
    free(g->order);
    free(g->param_bucket);
    free(g->param_off);
    free(g->ready);
    free(g);
}

odl_status odl_grad_buckets_create(odl_comm *c, odl_net *net, double bucket_mb, odl_grad_buckets **out) {
    if (!c || !net || !out) return ODL_ERR(ODL_E_INVAL, "odl_grad_buckets_create: NULL argument");
    *out = NULL;
    if (!(bucket_mb > 0)) return ODL_ERR(ODL_E_INVAL, "gradient bucket size %g MiB must be > 0 (dist.bucket_mb)", bucket_mb);
    if (net->n_params < 1) return ODL_ERR(ODL_E_INVAL, "gradient buckets over a network without parameters");
    odl_device dev = odl_comm_device(c);
    for (int i = 0; i < net->n_params; i++) {
        const odl_param *p = &net->params[i];
        if (!p->grad.data || p->grad.dtype != ODL_F32 || odl_tensor_numel(&p->grad) != odl_tensor_numel(&p->value))
            return ODL_ERR(ODL_E_INVAL, "parameter %s: gradient missing, not float32 or of another size", p->name);
        if (c->backend != ODL_COMM_LOCAL && !odl_device_eq(p->grad.device, dev)) {
            char d[32];
            snprintf(d, sizeof d, "%s", odl_device_name(p->grad.device));
            return ODL_ERR(ODL_E_INVAL, "parameter %s lives on %s but rank %d communicates on %s", p->name, d, c->rank,
                           odl_device_name(dev));
        }
    }
    odl_status st = ODL_OK;
    odl_grad_buckets *g = calloc(1, sizeof *g);
    int n = net->n_params;
    if (!g) return ODL_ERR(ODL_E_NOMEM, "gradient buckets");
    g->c = c;
    g->net = net;
    g->n_params = n;
    g->b = calloc((size_t)n, sizeof *g->b);
    g->order = calloc((size_t)n, sizeof *g->order);
    g->param_bucket = calloc((size_t)n, sizeof *g->param_bucket);
    g->param_off = calloc((size_t)n, sizeof *g->param_off);
    g->ready = calloc((size_t)n, 1);
    if (!g->b || !g->order || !g->param_bucket || !g->param_off || !g->ready) {
        st = ODL_ERR(ODL_E_NOMEM, "gradient bucket tables for %d parameters", n);
        goto fail;
    }
    const double cap_bytes = bucket_mb * 1024.0 * 1024.0;
    int nb = 0;
    double cur = 0;
    for (int j = 0; j < n; j++) {
        int i = n - 1 - j; /* backward produces the last layer's gradients first */
        double bytes = (double)odl_tensor_nbytes(&net->params[i].grad);
        if (nb == 0 || (g->b[nb - 1].count > 0 && cur + bytes > cap_bytes)) {
            g->b[nb].first = j;
            nb++;
            cur = 0;
        }
        bucket *bk = &g->b[nb - 1];
        g->order[j] = i;
        g->param_bucket[i] = nb - 1;
        g->param_off[i] = bk->elems;
        bk->elems += odl_tensor_numel(&net->params[i].grad);
        bk->count++;
        cur += bytes;
    }
    g->n_buckets = nb;
    for (int k = 0; k < nb; k++) {
        g->b[k].pending = g->b[k].count;
        if (g->b[k].count > 1 && c->backend != ODL_COMM_LOCAL) {
            void *p = NULL;
            st = odl_mem_alloc(dev, (size_t)g->b[k].elems * sizeof(float), &p);
            if (st != ODL_OK) {
                odl_error_prefix("gradient bucket %d of %" PRId64 " floats", k, g->b[k].elems);
                goto fail;
            }
            g->b[k].flat = p;
        }
    }
    *out = g;
    return ODL_OK;
fail:
    odl_grad_buckets_free(g);
    return st;
}

static odl_status copy_grad(odl_grad_buckets *g, void *dst, const void *src, size_t nbytes) {
    if (g->c->backend == ODL_COMM_NCCL) return odl__comm_dev_copy(g->c, dst, src, nbytes);
    memcpy(dst, src, nbytes);
    return ODL_OK;
}

static odl_status launch(odl_grad_buckets *g, int k) {
    odl_comm *c = g->c;
    bucket *bk = &g->b[k];
    if (c->backend == ODL_COMM_LOCAL) return ODL_OK;
    if (c->backend == ODL_COMM_NCCL) ODL_CHECK(odl__comm_dev_begin(c));
    float *buf;
    if (bk->flat) {
        for (int j = bk->first; j < bk->first + bk->count; j++) {
            odl_param *p = &g->net->params[g->order[j]];
            ODL_CHECK(copy_grad(g, bk->flat + g->param_off[g->order[j]], p->grad.data, odl_tensor_nbytes(&p->grad)));
        }
        buf = bk->flat;
    } else {
        buf = (float *)g->net->params[g->order[bk->first]].grad.data;
    }
    odl_status st;
    if (c->backend == ODL_COMM_NCCL) st = odl__comm_dev_allreduce(c, buf, bk->elems);
    else st = odl__comm_mpi_allreduce_f32(c, buf, bk->elems);
    if (st != ODL_OK) {
        odl_error_prefix("gradient bucket %d of %d (%" PRId64 " floats, step %" PRId64 ")", k, g->n_buckets, bk->elems,
                         g->steps + 1);
        return st;
    }
    if (bk->flat) {
        for (int j = bk->first; j < bk->first + bk->count; j++) {
            odl_param *p = &g->net->params[g->order[j]];
            ODL_CHECK(copy_grad(g, p->grad.data, bk->flat + g->param_off[g->order[j]], odl_tensor_nbytes(&p->grad)));
        }
    }
    if (c->backend == ODL_COMM_NCCL) {
        char what[ODL_COMM_WHAT];
        snprintf(what, sizeof what, "ncclAllReduce of gradient bucket %d (%" PRId64 " floats, step %" PRId64 ")", k,
                 bk->elems, g->steps + 1);
        ODL_CHECK(odl__comm_dev_end(c, what));
    }
    return ODL_OK;
}

odl_status odl_grad_buckets_mark_ready(odl_grad_buckets *g, int i) {
    if (!g) return ODL_ERR(ODL_E_INVAL, "odl_grad_buckets_mark_ready: NULL buckets");
    if (i < 0 || i >= g->n_params) return ODL_ERR(ODL_E_INVAL, "parameter index %d outside [0, %d)", i, g->n_params);
    if (g->ready[i])
        return ODL_ERR(ODL_E_INVAL, "gradient of %s marked ready twice in step %" PRId64, g->net->params[i].name,
                       g->steps + 1);
    g->ready[i] = 1;
    g->b[g->param_bucket[i]].pending--;
    /* Launch in index order only, so that all ranks enqueue the same collectives in the same order. */
    while (g->next_launch < g->n_buckets && g->b[g->next_launch].pending == 0) {
        ODL_CHECK(launch(g, g->next_launch));
        g->next_launch++;
    }
    return ODL_OK;
}

odl_status odl_grad_buckets_finish(odl_grad_buckets *g) {
    if (!g) return ODL_ERR(ODL_E_INVAL, "odl_grad_buckets_finish: NULL buckets");
    for (int j = 0; j < g->n_params; j++) {
        int i = g->order[j];
        if (!g->ready[i]) ODL_CHECK(odl_grad_buckets_mark_ready(g, i));
    }
    if (g->next_launch != g->n_buckets)
        return ODL_ERR(ODL_E_INTERNAL, "step %" PRId64 ": %d of %d gradient buckets launched", g->steps + 1,
                       g->next_launch, g->n_buckets);
    if (g->c->backend == ODL_COMM_NCCL) ODL_CHECK(odl__comm_dev_join(g->c));
    memset(g->ready, 0, (size_t)g->n_params);
    for (int k = 0; k < g->n_buckets; k++) g->b[k].pending = g->b[k].count;
    g->next_launch = 0;
    /* a captured step has not run: its replays count (odl_grad_buckets_replayed) */
    if (!odl_stream_is_capturing(odl_stream_current())) g->steps++;
    return ODL_OK;
}

int odl_grad_buckets_capturable(const odl_grad_buckets *g, char *why, size_t cap) {
    if (!g) return 1;
    if (g->c->backend == ODL_COMM_LOCAL) return 1;
    if (g->c->backend != ODL_COMM_NCCL) {
        snprintf(why, cap, "%s collectives run on the host", odl_comm_backend_name(g->c->backend));
        return 0;
    }
    return odl__comm_dev_capturable(g->c, why, cap);
}

odl_status odl_grad_buckets_replayed(odl_grad_buckets *g) {
    if (!g) return ODL_ERR(ODL_E_INVAL, "odl_grad_buckets_replayed: NULL buckets");
    g->steps++;
    if (g->c->backend != ODL_COMM_NCCL) return ODL_OK;
    char what[ODL_COMM_WHAT];
    snprintf(what, sizeof what, "the %d gradient AllReduce(s) of step %" PRId64 " (CUDA graph replay)", g->n_buckets,
             g->steps);
    return odl__comm_dev_replayed(g->c, what);
}
