/* The tuned GEMM table and the forced configuration: see kernels/gemm_table.h. */
#include "kernels/gemm_table.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "odl/env.h"
#include "odl/file.h"
#include "odl/log.h"

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static odl_gemm_table_row *g_rows;
static size_t g_n;
static int g_loaded;
static char g_path[1024];

const char *odl_gemm_table_path(void) {
    pthread_mutex_lock(&g_mu);
    if (!g_path[0]) {
        const char *env = odl_env_str(ODL_ENV_GEMM_TABLE), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
        if (env && env[0]) snprintf(g_path, sizeof g_path, "%s", env);
        else if (xdg && xdg[0]) snprintf(g_path, sizeof g_path, "%s/odl/gemm_sm90.tsv", xdg);
        else if (home && home[0]) snprintf(g_path, sizeof g_path, "%s/.cache/odl/gemm_sm90.tsv", home);
    }
    pthread_mutex_unlock(&g_mu);
    return g_path;
}

/* One line into *r; 0 when it is not a row. */
static int parse_row(char *line, odl_gemm_table_row *r) {
    char *f[10];
    int n = 0;
    for (char *save = NULL, *t = strtok_r(line, "\t\n", &save); t && n < 10; t = strtok_r(NULL, "\t\n", &save))
        f[n++] = t;
    if (n != 10) return 0;
    char *end;
    memset(r, 0, sizeof *r);
    if (strlen(f[0]) >= sizeof r->device || strlen(f[1]) >= sizeof r->dtype || strlen(f[7]) >= sizeof r->tile) return 0;
    strcpy(r->device, f[0]);
    strcpy(r->dtype, f[1]);
    strcpy(r->tile, f[7]);
    long long v[5];
    const int idx[5] = {2, 3, 4, 5, 6};
    for (int i = 0; i < 5; i++) {
        errno = 0;
        v[i] = strtoll(f[idx[i]], &end, 10);
        if (errno || *end || v[i] < 0) return 0;
    }
    r->trans_a = (int)v[0];
    r->trans_b = (int)v[1];
    r->M = v[2];
    r->N = v[3];
    r->K = v[4];
    errno = 0;
    long s = strtol(f[8], &end, 10);
    if (errno || *end || s < 1 || s > 256) return 0;
    r->splits = (int)s;
    r->us = strtod(f[9], &end);
    return r->trans_a <= 1 && r->trans_b <= 1;
}

static void load_locked(void) {
    g_loaded = 1;
    const char *path = g_path;
    FILE *fp = path[0] ? fopen(path, "r") : NULL;
    if (!fp) return;
    char line[512];
    int lineno = 0, bad = 0;
    while (fgets(line, sizeof line, fp)) {
        lineno++;
        if (line[0] == '#' || line[0] == '\n') continue;
        odl_gemm_table_row r;
        if (!parse_row(line, &r)) {
            if (!bad++) ODL_LOG_DEBUG("GEMM table %s: line %d is not a row (ignored)", path, lineno);
            continue;
        }
        odl_gemm_table_row *grown = realloc(g_rows, (g_n + 1) * sizeof *g_rows);
        if (!grown) break;
        g_rows = grown;
        g_rows[g_n++] = r;
    }
    fclose(fp);
}

int odl_gemm_table_find(const char *device, const char *dtype, int trans_a, int trans_b, int64_t M, int64_t N,
                        int64_t K, odl_gemm_table_row *row) {
    odl_gemm_table_path();
    pthread_mutex_lock(&g_mu);
    if (!g_loaded) load_locked();
    int found = 0;
    for (size_t i = 0; i < g_n && !found; i++) {
        const odl_gemm_table_row *r = &g_rows[i];
        if (r->M == M && r->N == N && r->K == K && r->trans_a == !!trans_a && r->trans_b == !!trans_b &&
            !strcmp(r->dtype, dtype) && !strcmp(r->device, device)) {
            *row = *r;
            found = 1;
        }
    }
    pthread_mutex_unlock(&g_mu);
    return found;
}

static int mkdirs(const char *path) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir(buf, 0755) != 0 && errno != EEXIST) return -1;
            *p = '/';
        }
    return 0;
}

odl_status odl_gemm_table_write(const char *path, const odl_gemm_table_row *rows, size_t n, const char *comment) {
    if (!path || !path[0]) return ODL_ERR(ODL_E_IO, "GEMM table: no path (set ODL_GEMM_TABLE or HOME)");
    if (mkdirs(path) != 0) return ODL_ERR(ODL_E_IO, "GEMM table %s: cannot make its folder: %s", path, strerror(errno));
    odl_file_tmp t;
    ODL_CHECK(odl_file_begin(&t, path, 0));
    fprintf(t.f, "# %s\n# device\tdtype\ttrans_a\ttrans_b\tM\tN\tK\ttile\tsplits\tus\n", comment ? comment : "");
    for (size_t i = 0; i < n; i++) {
        const odl_gemm_table_row *r = &rows[i];
        fprintf(t.f, "%s\t%s\t%d\t%d\t%lld\t%lld\t%lld\t%s\t%d\t%.2f\n", r->device, r->dtype, r->trans_a, r->trans_b,
                (long long)r->M, (long long)r->N, (long long)r->K, r->tile, r->splits, r->us);
    }
    if (ferror(t.f)) {
        odl_file_abort(&t);
        return ODL_ERR(ODL_E_IO, "GEMM table %s: write failed", path);
    }
    ODL_CHECK(odl_file_commit(&t, NULL));
    pthread_mutex_lock(&g_mu);
    free(g_rows);
    g_rows = NULL;
    g_n = 0;
    g_loaded = 0;
    pthread_mutex_unlock(&g_mu);
    return ODL_OK;
}

int odl_gemm_config_forced(char *tile, size_t cap, int *splits, int *ctas) {
    const char *v = odl_env_str(ODL_ENV_GEMM_CONFIG);
    if (!v || !v[0]) return 0;
    const char *colon = strchr(v, ':');
    const size_t len = colon ? (size_t)(colon - v) : strlen(v);
    long field[2] = {0, 0};
    const char *p = colon;
    for (int i = 0; p && i < 2; i++) {
        char *end;
        field[i] = strtol(p + 1, &end, 10);
        if ((*end && *end != ':') || field[i] < 0 || field[i] > 4096 || (i == 0 && field[i] > 256)) goto bad;
        p = *end == ':' ? end : NULL;
    }
    if (p || len == 0 || len >= cap) goto bad;
    memcpy(tile, v, len);
    tile[len] = '\0';
    *splits = (int)field[0];
    *ctas = (int)field[1];
    return 1;
bad: {
    static int logged;
    if (!logged++) ODL_LOG_WARN("ODL_GEMM_CONFIG='%s' is not TILE[:SPLITS[:CTAS]] (ignored)", v);
    return 0;
}
}
