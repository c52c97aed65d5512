/* What the coordinator costs a training step on the worker's side (issue 12's "no measurable
 * difference"), without a GPU: the calls worker/coord.c makes after every step
 * (odl_coord_client_progress, odl_coord_client_step_request) against a live odl_coordinator on
 * loopback, its heartbeat thread running, timed per step; and the CPU time the client's threads take
 * beside the training thread. bench/coord_step_cost.sh starts the coordinator and runs this.
 *   usage: coord_step_cost ADDR SECRET_FILE GENERATION [SECONDS]
 * Prints ns per step (median of 9 rounds) and the background threads' CPU as a share of one core. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "odl/coord_client.h"
#include "odl/status.h"

static double now_s(clockid_t id) {
    struct timespec t;
    clock_gettime(id, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: coord_step_cost ADDR SECRET_FILE GENERATION [SECONDS]\n");
        return 2;
    }
    double seconds = argc > 4 ? atof(argv[4]) : 2.0;
    odl_coord_hello h;
    memset(&h, 0, sizeof h);
    h.rank = 0;
    h.world_size = 1;
    h.generation = strtoull(argv[3], NULL, 10);
    h.pid = (uint32_t)getpid();
    h.seed = 1;
    h.gpu_index = -1;
    snprintf(h.node, sizeof h.node, "bench");
    odl_coord_welcome w;
    odl_coord_client *c = NULL;
    if (odl_coord_client_connect(argv[1], argv[2], &h, NULL, &w, &c) != ODL_OK) {
        fprintf(stderr, "coord_step_cost: %s\n", odl_error_msg());
        return 1;
    }
    enum { ROUNDS = 9 };
    double ns[ROUNDS];
    int64_t step = 0;
    double cpu0 = now_s(CLOCK_PROCESS_CPUTIME_ID), main0 = now_s(CLOCK_THREAD_CPUTIME_ID), wall0 = now_s(CLOCK_MONOTONIC);
    for (int r = 0; r < ROUNDS; r++) {
        const int64_t n = 1000000;
        double t0 = now_s(CLOCK_MONOTONIC);
        for (int64_t i = 0; i < n; i++, step++) {
            odl_coord_client_progress(c, step, 0, step * 64, 1e5); /* h_after_step */
            (void)odl_coord_client_step_request(c, step);          /* h_step_request */
        }
        ns[r] = (now_s(CLOCK_MONOTONIC) - t0) * 1e9 / (double)n;
    }
    /* The rest of the time idle, as a GPU-bound training thread mostly is: the heartbeat thread's cost. */
    double left = seconds - (now_s(CLOCK_MONOTONIC) - wall0);
    if (left > 0) usleep((useconds_t)(left * 1e6));
    double wall = now_s(CLOCK_MONOTONIC) - wall0;
    double bg = (now_s(CLOCK_PROCESS_CPUTIME_ID) - cpu0) - (now_s(CLOCK_THREAD_CPUTIME_ID) - main0);
    odl_coord_client_close(c, 0);
    qsort(ns, ROUNDS, sizeof ns[0], cmp_double);
    printf("coordinator client per training step: %.1f ns (median of %d rounds of 1e6 steps; min %.1f, max %.1f)\n",
           ns[ROUNDS / 2], ROUNDS, ns[0], ns[ROUNDS - 1]);
    printf("heartbeat thread every %.0f ms: %.4f%% of one core over %.1f s\n", w.heartbeat_s * 1e3, 100.0 * bg / wall,
           wall);
    return 0;
}
