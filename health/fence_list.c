/* The job's fence list (<job dir>/fence.json, jansson) and what a relaunch makes of it: a hostfile
 * without the fenced hosts, srun --exclude=, and one scontrol drain per node. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "odl/env.h"
#include "odl/file.h"
#include "odl/health.h"
#include "odl/json.h"

extern char **environ;

#define FENCE_FILE "fence.json"

void odl_fence_list_free(odl_fence_list *l) {
    free(l->items);
    memset(l, 0, sizeof *l);
}

static odl_status grow(odl_fence_list *l) {
    if (l->n < l->cap) return ODL_OK;
    int cap = l->cap ? l->cap * 2 : 8;
    odl_fence *p = realloc(l->items, (size_t)cap * sizeof *p);
    if (!p) return ODL_ERR(ODL_E_NOMEM, "fence list of %d", cap);
    l->items = p;
    l->cap = cap;
    return ODL_OK;
}

static int get_str(json_t *o, const char *k, char *dst, size_t cap, int required) {
    json_t *v = json_object_get(o, k);
    if (!v) {
        dst[0] = '\0';
        return !required;
    }
    if (!json_is_string(v) || strlen(json_string_value(v)) >= cap) return 0;
    snprintf(dst, cap, "%s", json_string_value(v));
    return 1;
}

static int get_int(json_t *o, const char *k, int64_t *dst, int required) {
    json_t *v = json_object_get(o, k);
    if (!v) {
        *dst = 0;
        return !required;
    }
    if (json_is_boolean(v)) {
        *dst = json_is_true(v);
        return 1;
    }
    if (!json_is_integer(v)) return 0;
    *dst = json_integer_value(v);
    return 1;
}

odl_status odl_fence_list_load(odl_fence_list *l, const char *job_dir) {
    memset(l, 0, sizeof *l);
    if (snprintf(l->path, sizeof l->path, "%s/%s", job_dir, FENCE_FILE) >= (int)sizeof l->path)
        return ODL_ERR(ODL_E_INVAL, "job directory path too long: %s", job_dir);
    if (access(l->path, F_OK) != 0) return ODL_OK; /* no fence yet */
    json_error_t err;
    json_t *root = json_load_file(l->path, 0, &err);
    if (!root) return ODL_ERR(ODL_E_FORMAT, "%s:%d: %s", l->path, err.line, err.text);
    odl_status s = ODL_OK;
    json_t *arr = json_object_get(root, "fences");
    if (!json_is_object(root) || !json_is_array(arr)) {
        s = ODL_ERR(ODL_E_FORMAT, "%s: want {\"version\": 1, \"fences\": [...]}", l->path);
        goto out;
    }
    size_t i;
    json_t *e;
    json_array_foreach(arr, i, e) {
        odl_fence f;
        memset(&f, 0, sizeof f);
        int64_t xid, gen, drained;
        if (!json_is_object(e) || !get_str(e, "node", f.node, sizeof f.node, 1) || !f.node[0] ||
            !get_int(e, "xid", &xid, 1) || !get_str(e, "gpu", f.gpu, sizeof f.gpu, 0) ||
            !get_int(e, "time", &f.time, 1) || !get_int(e, "generation", &gen, 0) ||
            !get_str(e, "reason", f.reason, sizeof f.reason, 0) || !get_int(e, "drained", &drained, 0) ||
            !get_int(e, "lifted_time", &f.lifted_time, 0) || !get_str(e, "lifted_by", f.lifted_by, sizeof f.lifted_by, 0)) {
            s = ODL_ERR(ODL_E_FORMAT, "%s: fence %zu is malformed (node, xid and time are required)", l->path, i);
            goto out;
        }
        f.xid = (int)xid;
        f.generation = (int)gen;
        f.drained = (int)drained;
        ODL_CHECK_GOTO(grow(l), s, out);
        l->items[l->n++] = f;
    }
out:
    json_decref(root);
    if (s != ODL_OK) {
        char path[sizeof l->path];
        memcpy(path, l->path, sizeof path);
        odl_fence_list_free(l);
        memcpy(l->path, path, sizeof path);
    }
    return s;
}

odl_status odl_fence_list_save(const odl_fence_list *l) {
    json_t *root = json_object(), *arr = json_array();
    if (!root || !arr) {
        json_decref(root);
        json_decref(arr);
        return ODL_ERR(ODL_E_NOMEM, "fence list JSON");
    }
    json_object_set_new(root, "version", json_integer(1));
    for (int i = 0; i < l->n; i++) {
        const odl_fence *f = &l->items[i];
        json_t *o = json_pack("{s:s, s:i, s:s, s:I, s:i, s:s, s:b, s:I, s:s}", "node", f->node, "xid", f->xid, "gpu",
                              f->gpu, "time", (json_int_t)f->time, "generation", f->generation, "reason", f->reason,
                              "drained", f->drained, "lifted_time", (json_int_t)f->lifted_time, "lifted_by",
                              f->lifted_by);
        if (!o) {
            json_decref(arr);
            json_decref(root);
            return ODL_ERR(ODL_E_INTERNAL, "fence %d of %s does not encode as JSON (not UTF-8?)", i, l->path);
        }
        json_array_append_new(arr, o);
    }
    json_object_set_new(root, "fences", arr);
    odl_status s = odl_json_save_file(l->path, root, JSON_INDENT(2) | JSON_SORT_KEYS);
    json_decref(root);
    return s;
}

const odl_fence *odl_fence_find(const odl_fence_list *l, const char *node) {
    for (int i = 0; i < l->n; i++)
        if (!l->items[i].lifted_time && !strcmp(l->items[i].node, node)) return &l->items[i];
    return NULL;
}

odl_status odl_fence_add(odl_fence_list *l, const odl_fence *f, int *added) {
    if (added) *added = 0;
    if (!f->node[0]) return ODL_ERR(ODL_E_INVAL, "fence without a node name");
    if (odl_fence_find(l, f->node)) return ODL_OK;
    ODL_CHECK(grow(l));
    odl_fence e = *f;
    if (!e.time) e.time = (int64_t)time(NULL);
    e.lifted_time = 0;
    e.lifted_by[0] = '\0';
    e.drained = 0;
    if (!e.reason[0]) {
        const char *gpu = e.gpu[0] ? e.gpu : "unknown GPU";
        if (e.xid == ODL_XID_BUS_LOST) snprintf(e.reason, sizeof e.reason, "odl: GPU fallen off the bus on %s", gpu);
        else snprintf(e.reason, sizeof e.reason, "odl: Xid %d on %s", e.xid, gpu);
    }
    l->items[l->n++] = e;
    odl_status s = odl_fence_list_save(l);
    if (s != ODL_OK) {
        l->n--;
        return s;
    }
    if (added) *added = 1;
    return ODL_OK;
}

odl_status odl_fence_lift(odl_fence_list *l, const char *node, const char *by) {
    odl_fence *f = (odl_fence *)odl_fence_find(l, node);
    if (!f) return ODL_ERR(ODL_E_NOTFOUND, "node %s is not fenced in %s", node, l->path);
    f->lifted_time = (int64_t)time(NULL);
    snprintf(f->lifted_by, sizeof f->lifted_by, "%s", by && by[0] ? by : "operator");
    odl_status s = odl_fence_list_save(l);
    if (s != ODL_OK) f->lifted_time = 0;
    return s;
}

odl_status odl_fence_write_hostfile(const odl_fence_list *l, const char *in_path, const char *out_path, int *kept) {
    *kept = 0;
    FILE *in = fopen(in_path, "r");
    if (!in) return ODL_ERR(ODL_E_IO, "cannot open hostfile %s: %s", in_path, strerror(errno));
    odl_file_tmp out;
    odl_status s = odl_file_begin(&out, out_path, 0);
    if (s != ODL_OK) {
        fclose(in);
        return s;
    }
    char line[1024];
    while (fgets(line, sizeof line, in)) {
        char host[256] = "";
        const char *p = line;
        while (*p == ' ' || *p == '\t') p++;
        if (*p != '#' && *p != '\n' && *p) sscanf(p, "%255s", host);
        if (host[0] && odl_fence_find(l, host)) {
            fprintf(out.f, "# %s fenced by odl (%s)\n", host, odl_fence_find(l, host)->reason);
            continue;
        }
        if (host[0]) (*kept)++;
        fputs(line, out.f);
    }
    int bad = ferror(in);
    fclose(in);
    if (bad) {
        odl_file_abort(&out);
        return ODL_ERR(ODL_E_IO, "reading hostfile %s failed", in_path);
    }
    if (*kept == 0) {
        odl_file_abort(&out);
        return ODL_ERR(ODL_E_INVAL, "every host of %s is fenced: nothing left to relaunch on", in_path);
    }
    /* durable: a relaunch after a power cut must not find the fenced node back in its hostfile */
    return odl_file_commit(&out, NULL);
}

odl_status odl_fence_srun_exclude(const odl_fence_list *l, char *buf, size_t cap) {
    size_t off = 0;
    if (cap) buf[0] = '\0';
    for (int i = 0; i < l->n; i++) {
        const odl_fence *f = &l->items[i];
        if (f->lifted_time) continue;
        int dup = 0;
        for (int j = 0; j < i; j++) dup |= !l->items[j].lifted_time && !strcmp(l->items[j].node, f->node);
        if (dup) continue;
        int n = snprintf(buf + off, cap - off, "%s%s", off ? "," : "--exclude=", f->node);
        if (n < 0 || (size_t)n >= cap - off) return ODL_ERR(ODL_E_INVAL, "srun --exclude list exceeds %zu bytes", cap);
        off += (size_t)n;
    }
    return ODL_OK;
}

/* Run argv (no shell: node names and reasons travel as arguments). Returns the exit status, or -1. */
static int run_argv(char *const argv[]) {
    pid_t pid;
    if (posix_spawnp(&pid, argv[0], NULL, NULL, argv, environ) != 0) return -1;
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

odl_status odl_fence_drain(odl_fence_list *l, int *issued) {
    *issued = 0;
    odl_status s = ODL_OK;
    const char *scontrol = odl_env_str(ODL_ENV_SCONTROL);
    for (int i = 0; i < l->n; i++) {
        odl_fence *f = &l->items[i];
        if (f->lifted_time || f->drained) continue;
        char node_arg[160], reason_arg[200];
        snprintf(node_arg, sizeof node_arg, "NodeName=%s", f->node);
        snprintf(reason_arg, sizeof reason_arg, "Reason=%s (generation %d)", f->reason, f->generation);
        char *argv[] = {(char *)scontrol, "update", node_arg, "State=DRAIN", reason_arg, NULL};
        int rc = run_argv(argv);
        if (rc != 0) {
            if (s == ODL_OK)
                s = ODL_ERR(ODL_E_IO, "%s update NodeName=%s State=DRAIN failed (%s %d)", scontrol, f->node,
                            rc < 0 ? "could not start, errno" : "exit status", rc < 0 ? errno : rc);
            continue;
        }
        f->drained = 1;
        (*issued)++;
        odl_status ss = odl_fence_list_save(l);
        if (ss != ODL_OK && s == ODL_OK) s = ss;
    }
    return s;
}
