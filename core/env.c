/* The environment-variable table (odl/env.h): parsed once, under a mutex, into plain values. */
#include "odl/env.h"
#include "odl/parse.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const odl_env_var g_table[ODL_ENV_COUNT] = {
#define ODL_ENV_ROW_(id, type, def, lo, hi, doc) {"ODL_" #id, ODL_ENV_##type, def, lo, hi, doc},
    ODL_ENV_TABLE(ODL_ENV_ROW_)
#undef ODL_ENV_ROW_
};

typedef struct env_value {
    int set;
    int64_t i;
    char *s;
} env_value;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_loaded;
static odl_status g_status;
static char g_msg[512];
static env_value g_val[ODL_ENV_COUNT];

const odl_env_var *odl_env_table(size_t *n) {
    if (n) *n = ODL_ENV_COUNT;
    return g_table;
}

const char *odl_env_type_name(odl_env_type t) {
    return t == ODL_ENV_INT ? "int" : t == ODL_ENV_BOOL ? "bool" : "string";
}

/* Parse text as the row's type into *out. Returns NULL when valid, else why not. */
static const char *parse(const odl_env_var *v, const char *text, int64_t *out) {
    if (v->type == ODL_ENV_STR) return NULL;
    if (v->type == ODL_ENV_BOOL) {
        static const char *const on[] = {"1", "true", "on", "yes"}, *const off[] = {"0", "false", "off", "no"};
        for (int k = 0; k < 4; k++) {
            if (!strcasecmp(text, on[k])) return *out = 1, NULL;
            if (!strcasecmp(text, off[k])) return *out = 0, NULL;
        }
        return "not a boolean (0/1, true/false, on/off, yes/no)";
    }
    int64_t x = 0;
    int r = odl_parse_i64(text, v->min, v->max, &x);
    if (r == ODL_PARSE_SYNTAX) return "not an integer";
    if (r == ODL_PARSE_RANGE) return "outside the allowed range";
    *out = x;
    return NULL;
}

static odl_status load_locked(void) {
    odl_status first = ODL_OK;
    g_msg[0] = 0;
    for (int k = 0; k < ODL_ENV_COUNT; k++) {
        const odl_env_var *v = &g_table[k];
        env_value *e = &g_val[k];
        free(e->s);
        memset(e, 0, sizeof *e);
        if (v->def[0]) parse(v, v->def, &e->i);
        const char *text = getenv(v->name);
        if (!text || !text[0]) continue;
        int64_t x = 0;
        const char *why = parse(v, text, &x);
        if (why) {
            if (first == ODL_OK) {
                first = ODL_E_CONFIG;
                if (v->type == ODL_ENV_INT && !strcmp(why, "outside the allowed range"))
                    snprintf(g_msg, sizeof g_msg, "%s='%s': outside %lld..%lld", v->name, text, (long long)v->min,
                             (long long)v->max);
                else snprintf(g_msg, sizeof g_msg, "%s='%s': %s", v->name, text, why);
            }
            continue;
        }
        e->set = 1;
        e->i = x;
        e->s = strdup(text);
    }
    g_loaded = 1;
    g_status = first;
    return first;
}

static odl_status result(void) {
    if (g_status != ODL_OK) return odl_error_set(g_status, __FILE__, __LINE__, "%s", g_msg);
    return ODL_OK;
}

odl_status odl_env_load(void) {
    pthread_mutex_lock(&g_mu);
    if (!g_loaded) load_locked();
    pthread_mutex_unlock(&g_mu);
    return result();
}

odl_status odl_env_reload(void) {
    pthread_mutex_lock(&g_mu);
    load_locked();
    pthread_mutex_unlock(&g_mu);
    return result();
}

static const env_value *value(odl_env_id id) {
    if ((int)id < 0 || id >= ODL_ENV_COUNT) return NULL;
    pthread_mutex_lock(&g_mu);
    if (!g_loaded) load_locked();
    pthread_mutex_unlock(&g_mu);
    return &g_val[id];
}

int odl_env_is_set(odl_env_id id) {
    const env_value *e = value(id);
    return e && e->set;
}

int64_t odl_env_int(odl_env_id id) {
    const env_value *e = value(id);
    return e ? e->i : 0;
}

int odl_env_bool(odl_env_id id) { return odl_env_int(id) != 0; }

const char *odl_env_str(odl_env_id id) {
    const env_value *e = value(id);
    return e && e->s ? e->s : e ? g_table[id].def : "";
}
