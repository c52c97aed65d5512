/* test_env: the environment-variable table (odl/env.h, core/env.c).
 *  - docs/environment.md's table lists exactly the table's rows, in order, with the same type and default;
 *  - a bad value is an error naming the variable and the value; valid values parse; defaults apply;
 *  - odl_worker with a bad value exits 2 with that message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "odl/env.h"
#include "test_util.h"

/* Rows "| `ODL_X` | type | default | ..." of the file; returns the count. */
static int read_doc_rows(const char *path, char names[][64], char types[][32], char defs[][32], int cap) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[1024];
    int n = 0;
    while (fgets(line, sizeof line, f) && n < cap) {
        if (strncmp(line, "| `ODL_", 7) != 0) continue;
        char *cell[4] = {0};
        char *p = line + 1;
        for (int c = 0; c < 4 && p; c++) {
            char *bar = strchr(p, '|');
            if (bar) *bar = 0;
            while (*p == ' ') p++;
            char *e = p + strlen(p);
            while (e > p && (e[-1] == ' ' || e[-1] == '`')) *--e = 0;
            if (*p == '`') p++;
            cell[c] = p;
            p = bar ? bar + 1 : NULL;
        }
        if (!cell[2]) continue;
        snprintf(names[n], 64, "%s", cell[0]);
        /* "int (1..64)" -> "int" */
        snprintf(types[n], 32, "%.*s", (int)strcspn(cell[1], " "), cell[1]);
        snprintf(defs[n], 32, "%s", cell[2]);
        n++;
    }
    fclose(f);
    return n;
}

static void doc_matches_table(void) {
    const char *src = getenv("ODL_SOURCE_DIR");
    if (!src) src = ".";
    char path[4096];
    snprintf(path, sizeof path, "%s/docs/environment.md", src);
    static char names[64][64], types[64][32], defs[64][32];
    int n = read_doc_rows(path, names, types, defs, 64);
    size_t nt = 0;
    const odl_env_var *t = odl_env_table(&nt);
    TCHECK(n == (int)nt, "%s lists %d variables, odl/env.h %zu", path, n, nt);
    for (size_t i = 0; i < nt && (int)i < n; i++) {
        TCHECK(!strcmp(names[i], t[i].name), "row %zu: %s in the docs, %s in the table", i, names[i], t[i].name);
        TCHECK(!strcmp(types[i], odl_env_type_name(t[i].type)), "%s: type %s in the docs, %s in the table", t[i].name,
               types[i], odl_env_type_name(t[i].type));
        TCHECK(!strcmp(defs[i], t[i].def), "%s: default '%s' in the docs, '%s' in the table", t[i].name, defs[i],
               t[i].def);
        TCHECK(t[i].doc && t[i].doc[0], "%s has documentation", t[i].name);
    }
}

static void expect_bad(const char *name, const char *value, const char *why) {
    setenv(name, value, 1);
    TFAIL(odl_env_reload(), ODL_E_CONFIG);
    char want[256];
    snprintf(want, sizeof want, "%s='%s': %s", name, value, why);
    TCHECK(strstr(odl_error_msg(), want) != NULL, "message '%s' lacks '%s'", odl_error_msg(), want);
    unsetenv(name);
}

static void values(void) {
    unsetenv("ODL_CPU_THREADS");
    unsetenv("ODL_NCCL_BLOCKING");
    unsetenv("ODL_CKPT_TEST_PAUSE_AT_STEP");
    TOK(odl_env_reload());
    TCHECK(!odl_env_is_set(ODL_ENV_CPU_THREADS), "unset");
    TCHECK(odl_env_bool(ODL_ENV_NCCL_BLOCKING) == 1, "default 1");
    TCHECK(odl_env_int(ODL_ENV_CKPT_TEST_PAUSE_AT_STEP) == -1, "default -1");
    TCHECK(odl_env_str(ODL_ENV_DUMP_PARAMS)[0] == 0, "empty string");
    unsetenv("ODL_SCONTROL");
    TOK(odl_env_reload());
    TCHECK(!odl_env_is_set(ODL_ENV_SCONTROL) && !strcmp(odl_env_str(ODL_ENV_SCONTROL), "scontrol"),
           "a string row's default when unset: '%s'", odl_env_str(ODL_ENV_SCONTROL));
    expect_bad("ODL_HEALTH_TELEMETRY_MS", "5", "outside 10..3600000");
    expect_bad("ODL_HEALTH", "disabled", "not a boolean");

    expect_bad("ODL_CPU_THREADS", "abc", "not an integer");
    expect_bad("ODL_CPU_THREADS", "4x", "not an integer");
    expect_bad("ODL_CPU_THREADS", "0", "outside 1..64");
    expect_bad("ODL_CPU_THREADS", "65", "outside 1..64");
    expect_bad("ODL_NCCL_BLOCKING", "maybe", "not a boolean");

    setenv("ODL_CPU_THREADS", "3", 1);
    setenv("ODL_NCCL_BLOCKING", "off", 1);
    setenv("ODL_CKPT_TEST_PAUSE_AT_STEP", "", 1); /* empty = unset */
    setenv("ODL_DUMP_PARAMS", "/tmp/x", 1);
    TOK(odl_env_reload());
    TCHECK(odl_env_is_set(ODL_ENV_CPU_THREADS) && odl_env_int(ODL_ENV_CPU_THREADS) == 3, "3");
    TCHECK(odl_env_bool(ODL_ENV_NCCL_BLOCKING) == 0, "off");
    TCHECK(!odl_env_is_set(ODL_ENV_CKPT_TEST_PAUSE_AT_STEP) && odl_env_int(ODL_ENV_CKPT_TEST_PAUSE_AT_STEP) == -1,
           "empty keeps the default");
    TCHECK(!strcmp(odl_env_str(ODL_ENV_DUMP_PARAMS), "/tmp/x"), "string");
    unsetenv("ODL_CPU_THREADS");
    unsetenv("ODL_NCCL_BLOCKING");
    unsetenv("ODL_CKPT_TEST_PAUSE_AT_STEP");
    unsetenv("ODL_DUMP_PARAMS");
}

static void worker_rejects(void) {
    const char *bin = getenv("ODL_BINARY_DIR");
    if (!bin) return;
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "ODL_CPU_THREADS=abc %s/odl_worker --task=train --max-steps 1 2>&1", bin);
    FILE *p = popen(cmd, "r");
    TCHECK(p != NULL, "popen");
    if (!p) return;
    char out[4096] = {0};
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    int rc = pclose(p);
    TCHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 2, "odl_worker exit status %d", WEXITSTATUS(rc));
    TCHECK(strstr(out, "odl_worker: error:") && strstr(out, "ODL_CPU_THREADS='abc': not an integer"), "output: %s", out);
}

int main(void) {
    doc_matches_table();
    values();
    worker_rejects();
    return odl_test_finish("test_env");
}
