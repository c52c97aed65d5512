#include "odl/status.h"

#include "odl/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define ODL_MSG_CAP 2048
static _Thread_local char g_msg[ODL_MSG_CAP];

const char *odl_status_str(odl_status s) {
    switch (s) {
    case ODL_OK: return "ok";
    case ODL_E_INVAL: return "invalid argument";
    case ODL_E_NOMEM: return "out of memory";
    case ODL_E_IO: return "I/O error";
    case ODL_E_FORMAT: return "malformed input";
    case ODL_E_CUDA: return "CUDA error";
    case ODL_E_NCCL: return "NCCL error";
    case ODL_E_MPI: return "MPI error";
    case ODL_E_HDF5: return "HDF5 error";
    case ODL_E_UNSUPPORTED: return "unsupported";
    case ODL_E_TIMEOUT: return "timed out";
    case ODL_E_CONFIG: return "configuration error";
    case ODL_E_NODEV: return "no such device";
    case ODL_E_CHECKSUM: return "checksum mismatch";
    case ODL_E_NOTFOUND: return "not found";
    case ODL_E_INTERNAL: return "internal error";
    case ODL_E_BUSY: return "busy";
    }
    return "unknown error";
}

static const char *basename_of(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

odl_status odl_error_set(odl_status code, const char *file, int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_msg, sizeof g_msg, fmt, ap);
    va_end(ap);
    odl_error_trace(file, line);
    return code;
}

void odl_error_prefix(const char *fmt, ...) {
    char old[ODL_MSG_CAP];
    memcpy(old, g_msg, sizeof old);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_msg, sizeof g_msg, fmt, ap);
    va_end(ap);
    if (!old[0]) return;
    size_t n = strlen(g_msg), m = strlen(old);
    if (n + 2 + m + 1 > sizeof g_msg) m = sizeof g_msg - n - 3 > 0 && n + 3 < sizeof g_msg ? sizeof g_msg - n - 3 : 0;
    if (n + 3 >= sizeof g_msg) return;
    memcpy(g_msg + n, ": ", 2);
    memcpy(g_msg + n + 2, old, m);
    g_msg[n + 2 + m] = '\0';
}

void odl_error_trace(const char *file, int line) {
    size_t n = strlen(g_msg);
    if (n + 32 < sizeof g_msg)
        snprintf(g_msg + n, sizeof g_msg - n, " [at %s:%d]", basename_of(file), line);
}

const char *odl_error_msg(void) { return g_msg; }
void odl_error_clear(void) { g_msg[0] = '\0'; }

const char *odl_error_msg_user(void) {
    if (odl_log_get_level() <= ODL_LOG_LEVEL_DEBUG) return g_msg;
    static _Thread_local char brief[ODL_MSG_CAP];
    size_t k = 0;
    for (const char *p = g_msg; *p && k + 1 < sizeof brief;) {
        const char *e;
        if (!strncmp(p, " [at ", 5) && (e = strchr(p + 5, ']')) != NULL) {
            p = e + 1; /* drop " [at file:line]" */
            continue;
        }
        brief[k++] = *p++;
    }
    brief[k] = 0;
    return brief;
}
