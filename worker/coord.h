/* odl_worker under odl_coordinator (docs/coordinator.md "Worker"): registration, heartbeats, the
 * coordinator's checkpoint decisions and dataset plan, and ODL_FAULT injection, as training hooks.
 * A worker started without a coordinator (no ODL_COORD_ADDR) and without ODL_FAULT is untouched. */
#ifndef ODL_WORKER_COORD_H
#define ODL_WORKER_COORD_H

#include "odl/comm.h"
#include "worker/config.h"
#include "worker/train.h"

/* Exit status of a worker whose coordinator went away or ended it (its job is being relaunched). */
#define ODL_WORKER_EXIT_COORD_LOST 86

typedef struct odl_worker_coord odl_worker_coord;

/* Reads the environment (ODL_COORD_ADDR, ODL_COORD_SECRET_FILE, ODL_COORD_GENERATION, ODL_FAULT; the
 * one place the worker reads them), registers rank of world with the coordinator if one is named,
 * and applies its decisions to cfg: checkpoint.dir (DIR/checkpoints unless set), checkpoint.every
 * (when the coordinator sets it), checkpoint.resume (the last committed checkpoint, else auto).
 * *out is NULL when there is neither a coordinator nor a fault to inject. comm may be NULL (one
 * process). Errors: a bad ODL_FAULT, an unreachable coordinator, a refusal (its reason). */
odl_status odl_worker_coord_start(odl_worker_coord **out, odl_config *cfg, int rank, int world_size, odl_comm *comm);
/* For odl_worker --task=eval: the same environment and registration, without a training config (the
 * Hello's seed is 0). *out is NULL without a coordinator and without ODL_FAULT. */
odl_status odl_worker_coord_start_eval(odl_worker_coord **out, int rank, int world_size, odl_comm *comm);
/* w's coordinator client (NULL: none, or w NULL) and its ODL_FAULT plan (NULL when w is NULL). */
struct odl_coord_client *odl_worker_coord_client_of(const odl_worker_coord *w);
struct odl_fault_plan;
const struct odl_fault_plan *odl_worker_coord_faults(const odl_worker_coord *w);
/* The error that ends this rank, sent with the goodbye so that the coordinator's log names it (NULL w:
 * nothing). */
void odl_worker_coord_fail(odl_worker_coord *w, const char *why);
/* Put the hooks in front of opts->hooks (worker/hook_chain.h: those run first) and hand the run the
 * coordinator client and rank 0's checkpoint observer (opts->coord, opts->ckpt_observer). NULL w:
 * nothing. */
void odl_worker_coord_install(odl_worker_coord *w, odl_train_opts *opts);
/* Restore opts->hooks (and clear what install set; opts NULL after an evaluation, which installs
 * nothing), say goodbye with status (0: training finished) and free w (NULL is fine). */
void odl_worker_coord_finish(odl_worker_coord *w, odl_train_opts *opts, int status);

#endif
