/* The environment variables of the health layer, read once (listed in docs/health.md). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "odl/health.h"

static odl_health_env g_env;
static char g_host[128];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static const char *nonempty(const char *name) {
    const char *v = getenv(name);
    return v && v[0] ? v : NULL;
}

static void read_env(void) {
    g_env.kmsg = nonempty("ODL_HEALTH_KMSG");
    g_env.fault = nonempty("ODL_FAULT");
    g_env.xid_table = nonempty("ODL_HEALTH_XID_TABLE");
    g_env.scontrol = nonempty("ODL_SCONTROL");
    if (!g_env.scontrol) g_env.scontrol = "scontrol";
    g_env.nvml_library = nonempty("ODL_NVML_LIBRARY");
    if (!g_env.nvml_library) g_env.nvml_library = "libnvidia-ml.so.1";
    const char *t = nonempty("ODL_HEALTH_TELEMETRY_MS");
    g_env.telemetry_ms = t ? atoi(t) : 5000;
    if (g_env.telemetry_ms < 10) g_env.telemetry_ms = 5000;
    const char *h = nonempty("ODL_HEALTH");
    g_env.disable = h && (!strcmp(h, "off") || !strcmp(h, "0"));
    g_env.node = nonempty("ODL_NODE_NAME");
    if (!g_env.node) {
        if (gethostname(g_host, sizeof g_host) != 0) snprintf(g_host, sizeof g_host, "localhost");
        g_host[sizeof g_host - 1] = '\0';
        char *dot = strchr(g_host, '.');
        if (dot) *dot = '\0';
        g_env.node = g_host;
    }
}

const odl_health_env *odl_health_env_get(void) {
    pthread_once(&g_once, read_env);
    return &g_env;
}
