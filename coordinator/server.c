/* The coordinator's port: connections, authentication, membership, heartbeats, liveness and the
 * checkpoint protocol (docs/coordinator.md "Protocol", "Failure detection"). Any bytes a client sends
 * end, at worst, that client's connection: frames are decoded by odl_wire_decode, which refuses a bad
 * length from the header alone, and a connection buffers at most one frame. */
#include <inttypes.h>
#include <math.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coordinator/coord.h"
#include "odl/ckpt.h"
#include "odl/log.h"

typedef enum { CONN_HELLO, CONN_PROOF, CONN_MEMBER, CONN_CLOSING } conn_state;

struct coord_conn {
    uv_tcp_t tcp;
    coord *c;
    conn_state state;
    uint8_t *buf;
    size_t len, cap;
    double t_open;
    char peer[96];
    uint8_t nonce[ODL_WIRE_NONCE_BYTES];
    Odl__Hello *hello; /* kept from Hello until the proof is checked */
    int rank;          /* when a member */
    int said_goodbye;
    coord_conn *next, *prev;
};

double coord_now(const coord *c) {
    (void)c; /* the coordinator's own monotonic clock decides liveness, never a worker's */
    return (double)uv_hrtime() * 1e-9;
}

/* ------------------------------------------------------------------ connection plumbing */

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

static void member_lost(coord_conn *k);

static void conn_close(coord_conn *k) {
    if (k->state == CONN_CLOSING) return;
    if (k->state == CONN_MEMBER) member_lost(k);
    k->state = CONN_CLOSING;
    uv_close((uv_handle_t *)&k->tcp, on_conn_closed);
}

static void on_written(uv_write_t *w, int status) {
    (void)status;
    free(w->data);
    free(w);
}

static void conn_send(coord_conn *k, Odl__Envelope *e) {
    if (k->state == CONN_CLOSING) return;
    size_t cap = odl__envelope__get_packed_size(e) + ODL_WIRE_HEADER + 16, len = 0;
    uint8_t *b = malloc(cap);
    uv_write_t *w = malloc(sizeof *w);
    if (!b || !w || odl_wire_encode(e, b, cap, &len) != ODL_OK) {
        ODL_LOG_ERROR("cannot send %s to %s: %s", odl_wire_msg_name(e->msg_case), k->peer, odl_error_msg());
        free(b);
        free(w);
        conn_close(k);
        return;
    }
    w->data = b;
    uv_buf_t ub = uv_buf_init((char *)b, (unsigned)len);
    if (uv_write(w, (uv_stream_t *)&k->tcp, &ub, 1, on_written) != 0) {
        free(b);
        free(w);
        conn_close(k);
    }
}

void coord_conn_send(coord_conn *k, Odl__Envelope *e) {
    conn_send(k, e);
}

static void refuse(coord_conn *k, uint64_t *counter, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void refuse(coord_conn *k, uint64_t *counter, const char *fmt, ...) {
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
    conn_send(k, &e);
    conn_close(k);
}

/* ------------------------------------------------------------------ membership */

static const char *rank_doing(const coord_rank *r, char *buf, size_t cap) {
    if (!r->conn && r->finished) snprintf(buf, cap, "finished");
    else if (!r->conn) snprintf(buf, cap, "not connected");
    else if (r->checkpoint_writing) snprintf(buf, cap, "writing a checkpoint");
    else if (r->evaluating) snprintf(buf, cap, "evaluating the test set");
    else if (r->waiting_in[0]) snprintf(buf, cap, "waiting in %s", r->waiting_in);
    else snprintf(buf, cap, "computing (not in a collective)");
    return buf;
}

/* One log line per rank: what every rank was doing when the job failed. */
static void log_ranks(coord *c) {
    double now = coord_now(c);
    for (int r = 0; r < c->world_size; r++) {
        const coord_rank *x = &c->ranks[r];
        char doing[200];
        if (!x->t_join) {
            ODL_LOG_ERROR("  rank %d: never registered", r);
            continue;
        }
        ODL_LOG_ERROR("  rank %d (node %s, pid %u): step %" PRId64 ", epoch %" PRId64 ", collective #%" PRIu64
                      ", %s, last heartbeat %.1f s ago",
                      r, x->node, x->pid, x->step, x->epoch + 1, x->collective_seq, rank_doing(x, doing, sizeof doing),
                      now - x->t_heartbeat);
    }
}

static void member_lost(coord_conn *k) {
    coord *c = k->c;
    coord_rank *r = &c->ranks[k->rank];
    r->conn = NULL;
    if (k->said_goodbye) return;
    if (c->state == JOB_RUNNING || c->state == JOB_STOPPING) {
        coord_job_fail(c, "rank %d (node %s, pid %u) disconnected at step %" PRId64 " without saying goodbye: it died "
                       "(killed, crashed or exited)", k->rank, r->node, r->pid, r->step);
        log_ranks(c);
    }
}

void coord_members_reset(coord *c) {
    for (coord_conn *k = c->conns; k; k = k->next)
        if (k->state == CONN_MEMBER) {
            k->said_goodbye = 1; /* of the ended generation: not a new failure */
            conn_close(k);
        }
    free(c->ranks);
    c->ranks = NULL;
    c->world_size = 0;
}

static void send_all(coord *c, Odl__Envelope *e) {
    for (coord_conn *k = c->conns; k; k = k->next)
        if (k->state == CONN_MEMBER) conn_send(k, e);
}

/* The pending checkpoint request, to k or (k NULL) to every member. */
static void send_request(coord *c, coord_conn *k) {
    Odl__Envelope e = ODL__ENVELOPE__INIT;
    Odl__CheckpointAt at = ODL__CHECKPOINT_AT__INIT;
    at.request_id = c->req_id;
    at.step = c->req_step;
    at.stop = c->req_stop;
    e.msg_case = ODL__ENVELOPE__MSG_CHECKPOINT_AT;
    e.checkpoint_at = &at;
    if (k) conn_send(k, &e);
    else send_all(c, &e);
}

static void send_welcome(coord *c, coord_conn *k) {
    Odl__Envelope e = ODL__ENVELOPE__INIT;
    Odl__Welcome w = ODL__WELCOME__INIT;
    char ckdir[PATH_MAX + 16];
    snprintf(ckdir, sizeof ckdir, "%s/checkpoints", c->o.job_dir);
    w.generation = c->generation;
    w.heartbeat_ms = (uint32_t)(c->o.heartbeat_s * 1000 + 0.5);
    w.checkpoint_every = c->o.checkpoint_every;
    w.checkpoint_dir = ckdir;
    w.resume_path = c->ck_path;
    w.have_plan = c->have_plan;
    w.seed = c->seed;
    w.epoch = c->ck_path[0] ? c->ck_epoch : 0;
    w.cursor = c->ck_path[0] ? c->ck_cursor : 0;
    w.step = c->ck_path[0] ? c->ck_step : 0;
    e.msg_case = ODL__ENVELOPE__MSG_WELCOME;
    e.welcome = &w;
    conn_send(k, &e);
}

static void on_hello(coord *c, coord_conn *k, Odl__Envelope *e) {
    if (k->state != CONN_HELLO || e->msg_case != ODL__ENVELOPE__MSG_HELLO) {
        refuse(k, &c->refused_protocol, "expected hello first, got %s", odl_wire_msg_name(e->msg_case));
        return;
    }
    k->hello = e->hello;
    e->hello = NULL;
    e->msg_case = ODL__ENVELOPE__MSG__NOT_SET;
    randombytes_buf(k->nonce, sizeof k->nonce);
    Odl__Envelope out = ODL__ENVELOPE__INIT;
    Odl__Challenge ch = ODL__CHALLENGE__INIT;
    ch.nonce.data = k->nonce;
    ch.nonce.len = sizeof k->nonce;
    out.msg_case = ODL__ENVELOPE__MSG_CHALLENGE;
    out.challenge = &ch;
    k->state = CONN_PROOF;
    conn_send(k, &out);
}

static void on_proof(coord *c, coord_conn *k, Odl__Envelope *e) {
    if (e->msg_case != ODL__ENVELOPE__MSG_PROOF) {
        refuse(k, &c->refused_protocol, "expected proof, got %s", odl_wire_msg_name(e->msg_case));
        return;
    }
    const Odl__Hello *h = k->hello;
    if (!odl_wire_mac_ok(c->key, k->nonce, h->rank, h->generation, e->proof->mac.data, e->proof->mac.len)) {
        refuse(k, &c->refused_auth, "wrong job secret (claimed rank %u, generation %" PRIu64 ")", h->rank, h->generation);
        return;
    }
    if (h->generation != c->generation) {
        refuse(k, &c->refused_generation, "rank %u is of generation %" PRIu64 ", the job is at generation %" PRIu64 "%s",
               h->rank, h->generation, c->generation, h->generation < c->generation ? " (an older job)" : " (unknown)");
        return;
    }
    if (c->state != JOB_RUNNING) {
        refuse(k, &c->refused_generation, "rank %u: generation %" PRIu64 " is ending", h->rank, c->generation);
        return;
    }
    if (h->world_size == 0 || h->world_size > COORD_MAX_RANKS || h->rank >= h->world_size) {
        refuse(k, &c->refused_protocol, "rank %u of world size %u", h->rank, h->world_size);
        return;
    }
    if (!c->world_size) {
        c->ranks = calloc(h->world_size, sizeof *c->ranks);
        if (!c->ranks) {
            refuse(k, &c->refused_full, "out of memory for %u ranks", h->world_size);
            return;
        }
        c->world_size = (int)h->world_size;
        if (!c->have_plan) { /* the job's first generation: its seed becomes the plan's */
            c->seed = h->seed;
            c->have_plan = 1;
        }
        if (coord_plan_save(c) != ODL_OK) ODL_LOG_ERROR("%s", odl_error_msg());
    } else if ((int)h->world_size != c->world_size) {
        refuse(k, &c->refused_protocol, "rank %u says world size %u, generation %" PRIu64 " has %d", h->rank,
               h->world_size, c->generation, c->world_size);
        return;
    }
    coord_rank *r = &c->ranks[h->rank];
    if (r->conn || r->finished) {
        refuse(k, &c->refused_duplicate, "duplicate rank %u (already registered from node %s, pid %u)", h->rank, r->node,
               r->pid);
        return;
    }
    double now = coord_now(c);
    memset(r, 0, sizeof *r);
    r->conn = k;
    snprintf(r->node, sizeof r->node, "%s", h->node);
    snprintf(r->gpu_uuid, sizeof r->gpu_uuid, "%s", h->gpu_uuid);
    snprintf(r->pci_bus_id, sizeof r->pci_bus_id, "%s", h->pci_bus_id);
    snprintf(r->gpu_model, sizeof r->gpu_model, "%s", h->gpu_model ? h->gpu_model : "");
    r->gpu_index = h->gpu_index >= 0 && h->gpu_index < 65536 ? h->gpu_index : -1;
    r->pid = h->pid;
    r->t_join = r->t_heartbeat = r->t_progress = now;
    r->first_step = -1;
    k->rank = (int)h->rank;
    k->state = CONN_MEMBER;
    c->n_registered++;
    char gpu[128] = ""; /* ", GPU UUID (bus id)", either part may be missing */
    if (h->gpu_uuid[0] && h->pci_bus_id[0]) snprintf(gpu, sizeof gpu, ", GPU %.63s (%.31s)", h->gpu_uuid, h->pci_bus_id);
    else if (h->gpu_uuid[0] || h->pci_bus_id[0]) snprintf(gpu, sizeof gpu, ", GPU %.63s%.31s", h->gpu_uuid, h->pci_bus_id);
    ODL_LOG_INFO("rank %u of %u registered: node %s, pid %u%s, generation %" PRIu64, h->rank, h->world_size, h->node,
                 h->pid, gpu, c->generation);
    odl__hello__free_unpacked(k->hello, NULL);
    k->hello = NULL;
    send_welcome(c, k);
    if (c->req_active) send_request(c, k); /* a checkpoint requested before this rank joined */
}

/* ------------------------------------------------------------------ checkpoints */

void coord_broadcast_shutdown(coord *c, const char *reason) {
    Odl__Envelope e = ODL__ENVELOPE__INIT;
    Odl__Shutdown s = ODL__SHUTDOWN__INIT;
    s.reason = (char *)reason;
    e.msg_case = ODL__ENVELOPE__MSG_SHUTDOWN;
    e.shutdown = &s;
    send_all(c, &e);
}

static void issue_request(coord *c) {
    int64_t max_step = 0;
    double rate = 0;
    for (int r = 0; r < c->world_size; r++) {
        if (c->ranks[r].step > max_step) max_step = c->ranks[r].step;
        if (c->ranks[r].steps_per_s > rate) rate = c->ranks[r].steps_per_s;
    }
    /* Far enough ahead that every rank hears of it before it gets there: a second of steps and 2 more,
     * doubled on each retry. */
    int64_t lead = ((int64_t)ceil(rate) + 2) << c->req_tries;
    c->req_id++;
    c->req_step = max_step + lead;
    c->req_active = 1;
    ODL_LOG_INFO("checkpoint requested%s: every rank stops at the boundary after step %" PRId64 " (request %" PRIu64 ")",
                 c->req_stop ? " for preemption" : "", c->req_step, c->req_id);
    send_request(c, NULL);
}

void coord_request_checkpoint(coord *c, int stop) {
    if (stop) c->req_stop = 1;
    c->req_tries = 0;
    issue_request(c);
}

static void on_ack(coord *c, coord_conn *k, const Odl__CheckpointAck *a) {
    if (a->armed || !c->req_active || a->request_id != c->req_id) return;
    ODL_LOG_WARN("rank %d was already at step %" PRId64 " when checkpoint request %" PRIu64 " (step %" PRId64
                 ") arrived: cancelling it and asking again further ahead", k->rank, a->step, a->request_id, c->req_step);
    Odl__Envelope e = ODL__ENVELOPE__INIT;
    Odl__CheckpointCancel x = ODL__CHECKPOINT_CANCEL__INIT;
    x.request_id = a->request_id;
    e.msg_case = ODL__ENVELOPE__MSG_CHECKPOINT_CANCEL;
    e.checkpoint_cancel = &x;
    send_all(c, &e);
    if (c->req_tries < 5) c->req_tries++;
    issue_request(c);
}

/* The checkpoint directory of a reported file, which must be named ckpt-<step>.h5 for its step as the
 * checkpoint layer names it: the coordinator deletes files there (retention). -1 when it is not, or
 * when the path does not fit (cap, the size of ck_path too): a truncated one would name another folder. */
static int ckpt_dir_of(const char *path, int64_t step, char *dir, size_t cap) {
    char name[64];
    odl_ckpt_file_name(step, name, sizeof name);
    if (strlen(path) >= cap) return -1;
    const char *slash = strrchr(path, '/');
    if (strcmp(slash ? slash + 1 : path, name) != 0) return -1;
    if (!slash) snprintf(dir, cap, ".");
    else if (slash == path) snprintf(dir, cap, "/");
    else snprintf(dir, cap, "%.*s", (int)(slash - path), path);
    return 0;
}

/* Commit a written checkpoint: DIR/committed.json first (what a relaunch resumes from), then the
 * checkpoint directory's manifest and retention (odl_ckpt_commit). In that order a failure anywhere
 * leaves the committed file on disk: retention only deletes files older than the one just committed. */
static void on_written_report(coord *c, coord_conn *k, const Odl__CheckpointWritten *w) {
    if (!w->ok) {
        ODL_LOG_ERROR("rank %d could not write the checkpoint of step %" PRId64 ": %s; the last committed one stays step %" PRId64,
                      k->rank, w->step, w->error, c->ck_step);
        return;
    }
    char dir[sizeof c->ck_path];
    if (ckpt_dir_of(w->path, w->step, dir, sizeof dir) != 0) {
        ODL_LOG_ERROR("rank %d reported '%s' as the checkpoint of step %" PRId64 ", which is not a ckpt-<step>.h5 of that "
                      "step: not committed; the last committed one stays step %" PRId64, k->rank, w->path, w->step, c->ck_step);
        return;
    }
    int64_t old_step = c->ck_step, old_epoch = c->ck_epoch, old_cursor = c->ck_cursor;
    uint64_t old_bytes = c->ck_bytes;
    double old_write_ms = c->ck_write_ms, old_time = c->ck_time;
    char old_path[sizeof c->ck_path];
    memcpy(old_path, c->ck_path, sizeof old_path);
    c->ck_step = w->step;
    c->ck_epoch = w->epoch;
    c->ck_cursor = w->cursor;
    snprintf(c->ck_path, sizeof c->ck_path, "%s", w->path);
    c->ck_bytes = w->bytes;
    c->ck_write_ms = w->write_ms;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    c->ck_time = (double)ts.tv_sec + ts.tv_nsec * 1e-9;
    if (coord_commit_save(c) != ODL_OK) {
        ODL_LOG_ERROR("cannot commit the checkpoint of step %" PRId64 ": %s; the last committed one stays %s", w->step,
                      odl_error_msg(), old_path[0] ? old_path : "none");
        /* Relaunches resume from what committed.json says, and nothing is deleted in favour of this one. */
        c->ck_step = old_step, c->ck_epoch = old_epoch, c->ck_cursor = old_cursor;
        c->ck_bytes = old_bytes, c->ck_write_ms = old_write_ms, c->ck_time = old_time;
        memcpy(c->ck_path, old_path, sizeof old_path);
        return;
    }
    int64_t keep = c->o.keep > 0 ? c->o.keep : w->keep;
    if (keep < 1) {
        ODL_LOG_WARN("the report of step %" PRId64 " carries no checkpoint.keep and there is no --keep: deleting none",
                     w->step);
        keep = INT64_MAX;
    }
    int deleted = 0;
    if (odl_ckpt_commit(dir, w->step, w->epoch, w->cursor, keep, &deleted) != ODL_OK)
        ODL_LOG_ERROR("committed checkpoint %s to %s/committed.json, but its directory's manifest: %s (no checkpoint "
                      "deleted)", w->path, c->o.job_dir, odl_error_msg());
    ODL_LOG_INFO("committed checkpoint %s (step %" PRId64 ", %.1f MB written in %.1f ms; keeping %" PRId64
                 ", %d older deleted)", w->path, w->step, (double)w->bytes / 1e6, w->write_ms, keep, deleted);
    if (c->req_active && w->step == c->req_step) {
        c->req_active = 0;
        if (c->req_stop) ODL_LOG_INFO("preemption checkpoint committed; the ranks stop at step %" PRId64, w->step);
    }
}

/* ------------------------------------------------------------------ frames */

static void on_heartbeat(coord *c, coord_conn *k, const Odl__Heartbeat *h) {
    coord_rank *r = &c->ranks[k->rank];
    double now = coord_now(c);
    if (r->first_step < 0) r->first_step = h->step;
    if (h->step != r->step) {
        double dt = now - r->t_progress;
        if (dt > 0 && h->step > r->step) {
            double rate = (double)(h->step - r->step) / dt;
            r->steps_per_s = r->steps_per_s > 0 ? 0.7 * r->steps_per_s + 0.3 * rate : rate;
        }
        r->t_progress = now;
    }
    r->t_heartbeat = now;
    r->step = h->step;
    r->epoch = h->epoch;
    r->cursor = h->cursor;
    r->samples_per_s = h->samples_per_s;
    r->collective_seq = h->collective_seq;
    snprintf(r->waiting_in, sizeof r->waiting_in, "%s", h->waiting_in);
    r->checkpoint_writing = h->checkpoint_writing;
    r->evaluating = h->evaluating;
    /* A rank busy with a checkpoint write or the test set is not stuck: its progress clock runs on, so
     * the first steps after a long write or evaluation are not taken for a hang either. */
    if (r->checkpoint_writing || r->evaluating) r->t_progress = now;
    r->has_gpu = h->has_telemetry;
    if (h->has_telemetry) {
        const double v[6] = {h->gpu_util_pct, h->mem_used_mib, h->mem_total_mib, h->temp_c, h->power_w, h->sm_clock_mhz};
        memcpy(r->gpu, v, sizeof v);
    }
}

static void on_member_msg(coord *c, coord_conn *k, Odl__Envelope *e) {
    switch (e->msg_case) {
    case ODL__ENVELOPE__MSG_HEARTBEAT: on_heartbeat(c, k, e->heartbeat); break;
    case ODL__ENVELOPE__MSG_CHECKPOINT_ACK: on_ack(c, k, e->checkpoint_ack); break;
    case ODL__ENVELOPE__MSG_CHECKPOINT_WRITTEN: on_written_report(c, k, e->checkpoint_written); break;
    case ODL__ENVELOPE__MSG_XID_REPORT:
        coord_xid_report(c, k->rank, e->xid_report);
        break;
    case ODL__ENVELOPE__MSG_WORK_REQUEST: coord_work_request(c, k, k->rank, e->work_request); break;
    case ODL__ENVELOPE__MSG_WORK_DONE: coord_work_done(c, k->rank, e->work_done); break;
    case ODL__ENVELOPE__MSG_GOODBYE:
        k->said_goodbye = 1;
        if (e->goodbye->status == 0) {
            c->ranks[k->rank].finished = 1;
            coord_job_member_done(c);
        } else if (c->state == JOB_RUNNING) {
            coord_job_fail(c, "rank %d (node %s, pid %u) failed with status %d at step %" PRId64 "%s%.300s", k->rank,
                           c->ranks[k->rank].node, c->ranks[k->rank].pid, e->goodbye->status, c->ranks[k->rank].step,
                           e->goodbye->reason[0] ? ": " : "", e->goodbye->reason);
            log_ranks(c);
        }
        break;
    default:
        refuse(k, &c->refused_protocol, "rank %d sent %s, which workers do not send", k->rank, odl_wire_msg_name(e->msg_case));
    }
}

static void on_frame(coord *c, coord_conn *k, Odl__Envelope *e) {
    switch (k->state) {
    case CONN_HELLO: on_hello(c, k, e); break;
    case CONN_PROOF: on_proof(c, k, e); break;
    case CONN_MEMBER: on_member_msg(c, k, e); break;
    case CONN_CLOSING: break;
    }
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
        conn_close(k);
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
                conn_close(k);
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
            refuse(k, &c->refused_protocol, "bad frame: %s", odl_error_msg());
            return;
        }
        if (!e) continue;
        k->len = 0;
        on_frame(c, k, e);
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
    k->t_open = coord_now(c);
    if (c->n_conns > COORD_MAX_CONNS) {
        refuse(k, &c->refused_full, "too many connections (%d)", COORD_MAX_CONNS);
        return;
    }
    uv_tcp_nodelay(&k->tcp, 1);
    uv_read_start((uv_stream_t *)&k->tcp, on_alloc, on_read);
}

odl_status coord_server_start(coord *c) {
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

void coord_conns_close_all(coord *c) {
    for (coord_conn *k = c->conns; k; k = k->next) {
        if (k->state == CONN_MEMBER) k->said_goodbye = 1;
        conn_close(k);
    }
}

/* ------------------------------------------------------------------ liveness (every tick) */

void coord_server_tick(coord *c) {
    double now = coord_now(c);
    for (coord_conn *k = c->conns, *next; k; k = next) {
        next = k->next;
        if ((k->state == CONN_HELLO || k->state == CONN_PROOF) && now - k->t_open > COORD_AUTH_TIMEOUT_S)
            refuse(k, &c->refused_protocol, "no proof of the job secret within %.0f s", COORD_AUTH_TIMEOUT_S);
    }
    if (c->state != JOB_RUNNING && c->state != JOB_STOPPING) return;
    if (!c->world_size) return;
    /* A rank whose heartbeats stopped: SIGSTOPped, or its process is stuck with the socket open. */
    for (int r = 0; r < c->world_size; r++) {
        coord_rank *x = &c->ranks[r];
        if (x->conn && !x->finished && now - x->t_heartbeat > c->o.timeout_s) {
            coord_job_fail(c, "rank %d (node %s, pid %u) sent no heartbeat for %.1f s (timeout %.3g s): stopped or "
                           "stuck at step %" PRId64, r, x->node, x->pid, now - x->t_heartbeat, c->o.timeout_s, x->step);
            log_ranks(c);
            return;
        }
    }
    /* No rank has advanced for the timeout while every rank is registered: the job hangs. The rank
     * (or ranks) at the lowest step and not inside a collective is the one holding the others. */
    int all = 1, progressing = 0, writing = 0;
    double last = 0;
    int64_t min_step = INT64_MAX;
    for (int r = 0; r < c->world_size; r++) {
        coord_rank *x = &c->ranks[r];
        if (!x->conn || x->finished) all = 0;
        if (x->first_step >= 0 && x->step > x->first_step) progressing = 1;
        if (x->checkpoint_writing || x->evaluating) writing = 1;
        if (x->t_progress > last) last = x->t_progress;
        if (x->step < min_step) min_step = x->step;
    }
    if (!all || !progressing || writing || now - last <= c->o.timeout_s) return;
    char blame[256] = "";
    size_t bl = 0;
    for (int pass = 0; pass < 2 && !bl; pass++)
        for (int r = 0; r < c->world_size && bl < sizeof blame - 16; r++) {
            coord_rank *x = &c->ranks[r];
            if (x->step == min_step && (pass == 1 || !x->waiting_in[0]))
                bl += (size_t)snprintf(blame + bl, sizeof blame - bl, "%s%d", bl ? ", " : "", r);
        }
    coord_job_fail(c, "no rank made progress for %.1f s (timeout %.3g s): rank %s hangs at step %" PRId64
                   " while the others wait", now - last, c->o.timeout_s, blame, min_step);
    log_ranks(c);
}
