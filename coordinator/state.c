/* The coordinator's files in the job directory, all JSON written with jansson, each replaced
 * atomically (temporary file, fsync, rename, fsync of the directory) so that a coordinator killed at
 * any moment leaves the previous version or the new one (docs/coordinator.md "Job directory"):
 *   DIR/state.json        generation (only increases), restarts, the job's process group
 *   DIR/committed.json    the last checkpoint whose write rank 0 reported as successful
 *   DIR/plan.json         this generation's dataset plan: seed, epoch, global sample cursor
 *   DIR/coordinator.json  where this coordinator listens (for tools and tests)
 *   DIR/secret            the job secret (mode 0600), unless --token-file names one */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "coordinator/coord.h"
#include "odl/ckpt.h"
#include "odl/file.h"
#include "odl/json.h"
#include "odl/log.h"

static void path_of(const coord *c, const char *name, char *buf, size_t cap) {
    snprintf(buf, cap, "%s/%s", c->o.job_dir, name);
}

/* Write j to DIR/name durably; takes the reference of j. */
static odl_status write_json(const coord *c, const char *name, json_t *j) {
    char path[PATH_MAX + 64];
    path_of(c, name, path, sizeof path);
    odl_status s = odl_json_save_file(path, j, JSON_INDENT(2) | JSON_SORT_KEYS);
    json_decref(j);
    return s;
}

/* NULL when the file does not exist; an error for a file that is there but unreadable. */
static odl_status read_json(const char *path, json_t **out) {
    *out = NULL;
    odl_status s = odl_json_load_file(path, out);
    if (s == ODL_E_NOTFOUND) {
        odl_error_clear();
        return ODL_OK;
    }
    ODL_CHECK(s);
    if (!json_is_object(*out)) {
        json_decref(*out);
        *out = NULL;
        return ODL_ERR(ODL_E_FORMAT, "%s: not a JSON object", path);
    }
    return ODL_OK;
}

/* A damaged job file is an error naming the field, never a zero: a generation read as 0 would let the
 * workers of an older launch back in (the work queue validates queue.json the same way). */
static odl_status damaged(const char *path, const char *key, const char *want) {
    return ODL_ERR(ODL_E_FORMAT, "%s: \"%s\" is missing or not %s (the file is damaged: repair it, or use a new "
                   "--job-dir)", path, key, want);
}

/* Integer member key >= lo. Absent: *out untouched when !required. */
static odl_status get_int(const json_t *j, const char *path, const char *key, int required, json_int_t lo, json_int_t *out) {
    const json_t *v = json_object_get(j, key);
    if (!v && !required) return ODL_OK;
    if (!json_is_integer(v) || json_integer_value(v) < lo) {
        char want[64];
        snprintf(want, sizeof want, "an integer >= %lld", (long long)lo);
        return damaged(path, key, want);
    }
    *out = json_integer_value(v);
    return ODL_OK;
}

static odl_status get_real(const json_t *j, const char *path, const char *key, double *out) {
    const json_t *v = json_object_get(j, key);
    if (!v) return ODL_OK;
    if (!json_is_number(v)) return damaged(path, key, "a number");
    *out = json_number_value(v);
    return ODL_OK;
}

static odl_status load_state(coord *c, const char *path, const json_t *j) {
    json_int_t gen = 0, restarts = 0, pid = 0;
    ODL_CHECK(get_int(j, path, "generation", 1, 0, &gen)); /* the rule that keeps old workers out */
    ODL_CHECK(get_int(j, path, "restarts", 1, 0, &restarts));
    ODL_CHECK(get_int(j, path, "coordinator_pid", 0, 0, &pid));
    const json_t *status = json_object_get(j, "status");
    if (status && !json_is_string(status)) return damaged(path, "status", "a string");
    c->generation = (uint64_t)gen;
    c->restarts = (int)restarts;
    const char *st = json_string_value(status);
    /* The lock is ours, so the coordinator that wrote this is gone: say how it left the job. */
    if (st && strcmp(st, "done") != 0)
        ODL_LOG_WARN("the previous coordinator (pid %lld) ended without finishing the job: generation %llu was "
                     "%s; carrying on from the last committed checkpoint", (long long)pid,
                     (unsigned long long)c->generation, st);
    return ODL_OK;
}

static odl_status load_commit(coord *c, const char *path, const json_t *j) {
    json_int_t step = 0, epochs = 0, cursor = 0, bytes = 0;
    ODL_CHECK(get_int(j, path, "step", 1, 0, &step));
    /* epochs_completed (the count the dataset plan needs); "epoch" is the 1-based label, as in the
     * checkpoint folder's manifest.json, and stands in only in files written before the count was */
    ODL_CHECK(get_int(j, path, json_object_get(j, "epochs_completed") ? "epochs_completed" : "epoch", 1, 0, &epochs));
    ODL_CHECK(get_int(j, path, "cursor", 1, 0, &cursor));
    ODL_CHECK(get_int(j, path, "bytes", 0, 0, &bytes));
    const char *p = json_string_value(json_object_get(j, "path"));
    if (!p) return damaged(path, "path", "a string");
    double write_ms = 0, when = 0;
    ODL_CHECK(get_real(j, path, "write_ms", &write_ms));
    ODL_CHECK(get_real(j, path, "time", &when));
    c->ck.step = step;
    c->ck.epoch = epochs;
    c->ck.cursor = cursor;
    c->ck.bytes = (uint64_t)bytes;
    c->ck.write_ms = write_ms;
    c->ck.time = when;
    snprintf(c->ck.path, sizeof c->ck.path, "%s", p);
    return ODL_OK;
}

static odl_status load_plan(coord *c, const char *path, const json_t *j) {
    json_int_t seed = 0;
    if (!json_object_get(j, "seed")) return ODL_OK; /* no rank registered yet when it was written */
    ODL_CHECK(get_int(j, path, "seed", 1, LLONG_MIN, &seed)); /* the Hello's uint64 seed, stored as JSON's int64 */
    c->seed = (uint64_t)seed;
    c->have_plan = 1;
    return ODL_OK;
}

odl_status coord_state_load(coord *c) {
    static const struct {
        const char *name;
        odl_status (*load)(coord *, const char *, const json_t *);
    } files[] = {{"state.json", load_state}, {"committed.json", load_commit}, {"plan.json", load_plan}};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[PATH_MAX + 64];
        path_of(c, files[i].name, path, sizeof path);
        json_t *j;
        ODL_CHECK(read_json(path, &j));
        if (!j) continue;
        odl_status s = files[i].load(c, path, j);
        json_decref(j);
        ODL_CHECK(s);
    }
    return ODL_OK;
}

odl_status coord_state_save(coord *c) {
    const char *st = c->state == JOB_DONE ? "done" : c->child.alive ? "running" : "stopped";
    return write_json(c, "state.json",
                      json_pack("{s:I, s:i, s:I, s:s, s:i}", "generation", (json_int_t)c->generation, "restarts",
                                c->restarts, "process_group", (json_int_t)(c->child.alive ? c->child.pid : 0), "status",
                                st, "coordinator_pid", (int)getpid()));
}

odl_status coord_commit_save(coord *c) {
    json_t *j = json_pack("{s:I, s:I, s:I, s:I, s:s, s:I, s:f, s:f, s:I}", "step", (json_int_t)c->ck.step, "epoch",
                          (json_int_t)odl_ckpt_epoch_label(c->ck.epoch, c->ck.cursor), "epochs_completed",
                          (json_int_t)c->ck.epoch, "cursor", (json_int_t)c->ck.cursor, "path", c->ck.path, "bytes",
                          (json_int_t)c->ck.bytes, "write_ms", c->ck.write_ms, "time", c->ck.time, "generation",
                          (json_int_t)c->generation);
    return write_json(c, "committed.json", j);
}

odl_status coord_plan_save(coord *c) {
    int64_t done = c->ck.path[0] ? c->ck.epoch : 0, cursor = c->ck.path[0] ? c->ck.cursor : 0;
    json_t *j = json_pack("{s:I, s:I, s:I, s:I, s:I, s:s}", "generation", (json_int_t)c->generation, "epoch",
                          (json_int_t)odl_ckpt_epoch_label(done, cursor), "epochs_completed", (json_int_t)done, "cursor",
                          (json_int_t)(c->ck.path[0] ? c->ck.cursor : 0), "step",
                          (json_int_t)(c->ck.path[0] ? c->ck.step : 0), "from_checkpoint", c->ck.path);
    if (j && c->have_plan) json_object_set_new(j, "seed", json_integer((json_int_t)c->seed));
    if (j && c->world_size) json_object_set_new(j, "world_size", json_integer(c->world_size));
    return write_json(c, "plan.json", j);
}

odl_status coord_info_save(coord *c) {
    return write_json(c, "coordinator.json",
                      json_pack("{s:s, s:s, s:I, s:i}", "listen", c->advertise, "http", c->http_addr, "generation",
                                (json_int_t)c->generation, "pid", (int)getpid()));
}

odl_status coord_secret_prepare(coord *c) {
    if (!c->o.token_file[0]) {
        snprintf(c->o.token_file, sizeof c->o.token_file, "%s/secret", c->o.job_dir);
        if (sodium_init() < 0) return ODL_ERR(ODL_E_INTERNAL, "libsodium could not be initialised");
        uint8_t raw[32];
        char hex[65];
        randombytes_buf(raw, sizeof raw);
        sodium_bin2hex(hex, sizeof hex, raw, sizeof raw);
        hex[64] = '\n';
        int created = 0; /* a secret already there (a restarted coordinator) is kept: its workers hold it */
        odl_status s = odl_file_write_atomic(c->o.token_file, hex, sizeof hex, ODL_FILE_NO_REPLACE | ODL_FILE_PRIVATE,
                                             &created);
        sodium_memzero(raw, sizeof raw);
        sodium_memzero(hex, sizeof hex);
        if (s != ODL_OK) {
            odl_error_prefix("the job secret %s", c->o.token_file);
            return s;
        }
        if (created) ODL_LOG_INFO("created the job secret %s (mode 0600)", c->o.token_file);
    }
    return odl_wire_key_load(c->o.token_file, c->key);
}
