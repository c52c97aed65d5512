/* Distributed sampler with PyTorch DistributedSampler semantics, resumable from a global cursor.
 *
 * Each epoch has a permutation of the n sample indices, seeded by (seed, epoch) with Philox (a
 * Fisher-Yates shuffle), identical on every rank. A step of a job with world size W and per-rank
 * batch b consumes the global positions [cursor, cursor + W*b) of the permutation; rank r takes
 * positions cursor + r, cursor + r + W, ... So W ranks of batch b see the same samples per step as one
 * rank of batch W*b, and the "global sample cursor" (positions consumed this epoch) is all a checkpoint
 * needs to resume the epoch at another world size without repeating or skipping a sample. The last step
 * of an epoch may be short (drop_last = False): ranks then get floor or ceil of the remainder / W.
 */
#ifndef ODL_SAMPLER_H
#define ODL_SAMPLER_H

#include "odl/api.h"
#include <stdint.h>

#include "odl/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct odl_sampler {
    int64_t n;       /* samples per epoch */
    int rank, world_size;
    uint64_t seed;
    int shuffle;
    int64_t epoch;   /* epoch whose permutation is in perm (-1: none) */
    int64_t *perm;   /* [n] */
} odl_sampler;

ODL_API odl_status odl_sampler_init(odl_sampler *s, int64_t n, int rank, int world_size, uint64_t seed, int shuffle);
ODL_API void odl_sampler_free(odl_sampler *s);
/* Build the permutation of an epoch (0-based). */
ODL_API odl_status odl_sampler_set_epoch(odl_sampler *s, int64_t epoch);
/* This rank's sample indices for the step starting at `cursor` with per-rank batch `batch`: writes up
 * to `batch` indices to idx and returns their count in *local; *global gets the step's total count over
 * all ranks (min(W*batch, n - cursor)). Errors: ODL_E_INVAL for a cursor outside [0, n). */
ODL_API odl_status odl_sampler_batch(const odl_sampler *s, int64_t cursor, int batch, int64_t *idx, int *local,
                             int *global);

#ifdef __cplusplus
}
#endif
#endif
