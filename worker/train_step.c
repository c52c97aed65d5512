/* One training step, op by op or replayed from a CUDA graph; see worker/train_step.h. */
#include "worker/train_step.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "odl/clock.h"
#include "odl/device.h"
#include "odl/fault.h"
#include "odl/log.h"
#include "odl/ops.h"

/* The step's work on the current stream: the same calls whether they run now or are captured. */
static odl_status step_body(odl_train_step *ts, int local, int global) {
    odl_net *net = ts->net;
    ODL_CHECK(odl_step_ctx_advance(&ts->ctx));
    if (local > 0) {
        ODL_CHECK(odl_net_forward_at(net, local, ts->seed, ts->ctx.dev));
        ODL_CHECK(odl_net_backward_at(net, local, (float)local / (float)global, ts->seed, ts->ctx.dev));
        ODL_CHECK(odl_axpy((float)local, &net->loss, ts->loss_acc));
    } else { /* no sample on this rank in this step: its share of the summed gradient is zero */
        for (int i = 0; i < net->n_params; i++) ODL_CHECK(odl_tensor_fill(&net->params[i].grad, 0.0f));
    }
    if (ts->hooks && ts->hooks->reduce_grads) ODL_CHECK(ts->hooks->reduce_grads(ts->hooks->ctx, net));
    return odl_optim_step_at(ts->opt, net, ts->ctx.dev);
}

/* With several ranks: 1 when any rank's flag is set (the ranks must decide the same). */
static odl_status any_rank(odl_train_step *ts, int mine, int *any) {
    double v = mine ? 1.0 : 0.0;
    if (ts->world > 1 && ts->hooks && ts->hooks->reduce_scalar) ODL_CHECK(ts->hooks->reduce_scalar(ts->hooks->ctx, &v));
    *any = v > 0;
    return ODL_OK;
}

odl_status odl_train_step_init(odl_train_step *ts, odl_net *net, odl_optim *opt, odl_tensor *loss_acc,
                               const odl_train_hooks *hooks, uint64_t seed, int batch, int world, int rank,
                               int want_graph, int64_t rng_step) {
    memset(ts, 0, sizeof *ts);
    ts->net = net;
    ts->opt = opt;
    ts->loss_acc = loss_acc;
    ts->hooks = hooks;
    ts->seed = seed;
    ts->batch = batch;
    ts->world = world;
    ODL_CHECK(odl_step_ctx_init(&ts->ctx, net->device, opt, world, rank));
    ODL_CHECK(odl_train_step_sync(ts, rng_step));
    const int cuda = net->device.type == ODL_DEV_CUDA;
    int on = cuda && want_graph;
    if (!cuda) snprintf(ts->graph_off_why, sizeof ts->graph_off_why, "not a CUDA device");
    else if (!want_graph) snprintf(ts->graph_off_why, sizeof ts->graph_off_why, "train.cuda_graph is off");
    if (on && hooks && hooks->graph_capturable) {
        char why[200] = "";
        if (!hooks->graph_capturable(hooks->ctx, why, sizeof why)) {
            on = 0;
            snprintf(ts->graph_off_why, sizeof ts->graph_off_why, "the gradient reduction cannot be captured: %s", why);
        }
    }
    if (cuda && world > 1) { /* the same choice on every rank: the same collectives, captured or not */
        int off_somewhere = 0;
        ODL_CHECK(any_rank(ts, !on, &off_somewhere));
        if (on && off_somewhere) {
            on = 0;
            snprintf(ts->graph_off_why, sizeof ts->graph_off_why, "another rank cannot capture its steps");
        }
    }
    ts->graph_on = on;
    if (on)
        ODL_LOG_INFO("CUDA graphs: full steps (batch %d per rank) are captured once per loader slot after the first "
                     "and replayed (train.cuda_graph, --cuda-graph off to run op by op)", batch);
    else if (cuda)
        ODL_LOG_INFO("CUDA graphs off: %s; every step runs op by op", ts->graph_off_why);
    return ODL_OK;
}

odl_status odl_train_step_sync(odl_train_step *ts, int64_t rng_step) {
    return odl_step_ctx_write(&ts->ctx, ts->opt, rng_step);
}

static odl_step_graph *find_graph(odl_train_step *ts, const odl_batch *b) {
    for (int i = 0; i < ODL_TRAIN_STEP_GRAPHS; i++) {
        odl_step_graph *g = &ts->graphs[i];
        if (g->x == b->x.data && g->local == b->local && g->global == b->global) return g;
    }
    return NULL;
}

/* A graph captured before the backend freed workspace memory (after many growths, e.g. by a larger
 * evaluation batch) may point into it: one rank captures again; with several, where a capture is agreed
 * on by all, this rank goes on op by op (its collectives are the same as a replay's). */
static odl_step_graph *drop_if_stale(odl_train_step *ts, odl_step_graph *g) {
    if (!g || g->epoch == odl_backend_workspace_epoch(ts->net->device)) return g;
    odl_graph_free(g->graph);
    memset(g, 0, sizeof *g);
    if (ts->world > 1) {
        ts->graph_on = 0;
        snprintf(ts->graph_off_why, sizeof ts->graph_off_why,
                 "the backend freed workspace memory a step graph used, and a new capture needs every rank");
        ODL_LOG_WARN("CUDA graphs: %s; going on op by op", ts->graph_off_why);
    }
    return NULL;
}

static odl_step_graph *free_graph(odl_train_step *ts) {
    for (int i = 0; i < ODL_TRAIN_STEP_GRAPHS; i++)
        if (!ts->graphs[i].x) return &ts->graphs[i];
    return NULL;
}

/* Capture the step on b into a free entry. A failure is returned with CUDA's reason; nothing ran. */
static odl_status capture(odl_train_step *ts, odl_batch *b, odl_step_graph **out) {
    *out = NULL;
    odl_step_graph *g = free_graph(ts);
    if (!g) return ODL_ERR(ODL_E_INTERNAL, "more than %d step graphs", ODL_TRAIN_STEP_GRAPHS);
    const odl_stream s = odl_stream_current();
    ODL_CHECK(odl_graph_begin(s));
    odl_status st = step_body(ts, b->local, b->global);
    if (st != ODL_OK) {
        odl_graph_abort(s);
        return st;
    }
    ODL_CHECK(odl_graph_end(s, &g->graph));
    g->epoch = odl_backend_workspace_epoch(ts->net->device);
    g->x = b->x.data;
    g->local = b->local;
    g->global = b->global;
    ts->n_captured++;
    *out = g;
    return ODL_OK;
}

/* A capture failed on some rank (mine: this rank's result). One rank: go on op by op. Several: stop. */
static odl_status capture_failed(odl_train_step *ts, odl_status mine) {
    char why[512];
    snprintf(why, sizeof why, "%s", mine != ODL_OK ? odl_error_msg_user() : "another rank's capture failed");
    odl_error_clear();
    ts->graph_on = 0;
    snprintf(ts->graph_off_why, sizeof ts->graph_off_why, "the capture failed: %.200s", why);
    if (ts->world > 1)
        return ODL_ERR(ODL_E_UNSUPPORTED, "CUDA graph capture of a training step failed: %s; run with --cuda-graph off",
                       why);
    ODL_LOG_WARN("CUDA graph capture of a training step failed, going on op by op: %s", why);
    return ODL_OK;
}

odl_status odl_train_step_run(odl_train_step *ts, odl_batch *b) {
    ODL_CHECK(odl_net_bind_batch(ts->net, &b->x, &b->y));
    const int full = b->local == ts->batch && b->global == ts->batch * ts->world;
    odl_status st = ODL_OK;
    odl_step_graph *g = NULL;
    int captured = 0;
    ts->last = ODL_STEP_EAGER;
    if (ts->graph_on && full && ts->warm) {
        g = drop_if_stale(ts, find_graph(ts, b));
        if (!g && ts->graph_on) { /* drop_if_stale turns graphs off where a capture needs every rank */
            odl_status cs = capture(ts, b, &g);
            captured = cs == ODL_OK;
            int failed = 0;
            st = any_rank(ts, cs != ODL_OK, &failed);
            if (st == ODL_OK && failed) {
                if (g) { /* captured here, failed elsewhere */
                    odl_graph_free(g->graph);
                    memset(g, 0, sizeof *g);
                    g = NULL;
                }
                st = capture_failed(ts, cs);
            }
        }
    }
    if (st == ODL_OK && g) {
        if (ts->world > 1) odl_fault_collective(); /* an armed hang@ stops at the step's collectives */
        const double tl = odl_mono_s();
        st = odl_graph_launch(g->graph, odl_stream_current());
        if (!captured) ts->replay_launch_s += odl_mono_s() - tl;
        if (st == ODL_OK && ts->hooks && ts->hooks->graph_replayed) st = ts->hooks->graph_replayed(ts->hooks->ctx);
        ts->n_replayed++;
        ts->last = captured ? ODL_STEP_CAPTURED : ODL_STEP_REPLAYED;
    } else if (st == ODL_OK) {
        st = step_body(ts, b->local, b->global);
        ts->n_eager++;
        if (full) ts->warm = 1;
    }
    odl_net_unbind_batch(ts->net);
    return st;
}

void odl_train_step_summary(const odl_train_step *ts, char *buf, size_t cap) {
    if (ts->net && ts->net->device.type != ODL_DEV_CUDA) {
        snprintf(buf, cap, "%" PRId64 " steps op by op", ts->n_eager);
        return;
    }
    if (ts->n_replayed || ts->n_captured)
        snprintf(buf, cap, "CUDA graphs: %" PRId64 " captured (one per loader slot), %" PRId64 " replays, %" PRId64
                 " steps op by op%s%s", ts->n_captured, ts->n_replayed, ts->n_eager, ts->graph_on ? "" : "; then off: ",
                 ts->graph_on ? "" : ts->graph_off_why);
    else
        snprintf(buf, cap, "%" PRId64 " steps op by op (CUDA graphs %s%s)", ts->n_eager,
                 ts->graph_on ? "on, no full step after the first" : "off: ", ts->graph_on ? "" : ts->graph_off_why);
}

void odl_train_step_free(odl_train_step *ts) {
    for (int i = 0; i < ODL_TRAIN_STEP_GRAPHS; i++) odl_graph_free(ts->graphs[i].graph);
    memset(ts->graphs, 0, sizeof ts->graphs);
    odl_step_ctx_free(&ts->ctx);
}
