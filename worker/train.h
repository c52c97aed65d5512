/* The training driver shared by the single-process and the data-parallel paths. */
#ifndef ODL_WORKER_TRAIN_H
#define ODL_WORKER_TRAIN_H

#include <limits.h>
#include <stdint.h>

#include "odl/ckpt_session.h"
#include "worker/config.h"
#include "odl/nn.h"

/* Extension points: data parallelism (reduce_*), checkpoints (on_start restores, after_step saves). */
typedef struct odl_train_hooks {
    void *ctx;
    odl_status (*on_start)(void *ctx, const odl_config *cfg, odl_net *net, odl_optim *opt, odl_train_state *st);
    /* Sum every parameter's gradient over ranks (each rank's gradient is already scaled by its share). */
    odl_status (*reduce_grads)(void *ctx, odl_net *net);
    /* Sum a host scalar over ranks. */
    odl_status (*reduce_scalar)(void *ctx, double *v);
    odl_status (*after_step)(void *ctx, const odl_config *cfg, odl_net *net, odl_optim *opt, const odl_train_state *st);
    odl_status (*on_finish)(void *ctx, const odl_config *cfg, odl_net *net, odl_optim *opt, const odl_train_state *st);
    /* At the boundary after a step: ODL_TRAIN_CHECKPOINT (checkpoint now) | ODL_TRAIN_STOP (stop after
     * it), the coordinator's decisions (worker/coord.c). NULL: none. */
    int (*step_request)(void *ctx, const odl_train_state *st);
} odl_train_hooks;
#define ODL_TRAIN_CHECKPOINT 1
#define ODL_TRAIN_STOP 2

typedef struct odl_train_opts {
    char save_path[PATH_MAX]; /* --save: trained weights (HDF5), written by rank 0 */
    int rank, world_size, local_rank;
    const odl_train_hooks *hooks;
    odl_net *keep_net; /* tests: receive the trained network instead of freeing it */
} odl_train_opts;

typedef struct odl_train_result {
    double train_loss, test_loss, test_acc, samples_per_s;
    int64_t steps, epochs;
} odl_train_result;

/* Train as cfg says (one rank of opts->world_size). Errors: whatever failed, with context. */
odl_status odl_train_run(const odl_config *cfg, const odl_train_opts *opts, odl_train_result *result);
/* Detect the launcher, set up the process group when there is one, train, tear down. Returns the
 * process exit code and prints one error line on failure. */
int odl_train_launch(const odl_config *cfg, odl_train_opts *opts);
/* Write the network's parameters to an HDF5 weights file (/model/<layer>/<param>, docs/checkpoint_format.md). */
odl_status odl_train_save_weights(const char *path, const odl_config *cfg, const odl_net *net);

#endif
