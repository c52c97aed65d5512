/* Fault injection for tests and drills (docs/coordinator.md "Fault injection"): ODL_FAULT in a
 * worker's environment, e.g.
 *   ODL_FAULT=kill@rank=1,step=15   that rank SIGKILLs itself after step 15
 *   ODL_FAULT=hang@rank=1,step=15   it stops inside its next collective, before taking part in it
 *                                    (sleeps there; its heartbeat thread goes on, so only the
 *                                    coordinator's progress check and the collective watchdog see it;
 *                                    a step with no collective stops it at the step boundary)
 *   ODL_FAULT=exit@rank=1,step=15   it exits with status 3 (ODL_FAULT_EXIT_STATUS)
 *   ODL_FAULT=stop@rank=1,step=15   it sends itself SIGSTOP (the whole process stops, heartbeats too)
 *   ODL_FAULT=slow@rank=0,step=0,ms=50  a straggler: from step 0 on it sleeps 50 ms after every step
 *                                    (not once: it applies to every run)
 * Several faults may be given, separated by ';'. Each fires once per job directory: a marker file
 * DIR/fault-<action>-rank<R>-step<S> (DIR = ODL_JOB_DIR, set by odl_coordinator) is created with
 * O_EXCL before it fires, so a relaunched job does not repeat it. Without ODL_JOB_DIR it fires every
 * run.
 *   ODL_FAULT=xid79@rank=1,step=10  an injected Xid: the GPU-health layer (health/, docs/health.md) writes
 *                                    that driver line into the rank's kernel-log source at that step
 * One parser (core/fault.c, odl_fault_parse) serves every kind: odl_fault_after_step (core/fault.c)
 * fires the process faults, health/fault_xid.c takes the xid entries. A new kind adds a row to
 * k_fault_actions in core/fault.c and a case where it is acted on. */
#ifndef ODL_FAULT_H
#define ODL_FAULT_H

#include <stdint.h>

#include "odl/api.h"
#include "odl/status.h"

#define ODL_FAULT_MAX 8
#define ODL_FAULT_EXIT_STATUS 3

typedef enum odl_fault_action {
    ODL_FAULT_KILL = 1,
    ODL_FAULT_HANG,
    ODL_FAULT_EXIT,
    ODL_FAULT_SLOW,
    ODL_FAULT_XID, /* xidNN@: acted on by the GPU-health layer, not by odl_fault_after_step */
    ODL_FAULT_STOP, /* stop@: SIGSTOP (no heartbeats either, unlike hang@) */
} odl_fault_action;

typedef struct odl_fault {
    odl_fault_action action;
    char name[16]; /* the action as written: "kill", "hang", ... */
    int rank;      /* -1: every rank */
    int64_t step;
    int64_t ms; /* slow@ */
    int xid;    /* xidNN@: the Xid code NN (1..100000) */
} odl_fault;

typedef struct odl_fault_plan {
    int n;
    odl_fault f[ODL_FAULT_MAX];
} odl_fault_plan;

/* Parse "ACTION@rank=R,step=S[;ACTION@...]" (keys in any order; rank optional = every rank; ACTION
 * one of kill, hang, exit, slow, stop, xidNN). A step is an optimiser step in training and one batch
 * of a rank in odl_worker --task=eval. Pure: no environment, no files.
 * Errors: ODL_E_CONFIG with the offending text. An empty or NULL text gives n = 0. */
ODL_API odl_status odl_fault_parse(const char *text, odl_fault_plan *out);
/* Read ODL_FAULT once (the worker calls it at start). */
ODL_API odl_status odl_fault_from_env(odl_fault_plan *out);
/* After `step` of `rank`: fire the faults due, each once per job directory. kill@ and exit@ do not
 * return; hang@ is armed for the rank's next collective (odl_fault_collective), or stops here at the
 * next step boundary if no collective came in between. */
ODL_API void odl_fault_after_step(const odl_fault_plan *p, int rank, int64_t step);
/* Called by the process group (comm/) on entering every collective, before the rank takes part:
 * never returns while a hang@ is armed, otherwise does nothing. */
ODL_API void odl_fault_collective(void);
/* 1 when fault f has not fired yet for this rank in this job (ODL_JOB_DIR; it is marked there with an
 * O_EXCL file, so a relaunched generation meets a healthy machine), 0 when it has; 1 without ODL_JOB_DIR. */
ODL_API int odl_fault_claim(const odl_fault *f, int rank);

#endif
