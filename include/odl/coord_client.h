/* The worker's side of the coordinator (docs/coordinator.md): connect, prove the job secret, register,
 * then a thread sends heartbeats (a few a second) and receives the coordinator's commands. Part of the
 * comm layer; odl_worker uses it through worker/coord.c. */
#ifndef ODL_COORD_CLIENT_H
#define ODL_COORD_CLIENT_H

#include <inttypes.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "odl/api.h"
#include "odl/status.h"

typedef struct odl_coord_client odl_coord_client;

typedef struct odl_coord_hello {
    int rank, world_size;
    uint64_t generation;
    char node[64];
    uint32_t pid;
    char gpu_uuid[64], pci_bus_id[32]; /* "" on the CPU */
    char gpu_model[96];                /* NVML's name of the GPU, "" without NVML */
    int gpu_index;                     /* NVML's index of the GPU on its node, -1 unknown */
    uint64_t seed;                     /* the worker's config seed */
} odl_coord_hello;

typedef struct odl_coord_welcome {
    uint64_t generation;
    double heartbeat_s;
    int64_t checkpoint_every;       /* 0: the worker's own */
    char checkpoint_dir[PATH_MAX];  /* DIR/checkpoints */
    char resume_path[PATH_MAX];     /* the last committed checkpoint, "" for none */
    int have_plan;                  /* the dataset plan below holds */
    uint64_t seed;
    int64_t epoch, cursor, step;
} odl_coord_welcome;

typedef struct odl_coord_client_cbs {
    void *ctx;
    /* Heartbeat thread: the collective sequence number and what the rank waits in ("" when not inside a
     * collective). May be NULL. */
    void (*activity)(void *ctx, uint64_t *seq, char *what, size_t cap);
    /* Client thread, once: the connection to the coordinator is gone or it told this rank to stop. The
     * worker ends itself (its job is being relaunched without it). */
    void (*lost)(void *ctx, const char *why);
} odl_coord_client_cbs;

/* Flags of odl_coord_client_step_request. */
#define ODL_COORD_CHECKPOINT 1
#define ODL_COORD_STOP 2

/* Connect to addr ("host:port"), prove the secret (key file, comm/coord_wire.h), register as h, and
 * start the heartbeat thread. addr, secret_file and h are read during the call only; *cbs is copied, and
 * cbs->ctx must stay valid until odl_coord_client_close (the client thread calls back with it). Errors: ODL_E_IO (cannot connect, the connection broke), ODL_E_TIMEOUT
 * (no answer in 10 s), ODL_E_INVAL (refused: the message has the coordinator's reason). */
ODL_API odl_status odl_coord_client_connect(const char *addr, const char *secret_file, const odl_coord_hello *h,
                                    const odl_coord_client_cbs *cbs, odl_coord_welcome *w, odl_coord_client **out);
/* Training thread, after every step: where this rank stands (sent with the next heartbeat). */
ODL_API void odl_coord_client_progress(odl_coord_client *c, int64_t step, int64_t epoch, int64_t cursor, double samples_per_s);
/* Training thread, at the boundary after `step`: ODL_COORD_CHECKPOINT (and ODL_COORD_STOP) when the
 * coordinator asked for a checkpoint after exactly this step. */
ODL_API int odl_coord_client_step_request(odl_coord_client *c, int64_t step);
/* Checkpoint writer: a write starts (on = 1) or ends (on = 0); a long write is not a hang. */
ODL_API void odl_coord_client_ckpt_writing(odl_coord_client *c, int on);
/* Training thread: evaluation of the test set starts (on = 1) or ends (on = 0); a long evaluation on
 * a slow CPU, while the other ranks wait in the next collective, is not a hang. */
ODL_API void odl_coord_client_evaluating(odl_coord_client *c, int on);
/* Checkpoint writer (rank 0): the write of `step` ended; the coordinator commits it only when ok, then
 * writes the checkpoint directory's manifest and keeps the newest `keep` (checkpoint.keep). */
ODL_API void odl_coord_client_ckpt_written(odl_coord_client *c, int64_t step, int64_t epoch, int64_t cursor, const char *path,
                                   uint64_t bytes, double write_ms, int ok, const char *error, int64_t keep);
/* GPU telemetry of this rank's GPU (odl/health.h's sample: ODL_HEALTH_NA where NVML could not read), sent
 * with the heartbeats; NULL: none (the CPU, no NVML). */
struct odl_gpu_sample;
ODL_API void odl_coord_client_gpu(odl_coord_client *c, const struct odl_gpu_sample *g);
/* Report an Xid seen by this rank's GPU-health monitor (xid_class: odl_xid_class of odl/health.h, 1
 * application, 2 node-fatal); the coordinator decides what follows (docs/health.md "Fencing"). */
ODL_API void odl_coord_client_xid(odl_coord_client *c, int xid, int xid_class, const char *pci_bus_id, const char *detail);
/* Evaluation work queue (docs/coordinator.md "Evaluation work queue"): the name of chunk K's results in
 * the queue's folder (printf format, an int64_t), and one answer to a request. */
#define ODL_COORD_CHUNK_FILE "chunk-%06" PRId64 ".bin"
typedef struct odl_coord_work {
    int64_t chunk;          /* -1: none now (ask again after retry_ms) */
    int64_t first, count;   /* the chunk's images [first, first + count) of the evaluation order */
    int64_t n_chunks;
    int backup;             /* a copy of a straggler's chunk: the first result wins */
    int finished;           /* every chunk is done */
    unsigned retry_ms;
    char dir[PATH_MAX];     /* where the chunk results go (DIR/eval) */
    char error[1024];       /* refused (e.g. the job directory holds another evaluation): stop */
} odl_coord_work;
/* Evaluation thread: ask for a chunk of the evaluation described by key (its settings, the same on
 * every rank and every relaunch of the job) of n_items images in chunks of chunk_items; blocks for the
 * answer. Errors: ODL_E_IO (the connection broke), ODL_E_TIMEOUT (no answer in 60 s). A refusal is not
 * an error: out->error says why. */
ODL_API odl_status odl_coord_client_work_request(odl_coord_client *c, const char *key, int64_t n_items, int64_t chunk_items,
                                                 odl_coord_work *out);
/* Evaluation thread: chunk's results are in its file (kept = 0: the file was already there, another
 * rank's result won). Errors: ODL_E_IO. */
ODL_API odl_status odl_coord_client_work_done(odl_coord_client *c, int64_t chunk, int kept);
/* Stop the thread, say goodbye with status (0: training finished), close. NULL is fine. */
ODL_API void odl_coord_client_close(odl_coord_client *c, int status);
/* The same with the rank's error message (status != 0), which the coordinator logs with the failure: the
 * rank's own stderr may not get through its launcher before the job is killed. why may be NULL. */
ODL_API void odl_coord_client_close_why(odl_coord_client *c, int status, const char *why);

#endif
