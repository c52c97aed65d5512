/* Read-only HTTP (libmicrohttpd, its own thread): /healthz and /metrics. The loop rebuilds the metrics
 * text on every tick (metrics.c); the HTTP thread only copies it, so a slow or trickling client never
 * touches the coordinator's state.
 *
 * Slots: a connection is *pending* until its request has arrived whole. A slow client holds a pending
 * slot; a scrape's request arrives at once and is answered (then the connection is closed). At most
 * HTTP_PENDING_MAX connections are pending: a new one past that evicts the oldest pending one (its
 * socket shut down; libmicrohttpd then closes it). So no number of slow clients, from any address --
 * a Prometheus on the coordinator's own host shares its address with whatever else runs there --
 * keeps a scrape out: it is always the newest, and is served before it can become the oldest. */
#include <arpa/inet.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <sys/socket.h>

#include "coordinator/coord.h"
#include "odl/health.h"
#include "odl/log.h"

#define HTTP_PENDING_MAX 256
#define HTTP_CONNECTIONS_MAX 1024 /* libmicrohttpd's own limit, above the pending ones */
#define HTTP_IDLE_TIMEOUT_S 5

/* Pending connections, oldest first; touched by libmicrohttpd's one polling thread only. */
typedef struct pending {
    int fd;
    int listed;
    struct pending *prev, *next;
} pending;

typedef struct http_ctx {
    coord *c;
    pending *head, *tail;
    int n;
    uint64_t evicted;
} http_ctx;

static void unlist(http_ctx *h, pending *p) {
    if (!p->listed) return;
    if (p->prev) p->prev->next = p->next;
    else h->head = p->next;
    if (p->next) p->next->prev = p->prev;
    else h->tail = p->prev;
    p->prev = p->next = NULL;
    p->listed = 0;
    h->n--;
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
    http_ctx *h = cls;
    if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        pending *p = *socket_context;
        if (p) unlist(h, p);
        free(p);
        *socket_context = NULL;
        return;
    }
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    pending *p = calloc(1, sizeof *p);
    if (!p || !ci) {
        free(p);
        return;
    }
    p->fd = ci->connect_fd;
    p->listed = 1;
    p->prev = h->tail;
    if (h->tail) h->tail->next = p;
    else h->head = p;
    h->tail = p;
    h->n++;
    *socket_context = p;
    if (h->n > HTTP_PENDING_MAX) { /* the oldest pending one goes: libmicrohttpd sees its end and closes it */
        pending *old = h->head;
        unlist(h, old);
        shutdown(old->fd, SHUT_RDWR);
        h->evicted++;
    }
}

static enum MHD_Result answer(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                              const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    http_ctx *h = cls;
    coord *c = h->c;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    if (ci && ci->socket_context) unlist(h, ci->socket_context); /* its request is here: no longer pending */
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
    MHD_add_response_header(r, "Connection", "close"); /* a served client holds no slot idle */
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
    http_ctx *h = calloc(1, sizeof *h);
    if (!h) return ODL_ERR(ODL_E_NOMEM, "HTTP server");
    h->c = c;
    /* One polling thread (epoll): a client that trickles bytes holds a pending slot until the idle
     * timeout or its eviction, never the thread. No per-address limit: the pending slots are shared. */
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG, 0, NULL, NULL, answer, h,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&a, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)HTTP_IDLE_TIMEOUT_S,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)HTTP_CONNECTIONS_MAX, MHD_OPTION_NOTIFY_CONNECTION, on_connection, h,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)32768, MHD_OPTION_END);
    if (!d) {
        free(h);
        return ODL_ERR(ODL_E_IO, "cannot serve HTTP on %s:%d", c->o.http_host, c->o.http_port);
    }
    c->http_ctx = h;
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    int port = info ? info->port : c->o.http_port;
    snprintf(c->http_addr, sizeof c->http_addr, "%s:%d", c->o.http_host, port);
    c->http = d;
    ODL_LOG_INFO("HTTP on http://%s (/metrics, /healthz)", c->http_addr);
    return ODL_OK;
}

void coord_http_stop(coord *c) {
    if (c->http) MHD_stop_daemon(c->http); /* closes every connection: their contexts are freed */
    c->http = NULL;
    free(c->http_ctx);
    c->http_ctx = NULL;
}
