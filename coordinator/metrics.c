/* The Prometheus text of /metrics (docs/coordinator.md "HTTP", exposition format 0.0.4), rebuilt by the
 * loop on every tick from the coordinator's state; http.c's thread only copies the finished text. The
 * GPU families have dcgm-exporter's names and labels (health/prometheus.c). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
    gpu_metrics(c, &t);
    char *text = odl_strbuf_take(&t);
    if (!text) return; /* out of memory: the last text stays served */
    pthread_mutex_lock(&c->metrics_mu);
    free(c->metrics);
    c->metrics = text;
    pthread_mutex_unlock(&c->metrics_mu);
}
