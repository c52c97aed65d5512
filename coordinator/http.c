/* Read-only HTTP (libmicrohttpd, its own thread): /healthz and /metrics in the Prometheus text
 * exposition format 0.0.4. The loop rebuilds the metrics text on every tick; the HTTP thread only
 * copies it, so a slow or trickling client never touches the coordinator's state. */
#include <arpa/inet.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "coordinator/coord.h"
#include "odl/health.h"
#include "odl/log.h"

typedef struct text {
    char *s;
    size_t len, cap;
} text;

static void put(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text *t, const char *fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->s ? t->s + t->len : NULL, t->s ? t->cap - t->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) return;
        if (t->s && t->len + (size_t)n < t->cap) {
            t->len += (size_t)n;
            return;
        }
        size_t nc = (t->cap ? t->cap * 2 : 4096) + (size_t)n;
        char *ns = realloc(t->s, nc);
        if (!ns) return;
        t->s = ns;
        t->cap = nc;
    }
}

static void gauge(text *t, const char *name, const char *help, const char *type) {
    put(t, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* The holding fences of DIR/fence.json, which an operator's `odl_health fence lift` changes behind the
 * coordinator's back: read again only when the file's modification time changes (the loop rebuilds the
 * text every tick). The coordinator is one per process, so the cache is too. */
static void fence_metrics(coord *c, text *t) {
    static struct timespec seen;
    static ino_t seen_ino; /* replaced by rename: a new inode even within one mtime tick */
    static int have, n_fenced;
    static text cached;
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/fence.json", c->o.job_dir);
    struct stat sb;
    struct timespec m = {0, 0};
    ino_t ino = 0;
    if (stat(path, &sb) == 0) m = sb.st_mtim, ino = sb.st_ino;
    if (!have || m.tv_sec != seen.tv_sec || m.tv_nsec != seen.tv_nsec || ino != seen_ino) {
        odl_fence_list l;
        cached.len = 0;
        n_fenced = 0;
        if (cached.s) cached.s[0] = 0;
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
                put(&cached, "odl_node_fenced{node=\"%s\",xid=\"%s\"} 1\n", node, odl_xid_code_str(f->xid, code));
                n_fenced++;
            }
            odl_fence_list_free(&l);
        }
        seen = m;
        seen_ino = ino;
        have = 1;
    }
    gauge(t, "odl_fenced_nodes", "Nodes fenced in the job's fence list (DIR/fence.json), lifted ones not counted.",
          "gauge");
    put(t, "odl_fenced_nodes %d\n", n_fenced);
    if (n_fenced) {
        gauge(t, "odl_node_fenced", "1 for each fenced node, with the Xid that fenced it.", "gauge");
        put(t, "%s", cached.s);
    }
}

void coord_metrics_update(coord *c) {
    text t = {0};
    double now = coord_now(c);
    int alive = 0;
    for (int r = 0; r < c->world_size; r++) alive += c->ranks[r].conn != NULL;
    gauge(&t, "odl_generation", "Job generation (increases on every launch).", "gauge");
    put(&t, "odl_generation %" PRIu64 "\n", c->generation);
    gauge(&t, "odl_world_size", "Ranks of this generation (0 until the first registers).", "gauge");
    put(&t, "odl_world_size %d\n", c->world_size);
    gauge(&t, "odl_ranks_alive", "Ranks registered and connected.", "gauge");
    put(&t, "odl_ranks_alive %d\n", alive);
    gauge(&t, "odl_rank_step", "Optimiser steps done, per rank.", "gauge");
    for (int r = 0; r < c->world_size; r++)
        if (c->ranks[r].t_join) put(&t, "odl_rank_step{rank=\"%d\"} %" PRId64 "\n", r, c->ranks[r].step);
    gauge(&t, "odl_rank_samples_per_second", "Training samples per second, per rank.", "gauge");
    for (int r = 0; r < c->world_size; r++)
        if (c->ranks[r].t_join) put(&t, "odl_rank_samples_per_second{rank=\"%d\"} %.3f\n", r, c->ranks[r].samples_per_s);
    gauge(&t, "odl_rank_heartbeat_age_seconds", "Seconds since the rank's last heartbeat (coordinator clock).", "gauge");
    for (int r = 0; r < c->world_size; r++)
        if (c->ranks[r].conn) put(&t, "odl_rank_heartbeat_age_seconds{rank=\"%d\"} %.3f\n", r, now - c->ranks[r].t_heartbeat);
    gauge(&t, "odl_restarts_total", "Relaunches of the job after a failure.", "counter");
    put(&t, "odl_restarts_total %d\n", c->restarts);
    gauge(&t, "odl_refused_connections_total", "Connections refused, by reason.", "counter");
    put(&t, "odl_refused_connections_total{reason=\"auth\"} %" PRIu64 "\n", c->refused_auth);
    put(&t, "odl_refused_connections_total{reason=\"generation\"} %" PRIu64 "\n", c->refused_generation);
    put(&t, "odl_refused_connections_total{reason=\"duplicate_rank\"} %" PRIu64 "\n", c->refused_duplicate);
    put(&t, "odl_refused_connections_total{reason=\"protocol\"} %" PRIu64 "\n", c->refused_protocol);
    put(&t, "odl_refused_connections_total{reason=\"capacity\"} %" PRIu64 "\n", c->refused_full);
    gauge(&t, "odl_connections", "Open connections on the coordinator's port.", "gauge");
    put(&t, "odl_connections %d\n", c->n_conns);
    gauge(&t, "odl_last_checkpoint_step", "Step of the last committed checkpoint (-1: none).", "gauge");
    put(&t, "odl_last_checkpoint_step %" PRId64 "\n", c->ck_path[0] ? c->ck_step : -1);
    if (c->ck_path[0]) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        gauge(&t, "odl_last_checkpoint_age_seconds", "Seconds since the last checkpoint was committed.", "gauge");
        put(&t, "odl_last_checkpoint_age_seconds %.3f\n", (double)ts.tv_sec + ts.tv_nsec * 1e-9 - c->ck_time);
        gauge(&t, "odl_last_checkpoint_bytes", "Size of the last committed checkpoint.", "gauge");
        put(&t, "odl_last_checkpoint_bytes %" PRIu64 "\n", c->ck_bytes);
        gauge(&t, "odl_last_checkpoint_write_seconds", "Write time of the last committed checkpoint.", "gauge");
        put(&t, "odl_last_checkpoint_write_seconds %.6f\n", c->ck_write_ms / 1000.0);
    }
    fence_metrics(c, &t);
    char *gpu;
    size_t gpu_len;
    coord_gpu_metrics(c, &gpu, &gpu_len);
    if (gpu) put(&t, "%s", gpu);
    free(gpu);
    pthread_mutex_lock(&c->metrics_mu);
    free(c->metrics);
    c->metrics = t.s;
    pthread_mutex_unlock(&c->metrics_mu);
}

static enum MHD_Result answer(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                              const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    coord *c = cls;
    (void)version;
    (void)upload;
    (void)con_cls;
    (void)upload_size;
    const char *type = "text/plain; charset=utf-8";
    char *body = NULL;
    unsigned code = MHD_HTTP_OK;
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        code = MHD_HTTP_METHOD_NOT_ALLOWED;
        body = strdup("only GET\n");
    } else if (!strcmp(url, "/healthz")) {
        body = strdup("ok\n");
    } else if (!strcmp(url, "/metrics")) {
        type = "text/plain; version=0.0.4; charset=utf-8";
        pthread_mutex_lock(&c->metrics_mu);
        body = strdup(c->metrics ? c->metrics : "");
        pthread_mutex_unlock(&c->metrics_mu);
    } else {
        code = MHD_HTTP_NOT_FOUND;
        body = strdup("not found (try /metrics or /healthz)\n");
    }
    if (!body) return MHD_NO;
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", type);
    enum MHD_Result ret = MHD_queue_response(conn, code, r);
    MHD_destroy_response(r);
    return ret;
}

odl_status coord_http_start(coord *c) {
    c->http_addr[0] = 0;
    if (c->o.http_port < 0) return ODL_OK;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)c->o.http_port);
    if (inet_pton(AF_INET, c->o.http_host, &a.sin_addr) != 1)
        return ODL_ERR(ODL_E_INVAL, "--http %s: not an IPv4 address", c->o.http_host);
    /* One polling thread (epoll): a client that trickles bytes holds a connection slot until the
     * timeout, never the thread. */
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG, 0, NULL, NULL, answer, c,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&a, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)5,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)512, MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)256,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)32768, MHD_OPTION_END);
    if (!d) return ODL_ERR(ODL_E_IO, "cannot serve HTTP on %s:%d", c->o.http_host, c->o.http_port);
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    int port = info ? info->port : c->o.http_port;
    snprintf(c->http_addr, sizeof c->http_addr, "%s:%d", c->o.http_host, port);
    c->http = d;
    ODL_LOG_INFO("HTTP on http://%s (/metrics, /healthz)", c->http_addr);
    return ODL_OK;
}

void coord_http_stop(coord *c) {
    if (c->http) MHD_stop_daemon(c->http);
    c->http = NULL;
}
