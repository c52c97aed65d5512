/* The string builder (odl/strbuf.h). */
#include "odl/strbuf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void odl_strbuf_fixed(odl_strbuf *b, char *buf, size_t cap) {
    memset(b, 0, sizeof *b);
    b->s = buf;
    b->cap = cap;
    b->fixed = 1;
    if (cap) buf[0] = '\0';
}

void odl_strbuf_vprintf(odl_strbuf *b, const char *fmt, va_list ap) {
    if (b->oom || b->truncated) return;
    va_list ap2;
    va_copy(ap2, ap);
    size_t room = b->s && b->cap > b->len ? b->cap - b->len : 0;
    int n = vsnprintf(room ? b->s + b->len : NULL, room, fmt, ap2);
    va_end(ap2);
    if (n < 0) return;
    if ((size_t)n < room) {
        b->len += (size_t)n;
        return;
    }
    if (b->fixed) { /* vsnprintf wrote what fit, NUL-terminated; the cut is shown */
        if (room) b->len = b->cap - 1;
        if (b->cap >= 4) memcpy(b->s + b->cap - 4, "...", 4);
        b->truncated = 1;
        return;
    }
    size_t need = b->len + (size_t)n + 1, cap = b->cap ? b->cap : 256;
    while (cap < need) cap *= 2;
    char *s = realloc(b->s, cap);
    if (!s) {
        b->oom = 1;
        return;
    }
    b->s = s;
    b->cap = cap;
    vsnprintf(b->s + b->len, cap - b->len, fmt, ap);
    b->len += (size_t)n;
}

void odl_strbuf_printf(odl_strbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    odl_strbuf_vprintf(b, fmt, ap);
    va_end(ap);
}

char *odl_strbuf_take(odl_strbuf *b) {
    if (b->fixed) return b->s;
    char *s = b->oom ? NULL : b->s ? b->s : strdup("");
    if (b->oom) free(b->s);
    memset(b, 0, sizeof *b);
    return s;
}

void odl_strbuf_free(odl_strbuf *b) {
    if (!b->fixed) free(b->s);
    memset(b, 0, sizeof *b);
}
