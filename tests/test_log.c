/* Logging: line format, level and rank filters, multi-line messages, long messages, and that lines
 * of concurrent threads never interleave. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "odl/log.h"
#include "test_util.h"

/* Read the whole stream back and truncate it for the next case. */
static char *drain(FILE *f) {
    fflush(f);
    long n = ftell(f);
    char *buf = calloc((size_t)n + 1, 1);
    rewind(f);
    size_t got = fread(buf, 1, (size_t)n, f);
    buf[got] = '\0';
    rewind(f);
    if (ftruncate(fileno(f), 0) != 0) perror("ftruncate");
    return buf;
}

static int count_lines(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

/* "2026-11-29T21:40:00.123Z [rank R/W] LEVEL " -> pointer to the message, or NULL. */
static const char *check_prefix(const char *line, int rank, int world, const char *level) {
    int y, mo, d, h, mi, s, ms, r, w, n = 0;
    char lv[16];
    if (sscanf(line, "%4d-%2d-%2dT%2d:%2d:%2d.%3dZ [rank %d/%d] %15s%n", &y, &mo, &d, &h, &mi, &s, &ms, &r, &w,
               lv, &n) != 10)
        return NULL;
    if (y < 2000 || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || s > 60 || ms > 999) return NULL;
    if (line[10] != 'T' || line[23] != 'Z' || line[24] != ' ') return NULL;
    if (r != rank || w != world || strcmp(lv, level) != 0 || line[n] != ' ') return NULL;
    return line + n + 1;
}

#define NTHREADS 8
#define NLINES 500

static void *worker(void *arg) {
    int id = (int)(long)arg;
    for (int i = 0; i < NLINES; i++)
        ODL_LOG_INFO("thread %d line %d %s", id, i, "payload-payload-payload-payload-payload-payload-payload-payload");
    return NULL;
}

int main(void) {
    FILE *f = tmpfile();
    TCHECK(f != NULL, "tmpfile");
    if (!f) return 1;
    odl_log_set_stream(f);

    /* Format, default level info, single process. */
    ODL_LOG_INFO("hello %d", 42);
    ODL_LOG_DEBUG("not shown at info");
    char *out = drain(f);
    TCHECK(count_lines(out) == 1, "one line, got '%s'", out);
    const char *m = check_prefix(out, 0, 1, "INFO");
    TCHECK(m && strcmp(m, "hello 42\n") == 0, "line '%s'", out);
    TCHECK(strlen(out) == strlen("2026-11-29T21:40:00.123Z [rank 0/1] INFO hello 42\n"), "length of '%s'", out);
    free(out);

    /* Level parsing and filtering. */
    odl_log_level lv = ODL_LOG_LEVEL_INFO;
    TOK(odl_log_parse_level("debug", &lv));
    TCHECK(lv == ODL_LOG_LEVEL_DEBUG, "debug");
    TOK(odl_log_parse_level("WARN", &lv));
    TCHECK(lv == ODL_LOG_LEVEL_WARN, "WARN");
    TOK(odl_log_parse_level("warning", &lv));
    TCHECK(lv == ODL_LOG_LEVEL_WARN, "warning");
    TOK(odl_log_parse_level("Error", &lv));
    TCHECK(lv == ODL_LOG_LEVEL_ERROR, "Error");
    TFAIL(odl_log_parse_level("verbose", &lv), ODL_E_INVAL);
    TCHECK(strstr(odl_error_msg(), "verbose") && strstr(odl_error_msg(), "debug|info|warn|error"), "msg '%s'",
           odl_error_msg());
    TFAIL(odl_log_parse_level(NULL, &lv), ODL_E_INVAL);

    odl_log_set_level(ODL_LOG_LEVEL_DEBUG);
    ODL_LOG_DEBUG("d");
    ODL_LOG_INFO("i");
    ODL_LOG_WARN("w");
    ODL_LOG_ERROR("e");
    out = drain(f);
    TCHECK(count_lines(out) == 4, "4 lines at debug: '%s'", out);
    m = check_prefix(out, 0, 1, "DEBUG");
    TCHECK(m && m[0] == 'd', "debug line '%s'", out);
    free(out);

    odl_log_set_level(ODL_LOG_LEVEL_WARN);
    TCHECK(odl_log_get_level() == ODL_LOG_LEVEL_WARN, "get_level");
    ODL_LOG_DEBUG("d");
    ODL_LOG_INFO("i");
    ODL_LOG_WARN("w");
    ODL_LOG_ERROR("e");
    out = drain(f);
    TCHECK(count_lines(out) == 2, "2 lines at warn: '%s'", out);
    m = check_prefix(out, 0, 1, "WARN");
    TCHECK(m && strncmp(m, "w\n", 2) == 0, "warn line '%s'", out);
    free(out);
    odl_log_set_level(ODL_LOG_LEVEL_INFO);

    /* Rank filter: rank 0 of 4 prints everything at its level; rank 2 of 4 only WARN and ERROR. */
    odl_log_set_rank(0, 4);
    ODL_LOG_INFO("from rank zero");
    out = drain(f);
    m = check_prefix(out, 0, 4, "INFO");
    TCHECK(m && strcmp(m, "from rank zero\n") == 0, "rank 0 line '%s'", out);
    free(out);
    odl_log_set_rank(2, 4);
    TCHECK(!odl_log_enabled(ODL_LOG_LEVEL_INFO), "rank 2 info disabled");
    TCHECK(odl_log_enabled(ODL_LOG_LEVEL_WARN), "rank 2 warn enabled");
    ODL_LOG_INFO("hidden");
    ODL_LOG_WARN("rank two warns");
    ODL_LOG_ERROR("rank two fails");
    out = drain(f);
    TCHECK(count_lines(out) == 2, "rank 2: 2 lines, got '%s'", out);
    m = check_prefix(out, 2, 4, "WARN");
    TCHECK(m && strncmp(m, "rank two warns\n", 15) == 0, "rank 2 warn '%s'", out);
    TCHECK(strstr(out, "hidden") == NULL, "info hidden on rank 2");
    free(out);
    odl_log_set_rank(0, 1);

    /* A tag replaces the rank in the prefix (odl_coordinator's "[coordinator]"). */
    odl_log_set_tag("coordinator");
    ODL_LOG_INFO("tagged");
    out = drain(f);
    TCHECK(out && strstr(out, "Z [coordinator] INFO tagged\n") && !strstr(out, "[rank"), "tagged line '%s'", out);
    free(out);
    odl_log_set_tag(NULL);

    /* Multi-line message: the prefix on every line, trailing newline dropped. */
    ODL_LOG_INFO("config:\nmodel: mnist\ntrain:\n  lr: 1\n");
    out = drain(f);
    TCHECK(count_lines(out) == 4, "4 lines, got '%s'", out);
    {
        const char *want[] = {"config:", "model: mnist", "train:", "  lr: 1"};
        char *save = NULL, *line = strtok_r(out, "\n", &save);
        for (int i = 0; i < 4 && line; i++, line = strtok_r(NULL, "\n", &save)) {
            const char *mm = check_prefix(line, 0, 1, "INFO");
            TCHECK(mm && strcmp(mm, want[i]) == 0, "line %d '%s'", i, line);
        }
    }
    free(out);

    /* A message longer than the stack buffer is printed whole. */
    {
        size_t n = 20000;
        char *big = malloc(n + 1);
        for (size_t i = 0; i < n; i++) big[i] = (char)('a' + i % 26);
        big[n] = '\0';
        ODL_LOG_INFO("%s|end", big);
        out = drain(f);
        m = check_prefix(out, 0, 1, "INFO");
        TCHECK(m && strlen(m) == n + 5 && strncmp(m, big, n) == 0 && strcmp(m + n, "|end\n") == 0,
               "long message (%zu chars)", m ? strlen(m) : 0);
        free(out);
        free(big);
    }

    /* Threads: every line whole and well-formed, none lost. */
    {
        pthread_t th[NTHREADS];
        for (long i = 0; i < NTHREADS; i++) pthread_create(&th[i], NULL, worker, (void *)i);
        for (int i = 0; i < NTHREADS; i++) pthread_join(th[i], NULL);
        out = drain(f);
        TCHECK(count_lines(out) == NTHREADS * NLINES, "%d lines, got %d", NTHREADS * NLINES, count_lines(out));
        int bad = 0, seen[NTHREADS] = {0};
        char *save = NULL;
        for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
            const char *mm = check_prefix(line, 0, 1, "INFO");
            int id = -1, k = -1, n = 0;
            if (!mm || sscanf(mm, "thread %d line %d %n", &id, &k, &n) != 2 || id < 0 || id >= NTHREADS ||
                k != seen[id] || strcmp(mm + n, "payload-payload-payload-payload-payload-payload-payload-payload") != 0) {
                bad++;
                continue;
            }
            seen[id]++;
        }
        TCHECK(bad == 0, "%d malformed or out-of-order lines", bad);
        for (int i = 0; i < NTHREADS; i++) TCHECK(seen[i] == NLINES, "thread %d: %d lines", i, seen[i]);
        free(out);
    }

    TCHECK(strcmp(odl_log_level_name(ODL_LOG_LEVEL_ERROR), "ERROR") == 0, "level name");
    odl_log_set_stream(NULL);
    fclose(f);
    return odl_test_finish("test_log");
}
