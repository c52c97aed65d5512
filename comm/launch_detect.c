/* Launcher detection from the environment (no MPI needed); see odl/comm.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "odl/comm.h"

/* An integer variable: 0 = absent, 1 = present and parsed, or an error naming it. */
static odl_status env_int(const char *name, int *present, int *value) {
    const char *s = getenv(name);
    *present = 0;
    if (!s) return ODL_OK;
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!s[0] || errno || *end || v < 0 || v > 1 << 30)
        return ODL_ERR(ODL_E_CONFIG, "launcher environment: %s='%s' is not a non-negative integer", name, s);
    *present = 1;
    *value = (int)v;
    return ODL_OK;
}

/* Like env_int, but a Slurm count such as SLURM_NTASKS is a plain integer too; kept separate for the
 * message. */
static odl_status read_pair(const char *rank_var, const char *size_var, int *has_rank, int *rank, int *has_size,
                            int *size) {
    ODL_CHECK(env_int(rank_var, has_rank, rank));
    if (size_var) ODL_CHECK(env_int(size_var, has_size, size));
    else *has_size = 0;
    return ODL_OK;
}

static odl_status check_range(odl_launch_info *li, const char *rank_var, const char *size_var) {
    if (li->world_size == 0)
        return ODL_ERR(ODL_E_CONFIG, "launcher environment: %s=0 (a job needs at least one rank)", size_var);
    if (li->world_size > 0 && li->rank >= li->world_size)
        return ODL_ERR(ODL_E_CONFIG, "launcher environment: %s=%d is not below %s=%d", rank_var, li->rank, size_var,
                       li->world_size);
    if (li->local_size > 0 && li->local_rank >= li->local_size)
        return ODL_ERR(ODL_E_CONFIG, "launcher environment: local rank %d is not below the local size %d",
                       li->local_rank, li->local_size);
    return ODL_OK;
}

odl_status odl_launch_detect(odl_launch_info *li) {
    if (!li) return ODL_ERR(ODL_E_INVAL, "odl_launch_detect: NULL output");
    memset(li, 0, sizeof *li);
    li->rank = 0;
    li->world_size = 1;
    li->local_rank = 0;
    li->local_size = 1;
    snprintf(li->launcher, sizeof li->launcher, "none");
    int hr, r = 0, hs, s = 0, h, v;

    /* Open MPI's mpirun (ORTE/PRRTE) */
    ODL_CHECK(read_pair("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", &hr, &r, &hs, &s));
    if (hs) {
        if (!hr) return ODL_ERR(ODL_E_CONFIG, "launcher environment: OMPI_COMM_WORLD_SIZE is set but OMPI_COMM_WORLD_RANK is not");
        li->launched = 1;
        snprintf(li->launcher, sizeof li->launcher, "openmpi");
        li->rank = r;
        li->world_size = s;
        li->local_rank = li->local_size = -1;
        ODL_CHECK(env_int("OMPI_COMM_WORLD_LOCAL_RANK", &h, &v));
        if (h) li->local_rank = v;
        ODL_CHECK(env_int("OMPI_COMM_WORLD_LOCAL_SIZE", &h, &v));
        if (h) li->local_size = v;
        return check_range(li, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE");
    }

    /* PMIx: srun --mpi=pmix, prterun */
    ODL_CHECK(env_int("PMIX_RANK", &hr, &r));
    if (hr) {
        li->launched = 1;
        snprintf(li->launcher, sizeof li->launcher, "pmix");
        li->rank = r;
        li->world_size = -1;
        const char *size_var = "SLURM_NTASKS";
        ODL_CHECK(env_int("SLURM_NTASKS", &hs, &s));
        if (!hs) {
            size_var = "PMIX_SIZE";
            ODL_CHECK(env_int("PMIX_SIZE", &hs, &s));
        }
        if (hs) li->world_size = s;
        li->local_rank = li->local_size = -1;
        ODL_CHECK(env_int("SLURM_LOCALID", &h, &v));
        if (h) li->local_rank = v;
        return check_range(li, "PMIX_RANK", size_var);
    }

    /* PMI-1/2: MPICH's hydra, srun --mpi=pmi2 */
    ODL_CHECK(read_pair("PMI_RANK", "PMI_SIZE", &hr, &r, &hs, &s));
    if (hr) {
        li->launched = 1;
        snprintf(li->launcher, sizeof li->launcher, "pmi");
        li->rank = r;
        li->world_size = hs ? s : -1;
        li->local_rank = li->local_size = -1;
        ODL_CHECK(env_int("MPI_LOCALRANKID", &h, &v));
        if (h) li->local_rank = v;
        else {
            ODL_CHECK(env_int("SLURM_LOCALID", &h, &v));
            if (h) li->local_rank = v;
        }
        ODL_CHECK(env_int("MPI_LOCALNRANKS", &h, &v));
        if (h) li->local_size = v;
        return check_range(li, "PMI_RANK", "PMI_SIZE");
    }

    /* Slurm's srun without a PMI plugin variable we know. The batch script itself (SLURM_PROCID=0, no
     * SLURM_STEP_ID) and one-task steps are not launches. */
    ODL_CHECK(read_pair("SLURM_PROCID", "SLURM_NTASKS", &hr, &r, &hs, &s));
    const char *step = getenv("SLURM_STEP_ID");
    if (!step) step = getenv("SLURM_STEPID");
    if (hr && hs && s > 1 && step && strcmp(step, "batch") != 0 && strcmp(step, "extern") != 0) {
        li->launched = 1;
        snprintf(li->launcher, sizeof li->launcher, "slurm");
        li->rank = r;
        li->world_size = s;
        li->local_rank = li->local_size = -1;
        ODL_CHECK(env_int("SLURM_LOCALID", &h, &v));
        if (h) li->local_rank = v;
        return check_range(li, "SLURM_PROCID", "SLURM_NTASKS");
    }
    return ODL_OK;
}

odl_status odl_launch_pick_cuda(int local_rank, int local_size, int n_visible, int *index) {
    if (!index) return ODL_ERR(ODL_E_INVAL, "odl_launch_pick_cuda: NULL output");
    if (local_rank < 0) local_rank = 0;
    if (n_visible <= 0)
        return ODL_ERR(ODL_E_NODEV, "local rank %d: no CUDA device is visible (CUDA_VISIBLE_DEVICES=%s)", local_rank,
                       getenv("CUDA_VISIBLE_DEVICES") ? getenv("CUDA_VISIBLE_DEVICES") : "<unset>");
    if (n_visible == 1) {
        /* Each rank sees exactly one GPU: the launcher bound one to each task (Slurm --gpus-per-task,
         * --gpu-bind). Two ranks given the same GPU are caught by odl_comm_init's PCI bus id check. */
        *index = 0;
        return ODL_OK;
    }
    if (local_rank >= n_visible)
        return ODL_ERR(ODL_E_NODEV,
                       "local rank %d has no GPU of its own: %d CUDA devices are visible to %d ranks on this node "
                       "(start at most one rank per GPU)",
                       local_rank, n_visible, local_size > 0 ? local_size : local_rank + 1);
    if (local_size > n_visible)
        return ODL_ERR(ODL_E_NODEV,
                       "local rank %d: %d ranks on this node but only %d CUDA devices visible (one rank per GPU)",
                       local_rank, local_size, n_visible);
    *index = local_rank;
    return ODL_OK;
}
