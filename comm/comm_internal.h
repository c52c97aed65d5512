/* Private state of a process group, shared by the files of comm/. Not installed. */
#ifndef ODL_COMM_INTERNAL_H
#define ODL_COMM_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include "odl/comm.h"
#include "odl/device.h"

#ifdef ODL_HAVE_MPI
#include <mpi.h>
#endif
#ifdef ODL_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif
#ifdef ODL_HAVE_NCCL
#include <nccl.h>
#endif

/* Collectives enqueued on the communication stream that the watchdog follows (one CUDA event each). */
#define ODL_COMM_RING 256
#define ODL_COMM_WHAT 96

struct odl_comm {
    odl_comm_backend backend;
    int rank, size, local_rank, local_size;
    odl_device device;
    char host[64];
    double timeout_s;
    int mpi_owned; /* odl_comm_init called MPI_Init_thread */
    int mpi_thread_level;
#ifdef ODL_HAVE_MPI
    MPI_Comm world; /* a duplicate of MPI_COMM_WORLD with MPI_ERRORS_RETURN */
    int have_world;
#endif

    /* Watchdog. */
    pthread_t wd_thread;
    int wd_started, wd_stop;
    pthread_mutex_t wd_mu;
    pthread_cond_t wd_cv;
    int host_busy;              /* a blocking host call is in progress */
    double host_t0;
    char host_what[ODL_COMM_WHAT];
    uint64_t n_ops;             /* collectives issued (for messages) */

#ifdef ODL_HAVE_NCCL
    ncclComm_t nccl;
    int nccl_ok;
    cudaStream_t stream;        /* communication stream */
    cudaEvent_t ev_ready;       /* recorded on the caller's stream before a launch */
    struct {
        cudaEvent_t ev;
        double t0;
        char what[ODL_COMM_WHAT];
    } ring[ODL_COMM_RING];
    int ring_head, ring_count, ring_created;
    cudaEvent_t last_ev;        /* the newest ring event (NULL before the first) */
    cudaEvent_t cap_ev;         /* the end of the collectives of a CUDA graph capture in progress, for the join */
    int cap_pending;            /* cap_ev recorded in the capture and not yet joined */
    double last_done_t;         /* when the watchdog last saw an entry complete */
#endif
};


/* Watchdog bookkeeping of blocking host calls (MPI): begin stores the description, end clears it. */
void odl__comm_host_begin(odl_comm *c, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void odl__comm_host_end(odl_comm *c);
/* The watchdog's last act: log, abort NCCL, MPI_Abort. Never returns. */
void odl__comm_fire(odl_comm *c, const char *msg)
#if defined(__GNUC__)
    __attribute__((noreturn))
#endif
    ;

/* ---- device side (comm/nccl.c); every function is a no-op or an error without NCCL ---- */
/* Pick, select and check the rank's GPU (cudaSetDevice, context), fill c->device. Local result only. */
odl_status odl__comm_cuda_select(odl_comm *c, int cuda_index);
/* The GPU's PCI bus id into buf (for the duplicate check). */
odl_status odl__comm_cuda_busid(odl_comm *c, char *buf, int cap);
/* Create the NCCL communicator (the id comes from rank 0 via MPI), the stream and events. Collective. */
odl_status odl__comm_nccl_init(odl_comm *c);
void odl__comm_nccl_destroy(odl_comm *c);
/* Called by the watchdog with wd_mu held: fills msg and returns 1 when a followed collective exceeded
 * the timeout or NCCL reported an asynchronous error. */
int odl__comm_nccl_poll(odl_comm *c, double now, char *msg, size_t cap);
void odl__comm_nccl_abort(odl_comm *c);
/* Launch pieces on the communication stream: begin orders it after the caller's current stream;
 * copy / allreduce / bcast enqueue; end records an event the watchdog follows; join makes the caller's
 * current stream wait for everything enqueued so far; sync blocks the host until it is done. */
odl_status odl__comm_dev_begin(odl_comm *c);
odl_status odl__comm_dev_copy(odl_comm *c, void *dst, const void *src, size_t nbytes);
odl_status odl__comm_dev_allreduce(odl_comm *c, float *buf, int64_t count);
odl_status odl__comm_dev_bcast(odl_comm *c, void *buf, size_t nbytes, int root);
odl_status odl__comm_dev_end(odl_comm *c, const char *what);
odl_status odl__comm_dev_join(odl_comm *c);
/* While the caller's current stream is being captured into a CUDA graph, end and join do not touch the
 * watchdog's ring (an event recorded in a capture cannot be queried); after each replay of such a graph,
 * replayed records one ring entry on the caller's current stream: the watchdog then follows the step's
 * collectives as one. capturable says whether this communicator's collectives may be captured (0 and
 * the reason in why otherwise: no NCCL, a non-blocking communicator). */
odl_status odl__comm_dev_replayed(odl_comm *c, const char *what);
int odl__comm_dev_capturable(const odl_comm *c, char *why, size_t cap);
odl_status odl__comm_dev_sync(odl_comm *c);

/* ---- host side (comm/comm.c) ---- */
odl_status odl__comm_mpi_allreduce_f32(odl_comm *c, float *buf, int64_t count);
odl_status odl__comm_mpi_bcast(odl_comm *c, void *buf, size_t nbytes, int root);

#endif
