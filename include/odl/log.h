/* Logging: one line per event on stderr, with time, rank and level.
 *
 *   2026-11-29T21:40:00.123Z [rank 0/2] INFO epoch 1 step 100 loss 0.4123
 *
 * The time is UTC with milliseconds (ISO 8601, CLOCK_REALTIME). The rank prefix is always present
 * ("[rank 0/1]" in a single process). With world_size > 1, ranks other than 0 print only WARN and
 * ERROR, so that an 8-GPU job logs progress once; every rank still reports its problems.
 * A message that contains newlines (e.g. the effective config) is printed with the prefix on every
 * line; a trailing newline in the format is dropped.
 *
 * Thread-safe: each event is formatted into one buffer and written with a single stdio call, so
 * lines of concurrent threads never interleave. Settings are atomics; set them once at start
 * (odl_log_set_rank after the process group is known, odl_log_set_level from logging.level).
 */
#ifndef ODL_LOG_H
#define ODL_LOG_H

#include "odl/api.h"
#include <stdio.h>

#include "odl/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum odl_log_level {
    ODL_LOG_LEVEL_DEBUG = 0,
    ODL_LOG_LEVEL_INFO = 1,
    ODL_LOG_LEVEL_WARN = 2,
    ODL_LOG_LEVEL_ERROR = 3,
} odl_log_level;

/* This process's rank and the world size, for the prefix and the rank-0 filter.
 * Defaults: rank 0, world size 1. Values out of range (world_size < 1, rank outside
 * 0..world_size-1) are stored as given; only the filter "rank != 0 && world_size > 1" uses them. */
ODL_API void odl_log_set_rank(int rank, int world_size);
/* A process that is no rank (odl_coordinator): "[tag]" replaces "[rank R/W]" in the prefix ("" or NULL
 * restores it; at most 31 characters). Call it at start, before other threads log. */
ODL_API void odl_log_set_tag(const char *tag);

/* Events below `level` are dropped. Default ODL_LOG_LEVEL_INFO. */
ODL_API void odl_log_set_level(odl_log_level level);
ODL_API odl_log_level odl_log_get_level(void);

/* "debug", "info", "warn" (or "warning"), "error", case-insensitive.
 * Errors: ODL_E_INVAL naming the text and the allowed names (also for NULL). */
ODL_API odl_status odl_log_parse_level(const char *text, odl_log_level *out);

/* "DEBUG", "INFO", "WARN", "ERROR" ("?" for other values). */
ODL_API const char *odl_log_level_name(odl_log_level level);

/* 1 when an event of this level would be printed by this process (level and rank filter). Use it to
 * skip expensive formatting. */
ODL_API int odl_log_enabled(odl_log_level level);

/* Where lines go: NULL (the default) means stderr. For tests and for tee-ing into a file; the stream
 * must stay open while it is set. */
ODL_API void odl_log_set_stream(FILE *stream);

/* Print one event (printf format). Never fails visibly: a message that cannot be allocated is
 * truncated to 4 KiB. */
ODL_API void odl_log(odl_log_level level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#define ODL_LOG_DEBUG(...) odl_log(ODL_LOG_LEVEL_DEBUG, __VA_ARGS__)
#define ODL_LOG_INFO(...) odl_log(ODL_LOG_LEVEL_INFO, __VA_ARGS__)
#define ODL_LOG_WARN(...) odl_log(ODL_LOG_LEVEL_WARN, __VA_ARGS__)
#define ODL_LOG_ERROR(...) odl_log(ODL_LOG_LEVEL_ERROR, __VA_ARGS__)

#ifdef __cplusplus
}
#endif
#endif
