/* Communication layer across MPI ranks (CPU backend). Started by tests/comm_mpirun.sh:
 *   test_comm_mpi            collectives, agreement, gradient buckets, network broadcast and check
 *   test_comm_mpi --hang     rank 1 never joins an AllReduce; rank 0's watchdog must end the job
 *                            (dist.timeout_s = 1) with a message naming it; checked by comm_hang.sh
 * Every rank prints its own result line; a rank with failures exits 1 (mpirun then fails). */
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "odl/comm.h"
#include "odl/log.h"
#include "odl/rng.h"
#include "fake_net.h"
#include "test_util.h"

static odl_comm *g_c;
static int g_rank, g_size;

static uint64_t hash_bytes(const void *p, size_t n) {
    const unsigned char *b = p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* 1 when every rank passes the same value. */
static int same_on_all_ranks(int64_t v) {
    int64_t *all = calloc((size_t)g_size, sizeof *all);
    int same = 1;
    if (odl_comm_allgather_host_i64(g_c, &v, 1, all) != ODL_OK) same = 0;
    for (int r = 0; same && r < g_size; r++) same = all[r] == v;
    free(all);
    return same;
}

static void test_group(void) {
    TCHECK(odl_comm_get_backend(g_c) == ODL_COMM_MPI, "backend %s", odl_comm_backend_name(odl_comm_get_backend(g_c)));
    const char *env_rank = getenv("OMPI_COMM_WORLD_RANK");
    if (env_rank) TCHECK(atoi(env_rank) == g_rank, "rank %d vs env %s", g_rank, env_rank);
    TCHECK(odl_comm_local_size(g_c) >= 1 && odl_comm_local_rank(g_c) < odl_comm_local_size(g_c), "local %d/%d",
           odl_comm_local_rank(g_c), odl_comm_local_size(g_c));
    TCHECK(same_on_all_ranks(g_size), "size differs between ranks");
}

static void test_allreduce_exact(void) {
    enum { N = 1000 };
    float v[N];
    for (int i = 0; i < N; i++) v[i] = (float)(g_rank + 1) + 0.5f * (float)i;
    TOK(odl_comm_allreduce_sum(g_c, v, N));
    int bad = 0;
    for (int i = 0; i < N; i++) {
        float want = (float)(g_size * (g_size + 1) / 2) + 0.5f * (float)i * (float)g_size;
        if (v[i] != want) bad++;
    }
    TCHECK(bad == 0, "%d of %d sums wrong (v[1] = %g)", bad, N, v[1]);
}

/* Random floats: every rank must get the bitwise same sum (small and large messages take different
 * MPI algorithms). */
static void test_allreduce_identical(int64_t n) {
    float *v = malloc((size_t)n * sizeof *v);
    double *ref = calloc((size_t)n, sizeof *ref);
    for (int64_t i = 0; i < n; i++) {
        v[i] = odl_philox_normal(7 + (uint64_t)g_rank, 1, (uint64_t)i);
        for (int r = 0; r < g_size; r++) ref[i] += odl_philox_normal(7 + (uint64_t)r, 1, (uint64_t)i);
    }
    TOK(odl_comm_allreduce_sum(g_c, v, n));
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)v[i] - ref[i]);
        if (e > worst) worst = e;
    }
    TCHECK(worst < 1e-5 * g_size, "n=%" PRId64 ": max error %g against the float64 sum", n, worst);
    TCHECK(same_on_all_ranks((int64_t)hash_bytes(v, (size_t)n * sizeof *v)), "n=%" PRId64 ": ranks hold different sums", n);
    free(v);
    free(ref);
}

static void test_broadcast_barrier_host(void) {
    char buf[333];
    for (int i = 0; i < (int)sizeof buf; i++) buf[i] = (char)(g_rank * 31 + i);
    int root = g_size - 1;
    TOK(odl_comm_broadcast(g_c, buf, sizeof buf, root));
    int bad = 0;
    for (int i = 0; i < (int)sizeof buf; i++) bad += buf[i] != (char)(root * 31 + i);
    TCHECK(bad == 0, "broadcast from %d: %d bytes differ", root, bad);
    TFAIL(odl_comm_broadcast(g_c, buf, sizeof buf, g_size), ODL_E_INVAL);
    TOK(odl_comm_barrier(g_c));
    double d[2] = {1.0, (double)g_rank};
    TOK(odl_comm_allreduce_host_f64(g_c, d, 2));
    TCHECK(d[0] == g_size && d[1] == g_size * (g_size - 1) / 2.0, "host sums %g %g", d[0], d[1]);
}

static void test_agree(void) {
    TOK(odl_comm_agree(g_c, ODL_OK, "a good step"));
    odl_status local = ODL_OK;
    if (g_rank == 1) local = ODL_ERR(ODL_E_NODEV, "injected failure on this rank");
    if (g_rank == g_size - 1 && g_size > 2) local = ODL_ERR(ODL_E_IO, "second failure");
    odl_status s = odl_comm_agree(g_c, local, "device set-up");
    TCHECK(s == ODL_E_NODEV, "agree returned %d", s);
    const char *m = odl_error_msg();
    TCHECK(strstr(m, "device set-up failed on rank 1") && strstr(m, "injected failure"), "message: %s", m);
    if (g_size > 2) TCHECK(strstr(m, "and 1 more rank") != NULL, "message: %s", m);
}

static float grad_value(int rank, int param, int64_t i, int step) {
    return (float)(rank + 1) * 0.25f + (float)param + (float)(i % 7) * 0.125f + (float)step;
}

static void test_buckets(void) {
    odl_net net;
    int64_t numel[7] = {300, 3, 5000, 17, 64, 1, 900};
    fake_net(&net, 7, numel);
    odl_grad_buckets *g = NULL;
    TOK(odl_grad_buckets_create(g_c, &net, 4096.0 / (1024 * 1024), &g)); /* 4 KiB buckets */
    if (!g) {
        free_net(&net);
        return;
    }
    TCHECK(odl_grad_buckets_count(g) >= 3, "buckets: %d", odl_grad_buckets_count(g));
    for (int step = 0; step < 3; step++) {
        for (int p = 0; p < 7; p++) {
            float *d = net.params[p].grad.data;
            for (int64_t i = 0; i < numel[p]; i++) d[i] = grad_value(g_rank, p, i, step);
        }
        /* step 0: nothing marked (finish does it all); step 1: backward order; step 2: forward order. */
        if (step == 1)
            for (int p = 6; p >= 0; p--) TOK(odl_grad_buckets_mark_ready(g, p));
        if (step == 2)
            for (int p = 0; p < 7; p += 2) TOK(odl_grad_buckets_mark_ready(g, p));
        TOK(odl_grad_buckets_finish(g));
        int bad = 0;
        for (int p = 0; p < 7; p++) {
            const float *d = net.params[p].grad.data;
            for (int64_t i = 0; i < numel[p]; i++) {
                float want = 0;
                for (int r = 0; r < g_size; r++) want += grad_value(r, p, i, step);
                if (d[i] != want) bad++;
            }
        }
        TCHECK(bad == 0, "step %d: %d gradient values differ from the sum over ranks", step, bad);
    }
    odl_grad_buckets_free(g);

    /* Broadcast of the network, then the bitwise check, then a divergence it must catch. */
    for (int p = 0; p < 7; p++) {
        float *d = net.params[p].value.data;
        for (int64_t i = 0; i < numel[p]; i++) d[i] = (float)(g_rank * 1000 + p) + (float)i * 1e-3f;
    }
    if (g_size > 1) TFAIL(odl_comm_check_net_equal(g_c, &net), ODL_E_INTERNAL);
    TOK(odl_comm_broadcast_net(g_c, &net, NULL, 0));
    TCHECK(((float *)net.params[2].value.data)[7] == (float)2 + (float)7 * 1e-3f, "broadcast value %g",
           ((float *)net.params[2].value.data)[7]);
    TOK(odl_comm_check_net_equal(g_c, &net));
    if (g_rank == 1) ((float *)net.params[4].value.data)[3] += 1e-6f;
    odl_status s = odl_comm_check_net_equal(g_c, &net);
    TCHECK(s == ODL_E_INTERNAL && strstr(odl_error_msg(), "rank 1 differs") && strstr(odl_error_msg(), "layer4.weight"),
           "divergence check: %d %s", s, odl_error_msg());
    free_net(&net);
}

int main(int argc, char **argv) {
    int hang = argc > 1 && !strcmp(argv[1], "--hang");
    odl_launch_info li;
    if (odl_launch_detect(&li) != ODL_OK || !li.launched) {
        fprintf(stderr, "test_comm_mpi: not started by mpirun (%s); use tests/comm_mpirun.sh\n", odl_error_msg());
        return ODL_TEST_SKIP;
    }
    odl_comm_options o = {.device_type = ODL_DEV_CPU, .cuda_index = -1, .timeout_s = hang ? 1.0 : 60.0};
    odl_status s = odl_comm_init(&li, &o, &g_c);
    if (s != ODL_OK) {
        fprintf(stderr, "odl_comm_init: %s\n", odl_error_msg());
        odl_comm_abort_job(NULL, 1, "init failed");
    }
    g_rank = odl_comm_rank(g_c);
    g_size = odl_comm_size(g_c);
    if (hang) {
        float v[4] = {1, 2, 3, 4};
        if (g_rank == 1) sleep(60); /* never joins in time; the watchdog of the other ranks ends the job */
        odl_comm_allreduce_sum(g_c, v, 4);
        fprintf(stderr, "rank %d: the AllReduce returned, the watchdog did not fire\n", g_rank);
        odl_comm_finalize(g_c);
        return 1;
    }
    test_group();
    test_allreduce_exact();
    test_allreduce_identical(1000);
    test_allreduce_identical(3 * 1000 * 1000 + 7); /* ~12 MB: the large-message algorithms */
    test_broadcast_barrier_host();
    if (g_size > 1) test_agree();
    test_buckets();
    char name[64];
    snprintf(name, sizeof name, "test_comm_mpi rank %d/%d", g_rank, g_size);
    int rc = odl_test_finish(name);
    TOK(odl_comm_finalize(g_c));
    return rc;
}
