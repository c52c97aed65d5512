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
static odl_status read_json(const coord *c, const char *name, json_t **out) {
    char path[PATH_MAX + 64];
    path_of(c, name, path, sizeof path);
    *out = NULL;
    if (access(path, F_OK) != 0) return ODL_OK;
    json_error_t err;
    json_t *j = json_load_file(path, 0, &err);
    if (!j || !json_is_object(j)) {
        json_decref(j);
        return ODL_ERR(ODL_E_FORMAT, "%s:%d: %s", path, err.line, j ? "not a JSON object" : err.text);
    }
    *out = j;
    return ODL_OK;
}

odl_status coord_state_load(coord *c) {
    json_t *j;
    ODL_CHECK(read_json(c, "state.json", &j));
    if (j) {
        c->generation = (uint64_t)json_integer_value(json_object_get(j, "generation"));
        c->restarts = (int)json_integer_value(json_object_get(j, "restarts"));
        const char *st = json_string_value(json_object_get(j, "status"));
        json_int_t pid = json_integer_value(json_object_get(j, "coordinator_pid"));
        /* The lock is ours, so the coordinator that wrote this is gone: say how it left the job. */
        if (st && strcmp(st, "done") != 0)
            ODL_LOG_WARN("the previous coordinator (pid %lld) ended without finishing the job: generation %llu was "
                         "%s; carrying on from the last committed checkpoint", (long long)pid,
                         (unsigned long long)c->generation, st);
        json_decref(j);
    }
    ODL_CHECK(read_json(c, "committed.json", &j));
    if (j) {
        c->ck_step = json_integer_value(json_object_get(j, "step"));
        /* epochs_completed (the count the dataset plan needs); "epoch" is the 1-based label, as in the
         * checkpoint folder's manifest.json */
        json_t *done = json_object_get(j, "epochs_completed");
        c->ck_epoch = json_integer_value(done ? done : json_object_get(j, "epoch"));
        c->ck_cursor = json_integer_value(json_object_get(j, "cursor"));
        c->ck_bytes = (uint64_t)json_integer_value(json_object_get(j, "bytes"));
        c->ck_write_ms = json_number_value(json_object_get(j, "write_ms"));
        c->ck_time = json_number_value(json_object_get(j, "time"));
        const char *p = json_string_value(json_object_get(j, "path"));
        snprintf(c->ck_path, sizeof c->ck_path, "%s", p ? p : "");
        json_decref(j);
    }
    ODL_CHECK(read_json(c, "plan.json", &j));
    if (j) {
        json_t *s = json_object_get(j, "seed");
        if (json_is_integer(s)) {
            c->seed = (uint64_t)json_integer_value(s);
            c->have_plan = 1;
        }
        json_decref(j);
    }
    return ODL_OK;
}

odl_status coord_state_save(coord *c) {
    const char *st = c->state == JOB_DONE ? "done" : c->child_alive ? "running" : "stopped";
    return write_json(c, "state.json",
                      json_pack("{s:I, s:i, s:I, s:s, s:i}", "generation", (json_int_t)c->generation, "restarts",
                                c->restarts, "process_group", (json_int_t)(c->child_alive ? c->child_pid : 0), "status",
                                st, "coordinator_pid", (int)getpid()));
}

odl_status coord_commit_save(coord *c) {
    json_t *j = json_pack("{s:I, s:I, s:I, s:I, s:s, s:I, s:f, s:f, s:I}", "step", (json_int_t)c->ck_step, "epoch",
                          (json_int_t)odl_ckpt_epoch_label(c->ck_epoch, c->ck_cursor), "epochs_completed",
                          (json_int_t)c->ck_epoch, "cursor", (json_int_t)c->ck_cursor, "path", c->ck_path, "bytes",
                          (json_int_t)c->ck_bytes, "write_ms", c->ck_write_ms, "time", c->ck_time, "generation",
                          (json_int_t)c->generation);
    return write_json(c, "committed.json", j);
}

odl_status coord_plan_save(coord *c) {
    int64_t done = c->ck_path[0] ? c->ck_epoch : 0, cursor = c->ck_path[0] ? c->ck_cursor : 0;
    json_t *j = json_pack("{s:I, s:I, s:I, s:I, s:I, s:s}", "generation", (json_int_t)c->generation, "epoch",
                          (json_int_t)odl_ckpt_epoch_label(done, cursor), "epochs_completed", (json_int_t)done, "cursor",
                          (json_int_t)(c->ck_path[0] ? c->ck_cursor : 0), "step",
                          (json_int_t)(c->ck_path[0] ? c->ck_step : 0), "from_checkpoint", c->ck_path);
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
