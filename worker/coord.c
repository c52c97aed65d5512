/* odl_worker's coordinator glue (worker/coord.h). */
#include "worker/coord.h"
#include "worker/health_monitor.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "odl/clock.h"
#include "odl/ckpt_session.h"
#include "odl/coord_client.h"
#include "odl/env.h"
#include "odl/device.h"
#include "odl/fault.h"
#include "odl/health.h"
#include "odl/log.h"
#include "worker/hook_chain.h"

struct odl_worker_coord {
    odl_coord_client *client; /* NULL: no coordinator, faults only */
    odl_fault_plan faults;
    odl_comm *comm;
    int rank, world;
    int64_t global_batch;
    int64_t keep; /* checkpoint.keep, for the coordinator's retention */
    odl_coord_welcome w;
    odl_hook_chain chain; /* the coordinator's layer of the training hooks */
    double t_rate;
    int64_t step_rate;
    double sps;
    char why[1024]; /* odl_worker_coord_fail: the error sent with the goodbye */
};

/* The Hello's GPU identity: canonical PCI bus id and NVML UUID of the GPU the rank's health monitor
 * watches (its CUDA device, or on the CPU the one ODL_HEALTH_GPU names; worker/health_monitor.c). A bad
 * ODL_HEALTH_GPU leaves it empty here; the monitor's start reports it. A single process (no comm) has
 * not chosen its device yet: the device train.c's pick_device will choose for local rank 0. */
static void gpu_identity(const odl_config *cfg, odl_comm *comm, odl_coord_hello *h) {
    odl_device d = odl_cpu();
    if (comm) d = odl_comm_device(comm);
    else if (cfg && (cfg->device == ODL_CFG_DEVICE_CUDA || (cfg->device == ODL_CFG_DEVICE_AUTO && odl_cuda_device_count() > 0)))
        d = odl_cuda(0);
    odl_worker_gpu_id id;
    h->gpu_index = -1;
    if (odl_worker_health_gpu(d, comm ? odl_comm_local_rank(comm) : 0, &id) != 1) {
        h->pci_bus_id[0] = h->gpu_uuid[0] = h->gpu_model[0] = 0;
        odl_error_clear();
        return;
    }
    snprintf(h->pci_bus_id, sizeof h->pci_bus_id, "%s", id.pci);
    snprintf(h->gpu_uuid, sizeof h->gpu_uuid, "%s", id.uuid);
    snprintf(h->gpu_model, sizeof h->gpu_model, "%s", id.model);
    h->gpu_index = id.nvml_index;
}

/* The worker's environment variables of the coordinator (rows of ODL_ENV_TABLE, docs/environment.md;
 * odl_coordinator sets them). */
typedef struct coord_env {
    const char *addr, *secret_file; /* NULL when unset */
    uint64_t generation;
} coord_env;

static odl_status read_env(coord_env *e) {
    memset(e, 0, sizeof *e);
    ODL_CHECK(odl_env_load()); /* a bad ODL_COORD_GENERATION is an error naming it */
    if (!odl_env_is_set(ODL_ENV_COORD_ADDR)) return ODL_OK;
    e->addr = odl_env_str(ODL_ENV_COORD_ADDR);
    if (!odl_env_is_set(ODL_ENV_COORD_SECRET_FILE))
        return ODL_ERR(ODL_E_CONFIG, "ODL_COORD_ADDR=%s needs ODL_COORD_SECRET_FILE (the job secret)", e->addr);
    e->secret_file = odl_env_str(ODL_ENV_COORD_SECRET_FILE);
    if (!odl_env_is_set(ODL_ENV_COORD_GENERATION))
        return ODL_ERR(ODL_E_CONFIG, "ODL_COORD_ADDR=%s needs ODL_COORD_GENERATION (the launch generation)", e->addr);
    e->generation = (uint64_t)odl_env_int(ODL_ENV_COORD_GENERATION);
    return ODL_OK;
}

/* ------------------------------------------------------------------ callbacks of the client */

static void on_activity(void *ctx, uint64_t *seq, char *what, size_t cap) {
    odl_worker_coord *w = ctx;
    odl_comm_activity(w->comm, seq, what, cap);
}

static void on_lost(void *ctx, const char *why) {
    odl_worker_coord *w = ctx;
    /* The coordinator ends or relaunches the job: this rank must not go on writing beside a newer
     * generation. Its peers see the same and end too. */
    ODL_LOG_ERROR("rank %d: %s; ending this rank (exit status %d)", w->rank, why, ODL_WORKER_EXIT_COORD_LOST);
    fflush(NULL);
    _exit(ODL_WORKER_EXIT_COORD_LOST);
}

static void on_ckpt_write(void *ctx, int begin, const odl_train_state *st, const char *path, size_t bytes, double ms,
                          odl_status status, const char *error) {
    odl_worker_coord *w = ctx;
    odl_coord_client_ckpt_writing(w->client, begin);
    if (!begin)
        odl_coord_client_ckpt_written(w->client, st->step, st->epoch, st->cursor, path, bytes, ms, status == ODL_OK, error,
                                      w->keep);
}

/* ------------------------------------------------------------------ training hooks */

static odl_status h_on_start(void *ctx, const odl_config *cfg, odl_net *net, odl_optim *opt, odl_train_state *st) {
    odl_worker_coord *w = ctx;
    (void)cfg, (void)net, (void)opt;
    if (w->client && w->w.have_plan && w->w.resume_path[0] &&
        (st->step != w->w.step || st->epoch != w->w.epoch || st->cursor != w->w.cursor))
        return ODL_ERR(ODL_E_INTERNAL,
                       "rank %d resumed at step %" PRId64 ", epoch %" PRId64 ", cursor %" PRId64 " but the coordinator's "
                       "plan (from %s) is step %" PRId64 ", epoch %" PRId64 ", cursor %" PRId64,
                       w->rank, st->step, st->epoch, st->cursor, w->w.resume_path, w->w.step, w->w.epoch, w->w.cursor);
    odl_coord_client_progress(w->client, st->step, st->epoch, st->cursor, 0);
    w->t_rate = odl_mono_s();
    w->step_rate = st->step;
    return ODL_OK;
}

static odl_status h_after_step(void *ctx, const odl_config *cfg, odl_net *net, odl_optim *opt, const odl_train_state *st) {
    odl_worker_coord *w = ctx;
    (void)cfg, (void)net, (void)opt;
    if (w->client) {
        double now = odl_mono_s();
        if (now - w->t_rate >= 0.5) { /* a rate over half a second at least: no clock read per sample */
            w->sps = (double)(st->step - w->step_rate) * (double)w->global_batch / (now - w->t_rate);
            w->t_rate = now;
            w->step_rate = st->step;
        }
        odl_coord_client_progress(w->client, st->step, st->epoch, st->cursor, w->sps);
    }
    odl_fault_after_step(&w->faults, w->rank, st->step); /* before the next step's collectives */
    return ODL_OK;
}

static int h_step_request(void *ctx, const odl_train_state *st) {
    odl_worker_coord *w = ctx;
    int f = 0, c = odl_coord_client_step_request(w->client, st->step);
    if (c & ODL_COORD_CHECKPOINT) f |= ODL_TRAIN_CHECKPOINT;
    if (c & ODL_COORD_STOP) f |= ODL_TRAIN_STOP;
    return f;
}

/* ------------------------------------------------------------------ entry */

/* Register rank of world with the coordinator named by env (Hello with the config seed `seed`). */
/* cfg: the training config (NULL for --task=eval, whose device the Hello takes from comm or the CPU). */
static odl_status coord_register(odl_worker_coord *w, const coord_env *env, const odl_config *cfg, uint64_t seed) {
    odl_coord_hello h;
    memset(&h, 0, sizeof h);
    h.rank = w->rank;
    h.world_size = w->world;
    h.generation = env->generation;
    /* the node the fence list names: ODL_NODE_NAME (emulated nodes) or the short host name */
    snprintf(h.node, sizeof h.node, "%s", odl_health_node_name());
    h.pid = (uint32_t)getpid();
    h.seed = seed;
    gpu_identity(cfg, w->comm, &h);
    odl_coord_client_cbs cbs = {.ctx = w, .activity = on_activity, .lost = on_lost};
    return odl_coord_client_connect(env->addr, env->secret_file, &h, &cbs, &w->w, &w->client);
}

/* The environment (coordinator, ODL_FAULT) and a glue object when there is a coordinator or a fault. */
static odl_status coord_new(odl_worker_coord **out, coord_env *env, int rank, int world_size, odl_comm *comm) {
    *out = NULL;
    ODL_CHECK(read_env(env));
    odl_fault_plan faults;
    ODL_CHECK(odl_fault_from_env(&faults));
    if (!env->addr && faults.n == 0) return ODL_OK;
    odl_worker_coord *w = calloc(1, sizeof *w);
    if (!w) return ODL_ERR(ODL_E_NOMEM, "coordinator glue");
    w->faults = faults;
    w->comm = comm;
    w->rank = rank;
    w->world = world_size;
    *out = w;
    return ODL_OK;
}

odl_status odl_worker_coord_start(odl_worker_coord **out, odl_config *cfg, int rank, int world_size, odl_comm *comm) {
    coord_env env;
    odl_worker_coord *w;
    ODL_CHECK(coord_new(&w, &env, rank, world_size, comm));
    if (!w) return ODL_OK;
    w->global_batch = cfg->train.batch_size * world_size;
    w->keep = cfg->checkpoint.keep;
    if (env.addr) {
        odl_status s = coord_register(w, &env, cfg, (uint64_t)cfg->seed);
        if (s != ODL_OK) {
            free(w);
            return s;
        }
        if (w->w.have_plan && w->w.seed != (uint64_t)cfg->seed) {
            odl_status e = ODL_ERR(ODL_E_CONFIG, "rank %d has seed %" PRId64 " but the job's dataset plan says %" PRIu64
                                   " (a relaunch must not reshuffle the epoch)", rank, cfg->seed, w->w.seed);
            odl_coord_client_close(w->client, 1);
            free(w);
            return e;
        }
        if (!cfg->checkpoint.dir[0] && w->w.checkpoint_dir[0]) {
            snprintf(cfg->checkpoint.dir, sizeof cfg->checkpoint.dir, "%s", w->w.checkpoint_dir);
            if (mkdir(cfg->checkpoint.dir, 0755) != 0 && errno != EEXIST) {
                odl_status e = ODL_ERR(ODL_E_IO, "cannot create %s: %s", cfg->checkpoint.dir, strerror(errno));
                odl_coord_client_close(w->client, 1);
                free(w);
                return e;
            }
        }
        if (w->w.checkpoint_every > 0) cfg->checkpoint.every = w->w.checkpoint_every;
        if (w->w.resume_path[0]) snprintf(cfg->checkpoint.resume, sizeof cfg->checkpoint.resume, "%s", w->w.resume_path);
        else if (!cfg->checkpoint.resume[0]) snprintf(cfg->checkpoint.resume, sizeof cfg->checkpoint.resume, "auto");
        ODL_LOG_INFO("registered with the coordinator at %s: generation %" PRIu64 ", heartbeat every %.0f ms, "
                     "checkpoints in %s every %" PRId64 " steps, %s%s", env.addr, w->w.generation, w->w.heartbeat_s * 1000,
                     cfg->checkpoint.dir, cfg->checkpoint.every, w->w.resume_path[0] ? "resuming from " : "resume ",
                     w->w.resume_path[0] ? w->w.resume_path : cfg->checkpoint.resume);
    }
    if (w->faults.n) ODL_LOG_INFO("ODL_FAULT: %d fault%s armed", w->faults.n, w->faults.n == 1 ? "" : "s");
    *out = w;
    return ODL_OK;
}

odl_status odl_worker_coord_start_eval(odl_worker_coord **out, int rank, int world_size, odl_comm *comm) {
    coord_env env;
    odl_worker_coord *w;
    ODL_CHECK(coord_new(&w, &env, rank, world_size, comm));
    if (!w) return ODL_OK;
    if (env.addr) {
        odl_status s = coord_register(w, &env, NULL, 0);
        if (s != ODL_OK) {
            free(w);
            return s;
        }
        ODL_LOG_INFO("registered with the coordinator at %s: generation %" PRIu64 ", evaluation chunks from its work queue",
                     env.addr, w->w.generation);
    }
    if (w->faults.n) ODL_LOG_INFO("ODL_FAULT: %d fault%s armed", w->faults.n, w->faults.n == 1 ? "" : "s");
    *out = w;
    return ODL_OK;
}

odl_coord_client *odl_worker_coord_client_of(const odl_worker_coord *w) {
    return w ? w->client : NULL;
}

const odl_fault_plan *odl_worker_coord_faults(const odl_worker_coord *w) {
    return w ? &w->faults : NULL;
}

void odl_worker_coord_install(odl_worker_coord *w, odl_train_opts *opts) {
    if (!w) return;
    const odl_train_hooks own = {
        .ctx = w, .on_start = h_on_start, .after_step = h_after_step, .step_request = h_step_request};
    odl_hook_chain_push(&w->chain, &own, opts);
    opts->coord = w->client;
    if (w->client && w->rank == 0) { /* rank 0 writes the checkpoints the coordinator commits */
        opts->ckpt_observer = on_ckpt_write;
        opts->ckpt_observer_ctx = w;
    }
}

void odl_worker_coord_fail(odl_worker_coord *w, const char *why) {
    if (w) snprintf(w->why, sizeof w->why, "%s", why);
}

void odl_worker_coord_finish(odl_worker_coord *w, odl_train_opts *opts, int status) {
    if (!w) return;
    if (opts) { /* NULL for an evaluation, which installs nothing */
        odl_hook_chain_pop(&w->chain, opts);
        opts->coord = NULL;
        opts->ckpt_observer = NULL;
        opts->ckpt_observer_ctx = NULL;
    }
    if (w->client) odl_coord_client_close_why(w->client, status, w->why);
    free(w);
}
