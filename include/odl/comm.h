/* Communication layer: launcher detection, a process group (NCCL for GPU ranks, MPI for CPU ranks)
 * with AllReduce, broadcast and barrier, a hang watchdog, and gradient buckets for data parallelism.
 *
 * One process per GPU (or per CPU rank), started by mpirun or srun. MPI starts and bootstraps the
 * group: rank, world size, local rank (MPI_Comm_split_type), the ncclUniqueId broadcast, host scalars.
 * Bulk data (gradients, parameters) moves through NCCL on a CUDA device and through MPI_Allreduce /
 * MPI_Bcast on the CPU. Run without a launcher a process has a local group of size 1 and MPI is never
 * initialised.
 *
 * Streams (CUDA): a group owns a high-priority communication stream. A collective is ordered after the
 * work already enqueued on the calling thread's current stream (odl_stream_current()): an event
 * recorded there is waited on by the communication stream, the NCCL call runs on the communication
 * stream, and the current stream waits on an event recorded after it. The host does not block; work
 * enqueued later on the current stream sees the result. On the CPU every collective is blocking.
 *
 * Hangs: when options.timeout_s > 0 a watchdog thread ends the whole job (every rank) if a collective
 * does not complete within that many seconds: it logs one line naming this rank, its host, the
 * collective and the timeout, aborts the NCCL communicator (ncclCommAbort) and calls
 * MPI_Abort(MPI_COMM_WORLD, ODL_COMM_EXIT_TIMEOUT), which makes mpirun/srun kill the other ranks. This
 * is the one place where the library ends the process, by design: a hung collective cannot be returned
 * from. Errors of MPI/NCCL/CUDA calls are returned as odl_status with the failing call and the rank.
 *
 * Thread use: one thread drives a group (the training thread); the watchdog is internal. MPI is
 * initialised with MPI_THREAD_MULTIPLE when available (the watchdog may call MPI_Abort).
 */
#ifndef ODL_COMM_H
#define ODL_COMM_H

#include "odl/api.h"
#include <stddef.h>
#include <stdint.h>

#include "odl/nn.h"
#include "odl/api.h"
#include "odl/status.h"
#include "odl/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Exit code of a job ended by the watchdog (a collective timed out), and of odl_comm_abort_job's usual
 * caller (a rank failed). */
#define ODL_COMM_EXIT_TIMEOUT 124
#define ODL_COMM_EXIT_ERROR 1

/* ------------------------------------------------------------------ launcher detection */

typedef struct odl_launch_info {
    int launched;         /* 1: this process is one rank of a job started by a launcher (MPI must be initialised) */
    char launcher[16];    /* "openmpi" (mpirun), "pmix", "pmi", "slurm" (srun), "none" */
    int rank, world_size; /* from the environment; -1 when it does not say (MPI then decides) */
    int local_rank, local_size; /* rank and process count on this node; -1 when unknown (odl_comm_init
                                   derives them from MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)) */
} odl_launch_info;

/* Read the launcher's environment, first match wins:
 *   openmpi  OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_LOCAL_RANK/_LOCAL_SIZE (mpirun)
 *   pmix     PMIX_RANK (srun --mpi=pmix, prterun), size from SLURM_NTASKS or PMIX_SIZE when present,
 *            local rank from SLURM_LOCALID
 *   pmi      PMI_RANK with PMI_SIZE (MPICH hydra, srun --mpi=pmi2), local rank from MPI_LOCALRANKID
 *   slurm    SLURM_PROCID with SLURM_NTASKS > 1 inside a job step (SLURM_STEP_ID set, i.e. under srun;
 *            the batch script itself also has SLURM_PROCID=0 and is not a launch), SLURM_LOCALID
 * Nothing found: launched = 0, rank 0 of 1, launcher "none" (the single-process program).
 * Errors: ODL_E_CONFIG naming the variable when a value is not an integer or out of range
 * (rank >= size, size < 1). */
ODL_API odl_status odl_launch_detect(odl_launch_info *out);

/* The CUDA device of a rank, "one GPU per rank, chosen by local rank": with one visible device (e.g.
 * Slurm binds each task to its GPU with CUDA_VISIBLE_DEVICES) index 0; with n_visible >= local_size
 * (or local_size unknown) index local_rank. Errors: ODL_E_NODEV when n_visible is 0 or smaller than
 * the ranks on this node (two ranks would share a GPU, which NCCL does not support), naming the rank. */
ODL_API odl_status odl_launch_pick_cuda(int local_rank, int local_size, int n_visible, int *index);

/* ------------------------------------------------------------------ process group */

typedef struct odl_comm odl_comm;

typedef enum odl_comm_backend {
    ODL_COMM_LOCAL = 0, /* one process, no MPI: collectives are no-ops */
    ODL_COMM_MPI = 1,   /* CPU ranks: MPI_Allreduce / MPI_Bcast on host memory */
    ODL_COMM_NCCL = 2,  /* CUDA ranks: NCCL on device memory, MPI for bootstrap and host scalars */
} odl_comm_backend;

typedef struct odl_comm_options {
    odl_device_type device_type; /* ODL_DEV_CPU or ODL_DEV_CUDA (the GPU then picked by local rank) */
    int cuda_index;              /* >= 0: use this CUDA device instead of picking by local rank; -1: pick */
    double timeout_s;            /* > 0: watchdog limit per collective (config dist.timeout_s); 0: none */
} odl_comm_options;

/* Set up the group. li->launched: MPI_Init_thread (unless already initialised), rank and size from MPI
 * checked against the environment's, the local rank from MPI; for CUDA: pick the GPU, make it current
 * (cudaSetDevice, context creation), check that no two ranks of a host share a GPU, create the NCCL
 * communicator (ncclUniqueId broadcast from rank 0 over MPI, ncclCommInitRankConfig: blocking, as measured
 * faster, unless ODL_NCCL_BLOCKING=0; the watchdog bounds set-up and collectives by timeout_s) and the
 * communication stream. Every rank learns if any rank failed a step, and
 * all of them return the same kind of error naming the failing rank(s), host and reason (e.g.
 * "rank 1 (host gpu3, local rank 1) cannot use its GPU: cudaSetDevice(1): invalid device ordinal").
 * !li->launched: a local group of size 1, no MPI.
 * Errors: ODL_E_UNSUPPORTED only when launched but the build has no MPI (nothing was initialised, there
 * is no job to abort: a usage error); ODL_E_NCCL (an NCCL call failed, or CUDA with world size > 1 in a
 * build without NCCL), ODL_E_MPI, ODL_E_CUDA, ODL_E_NODEV, ODL_E_TIMEOUT,
 * ODL_E_CONFIG (environment and MPI disagree on rank/size). On error *out is NULL and MPI, if this call
 * initialised it, is still initialised so that the caller can odl_comm_abort_job or MPI_Finalize via
 * odl_comm_finalize(NULL). */
ODL_API odl_status odl_comm_init(const odl_launch_info *li, const odl_comm_options *opt, odl_comm **out);

/* Tear down: wait for pending collectives, destroy the NCCL communicator, stop the watchdog, free, and
 * MPI_Finalize if odl_comm_init initialised MPI. c may be NULL (then only the MPI_Finalize part). */
ODL_API odl_status odl_comm_finalize(odl_comm *c);

/* End every rank of the job now: log "rank R (host H): <message>" as an error and MPI_Abort with
 * exit_code (exit(exit_code) in a local group). For programs' main() after a rank failed while others
 * may be waiting in a collective; never returns. c may be NULL. */
ODL_API void odl_comm_abort_job(odl_comm *c, int exit_code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4), noreturn))
#endif
    ;

ODL_API int odl_comm_rank(const odl_comm *c);
ODL_API int odl_comm_size(const odl_comm *c);
ODL_API int odl_comm_local_rank(const odl_comm *c);
ODL_API int odl_comm_local_size(const odl_comm *c);
ODL_API odl_comm_backend odl_comm_get_backend(const odl_comm *c);
ODL_API const char *odl_comm_backend_name(odl_comm_backend b); /* "local", "mpi", "nccl" */
/* The device whose memory the collectives take (cpu, or the rank's GPU). */
ODL_API odl_device odl_comm_device(const odl_comm *c);
/* Host name of this rank (for messages). */
ODL_API const char *odl_comm_host(const odl_comm *c);
/* What the rank does in collectives, for heartbeats (any thread): *seq = collectives issued so far,
 * what = the host collective it waits in now ("MPI_Allreduce #1842 of 8 doubles") or "" (cap bytes).
 * c NULL (one process): 0 and "". */
ODL_API void odl_comm_activity(odl_comm *c, uint64_t *seq, char *what, size_t cap);

/* In-place sum over ranks of count float32 values at buf (memory of odl_comm_device). NCCL: ordered
 * on the current stream as described at the top; MPI: blocking MPI_Allreduce (split into chunks of
 * < 2^31 elements). count 0 is a no-op. Errors: ODL_E_INVAL (NULL buf with count > 0, count < 0),
 * ODL_E_MPI / ODL_E_NCCL / ODL_E_CUDA naming the call, the rank and the size. */
ODL_API odl_status odl_comm_allreduce_sum(odl_comm *c, float *buf, int64_t count);
/* Copy nbytes at buf on rank `root` to buf on every rank (memory of odl_comm_device; same ordering).
 * Errors: as allreduce, and ODL_E_INVAL for a root outside [0, size). */
ODL_API odl_status odl_comm_broadcast(odl_comm *c, void *buf, size_t nbytes, int root);
/* Every rank waits until all have reached it (and, for NCCL, until this rank's communication stream
 * is idle). */
ODL_API odl_status odl_comm_barrier(odl_comm *c);
/* The host waits for every collective this rank has enqueued. */
ODL_API odl_status odl_comm_synchronize(odl_comm *c);

/* Sum n host doubles over ranks, in place (MPI; a no-op in a local group). Blocking. */
ODL_API odl_status odl_comm_allreduce_host_f64(odl_comm *c, double *v, int n);
/* Every rank's n host int64 values, gathered: out[r * n + i] = value i of rank r (out has size*n). */
ODL_API odl_status odl_comm_allgather_host_i64(odl_comm *c, const int64_t *v, int n, int64_t *out);
/* Every rank's nbytes host bytes, concatenated in rank order on `root`: there *out receives a malloc'd
 * buffer (free it) and *total (may be NULL) its size; on other ranks *out is NULL. Collective (an
 * allgather of the sizes, then MPI_Gatherv); a local group copies. At most 2^31 - 1 bytes in all.
 * Errors: ODL_E_INVAL, ODL_E_NOMEM, ODL_E_MPI naming the rank. */
ODL_API odl_status odl_comm_gather_host_bytes(odl_comm *c, const void *buf, size_t nbytes, int root, void **out, size_t *total);
/* Collective agreement on a step every rank has done: returns ODL_OK on all ranks when local is ODL_OK
 * on all ranks; otherwise, on every rank, an error with the first failing rank's code and message:
 * "<what> failed on rank 1 (and 2 more ranks): <rank 1's message>" (the lowest failing rank's message
 * names its host when the failing call did). In a local group: local, with that prefix on failure. */
ODL_API odl_status odl_comm_agree(odl_comm *c, odl_status local, const char *what);

/* ------------------------------------------------------------------ data parallelism over a network */

/* Copy every parameter of net (and, when opt is not NULL, every optimiser state tensor) from rank root
 * to all ranks. Collective; the same network on every rank. Errors: as odl_comm_broadcast. */
ODL_API odl_status odl_comm_broadcast_net(odl_comm *c, odl_net *net, odl_optim *opt, int root);
/* A 64-bit FNV-1a hash of the bytes of every parameter (copied to the host), gathered over ranks:
 * ODL_OK when all ranks hold bitwise identical parameters; otherwise ODL_E_INTERNAL naming the ranks
 * that differ from rank 0 and the first differing parameter's name. Collective. */
ODL_API odl_status odl_comm_check_net_equal(odl_comm *c, const odl_net *net);

/* Gradient buckets, as PyTorch DDP: parameters are assigned to buckets of at most bucket_mb MiB in
 * reverse order (the order backward produces their gradients; a parameter larger than a bucket gets
 * its own). A bucket is reduced (summed, in place; the loss scaling local/global count of the training
 * loop makes the sum the gradient of the global mean) as soon as all of its parameters are marked
 * ready; on CUDA it runs on the communication stream, overlapped with the rest of backward. A bucket of
 * one parameter is reduced in place in its gradient; others are packed into a flat buffer (device
 * memory from the pool), reduced and unpacked on the communication stream. */
typedef struct odl_grad_buckets odl_grad_buckets;

/* Errors: ODL_E_INVAL (bucket_mb <= 0, a parameter not float32 on the comm's device, a net with no
 * parameters), ODL_E_NOMEM. */
ODL_API odl_status odl_grad_buckets_create(odl_comm *c, odl_net *net, double bucket_mb, odl_grad_buckets **out);
ODL_API void odl_grad_buckets_free(odl_grad_buckets *g);
ODL_API int odl_grad_buckets_count(const odl_grad_buckets *g);
/* Bucket index of parameter i and the bytes of bucket b (for logs and tests). */
ODL_API int odl_grad_buckets_of_param(const odl_grad_buckets *g, int param_index);
ODL_API size_t odl_grad_buckets_bytes(const odl_grad_buckets *g, int bucket);
/* Parameter param_index's gradient is final for this step (its producing work is enqueued on the
 * current stream). Launches its bucket when that was the bucket's last pending parameter.
 * Errors: ODL_E_INVAL (index out of range, or marked twice in one step), collective errors. */
ODL_API odl_status odl_grad_buckets_mark_ready(odl_grad_buckets *g, int param_index);
/* End the step: mark every parameter not yet marked (in reverse order, launching their buckets), then
 * order the current stream after all reductions (CUDA) / return when they are done (CPU), and reset
 * for the next step. After it every rank's gradients hold the sum over ranks. */
ODL_API odl_status odl_grad_buckets_finish(odl_grad_buckets *g);
/* CUDA graphs of a training step (odl/graph.h): mark_ready and finish may run while the current stream
 * is captured, and then queue their copies and NCCL AllReduces into the graph. capturable: 1 when they
 * can be (NCCL 2.9 or later with a blocking communicator, or one rank), else 0 and the reason in why.
 * replayed: after each replay of a captured step, what finish does on the host for a step that ran
 * (the step count of messages, one watchdog entry on the current stream for the step's collectives).
 * NULL g: capturable 1. Errors: ODL_E_INVAL, ODL_E_CUDA. */
ODL_API int odl_grad_buckets_capturable(const odl_grad_buckets *g, char *why, size_t cap);
ODL_API odl_status odl_grad_buckets_replayed(odl_grad_buckets *g);

#ifdef __cplusplus
}
#endif
#endif
