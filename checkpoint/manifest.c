/* Checkpoint directories without HDF5 (odl/ckpt.h, docs/checkpoint_format.md): file names, the listing,
 * manifest.json and the commit with retention. The control plane's part of the checkpoint layer:
 * odl_coordinator commits what a rank wrote through it, and links no HDF5. */
#include "odl/ckpt.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "odl/json.h"
#include "odl/log.h"

/* ---------------------------------------------------------------------------------------------- */
/* Names                                                                                            */

void odl_ckpt_file_name(int64_t step, char *buf, size_t cap) { snprintf(buf, cap, "ckpt-%08" PRId64 ".h5", step); }

int odl_ckpt_parse_file_name(const char *name, int64_t *step) {
    if (!name || strncmp(name, "ckpt-", 5) != 0) return 0;
    const char *p = name + 5;
    int64_t v = 0;
    int digits = 0;
    while (*p >= '0' && *p <= '9') {
        if (v > (INT64_MAX - 9) / 10) return 0;
        v = v * 10 + (*p - '0');
        p++;
        digits++;
    }
    if (digits == 0 || strcmp(p, ".h5") != 0) return 0;
    if (step) *step = v;
    return 1;
}

/* ---------------------------------------------------------------------------------------------- */
/* Directory                                                                                        */

static int entry_cmp(const void *a, const void *b) {
    const odl_ckpt_entry *x = a, *y = b;
    if (x->step != y->step) return x->step < y->step ? 1 : -1; /* newest first */
    return strcmp(x->name, y->name);
}

odl_status odl_ckpt_list(const char *dir, odl_ckpt_entry **out, size_t *n) {
    *out = NULL;
    *n = 0;
    struct stat sb;
    if (stat(dir, &sb) != 0) {
        int e = errno;
        if (e == ENOENT) return ODL_ERR(ODL_E_NOTFOUND, "checkpoint directory %s does not exist", dir);
        return ODL_ERR(ODL_E_IO, "checkpoint directory %s: %s", dir, strerror(e));
    }
    if (!S_ISDIR(sb.st_mode)) return ODL_ERR(ODL_E_IO, "checkpoint directory %s is not a directory", dir);
    DIR *d = opendir(dir);
    if (!d) return ODL_ERR(ODL_E_IO, "cannot list checkpoint directory %s: %s", dir, strerror(errno));
    odl_ckpt_entry *v = NULL;
    size_t cnt = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        int64_t step;
        if (!odl_ckpt_parse_file_name(de->d_name, &step) || strlen(de->d_name) >= sizeof v[0].name) continue;
        if (cnt == cap) {
            size_t nc = cap ? cap * 2 : 16;
            odl_ckpt_entry *nv = realloc(v, nc * sizeof *nv);
            if (!nv) {
                free(v);
                closedir(d);
                return ODL_ERR(ODL_E_NOMEM, "listing %s", dir);
            }
            v = nv;
            cap = nc;
        }
        v[cnt].step = step;
        snprintf(v[cnt].name, sizeof v[cnt].name, "%.63s", de->d_name); /* ckpt-<step>.h5 names are short */
        cnt++;
    }
    closedir(d);
    if (cnt) qsort(v, cnt, sizeof *v, entry_cmp);
    *out = v;
    *n = cnt;
    return ODL_OK;
}

odl_status odl_ckpt_manifest_write(const char *dir, const odl_ckpt_entry *kept, size_t n, int64_t epochs_done,
                                   int64_t cursor) {
    if (n == 0) return ODL_ERR(ODL_E_INVAL, "manifest of %s without checkpoints", dir);
    json_t *names = json_array();
    for (size_t i = 0; i < n; i++) json_array_append_new(names, json_string(kept[i].name));
    json_t *m = json_pack("{s:s,s:i,s:s,s:I,s:I,s:I,s:I,s:o}", "format", ODL_CKPT_MANIFEST_FORMAT, "format_version",
                          ODL_CKPT_FORMAT_VERSION, "latest", kept[0].name, "step", (json_int_t)kept[0].step, "epoch",
                          (json_int_t)odl_ckpt_epoch_label(epochs_done, cursor), "epochs_completed",
                          (json_int_t)epochs_done, "cursor", (json_int_t)cursor, "checkpoints", names);
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, ODL_CKPT_MANIFEST);
    odl_status s = odl_json_save_file(path, m, ODL_JSON_FLAGS | JSON_INDENT(2));
    json_decref(m);
    return s;
}

odl_status odl_ckpt_commit(const char *dir, int64_t step, int64_t epochs_done, int64_t cursor, int64_t keep,
                           int *n_deleted) {
    if (n_deleted) *n_deleted = 0;
    if (keep < 1) keep = 1;
    char name[64];
    odl_ckpt_file_name(step, name, sizeof name);
    odl_ckpt_entry *all = NULL;
    size_t n = 0;
    ODL_CHECK(odl_ckpt_list(dir, &all, &n));
    int found = 0;
    for (size_t i = 0; i < n; i++) found |= all[i].step == step && !strcmp(all[i].name, name);
    odl_ckpt_entry *kept = found ? calloc(n, sizeof *kept) : NULL;
    if (!kept) {
        free(all);
        return found ? ODL_ERR(ODL_E_NOMEM, "manifest of %s", dir)
                     : ODL_ERR(ODL_E_NOTFOUND, "cannot commit %s/%s: it is not there", dir, name);
    }
    /* The listing is newest first: the committed file, then the older ones in the order they are kept. */
    size_t nk = 0;
    kept[nk].step = step;
    snprintf(kept[nk].name, sizeof kept[nk].name, "%s", name);
    nk++;
    for (size_t i = 0; i < n && (int64_t)nk < keep; i++)
        if (all[i].step < step) kept[nk++] = all[i];
    odl_status st = odl_ckpt_manifest_write(dir, kept, nk, epochs_done, cursor);
    /* Only once the manifest no longer names them: a crash in between leaves extra files, never a
     * manifest naming a deleted one. The kept older files are the first nk - 1 of the older ones. */
    size_t older = 0;
    for (size_t i = 0; st == ODL_OK && i < n; i++) {
        if (all[i].step >= step || ++older < nk) continue;
        char path[PATH_MAX + 64];
        snprintf(path, sizeof path, "%s/%s", dir, all[i].name);
        if (unlink(path) != 0) {
            ODL_LOG_WARN("could not delete old checkpoint %s: %s", path, strerror(errno));
            continue;
        }
        ODL_LOG_DEBUG("deleted old checkpoint %s (keeping %" PRId64 ")", path, keep);
        if (n_deleted) (*n_deleted)++;
    }
    free(kept);
    free(all);
    return st;
}

odl_status odl_ckpt_manifest_read(const char *dir, char *latest, size_t cap, int64_t *step) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, ODL_CKPT_MANIFEST);
    json_t *m = NULL;
    ODL_CHECK(odl_json_load_file(path, &m));
    const char *name = json_string_value(json_object_get(m, "latest"));
    odl_status st = ODL_OK;
    int64_t s = 0;
    if (!name) st = ODL_ERR(ODL_E_FORMAT, "%s: no \"latest\" entry (damaged manifest)", path);
    else if (!odl_ckpt_parse_file_name(name, &s))
        st = ODL_ERR(ODL_E_FORMAT, "%s: \"latest\" is '%s', not a ckpt-<step>.h5 name", path, name);
    else if (strlen(name) + 1 > cap) st = ODL_ERR(ODL_E_INVAL, "%s: name '%s' does not fit", path, name);
    else {
        snprintf(latest, cap, "%s", name);
        if (step) *step = s;
    }
    json_decref(m);
    return st;
}
