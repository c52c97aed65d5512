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
    /* CUDA graphs of the step (worker/train_step.c), for the layer whose reduce_grads is used: whether
     * reduce_grads (and the on_grad_ready launches it finishes) may be captured into a graph (0, and the
     * reason in why, when not); and after each replay of a captured step, the host's share of what
     * reduce_grads does for a step (step counts, the watchdog's entry). NULL: capturable, nothing to do. */
    int (*graph_capturable)(void *ctx, char *why, size_t cap);
    odl_status (*graph_replayed)(void *ctx);
} odl_train_hooks;
#define ODL_TRAIN_CHECKPOINT 1
#define ODL_TRAIN_STOP 2

typedef struct odl_train_opts {
    char save_path[PATH_MAX]; /* --save: trained weights (HDF5), written by rank 0 */
    char init_from[PATH_MAX]; /* --init-from (train): start from these weights; --weights (eval) */
    int rank, world_size, local_rank;
    const odl_train_hooks *hooks;
    odl_net *keep_net; /* tests: receive the trained network instead of freeing it */
    /* Supervised runs (odl_worker_coord_install, worker/coord.c, sets them; NULL otherwise): the
     * coordinator client, which the GPU-health monitor reports through and evaluation tells it is busy,
     * and the observer of rank 0's checkpoint writes (odl_ckpt_session_opts.observer). */
    struct odl_coord_client *coord;
    odl_ckpt_write_observer ckpt_observer;
    void *ckpt_observer_ctx;
} odl_train_opts;

typedef struct odl_train_result {
    double train_loss, test_loss, test_acc, samples_per_s;
    int64_t steps, epochs;
} odl_train_result;

/* odl_worker's training flags into cfg and opts: 0 go on, 1 help printed, -1 error printed. */
int odl_train_parse_args(int argc, char **argv, odl_config *cfg, odl_train_opts *opts);
/* Read an HDF5 weights file (odl_train_save_weights' layout, or a checkpoint) into the network's
 * parameters; every parameter must be there with its shape and checksum, and the file's model attribute
 * (when present) must be `model` (NULL: not checked). Errors: ODL_E_NOTFOUND, ODL_E_FORMAT (another
 * model, a missing tensor), ODL_E_INVAL (a shape), ODL_E_CHECKSUM, ODL_E_HDF5. */
odl_status odl_train_load_weights(const char *path, const char *model, odl_net *net);

/* Mean NLL loss and accuracy over the test set in batches of `batch` (PyTorch examples/mnist's test());
 * class_correct/class_total [ODL_MNIST_CLASSES] (zeroed by the caller, or both NULL) count per true class. */
struct odl_mnist;
odl_status odl_train_evaluate(odl_net *net, const struct odl_mnist *test, int batch, double *loss_out, double *acc_out,
                              int64_t *class_correct, int64_t *class_total);
/* The test set that training's evaluations and --task=eval use: its first train.max_test_samples images
 * (0: all), by shortening test->n (the images stay allocated, odl_mnist_free frees them). */
void odl_train_limit_test(const odl_config *cfg, struct odl_mnist *test);

/* Train as cfg says (one rank of opts->world_size). Errors: whatever failed, with context. */
odl_status odl_train_run(const odl_config *cfg, const odl_train_opts *opts, odl_train_result *result);
/* Detect the launcher, set up the process group when there is one, train, tear down. Returns the
 * process exit code and prints one error line on failure. */
int odl_train_launch(const odl_config *cfg, odl_train_opts *opts);
/* Write the network's parameters to an HDF5 weights file (/model/<layer>/<param>, docs/checkpoint_format.md). */
odl_status odl_train_save_weights(const char *path, const odl_config *cfg, const odl_net *net);

#endif
