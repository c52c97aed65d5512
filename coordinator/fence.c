/* GPU health in the coordinator (docs/health.md "Fencing", docs/coordinator.md "GPU health"): a rank's
 * XidReport is counted for /metrics; a node-fatal one records the node in the job's persistent fence
 * list (health/fence.c, DIR/fence.json), asks every rank to checkpoint at the next step boundary and
 * stop, and relaunches the job without the node (an Open MPI hostfile without it, or srun --exclude
 * and one scontrol drain per node); an application one restarts the job without fencing. Only an
 * operator lifts a fence (odl_health fence lift). */
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

void coord_xid_report(coord *c, int rank, const Odl__XidReport *x) {
    coord_rank *r = &c->ranks[rank];
    xid_count(c, r, x);
    const char *cls = x->xid_class == ODL_XID_NODE_FATAL    ? "node-fatal"
                      : x->xid_class == ODL_XID_APPLICATION ? "application"
                                                             : "ignored";
    char code[16];
    odl_xid_code_str((int)x->xid, code); /* "bus_lost" for a lost GPU or a failing NVML call */
    ODL_LOG_WARN("rank %d (node %s) reports %s Xid %s on %s: %s", rank, r->node, cls, code, x->pci_bus_id, x->detail);
    if (c->state != JOB_RUNNING) return; /* already stopping or failing: that decision stands */
    char reason[160] = "";
    if (x->xid_class == ODL_XID_APPLICATION && !escalates(c, r, x, reason, sizeof reason)) {
        coord_job_fail(c, "rank %d (node %s) saw application Xid %s on %s: restarting the job without fencing", rank,
                       r->node, code, x->pci_bus_id);
        return;
    }
    if (x->xid_class != ODL_XID_NODE_FATAL && !reason[0]) return;
    int added = 0;
    if (fence_node(c, r, x, reason[0] ? reason : NULL, &added) != ODL_OK) {
        /* Without a record the relaunch could land on the node again: fail loudly, keep the job's state. */
        ODL_LOG_ERROR("cannot fence node %s: %s", r->node, odl_error_msg());
        coord_job_fail(c, "node-fatal Xid %s on node %s could not be recorded in the fence list", code, r->node);
        return;
    }
    ODL_LOG_WARN("node %s %s (Xid %s on %s, generation %" PRIu64 "): checkpointing at the next step boundary, then "
                 "relaunching without it", r->node, added ? "fenced" : "was fenced already", code, x->pci_bus_id,
                 c->generation);
    if (!c->o.cmd) { /* serve-only: the launcher elsewhere relaunches; fence.json tells it what to leave out */
        ODL_LOG_WARN("serving only (no command): node %s stays in this generation; its launcher must relaunch "
                     "without it (odl_health fence hostfile|exclude --job-dir %s)", r->node, c->o.job_dir);
        return;
    }
    c->fence_relaunch = 1;
    c->state = JOB_STOPPING;
    c->t_stop = coord_now(c);
    coord_request_checkpoint(c, 1);
}

/* ------------------------------------------------------------------ launch arguments */

static int hostfile_slots(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[1024];
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        char *p = line + strspn(line, " \t");
        if (*p == '#' || *p == '\n' || !*p) continue;
        const char *s = strstr(p, "slots=");
        n += s ? atoi(s + 6) : 1;
    }
    fclose(f);
    return n;
}

/* arg with every {name} replaced by its value (malloc'd). */
static char *subst(const char *arg, const char *const *names, const char *const *vals, int n) {
    size_t cap = strlen(arg) + 1;
    for (int i = 0; i < n; i++)
        for (const char *p = strstr(arg, names[i]); p; p = strstr(p + 1, names[i])) cap += strlen(vals[i]);
    char *out = malloc(cap), *o = out;
    if (!out) return NULL;
    for (const char *p = arg; *p;) {
        int hit = -1;
        for (int i = 0; i < n && hit < 0; i++)
            if (!strncmp(p, names[i], strlen(names[i]))) hit = i;
        if (hit < 0) {
            *o++ = *p++;
            continue;
        }
        o += sprintf(o, "%s", vals[hit]);
        p += strlen(names[hit]);
    }
    *o = 0;
    return out;
}

odl_status coord_fence_argv(coord *c, char ***argv_out) {
    *argv_out = NULL;
    size_t n = 0;
    while (c->o.cmd[n]) n++;
    char hostfile[PATH_MAX + 64] = "", np[32] = "", exclude[4096] = "";
    if (c->o.hostfile[0] || c->o.slurm) {
        odl_fence_list l;
        ODL_CHECK(odl_fence_list_load(&l, c->o.job_dir));
        char fenced[1024] = "";
        size_t fl = 0;
        for (int i = 0; i < l.n && fl < sizeof fenced - 140; i++)
            if (!l.items[i].lifted_time) fl += (size_t)snprintf(fenced + fl, sizeof fenced - fl, " %s", l.items[i].node);
        odl_status s = ODL_OK;
        if (c->o.hostfile[0]) {
            int kept = 0;
            snprintf(hostfile, sizeof hostfile, "%s/hosts.%" PRIu64, c->o.job_dir, c->generation);
            s = odl_fence_write_hostfile(&l, c->o.hostfile, hostfile, &kept);
            if (s == ODL_OK) {
                snprintf(np, sizeof np, "%d", hostfile_slots(hostfile));
                ODL_LOG_INFO("generation %" PRIu64 ": hostfile %s: %d host%s, %s slot%s%s%s", c->generation, hostfile,
                             kept, kept == 1 ? "" : "s", np, strcmp(np, "1") ? "s" : "", fl ? "; fenced:" : "", fenced);
            }
        }
        if (s == ODL_OK && c->o.slurm) {
            int issued = 0;
            if (odl_fence_drain(&l, &issued) != ODL_OK) ODL_LOG_ERROR("%s", odl_error_msg()); /* exclusion still holds */
            else if (issued) ODL_LOG_INFO("drained %d fenced node%s with scontrol", issued, issued == 1 ? "" : "s");
            s = odl_fence_srun_exclude(&l, exclude, sizeof exclude);
            if (s == ODL_OK && exclude[0]) ODL_LOG_INFO("generation %" PRIu64 ": srun %s", c->generation, exclude);
        }
        odl_fence_list_free(&l);
        ODL_CHECK(s);
    }
    char **argv = calloc(n + 1, sizeof *argv);
    if (!argv) return ODL_ERR(ODL_E_NOMEM, "arguments");
    /* only the tokens of the options given are replaced; others stay as written */
    const char *names[3], *vals[3];
    int nsub = 0;
    if (c->o.hostfile[0]) {
        names[nsub] = "{hostfile}", vals[nsub++] = hostfile;
        names[nsub] = "{np}", vals[nsub++] = np;
    }
    if (c->o.slurm) names[nsub] = "{exclude}", vals[nsub++] = exclude;
    int k = 0;
    for (size_t i = 0; i < n; i++) {
        /* {exclude} alone with nothing fenced: no argument (srun refuses an empty one) */
        if (c->o.slurm && !strcmp(c->o.cmd[i], "{exclude}") && !exclude[0]) continue;
        argv[k] = subst(c->o.cmd[i], names, vals, nsub);
        if (!argv[k]) {
            coord_fence_argv_free(argv);
            return ODL_ERR(ODL_E_NOMEM, "arguments");
        }
        k++;
    }
    *argv_out = argv;
    return ODL_OK;
}

void coord_fence_argv_free(char **argv) {
    for (size_t i = 0; argv && argv[i]; i++) free(argv[i]);
    free(argv);
}

/* ------------------------------------------------------------------ /metrics */

/* The entry of (node, pci); k, when given, names its model and NVML index (its rank's Hello). */
static int gpu_entry(odl_gpu_telemetry *t, int *n, const char *node, const char *pci, const char *uuid,
                     const coord_rank *k) {
    for (int i = 0; i < *n; i++)
        if (!strcmp(t[i].hostname, node) && !strcmp(t[i].pci, pci)) return i;
    odl_gpu_telemetry *g = &t[(*n)++];
    memset(g, 0, sizeof *g);
    snprintf(g->hostname, sizeof g->hostname, "%s", node);
    snprintf(g->pci, sizeof g->pci, "%s", pci);
    snprintf(g->uuid, sizeof g->uuid, "%s", uuid);
    if (k && k->gpu_index >= 0) {
        g->have_index = 1;
        g->index = k->gpu_index;
    }
    if (k) snprintf(g->name, sizeof g->name, "%s", k->gpu_model);
    double *v = &g->util_gpu_pct;
    for (double *p = v; p <= &g->remap_failed; p++) *p = ODL_HEALTH_NA;
    g->healthy = 1;
    return (int)(g - t);
}

void coord_gpu_metrics(const coord *c, char **text, size_t *len) {
    *text = NULL;
    *len = 0;
    int cap = c->world_size + c->n_xids, n = 0;
    if (!cap) return;
    odl_gpu_telemetry *t = calloc((size_t)cap, sizeof *t);
    odl_xid_count *x = calloc((size_t)c->n_xids + 1, sizeof *x);
    if (!t || !x) goto out;
    for (int r = 0; r < c->world_size; r++) {
        const coord_rank *k = &c->ranks[r];
        if (!k->t_join || (!k->has_gpu && !k->pci_bus_id[0])) continue;
        odl_gpu_telemetry *g = &t[gpu_entry(t, &n, k->node, k->pci_bus_id, k->gpu_uuid, k)];
        if (!k->has_gpu) continue;
        double *dst[] = {&g->util_gpu_pct, &g->mem_used_mib, &g->mem_total_mib, &g->temp_c, &g->power_w, &g->sm_clock_mhz};
        for (int i = 0; i < 6; i++) *dst[i] = isfinite(k->gpu[i]) ? k->gpu[i] : ODL_HEALTH_NA;
    }
    for (int i = 0; i < c->n_xids; i++) {
        const coord_xid *e = &c->xids[i];
        x[i].gpu = gpu_entry(t, &n, e->node, e->pci, e->uuid, NULL);
        x[i].xid = e->xid;
        x[i].cls = (odl_xid_class)(e->cls <= ODL_XID_NODE_FATAL ? e->cls : ODL_XID_IGNORE);
        x[i].count = e->count;
        if (e->cls == ODL_XID_NODE_FATAL) t[x[i].gpu].healthy = 0;
    }
    size_t need = odl_health_prometheus(NULL, 0, t, n, NULL, x, c->n_xids) + 1;
    *text = malloc(need);
    if (*text) *len = odl_health_prometheus(*text, need, t, n, NULL, x, c->n_xids);
out:
    free(t);
    free(x);
}
