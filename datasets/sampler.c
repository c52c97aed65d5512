#include "odl/sampler.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "odl/rng.h"

#define SAMPLER_STREAM 0x53414D50000000ull /* Philox offset space of the sampler ("SAMP") */

odl_status odl_sampler_init(odl_sampler *s, int64_t n, int rank, int world_size, uint64_t seed, int shuffle) {
    memset(s, 0, sizeof *s);
    if (n < 1) return ODL_ERR(ODL_E_INVAL, "sampler over %" PRId64 " samples", n);
    if (world_size < 1 || rank < 0 || rank >= world_size)
        return ODL_ERR(ODL_E_INVAL, "rank %d outside world size %d", rank, world_size);
    s->perm = malloc((size_t)n * sizeof *s->perm);
    if (!s->perm) return ODL_ERR(ODL_E_NOMEM, "sampler permutation of %" PRId64 " entries", n);
    s->n = n;
    s->rank = rank;
    s->world_size = world_size;
    s->seed = seed;
    s->shuffle = shuffle;
    s->epoch = -1;
    return ODL_OK;
}

void odl_sampler_free(odl_sampler *s) {
    free(s->perm);
    memset(s, 0, sizeof *s);
}

odl_status odl_sampler_set_epoch(odl_sampler *s, int64_t epoch) {
    if (epoch < 0) return ODL_ERR(ODL_E_INVAL, "negative epoch %" PRId64, epoch);
    for (int64_t i = 0; i < s->n; i++) s->perm[i] = i;
    if (s->shuffle) {
        for (int64_t i = s->n - 1; i > 0; i--) {
            uint64_t u = odl_philox_u32(s->seed, SAMPLER_STREAM + (uint64_t)epoch, (uint64_t)i);
            int64_t j = (int64_t)((u * (uint64_t)(i + 1)) >> 32); /* uniform in [0, i] (Lemire) */
            int64_t t = s->perm[i];
            s->perm[i] = s->perm[j];
            s->perm[j] = t;
        }
    }
    s->epoch = epoch;
    return ODL_OK;
}

odl_status odl_sampler_batch(const odl_sampler *s, int64_t cursor, int batch, int64_t *idx, int *local, int *global) {
    if (s->epoch < 0) return ODL_ERR(ODL_E_INVAL, "sampler: no epoch set");
    if (cursor < 0 || cursor >= s->n)
        return ODL_ERR(ODL_E_INVAL, "sample cursor %" PRId64 " outside [0, %" PRId64 ")", cursor, s->n);
    int64_t end = cursor + (int64_t)s->world_size * batch;
    if (end > s->n) end = s->n;
    int k = 0;
    for (int64_t pos = cursor + s->rank; pos < end; pos += s->world_size) idx[k++] = s->perm[pos];
    *local = k;
    *global = (int)(end - cursor);
    return ODL_OK;
}
