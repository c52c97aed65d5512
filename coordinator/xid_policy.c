/* What a rank's Xid report means to the coordinator (docs/health.md "Fencing", docs/coordinator.md "GPU
 * health"): it is counted for /metrics; a node-fatal one records the node in the job's persistent fence
 * list (health/fence_list.c, DIR/fence.json), and the supervisor (supervise.c) then has every rank
 * checkpoint at the next step boundary and stop, and relaunches the job without the node
 * (launch_args.c); an application one restarts the job without fencing, unless the node's application
 * Xids reach escalate_after (xid_history.c). Only an operator lifts a fence (odl_health fence lift).
 * This file decides and records; it acts on the job through nothing. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coordinator/coord.h"
#include "odl/env.h"
#include "odl/health.h"
#include "odl/log.h"

static void xid_count(coord *c, const coord_rank *r, const Odl__XidReport *x) {
    for (int i = 0; i < c->n_xids; i++) {
        coord_xid *e = &c->xids[i];
        if (e->xid == (int)x->xid && !strcmp(e->node, r->node) && !strcmp(e->pci, x->pci_bus_id)) {
            e->count++;
            return;
        }
    }
    if (c->n_xids == COORD_MAX_XIDS) return; /* bounded: a client cannot grow the coordinator */
    coord_xid *e = &c->xids[c->n_xids++];
    snprintf(e->node, sizeof e->node, "%s", r->node);
    snprintf(e->pci, sizeof e->pci, "%s", x->pci_bus_id);
    snprintf(e->uuid, sizeof e->uuid, "%s", r->gpu_uuid);
    e->xid = (int)x->xid;
    e->cls = (int)x->xid_class;
    e->count = 1;
}

/* reason: NULL for a node-fatal Xid; an escalation's own (codes and count). */
static odl_status fence_node(coord *c, const coord_rank *r, const Odl__XidReport *x, const char *reason, int *added) {
    odl_fence_list l;
    ODL_CHECK(odl_fence_list_load(&l, c->o.job_dir));
    odl_fence f;
    memset(&f, 0, sizeof f);
    snprintf(f.node, sizeof f.node, "%s", r->node);
    f.xid = (int)x->xid;
    snprintf(f.gpu, sizeof f.gpu, "%s", x->pci_bus_id);
    f.time = (int64_t)time(NULL);
    f.generation = (int)c->generation;
    char code[16];
    if (reason) snprintf(f.reason, sizeof f.reason, "%s", reason);
    else /* drain adds the generation */
        snprintf(f.reason, sizeof f.reason, "odl: Xid %s on %s", odl_xid_code_str((int)x->xid, code), x->pci_bus_id);
    odl_status s = odl_fence_add(&l, &f, added);
    odl_fence_list_free(&l);
    return s;
}

/* 1 when this application Xid makes the node's count reach the table's escalate_after within
 * escalate_window_s (the worker classifier's rule, health/xid.c, counted across generations here);
 * reason then names the escalation, the codes and the count for the fence entry. */
static int escalates(coord *c, const coord_rank *r, const Odl__XidReport *x, char *reason, size_t cap) {
    odl_xid_table t;
    odl_xid_table_defaults(&t);
    if (odl_env_is_set(ODL_ENV_HEALTH_XID_TABLE) && odl_xid_table_load_yaml(&t, odl_env_str(ODL_ENV_HEALTH_XID_TABLE)) != ODL_OK) {
        ODL_LOG_ERROR("Xid table: %s; using the defaults", odl_error_msg());
        odl_xid_table_defaults(&t);
    }
    int n = 0;
    char codes[96];
    if (coord_xid_history_add(c->o.job_dir, r->node, (int)x->xid, &t, &n, codes, sizeof codes) != ODL_OK) {
        ODL_LOG_ERROR("application Xid history of node %s: %s", r->node, odl_error_msg()); /* the restart still holds */
        return 0;
    }
    if (t.escalate_after <= 0 || n < t.escalate_after) return 0;
    snprintf(reason, cap, "odl: escalated: %d application Xids (%s) within %.0f s, last on %s", n, codes,
             t.escalate_window_s, x->pci_bus_id);
    ODL_LOG_WARN("node %s: %d application Xids (%s) within %.0f s (escalate_after %d): fencing it", r->node, n, codes,
                 t.escalate_window_s, t.escalate_after);
    return 1;
}

coord_xid_decision coord_xid_decide(coord *c, int rank, const Odl__XidReport *x, char *why, size_t cap) {
    coord_rank *r = &c->ranks[rank];
    why[0] = '\0';
    xid_count(c, r, x);
    const char *cls = x->xid_class == ODL_XID_NODE_FATAL    ? "node-fatal"
                      : x->xid_class == ODL_XID_APPLICATION ? "application"
                                                             : "ignored";
    char code[16];
    odl_xid_code_str((int)x->xid, code); /* "bus_lost" for a lost GPU or a failing NVML call */
    ODL_LOG_WARN("rank %d (node %s) reports %s Xid %s on %s: %s", rank, r->node, cls, code, x->pci_bus_id, x->detail);
    const int running = c->state == JOB_RUNNING;
    char reason[160] = "";
    if (x->xid_class == ODL_XID_APPLICATION) {
        if (!running) return COORD_XID_NONE; /* already stopping or failing: that restart is under way */
        if (!escalates(c, r, x, reason, sizeof reason)) {
            snprintf(why, cap, "rank %d (node %s) saw application Xid %s on %s: restarting the job without fencing", rank,
                     r->node, code, x->pci_bus_id);
            return COORD_XID_RESTART;
        }
    } else if (x->xid_class != ODL_XID_NODE_FATAL) {
        return COORD_XID_NONE;
    }
    /* A node-fatal finding fences its node whatever the job's state: a second node that fails while the
     * first one's stop is under way must not be relaunched onto. */
    int added = 0;
    if (fence_node(c, r, x, reason[0] ? reason : NULL, &added) != ODL_OK) {
        /* Without a record the relaunch could land on the node again: fail loudly, keep the job's state. */
        ODL_LOG_ERROR("cannot fence node %s: %s", r->node, odl_error_msg());
        snprintf(why, cap, "node-fatal Xid %s on node %s could not be recorded in the fence list", code, r->node);
        return COORD_XID_UNRECORDED;
    }
    if (!running) {
        ODL_LOG_WARN("node %s %s (Xid %s on %s, generation %" PRIu64 "): the job is already %s; its relaunch leaves "
                     "the node out", r->node, added ? "fenced" : "was fenced already", code, x->pci_bus_id, c->generation,
                     c->state == JOB_STOPPING ? "stopping" : "failing");
        return COORD_XID_FENCED_ALSO;
    }
    ODL_LOG_WARN("node %s %s (Xid %s on %s, generation %" PRIu64 "): checkpointing at the next step boundary, then "
                 "relaunching without it", r->node, added ? "fenced" : "was fenced already", code, x->pci_bus_id,
                 c->generation);
    return COORD_XID_FENCED;
}
