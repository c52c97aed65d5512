/* odl_comm_gather_host_bytes across MPI ranks (started by tests/comm_mpirun.sh) and in a local group:
 * rank r sends r * 1000 + 7 bytes (rank 1 in a 3-rank job sends none) of a pattern naming it; rank 0
 * receives them concatenated in rank order, the others receive NULL. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "odl/comm.h"
#include "test_util.h"

static size_t bytes_of(int r, int size) { return size == 3 && r == 1 ? 0 : (size_t)r * 1000 + 7; }
static uint8_t pattern(int r, size_t i) { return (uint8_t)(r * 31 + i * 7); }

int main(void) {
    odl_launch_info li;
    if (odl_launch_detect(&li) != ODL_OK) return 1;
    odl_comm_options o = {.device_type = ODL_DEV_CPU, .cuda_index = -1, .timeout_s = 60.0};
    odl_comm *c = NULL;
    if (odl_comm_init(&li, &o, &c) != ODL_OK) {
        fprintf(stderr, "odl_comm_init: %s\n", odl_error_msg());
        odl_comm_abort_job(NULL, 1, "init failed");
    }
    const int rank = odl_comm_rank(c), size = odl_comm_size(c);
    size_t n = bytes_of(rank, size);
    uint8_t *mine = malloc(n + 1);
    for (size_t i = 0; i < n; i++) mine[i] = pattern(rank, i);
    void *all = (void *)1;
    size_t total = 12345;
    TOK(odl_comm_gather_host_bytes(c, mine, n, 0, &all, &total));
    if (rank == 0) {
        size_t want = 0;
        for (int r = 0; r < size; r++) want += bytes_of(r, size);
        TCHECK(all != NULL && total == want, "total %zu, want %zu", total, want);
        size_t off = 0, bad = 0;
        for (int r = 0; all && r < size; r++)
            for (size_t i = 0; i < bytes_of(r, size); i++, off++) bad += ((uint8_t *)all)[off] != pattern(r, i);
        TCHECK(bad == 0, "%zu bytes out of place", bad);
    } else {
        TCHECK(all == NULL, "rank %d: a buffer on a non-root rank", rank);
    }
    free(all);
    /* root 1 when there is one; a root outside the group is an error on every rank */
    if (size > 1) {
        TOK(odl_comm_gather_host_bytes(c, mine, n, 1, &all, NULL));
        TCHECK((rank == 1) == (all != NULL), "root 1");
        free(all);
    }
    TFAIL(odl_comm_gather_host_bytes(c, mine, n, size, &all, NULL), ODL_E_INVAL);
    free(mine);
    odl_comm_finalize(c);
    printf("rank %d: ", rank);
    return odl_test_finish("comm_gather");
}
