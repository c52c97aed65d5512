/* Output-path checks and the metrics JSONL; see worker/outputs.h. */
#include "worker/outputs.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "odl/file.h"
#include "odl/json.h"
#include "odl/log.h"

/* The folder part of path ("." when there is none). */
static void parent_of(const char *path, char *out, size_t cap) {
    snprintf(out, cap, "%s", path);
    char *s = strrchr(out, '/');
    while (s && s > out && s[1] == 0) { /* trailing slashes */
        *s = 0;
        s = strrchr(out, '/');
    }
    if (!s) snprintf(out, cap, ".");
    else if (s == out) out[1] = 0;
    else *s = 0;
}

static odl_status writable_dir(const char *flag, const char *path, const char *dir) {
    struct stat sb;
    if (stat(dir, &sb) != 0)
        return ODL_ERR(ODL_E_IO, "%s %s: folder %s does not exist", flag, path, dir);
    if (!S_ISDIR(sb.st_mode)) return ODL_ERR(ODL_E_IO, "%s %s: %s is not a folder", flag, path, dir);
    if (access(dir, W_OK | X_OK) != 0)
        return ODL_ERR(ODL_E_IO, "%s %s: cannot write into %s: %s", flag, path, dir, strerror(errno));
    return ODL_OK;
}

odl_status odl_output_check_file(const char *flag, const char *path) {
    if (!path || !path[0]) return ODL_OK;
    struct stat sb;
    if (stat(path, &sb) == 0) {
        if (S_ISDIR(sb.st_mode)) return ODL_ERR(ODL_E_IO, "%s %s: is a folder, expected a file name", flag, path);
        if (access(path, W_OK) != 0) return ODL_ERR(ODL_E_IO, "%s %s: cannot write: %s", flag, path, strerror(errno));
        return ODL_OK;
    }
    char dir[PATH_MAX];
    parent_of(path, dir, sizeof dir);
    return writable_dir(flag, path, dir);
}

odl_status odl_output_check_dir(const char *flag, const char *path) {
    if (!path || !path[0]) return ODL_OK;
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    struct stat sb;
    for (;;) {
        if (stat(dir, &sb) == 0) {
            if (!S_ISDIR(sb.st_mode)) return ODL_ERR(ODL_E_IO, "%s %s: %s is not a folder", flag, path, dir);
            return writable_dir(flag, path, dir);
        }
        if (errno != ENOENT && errno != ENOTDIR) return ODL_ERR(ODL_E_IO, "%s %s: %s: %s", flag, path, dir, strerror(errno));
        char up[PATH_MAX];
        parent_of(dir, up, sizeof up);
        if (!strcmp(up, dir)) return ODL_ERR(ODL_E_IO, "%s %s: no existing folder above it", flag, path);
        snprintf(dir, sizeof dir, "%s", up);
    }
}

odl_status odl_metrics_open(const char *path, int64_t resume_step, FILE **out) {
    *out = NULL;
    if (resume_step > 0) {
        FILE *in = fopen(path, "r");
        if (in) {
            odl_file_tmp o;
            odl_status s = odl_file_begin(&o, path, 0);
            if (s != ODL_OK) {
                fclose(in);
                odl_error_prefix("--metrics-out %s", path);
                return s;
            }
            char *line = NULL;
            size_t cap = 0;
            ssize_t n;
            long dropped = 0;
            while ((n = getline(&line, &cap, in)) > 0) {
                json_t *rec = json_loads(line, JSON_DISABLE_EOF_CHECK, NULL);
                int drop = 0;
                if (json_is_object(rec)) {
                    const char *ev = json_string_value(json_object_get(rec, "event"));
                    drop = (ev && !strcmp(ev, "done")) || odl_json_int(rec, "step", 0) > resume_step;
                }
                json_decref(rec);
                if (drop) dropped++;
                else fputs(line, o.f);
            }
            free(line);
            fclose(in);
            s = odl_file_commit(&o, NULL); /* durable: the records of before stay if power fails now */
            if (s != ODL_OK) {
                odl_error_prefix("--metrics-out %s: cannot rewrite", path);
                return s;
            }
            if (dropped)
                ODL_LOG_INFO("%s: %ld record(s) after step %lld (the checkpoint resumed from) dropped before appending",
                             path, dropped, (long long)resume_step);
        }
    }
    FILE *f = fopen(path, resume_step > 0 ? "a" : "w");
    if (!f) return ODL_ERR(ODL_E_IO, "--metrics-out %s: cannot open: %s", path, strerror(errno));
    *out = f;
    return ODL_OK;
}

odl_status odl_output_mkdir_p(const char *flag, const char *path) {
    char buf[PATH_MAX];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == 0) {
            char c = *p;
            *p = 0;
            if (mkdir(buf, 0777) != 0 && errno != EEXIST)
                return ODL_ERR(ODL_E_IO, "%s %s: cannot create %s: %s", flag, path, buf, strerror(errno));
            *p = c;
            if (!c) break;
        }
    }
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode)) return ODL_ERR(ODL_E_IO, "%s %s: not a directory", flag, path);
    return ODL_OK;
}
