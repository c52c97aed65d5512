/* Launcher detection and process-group set-up around odl_train_run.
 *
 * Without a launcher (no mpirun/srun environment) this is the single-process program: MPI is never
 * initialised. Under a launcher each process is one rank of a data-parallel job: MPI (and NCCL for
 * GPUs) is set up by odl_comm_init, rank 0's initial parameters are broadcast, gradients are summed in
 * buckets after backward (the loss scaling local/global count makes the sum the global-mean gradient),
 * host scalars are summed over MPI, and at the end every rank checks that all replicas are bitwise
 * equal. Any rank that fails ends the whole job (MPI_Abort) with a message naming it, so that no peer
 * waits forever in a collective; a collective that hangs is ended by the watchdog (dist.timeout_s).
 *
 * Test hook: with ODL_DUMP_PARAMS=PREFIX in the environment every rank writes its final parameters to
 * PREFIX.rank<r>.h5 (the weights format of --save), for the data-parallel equivalence tests. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "odl/comm.h"
#include "worker/config.h"
#include "odl/device.h"
#include "odl/env.h"
#include "odl/log.h"
#include "odl/strbuf.h"
#include "worker/coord.h"
#include "worker/hook_chain.h"
#include "worker/train.h"

static char g_yaml[ODL_CONFIG_YAML_MAX];

static void log_effective_config(const odl_config *cfg) {
    if (odl_config_to_yaml(cfg, g_yaml, sizeof g_yaml) == ODL_OK) ODL_LOG_DEBUG("effective config:\n%s", g_yaml);
}

/* ------------------------------------------------------------------ parameter dump (tests) */

/* PREFIX.rank<r>.h5: this rank's parameters in the weights format of --save (docs/checkpoint_format.md). */
static odl_status dump_params(const char *prefix, int rank, const odl_config *cfg, const odl_net *net) {
    char path[4096];
    snprintf(path, sizeof path, "%s.rank%d.h5", prefix, rank);
    odl_status st = odl_train_save_weights(path, cfg, net);
    if (st != ODL_OK) odl_error_prefix("ODL_DUMP_PARAMS: rank %d", rank);
    else ODL_LOG_DEBUG("parameters written to %s", path);
    return st;
}

/* ------------------------------------------------------------------ training hooks */

typedef struct dp_ctx {
    odl_comm *comm;            /* NULL in the single-process program */
    odl_grad_buckets *buckets;
    int state_checked;         /* the ranks' training states were compared after the first step */
    odl_hook_chain chain;      /* in front of the hooks the caller had set (the coordinator glue) */
    const char *dump_prefix;
} dp_ctx;

static odl_status dp_grad_ready(void *ctx, int param_index) {
    return odl_grad_buckets_mark_ready((odl_grad_buckets *)ctx, param_index);
}

static odl_status dp_on_start(void *ctx, const odl_config *cfg, odl_net *net, odl_optim *opt, odl_train_state *st) {
    dp_ctx *d = ctx;
    (void)st;
    if (!d->comm || odl_comm_size(d->comm) == 1) return ODL_OK;
    odl_comm *c = d->comm;
    /* Initialisation is deterministic and world-size independent; broadcasting rank 0's parameters and
     * optimiser state makes the replicas identical even if it were not. */
    ODL_CHECK(odl_comm_broadcast_net(c, net, opt, 0));
    ODL_CHECK(odl_grad_buckets_create(c, net, cfg->dist.bucket_mb, &d->buckets));
    /* Reduce each bucket as soon as backward has produced it, overlapped with the rest of backward. */
    net->on_grad_ready = dp_grad_ready;
    net->on_grad_ready_ctx = d->buckets;
    if (odl_log_enabled(ODL_LOG_LEVEL_INFO)) {
        char sizes[512];
        odl_strbuf b;
        odl_strbuf_fixed(&b, sizes, sizeof sizes);
        int nb = odl_grad_buckets_count(d->buckets);
        for (int k = 0; k < nb; k++)
            odl_strbuf_printf(&b, "%s%.2f", k ? ", " : "", (double)odl_grad_buckets_bytes(d->buckets, k) / (1024.0 * 1024.0));
        ODL_LOG_INFO("data parallel: %d ranks, %s, %d gradient bucket%s of [%s] MiB (dist.bucket_mb %g), timeout %g s",
                     odl_comm_size(c), odl_comm_backend_name(odl_comm_get_backend(c)), nb, nb == 1 ? "" : "s", sizes,
                     cfg->dist.bucket_mb, cfg->dist.timeout_s);
    }
    return ODL_OK;
}

static odl_status dp_reduce_grads(void *ctx, odl_net *net) {
    dp_ctx *d = ctx;
    (void)net;
    if (!d->buckets) return ODL_OK;
    /* Buckets were launched during backward (net->on_grad_ready); wait for them on the compute stream. */
    return odl_grad_buckets_finish(d->buckets);
}

static int dp_graph_capturable(void *ctx, char *why, size_t cap) {
    const dp_ctx *d = ctx;
    return odl_grad_buckets_capturable(d->buckets, why, cap);
}

static odl_status dp_graph_replayed(void *ctx) {
    dp_ctx *d = ctx;
    return d->buckets ? odl_grad_buckets_replayed(d->buckets) : ODL_OK;
}

static odl_status dp_reduce_scalar(void *ctx, double *v) {
    dp_ctx *d = ctx;
    if (!d->comm) return ODL_OK;
    return odl_comm_allreduce_host_f64(d->comm, v, 1);
}

static odl_status dp_after_step(void *ctx, const odl_config *cfg, odl_net *net, odl_optim *opt,
                                const odl_train_state *st) {
    dp_ctx *d = ctx;
    (void)cfg, (void)net, (void)opt;
    if (d->comm && odl_comm_size(d->comm) > 1 && !d->state_checked) {
        /* After the first step of this run (a checkpoint, if any, has been restored by then): every rank
         * must be at the same point, or they would run different numbers of collectives. */
        d->state_checked = 1;
        odl_comm *c = d->comm;
        int64_t mine[3] = {st->epoch, st->step, st->cursor};
        int64_t *all = calloc((size_t)odl_comm_size(c) * 3, sizeof *all);
        if (!all) return ODL_ERR(ODL_E_NOMEM, "training-state agreement");
        odl_status s = odl_comm_allgather_host_i64(c, mine, 3, all);
        for (int r = 1; s == ODL_OK && r < odl_comm_size(c); r++)
            if (memcmp(all + 3 * r, all, 3 * sizeof *all) != 0)
                s = ODL_ERR(ODL_E_INTERNAL,
                            "rank %d is at epoch %" PRId64 " step %" PRId64 " cursor %" PRId64 " but rank 0 at epoch %" PRId64
                            " step %" PRId64 " cursor %" PRId64 " (resumed from different checkpoints?)",
                            r, all[3 * r], all[3 * r + 1], all[3 * r + 2], all[0], all[1], all[2]);
        free(all);
        ODL_CHECK(s);
    }
    return ODL_OK;
}

static odl_status dp_on_finish(void *ctx, const odl_config *cfg, odl_net *net, odl_optim *opt,
                               const odl_train_state *st) {
    dp_ctx *d = ctx;
    (void)opt;
    if (d->comm && odl_comm_size(d->comm) > 1) {
        ODL_CHECK(odl_comm_check_net_equal(d->comm, net));
        ODL_LOG_INFO("all %d ranks hold bitwise identical parameters after %" PRId64 " steps", odl_comm_size(d->comm),
                     st->step);
    }
    if (d->dump_prefix) ODL_CHECK(dump_params(d->dump_prefix, d->comm ? odl_comm_rank(d->comm) : 0, cfg, net));
    return ODL_OK;
}

/* The data-parallel layer of the training hooks (worker/hook_chain.h: the hooks below it run first). */
static void install_hooks(odl_train_opts *opts, dp_ctx *d) {
    const odl_train_hooks own = {.ctx = d,
                                 .on_start = dp_on_start,
                                 .reduce_grads = dp_reduce_grads,
                                 .graph_capturable = dp_graph_capturable,
                                 .graph_replayed = dp_graph_replayed,
                                 .reduce_scalar = dp_reduce_scalar,
                                 .after_step = dp_after_step,
                                 .on_finish = dp_on_finish};
    odl_hook_chain_push(&d->chain, &own, opts);
}

/* ------------------------------------------------------------------ entry */

/* Free the device pools at the end of a run. Device memory still in use is a leak of the program to
 * report (odl_cuda_shutdown keeps the pools then), not a failure of the run; the run's own error message
 * survives. */
static void shutdown_devices(void) {
    char msg[2048];
    snprintf(msg, sizeof msg, "%s", odl_error_msg());
    if (odl_cuda_shutdown() != ODL_OK) ODL_LOG_WARN("%s", odl_error_msg());
    odl_error_clear();
    if (msg[0]) odl_error_prefix("%s", msg);
}

static int run_single(odl_config *cfg, odl_train_opts *opts, const char *dump) {
    opts->rank = 0;
    opts->world_size = 1;
    opts->local_rank = 0;
    odl_log_set_rank(0, 1);
    odl_worker_coord *wc = NULL; /* a coordinator, or ODL_FAULT, named in the environment */
    if (odl_worker_coord_start(&wc, cfg, 0, 1, NULL) != ODL_OK) {
        fprintf(stderr, "odl_worker: error: %s\n", odl_error_msg_user());
        return 1;
    }
    odl_worker_coord_install(wc, opts);
    log_effective_config(cfg);
    dp_ctx d;
    memset(&d, 0, sizeof d);
    d.dump_prefix = dump;
    if (dump) install_hooks(opts, &d); /* otherwise exactly the lead's single-process path */
    odl_train_result r;
    odl_status s = odl_train_run(cfg, opts, &r);
    if (dump) odl_hook_chain_pop(&d.chain, opts);
    odl_worker_coord_finish(wc, opts, s == ODL_OK ? 0 : 1);
    shutdown_devices();
    if (s != ODL_OK) {
        fprintf(stderr, "odl_worker: error: %s\n", odl_error_msg_user());
        return 1;
    }
    return 0;
}

int odl_train_launch(const odl_config *cfg_in, odl_train_opts *opts) {
    static odl_config eff; /* cfg_in as the coordinator, when there is one, adjusts it */
    eff = *cfg_in;
    const odl_config *cfg = &eff;
    const char *dump = odl_env_is_set(ODL_ENV_DUMP_PARAMS) ? odl_env_str(ODL_ENV_DUMP_PARAMS) : NULL;
    odl_launch_info li;
    if (odl_launch_detect(&li) != ODL_OK) {
        fprintf(stderr, "odl_worker: error: %s\n", odl_error_msg_user());
        return 2;
    }
    if (!li.launched) return run_single(&eff, opts, dump);

    odl_log_set_rank(li.rank, li.world_size > 0 ? li.world_size : 1);
    int n_gpu = odl_cuda_device_count();
    int want_cuda = cfg->device == ODL_CFG_DEVICE_CUDA || (cfg->device == ODL_CFG_DEVICE_AUTO && n_gpu > 0);
    odl_comm_options co = {
        .device_type = want_cuda ? ODL_DEV_CUDA : ODL_DEV_CPU,
        .cuda_index = -1,
        .timeout_s = cfg->dist.timeout_s,
    };
    odl_comm *comm = NULL;
    odl_status s = odl_comm_init(&li, &co, &comm);
    if (s != ODL_OK) {
        if (s == ODL_E_UNSUPPORTED) { /* no MPI in this build: nothing to abort, a usage error */
            fprintf(stderr, "odl_worker: error: %s\n", odl_error_msg_user());
            return 2;
        }
        /* Peers may be inside a collective: end them all. */
        odl_comm_abort_job(NULL, ODL_COMM_EXIT_ERROR, "%s", odl_error_msg_user());
    }
    opts->rank = odl_comm_rank(comm);
    opts->world_size = odl_comm_size(comm);
    opts->local_rank = odl_comm_local_rank(comm);
    odl_log_set_rank(opts->rank, opts->world_size);
    odl_worker_coord *wc = NULL;
    if (odl_worker_coord_start(&wc, &eff, opts->rank, opts->world_size, comm) != ODL_OK)
        odl_comm_abort_job(comm, ODL_COMM_EXIT_ERROR, "%s", odl_error_msg_user());
    ODL_LOG_INFO("rank %d of %d (local %d of %d on %s), launcher %s, %s collectives on %s", opts->rank,
                 opts->world_size, opts->local_rank, odl_comm_local_size(comm), odl_comm_host(comm), li.launcher,
                 odl_comm_backend_name(odl_comm_get_backend(comm)), odl_device_name(odl_comm_device(comm)));
    log_effective_config(cfg);

    dp_ctx d;
    memset(&d, 0, sizeof d);
    d.comm = comm;
    d.dump_prefix = dump;
    odl_worker_coord_install(wc, opts); /* inside the data-parallel hooks */
    install_hooks(opts, &d);
    odl_train_result r;
    s = odl_train_run(cfg, opts, &r);
    odl_hook_chain_pop(&d.chain, opts);
    odl_worker_coord_finish(wc, opts, s == ODL_OK ? 0 : 1);
    if (s != ODL_OK) {
        if (odl_comm_size(comm) > 1) odl_comm_abort_job(comm, ODL_COMM_EXIT_ERROR, "%s", odl_error_msg_user());
        fprintf(stderr, "odl_worker: error: %s\n", odl_error_msg_user());
    }
    odl_grad_buckets_free(d.buckets);
    odl_status fs = odl_comm_finalize(comm);
    shutdown_devices();
    if (s != ODL_OK) return 1;
    if (fs != ODL_OK) {
        fprintf(stderr, "odl_worker: error: %s\n", odl_error_msg_user());
        return 1;
    }
    return 0;
}

/* odl_worker --task=train: the flags, then the launch (worker/tasks.h). */
int odl_task_train_main(int argc, char **argv) {
    static odl_config cfg;
    odl_train_opts opts;
    int r = odl_train_parse_args(argc, argv, &cfg, &opts);
    if (r) return r > 0 ? 0 : 2;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--weights") || !strncmp(argv[i], "--weights=", 10)) {
            fprintf(stderr, "odl_worker: error: --weights is for --task=eval and --task=infer; to start training from "
                            "saved weights use --init-from\n");
            return 2;
        }
    odl_log_set_level(cfg.logging.level);
    int rc = odl_train_launch(&cfg, &opts);
    return rc;
}
