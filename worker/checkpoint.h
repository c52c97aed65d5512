/* Checkpointing of a training run (DESIGN.md "Checkpoints", docs/checkpoint_format.md): periodic,
 * asynchronous, crash-safe HDF5 checkpoints with a manifest and retention, and resume.
 * Implemented in worker/checkpoint.c on top of odl/h5io.h. */
#ifndef ODL_WORKER_CHECKPOINT_H
#define ODL_WORKER_CHECKPOINT_H

#include "odl/config.h"
#include "odl/nn.h"
#include "worker/train.h"

typedef struct odl_ckpt_session odl_ckpt_session;

/* From cfg->checkpoint (dir, every, keep, resume). *out is NULL when checkpoints are off and no
 * resume is asked. rank 0 writes; every rank reads. Errors: a missing or unwritable directory, etc. */
odl_status odl_ckpt_session_start(odl_ckpt_session **out, const odl_config *cfg, int rank, int world_size);
/* Resume (checkpoint.resume = auto|PATH): load parameters, optimiser state and *st; a no-op returning
 * ODL_OK with *resumed = 0 when there is nothing to resume (and says so in the log). */
odl_status odl_ckpt_session_restore(odl_ckpt_session *s, odl_net *net, odl_optim *opt, odl_train_state *st,
                                    int *resumed);
/* 1 when a checkpoint is due after the step that brought the state to `st` (checkpoint.every). */
int odl_ckpt_session_due(const odl_ckpt_session *s, const odl_train_state *st);
/* Take a checkpoint: copies the state off the device now, writes it on a writer thread. */
odl_status odl_ckpt_session_save(odl_ckpt_session *s, const odl_config *cfg, const odl_net *net,
                                 const odl_optim *opt, const odl_train_state *st);
/* Observer of checkpoint writes, one per process (the coordinator client, worker/coord.c): called on
 * the writer thread when a write starts (begin = 1) and when it has ended (begin = 0, with the file's
 * path, bytes, milliseconds and status; error is the message when status != ODL_OK). NULL removes it. */
typedef void (*odl_ckpt_write_observer)(void *ctx, int begin, const odl_train_state *st, const char *path,
                                        size_t bytes, double ms, odl_status status, const char *error);
void odl_ckpt_set_write_observer(odl_ckpt_write_observer fn, void *ctx);
/* Wait for pending writes and free the session (NULL is fine). Returns the first write error. */
odl_status odl_ckpt_session_finish(odl_ckpt_session *s);

#endif
