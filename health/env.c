/* The node name of the health layer (its other tunables are rows of ODL_ENV_TABLE, odl/env.h). */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "odl/env.h"
#include "odl/health.h"

static char g_host[128];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void read_host(void) {
    if (gethostname(g_host, sizeof g_host) != 0) snprintf(g_host, sizeof g_host, "localhost");
    g_host[sizeof g_host - 1] = '\0';
    char *dot = strchr(g_host, '.');
    if (dot) *dot = '\0';
}

const char *odl_health_node_name(void) {
    const char *n = odl_env_str(ODL_ENV_NODE_NAME);
    if (n[0]) return n;
    pthread_once(&g_once, read_host);
    return g_host;
}
