/* Read-only HTTP (libmicrohttpd, its own thread): /healthz and /metrics. The loop rebuilds the metrics
 * text on every tick (metrics.c); the HTTP thread only copies it, so a slow or trickling client never
 * touches the coordinator's state. */
#include <arpa/inet.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coordinator/coord.h"
#include "odl/log.h"

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
