/* Checkpointing of a training run (DESIGN.md "Checkpoints", docs/checkpoints.md, docs/checkpoint_format.md):
 * periodic, asynchronous, crash-safe HDF5 checkpoints with a manifest and retention (or, supervised,
 * reported for the coordinator to commit), and resume.
 * Implemented in checkpoint/session.c on top of odl/h5io.h and odl/ckpt.h. */
#ifndef ODL_CKPT_SESSION_H
#define ODL_CKPT_SESSION_H

#include "odl/api.h"
#include <stddef.h>
#include <stdint.h>

#include "odl/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Where training stands: what a checkpoint must hold besides parameters and optimiser state. */
typedef struct odl_train_state {
    int64_t epoch;  /* completed epochs (0-based index of the current one) */
    int64_t step;   /* optimiser steps done, in total */
    int64_t cursor; /* global sample cursor inside the current epoch */
    double epoch_loss_sum;  /* sum over the epoch's samples so far of the loss (all ranks) */
    int64_t epoch_samples;  /* samples of the epoch so far (all ranks) */
} odl_train_state;

typedef struct odl_ckpt_session odl_ckpt_session;

/* Observer of a session's checkpoint writes (odl_ckpt_session_opts.observer; the coordinator glue,
 * worker/coord.c, reports through it): called on the writer thread when a write starts (begin = 1) and
 * when it has ended (begin = 0, with the file's path, bytes, milliseconds and status; error is the
 * message when status != ODL_OK). */
typedef void (*odl_ckpt_write_observer)(void *ctx, int begin, const odl_train_state *st, const char *path,
                                        size_t bytes, double ms, odl_status status, const char *error);

/* What a session needs from the run (the training program fills it from its config keys
 * checkpoint.dir/every/keep/resume, seed, train.*, model and the effective config). Strings are copied. */
typedef struct odl_ckpt_session_opts {
    const char *dir;         /* checkpoint directory; "" = none */
    int64_t every;           /* a checkpoint every N optimiser steps; 0 = no saving */
    int64_t keep;            /* newest complete checkpoints kept (>= 1) */
    const char *resume;      /* "" = start fresh, "auto" = the newest good checkpoint in dir, else a file */
    const char *model;       /* model name stored in the file */
    int64_t seed, max_train_samples, batch; /* a resumed run must match these */
    int optimizer;           /* odl_optim_type */
    const char *config_yaml; /* the effective config, stored in every checkpoint ("" = none) */
    /* 0 (unsupervised): after each write the writer commits it itself: manifest.json and retention of
     * `keep` (odl_ckpt_commit, odl/ckpt.h). 1: manifest and retention are someone else's (a worker
     * under odl_coordinator, docs/coordinator.md "Checkpoints"): the writer only writes ckpt-<step>.h5
     * crash-safely and reports it to the write observer (below); it never writes manifest.json nor
     * deletes a checkpoint. */
    int commit_elsewhere;
    /* NULL: none. Kept by the session (fixed before its writer thread starts, so the thread reads it
     * without a lock); observer_ctx must live until odl_ckpt_session_finish. */
    odl_ckpt_write_observer observer;
    void *observer_ctx;
} odl_ckpt_session_opts;

/* *out is NULL when checkpoints are off and no resume is asked. rank 0 writes; every rank reads.
 * Errors: ODL_E_CONFIG (saving without a directory, a fresh run into a directory that holds
 * checkpoints), ODL_E_NOTFOUND / ODL_E_IO (a missing, unreadable or unwritable directory), ... */
ODL_API odl_status odl_ckpt_session_start(odl_ckpt_session **out, const odl_ckpt_session_opts *o, int rank,
                                          int world_size);
/* Resume (checkpoint.resume = auto|PATH): load parameters, optimiser state and *st; a no-op returning
 * ODL_OK with *resumed = 0 when there is nothing to resume (and says so in the log). */
ODL_API odl_status odl_ckpt_session_restore(odl_ckpt_session *s, odl_net *net, odl_optim *opt, odl_train_state *st,
                                    int *resumed);
/* 1 when a checkpoint is due after the step that brought the state to `st` (checkpoint.every). */
ODL_API int odl_ckpt_session_due(const odl_ckpt_session *s, const odl_train_state *st);
/* Take a checkpoint: copies the state off the device now, writes it on a writer thread. */
ODL_API odl_status odl_ckpt_session_save(odl_ckpt_session *s, const odl_net *net, const odl_optim *opt,
                                         const odl_train_state *st);
/* Wait for pending writes and free the session (NULL is fine). Returns the first write error. */
ODL_API odl_status odl_ckpt_session_finish(odl_ckpt_session *s);

/* Fault-injection point: called on the writer thread for each checkpoint after its data is written and
 * before the commit (fsync, rename), with the step and the final path. A hook that does not return (a
 * test that kills the process there) leaves only a stale "<path>.tmp": the previous checkpoints and the
 * manifest are untouched. A non-zero status fails the write as an I/O error would. NULL removes it.
 * Set it before the first odl_ckpt_session_save. */
typedef odl_status (*odl_ckpt_before_commit_fn)(void *ctx, int64_t step, const char *path);
ODL_API void odl_ckpt_session_set_before_commit(odl_ckpt_session *s, odl_ckpt_before_commit_fn fn, void *ctx);

#ifdef __cplusplus
}
#endif
#endif
