/* The coordinator's port (coord.h "conn.c"): accepting connections, buffering and decoding frames,
 * sending, refusing and closing. What a frame means is server.c's, which this file hears of only
 * through the events it was given (coord_conn_listen). Any bytes a client sends end, at worst, that
 * client's connection: frames are decoded by odl_wire_decode, which refuses a bad length from the
 * header alone, and a connection buffers at most one frame. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coordinator/coord.h"
#include "odl/clock.h"
#include "odl/log.h"

static void on_conn_closed(uv_handle_t *h) {
    coord_conn *k = h->data;
    coord *c = k->c;
    if (k->prev) k->prev->next = k->next;
    else c->conns = k->next;
    if (k->next) k->next->prev = k->prev;
    c->n_conns--;
    if (k->hello) odl__hello__free_unpacked(k->hello, NULL);
    free(k->buf);
    free(k);
}

/* Closing first, then the member's event: what the event sets off (a failure, whose Shutdown goes to every
 * member; a write to k that fails at once and closes it) must find k closing already, or k would be
 * closed twice (libuv's assertion, seen in coord_refused_rank: rank 0's disconnection failed the job,
 * whose Shutdown to rank 0's dead socket failed in uv_write). on_conn_closed runs on a later turn of the
 * loop, so k stays valid through the event. */
void coord_conn_close(coord_conn *k) {
    if (k->state == CONN_CLOSING) return;
    const int member = k->state == CONN_MEMBER;
    k->state = CONN_CLOSING;
    uv_close((uv_handle_t *)&k->tcp, on_conn_closed);
    if (member && k->c->conn_ev.member_closed) k->c->conn_ev.member_closed(k->c, k);
}

void coord_conn_close_all(coord *c) {
    for (coord_conn *k = c->conns; k; k = k->next) {
        if (k->state == CONN_MEMBER) k->said_goodbye = 1;
        coord_conn_close(k);
    }
}

static void on_written(uv_write_t *w, int status) {
    (void)status;
    free(w->data);
    free(w);
}

void coord_conn_send(coord_conn *k, Odl__Envelope *e) {
    if (k->state == CONN_CLOSING) return;
    size_t cap = odl__envelope__get_packed_size(e) + ODL_WIRE_HEADER + 16, len = 0;
    uint8_t *b = malloc(cap);
    uv_write_t *w = malloc(sizeof *w);
    if (!b || !w || odl_wire_encode(e, b, cap, &len) != ODL_OK) {
        ODL_LOG_ERROR("cannot send %s to %s: %s", odl_wire_msg_name(e->msg_case), k->peer, odl_error_msg());
        free(b);
        free(w);
        coord_conn_close(k);
        return;
    }
    w->data = b;
    uv_buf_t ub = uv_buf_init((char *)b, (unsigned)len);
    if (uv_write(w, (uv_stream_t *)&k->tcp, &ub, 1, on_written) != 0) {
        free(b);
        free(w);
        coord_conn_close(k);
    }
}

void coord_conn_send_members(coord *c, Odl__Envelope *e) {
    for (coord_conn *k = c->conns; k; k = k->next)
        if (k->state == CONN_MEMBER) coord_conn_send(k, e);
}

void coord_conn_send_shutdown(coord *c, coord_conn *k, const char *reason) {
    Odl__Envelope e = ODL__ENVELOPE__INIT;
    Odl__Shutdown sd = ODL__SHUTDOWN__INIT;
    sd.reason = (char *)reason;
    e.msg_case = ODL__ENVELOPE__MSG_SHUTDOWN;
    e.shutdown = &sd;
    if (k) coord_conn_send(k, &e);
    else coord_conn_send_members(c, &e);
}

void coord_conn_refuse(coord_conn *k, uint64_t *counter, const char *fmt, ...) {
    char why[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    (*counter)++;
    ODL_LOG_WARN("refused %s: %s", k->peer, why);
    Odl__Envelope e = ODL__ENVELOPE__INIT;
    Odl__Refused r = ODL__REFUSED__INIT;
    r.reason = why;
    e.msg_case = ODL__ENVELOPE__MSG_REFUSED;
    e.refused = &r;
    coord_conn_send(k, &e);
    coord_conn_close(k);
}

static char g_scratch[ODL_WIRE_MAX_FRAME + ODL_WIRE_HEADER];

/* One shared read buffer: libuv calls read_cb right after each read, on this thread. */
static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b) {
    (void)h;
    (void)suggested;
    *b = uv_buf_init(g_scratch, sizeof g_scratch);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b) {
    coord_conn *k = s->data;
    coord *c = k->c;
    if (n < 0) {
        coord_conn_close(k);
        return;
    }
    size_t off = 0;
    while (off < (size_t)n && k->state != CONN_CLOSING) {
        /* Buffer at most one frame: the header first, then exactly the frame's length. */
        size_t want = ODL_WIRE_HEADER;
        if (k->len >= ODL_WIRE_HEADER) {
            uint32_t fl = (uint32_t)k->buf[0] << 24 | (uint32_t)k->buf[1] << 16 | (uint32_t)k->buf[2] << 8 | k->buf[3];
            want = ODL_WIRE_HEADER + fl;
        }
        size_t take = want - k->len;
        if (take > (size_t)n - off) take = (size_t)n - off;
        if (k->len + take > k->cap) {
            size_t nc = k->len + take < 256 ? 256 : k->len + take;
            uint8_t *nb = realloc(k->buf, nc);
            if (!nb) {
                coord_conn_close(k);
                return;
            }
            k->buf = nb;
            k->cap = nc;
        }
        memcpy(k->buf + k->len, b->base + off, take);
        k->len += take;
        off += take;
        size_t used = 0;
        Odl__Envelope *e = NULL;
        if (odl_wire_decode(k->buf, k->len, &used, &e) != ODL_OK) {
            coord_conn_refuse(k, &c->refused.protocol, "bad frame: %s", odl_error_msg());
            return;
        }
        if (!e) continue;
        k->len = 0;
        if (k->state != CONN_CLOSING) c->conn_ev.frame(c, k, e);
        odl_wire_free(e);
    }
}

static void on_connection(uv_stream_t *srv, int status) {
    coord *c = srv->data;
    if (status < 0) {
        ODL_LOG_WARN("accept: %s", uv_strerror(status));
        return;
    }
    coord_conn *k = calloc(1, sizeof *k);
    if (!k) return;
    k->c = c;
    k->rank = -1;
    uv_tcp_init(&c->loop, &k->tcp);
    k->tcp.data = k;
    k->next = c->conns;
    if (c->conns) c->conns->prev = k;
    c->conns = k;
    c->n_conns++;
    if (uv_accept(srv, (uv_stream_t *)&k->tcp) != 0) {
        k->state = CONN_CLOSING;
        uv_close((uv_handle_t *)&k->tcp, on_conn_closed);
        return;
    }
    struct sockaddr_storage ss;
    int sl = sizeof ss;
    snprintf(k->peer, sizeof k->peer, "a peer");
    if (uv_tcp_getpeername(&k->tcp, (struct sockaddr *)&ss, &sl) == 0 && ss.ss_family == AF_INET) {
        char ip[64];
        uv_ip4_name((struct sockaddr_in *)&ss, ip, sizeof ip);
        snprintf(k->peer, sizeof k->peer, "%s:%d", ip, ntohs(((struct sockaddr_in *)&ss)->sin_port));
    }
    k->t_open = odl_mono_s();
    if (c->n_conns > COORD_MAX_CONNS) {
        coord_conn_refuse(k, &c->refused.full, "too many connections (%d)", COORD_MAX_CONNS);
        return;
    }
    uv_tcp_nodelay(&k->tcp, 1);
    uv_read_start((uv_stream_t *)&k->tcp, on_alloc, on_read);
}

odl_status coord_conn_listen(coord *c, const coord_conn_events *ev) {
    c->conn_ev = *ev;
    struct sockaddr_in addr;
    int r = uv_ip4_addr(c->o.listen_host, c->o.listen_port, &addr);
    if (r) return ODL_ERR(ODL_E_INVAL, "--listen %s:%d: %s", c->o.listen_host, c->o.listen_port, uv_strerror(r));
    uv_tcp_init(&c->loop, &c->server);
    c->server.data = c;
    if ((r = uv_tcp_bind(&c->server, (struct sockaddr *)&addr, 0)) != 0 ||
        (r = uv_listen((uv_stream_t *)&c->server, 1024, on_connection)) != 0)
        return ODL_ERR(ODL_E_IO, "cannot listen on %s:%d: %s", c->o.listen_host, c->o.listen_port, uv_strerror(r));
    struct sockaddr_in got;
    int len = sizeof got;
    uv_tcp_getsockname(&c->server, (struct sockaddr *)&got, &len);
    char host[256];
    if (!strcmp(c->o.listen_host, "0.0.0.0")) {
        if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "127.0.0.1");
        host[sizeof host - 1] = 0;
    } else {
        snprintf(host, sizeof host, "%s", c->o.listen_host);
    }
    snprintf(c->advertise, sizeof c->advertise, "%s:%d", host, ntohs(got.sin_port));
    ODL_LOG_INFO("listening on %s:%d (workers connect to %s)", c->o.listen_host, ntohs(got.sin_port), c->advertise);
    return ODL_OK;
}

void coord_conn_tick(coord *c) {
    double now = odl_mono_s();
    for (coord_conn *k = c->conns, *next; k; k = next) {
        next = k->next;
        if ((k->state == CONN_HELLO || k->state == CONN_PROOF) && now - k->t_open > COORD_AUTH_TIMEOUT_S)
            coord_conn_refuse(k, &c->refused.protocol, "no proof of the job secret within %.0f s", COORD_AUTH_TIMEOUT_S);
    }
}
