/* The Prometheus text of /metrics (docs/coordinator.md "HTTP", exposition format 0.0.4), rebuilt by the
 * loop on every tick from the coordinator's state; http.c's thread only copies the finished text. The
 * GPU families have dcgm-exporter's names and labels (health/prometheus.c). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <sys/stat.h>
#include <time.h>

#include "coordinator/coord.h"
#include "odl/clock.h"
#include "odl/health.h"
#include "odl/strbuf.h"

/* The entry of (node, pci); k, when given, names its model and NVML index (its rank's Hello). */
static int gpu_entry(odl_gpu_telemetry *t, int *n, const char *node, const char *pci, const char *uuid,
                     const coord_rank *k) {
    for (int i = 0; i < *n; i++)
        if (!strcmp(t[i].hostname, node) && !strcmp(t[i].pci, pci)) return i;
    odl_gpu_telemetry *g = &t[(*n)++];
    odl_gpu_telemetry_clear(g);
    snprintf(g->hostname, sizeof g->hostname, "%s", node);
    snprintf(g->pci, sizeof g->pci, "%s", pci);
    snprintf(g->uuid, sizeof g->uuid, "%s", uuid);
    if (k && k->gpu_index >= 0) {
        g->have_index = 1;
        g->index = k->gpu_index;
    }
    if (k) snprintf(g->name, sizeof g->name, "%s", k->gpu_model);
    return (int)(g - t);
}

/* The GPU part: per GPU the latest sample its rank sent, and the Xid counters, in dcgm-exporter's names
 * (odl_health_prometheus). */
static void gpu_metrics(const coord *c, odl_strbuf *b) {
    int cap = c->world_size + c->n_xids, n = 0;
    if (!cap) return;
    odl_gpu_telemetry *t = calloc((size_t)cap, sizeof *t);
    odl_xid_count *x = calloc((size_t)c->n_xids + 1, sizeof *x);
    if (!t || !x) goto out;
    for (int r = 0; r < c->world_size; r++) {
        const coord_rank *k = &c->ranks[r];
        if (!k->t_join || (!k->has_gpu && !k->pci_bus_id[0])) continue;
        odl_gpu_telemetry *g = &t[gpu_entry(t, &n, k->node, k->pci_bus_id, k->gpu_uuid, k)];
        if (k->has_gpu) odl_gpu_sample_apply(&k->gpu, g);
    }
    for (int i = 0; i < c->n_xids; i++) {
        const coord_xid *e = &c->xids[i];
        x[i].gpu = gpu_entry(t, &n, e->node, e->pci, e->uuid, NULL);
        x[i].xid = e->xid;
        x[i].cls = (odl_xid_class)(e->cls <= ODL_XID_NODE_FATAL ? e->cls : ODL_XID_IGNORE);
        x[i].count = e->count;
        if (e->cls == ODL_XID_NODE_FATAL) t[x[i].gpu].healthy = 0;
    }
    odl_health_prometheus_append(b, t, n, NULL, x, c->n_xids);
out:
    free(t);
    free(x);
}

static void gauge(odl_strbuf *t, const char *name, const char *help, const char *type) {
    odl_strbuf_printf(t, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* The holding fences of DIR/fence.json, which an operator's `odl_health fence lift` changes behind the
 * coordinator's back: read again only when the file's modification time or inode changes (the loop
 * rebuilds the text every tick). The coordinator is one per process, so the cache is too. */
static void fence_metrics(const coord *c, odl_strbuf *t) {
    static struct timespec seen;
    static ino_t seen_ino; /* replaced by rename: a new inode even within one mtime tick */
    static int have, n_fenced;
    static char *cached;
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/fence.json", c->o.job_dir);
    struct stat sb;
    struct timespec m = {0, 0};
    ino_t ino = 0;
    if (stat(path, &sb) == 0) m = sb.st_mtim, ino = sb.st_ino;
    if (!have || m.tv_sec != seen.tv_sec || m.tv_nsec != seen.tv_nsec || ino != seen_ino) {
        odl_strbuf b = ODL_STRBUF_INIT;
        odl_fence_list l;
        n_fenced = 0;
        if (odl_fence_list_load(&l, c->o.job_dir) == ODL_OK) {
            for (int i = 0; i < l.n; i++) {
                const odl_fence *f = &l.items[i];
                if (f->lifted_time) continue;
                char code[16], node[sizeof f->node * 2];
                size_t k = 0;
                for (const char *p = f->node; *p && k + 2 < sizeof node; p++) { /* the text format's escapes */
                    if (*p == '"' || *p == '\\' || *p == '\n') node[k++] = '\\';
                    node[k++] = *p == '\n' ? 'n' : *p;
                }
                node[k] = 0;
                odl_strbuf_printf(&b, "odl_node_fenced{node=\"%s\",xid=\"%s\"} 1\n", node, odl_xid_code_str(f->xid, code));
                n_fenced++;
            }
            odl_fence_list_free(&l);
        } else {
            odl_error_clear();
        }
        free(cached);
        cached = odl_strbuf_take(&b);
        seen = m;
        seen_ino = ino;
        have = 1;
    }
    gauge(t, "odl_fenced_nodes", "Nodes fenced in the job's fence list (DIR/fence.json), lifted ones not counted.",
          "gauge");
    odl_strbuf_printf(t, "odl_fenced_nodes %d\n", n_fenced);
    if (n_fenced && cached) {
        gauge(t, "odl_node_fenced", "1 for each fenced node, with the Xid that fenced it.", "gauge");
        odl_strbuf_printf(t, "%s", cached);
    }
}

void coord_metrics_update(coord *c) {
    odl_strbuf t = ODL_STRBUF_INIT;
    double now = odl_mono_s();
    int alive = 0;
    for (int r = 0; r < c->world_size; r++) alive += c->ranks[r].conn != NULL;
    gauge(&t, "odl_generation", "Job generation (increases on every launch).", "gauge");
    odl_strbuf_printf(&t, "odl_generation %" PRIu64 "\n", c->generation);
    gauge(&t, "odl_world_size", "Ranks of this generation (0 until the first registers).", "gauge");
    odl_strbuf_printf(&t, "odl_world_size %d\n", c->world_size);
    gauge(&t, "odl_ranks_alive", "Ranks registered and connected.", "gauge");
    odl_strbuf_printf(&t, "odl_ranks_alive %d\n", alive);
    gauge(&t, "odl_rank_step", "Optimiser steps done, per rank.", "gauge");
    for (int r = 0; r < c->world_size; r++)
        if (c->ranks[r].t_join) odl_strbuf_printf(&t, "odl_rank_step{rank=\"%d\"} %" PRId64 "\n", r, c->ranks[r].step);
    gauge(&t, "odl_rank_samples_per_second", "Training samples per second, per rank.", "gauge");
    for (int r = 0; r < c->world_size; r++)
        if (c->ranks[r].t_join) odl_strbuf_printf(&t, "odl_rank_samples_per_second{rank=\"%d\"} %.3f\n", r, c->ranks[r].samples_per_s);
    gauge(&t, "odl_rank_heartbeat_age_seconds", "Seconds since the rank's last heartbeat (coordinator clock).", "gauge");
    for (int r = 0; r < c->world_size; r++)
        if (c->ranks[r].conn) odl_strbuf_printf(&t, "odl_rank_heartbeat_age_seconds{rank=\"%d\"} %.3f\n", r, now - c->ranks[r].t_heartbeat);
    gauge(&t, "odl_restarts_total", "Relaunches of the job after a failure.", "counter");
    odl_strbuf_printf(&t, "odl_restarts_total %d\n", c->restarts);
    gauge(&t, "odl_refused_connections_total", "Connections refused, by reason.", "counter");
    odl_strbuf_printf(&t, "odl_refused_connections_total{reason=\"auth\"} %" PRIu64 "\n", c->refused.auth);
    odl_strbuf_printf(&t, "odl_refused_connections_total{reason=\"generation\"} %" PRIu64 "\n", c->refused.generation);
    odl_strbuf_printf(&t, "odl_refused_connections_total{reason=\"duplicate_rank\"} %" PRIu64 "\n", c->refused.duplicate);
    odl_strbuf_printf(&t, "odl_refused_connections_total{reason=\"protocol\"} %" PRIu64 "\n", c->refused.protocol);
    odl_strbuf_printf(&t, "odl_refused_connections_total{reason=\"capacity\"} %" PRIu64 "\n", c->refused.full);
    gauge(&t, "odl_connections", "Open connections on the coordinator's port.", "gauge");
    odl_strbuf_printf(&t, "odl_connections %d\n", c->n_conns);
    gauge(&t, "odl_last_checkpoint_step", "Step of the last committed checkpoint (-1: none).", "gauge");
    odl_strbuf_printf(&t, "odl_last_checkpoint_step %" PRId64 "\n", c->ck.path[0] ? c->ck.step : -1);
    if (c->ck.path[0]) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        gauge(&t, "odl_last_checkpoint_age_seconds", "Seconds since the last checkpoint was committed.", "gauge");
        odl_strbuf_printf(&t, "odl_last_checkpoint_age_seconds %.3f\n", (double)ts.tv_sec + ts.tv_nsec * 1e-9 - c->ck.time);
        gauge(&t, "odl_last_checkpoint_bytes", "Size of the last committed checkpoint.", "gauge");
        odl_strbuf_printf(&t, "odl_last_checkpoint_bytes %" PRIu64 "\n", c->ck.bytes);
        gauge(&t, "odl_last_checkpoint_write_seconds", "Write time of the last committed checkpoint.", "gauge");
        odl_strbuf_printf(&t, "odl_last_checkpoint_write_seconds %.6f\n", c->ck.write_ms / 1000.0);
    }
    fence_metrics(c, &t);
    gpu_metrics(c, &t);
    char *text = odl_strbuf_take(&t);
    if (!text) return; /* out of memory: the last text stays served */
    pthread_mutex_lock(&c->metrics_mu);
    free(c->metrics);
    c->metrics = text;
    pthread_mutex_unlock(&c->metrics_mu);
}
