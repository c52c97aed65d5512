/* The resume semantics of the global sample cursor across world sizes (odl/sampler.h, docs/checkpoints.md):
 * an epoch run for k steps at world size W1, checkpointed (cursor = samples consumed by all ranks), and
 * finished at world size W2 sees every sample of the epoch exactly once, for every split point, every
 * pair of world sizes and short last steps. Also: the samples of each step are the same whatever the
 * world size (W ranks of batch b = one rank of batch W*b), which is what makes a resumed run at
 * another world size follow the same data order. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "odl/sampler.h"
#include "test_util.h"

/* Run positions [cursor, stop) of epoch `epoch` with world W, batch b per rank, counting every index
 * each rank gets in seen[]. Returns the cursor reached (a step boundary) and the number of steps. */
static int64_t run_steps(int64_t n, int W, int b, uint64_t seed, int64_t epoch, int64_t cursor, int64_t max_steps,
                         int *seen, int64_t *steps) {
    odl_sampler s[8];
    int64_t *idx = malloc((size_t)b * sizeof *idx);
    for (int r = 0; r < W; r++) {
        TOK(odl_sampler_init(&s[r], n, r, W, seed, 1));
        TOK(odl_sampler_set_epoch(&s[r], epoch));
    }
    *steps = 0;
    while (cursor < n && *steps < max_steps) {
        int global = -1, total = 0;
        for (int r = 0; r < W; r++) {
            int local = 0, g = 0;
            TOK(odl_sampler_batch(&s[r], cursor, b, idx, &local, &g));
            TCHECK(global < 0 || g == global, "ranks agree on the step's size");
            global = g;
            total += local;
            for (int k = 0; k < local; k++) seen[idx[k]]++;
        }
        TCHECK(total == global, "the ranks' shares add up to the step (%d vs %d)", total, global);
        cursor += global;
        (*steps)++;
    }
    for (int r = 0; r < W; r++) odl_sampler_free(&s[r]);
    free(idx);
    return cursor;
}

int main(void) {
    const int worlds[] = {1, 2, 3, 4, 8};
    const int64_t sizes[] = {640, 1001, 97};
    const int batches[] = {64, 7};
    int64_t cases = 0;
    for (size_t ni = 0; ni < sizeof sizes / sizeof sizes[0]; ni++) {
        int64_t n = sizes[ni];
        int *seen = calloc((size_t)n, sizeof *seen);
        for (size_t bi = 0; bi < sizeof batches / sizeof batches[0]; bi++) {
            int b = batches[bi];
            for (size_t w1 = 0; w1 < sizeof worlds / sizeof worlds[0]; w1++)
                for (size_t w2 = 0; w2 < sizeof worlds / sizeof worlds[0]; w2++) {
                    int W1 = worlds[w1], W2 = worlds[w2];
                    int64_t steps1_total = (n + (int64_t)W1 * b - 1) / ((int64_t)W1 * b);
                    for (int64_t k = 0; k <= steps1_total; k += (steps1_total > 6 ? steps1_total / 6 : 1)) {
                        memset(seen, 0, (size_t)n * sizeof *seen);
                        int64_t s1, s2;
                        uint64_t seed = 11 + (uint64_t)k;
                        int64_t epoch = 3;
                        /* Part one at W1 for k steps; the checkpoint keeps the cursor. */
                        int64_t cursor = run_steps(n, W1, b, seed, epoch, 0, k, seen, &s1);
                        /* Part two at W2 from that cursor to the end of the epoch. */
                        int64_t end = cursor < n ? run_steps(n, W2, b, seed, epoch, cursor, INT64_MAX, seen, &s2) : cursor;
                        TCHECK(end == n, "n %" PRId64 " W %d->%d k %" PRId64 ": ended at %" PRId64, n, W1, W2, k, end);
                        int64_t bad = 0;
                        for (int64_t i = 0; i < n; i++) bad += seen[i] != 1;
                        TCHECK(bad == 0, "n %" PRId64 " b %d W %d->%d after %" PRId64 " steps: %" PRId64
                               " samples not seen exactly once", n, b, W1, W2, k, bad);
                        cases++;
                    }
                }
        }
        free(seen);
    }
    /* One step of W ranks with batch b takes the same samples as one rank with batch W*b. */
    {
        int64_t n = 1001;
        odl_sampler one, many[4];
        TOK(odl_sampler_init(&one, n, 0, 1, 5, 1));
        TOK(odl_sampler_set_epoch(&one, 2));
        for (int r = 0; r < 4; r++) {
            TOK(odl_sampler_init(&many[r], n, r, 4, 5, 1));
            TOK(odl_sampler_set_epoch(&many[r], 2));
        }
        int64_t a[64], bb[16];
        int same = 1;
        for (int64_t cursor = 0; cursor < n; cursor += 64) {
            int la, ga;
            TOK(odl_sampler_batch(&one, cursor, 64, a, &la, &ga));
            int *hit = calloc((size_t)n, sizeof *hit);
            for (int k = 0; k < la; k++) hit[a[k]]++;
            for (int r = 0; r < 4; r++) {
                int lb, gb;
                TOK(odl_sampler_batch(&many[r], cursor, 16, bb, &lb, &gb));
                same &= gb == ga;
                for (int k = 0; k < lb; k++) hit[bb[k]]--;
            }
            for (int64_t i = 0; i < n; i++) same &= hit[i] == 0;
            free(hit);
        }
        TCHECK(same, "4 ranks x 16 take the same samples per step as 1 rank x 64");
        odl_sampler_free(&one);
        for (int r = 0; r < 4; r++) odl_sampler_free(&many[r]);
    }
    /* A cursor outside the epoch is refused (a checkpoint of another epoch size). */
    {
        odl_sampler s;
        int64_t idx[8];
        int l, g;
        TOK(odl_sampler_init(&s, 100, 0, 1, 1, 1));
        TOK(odl_sampler_set_epoch(&s, 0));
        TFAIL(odl_sampler_batch(&s, 100, 8, idx, &l, &g), ODL_E_INVAL);
        odl_sampler_free(&s);
    }
    printf("%" PRId64 " world-size changes checked\n", cases);
    return odl_test_finish("test_ckpt_sampler");
}
