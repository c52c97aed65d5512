/* The evaluation work queue (docs/coordinator.md "Evaluation work queue"). odl_worker --task=eval
 * under the coordinator asks for chunks of the evaluation order (WorkRequest) instead of taking a
 * contiguous shard, so that the images of a rank that dies or lags are evaluated by others:
 *   - a chunk is `chunk_items` consecutive images (one batch of val.py's plan); chunks are handed out
 *     lowest index first to whichever rank asks;
 *   - a rank writes the chunk's per-image statistics to DIR/eval/chunk-NNNNNN.bin itself (temporary
 *     file, fsync, link: never replaced) and then reports WorkDone; only then is the chunk done, and
 *     the done set is persisted in DIR/eval/queue.json (atomic replace), so a relaunch (a new
 *     generation) or a restarted coordinator evaluates only the chunks not done;
 *   - a chunk whose holder is gone (another generation, a closed connection) is free again; when no
 *     chunk is free, a chunk held longer than COORD_WQ_STRAGGLER_FACTOR x the mean chunk time (and at
 *     least COORD_WQ_STRAGGLER_MIN_S) is handed to the asking rank as well, as MapReduce's backup tasks
 *     (Dean & Ghemawat, OSDI 2004): the first result wins, the other is discarded, so no image is
 *     counted twice;
 *   - when every chunk is done the answer is `finished`: rank 0 reads the chunk files in order and
 *     computes the metrics once.
 * Any bytes a worker sends end at worst in an error answer or a warning: sizes, indices and the key
 * are checked before use. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "coordinator/coord.h"
#include "odl/clock.h"
#include "odl/coord_client.h"
#include "odl/json.h"
#include "odl/log.h"
#include "odl/strbuf.h"

#define COORD_WQ_MAX_CHUNKS (1 << 24)
#define COORD_WQ_MAX_KEY 4096
#define COORD_WQ_STRAGGLER_FACTOR 3.0
#define COORD_WQ_STRAGGLER_MIN_S 1.0

typedef struct wq_hold {
    int rank;
    uint64_t generation;
    double t_join, t_given; /* the rank's registration time (tells a re-registered rank apart), hand-out time */
} wq_hold;

typedef struct wq_chunk {
    uint8_t done;
    uint8_t n_hold;
    wq_hold hold[2];          /* the holder and at most one backup */
    uint64_t given_generation; /* last hand-out (0: never, in this coordinator's life) */
    int given_rank;
    int winner;                /* the rank whose result was kept (-1: before this coordinator) */
} wq_chunk;

struct coord_wq {
    char *key;
    int64_t n_items, chunk_items, n_chunks, n_done, lo; /* lo: no chunk below it is free */
    wq_chunk *ch;
    double sum_s;        /* durations of the chunks done by a rank this coordinator handed them to */
    int64_t n_timed;
    uint64_t announced;  /* the generation whose first request was logged */
    int complete_logged;
    double t_complete;   /* when the last chunk was done (coordinator clock), 0 before */
    uint64_t ended;      /* the generation whose stuck holders were shut down */
    char dir[PATH_MAX + 16]; /* DIR/eval */
};

static int64_t chunk_first(const struct coord_wq *q, int64_t k) {
    return k * q->chunk_items;
}
static int64_t chunk_count(const struct coord_wq *q, int64_t k) {
    int64_t n = q->n_items - chunk_first(q, k);
    return n < q->chunk_items ? n : q->chunk_items;
}

static int hold_live(const coord *c, const wq_hold *h) {
    return h->generation == c->generation && c->ranks && h->rank >= 0 && h->rank < c->world_size &&
           c->ranks[h->rank].conn && c->ranks[h->rank].t_join == h->t_join;
}

/* Drop holds that are no longer live, and the hold of `rank` when rank >= 0. */
static void prune(const coord *c, wq_chunk *x, int rank) {
    int n = 0;
    for (int i = 0; i < x->n_hold; i++)
        if (hold_live(c, &x->hold[i]) && x->hold[i].rank != rank) x->hold[n++] = x->hold[i];
    x->n_hold = (uint8_t)n;
}

/* "3, 5-9, 12" of the chunks where pick() holds, into buf. */
static void ranges(const struct coord_wq *q, int (*pick)(const struct coord_wq *, int64_t, uint64_t), uint64_t gen,
                   char *buf, size_t cap) {
    odl_strbuf b;
    odl_strbuf_fixed(&b, buf, cap);
    for (int64_t k = 0; k < q->n_chunks && !b.truncated; k++) {
        if (!pick(q, k, gen)) continue;
        int64_t e = k;
        while (e + 1 < q->n_chunks && pick(q, e + 1, gen)) e++;
        odl_strbuf_printf(&b, e > k ? "%s%" PRId64 "-%" PRId64 : "%s%" PRId64, b.len ? ", " : "", k, e);
        k = e;
    }
}
static int pick_requeued(const struct coord_wq *q, int64_t k, uint64_t gen) {
    return !q->ch[k].done && q->ch[k].given_generation && q->ch[k].given_generation < gen;
}
static int pick_not_done(const struct coord_wq *q, int64_t k, uint64_t gen) {
    (void)gen;
    return !q->ch[k].done;
}

/* A new queue owns no results yet: chunk files left in dir without a queue.json (it was removed) would
 * otherwise be taken for this queue's, since a worker never replaces a chunk file. */
static void wq_remove_stale(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (strncmp(e->d_name, "chunk-", 6) != 0 || !strstr(e->d_name, ".bin")) continue; /* and their .tmp files */
        char path[PATH_MAX + 300];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (unlink(path) == 0) n++;
    }
    closedir(d);
    if (n) ODL_LOG_WARN("evaluation queue: removed %d chunk file%s of an earlier queue from %s", n, n == 1 ? "" : "s", dir);
}

static odl_status wq_save(const struct coord_wq *q) {
    json_t *j = json_object(), *done = json_array();
    if (!j || !done) {
        json_decref(j);
        json_decref(done);
        return ODL_ERR(ODL_E_NOMEM, "%s/queue.json", q->dir);
    }
    for (int64_t k = 0; k < q->n_chunks; k++)
        if (q->ch[k].done) json_array_append_new(done, json_integer(k));
    json_object_set_new(j, "key", json_string(q->key));
    json_object_set_new(j, "n_items", json_integer(q->n_items));
    json_object_set_new(j, "chunk_items", json_integer(q->chunk_items));
    json_object_set_new(j, "n_chunks", json_integer(q->n_chunks));
    json_object_set_new(j, "n_done", json_integer(q->n_done));
    json_object_set_new(j, "done", done);
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/queue.json", q->dir);
    odl_status s = odl_json_save_file(path, j, JSON_INDENT(1) | JSON_SORT_KEYS);
    json_decref(j);
    return s;
}

/* The queue of this job directory: DIR/eval/queue.json when it exists (it must be of the same
 * evaluation), else a new one. */
static odl_status wq_open(coord *c, const Odl__WorkRequest *r, struct coord_wq **out) {
    *out = NULL;
    if (!r->key || !r->key[0] || strlen(r->key) > COORD_WQ_MAX_KEY)
        return ODL_ERR(ODL_E_INVAL, "work request without a key of at most %d bytes", COORD_WQ_MAX_KEY);
    if (r->n_items < 0 || r->n_items > (int64_t)COORD_WQ_MAX_CHUNKS << 20 || r->chunk_items < 1 || r->chunk_items > (1 << 20) ||
        (r->n_items + r->chunk_items - 1) / r->chunk_items > COORD_WQ_MAX_CHUNKS)
        return ODL_ERR(ODL_E_INVAL, "work request of %" PRId64 " images in chunks of %" PRId64
                       " (at most %d chunks of at most %d images)", r->n_items, r->chunk_items, COORD_WQ_MAX_CHUNKS, 1 << 20);
    struct coord_wq *q = calloc(1, sizeof *q);
    if (!q) return ODL_ERR(ODL_E_NOMEM, "work queue");
    snprintf(q->dir, sizeof q->dir, "%s/eval", c->o.job_dir);
    q->key = strdup(r->key);
    q->n_items = r->n_items;
    q->chunk_items = r->chunk_items;
    q->n_chunks = (r->n_items + r->chunk_items - 1) / r->chunk_items;
    q->ch = calloc((size_t)(q->n_chunks ? q->n_chunks : 1), sizeof *q->ch);
    odl_status s = ODL_OK;
    json_t *j = NULL;
    if (!q->key || !q->ch) {
        s = ODL_ERR(ODL_E_NOMEM, "work queue of %" PRId64 " chunks", q->n_chunks);
        goto fail;
    }
    if (mkdir(q->dir, 0755) != 0 && errno != EEXIST) {
        s = ODL_ERR(ODL_E_IO, "cannot create %s: %s", q->dir, strerror(errno));
        goto fail;
    }
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/queue.json", q->dir);
    s = odl_json_load_file(path, &j);
    if (s == ODL_E_NOTFOUND) {
        s = ODL_OK;
        wq_remove_stale(q->dir);
        ODL_LOG_INFO("evaluation queue: %" PRId64 " images in %" PRId64 " chunks of %" PRId64 ", results in %s", q->n_items,
                     q->n_chunks, q->chunk_items, q->dir);
        ODL_CHECK_GOTO(wq_save(q), s, fail);
        *out = q;
        return ODL_OK;
    }
    if (s != ODL_OK) goto fail;
    const char *key = json_string_value(json_object_get(j, "key"));
    json_t *done = json_object_get(j, "done");
    if (!key || !json_is_array(done)) {
        s = ODL_ERR(ODL_E_FORMAT, "%s: no key or done list (damaged; remove %s to evaluate again)", path, q->dir);
        goto fail;
    }
    if (strcmp(key, q->key) || odl_json_int(j, "n_items", -1) != q->n_items ||
        odl_json_int(j, "chunk_items", -1) != q->chunk_items) {
        s = ODL_ERR(ODL_E_CONFIG, "%s is of another evaluation (%s, %lld images in chunks of %lld), not this one (%s, %"
                    PRId64 " in chunks of %" PRId64 "): use another --job-dir or remove %s", path, key,
                    odl_json_int(j, "n_items", -1), odl_json_int(j, "chunk_items", -1), q->key, q->n_items,
                    q->chunk_items, q->dir);
        goto fail;
    }
    size_t i;
    json_t *v;
    json_array_foreach(done, i, v) {
        json_int_t k = json_integer_value(v);
        if (!json_is_integer(v) || k < 0 || k >= q->n_chunks) {
            s = ODL_ERR(ODL_E_FORMAT, "%s: done[%zu] is not a chunk index in 0..%" PRId64, path, i, q->n_chunks - 1);
            goto fail;
        }
        if (!q->ch[k].done) q->n_done++;
        q->ch[k].done = 1;
        q->ch[k].winner = -1;
    }
    json_decref(j);
    char list[512];
    ranges(q, pick_not_done, 0, list, sizeof list);
    ODL_LOG_INFO("evaluation queue: %s: %" PRId64 " of %" PRId64 " chunks done before%s%s", path, q->n_done, q->n_chunks,
                 list[0] ? "; to evaluate: " : "", list);
    *out = q;
    return ODL_OK;
fail:
    json_decref(j);
    free(q->key);
    free(q->ch);
    free(q);
    return s;
}

static void reply(coord_conn *k, Odl__WorkItem *w) {
    Odl__Envelope e = ODL__ENVELOPE__INIT;
    e.msg_case = ODL__ENVELOPE__MSG_WORK_ITEM;
    e.work_item = w;
    coord_conn_send(k, &e);
}

/* The first request of a generation: say what it resumes from. */
static void announce(coord *c, struct coord_wq *q) {
    if (q->announced == c->generation) return;
    q->announced = c->generation;
    char re[512], left[512];
    ranges(q, pick_requeued, c->generation, re, sizeof re);
    if (!re[0] && !q->n_done) return; /* a fresh queue */
    ranges(q, pick_not_done, 0, left, sizeof left);
    ODL_LOG_INFO("evaluation queue: generation %" PRIu64 " resumes: %" PRId64 " of %" PRId64 " chunks done; re-queued "
                 "(handed out before, not done): %s; to evaluate: %s", c->generation, q->n_done, q->n_chunks,
                 re[0] ? re : "none", left[0] ? left : "none");
}

static void give(coord *c, struct coord_wq *q, int64_t k, int rank, int backup, Odl__WorkItem *w) {
    wq_chunk *x = &q->ch[k];
    wq_hold *h = &x->hold[x->n_hold++];
    h->rank = rank;
    h->generation = c->generation;
    h->t_join = c->ranks[rank].t_join;
    h->t_given = odl_mono_s();
    x->given_generation = c->generation;
    x->given_rank = rank;
    w->chunk = k;
    w->first = chunk_first(q, k);
    w->count = chunk_count(q, k);
    w->backup = backup;
    if (!backup)
        ODL_LOG_INFO("evaluation chunk %" PRId64 " (images %" PRId64 "..%" PRId64 ") to rank %d", k, w->first,
                     w->first + w->count - 1, rank);
}

void coord_work_request(coord *c, coord_conn *k, int rank, const Odl__WorkRequest *r) {
    Odl__WorkItem w = ODL__WORK_ITEM__INIT;
    char err[1024] = "";
    w.chunk = -1;
    if (!c->wq && wq_open(c, r, &c->wq) != ODL_OK) snprintf(err, sizeof err, "%s", odl_error_msg_user());
    struct coord_wq *q = c->wq;
    if (q && !err[0] && (!r->key || strcmp(r->key, q->key) || r->n_items != q->n_items || r->chunk_items != q->chunk_items))
        snprintf(err, sizeof err, "rank %d asks for another evaluation (%.200s, %" PRId64 " images in chunks of %" PRId64
                 ") than the job's (%.200s, %" PRId64 " in chunks of %" PRId64 ")", rank, r->key ? r->key : "",
                 r->n_items, r->chunk_items, q->key, q->n_items, q->chunk_items);
    if (err[0]) {
        ODL_LOG_ERROR("evaluation queue: %s", err);
        w.error = err;
        reply(k, &w);
        return;
    }
    w.dir = q->dir;
    w.n_chunks = q->n_chunks;
    announce(c, q);
    /* A rank asks when it has finished (or given up) its chunk: it holds none from now on. */
    for (int64_t i = q->lo; i < q->n_chunks; i++)
        if (q->ch[i].n_hold) prune(c, &q->ch[i], rank);
    if (q->n_done == q->n_chunks) {
        if (!q->complete_logged)
            ODL_LOG_INFO("evaluation queue complete: all %" PRId64 " chunks done; rank 0 computes the metrics", q->n_chunks);
        q->complete_logged = 1;
        w.finished = 1;
        reply(k, &w);
        return;
    }
    while (q->lo < q->n_chunks && q->ch[q->lo].done) q->lo++;
    for (int64_t i = q->lo; i < q->n_chunks; i++)
        if (!q->ch[i].done && !q->ch[i].n_hold) {
            give(c, q, i, rank, 0, &w);
            reply(k, &w);
            return;
        }
    /* Nothing free: back up the longest-held straggler, if one is far behind the mean. */
    double now = odl_mono_s(), mean = q->n_timed ? q->sum_s / (double)q->n_timed : 0, worst = 0;
    double limit = COORD_WQ_STRAGGLER_FACTOR * mean;
    if (limit < COORD_WQ_STRAGGLER_MIN_S) limit = COORD_WQ_STRAGGLER_MIN_S;
    int64_t pick = -1;
    for (int64_t i = q->lo; q->n_timed && i < q->n_chunks; i++) {
        const wq_chunk *x = &q->ch[i];
        if (x->done || x->n_hold != 1 || x->hold[0].rank == rank) continue;
        double held = now - x->hold[0].t_given;
        if (held > limit && held > worst) worst = held, pick = i;
    }
    if (pick >= 0) {
        const wq_hold *h = &q->ch[pick].hold[0];
        ODL_LOG_WARN("evaluation chunk %" PRId64 " held by rank %d for %.1f s (%.1fx the mean chunk time %.2f s): handed "
                     "to rank %d too; the first result wins", pick, h->rank, worst, mean > 0 ? worst / mean : 0, mean, rank);
        give(c, q, pick, rank, 1, &w);
        reply(k, &w);
        return;
    }
    w.retry_ms = (uint32_t)(c->o.heartbeat_s * 500 + 0.5);
    if (w.retry_ms < 10) w.retry_ms = 10;
    reply(k, &w);
}

void coord_work_done(coord *c, int rank, const Odl__WorkDone *d) {
    struct coord_wq *q = c->wq;
    if (!q || d->chunk < 0 || d->chunk >= q->n_chunks) {
        ODL_LOG_WARN("rank %d reported evaluation chunk %" PRId64 " done, which is not a chunk of this job's queue%s", rank,
                     d->chunk, q ? "" : " (none)");
        return;
    }
    wq_chunk *x = &q->ch[d->chunk];
    char path[PATH_MAX + 64];
    struct stat sb;
    snprintf(path, sizeof path, "%s/" ODL_COORD_CHUNK_FILE, q->dir, d->chunk);
    if (!x->done && stat(path, &sb) != 0) { /* done means its results are on disk, whatever a worker says */
        ODL_LOG_WARN("rank %d reported evaluation chunk %" PRId64 " done, but %s is not there (%s): not done",
                     rank, d->chunk, path, strerror(errno));
        return;
    }
    double held = -1;
    for (int i = 0; i < x->n_hold; i++)
        if (x->hold[i].rank == rank && hold_live(c, &x->hold[i])) held = odl_mono_s() - x->hold[i].t_given;
    prune(c, x, rank);
    if (x->done) {
        if (x->winner >= 0)
            ODL_LOG_INFO("evaluation chunk %" PRId64 " from rank %d discarded: rank %d's result came first", d->chunk, rank,
                         x->winner);
        else
            ODL_LOG_INFO("evaluation chunk %" PRId64 " from rank %d discarded: it was done before", d->chunk, rank);
        return;
    }
    x->done = 1;
    x->winner = rank;
    q->n_done++;
    if (held >= 0 && d->kept) {
        q->sum_s += held;
        q->n_timed++;
    }
    if (q->n_done == q->n_chunks) q->t_complete = odl_mono_s();
    odl_status s = wq_save(q);
    if (s != ODL_OK) ODL_LOG_ERROR("evaluation queue: %s (a relaunch evaluates chunk %" PRId64 " again)", odl_error_msg(), d->chunk);
    ODL_LOG_INFO("evaluation chunk %" PRId64 " done by rank %d%s (%" PRId64 " of %" PRId64 ")", d->chunk, rank,
                 d->kept ? "" : ": its file was already there (an earlier result, kept)", q->n_done, q->n_chunks);
}

/* Every tick: once the queue is finished, a rank still holding a chunk (someone else's result won) for
 * --timeout after the last chunk was done, while every other rank has finished, is stuck (it sleeps,
 * loops or waits on something that never comes: a slow rank would have finished its copy and gone).
 * It is told to end (Shutdown): the job's command then fails and the next generation, whose queue is
 * finished, only computes the metrics again. Without this the launcher would wait for it forever. */
void coord_work_tick(coord *c) {
    struct coord_wq *q = c->wq;
    if (!q || !q->t_complete || q->ended == c->generation || c->state != JOB_RUNNING || !c->world_size) return;
    if (odl_mono_s() - q->t_complete <= c->o.timeout_s) return;
    int stuck = 0;
    for (int r = 0; r < c->world_size; r++) {
        const coord_rank *x = &c->ranks[r];
        if (!x->conn || x->finished) continue;
        int holds = 0;
        for (int64_t k = 0; k < q->n_chunks && !holds; k++)
            for (int i = 0; i < q->ch[k].n_hold; i++) holds |= q->ch[k].hold[i].rank == r && hold_live(c, &q->ch[k].hold[i]);
        if (!holds) return; /* a rank still at work without a chunk (rank 0 computing the metrics): wait */
        stuck++;
    }
    if (!stuck) return;
    q->ended = c->generation;
    char why[256];
    snprintf(why, sizeof why, "the evaluation is complete and this rank still holds a chunk that another rank "
             "finished, %.1f s after the last one (--timeout)", odl_mono_s() - q->t_complete);
    for (int r = 0; r < c->world_size; r++) {
        const coord_rank *x = &c->ranks[r];
        if (!x->conn || x->finished) continue;
        ODL_LOG_ERROR("evaluation queue: rank %d (node %s, pid %u) is stuck: %s; ending it", r, x->node, x->pid, why);
        coord_conn_send_shutdown(c, x->conn, why);
    }
}

void coord_work_free(coord *c) {
    if (!c->wq) return;
    free(c->wq->key);
    free(c->wq->ch);
    free(c->wq);
    c->wq = NULL;
}
