/* Communication layer, single process: launcher detection from the environment, GPU choice by local
 * rank, the local (no-MPI) group, gradient bucket assignment. The multi-rank behaviour is in
 * test_comm_mpi.c (run under mpirun). */
#include <stdlib.h>
#include <string.h>

#include "odl/comm.h"
#include "fake_net.h"
#include "test_util.h"

static const char *k_vars[] = {
    "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
    "PMIX_RANK", "PMIX_SIZE", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS",
    "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_STEP_ID", "SLURM_STEPID",
};

static void clear_env(void) {
    for (size_t i = 0; i < sizeof k_vars / sizeof k_vars[0]; i++) unsetenv(k_vars[i]);
}

static void test_detect(void) {
    odl_launch_info li;
    clear_env();
    TOK(odl_launch_detect(&li));
    TCHECK(li.launched == 0 && li.rank == 0 && li.world_size == 1 && !strcmp(li.launcher, "none"), "plain: %d %s",
           li.launched, li.launcher);

    /* mpirun */
    setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
    setenv("OMPI_COMM_WORLD_RANK", "3", 1);
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1);
    setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2", 1);
    TOK(odl_launch_detect(&li));
    TCHECK(li.launched && !strcmp(li.launcher, "openmpi") && li.rank == 3 && li.world_size == 4 && li.local_rank == 1 &&
               li.local_size == 2,
           "openmpi: %s %d/%d local %d/%d", li.launcher, li.rank, li.world_size, li.local_rank, li.local_size);
    setenv("OMPI_COMM_WORLD_RANK", "4", 1);
    TFAIL(odl_launch_detect(&li), ODL_E_CONFIG);
    TCHECK(strstr(odl_error_msg(), "OMPI_COMM_WORLD_RANK=4") != NULL, "message: %s", odl_error_msg());
    setenv("OMPI_COMM_WORLD_RANK", "x1", 1);
    TFAIL(odl_launch_detect(&li), ODL_E_CONFIG);
    TCHECK(strstr(odl_error_msg(), "'x1'") != NULL, "message: %s", odl_error_msg());
    clear_env();

    /* srun --mpi=pmix */
    setenv("PMIX_RANK", "5", 1);
    setenv("SLURM_NTASKS", "8", 1);
    setenv("SLURM_PROCID", "5", 1);
    setenv("SLURM_LOCALID", "1", 1);
    setenv("SLURM_STEP_ID", "0", 1);
    TOK(odl_launch_detect(&li));
    TCHECK(li.launched && !strcmp(li.launcher, "pmix") && li.rank == 5 && li.world_size == 8 && li.local_rank == 1 &&
               li.local_size == -1,
           "pmix: %s %d/%d local %d/%d", li.launcher, li.rank, li.world_size, li.local_rank, li.local_size);
    clear_env();

    /* srun without PMIx variables: a launch inside a step with more than one task */
    setenv("SLURM_PROCID", "1", 1);
    setenv("SLURM_NTASKS", "2", 1);
    setenv("SLURM_LOCALID", "1", 1);
    setenv("SLURM_STEP_ID", "3", 1);
    TOK(odl_launch_detect(&li));
    TCHECK(li.launched && !strcmp(li.launcher, "slurm") && li.rank == 1 && li.world_size == 2 && li.local_rank == 1,
           "slurm: %s %d/%d", li.launcher, li.rank, li.world_size);
    /* ... but the batch script itself (no step id, or the batch step) is not */
    unsetenv("SLURM_STEP_ID");
    setenv("SLURM_PROCID", "0", 1);
    TOK(odl_launch_detect(&li));
    TCHECK(!li.launched, "batch script detected as a launch");
    setenv("SLURM_STEP_ID", "batch", 1);
    TOK(odl_launch_detect(&li));
    TCHECK(!li.launched, "batch step detected as a launch");
    /* nor a one-task step */
    setenv("SLURM_STEP_ID", "0", 1);
    setenv("SLURM_NTASKS", "1", 1);
    TOK(odl_launch_detect(&li));
    TCHECK(!li.launched, "one-task step detected as a launch");
    clear_env();

    /* MPICH hydra */
    setenv("PMI_RANK", "2", 1);
    setenv("PMI_SIZE", "3", 1);
    setenv("MPI_LOCALRANKID", "0", 1);
    TOK(odl_launch_detect(&li));
    TCHECK(li.launched && !strcmp(li.launcher, "pmi") && li.rank == 2 && li.world_size == 3 && li.local_rank == 0,
           "pmi: %s %d/%d", li.launcher, li.rank, li.world_size);
    setenv("PMI_SIZE", "0", 1);
    TFAIL(odl_launch_detect(&li), ODL_E_CONFIG);
    clear_env();
}

static void test_pick_cuda(void) {
    int idx = -1;
    TOK(odl_launch_pick_cuda(1, 2, 2, &idx));
    TCHECK(idx == 1, "local rank 1 of 2 on 2 GPUs -> %d", idx);
    TOK(odl_launch_pick_cuda(3, 4, 8, &idx));
    TCHECK(idx == 3, "local rank 3 of 4 on 8 GPUs -> %d", idx);
    TOK(odl_launch_pick_cuda(3, 4, 1, &idx));
    TCHECK(idx == 0, "one visible GPU per task -> %d", idx);
    TOK(odl_launch_pick_cuda(1, -1, 2, &idx));
    TCHECK(idx == 1, "unknown local size -> %d", idx);
    TFAIL(odl_launch_pick_cuda(2, 3, 2, &idx), ODL_E_NODEV);
    TCHECK(strstr(odl_error_msg(), "local rank 2") != NULL, "message: %s", odl_error_msg());
    TFAIL(odl_launch_pick_cuda(0, 3, 2, &idx), ODL_E_NODEV);
    TFAIL(odl_launch_pick_cuda(0, 1, 0, &idx), ODL_E_NODEV);
}

static void test_local_group(void) {
    clear_env();
    odl_launch_info li;
    TOK(odl_launch_detect(&li));
    odl_comm_options o = {.device_type = ODL_DEV_CPU, .cuda_index = -1, .timeout_s = 5};
    odl_comm *c = NULL;
    TOK(odl_comm_init(&li, &o, &c));
    if (!c) return;
    TCHECK(odl_comm_rank(c) == 0 && odl_comm_size(c) == 1 && odl_comm_get_backend(c) == ODL_COMM_LOCAL, "local group");
    TCHECK(!strcmp(odl_comm_backend_name(odl_comm_get_backend(c)), "local"), "name");
    float v[3] = {1, 2, 3};
    TOK(odl_comm_allreduce_sum(c, v, 3));
    TCHECK(v[0] == 1 && v[1] == 2 && v[2] == 3, "local allreduce changed the data");
    TOK(odl_comm_broadcast(c, v, sizeof v, 0));
    TFAIL(odl_comm_broadcast(c, v, sizeof v, 1), ODL_E_INVAL);
    TFAIL(odl_comm_allreduce_sum(c, NULL, 3), ODL_E_INVAL);
    TOK(odl_comm_barrier(c));
    double d = 2.5;
    TOK(odl_comm_allreduce_host_f64(c, &d, 1));
    TCHECK(d == 2.5, "host sum %g", d);
    TOK(odl_comm_agree(c, ODL_OK, "nothing"));
    odl_status s = odl_comm_agree(c, ODL_ERR(ODL_E_IO, "disk full"), "saving");
    TCHECK(s == ODL_E_IO && strstr(odl_error_msg(), "saving failed on rank 0") && strstr(odl_error_msg(), "disk full"),
           "agree: %d %s", s, odl_error_msg());

    /* Bucket assignment: reverse order, at most bucket_mb, a big parameter alone. 1 KiB buckets. */
    odl_net net;
    int64_t numel[6] = {100, 10, 1000, 20, 30, 40}; /* bytes 400, 40, 4000, 80, 120, 160 */
    fake_net(&net, 6, numel);
    odl_grad_buckets *g = NULL;
    TOK(odl_grad_buckets_create(c, &net, 1.0 / 1024.0, &g));
    if (g) {
        /* reverse: 5 (160) 4 (120) 3 (80) -> 360; + 2 (4000) would exceed -> new bucket with 2 alone;
         * then 1 (40) + 0 (400) = 440 */
        TCHECK(odl_grad_buckets_count(g) == 3, "buckets: %d", odl_grad_buckets_count(g));
        TCHECK(odl_grad_buckets_of_param(g, 5) == 0 && odl_grad_buckets_of_param(g, 3) == 0 &&
                   odl_grad_buckets_of_param(g, 2) == 1 && odl_grad_buckets_of_param(g, 1) == 2 &&
                   odl_grad_buckets_of_param(g, 0) == 2,
               "assignment %d %d %d %d %d", odl_grad_buckets_of_param(g, 5), odl_grad_buckets_of_param(g, 3),
               odl_grad_buckets_of_param(g, 2), odl_grad_buckets_of_param(g, 1), odl_grad_buckets_of_param(g, 0));
        TCHECK(odl_grad_buckets_bytes(g, 0) == 360 && odl_grad_buckets_bytes(g, 1) == 4000 &&
                   odl_grad_buckets_bytes(g, 2) == 440,
               "bytes %zu %zu %zu", odl_grad_buckets_bytes(g, 0), odl_grad_buckets_bytes(g, 1), odl_grad_buckets_bytes(g, 2));
        TOK(odl_grad_buckets_mark_ready(g, 5));
        TFAIL(odl_grad_buckets_mark_ready(g, 5), ODL_E_INVAL);
        TFAIL(odl_grad_buckets_mark_ready(g, 6), ODL_E_INVAL);
        TOK(odl_grad_buckets_finish(g));
        TOK(odl_grad_buckets_mark_ready(g, 5)); /* a new step */
        TOK(odl_grad_buckets_finish(g));
        odl_grad_buckets_free(g);
    }
    g = NULL;
    TOK(odl_grad_buckets_create(c, &net, 25, &g));
    TCHECK(g && odl_grad_buckets_count(g) == 1, "25 MiB: one bucket");
    odl_grad_buckets_free(g);
    TFAIL(odl_grad_buckets_create(c, &net, 0, &g), ODL_E_INVAL);
    TOK(odl_comm_check_net_equal(c, &net));
    TOK(odl_comm_broadcast_net(c, &net, NULL, 0));
    free_net(&net);
    TOK(odl_comm_finalize(c));
}

int main(void) {
    test_detect();
    test_pick_cuda();
    test_local_group();
    return odl_test_finish("test_comm");
}
