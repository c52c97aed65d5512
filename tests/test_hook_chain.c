/* test_hook_chain: worker/hook_chain.c, the layers of odl_worker's training hooks (the coordinator glue
 * inside data parallelism). Two layers with recording entries: on_start / after_step / on_finish run the
 * inner layer first and stop at its error; a reduction runs once, the front layer's when it has one; the
 * step requests of both are or-ed; pop puts back exactly the hooks that were there. */
#include <stdio.h>
#include <string.h>

#include "test_util.h"
#include "worker/hook_chain.h"

typedef struct layer {
    char name;
    char *log; /* shared: the order of the calls */
    odl_status fail_with;
    int request;
} layer;

static void note(layer *l, const char *what) {
    size_t n = strlen(l->log);
    snprintf(l->log + n, 256 - n, "%c.%s ", l->name, what);
}
static odl_status l_on_start(void *ctx, const odl_config *cfg, odl_net *net, odl_optim *opt, odl_train_state *st) {
    (void)cfg, (void)net, (void)opt, (void)st;
    note(ctx, "start");
    return ((layer *)ctx)->fail_with;
}
static odl_status l_after_step(void *ctx, const odl_config *cfg, odl_net *net, odl_optim *opt,
                               const odl_train_state *st) {
    (void)cfg, (void)net, (void)opt, (void)st;
    note(ctx, "step");
    return ((layer *)ctx)->fail_with;
}
static odl_status l_on_finish(void *ctx, const odl_config *cfg, odl_net *net, odl_optim *opt,
                              const odl_train_state *st) {
    (void)cfg, (void)net, (void)opt, (void)st;
    note(ctx, "finish");
    return ((layer *)ctx)->fail_with;
}
static odl_status l_reduce_grads(void *ctx, odl_net *net) {
    (void)net;
    note(ctx, "grads");
    return ODL_OK;
}
static odl_status l_reduce_scalar(void *ctx, double *v) {
    note(ctx, "scalar");
    *v *= 2;
    return ODL_OK;
}
static int l_request(void *ctx, const odl_train_state *st) {
    (void)st;
    note(ctx, "request");
    return ((layer *)ctx)->request;
}

/* Call every entry of the installed hooks once; returns the first error. */
static odl_status run_all(const odl_train_hooks *h, double *v, int *req) {
    odl_train_state st;
    memset(&st, 0, sizeof st);
    odl_status s = h->on_start(h->ctx, NULL, NULL, NULL, &st);
    if (s == ODL_OK) s = h->reduce_grads(h->ctx, NULL);
    if (s == ODL_OK) s = h->reduce_scalar(h->ctx, v);
    *req = h->step_request(h->ctx, &st);
    if (s == ODL_OK) s = h->after_step(h->ctx, NULL, NULL, NULL, &st);
    if (s == ODL_OK) s = h->on_finish(h->ctx, NULL, NULL, NULL, &st);
    return s;
}

int main(void) {
    char log[256] = "";
    layer a = {'A', log, ODL_OK, ODL_TRAIN_CHECKPOINT}, b = {'B', log, ODL_OK, ODL_TRAIN_STOP};
    /* A: every entry but reduce_grads (as the coordinator glue has none); B: every entry */
    const odl_train_hooks ha = {.ctx = &a, .on_start = l_on_start, .reduce_scalar = l_reduce_scalar,
                                .after_step = l_after_step, .on_finish = l_on_finish, .step_request = l_request};
    const odl_train_hooks hb = {.ctx = &b, .on_start = l_on_start, .reduce_grads = l_reduce_grads,
                                .reduce_scalar = l_reduce_scalar, .after_step = l_after_step,
                                .on_finish = l_on_finish, .step_request = l_request};
    odl_train_opts opts;
    memset(&opts, 0, sizeof opts);
    odl_hook_chain ca, cb;
    odl_hook_chain_push(&ca, &ha, &opts);
    TCHECK(opts.hooks == &ca.hooks, "push installs the chain's hooks");
    odl_hook_chain_push(&cb, &hb, &opts);
    TCHECK(opts.hooks == &cb.hooks && cb.inner == &ca.hooks, "the second layer goes in front of the first");

    double v = 1;
    int req = 0;
    TOK(run_all(opts.hooks, &v, &req));
    TCHECK(!strcmp(log, "A.start B.start B.grads B.scalar A.request B.request A.step B.step A.finish B.finish "),
           "call order: %s", log);
    TCHECK(v == 2, "the scalar was reduced %s (v = %g, want 2: once)", v == 4 ? "twice" : "not at all", v);
    TCHECK(req == (ODL_TRAIN_CHECKPOINT | ODL_TRAIN_STOP), "step requests or-ed: %d", req);

    /* an error of the inner layer is returned and the front layer's entry is not called */
    log[0] = 0;
    a.fail_with = ODL_E_IO;
    odl_train_state st;
    memset(&st, 0, sizeof st);
    TCHECK(opts.hooks->after_step(opts.hooks->ctx, NULL, NULL, NULL, &st) == ODL_E_IO, "inner error returned");
    TCHECK(!strcmp(log, "A.step "), "after the inner layer's error: %s", log);
    a.fail_with = ODL_OK;
    b.fail_with = ODL_E_INTERNAL;
    TCHECK(opts.hooks->on_finish(opts.hooks->ctx, NULL, NULL, NULL, &st) == ODL_E_INTERNAL, "front error returned");
    b.fail_with = ODL_OK;

    /* popping a layer that is not the front one changes nothing */
    odl_hook_chain_pop(&ca, &opts);
    TCHECK(opts.hooks == &cb.hooks, "pop of an inner layer left the hooks alone");
    odl_hook_chain_pop(&cb, &opts);
    TCHECK(opts.hooks == &ca.hooks, "pop put back the first layer");

    /* A alone: its reduce_scalar, no reduce_grads at all (OK), its request only */
    log[0] = 0;
    v = 3;
    TOK(run_all(opts.hooks, &v, &req));
    TCHECK(!strcmp(log, "A.start A.scalar A.request A.step A.finish "), "one layer: %s", log);
    TCHECK(v == 6 && req == ODL_TRAIN_CHECKPOINT, "one layer: v %g, request %d", v, req);
    odl_hook_chain_pop(&ca, &opts);
    TCHECK(opts.hooks == NULL, "pop of the last layer leaves no hooks");
    return odl_test_finish("test_hook_chain");
}
