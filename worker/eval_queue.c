/* The evaluation's side of the coordinator's work queue (worker/eval_queue.h).
 *
 * A chunk file, DIR/eval/chunk-NNNNNN.bin (host byte order, as the MPI gather of the statistics):
 *   "ODLEVCH1", int64 chunk, int64 first, int64 count, uint32 key bytes, uint32 0, uint64 payload bytes,
 *   the key, the payload (the per-image records of worker/eval.c, in evaluation order).
 * The key is the evaluation's settings, so a file of another evaluation is never taken for this one. */
#include "worker/eval_queue.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "odl/file.h"
#include "odl/log.h"

#define CHUNK_MAGIC "ODLEVCH1"

typedef struct chunk_hdr {
    char magic[8];
    int64_t chunk, first, count;
    uint32_t key_len, zero;
    uint64_t payload;
} chunk_hdr;

static void chunk_path(const char *dir, int64_t k, char *buf, size_t cap) {
    snprintf(buf, cap, "%s/" ODL_COORD_CHUNK_FILE, dir, k);
}

/* Write the chunk's file without ever replacing one (odl/file.h with ODL_FILE_NO_REPLACE: a temporary
 * file of this process, fsync, link(2) to the final name, fsync of the folder); *kept = 0 when another
 * rank's result is there already. */
static odl_status chunk_commit(const char *dir, const char *key, int64_t k, int64_t first, int64_t count,
                               const uint8_t *p, size_t n, int *kept) {
    char path[PATH_MAX + 32];
    chunk_path(dir, k, path, sizeof path);
    chunk_hdr h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, CHUNK_MAGIC, 8);
    h.chunk = k;
    h.first = first;
    h.count = count;
    h.key_len = (uint32_t)strlen(key);
    h.payload = n;
    *kept = 0;
    odl_file_tmp t;
    ODL_CHECK(odl_file_begin(&t, path, ODL_FILE_NO_REPLACE));
    if (fwrite(&h, sizeof h, 1, t.f) != 1 || (h.key_len && fwrite(key, h.key_len, 1, t.f) != 1) ||
        (n && fwrite(p, n, 1, t.f) != 1)) {
        int e = errno;
        odl_file_abort(&t);
        return ODL_ERR(ODL_E_IO, "writing %s: %s", t.tmp, strerror(e));
    }
    return odl_file_commit(&t, kept);
}

/* Read chunk k's file and append its payload to *all, after checking the header and the records. */
static odl_status chunk_read(const char *dir, const char *key, int64_t k, int64_t first, int64_t count,
                             const odl_eval_queue_ops *ops, uint8_t **all, size_t *all_n) {
    char path[PATH_MAX + 32];
    chunk_path(dir, k, path, sizeof path);
    FILE *f = fopen(path, "rb");
    if (!f)
        return ODL_ERR(ODL_E_IO, "%s: %s (the queue says chunk %" PRId64 " is done; remove %s to evaluate again)", path,
                       strerror(errno), k, dir);
    chunk_hdr h;
    size_t klen = strlen(key);
    char *kbuf = malloc(klen + 1);
    odl_status s = ODL_OK;
    if (!kbuf) s = ODL_ERR(ODL_E_NOMEM, "%s", path);
    else if (fread(&h, sizeof h, 1, f) != 1 || memcmp(h.magic, CHUNK_MAGIC, 8))
        s = ODL_ERR(ODL_E_FORMAT, "%s: not an evaluation chunk file", path);
    else if (h.chunk != k || h.first != first || h.count != count || h.key_len != klen ||
             fread(kbuf, 1, klen, f) != klen || memcmp(kbuf, key, klen))
        s = ODL_ERR(ODL_E_FORMAT, "%s: of another chunk or evaluation (chunk %" PRId64 ", images %" PRId64 "+%" PRId64
                    "; want chunk %" PRId64 ", images %" PRId64 "+%" PRId64 " of '%s')", path, h.chunk, h.first, h.count, k,
                    first, count, key);
    else if (h.payload > (uint64_t)1 << 40)
        s = ODL_ERR(ODL_E_FORMAT, "%s: payload of %" PRIu64 " bytes", path, h.payload);
    uint8_t *nb = NULL;
    if (s == ODL_OK && !(nb = realloc(*all, *all_n + h.payload + 1))) s = ODL_ERR(ODL_E_NOMEM, "%s", path);
    if (nb) *all = nb;
    if (s == ODL_OK && fread(*all + *all_n, 1, h.payload, f) != h.payload)
        s = ODL_ERR(ODL_E_FORMAT, "%s: truncated (%" PRIu64 " payload bytes expected)", path, h.payload);
    if (s == ODL_OK && fgetc(f) != EOF) s = ODL_ERR(ODL_E_FORMAT, "%s: bytes after the payload", path);
    if (s == ODL_OK && (s = ops->check(ops->ctx, *all + *all_n, h.payload, first, count)) != ODL_OK)
        odl_error_prefix("%s", path);
    if (s == ODL_OK) *all_n += h.payload;
    free(kbuf);
    fclose(f);
    return s;
}

odl_status odl_eval_queue_run(odl_coord_client *c, const char *key, int64_t n_items, int64_t chunk_items, int rank,
                              const odl_eval_queue_ops *ops, uint8_t **all, size_t *all_n, int64_t *n_mine) {
    *all = NULL;
    *all_n = 0;
    *n_mine = 0;
    odl_coord_work w;
    int64_t chunks_mine = 0;
    odl_coord_client_evaluating(c, 1); /* waiting for a straggler's chunk is no hang of the job */
    for (;;) {
        ODL_CHECK(odl_coord_client_work_request(c, key, n_items, chunk_items, &w));
        if (w.error[0]) return ODL_ERR(ODL_E_CONFIG, "the coordinator refused the evaluation: %s", w.error);
        if (w.finished) break;
        if (w.chunk < 0) {
            usleep((useconds_t)(w.retry_ms ? w.retry_ms : 100) * 1000);
            continue;
        }
        if (w.first < 0 || w.count < 1 || w.first + w.count > n_items)
            return ODL_ERR(ODL_E_FORMAT, "the coordinator handed out images %" PRId64 "+%" PRId64 " of %" PRId64, w.first,
                           w.count, n_items);
        uint8_t *rec = NULL;
        size_t n = 0;
        odl_status s = ops->eval(ops->ctx, w.first, w.count, &rec, &n);
        int kept = 0;
        if (s == ODL_OK) s = chunk_commit(w.dir, key, w.chunk, w.first, w.count, rec, n, &kept);
        free(rec);
        ODL_CHECK(s);
        ODL_CHECK(odl_coord_client_work_done(c, w.chunk, kept));
        ODL_LOG_DEBUG("evaluation chunk %" PRId64 " (images %" PRId64 "..%" PRId64 ")%s%s", w.chunk, w.first,
                      w.first + w.count - 1, w.backup ? ", a straggler's copy" : "", kept ? "" : ": discarded, another result won");
        *n_mine += w.count;
        odl_coord_client_progress(c, ++chunks_mine, 0, 0, 0);
    }
    if (rank != 0) return ODL_OK;
    for (int64_t k = 0; k < w.n_chunks; k++) {
        int64_t first = k * chunk_items, count = n_items - first < chunk_items ? n_items - first : chunk_items;
        odl_status s = chunk_read(w.dir, key, k, first, count, ops, all, all_n);
        if (s != ODL_OK) {
            free(*all);
            *all = NULL;
            *all_n = 0;
            return s;
        }
    }
    return ODL_OK;
}
