/* Training hooks in layers; see worker/hook_chain.h. */
#include "worker/hook_chain.h"

#include <string.h>

static odl_status c_on_start(void *ctx, const odl_config *cfg, odl_net *net, odl_optim *opt, odl_train_state *st) {
    const odl_hook_chain *c = ctx;
    if (c->inner && c->inner->on_start) ODL_CHECK(c->inner->on_start(c->inner->ctx, cfg, net, opt, st));
    return c->own.on_start ? c->own.on_start(c->own.ctx, cfg, net, opt, st) : ODL_OK;
}

static odl_status c_reduce_grads(void *ctx, odl_net *net) {
    const odl_hook_chain *c = ctx;
    if (c->own.reduce_grads) return c->own.reduce_grads(c->own.ctx, net);
    return c->inner && c->inner->reduce_grads ? c->inner->reduce_grads(c->inner->ctx, net) : ODL_OK;
}

static odl_status c_reduce_scalar(void *ctx, double *v) {
    const odl_hook_chain *c = ctx;
    if (c->own.reduce_scalar) return c->own.reduce_scalar(c->own.ctx, v);
    return c->inner && c->inner->reduce_scalar ? c->inner->reduce_scalar(c->inner->ctx, v) : ODL_OK;
}

static odl_status c_after_step(void *ctx, const odl_config *cfg, odl_net *net, odl_optim *opt,
                               const odl_train_state *st) {
    const odl_hook_chain *c = ctx;
    if (c->inner && c->inner->after_step) ODL_CHECK(c->inner->after_step(c->inner->ctx, cfg, net, opt, st));
    return c->own.after_step ? c->own.after_step(c->own.ctx, cfg, net, opt, st) : ODL_OK;
}

static odl_status c_on_finish(void *ctx, const odl_config *cfg, odl_net *net, odl_optim *opt,
                              const odl_train_state *st) {
    const odl_hook_chain *c = ctx;
    if (c->inner && c->inner->on_finish) ODL_CHECK(c->inner->on_finish(c->inner->ctx, cfg, net, opt, st));
    return c->own.on_finish ? c->own.on_finish(c->own.ctx, cfg, net, opt, st) : ODL_OK;
}

static int c_step_request(void *ctx, const odl_train_state *st) {
    const odl_hook_chain *c = ctx;
    int f = c->inner && c->inner->step_request ? c->inner->step_request(c->inner->ctx, st) : 0;
    if (c->own.step_request) f |= c->own.step_request(c->own.ctx, st);
    return f;
}

/* The graph entries go with reduce_grads: those of the layer whose reduce_grads runs. */
static int c_graph_capturable(void *ctx, char *why, size_t cap) {
    const odl_hook_chain *c = ctx;
    if (c->own.reduce_grads) return c->own.graph_capturable ? c->own.graph_capturable(c->own.ctx, why, cap) : 1;
    return c->inner && c->inner->graph_capturable ? c->inner->graph_capturable(c->inner->ctx, why, cap) : 1;
}

static odl_status c_graph_replayed(void *ctx) {
    const odl_hook_chain *c = ctx;
    if (c->own.reduce_grads) return c->own.graph_replayed ? c->own.graph_replayed(c->own.ctx) : ODL_OK;
    return c->inner && c->inner->graph_replayed ? c->inner->graph_replayed(c->inner->ctx) : ODL_OK;
}

void odl_hook_chain_push(odl_hook_chain *c, const odl_train_hooks *own, odl_train_opts *opts) {
    c->own = *own;
    c->inner = opts->hooks;
    memset(&c->hooks, 0, sizeof c->hooks);
    c->hooks.ctx = c;
    c->hooks.on_start = c_on_start;
    c->hooks.reduce_grads = c_reduce_grads;
    c->hooks.reduce_scalar = c_reduce_scalar;
    c->hooks.after_step = c_after_step;
    c->hooks.on_finish = c_on_finish;
    c->hooks.step_request = c_step_request;
    c->hooks.graph_capturable = c_graph_capturable;
    c->hooks.graph_replayed = c_graph_replayed;
    opts->hooks = &c->hooks;
}

void odl_hook_chain_pop(odl_hook_chain *c, odl_train_opts *opts) {
    if (opts && opts->hooks == &c->hooks) opts->hooks = c->inner;
}
