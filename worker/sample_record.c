/* ODL_SAMPLE_RECORD and ODL_SAMPLE_TEST_LOSE_AT_STEP (worker/sample_record.h). */
#include "worker/sample_record.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "odl/env.h"
#include "odl/log.h"

odl_status odl_sample_record_open(odl_sample_record *r, int rank, int batch) {
    memset(r, 0, sizeof *r);
    r->fd = -1;
    r->rank = rank;
    r->lose_step = odl_env_int(ODL_ENV_SAMPLE_TEST_LOSE_AT_STEP);
    if (!odl_env_is_set(ODL_ENV_SAMPLE_RECORD)) return ODL_OK;
    r->cap = batch > 0 ? batch : 1;
    r->idx = malloc((size_t)r->cap * sizeof *r->idx);
    if (!r->idx) return ODL_ERR(ODL_E_NOMEM, "ODL_SAMPLE_RECORD: %d indices", r->cap);
    int64_t gen = odl_env_is_set(ODL_ENV_COORD_GENERATION) ? odl_env_int(ODL_ENV_COORD_GENERATION) : 0;
    char path[4096];
    snprintf(path, sizeof path, "%s.gen%" PRId64 ".rank%d.txt", odl_env_str(ODL_ENV_SAMPLE_RECORD), gen, rank);
    r->fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (r->fd < 0) return ODL_ERR(ODL_E_IO, "ODL_SAMPLE_RECORD: %s: %s", path, strerror(errno));
    ODL_LOG_DEBUG("test hook ODL_SAMPLE_RECORD: the samples of every step go to %s", path);
    return ODL_OK;
}

void odl_sample_record_plant(odl_sample_record *r, odl_batch *b, int64_t step) {
    if (r->lose_step < 0 || step != r->lose_step || r->rank != 0 || b->local < 1) return;
    b->local--;
    ODL_LOG_WARN("test hook ODL_SAMPLE_TEST_LOSE_AT_STEP: step %" PRId64 " trains without sample %" PRId64
                 " (a planted bug)", step, b->idx[b->local]);
}

void odl_sample_record_keep(odl_sample_record *r, const odl_batch *b) {
    if (r->fd < 0) return;
    r->epoch = b->epoch;
    r->cursor = b->cursor;
    r->local = b->local < r->cap ? b->local : r->cap;
    if (r->local > 0) memcpy(r->idx, b->idx, (size_t)r->local * sizeof *r->idx);
}

odl_status odl_sample_record_step(odl_sample_record *r, int64_t step, int world) {
    if (r->fd < 0) return ODL_OK;
    size_t cap = 96 + (size_t)r->local * 21;
    char *line = malloc(cap);
    if (!line) return ODL_ERR(ODL_E_NOMEM, "ODL_SAMPLE_RECORD line");
    size_t n = (size_t)snprintf(line, cap, "%" PRId64 " %" PRId64 " %" PRId64 " %d %d", step, r->epoch, r->cursor, world,
                                r->local);
    for (int i = 0; i < r->local; i++) n += (size_t)snprintf(line + n, cap - n, " %" PRId64, r->idx[i]);
    line[n++] = '\n';
    ssize_t w = write(r->fd, line, n); /* one write: O_APPEND keeps the line whole */
    int e = errno;
    free(line);
    if (w != (ssize_t)n) return ODL_ERR(ODL_E_IO, "ODL_SAMPLE_RECORD: write: %s", w < 0 ? strerror(e) : "short write");
    return ODL_OK;
}

void odl_sample_record_close(odl_sample_record *r) {
    if (r->fd >= 0) close(r->fd);
    free(r->idx);
    r->fd = -1;
    r->idx = NULL;
}
