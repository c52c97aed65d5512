#include "odl/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static atomic_int g_rank = 0;
static atomic_int g_world = 1;
static atomic_int g_level = ODL_LOG_LEVEL_INFO;
static _Atomic(FILE *) g_stream = NULL;

void odl_log_set_rank(int rank, int world_size) {
    atomic_store(&g_rank, rank);
    atomic_store(&g_world, world_size);
}

/* Set once at start, before any thread logs. */
static char g_tag[32];
void odl_log_set_tag(const char *tag) { snprintf(g_tag, sizeof g_tag, "%s", tag ? tag : ""); }

void odl_log_set_level(odl_log_level level) { atomic_store(&g_level, (int)level); }
odl_log_level odl_log_get_level(void) { return (odl_log_level)atomic_load(&g_level); }
void odl_log_set_stream(FILE *stream) { atomic_store(&g_stream, stream); }

const char *odl_log_level_name(odl_log_level level) {
    switch (level) {
    case ODL_LOG_LEVEL_DEBUG: return "DEBUG";
    case ODL_LOG_LEVEL_INFO: return "INFO";
    case ODL_LOG_LEVEL_WARN: return "WARN";
    case ODL_LOG_LEVEL_ERROR: return "ERROR";
    }
    return "?";
}

odl_status odl_log_parse_level(const char *text, odl_log_level *out) {
    static const struct { const char *name; odl_log_level level; } names[] = {
        {"debug", ODL_LOG_LEVEL_DEBUG}, {"info", ODL_LOG_LEVEL_INFO},   {"warn", ODL_LOG_LEVEL_WARN},
        {"warning", ODL_LOG_LEVEL_WARN}, {"error", ODL_LOG_LEVEL_ERROR},
    };
    if (!out) return ODL_ERR(ODL_E_INVAL, "odl_log_parse_level: out is NULL");
    if (text) {
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
            if (strcasecmp(text, names[i].name) == 0) {
                *out = names[i].level;
                return ODL_OK;
            }
        }
    }
    return ODL_ERR(ODL_E_INVAL, "log level '%s' is not one of debug|info|warn|error", text ? text : "(null)");
}

int odl_log_enabled(odl_log_level level) {
    if ((int)level < atomic_load(&g_level)) return 0;
    if (atomic_load(&g_world) > 1 && atomic_load(&g_rank) != 0 && level < ODL_LOG_LEVEL_WARN) return 0;
    return 1;
}

/* "2026-11-29T21:40:00.123Z" into buf (at least 32 bytes). */
static void format_time(char *buf, size_t cap) {
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(buf, cap, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf + n, cap - n, ".%03dZ", (int)(ts.tv_nsec / 1000000));
}

#define LOG_STACK 4096

void odl_log(odl_log_level level, const char *fmt, ...) {
    if (!odl_log_enabled(level)) return;

    char prefix[128], when[40];
    format_time(when, sizeof when);
    int plen = g_tag[0] ? snprintf(prefix, sizeof prefix, "%s [%s] %s ", when, g_tag, odl_log_level_name(level))
                        : snprintf(prefix, sizeof prefix, "%s [rank %d/%d] %s ", when, atomic_load(&g_rank),
                                   atomic_load(&g_world), odl_log_level_name(level));
    if (plen < 0) return;
    if ((size_t)plen >= sizeof prefix) plen = (int)sizeof prefix - 1;

    /* The message itself. */
    char msg_stack[LOG_STACK];
    char *msg = msg_stack;
    va_list ap;
    va_start(ap, fmt);
    int mlen = vsnprintf(msg_stack, sizeof msg_stack, fmt, ap);
    va_end(ap);
    if (mlen < 0) {
        mlen = 0;
        msg_stack[0] = '\0';
    } else if ((size_t)mlen >= sizeof msg_stack) {
        char *big = malloc((size_t)mlen + 1);
        if (big) {
            va_start(ap, fmt);
            vsnprintf(big, (size_t)mlen + 1, fmt, ap);
            va_end(ap);
            msg = big;
        } else {
            mlen = (int)sizeof msg_stack - 1; /* truncated */
        }
    }
    while (mlen > 0 && (msg[mlen - 1] == '\n' || msg[mlen - 1] == '\r')) msg[--mlen] = '\0';

    /* One output buffer: the prefix before every line of the message. */
    size_t lines = 1;
    for (int i = 0; i < mlen; i++) lines += msg[i] == '\n';
    size_t need = lines * ((size_t)plen + 1) + (size_t)mlen + 1;
    char out_stack[LOG_STACK + 256];
    char *out = out_stack;
    if (need > sizeof out_stack) {
        out = malloc(need);
        if (!out) { /* keep the first line only, truncated */
            out = out_stack;
            lines = 1;
            mlen = 0;
            while (mlen < LOG_STACK - 1 && msg[mlen] && msg[mlen] != '\n') mlen++;
            need = (size_t)plen + 1 + (size_t)mlen + 1;
        }
    }
    size_t pos = 0;
    const char *line = msg;
    const char *end = msg + mlen;
    while (lines-- > 0) {
        const char *nl = memchr(line, '\n', (size_t)(end - line));
        const char *stop = nl ? nl : end;
        memcpy(out + pos, prefix, (size_t)plen);
        pos += (size_t)plen;
        memcpy(out + pos, line, (size_t)(stop - line));
        pos += (size_t)(stop - line);
        out[pos++] = '\n';
        line = nl ? nl + 1 : end;
    }
    out[pos] = '\0';

    FILE *f = atomic_load(&g_stream);
    if (!f) f = stderr;
    fwrite(out, 1, pos, f); /* one stdio call: stdio locks the stream around it */
    fflush(f);

    if (out != out_stack) free(out);
    if (msg != msg_stack) free(msg);
}
