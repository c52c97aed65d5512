/* Process group: MPI bootstrap and CPU collectives, the hang watchdog, agreement on failures.
 * The NCCL side lives in comm/nccl.c. See odl/comm.h. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/comm_internal.h"
#include "odl/clock.h"
#include "odl/fault.h"
#include "odl/log.h"

#define MPI_CHUNK ((int64_t)1 << 30) /* elements per MPI call: counts are int */

const char *odl_comm_backend_name(odl_comm_backend b) {
    switch (b) {
    case ODL_COMM_LOCAL: return "local";
    case ODL_COMM_MPI: return "mpi";
    case ODL_COMM_NCCL: return "nccl";
    }
    return "?";
}

int odl_comm_rank(const odl_comm *c) { return c ? c->rank : 0; }
int odl_comm_size(const odl_comm *c) { return c ? c->size : 1; }
int odl_comm_local_rank(const odl_comm *c) { return c ? c->local_rank : 0; }
int odl_comm_local_size(const odl_comm *c) { return c ? c->local_size : 1; }
odl_comm_backend odl_comm_get_backend(const odl_comm *c) { return c ? c->backend : ODL_COMM_LOCAL; }
odl_device odl_comm_device(const odl_comm *c) { return c ? c->device : odl_cpu(); }
const char *odl_comm_host(const odl_comm *c) { return c ? c->host : "?"; }

/* ------------------------------------------------------------------ MPI helpers */

#ifdef ODL_HAVE_MPI
static odl_status mpi_fail(const odl_comm *c, int rc, const char *call) {
    char s[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, s, &len) != MPI_SUCCESS) snprintf(s, sizeof s, "error code %d", rc);
    return ODL_ERR(ODL_E_MPI, "rank %d (host %s): %s failed: %s", c ? c->rank : -1, c ? c->host : "?", call, s);
}
#define MPI_TRY(c, call)                                   \
    do {                                                   \
        int rc_ = (call);                                  \
        if (rc_ != MPI_SUCCESS) return mpi_fail((c), rc_, #call); \
    } while (0)
#endif

/* ------------------------------------------------------------------ watchdog */

void odl_comm_activity(odl_comm *c, uint64_t *seq, char *what, size_t cap) {
    *seq = 0;
    if (cap) what[0] = 0;
    if (!c) return;
    if (!c->wd_started) {
        *seq = c->n_ops;
        return;
    }
    pthread_mutex_lock(&c->wd_mu);
    *seq = c->n_ops;
    if (c->host_busy && cap) snprintf(what, cap, "%s", c->host_what);
    pthread_mutex_unlock(&c->wd_mu);
}

void odl__comm_host_begin(odl_comm *c, const char *fmt, ...) {
    odl_fault_collective(); /* an armed hang@ stops here, before this rank takes part */
    if (!c->wd_started) return;
    pthread_mutex_lock(&c->wd_mu);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->host_what, sizeof c->host_what, fmt, ap);
    va_end(ap);
    c->host_t0 = odl_mono_s();
    c->host_busy = 1;
    pthread_mutex_unlock(&c->wd_mu);
}

void odl__comm_host_end(odl_comm *c) {
    if (!c->wd_started) return;
    pthread_mutex_lock(&c->wd_mu);
    c->host_busy = 0;
    pthread_mutex_unlock(&c->wd_mu);
}

void odl__comm_fire(odl_comm *c, const char *msg) {
    odl_log(ODL_LOG_LEVEL_ERROR, "rank %d (host %s): %s; ending the job (exit code %d)", c->rank, c->host, msg,
            ODL_COMM_EXIT_TIMEOUT);
    odl__comm_nccl_abort(c);
#ifdef ODL_HAVE_MPI
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (init && !fin) MPI_Abort(MPI_COMM_WORLD, ODL_COMM_EXIT_TIMEOUT);
#endif
    _exit(ODL_COMM_EXIT_TIMEOUT);
}

#ifdef ODL_HAVE_MPI /* the watchdog exists only in launched jobs */
static void *watchdog_main(void *arg) {
    odl_comm *c = arg;
    int device_set = 0;
    char msg[512];
    pthread_mutex_lock(&c->wd_mu);
    while (!c->wd_stop) {
        const struct timespec until = odl_mono_deadline(50);
        pthread_cond_timedwait(&c->wd_cv, &c->wd_mu, &until);
        if (c->wd_stop) break;
        double now = odl_mono_s();
        int fire = 0;
        if (c->host_busy && now - c->host_t0 > c->timeout_s) {
            snprintf(msg, sizeof msg,
                     "%s did not complete within %.3g s (dist.timeout_s): a peer rank is dead, stuck or much slower",
                     c->host_what, c->timeout_s);
            fire = 1;
        }
#ifdef ODL_HAVE_NCCL
        if (!device_set && c->nccl_ok) { /* the event queries need the rank's GPU current */
            cudaSetDevice(c->device.index);
            device_set = 1;
        }
#endif
        (void)device_set;
        if (!fire) fire = odl__comm_nccl_poll(c, now, msg, sizeof msg);
        if (fire) {
            pthread_mutex_unlock(&c->wd_mu);
            odl__comm_fire(c, msg);
        }
    }
    pthread_mutex_unlock(&c->wd_mu);
    return NULL;
}

static odl_status watchdog_start(odl_comm *c) {
    if (c->timeout_s <= 0) return ODL_OK;
    c->wd_stop = 0;
    int e = pthread_create(&c->wd_thread, NULL, watchdog_main, c);
    if (e) return ODL_ERR(ODL_E_INTERNAL, "rank %d: cannot start the watchdog thread: %s", c->rank, strerror(e));
    c->wd_started = 1;
    return ODL_OK;
}
#endif

static void watchdog_stop(odl_comm *c) {
    if (!c->wd_started) return;
    pthread_mutex_lock(&c->wd_mu);
    c->wd_stop = 1;
    pthread_cond_signal(&c->wd_cv);
    pthread_mutex_unlock(&c->wd_mu);
    pthread_join(c->wd_thread, NULL);
    c->wd_started = 0;
}

/* ------------------------------------------------------------------ init / finalize */

static odl_comm *comm_new(void) {
    odl_comm *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    pthread_mutex_init(&c->wd_mu, NULL);
    odl_cond_init_mono(&c->wd_cv); /* the watchdog's 50 ms polls */
    c->device = odl_cpu();
    if (gethostname(c->host, sizeof c->host) != 0) snprintf(c->host, sizeof c->host, "?");
    c->host[sizeof c->host - 1] = '\0';
    return c;
}

static void comm_delete(odl_comm *c) {
    if (!c) return;
    pthread_mutex_destroy(&c->wd_mu);
    pthread_cond_destroy(&c->wd_cv);
    free(c);
}

#ifdef ODL_HAVE_MPI
/* Every rank's host name; error when two ranks of a host use the same GPU. */
static odl_status check_gpus_distinct(odl_comm *c) {
    enum { L = 96 };
    char mine[L];
    memset(mine, 0, sizeof mine);
    char bus[32] = "";
    odl_status st = odl__comm_cuda_busid(c, bus, sizeof bus);
    snprintf(mine, sizeof mine, "%.60s|%s", c->host, st == ODL_OK ? bus : "?");
    char *all = calloc((size_t)c->size, L);
    if (!all) return ODL_ERR(ODL_E_NOMEM, "rank %d: GPU check buffer", c->rank);
    odl__comm_host_begin(c, "MPI_Allgather of GPU bus ids (comm set-up)");
    int rc = MPI_Allgather(mine, L, MPI_CHAR, all, L, MPI_CHAR, c->world);
    odl__comm_host_end(c);
    if (rc != MPI_SUCCESS) {
        free(all);
        return mpi_fail(c, rc, "MPI_Allgather(GPU bus ids)");
    }
    odl_status out = ODL_OK;
    for (int i = 0; i < c->size && out == ODL_OK; i++)
        for (int j = i + 1; j < c->size; j++) {
            const char *a = all + (size_t)i * L, *b = all + (size_t)j * L;
            if (strcmp(a, b) == 0 && !strstr(a, "|?")) {
                const char *bar = strchr(a, '|');
                out = ODL_ERR(ODL_E_NODEV,
                              "ranks %d and %d on host %.*s use the same GPU (PCI %s); NCCL needs one GPU per rank: "
                              "start at most one rank per GPU and check CUDA_VISIBLE_DEVICES / --gpus-per-task",
                              i, j, (int)(bar - a), a, bar + 1);
                break;
            }
        }
    free(all);
    return out;
}
#endif

#ifdef ODL_HAVE_MPI
/* Set-up phase 1: MPI (initialised here unless the program did), this job's communicator, rank, size
 * and the node's local rank, checked against what the launcher's environment said. */
static odl_status mpi_start(odl_comm *c, const odl_launch_info *li, const odl_comm_options *opt) {
    int init = 0;
    MPI_Initialized(&init);
    if (!init) {
        int provided = 0;
        int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided);
        if (rc != MPI_SUCCESS)
            return ODL_ERR(ODL_E_MPI, "MPI_Init_thread failed (launcher %s, rank %d of %d) with code %d", li->launcher,
                           li->rank, li->world_size, rc);
        c->mpi_owned = 1;
        c->mpi_thread_level = provided;
    } else {
        MPI_Query_thread(&c->mpi_thread_level);
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int rc = MPI_Comm_dup(MPI_COMM_WORLD, &c->world);
    if (rc != MPI_SUCCESS) return mpi_fail(c, rc, "MPI_Comm_dup(MPI_COMM_WORLD)");
    c->have_world = 1;
    MPI_Comm_set_errhandler(c->world, MPI_ERRORS_RETURN);
    MPI_Comm_rank(c->world, &c->rank);
    MPI_Comm_size(c->world, &c->size);
    if ((li->world_size > 0 && li->world_size != c->size) || (li->world_size > 0 && li->rank != c->rank))
        return ODL_ERR(ODL_E_CONFIG,
                       "the launcher's environment (%s) says rank %d of %d but MPI started rank %d of %d: the "
                       "processes were not wired into one job (with srun use --mpi=pmix, see `srun --mpi=list`; or "
                       "start them with mpirun)",
                       li->launcher, li->rank, li->world_size, c->rank, c->size);
    MPI_Comm node;
    rc = MPI_Comm_split_type(c->world, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &node);
    if (rc != MPI_SUCCESS) return mpi_fail(c, rc, "MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)");
    MPI_Comm_rank(node, &c->local_rank);
    MPI_Comm_size(node, &c->local_size);
    MPI_Comm_free(&node);
    odl_log_set_rank(c->rank, c->size);
    if (li->local_rank >= 0 && li->local_rank != c->local_rank)
        ODL_LOG_WARN("launcher says local rank %d, MPI says %d on host %s; using MPI's", li->local_rank, c->local_rank,
                     c->host);
    if (c->mpi_thread_level < MPI_THREAD_MULTIPLE && opt->timeout_s > 0)
        ODL_LOG_DEBUG("MPI provides thread level %d < MPI_THREAD_MULTIPLE; the watchdog calls MPI_Abort anyway",
                      c->mpi_thread_level);
    return ODL_OK;
}

/* Phase 2: every rank uses the same kind of device. */
static odl_status agree_device_type(odl_comm *c, const odl_comm_options *opt) {
    int64_t mine = opt->device_type, *all = calloc((size_t)c->size, sizeof *all);
    if (!all) return ODL_ERR(ODL_E_NOMEM, "rank %d: device agreement", c->rank);
    odl_status st = odl_comm_allgather_host_i64(c, &mine, 1, all);
    for (int r = 1; st == ODL_OK && r < c->size; r++)
        if (all[r] != all[0])
            st = ODL_ERR(ODL_E_CONFIG,
                         "ranks disagree on the device: rank 0 uses %s, rank %d uses %s (set device: cuda or cpu "
                         "explicitly, or give every node GPUs)",
                         all[0] == ODL_DEV_CUDA ? "cuda" : "cpu", r, all[r] == ODL_DEV_CUDA ? "cuda" : "cpu");
    free(all);
    return st;
}

/* Phase 3: the backend -- on CUDA each rank's GPU, one per rank, and the NCCL communicator; on the CPU
 * MPI's collectives. */
static odl_status backend_start(odl_comm *c, const odl_comm_options *opt) {
    if (opt->device_type != ODL_DEV_CUDA) {
        if (c->size > 1) c->backend = ODL_COMM_MPI;
        return ODL_OK;
    }
    odl_status ds = odl__comm_cuda_select(c, opt->cuda_index);
    if (ds != ODL_OK) odl_error_prefix("rank %d (host %s, local rank %d) cannot use its GPU", c->rank, c->host, c->local_rank);
    ODL_CHECK(odl_comm_agree(c, ds, "GPU selection"));
    if (c->size == 1) return ODL_OK;
    ODL_CHECK(check_gpus_distinct(c));
#ifdef ODL_HAVE_NCCL
    ODL_CHECK(odl__comm_nccl_init(c));
    c->backend = ODL_COMM_NCCL;
    return ODL_OK;
#else
    return ODL_ERR(ODL_E_NCCL, /* not UNSUPPORTED: that one means MPI is not even there (odl/comm.h) */
                   "rank %d: a CUDA job of %d ranks needs NCCL, and this build has none (set NCCL_HOME and "
                   "rebuild, or train with --device cpu)",
                   c->rank, c->size);
#endif
}
#endif

odl_status odl_comm_init(const odl_launch_info *li, const odl_comm_options *opt, odl_comm **out) {
    if (!li || !opt || !out) return ODL_ERR(ODL_E_INVAL, "odl_comm_init: NULL argument");
    *out = NULL;
    if (opt->device_type != ODL_DEV_CPU && opt->device_type != ODL_DEV_CUDA)
        return ODL_ERR(ODL_E_INVAL, "odl_comm_init: device type %d", (int)opt->device_type);
    if (!(opt->timeout_s >= 0)) return ODL_ERR(ODL_E_INVAL, "odl_comm_init: timeout %g s", opt->timeout_s);
    odl_comm *c = comm_new();
    if (!c) return ODL_ERR(ODL_E_NOMEM, "odl_comm_init");
    c->timeout_s = opt->timeout_s;
    c->rank = 0;
    c->size = 1;
    c->local_rank = 0;
    c->local_size = 1;
    c->backend = ODL_COMM_LOCAL;

    if (!li->launched) {
        if (opt->device_type == ODL_DEV_CUDA) c->device = odl_cuda(opt->cuda_index >= 0 ? opt->cuda_index : 0);
        *out = c;
        return ODL_OK;
    }
#ifndef ODL_HAVE_MPI
    comm_delete(c);
    return ODL_ERR(ODL_E_UNSUPPORTED,
                   "started by a launcher (%s, rank %d of %d) but this build has no MPI: install an MPI (e.g. "
                   "libopenmpi-dev), rebuild, or run odl_worker without mpirun/srun for a single process",
                   li->launcher, li->rank, li->world_size);
#else
    odl_status st = mpi_start(c, li, opt);
    if (st == ODL_OK) {
        if (opt->device_type == ODL_DEV_CUDA) c->device = odl_cuda(opt->cuda_index >= 0 ? opt->cuda_index : 0);
        st = watchdog_start(c); /* covers every collective from here on */
    }
    if (st == ODL_OK) st = agree_device_type(c, opt);
    if (st == ODL_OK) st = backend_start(c, opt);
    if (st == ODL_OK) {
        *out = c;
        return ODL_OK;
    }
    odl_error_trace(__FILE__, __LINE__);
    watchdog_stop(c);
    if (c->have_world) MPI_Comm_free(&c->world);
    /* MPI stays initialised: the caller decides between odl_comm_finalize(NULL) and aborting. */
    comm_delete(c);
    return st;
#endif
}

odl_status odl_comm_finalize(odl_comm *c) {
    odl_status st = ODL_OK;
    int finalize_mpi = 1; /* c == NULL: a failed odl_comm_init left MPI initialised */
    if (c) {
        finalize_mpi = c->mpi_owned;
        if (c->backend == ODL_COMM_NCCL) st = odl_comm_synchronize(c); /* still under the watchdog */
        watchdog_stop(c);
        if (c->backend == ODL_COMM_NCCL) odl__comm_nccl_destroy(c);
#ifdef ODL_HAVE_MPI
        if (c->have_world) MPI_Comm_free(&c->world);
#endif
        comm_delete(c);
    }
#ifdef ODL_HAVE_MPI
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (init && !fin && finalize_mpi) {
        int rc = MPI_Finalize();
        if (rc != MPI_SUCCESS && st == ODL_OK) st = ODL_ERR(ODL_E_MPI, "MPI_Finalize failed with code %d", rc);
    }
#else
    (void)finalize_mpi;
#endif
    return st;
}

void odl_comm_abort_job(odl_comm *c, int exit_code, const char *fmt, ...) {
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    char host[64] = "?";
    int rank = c ? c->rank : 0;
    if (c) snprintf(host, sizeof host, "%s", c->host);
    else if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "?");
    host[sizeof host - 1] = '\0';
#ifdef ODL_HAVE_MPI
    if (!c) {
        int ini = 0, fi = 0;
        MPI_Initialized(&ini);
        MPI_Finalized(&fi);
        if (ini && !fi) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    }
#endif
    fprintf(stderr, "%s: error: rank %d (host %s): %s\n", program_invocation_short_name, rank, host, msg);
    fflush(stderr);
    if (c) odl__comm_nccl_abort(c);
#ifdef ODL_HAVE_MPI
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (init && !fin) MPI_Abort(MPI_COMM_WORLD, exit_code);
#endif
    exit(exit_code);
}

/* ------------------------------------------------------------------ host collectives */

odl_status odl__comm_mpi_allreduce_f32(odl_comm *c, float *buf, int64_t count) {
#ifdef ODL_HAVE_MPI
    for (int64_t off = 0; off < count; off += MPI_CHUNK) {
        int n = (int)(count - off < MPI_CHUNK ? count - off : MPI_CHUNK);
        odl__comm_host_begin(c, "MPI_Allreduce #%" PRIu64 " of %d floats", c->n_ops, n);
        int rc = MPI_Allreduce(MPI_IN_PLACE, buf + off, n, MPI_FLOAT, MPI_SUM, c->world);
        odl__comm_host_end(c);
        c->n_ops++;
        if (rc != MPI_SUCCESS) {
            odl_status s = mpi_fail(c, rc, "MPI_Allreduce");
            odl_error_prefix("allreduce of %" PRId64 " floats", count);
            return s;
        }
    }
    return ODL_OK;
#else
    (void)buf; (void)count;
    return ODL_ERR(ODL_E_UNSUPPORTED, "rank %d: MPI collective in a build without MPI", c->rank);
#endif
}

odl_status odl__comm_mpi_bcast(odl_comm *c, void *buf, size_t nbytes, int root) {
#ifdef ODL_HAVE_MPI
    for (size_t off = 0; off < nbytes; off += (size_t)MPI_CHUNK) {
        int n = (int)(nbytes - off < (size_t)MPI_CHUNK ? nbytes - off : (size_t)MPI_CHUNK);
        odl__comm_host_begin(c, "MPI_Bcast #%" PRIu64 " of %d bytes from rank %d", c->n_ops, n, root);
        int rc = MPI_Bcast((char *)buf + off, n, MPI_BYTE, root, c->world);
        odl__comm_host_end(c);
        c->n_ops++;
        if (rc != MPI_SUCCESS) return mpi_fail(c, rc, "MPI_Bcast");
    }
    return ODL_OK;
#else
    (void)buf; (void)nbytes; (void)root;
    return ODL_ERR(ODL_E_UNSUPPORTED, "rank %d: MPI collective in a build without MPI", c->rank);
#endif
}

odl_status odl_comm_allreduce_sum(odl_comm *c, float *buf, int64_t count) {
    if (!c) return ODL_ERR(ODL_E_INVAL, "odl_comm_allreduce_sum: NULL comm");
    if (count < 0 || (count > 0 && !buf))
        return ODL_ERR(ODL_E_INVAL, "odl_comm_allreduce_sum: %" PRId64 " elements at %p", count, (void *)buf);
    if (count == 0 || c->backend == ODL_COMM_LOCAL) return ODL_OK;
    if (c->backend == ODL_COMM_MPI) return odl__comm_mpi_allreduce_f32(c, buf, count);
    char what[ODL_COMM_WHAT];
    snprintf(what, sizeof what, "ncclAllReduce #%" PRIu64 " of %" PRId64 " floats", c->n_ops, count);
    odl_fault_collective();
    ODL_CHECK(odl__comm_dev_begin(c));
    ODL_CHECK(odl__comm_dev_allreduce(c, buf, count));
    ODL_CHECK(odl__comm_dev_end(c, what));
    ODL_CHECK(odl__comm_dev_join(c));
    return ODL_OK;
}

odl_status odl_comm_broadcast(odl_comm *c, void *buf, size_t nbytes, int root) {
    if (!c) return ODL_ERR(ODL_E_INVAL, "odl_comm_broadcast: NULL comm");
    if (root < 0 || root >= c->size)
        return ODL_ERR(ODL_E_INVAL, "odl_comm_broadcast: root %d outside [0, %d)", root, c->size);
    if (nbytes > 0 && !buf) return ODL_ERR(ODL_E_INVAL, "odl_comm_broadcast: NULL buffer of %zu bytes", nbytes);
    if (nbytes == 0 || c->backend == ODL_COMM_LOCAL) return ODL_OK;
    if (c->backend == ODL_COMM_MPI) return odl__comm_mpi_bcast(c, buf, nbytes, root);
    char what[ODL_COMM_WHAT];
    snprintf(what, sizeof what, "ncclBroadcast #%" PRIu64 " of %zu bytes from rank %d", c->n_ops, nbytes, root);
    odl_fault_collective();
    ODL_CHECK(odl__comm_dev_begin(c));
    ODL_CHECK(odl__comm_dev_bcast(c, buf, nbytes, root));
    ODL_CHECK(odl__comm_dev_end(c, what));
    ODL_CHECK(odl__comm_dev_join(c));
    return ODL_OK;
}

odl_status odl_comm_synchronize(odl_comm *c) {
    if (!c) return ODL_ERR(ODL_E_INVAL, "odl_comm_synchronize: NULL comm");
    if (c->backend != ODL_COMM_NCCL) return ODL_OK;
    return odl__comm_dev_sync(c);
}

odl_status odl_comm_barrier(odl_comm *c) {
    if (!c) return ODL_ERR(ODL_E_INVAL, "odl_comm_barrier: NULL comm");
    ODL_CHECK(odl_comm_synchronize(c));
#ifdef ODL_HAVE_MPI
    if (!c->have_world || c->size == 1) return ODL_OK;
    odl__comm_host_begin(c, "MPI_Barrier #%" PRIu64, c->n_ops);
    int rc = MPI_Barrier(c->world);
    odl__comm_host_end(c);
    c->n_ops++;
    if (rc != MPI_SUCCESS) return mpi_fail(c, rc, "MPI_Barrier");
#endif
    return ODL_OK;
}

odl_status odl_comm_allreduce_host_f64(odl_comm *c, double *v, int n) {
    if (!c || (n > 0 && !v) || n < 0) return ODL_ERR(ODL_E_INVAL, "odl_comm_allreduce_host_f64: bad arguments");
#ifdef ODL_HAVE_MPI
    if (!c->have_world || c->size == 1 || n == 0) return ODL_OK;
    odl__comm_host_begin(c, "MPI_Allreduce #%" PRIu64 " of %d host doubles", c->n_ops, n);
    int rc = MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_SUM, c->world);
    odl__comm_host_end(c);
    c->n_ops++;
    if (rc != MPI_SUCCESS) return mpi_fail(c, rc, "MPI_Allreduce(host doubles)");
#endif
    return ODL_OK;
}

odl_status odl_comm_allgather_host_i64(odl_comm *c, const int64_t *v, int n, int64_t *out) {
    if (!c || n < 0 || (n > 0 && (!v || !out))) return ODL_ERR(ODL_E_INVAL, "odl_comm_allgather_host_i64: bad arguments");
#ifdef ODL_HAVE_MPI
    if (c->have_world && c->size > 1) {
        odl__comm_host_begin(c, "MPI_Allgather #%" PRIu64 " of %d host integers", c->n_ops, n);
        int rc = MPI_Allgather(v, n, MPI_INT64_T, out, n, MPI_INT64_T, c->world);
        odl__comm_host_end(c);
        c->n_ops++;
        if (rc != MPI_SUCCESS) return mpi_fail(c, rc, "MPI_Allgather(host integers)");
        return ODL_OK;
    }
#endif
    if (n > 0) memcpy(out, v, (size_t)n * sizeof *v);
    return ODL_OK;
}

odl_status odl_comm_gather_host_bytes(odl_comm *c, const void *buf, size_t nbytes, int root, void **out, size_t *total) {
    if (!c || !out || (nbytes > 0 && !buf) || root < 0 || root >= c->size)
        return ODL_ERR(ODL_E_INVAL, "odl_comm_gather_host_bytes: bad arguments");
    *out = NULL;
    if (total) *total = 0;
    if (nbytes > (size_t)INT32_MAX)
        return ODL_ERR(ODL_E_INVAL, "rank %d: gather of %zu bytes (at most 2^31 - 1 per rank)", c->rank, nbytes);
    int64_t mine = (int64_t)nbytes, *all = calloc((size_t)c->size, sizeof(int64_t));
    if (!all) return ODL_ERR(ODL_E_NOMEM, "rank %d: gather counts", c->rank);
    odl_status st = odl_comm_allgather_host_i64(c, &mine, 1, all);
    size_t sum = 0;
    for (int r = 0; st == ODL_OK && r < c->size; r++) sum += (size_t)all[r];
    uint8_t *dst = NULL;
    if (st == ODL_OK && c->rank == root && !(dst = malloc(sum ? sum : 1)))
        st = ODL_ERR(ODL_E_NOMEM, "rank %d: gather of %zu bytes", c->rank, sum);
#ifdef ODL_HAVE_MPI
    if (st == ODL_OK && c->have_world && c->size > 1) {
        int *cnt = calloc((size_t)c->size, sizeof(int)), *dsp = calloc((size_t)c->size, sizeof(int));
        if (!cnt || !dsp || sum > (size_t)INT32_MAX) {
            st = ODL_ERR(ODL_E_NOMEM, "rank %d: gather of %zu bytes (at most 2^31 - 1 in all)", c->rank, sum);
        } else {
            for (int r = 0, off = 0; r < c->size; r++) {
                cnt[r] = (int)all[r];
                dsp[r] = off;
                off += cnt[r];
            }
            odl__comm_host_begin(c, "MPI_Gatherv #%" PRIu64 " of %zu bytes to rank %d", c->n_ops, nbytes, root);
            int rc = MPI_Gatherv(buf, (int)nbytes, MPI_BYTE, dst, cnt, dsp, MPI_BYTE, root, c->world);
            odl__comm_host_end(c);
            c->n_ops++;
            if (rc != MPI_SUCCESS) st = mpi_fail(c, rc, "MPI_Gatherv(host bytes)");
        }
        free(cnt);
        free(dsp);
    } else
#endif
    if (st == ODL_OK && nbytes > 0) {
        memcpy(dst, buf, nbytes);
    }
    free(all);
    if (st != ODL_OK) {
        free(dst);
        return st;
    }
    *out = dst;
    if (total && c->rank == root) *total = sum;
    return ODL_OK;
}

odl_status odl_comm_agree(odl_comm *c, odl_status local, const char *what) {
    if (!c) return ODL_ERR(ODL_E_INVAL, "odl_comm_agree: NULL comm");
    if (!what) what = "a step";
#ifdef ODL_HAVE_MPI
    if (c->have_world && c->size > 1) {
        enum { L = 512 };
        struct rep {
            int32_t code;
            char msg[L - 4];
        };
        struct rep mine;
        memset(&mine, 0, sizeof mine);
        mine.code = (int32_t)local;
        if (local != ODL_OK) snprintf(mine.msg, sizeof mine.msg, "%s", odl_error_msg());
        struct rep *all = calloc((size_t)c->size, sizeof *all);
        if (!all) return ODL_ERR(ODL_E_NOMEM, "rank %d: agreement buffer", c->rank);
        odl__comm_host_begin(c, "MPI_Allgather #%" PRIu64 " (agreement on %s)", c->n_ops, what);
        int rc = MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE, c->world);
        odl__comm_host_end(c);
        c->n_ops++;
        if (rc != MPI_SUCCESS) {
            free(all);
            return mpi_fail(c, rc, "MPI_Allgather(agreement)");
        }
        int first = -1, nfail = 0;
        for (int r = 0; r < c->size; r++)
            if (all[r].code != ODL_OK) {
                if (first < 0) first = r;
                nfail++;
            }
        odl_status out = ODL_OK;
        if (first >= 0) {
            char more[64] = "";
            if (nfail > 1) snprintf(more, sizeof more, " (and %d more rank%s)", nfail - 1, nfail > 2 ? "s" : "");
            out = (odl_status)all[first].code;
            odl_error_set(out, __FILE__, __LINE__, "%s failed on rank %d%s: %s", what, first, more, all[first].msg);
        }
        free(all);
        return out;
    }
#endif
    if (local != ODL_OK) odl_error_prefix("%s failed on rank %d", what, c->rank);
    return local;
}
