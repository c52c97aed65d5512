/* Membership, heartbeats, liveness and the checkpoint protocol (docs/coordinator.md "Protocol",
 * "Failure detection"), on the frames conn.c decodes. What the job's supervisor must hear of (a rank
 * that failed or finished, an Xid report) goes out as coord_job_events; the server calls nothing of
 * supervise.c. */
#include <inttypes.h>
#include <math.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coordinator/coord.h"
#include "odl/ckpt.h"
#include "odl/clock.h"
#include "odl/log.h"
#include "odl/strbuf.h"

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
    double now = odl_mono_s();
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

/* Tell the supervisor why the job failed, then what every rank was doing. */
static void fail(coord *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(coord *c, const char *fmt, ...) {
    char why[sizeof c->failure];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    c->job.failed(c, why);
    log_ranks(c);
}

static void on_member_closed(coord *c, coord_conn *k) {
    coord_rank *r = &c->ranks[k->rank];
    r->conn = NULL;
    if (k->said_goodbye) return;
    if (c->state == JOB_RUNNING || c->state == JOB_STOPPING)
        fail(c, "rank %d (node %s, pid %u) disconnected at step %" PRId64 " without saying goodbye: it died "
             "(killed, crashed or exited)", k->rank, r->node, r->pid, r->step);
}

void coord_members_reset(coord *c) {
    for (coord_conn *k = c->conns; k; k = k->next)
        if (k->state == CONN_MEMBER) {
            k->said_goodbye = 1; /* of the ended generation: not a new failure */
            coord_conn_close(k);
        }
    free(c->ranks);
    c->ranks = NULL;
    c->world_size = 0;
}

/* The pending checkpoint request, to k or (k NULL) to every member. */
static void send_request(coord *c, coord_conn *k) {
    Odl__Envelope e = ODL__ENVELOPE__INIT;
    Odl__CheckpointAt at = ODL__CHECKPOINT_AT__INIT;
    at.request_id = c->req.id;
    at.step = c->req.step;
    at.stop = c->req.stop;
    e.msg_case = ODL__ENVELOPE__MSG_CHECKPOINT_AT;
    e.checkpoint_at = &at;
    if (k) coord_conn_send(k, &e);
    else coord_conn_send_members(c, &e);
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
    w.resume_path = c->ck.path;
    w.have_plan = c->have_plan;
    w.seed = c->seed;
    w.epoch = c->ck.path[0] ? c->ck.epoch : 0;
    w.cursor = c->ck.path[0] ? c->ck.cursor : 0;
    w.step = c->ck.path[0] ? c->ck.step : 0;
    e.msg_case = ODL__ENVELOPE__MSG_WELCOME;
    e.welcome = &w;
    coord_conn_send(k, &e);
}

static void on_hello(coord *c, coord_conn *k, Odl__Envelope *e) {
    if (k->state != CONN_HELLO || e->msg_case != ODL__ENVELOPE__MSG_HELLO) {
        coord_conn_refuse(k, &c->refused.protocol, "expected hello first, got %s", odl_wire_msg_name(e->msg_case));
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
    coord_conn_send(k, &out);
}

/* Refuse a connection that proved or claimed a rank: when it claims this generation, the refusal is
 * remembered, so that the generation's failure line names the rank and why (its own stderr may never get
 * through its launcher, and the rank killed with it looks merely dead). */
static void refuse_rank(coord *c, coord_conn *k, uint64_t *counter, const Odl__Hello *h, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void refuse_rank(coord *c, coord_conn *k, uint64_t *counter, const Odl__Hello *h, const char *fmt, ...) {
    char why[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    if (h->generation == c->generation) {
        c->refusal.generation = c->generation;
        snprintf(c->refusal.text, sizeof c->refusal.text, "rank %u was refused before it registered, from %s: %s", h->rank,
                 k->peer, why);
    }
    coord_conn_refuse(k, counter, "%s", why);
}

static void on_proof(coord *c, coord_conn *k, Odl__Envelope *e) {
    if (e->msg_case != ODL__ENVELOPE__MSG_PROOF) {
        coord_conn_refuse(k, &c->refused.protocol, "expected proof, got %s", odl_wire_msg_name(e->msg_case));
        return;
    }
    const Odl__Hello *h = k->hello;
    if (!odl_wire_mac_ok(c->key, k->nonce, h->rank, h->generation, e->proof->mac.data, e->proof->mac.len)) {
        refuse_rank(c, k, &c->refused.auth, h, "wrong job secret (claimed rank %u, generation %" PRIu64 ")", h->rank, h->generation);
        return;
    }
    if (h->generation != c->generation) {
        coord_conn_refuse(k, &c->refused.generation, "rank %u is of generation %" PRIu64 ", the job is at generation %" PRIu64 "%s",
               h->rank, h->generation, c->generation, h->generation < c->generation ? " (an older job)" : " (unknown)");
        return;
    }
    if (c->state != JOB_RUNNING) {
        refuse_rank(c, k, &c->refused.generation, h, "rank %u: generation %" PRIu64 " is ending", h->rank, c->generation);
        return;
    }
    if (h->world_size == 0 || h->world_size > COORD_MAX_RANKS || h->rank >= h->world_size) {
        refuse_rank(c, k, &c->refused.protocol, h, "rank %u of world size %u", h->rank, h->world_size);
        return;
    }
    if (!c->world_size) {
        c->ranks = calloc(h->world_size, sizeof *c->ranks);
        if (!c->ranks) {
            coord_conn_refuse(k, &c->refused.full, "out of memory for %u ranks", h->world_size);
            return;
        }
        c->world_size = (int)h->world_size;
        if (!c->have_plan) { /* the job's first generation: its seed becomes the plan's */
            c->seed = h->seed;
            c->have_plan = 1;
        }
        if (coord_plan_save(c) != ODL_OK) ODL_LOG_ERROR("%s", odl_error_msg());
    } else if ((int)h->world_size != c->world_size) {
        refuse_rank(c, k, &c->refused.protocol, h, "rank %u says world size %u, generation %" PRIu64 " has %d", h->rank,
               h->world_size, c->generation, c->world_size);
        return;
    }
    coord_rank *r = &c->ranks[h->rank];
    if (r->conn || r->finished) {
        refuse_rank(c, k, &c->refused.duplicate, h, "duplicate rank %u (already registered from node %s, pid %u)", h->rank, r->node,
               r->pid);
        return;
    }
    double now = odl_mono_s();
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
    if (c->req.active) send_request(c, k); /* a checkpoint requested before this rank joined */
}

/* ------------------------------------------------------------------ checkpoints */

static void issue_request(coord *c) {
    int64_t max_step = 0;
    double rate = 0;
    for (int r = 0; r < c->world_size; r++) {
        if (c->ranks[r].step > max_step) max_step = c->ranks[r].step;
        if (c->ranks[r].steps_per_s > rate) rate = c->ranks[r].steps_per_s;
    }
    /* Far enough ahead that every rank hears of it before it gets there: a second of steps and 2 more,
     * doubled on each retry. */
    int64_t lead = ((int64_t)ceil(rate) + 2) << c->req.tries;
    c->req.id++;
    c->req.step = max_step + lead;
    c->req.active = 1;
    ODL_LOG_INFO("checkpoint requested%s: every rank stops at the boundary after step %" PRId64 " (request %" PRIu64 ")",
                 c->req.stop ? " for preemption" : "", c->req.step, c->req.id);
    send_request(c, NULL);
}

void coord_request_checkpoint(coord *c, int stop) {
    if (stop) c->req.stop = 1;
    c->req.tries = 0;
    issue_request(c);
}

static void on_ack(coord *c, coord_conn *k, const Odl__CheckpointAck *a) {
    if (a->armed || !c->req.active || a->request_id != c->req.id) return;
    ODL_LOG_WARN("rank %d was already at step %" PRId64 " when checkpoint request %" PRIu64 " (step %" PRId64
                 ") arrived: cancelling it and asking again further ahead", k->rank, a->step, a->request_id, c->req.step);
    Odl__Envelope e = ODL__ENVELOPE__INIT;
    Odl__CheckpointCancel x = ODL__CHECKPOINT_CANCEL__INIT;
    x.request_id = a->request_id;
    e.msg_case = ODL__ENVELOPE__MSG_CHECKPOINT_CANCEL;
    e.checkpoint_cancel = &x;
    coord_conn_send_members(c, &e);
    if (c->req.tries < 5) c->req.tries++;
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
    if (c->state == JOB_FAILING) { /* written after the failure (an application Xid may have spoilt the weights) */
        ODL_LOG_WARN("rank %d wrote the checkpoint of step %" PRId64 " after generation %" PRIu64 " failed: not committed; "
                     "the last committed one stays step %" PRId64, k->rank, w->step, c->generation, c->ck.step);
        return;
    }
    if (!w->ok) {
        ODL_LOG_ERROR("rank %d could not write the checkpoint of step %" PRId64 ": %s; the last committed one stays step %" PRId64,
                      k->rank, w->step, w->error, c->ck.step);
        return;
    }
    char dir[sizeof c->ck.path];
    if (ckpt_dir_of(w->path, w->step, dir, sizeof dir) != 0) {
        ODL_LOG_ERROR("rank %d reported '%s' as the checkpoint of step %" PRId64 ", which is not a ckpt-<step>.h5 of that "
                      "step: not committed; the last committed one stays step %" PRId64, k->rank, w->path, w->step, c->ck.step);
        return;
    }
    const coord_commit old = c->ck;
    c->ck.step = w->step;
    c->ck.epoch = w->epoch;
    c->ck.cursor = w->cursor;
    snprintf(c->ck.path, sizeof c->ck.path, "%s", w->path);
    c->ck.bytes = w->bytes;
    c->ck.write_ms = w->write_ms;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    c->ck.time = (double)ts.tv_sec + ts.tv_nsec * 1e-9;
    if (coord_commit_save(c) != ODL_OK) {
        ODL_LOG_ERROR("cannot commit the checkpoint of step %" PRId64 ": %s; the last committed one stays %s", w->step,
                      odl_error_msg(), old.path[0] ? old.path : "none");
        c->ck = old; /* relaunches resume from what committed.json says; nothing is deleted for this one */
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
    if (c->req.active && w->step == c->req.step) {
        c->req.active = 0;
        if (c->req.stop) ODL_LOG_INFO("preemption checkpoint committed; the ranks stop at step %" PRId64, w->step);
    }
}

/* ------------------------------------------------------------------ frames */

static void on_heartbeat(coord *c, coord_conn *k, const Odl__Heartbeat *h) {
    coord_rank *r = &c->ranks[k->rank];
    double now = odl_mono_s();
    if (r->first_step < 0) r->first_step = h->step;
    if (h->step != r->step) {
        double dt = now - r->t_progress;
        if (dt > 0 && h->step > r->step) {
            double rate = (double)(h->step - r->step) / dt;
            r->steps_per_s = r->steps_per_s > 0 ? (1 - COORD_RATE_EMA_WEIGHT) * r->steps_per_s + COORD_RATE_EMA_WEIGHT * rate
                                                : rate;
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
        r->gpu = (odl_gpu_sample){h->gpu_util_pct, h->mem_used_mib, h->mem_total_mib, h->temp_c, h->power_w, h->sm_clock_mhz};
        odl_gpu_sample_clean(&r->gpu); /* a worker's bytes: what is no reading is unavailable */
    }
}

static void on_member_msg(coord *c, coord_conn *k, Odl__Envelope *e) {
    switch (e->msg_case) {
    case ODL__ENVELOPE__MSG_HEARTBEAT: on_heartbeat(c, k, e->heartbeat); break;
    case ODL__ENVELOPE__MSG_CHECKPOINT_ACK: on_ack(c, k, e->checkpoint_ack); break;
    case ODL__ENVELOPE__MSG_CHECKPOINT_WRITTEN: on_written_report(c, k, e->checkpoint_written); break;
    case ODL__ENVELOPE__MSG_XID_REPORT: c->job.xid(c, k->rank, e->xid_report); break;
    case ODL__ENVELOPE__MSG_WORK_REQUEST: coord_work_request(c, k, k->rank, e->work_request); break;
    case ODL__ENVELOPE__MSG_WORK_DONE: coord_work_done(c, k->rank, e->work_done); break;
    case ODL__ENVELOPE__MSG_GOODBYE:
        k->said_goodbye = 1;
        if (e->goodbye->status == 0) {
            c->ranks[k->rank].finished = 1;
            c->job.member_done(c);
        } else if (c->state == JOB_RUNNING) {
            fail(c, "rank %d (node %s, pid %u) failed with status %d at step %" PRId64 "%s%.300s", k->rank,
                 c->ranks[k->rank].node, c->ranks[k->rank].pid, e->goodbye->status, c->ranks[k->rank].step,
                 e->goodbye->reason[0] ? ": " : "", e->goodbye->reason);
        }
        break;
    default:
        coord_conn_refuse(k, &c->refused.protocol, "rank %d sent %s, which workers do not send", k->rank, odl_wire_msg_name(e->msg_case));
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

odl_status coord_server_start(coord *c) {
    const coord_conn_events ev = {.frame = on_frame, .member_closed = on_member_closed};
    return coord_conn_listen(c, &ev);
}

int coord_ranks_training(const coord *c) {
    for (int r = 0; r < c->world_size; r++)
        if (c->ranks[r].conn && !c->ranks[r].finished) return 1;
    return 0;
}

/* ------------------------------------------------------------------ liveness (every tick) */

static void fail_no_heartbeat(coord *c, int r, double now) {
    const coord_rank *x = &c->ranks[r];
    fail(c, "rank %d (node %s, pid %u) sent no heartbeat for %.1f s (timeout %.3g s): stopped or stuck at step %" PRId64,
         r, x->node, x->pid, now - x->t_heartbeat, c->o.timeout_s, x->step);
}

void coord_server_tick(coord *c) {
    coord_conn_tick(c);
    double now = odl_mono_s();
    if (c->state != JOB_RUNNING && c->state != JOB_STOPPING) return;
    if (!c->world_size) return;
    /* A rank whose heartbeats stopped: SIGSTOPped, or its process is stuck with the socket open. */
    for (int r = 0; r < c->world_size; r++) {
        coord_rank *x = &c->ranks[r];
        if (x->conn && !x->finished && now - x->t_heartbeat > c->o.timeout_s) {
            fail_no_heartbeat(c, r, now);
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
    /* A rank whose heartbeats stopped too (more than 3 intervals ago, the least --timeout allows) is the
     * cause, whichever clock ran out first in this tick: name it as above. */
    int stale = -1;
    for (int r = 0; r < c->world_size; r++)
        if (now - c->ranks[r].t_heartbeat > 3 * c->o.heartbeat_s &&
            (stale < 0 || c->ranks[r].t_heartbeat < c->ranks[stale].t_heartbeat))
            stale = r;
    if (stale >= 0) {
        fail_no_heartbeat(c, stale, now);
        return;
    }
    char blame[256];
    odl_strbuf b;
    odl_strbuf_fixed(&b, blame, sizeof blame);
    for (int pass = 0; pass < 2 && !b.len; pass++)
        for (int r = 0; r < c->world_size; r++) {
            coord_rank *x = &c->ranks[r];
            if (x->step == min_step && (pass == 1 || !x->waiting_in[0])) odl_strbuf_printf(&b, "%s%d", b.len ? ", " : "", r);
        }
    fail(c, "no rank made progress for %.1f s (timeout %.3g s): rank %s hangs at step %" PRId64 " while the others wait",
         now - last, c->o.timeout_s, blame, min_step);
}
