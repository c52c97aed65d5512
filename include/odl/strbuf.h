/* One string builder for text assembled piece by piece (lists in log lines and errors, the Prometheus
 * text of /metrics): appends never overflow, never leave the text unterminated, and a caller does not
 * keep its own length (the `len += snprintf(buf + len, cap - len, ...)` pattern, whose length runs past
 * cap on truncation). Two kinds, one struct:
 *   fixed: odl_strbuf_fixed(b, buf, cap) writes into the caller's buf; what does not fit is cut: the
 *          text ends in "..." (cap >= 4), stays NUL-terminated, b->truncated says so and later appends
 *          add nothing;
 *   grown: ODL_STRBUF_INIT (or zeroed) grows on the heap; odl_strbuf_take hands the text over, NULL when
 *          memory ran out (b->oom). */
#ifndef ODL_STRBUF_H
#define ODL_STRBUF_H

#include <stdarg.h>
#include <stddef.h>

#include "odl/api.h"

typedef struct odl_strbuf {
    char *s;        /* the text, NUL-terminated (NULL for a grown one before its first append) */
    size_t len;     /* bytes of text held */
    size_t cap;     /* bytes of s */
    int fixed;      /* s is the caller's */
    int truncated;  /* fixed: something did not fit */
    int oom;        /* grown: an allocation failed (the text is what fitted before) */
} odl_strbuf;

#define ODL_STRBUF_INIT {0}

/* A builder over buf[0, cap) (cap >= 1); buf becomes "". */
ODL_API void odl_strbuf_fixed(odl_strbuf *b, char *buf, size_t cap);
ODL_API void odl_strbuf_printf(odl_strbuf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
ODL_API void odl_strbuf_vprintf(odl_strbuf *b, const char *fmt, va_list ap);
/* Grown: the text (malloc'd; "" when nothing was appended) for the caller to free, b reset; NULL after an
 * allocation failure (b freed). Fixed: b->s. */
ODL_API char *odl_strbuf_take(odl_strbuf *b);
/* Grown: free the text. Fixed: nothing. */
ODL_API void odl_strbuf_free(odl_strbuf *b);

#endif
