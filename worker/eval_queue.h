/* odl_worker --task=eval under odl_coordinator (docs/eval.md "Under the coordinator"): chunks of the
 * evaluation order come from the coordinator's work queue, each chunk's statistics are committed to a
 * file of the job directory before the chunk is reported done, and rank 0 computes the metrics from
 * every chunk's file once the queue is finished. */
#ifndef ODL_WORKER_EVAL_QUEUE_H
#define ODL_WORKER_EVAL_QUEUE_H

#include <stddef.h>
#include <stdint.h>

#include "odl/coord_client.h"
#include "odl/status.h"

typedef struct odl_eval_queue_ops {
    void *ctx;
    /* Evaluate images [first, first + count) of the evaluation order: *out (malloc'd, the caller frees
     * it) holds their records, *n bytes. */
    odl_status (*eval)(void *ctx, int64_t first, int64_t count, uint8_t **out, size_t *n);
    /* A chunk file's records: exactly the images [first, first + count), well formed. ODL_E_FORMAT
     * otherwise (the message says what is wrong; the caller names the file). */
    odl_status (*check)(void *ctx, const uint8_t *p, size_t n, int64_t first, int64_t count);
} odl_eval_queue_ops;

/* Ask c for chunks until the queue is finished; evaluate each with ops->eval and commit its records to
 * DIR/eval/chunk-NNNNNN.bin (a temporary file, fsync, link(2): an existing file is never replaced, so
 * the first result of a chunk handed to two ranks wins), then report it done. key describes the
 * evaluation (the coordinator refuses a job directory of another one). Rank 0 then reads every chunk's
 * file in chunk order (= the evaluation order) into *all (malloc'd, *all_n bytes; NULL on other
 * ranks). *n_mine: images this rank evaluated. Errors: the coordinator's refusal (ODL_E_CONFIG), a
 * chunk file that cannot be written or read back (ODL_E_IO, ODL_E_FORMAT naming it), ops' errors. */
odl_status odl_eval_queue_run(odl_coord_client *c, const char *key, int64_t n_items, int64_t chunk_items, int rank,
                              const odl_eval_queue_ops *ops, uint8_t **all, size_t *all_n, int64_t *n_mine);

#endif
