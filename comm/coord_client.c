/* The worker's coordinator client (odl/coord_client.h): a blocking socket, a thread that polls it
 * for commands and sends a heartbeat every heartbeat interval. */
#ifdef ODL_HAVE_COORDINATOR
#include "odl/clock.h"
#include "odl/coord_client.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "comm/coord_wire.h"
#include "odl/health.h"
#include "odl/log.h"

/* odl/coord_client.h's promises: an answer to each registration message within 10 s, to a work request
 * within 60 s. */
#define REGISTER_TIMEOUT_MS 10000
#define WORK_ANSWER_TIMEOUT_S 60

struct odl_coord_client {
    int fd, wake[2];
    pthread_t thread;
    int have_thread;
    pthread_mutex_t mu, send_mu;
    odl_coord_client_cbs cbs;
    double heartbeat_s;
    int rank, stop;
    /* progress (under mu) */
    int64_t step, epoch, cursor, seen_step;
    double sps;
    int writing, evaluating;
    int have_gpu;       /* GPU telemetry to send (under mu) */
    odl_gpu_sample gpu; /* the latest */
    /* the armed checkpoint request (under mu) */
    uint64_t req_id;
    int64_t req_step;
    int req_stop, req_armed;
    /* the answer to the pending work request (under mu; work_cv signals it) */
    pthread_cond_t work_cv;
    int work_have;
    odl_coord_work work;
    uint8_t rbuf[ODL_WIRE_MAX_FRAME + ODL_WIRE_HEADER];
    size_t rlen;
};

static odl_status send_env(odl_coord_client *c, Odl__Envelope *e) {
    uint8_t buf[ODL_WIRE_MAX_FRAME + ODL_WIRE_HEADER];
    size_t len = 0;
    ODL_CHECK(odl_wire_encode(e, buf, sizeof buf, &len));
    pthread_mutex_lock(&c->send_mu);
    size_t off = 0;
    while (off < len) {
        ssize_t n = send(c->fd, buf + off, len - off, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            int e2 = errno;
            pthread_mutex_unlock(&c->send_mu);
            return ODL_ERR(ODL_E_IO, "sending %s to the coordinator: %s", odl_wire_msg_name(e->msg_case), strerror(e2));
        }
        off += (size_t)n;
    }
    pthread_mutex_unlock(&c->send_mu);
    return ODL_OK;
}

/* Read until one frame is buffered; *out the envelope. timeout_ms < 0: block. */
static odl_status recv_env(odl_coord_client *c, int timeout_ms, Odl__Envelope **out) {
    *out = NULL;
    for (;;) {
        size_t used = 0;
        ODL_CHECK(odl_wire_decode(c->rbuf, c->rlen, &used, out));
        if (*out) {
            memmove(c->rbuf, c->rbuf + used, c->rlen - used);
            c->rlen -= used;
            return ODL_OK;
        }
        struct pollfd p = {.fd = c->fd, .events = POLLIN};
        int r = poll(&p, 1, timeout_ms);
        if (r < 0 && errno == EINTR) continue;
        if (r == 0) return ODL_ERR(ODL_E_TIMEOUT, "no answer from the coordinator within %d ms", timeout_ms);
        ssize_t n = recv(c->fd, c->rbuf + c->rlen, sizeof c->rbuf - c->rlen, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n == 0) return ODL_ERR(ODL_E_IO, "the coordinator closed the connection");
        if (n < 0) return ODL_ERR(ODL_E_IO, "reading from the coordinator: %s", strerror(errno));
        c->rlen += (size_t)n;
    }
}

static odl_status dial(const char *addr, int *fd_out) {
    char host[256];
    const char *colon = strrchr(addr, ':');
    if (!colon || colon == addr || (size_t)(colon - addr) >= sizeof host)
        return ODL_ERR(ODL_E_INVAL, "coordinator address '%s' is not HOST:PORT", addr);
    snprintf(host, sizeof host, "%.*s", (int)(colon - addr), addr);
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    int g = getaddrinfo(host, colon + 1, &hints, &res);
    if (g) return ODL_ERR(ODL_E_IO, "coordinator address %s: %s", addr, gai_strerror(g));
    int fd = -1, err = 0;
    for (struct addrinfo *a = res; a; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) continue;
        if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) break;
        err = errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0) return ODL_ERR(ODL_E_IO, "cannot connect to the coordinator at %s: %s", addr, strerror(err));
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    *fd_out = fd;
    return ODL_OK;
}

static void on_command(odl_coord_client *c, const Odl__Envelope *e) {
    if (e->msg_case == ODL__ENVELOPE__MSG_CHECKPOINT_AT) {
        const Odl__CheckpointAt *a = e->checkpoint_at;
        pthread_mutex_lock(&c->mu);
        int64_t now_step = c->seen_step;
        int armed = a->step > now_step;
        if (armed) {
            c->req_id = a->request_id;
            c->req_step = a->step;
            c->req_stop = a->stop;
            c->req_armed = 1;
        }
        pthread_mutex_unlock(&c->mu);
        Odl__Envelope out = ODL__ENVELOPE__INIT;
        Odl__CheckpointAck ack = ODL__CHECKPOINT_ACK__INIT;
        ack.request_id = a->request_id;
        ack.armed = armed;
        ack.step = now_step;
        out.msg_case = ODL__ENVELOPE__MSG_CHECKPOINT_ACK;
        out.checkpoint_ack = &ack;
        if (send_env(c, &out) != ODL_OK) ODL_LOG_WARN("%s", odl_error_msg());
        ODL_LOG_INFO("coordinator: checkpoint after step %" PRId64 "%s (request %" PRIu64 ")%s", a->step,
                     a->stop ? " and stop" : "", a->request_id, armed ? "" : ": already past it");
    } else if (e->msg_case == ODL__ENVELOPE__MSG_WORK_ITEM) {
        const Odl__WorkItem *w = e->work_item;
        pthread_mutex_lock(&c->mu);
        odl_coord_work *o = &c->work;
        memset(o, 0, sizeof *o);
        o->chunk = w->chunk;
        o->first = w->first;
        o->count = w->count;
        o->n_chunks = w->n_chunks;
        o->backup = w->backup;
        o->finished = w->finished;
        o->retry_ms = w->retry_ms;
        snprintf(o->dir, sizeof o->dir, "%s", w->dir);
        snprintf(o->error, sizeof o->error, "%s", w->error);
        c->work_have = 1;
        pthread_cond_signal(&c->work_cv);
        pthread_mutex_unlock(&c->mu);
    } else if (e->msg_case == ODL__ENVELOPE__MSG_CHECKPOINT_CANCEL) {
        pthread_mutex_lock(&c->mu);
        if (c->req_armed && c->req_id == e->checkpoint_cancel->request_id) c->req_armed = 0;
        pthread_mutex_unlock(&c->mu);
    }
}

static odl_status heartbeat(odl_coord_client *c) {
    Odl__Envelope e = ODL__ENVELOPE__INIT;
    Odl__Heartbeat hb = ODL__HEARTBEAT__INIT;
    char what[128] = "";
    uint64_t seq = 0;
    if (c->cbs.activity) c->cbs.activity(c->cbs.ctx, &seq, what, sizeof what);
    pthread_mutex_lock(&c->mu);
    hb.step = c->step;
    hb.epoch = c->epoch;
    hb.cursor = c->cursor;
    hb.samples_per_s = c->sps;
    hb.checkpoint_writing = c->writing;
    hb.evaluating = c->evaluating;
    if (c->have_gpu) {
        hb.has_telemetry = 1;
        hb.gpu_util_pct = c->gpu.util_pct;
        hb.mem_used_mib = c->gpu.mem_used_mib;
        hb.mem_total_mib = c->gpu.mem_total_mib;
        hb.temp_c = c->gpu.temp_c;
        hb.power_w = c->gpu.power_w;
        hb.sm_clock_mhz = c->gpu.sm_clock_mhz;
    }
    pthread_mutex_unlock(&c->mu);
    hb.collective_seq = seq;
    hb.waiting_in = what;
    e.msg_case = ODL__ENVELOPE__MSG_HEARTBEAT;
    e.heartbeat = &hb;
    return send_env(c, &e);
}

/* Handle every complete frame buffered. Returns 0 to go on, -1 with why set to stop. */
static int drain(odl_coord_client *c, char *why, size_t cap) {
    for (;;) {
        size_t used = 0;
        Odl__Envelope *e = NULL;
        if (odl_wire_decode(c->rbuf, c->rlen, &used, &e) != ODL_OK) {
            snprintf(why, cap, "bad frame from the coordinator: %s", odl_error_msg());
            return -1;
        }
        if (!e) return 0;
        memmove(c->rbuf, c->rbuf + used, c->rlen - used);
        c->rlen -= used;
        if (e->msg_case == ODL__ENVELOPE__MSG_SHUTDOWN) {
            snprintf(why, cap, "the coordinator ends this rank: %s", e->shutdown->reason);
            odl_wire_free(e);
            return -1;
        }
        on_command(c, e);
        odl_wire_free(e);
    }
}

static void *client_main(void *arg) {
    odl_coord_client *c = arg;
    double next = odl_mono_s();
    char why[512] = "";
    if (drain(c, why, sizeof why) != 0) goto out; /* frames that came with the welcome */
    for (;;) {
        double now = odl_mono_s();
        if (now >= next) {
            if (heartbeat(c) != ODL_OK) {
                snprintf(why, sizeof why, "%s", odl_error_msg());
                break;
            }
            next = now + c->heartbeat_s;
            continue;
        }
        struct pollfd p[2] = {{.fd = c->fd, .events = POLLIN}, {.fd = c->wake[0], .events = POLLIN}};
        int r = poll(p, 2, (int)((next - now) * 1000) + 1);
        if (r < 0 && errno == EINTR) continue;
        if (p[1].revents) break; /* close() */
        if (r <= 0 || !(p[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        ssize_t n = recv(c->fd, c->rbuf + c->rlen, sizeof c->rbuf - c->rlen, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            snprintf(why, sizeof why, "the coordinator closed the connection%s%s", n < 0 ? ": " : "",
                     n < 0 ? strerror(errno) : "");
            break;
        }
        c->rlen += (size_t)n;
        if (drain(c, why, sizeof why) != 0) break;
    }
out:
    pthread_mutex_lock(&c->mu);
    int stopping = c->stop;
    pthread_mutex_unlock(&c->mu);
    if (why[0] && !stopping && c->cbs.lost) c->cbs.lost(c->cbs.ctx, why);
    return NULL;
}

static void client_free(odl_coord_client *c) {
    if (c->fd >= 0) close(c->fd);
    if (c->wake[0] >= 0) close(c->wake[0]);
    if (c->wake[1] >= 0) close(c->wake[1]);
    pthread_mutex_destroy(&c->mu);
    pthread_mutex_destroy(&c->send_mu);
    pthread_cond_destroy(&c->work_cv);
    free(c);
}

odl_status odl_coord_client_connect(const char *addr, const char *secret_file, const odl_coord_hello *h,
                                    const odl_coord_client_cbs *cbs, odl_coord_welcome *w, odl_coord_client **out) {
    *out = NULL;
    uint8_t key[ODL_WIRE_KEY_BYTES];
    ODL_CHECK(odl_wire_key_load(secret_file, key));
    odl_coord_client *c = calloc(1, sizeof *c);
    if (!c) return ODL_ERR(ODL_E_NOMEM, "coordinator client");
    c->fd = c->wake[0] = c->wake[1] = -1;
    pthread_mutex_init(&c->mu, NULL);
    pthread_mutex_init(&c->send_mu, NULL);
    odl_cond_init_mono(&c->work_cv);
    if (cbs) c->cbs = *cbs;
    c->rank = h->rank;
    c->seen_step = -1;
    odl_status s = dial(addr, &c->fd);
    Odl__Envelope *in = NULL;
    if (s != ODL_OK) goto fail;
    Odl__Envelope e = ODL__ENVELOPE__INIT;
    Odl__Hello hello = ODL__HELLO__INIT;
    hello.rank = (uint32_t)h->rank;
    hello.world_size = (uint32_t)h->world_size;
    hello.generation = h->generation;
    hello.node = (char *)h->node;
    hello.pid = h->pid;
    hello.gpu_uuid = (char *)h->gpu_uuid;
    hello.pci_bus_id = (char *)h->pci_bus_id;
    hello.gpu_index = h->gpu_index;
    hello.gpu_model = (char *)h->gpu_model;
    hello.seed = h->seed;
    e.msg_case = ODL__ENVELOPE__MSG_HELLO;
    e.hello = &hello;
    ODL_CHECK_GOTO(send_env(c, &e), s, fail);
    ODL_CHECK_GOTO(recv_env(c, REGISTER_TIMEOUT_MS, &in), s, fail);
    if (in->msg_case == ODL__ENVELOPE__MSG_CHALLENGE && in->challenge->nonce.len == ODL_WIRE_NONCE_BYTES) {
        uint8_t mac[ODL_WIRE_MAC_BYTES];
        odl_wire_mac(key, in->challenge->nonce.data, (uint32_t)h->rank, h->generation, mac);
        Odl__Envelope pe = ODL__ENVELOPE__INIT;
        Odl__Proof proof = ODL__PROOF__INIT;
        proof.mac.data = mac;
        proof.mac.len = sizeof mac;
        pe.msg_case = ODL__ENVELOPE__MSG_PROOF;
        pe.proof = &proof;
        odl_wire_free(in);
        in = NULL;
        ODL_CHECK_GOTO(send_env(c, &pe), s, fail);
        ODL_CHECK_GOTO(recv_env(c, REGISTER_TIMEOUT_MS, &in), s, fail);
    }
    if (in->msg_case == ODL__ENVELOPE__MSG_REFUSED) {
        s = ODL_ERR(ODL_E_INVAL, "the coordinator at %s refused rank %d: %s", addr, h->rank, in->refused->reason);
        goto fail;
    }
    if (in->msg_case != ODL__ENVELOPE__MSG_WELCOME) {
        s = ODL_ERR(ODL_E_FORMAT, "the coordinator at %s answered %s during registration", addr,
                    odl_wire_msg_name(in->msg_case));
        goto fail;
    }
    const Odl__Welcome *wm = in->welcome;
    memset(w, 0, sizeof *w);
    w->generation = wm->generation;
    w->heartbeat_s = wm->heartbeat_ms > 0 ? wm->heartbeat_ms / 1000.0 : ODL_WIRE_HEARTBEAT_S_DEFAULT;
    w->checkpoint_every = wm->checkpoint_every;
    snprintf(w->checkpoint_dir, sizeof w->checkpoint_dir, "%s", wm->checkpoint_dir);
    snprintf(w->resume_path, sizeof w->resume_path, "%s", wm->resume_path);
    w->have_plan = wm->have_plan;
    w->seed = wm->seed;
    w->epoch = wm->epoch;
    w->cursor = wm->cursor;
    w->step = wm->step;
    c->heartbeat_s = w->heartbeat_s;
    odl_wire_free(in);
    in = NULL;
    if (pipe2(c->wake, O_CLOEXEC) != 0) {
        s = ODL_ERR(ODL_E_IO, "pipe: %s", strerror(errno));
        goto fail;
    }
    int pe2 = pthread_create(&c->thread, NULL, client_main, c);
    if (pe2) {
        s = ODL_ERR(ODL_E_INTERNAL, "cannot start the heartbeat thread: %s", strerror(pe2));
        goto fail;
    }
    c->have_thread = 1;
    *out = c;
    return ODL_OK;
fail:
    odl_wire_free(in);
    client_free(c);
    sodium_memzero(key, sizeof key);
    return s;
}

void odl_coord_client_progress(odl_coord_client *c, int64_t step, int64_t epoch, int64_t cursor, double samples_per_s) {
    if (!c) return;
    pthread_mutex_lock(&c->mu);
    c->step = step;
    c->epoch = epoch;
    c->cursor = cursor;
    c->sps = samples_per_s;
    pthread_mutex_unlock(&c->mu);
}

int odl_coord_client_step_request(odl_coord_client *c, int64_t step) {
    if (!c) return 0;
    int flags = 0;
    pthread_mutex_lock(&c->mu);
    c->seen_step = step; /* a request for this step or earlier arriving from now on is refused */
    if (c->req_armed && c->req_step == step) {
        flags = ODL_COORD_CHECKPOINT | (c->req_stop ? ODL_COORD_STOP : 0);
        c->req_armed = 0;
    }
    pthread_mutex_unlock(&c->mu);
    return flags;
}

void odl_coord_client_ckpt_writing(odl_coord_client *c, int on) {
    if (!c) return;
    pthread_mutex_lock(&c->mu);
    c->writing = on;
    pthread_mutex_unlock(&c->mu);
}

void odl_coord_client_evaluating(odl_coord_client *c, int on) {
    if (!c) return;
    pthread_mutex_lock(&c->mu);
    c->evaluating = on;
    pthread_mutex_unlock(&c->mu);
}

void odl_coord_client_ckpt_written(odl_coord_client *c, int64_t step, int64_t epoch, int64_t cursor, const char *path,
                                   uint64_t bytes, double write_ms, int ok, const char *error, int64_t keep) {
    if (!c) return;
    Odl__Envelope e = ODL__ENVELOPE__INIT;
    Odl__CheckpointWritten w = ODL__CHECKPOINT_WRITTEN__INIT;
    w.step = step;
    w.epoch = epoch;
    w.cursor = cursor;
    w.path = (char *)path;
    w.bytes = bytes;
    w.write_ms = write_ms;
    w.ok = ok;
    w.error = (char *)(error ? error : "");
    w.keep = keep;
    e.msg_case = ODL__ENVELOPE__MSG_CHECKPOINT_WRITTEN;
    e.checkpoint_written = &w;
    if (send_env(c, &e) != ODL_OK) ODL_LOG_WARN("%s", odl_error_msg());
}

void odl_coord_client_gpu(odl_coord_client *c, const odl_gpu_sample *g) {
    if (!c) return;
    pthread_mutex_lock(&c->mu);
    c->have_gpu = g != NULL;
    if (g) c->gpu = *g;
    pthread_mutex_unlock(&c->mu);
}

void odl_coord_client_xid(odl_coord_client *c, int xid, int xid_class, const char *pci_bus_id, const char *detail) {
    if (!c) return;
    Odl__Envelope e = ODL__ENVELOPE__INIT;
    Odl__XidReport x = ODL__XID_REPORT__INIT;
    x.xid = (uint32_t)xid;
    x.xid_class = (uint32_t)xid_class;
    x.pci_bus_id = (char *)(pci_bus_id ? pci_bus_id : "");
    x.detail = (char *)(detail ? detail : "");
    e.msg_case = ODL__ENVELOPE__MSG_XID_REPORT;
    e.xid_report = &x;
    if (send_env(c, &e) != ODL_OK) ODL_LOG_WARN("%s", odl_error_msg());
}

odl_status odl_coord_client_work_request(odl_coord_client *c, const char *key, int64_t n_items, int64_t chunk_items,
                                         odl_coord_work *out) {
    memset(out, 0, sizeof *out);
    out->chunk = -1;
    if (!c) return ODL_ERR(ODL_E_INVAL, "no coordinator to ask for work");
    pthread_mutex_lock(&c->mu);
    c->work_have = 0;
    pthread_mutex_unlock(&c->mu);
    Odl__Envelope e = ODL__ENVELOPE__INIT;
    Odl__WorkRequest r = ODL__WORK_REQUEST__INIT;
    r.key = (char *)key;
    r.n_items = n_items;
    r.chunk_items = chunk_items;
    e.msg_case = ODL__ENVELOPE__MSG_WORK_REQUEST;
    e.work_request = &r;
    ODL_CHECK(send_env(c, &e));
    const struct timespec until = odl_mono_deadline((int64_t)WORK_ANSWER_TIMEOUT_S * 1000); /* work_cv's clock */
    int rc = 0;
    pthread_mutex_lock(&c->mu);
    while (!c->work_have && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&c->work_cv, &c->mu, &until);
    int have = c->work_have;
    if (have) *out = c->work;
    c->work_have = 0;
    pthread_mutex_unlock(&c->mu);
    if (!have) return ODL_ERR(ODL_E_TIMEOUT, "rank %d: no answer to a work request from the coordinator in %d s", c->rank,
                                   WORK_ANSWER_TIMEOUT_S);
    return ODL_OK;
}

odl_status odl_coord_client_work_done(odl_coord_client *c, int64_t chunk, int kept) {
    if (!c) return ODL_ERR(ODL_E_INVAL, "no coordinator to report work to");
    Odl__Envelope e = ODL__ENVELOPE__INIT;
    Odl__WorkDone d = ODL__WORK_DONE__INIT;
    d.chunk = chunk;
    d.kept = kept;
    e.msg_case = ODL__ENVELOPE__MSG_WORK_DONE;
    e.work_done = &d;
    return send_env(c, &e);
}

void odl_coord_client_close(odl_coord_client *c, int status) {
    odl_coord_client_close_why(c, status, NULL);
}

void odl_coord_client_close_why(odl_coord_client *c, int status, const char *why) {
    if (!c) return;
    pthread_mutex_lock(&c->mu);
    c->stop = 1;
    pthread_mutex_unlock(&c->mu);
    if (c->have_thread) {
        ssize_t r = write(c->wake[1], "x", 1);
        (void)r;
        pthread_join(c->thread, NULL);
    }
    Odl__Envelope e = ODL__ENVELOPE__INIT;
    Odl__Goodbye g = ODL__GOODBYE__INIT;
    char reason[2048];
    snprintf(reason, sizeof reason, "%s", why ? why : "");
    g.status = status;
    g.reason = reason;
    e.msg_case = ODL__ENVELOPE__MSG_GOODBYE;
    e.goodbye = &g;
    if (send_env(c, &e) != ODL_OK) ODL_LOG_DEBUG("%s", odl_error_msg());
    shutdown(c->fd, SHUT_WR);
    client_free(c);
}
#else /* built without protobuf-c/libsodium: no coordinator; the calls on a NULL client do nothing */
#include "odl/coord_client.h"

odl_status odl_coord_client_connect(const char *addr, const char *secret_file, const odl_coord_hello *h,
                                    const odl_coord_client_cbs *cbs, odl_coord_welcome *w, odl_coord_client **out) {
    (void)secret_file, (void)h, (void)cbs, (void)w;
    *out = NULL;
    return ODL_ERR(ODL_E_UNSUPPORTED, "coordinator %s: this build has no coordinator client (needs protobuf-c and "
                   "libsodium)", addr);
}
void odl_coord_client_progress(odl_coord_client *c, int64_t step, int64_t epoch, int64_t cursor, double sps) {
    (void)c, (void)step, (void)epoch, (void)cursor, (void)sps;
}
int odl_coord_client_step_request(odl_coord_client *c, int64_t step) {
    (void)c, (void)step;
    return 0;
}
void odl_coord_client_ckpt_writing(odl_coord_client *c, int on) {
    (void)c, (void)on;
}
void odl_coord_client_evaluating(odl_coord_client *c, int on) {
    (void)c, (void)on;
}
void odl_coord_client_ckpt_written(odl_coord_client *c, int64_t step, int64_t epoch, int64_t cursor, const char *path,
                                   uint64_t bytes, double write_ms, int ok, const char *error, int64_t keep) {
    (void)c, (void)step, (void)epoch, (void)cursor, (void)path, (void)bytes, (void)write_ms, (void)ok, (void)error, (void)keep;
}
void odl_coord_client_gpu(odl_coord_client *c, const odl_gpu_sample *g) {
    (void)c, (void)g;
}
void odl_coord_client_xid(odl_coord_client *c, int xid, int xid_class, const char *pci_bus_id, const char *detail) {
    (void)c, (void)xid, (void)xid_class, (void)pci_bus_id, (void)detail;
}
odl_status odl_coord_client_work_request(odl_coord_client *c, const char *key, int64_t n_items, int64_t chunk_items,
                                         odl_coord_work *out) {
    (void)c, (void)key, (void)n_items, (void)chunk_items;
    out->chunk = -1;
    return ODL_ERR(ODL_E_UNSUPPORTED, "this build has no coordinator client");
}
odl_status odl_coord_client_work_done(odl_coord_client *c, int64_t chunk, int kept) {
    (void)c, (void)chunk, (void)kept;
    return ODL_ERR(ODL_E_UNSUPPORTED, "this build has no coordinator client");
}
void odl_coord_client_close(odl_coord_client *c, int status) {
    (void)c, (void)status;
}
void odl_coord_client_close_why(odl_coord_client *c, int status, const char *why) {
    (void)c, (void)status, (void)why;
}
#endif
