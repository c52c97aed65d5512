/* The GPU side of a process group: device selection, the NCCL communicator (bootstrapped over MPI;
 * blocking by default, non-blocking with ODL_NCCL_BLOCKING=0; the watchdog bounds set-up and hangs either
 * way), the communication stream and the events the watchdog follows. See odl/comm.h. */
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/comm_internal.h"
#include "odl/clock.h"
#include "odl/env.h"
#include "odl/log.h"

#ifdef ODL_HAVE_CUDA
#define CUDA_OK(c, call)                                                                                        \
    do {                                                                                                        \
        cudaError_t e_ = (call);                                                                                \
        if (e_ != cudaSuccess) {                                                                                \
            cudaGetLastError();                                                                                 \
            return ODL_ERR(ODL_E_CUDA, "rank %d (host %s): %s: %s", (c)->rank, (c)->host, #call,               \
                           cudaGetErrorString(e_));                                                             \
        }                                                                                                       \
    } while (0)

odl_status odl__comm_cuda_select(odl_comm *c, int cuda_index) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return ODL_ERR(ODL_E_NODEV, "cudaGetDeviceCount: %s", cudaGetErrorString(e));
    }
    int idx = cuda_index;
    if (idx < 0) ODL_CHECK(odl_launch_pick_cuda(c->local_rank, c->local_size, n, &idx));
    else if (idx >= n) return ODL_ERR(ODL_E_NODEV, "CUDA device %d requested, %d visible", idx, n);
    c->device = odl_cuda(idx);
    CUDA_OK(c, cudaSetDevice(idx));
    CUDA_OK(c, cudaFree(NULL)); /* creates the context: a GPU that is lost or busy fails here */
    return ODL_OK;
}

odl_status odl__comm_cuda_busid(odl_comm *c, char *buf, int cap) {
    CUDA_OK(c, cudaDeviceGetPCIBusId(buf, cap, c->device.index));
    return ODL_OK;
}
#else
odl_status odl__comm_cuda_select(odl_comm *c, int cuda_index) {
    (void)cuda_index;
    (void)c;
    return ODL_ERR(ODL_E_NODEV, "a CUDA device was requested but this build has no CUDA backend");
}
odl_status odl__comm_cuda_busid(odl_comm *c, char *buf, int cap) {
    (void)buf; (void)cap;
    return ODL_ERR(ODL_E_NODEV, "rank %d: no CUDA backend", c->rank);
}
#endif

#ifdef ODL_HAVE_NCCL
static odl_status nccl_fail(odl_comm *c, ncclResult_t r, const char *call) {
    const char *last = c->nccl ? ncclGetLastError(c->nccl) : ncclGetLastError(NULL);
    return ODL_ERR(ODL_E_NCCL, "rank %d (host %s): %s failed: %s%s%s", c->rank, c->host, call, ncclGetErrorString(r),
                   last && last[0] ? ": " : "", last ? last : "");
}

/* A non-blocking communicator may answer ncclInProgress; poll its state until it settles, for at most
 * timeout_s (then the communicator is aborted). */
static odl_status nccl_settle(odl_comm *c, ncclResult_t r, const char *call) {
    double t0 = odl_mono_s();
    while (r == ncclInProgress) {
        ncclResult_t a = ncclInProgress;
        ncclResult_t q = ncclCommGetAsyncError(c->nccl, &a);
        r = q != ncclSuccess ? q : a;
        if (r != ncclInProgress) break;
        if (c->timeout_s > 0 && odl_mono_s() - t0 > c->timeout_s) {
            pthread_mutex_lock(&c->wd_mu); /* the watchdog stops looking at the communicator */
            c->nccl_ok = 0;
            pthread_mutex_unlock(&c->wd_mu);
            ncclCommAbort(c->nccl);
            c->nccl = NULL;
            return ODL_ERR(ODL_E_TIMEOUT,
                           "rank %d (host %s): %s did not complete within %.3g s (dist.timeout_s); NCCL communicator "
                           "aborted (a peer rank is missing or its GPU does not answer)",
                           c->rank, c->host, call, c->timeout_s);
        }
        /* A non-blocking communicator answers ncclInProgress to most enqueues, and the enqueue settles in
         * microseconds: spin first (a sleep here put a ~250 us floor under every collective), then back off. */
        if (odl_mono_s() - t0 > 2e-3) usleep(50);
        else sched_yield();
    }
    if (r != ncclSuccess) return nccl_fail(c, r, call);
    return ODL_OK;
}

static void stream_destroy(odl_comm *c) {
    if (c->ring_created) {
        for (int i = 0; i < ODL_COMM_RING; i++) cudaEventDestroy(c->ring[i].ev);
        c->ring_created = 0;
    }
    if (c->ev_ready) cudaEventDestroy(c->ev_ready);
    if (c->cap_ev) cudaEventDestroy(c->cap_ev);
    if (c->stream) cudaStreamDestroy(c->stream);
    c->cap_ev = NULL;
    c->cap_pending = 0;
    c->ev_ready = NULL;
    c->stream = NULL;
    c->last_ev = NULL;
    c->ring_head = c->ring_count = 0;
}

static odl_status stream_create(odl_comm *c) {
    int least = 0, greatest = 0;
    CUDA_OK(c, cudaDeviceGetStreamPriorityRange(&least, &greatest));
    CUDA_OK(c, cudaStreamCreateWithPriority(&c->stream, cudaStreamNonBlocking, greatest));
    CUDA_OK(c, cudaEventCreateWithFlags(&c->ev_ready, cudaEventDisableTiming));
    CUDA_OK(c, cudaEventCreateWithFlags(&c->cap_ev, cudaEventDisableTiming));
    for (int i = 0; i < ODL_COMM_RING; i++) {
        cudaError_t e = cudaEventCreateWithFlags(&c->ring[i].ev, cudaEventDisableTiming);
        if (e != cudaSuccess) {
            for (int j = 0; j < i; j++) cudaEventDestroy(c->ring[j].ev);
            cudaGetLastError();
            return ODL_ERR(ODL_E_CUDA, "rank %d: cudaEventCreate: %s", c->rank, cudaGetErrorString(e));
        }
    }
    c->ring_created = 1;
    return ODL_OK;
}

odl_status odl__comm_nccl_init(odl_comm *c) {
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    odl_status st = ODL_OK;
    if (c->rank == 0) {
        ncclResult_t r = ncclGetUniqueId(&id);
        if (r != ncclSuccess) st = nccl_fail(c, r, "ncclGetUniqueId");
    }
    ODL_CHECK(odl_comm_agree(c, st, "ncclGetUniqueId"));
    ODL_CHECK(odl__comm_mpi_bcast(c, &id, sizeof id, 0));

    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    /* Blocking by default: measured on 2 H200s, a non-blocking communicator's enqueue-and-settle costs
     * ~50 us per collective (odl/raw NCCL bus bandwidth 0.39 at 4 MiB, 0.79 at 8 MiB), a blocking one
     * nothing (>= 0.99 from 4 MiB to 1 GiB). Hangs stay bounded: the watchdog thread ends the job after
     * dist.timeout_s (set-up included). ODL_NCCL_BLOCKING=0 (odl/env.h) selects the non-blocking
     * communicator, whose set-up is also bounded here by nccl_settle. */
    cfg.blocking = odl_env_bool(ODL_ENV_NCCL_BLOCKING);
    c->nccl = NULL;
    ncclResult_t r = ncclCommInitRankConfig(&c->nccl, c->size, id, c->rank, &cfg);
    if (r == ncclSuccess || r == ncclInProgress) {
        st = nccl_settle(c, r, "ncclCommInitRankConfig");
    } else {
        st = nccl_fail(c, r, "ncclCommInitRankConfig");
        if (c->nccl) ncclCommAbort(c->nccl);
        c->nccl = NULL;
    }
    if (st == ODL_OK) st = stream_create(c);
    odl_status all = odl_comm_agree(c, st, "NCCL communicator set-up");
    if (all != ODL_OK) {
        if (c->nccl) ncclCommAbort(c->nccl);
        c->nccl = NULL;
        stream_destroy(c);
        return all;
    }
    pthread_mutex_lock(&c->wd_mu);
    c->nccl_ok = 1;
    pthread_mutex_unlock(&c->wd_mu);
    int v = 0;
    ncclGetVersion(&v);
    ODL_LOG_INFO("NCCL %d.%d.%d communicator of %d ranks on cuda:%d (rank %d, host %s)", v / 10000, (v / 100) % 100,
                 v % 100, c->size, c->device.index, c->rank, c->host);
    return ODL_OK;
}

void odl__comm_nccl_destroy(odl_comm *c) {
    pthread_mutex_lock(&c->wd_mu);
    c->nccl_ok = 0;
    pthread_mutex_unlock(&c->wd_mu);
    if (c->nccl) {
        ncclResult_t r = ncclCommFinalize(c->nccl);
        if (r == ncclSuccess || r == ncclInProgress) r = nccl_settle(c, r, "ncclCommFinalize") == ODL_OK ? ncclSuccess : r;
        if (c->nccl) {
            if (r == ncclSuccess) ncclCommDestroy(c->nccl);
            else ncclCommAbort(c->nccl);
        }
        c->nccl = NULL;
    }
    stream_destroy(c);
}

void odl__comm_nccl_abort(odl_comm *c) {
    if (!c) return;
    pthread_mutex_lock(&c->wd_mu);
    c->nccl_ok = 0;
    ncclComm_t comm = c->nccl;
    c->nccl = NULL;
    pthread_mutex_unlock(&c->wd_mu);
    if (comm) ncclCommAbort(comm);
}

/* Pop completed entries; report the oldest pending one when it is over the limit. wd_mu held. */
int odl__comm_nccl_poll(odl_comm *c, double now, char *msg, size_t cap) {
    if (!c->nccl_ok || !c->nccl) return 0;
    while (c->ring_count > 0) {
        int h = c->ring_head;
        cudaError_t e = cudaEventQuery(c->ring[h].ev);
        if (e == cudaSuccess) {
            c->ring_head = (h + 1) % ODL_COMM_RING;
            c->ring_count--;
            c->last_done_t = now;
            continue;
        }
        if (e == cudaErrorNotReady) {
            double start = c->ring[h].t0 > c->last_done_t ? c->ring[h].t0 : c->last_done_t;
            if (c->timeout_s > 0 && now - start > c->timeout_s) {
                snprintf(msg, cap,
                         "%s did not complete within %.3g s (dist.timeout_s): a peer rank is dead, stuck or much slower",
                         c->ring[h].what, c->timeout_s);
                return 1;
            }
            break;
        }
        cudaGetLastError();
        snprintf(msg, cap, "CUDA error while waiting for %s: %s", c->ring[h].what, cudaGetErrorString(e));
        return 1;
    }
    ncclResult_t a = ncclSuccess;
    if (ncclCommGetAsyncError(c->nccl, &a) == ncclSuccess && a != ncclSuccess && a != ncclInProgress) {
        const char *last = ncclGetLastError(c->nccl);
        snprintf(msg, cap, "NCCL reported an asynchronous error: %s%s%s", ncclGetErrorString(a),
                 last && last[0] ? ": " : "", last ? last : "");
        return 1;
    }
    return 0;
}

odl_status odl__comm_dev_begin(odl_comm *c) {
    cudaStream_t cur = (cudaStream_t)odl_stream_current();
    CUDA_OK(c, cudaEventRecord(c->ev_ready, cur));
    CUDA_OK(c, cudaStreamWaitEvent(c->stream, c->ev_ready, 0));
    return ODL_OK;
}

odl_status odl__comm_dev_copy(odl_comm *c, void *dst, const void *src, size_t nbytes) {
    if (nbytes == 0 || dst == src) return ODL_OK;
    CUDA_OK(c, cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToDevice, c->stream));
    return ODL_OK;
}

odl_status odl__comm_dev_allreduce(odl_comm *c, float *buf, int64_t count) {
    if (!c->nccl_ok) return ODL_ERR(ODL_E_NCCL, "rank %d: the NCCL communicator was aborted", c->rank);
    ncclResult_t r = ncclAllReduce(buf, buf, (size_t)count, ncclFloat32, ncclSum, c->nccl, c->stream);
    odl_status st = nccl_settle(c, r, "ncclAllReduce");
    if (st != ODL_OK) odl_error_prefix("allreduce of %" PRId64 " floats", count);
    return st;
}

odl_status odl__comm_dev_bcast(odl_comm *c, void *buf, size_t nbytes, int root) {
    if (!c->nccl_ok) return ODL_ERR(ODL_E_NCCL, "rank %d: the NCCL communicator was aborted", c->rank);
    ncclResult_t r = ncclBroadcast(buf, buf, nbytes, ncclUint8, root, c->nccl, c->stream);
    odl_status st = nccl_settle(c, r, "ncclBroadcast");
    if (st != ODL_OK) odl_error_prefix("broadcast of %zu bytes from rank %d", nbytes, root);
    return st;
}

static int capturing(cudaStream_t s) {
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(s, &cs) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return cs != cudaStreamCaptureStatusNone;
}

/* Record a ring entry for `what` on stream s (the communication stream after a collective, or the
 * caller's stream after the replay of a captured step). */
static odl_status ring_push(odl_comm *c, cudaStream_t s, const char *what) {
    pthread_mutex_lock(&c->wd_mu);
    while (c->ring_count == ODL_COMM_RING) {
        /* Full: retire completed entries here; the watchdog keeps timing the oldest meanwhile. */
        int h = c->ring_head;
        cudaError_t e = cudaEventQuery(c->ring[h].ev);
        if (e == cudaSuccess) {
            c->ring_head = (h + 1) % ODL_COMM_RING;
            c->ring_count--;
            c->last_done_t = odl_mono_s();
            continue;
        }
        if (e != cudaErrorNotReady) {
            cudaGetLastError();
            pthread_mutex_unlock(&c->wd_mu);
            return ODL_ERR(ODL_E_CUDA, "rank %d: waiting for %s: %s", c->rank, c->ring[h].what, cudaGetErrorString(e));
        }
        pthread_mutex_unlock(&c->wd_mu);
        usleep(100);
        pthread_mutex_lock(&c->wd_mu);
    }
    int slot = (c->ring_head + c->ring_count) % ODL_COMM_RING;
    cudaError_t e = cudaEventRecord(c->ring[slot].ev, s);
    if (e != cudaSuccess) {
        cudaGetLastError();
        pthread_mutex_unlock(&c->wd_mu);
        return ODL_ERR(ODL_E_CUDA, "rank %d: cudaEventRecord after %s: %s", c->rank, what, cudaGetErrorString(e));
    }
    double now = odl_mono_s();
    if (c->ring_count == 0) c->last_done_t = now;
    c->ring[slot].t0 = now;
    snprintf(c->ring[slot].what, sizeof c->ring[slot].what, "%s", what);
    c->ring_count++;
    c->last_ev = c->ring[slot].ev;
    c->n_ops++;
    pthread_mutex_unlock(&c->wd_mu);
    return ODL_OK;
}

odl_status odl__comm_dev_end(odl_comm *c, const char *what) {
    if (capturing(c->stream)) { /* a step being captured: joined by dev_join, followed after each replay */
        CUDA_OK(c, cudaEventRecord(c->cap_ev, c->stream));
        c->cap_pending = 1;
        return ODL_OK;
    }
    return ring_push(c, c->stream, what);
}

odl_status odl__comm_dev_replayed(odl_comm *c, const char *what) {
    return ring_push(c, (cudaStream_t)odl_stream_current(), what);
}

int odl__comm_dev_capturable(const odl_comm *c, char *why, size_t cap) {
    if (!c->nccl_ok) {
        snprintf(why, cap, "the NCCL communicator is not usable");
        return 0;
    }
    if (!odl_env_bool(ODL_ENV_NCCL_BLOCKING)) {
        /* a non-blocking communicator's enqueue may answer ncclInProgress, polled on the host */
        snprintf(why, cap, "a non-blocking NCCL communicator (ODL_NCCL_BLOCKING=0)");
        return 0;
    }
    int v = 0;
    ncclGetVersion(&v);
    if (v < 20900) { /* NCCL's CUDA graph support */
        snprintf(why, cap, "NCCL %d.%d.%d cannot be captured into a CUDA graph (2.9 or later can)", v / 10000,
                 (v / 100) % 100, v % 100);
        return 0;
    }
    return 1;
}

odl_status odl__comm_dev_join(odl_comm *c) {
    cudaStream_t cur = (cudaStream_t)odl_stream_current();
    if (c->cap_pending && capturing(cur)) {
        c->cap_pending = 0;
        CUDA_OK(c, cudaStreamWaitEvent(cur, c->cap_ev, 0));
        return ODL_OK;
    }
    if (!c->last_ev) return ODL_OK;
    /* The ring event cannot be re-recorded before it completes, so waiting on it now is safe. */
    pthread_mutex_lock(&c->wd_mu);
    cudaError_t e = cudaStreamWaitEvent(cur, c->last_ev, 0);
    pthread_mutex_unlock(&c->wd_mu);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return ODL_ERR(ODL_E_CUDA, "rank %d: cudaStreamWaitEvent(current stream, communication): %s", c->rank,
                       cudaGetErrorString(e));
    }
    return ODL_OK;
}

odl_status odl__comm_dev_sync(odl_comm *c) {
    if (!c->stream) return ODL_OK;
    odl__comm_host_begin(c, "waiting for the communication stream (after %" PRIu64 " collectives)", c->n_ops);
    cudaError_t e = cudaStreamSynchronize(c->stream);
    odl__comm_host_end(c);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return ODL_ERR(ODL_E_CUDA, "rank %d (host %s): cudaStreamSynchronize(communication stream): %s", c->rank,
                       c->host, cudaGetErrorString(e));
    }
    return ODL_OK;
}

#else /* ------------------------------------------------------------------ no NCCL */

static odl_status no_nccl(odl_comm *c) {
    return ODL_ERR(ODL_E_UNSUPPORTED, "rank %d: this build has no NCCL", c->rank);
}
odl_status odl__comm_nccl_init(odl_comm *c) { return no_nccl(c); }
void odl__comm_nccl_destroy(odl_comm *c) { (void)c; }
void odl__comm_nccl_abort(odl_comm *c) { (void)c; }
int odl__comm_nccl_poll(odl_comm *c, double now, char *msg, size_t cap) {
    (void)c; (void)now; (void)msg; (void)cap;
    return 0;
}
odl_status odl__comm_dev_begin(odl_comm *c) { return no_nccl(c); }
odl_status odl__comm_dev_copy(odl_comm *c, void *dst, const void *src, size_t nbytes) {
    (void)dst; (void)src; (void)nbytes;
    return no_nccl(c);
}
odl_status odl__comm_dev_allreduce(odl_comm *c, float *buf, int64_t count) {
    (void)buf; (void)count;
    return no_nccl(c);
}
odl_status odl__comm_dev_bcast(odl_comm *c, void *buf, size_t nbytes, int root) {
    (void)buf; (void)nbytes; (void)root;
    return no_nccl(c);
}
odl_status odl__comm_dev_end(odl_comm *c, const char *what) {
    (void)what;
    return no_nccl(c);
}
odl_status odl__comm_dev_join(odl_comm *c) { return no_nccl(c); }
odl_status odl__comm_dev_replayed(odl_comm *c, const char *what) {
    (void)what;
    return no_nccl(c);
}
int odl__comm_dev_capturable(const odl_comm *c, char *why, size_t cap) {
    snprintf(why, cap, "rank %d: this build has no NCCL", c->rank);
    return 0;
}
odl_status odl__comm_dev_sync(odl_comm *c) { return no_nccl(c); }
#endif
