/* odl_worker's coordinator glue (worker/coord.h). */
#include "worker/coord.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "odl/ckpt_session.h"
#include "odl/coord_client.h"
#include "odl/env.h"
#include "odl/device.h"
#include "odl/fault.h"
#include "odl/health.h"
#include "odl/log.h"

struct odl_worker_coord {
    odl_coord_client *client; /* NULL: no coordinator, faults only */
    odl_fault_plan faults;
    odl_comm *comm;
    int rank, world;
    int64_t global_batch;
    odl_coord_welcome w;
    const odl_train_hooks *inner;
    odl_train_hooks hooks;
    double t_rate;
    int64_t step_rate;
    double sps;
    char why[1024]; /* odl_worker_coord_fail: the error sent with the goodbye */
};

/* The process's coordinator client, for the GPU-health monitor's reports (worker/health_monitor.c);
 * set before training starts and cleared after it ends, on the training thread. */
static odl_coord_client *g_client;

odl_coord_client *odl_worker_coord_client(void) {
    return g_client;
}

/* The Hello's GPU identity: PCI bus id of the rank's device (CUDA) and its UUID (NVML, when present). */
static void gpu_identity(odl_comm *comm, odl_coord_hello *h) {
    if (!comm) return;
    odl_device d = odl_comm_device(comm);
    if (d.type != ODL_DEV_CUDA || odl_cuda_pci_bus_id(d.index, h->pci_bus_id, sizeof h->pci_bus_id) != ODL_OK) {
        h->pci_bus_id[0] = 0;
        return;
    }
    odl_nvml *n = NULL;
    int idx;
    odl_gpu_telemetry t;
    if (odl_nvml_open(&n) == ODL_OK && odl_nvml_find(n, h->pci_bus_id, &idx) == ODL_OK &&
        odl_nvml_read(n, idx, &t) == ODL_OK)
        snprintf(h->gpu_uuid, sizeof h->gpu_uuid, "%.63s", t.uuid);
    if (n) odl_nvml_close(n);
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

static double mono(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
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
        odl_coord_client_ckpt_written(w->client, st->step, st->epoch, st->cursor, path, bytes, ms, status == ODL_OK, error);
}

/* ------------------------------------------------------------------ training hooks */

static odl_status h_on_start(void *ctx, const odl_config *cfg, odl_net *net, odl_optim *opt, odl_train_state *st) {
    odl_worker_coord *w = ctx;
    if (w->client && w->w.have_plan && w->w.resume_path[0] &&
        (st->step != w->w.step || st->epoch != w->w.epoch || st->cursor != w->w.cursor))
        return ODL_ERR(ODL_E_INTERNAL,
                       "rank %d resumed at step %" PRId64 ", epoch %" PRId64 ", cursor %" PRId64 " but the coordinator's "
                       "plan (from %s) is step %" PRId64 ", epoch %" PRId64 ", cursor %" PRId64,
                       w->rank, st->step, st->epoch, st->cursor, w->w.resume_path, w->w.step, w->w.epoch, w->w.cursor);
    odl_coord_client_progress(w->client, st->step, st->epoch, st->cursor, 0);
    w->t_rate = mono();
    w->step_rate = st->step;
    if (w->inner && w->inner->on_start) ODL_CHECK(w->inner->on_start(w->inner->ctx, cfg, net, opt, st));
    return ODL_OK;
}

static odl_status h_reduce_grads(void *ctx, odl_net *net) {
    odl_worker_coord *w = ctx;
    return w->inner && w->inner->reduce_grads ? w->inner->reduce_grads(w->inner->ctx, net) : ODL_OK;
}

static odl_status h_reduce_scalar(void *ctx, double *v) {
    odl_worker_coord *w = ctx;
    return w->inner && w->inner->reduce_scalar ? w->inner->reduce_scalar(w->inner->ctx, v) : ODL_OK;
}

static odl_status h_after_step(void *ctx, const odl_config *cfg, odl_net *net, odl_optim *opt, const odl_train_state *st) {
    odl_worker_coord *w = ctx;
    if (w->inner && w->inner->after_step) ODL_CHECK(w->inner->after_step(w->inner->ctx, cfg, net, opt, st));
    if (w->client) {
        double now = mono();
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

static odl_status h_on_finish(void *ctx, const odl_config *cfg, odl_net *net, odl_optim *opt, const odl_train_state *st) {
    odl_worker_coord *w = ctx;
    return w->inner && w->inner->on_finish ? w->inner->on_finish(w->inner->ctx, cfg, net, opt, st) : ODL_OK;
}

static int h_step_request(void *ctx, const odl_train_state *st) {
    odl_worker_coord *w = ctx;
    int f = w->inner && w->inner->step_request ? w->inner->step_request(w->inner->ctx, st) : 0;
    int c = odl_coord_client_step_request(w->client, st->step);
    if (c & ODL_COORD_CHECKPOINT) f |= ODL_TRAIN_CHECKPOINT;
    if (c & ODL_COORD_STOP) f |= ODL_TRAIN_STOP;
    return f;
}

/* ------------------------------------------------------------------ entry */

/* Register rank of world with the coordinator named by env (Hello with the config seed `seed`). */
static odl_status coord_register(odl_worker_coord *w, const coord_env *env, uint64_t seed) {
    odl_coord_hello h;
    memset(&h, 0, sizeof h);
    h.rank = w->rank;
    h.world_size = w->world;
    h.generation = env->generation;
    /* the node the fence list names: ODL_NODE_NAME (emulated nodes) or the short host name */
    snprintf(h.node, sizeof h.node, "%s", odl_health_node_name());
    h.pid = (uint32_t)getpid();
    h.seed = seed;
    gpu_identity(w->comm, &h);
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
    if (env.addr) {
        odl_status s = coord_register(w, &env, (uint64_t)cfg->seed);
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
        if (rank == 0) odl_ckpt_set_write_observer(on_ckpt_write, w);
        ODL_LOG_INFO("registered with the coordinator at %s: generation %" PRIu64 ", heartbeat every %.0f ms, "
                     "checkpoints in %s every %" PRId64 " steps, %s%s", env.addr, w->w.generation, w->w.heartbeat_s * 1000,
                     cfg->checkpoint.dir, cfg->checkpoint.every, w->w.resume_path[0] ? "resuming from " : "resume ",
                     w->w.resume_path[0] ? w->w.resume_path : cfg->checkpoint.resume);
    }
    g_client = w->client;
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
        odl_status s = coord_register(w, &env, 0);
        if (s != ODL_OK) {
            free(w);
            return s;
        }
        ODL_LOG_INFO("registered with the coordinator at %s: generation %" PRIu64 ", evaluation chunks from its work queue",
                     env.addr, w->w.generation);
    }
    g_client = w->client;
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
    w->inner = opts->hooks;
    odl_train_hooks *h = &w->hooks;
    memset(h, 0, sizeof *h);
    h->ctx = w;
    h->on_start = h_on_start;
    h->reduce_grads = h_reduce_grads;
    h->reduce_scalar = h_reduce_scalar;
    h->after_step = h_after_step;
    h->on_finish = h_on_finish;
    h->step_request = h_step_request;
    opts->hooks = h;
}

void odl_worker_coord_fail(odl_worker_coord *w, const char *why) {
    if (w) snprintf(w->why, sizeof w->why, "%s", why);
}

void odl_worker_coord_finish(odl_worker_coord *w, odl_train_opts *opts, int status) {
    if (!w) return;
    if (opts && opts->hooks == &w->hooks) opts->hooks = w->inner;
    if (w->client) {
        g_client = NULL;
        if (w->rank == 0) odl_ckpt_set_write_observer(NULL, NULL);
        odl_coord_client_close_why(w->client, status, w->why);
    }
    free(w);
}
