/* One training step of odl_train_run (worker/train.c): queued op by op, or replayed from a CUDA graph.
 *
 * A step is: advance the step's scalars on the device (odl_step_ctx: update count, dropout offset,
 * learning rate and Adam's bias corrections), forward and backward reading the batch where the loader
 * left it, the loss added to the epoch's device accumulator, the gradient reduction (the data-parallel
 * hook: bucketed NCCL AllReduces launched from backward), the optimiser update. Nothing in it waits for
 * the device, so on CUDA it can be captured once and replayed.
 *
 * Graphs (train.cuda_graph, --cuda-graph on|off; CUDA only): one per loader slot (each slot is a batch
 * buffer of its own, and a graph reads fixed addresses) for the full step, local == batch and
 * global == batch * world; the first full step of a run runs op by op, so that every lazy allocation
 * (the backend's workspace) and module load happens before a capture. Other shapes (the last, partial
 * batch of an epoch; a rank without samples) run op by op: they come once per epoch, a capture would
 * cost more than it saves. The step's scalars are device memory the kernels read when they run, so a
 * replay takes this step's dropout numbers, update count and learning rate: nothing is captured again
 * when StepLR changes the rate, and eager and replayed steps give the same bits.
 *
 * When a capture fails (a call not allowed during capture, e.g. a workspace that would grow) the run
 * logs the reason and goes on op by op; with several ranks every rank learns whether any rank failed
 * (the ranks must run the same collectives) and then the run stops with that rank's reason (a capture
 * that recorded NCCL work cannot safely be dropped on one rank only: run with --cuda-graph off).
 */
#ifndef ODL_WORKER_TRAIN_STEP_H
#define ODL_WORKER_TRAIN_STEP_H

#include <stdint.h>

#include "odl/graph.h"
#include "odl/loader.h"
#include "odl/nn.h"
#include "worker/train.h"

#define ODL_TRAIN_STEP_GRAPHS ODL_LOADER_SLOTS

typedef struct odl_step_graph {
    const void *x; /* the batch buffer the graph reads (a loader slot's), NULL: unused entry */
    int local, global;
    uint64_t epoch; /* the backend's workspace epoch at the capture (odl_backend.workspace_epoch) */
    odl_graph *graph;
} odl_step_graph;

/* How a step ran: op by op, captured into a graph and replayed (the first replay of that graph), or a
 * replay of a graph captured before. */
typedef enum odl_step_how { ODL_STEP_EAGER = 0, ODL_STEP_CAPTURED, ODL_STEP_REPLAYED } odl_step_how;

typedef struct odl_train_step {
    odl_net *net;
    odl_optim *opt;
    odl_tensor *loss_acc; /* [1] on the device: += local * mean loss of each step */
    const odl_train_hooks *hooks;
    uint64_t seed;
    int batch, world;
    odl_step_ctx ctx;
    int graph_on;          /* capture and replay full steps */
    char graph_off_why[256]; /* why not, for the log */
    int warm;              /* a full step ran op by op since the start */
    odl_step_graph graphs[ODL_TRAIN_STEP_GRAPHS];
    int64_t n_eager, n_replayed, n_captured;
    double replay_launch_s; /* host time in the graph launches of replayed (not captured) steps, seconds */
    odl_step_how last;     /* how the last step ran */
} odl_train_step;

/* Set up for a rank of `world` training with per-rank batch `batch`; rng_step: training steps done (the
 * dropout offset's step; opt->step is the update count). want_graph: train.cuda_graph. Logs whether
 * steps will be replayed from CUDA graphs and, when they will not on CUDA, why. With several ranks the
 * ranks agree (reduce_scalar hook) so that all capture or none does. Errors: ODL_E_NOMEM, device errors. */
odl_status odl_train_step_init(odl_train_step *ts, odl_net *net, odl_optim *opt, odl_tensor *loss_acc,
                               const odl_train_hooks *hooks, uint64_t seed, int batch, int world, int rank,
                               int want_graph, int64_t rng_step);
/* After the host set opt->lr or opt->step otherwise than by steps (StepLR, a resume): write them, and
 * the training step count rng_step, to the device scalars (ordered after the queued work). */
odl_status odl_train_step_sync(odl_train_step *ts, int64_t rng_step);
/* Queue one step on batch b (the loader's, with b->local rows of b->global in the step); the caller
 * then gives b back to the loader and counts the step (opt->step and its own counters). Errors: of the
 * step's operations, with the step and how it ran named by the caller's context. */
odl_status odl_train_step_run(odl_train_step *ts, odl_batch *b);
/* "CUDA graphs: 3 captured (one per loader slot), 44 replays, 4 steps op by op" or the reason graphs
 * are off, for the end of the run (replays count the first one of each captured graph). */
void odl_train_step_summary(const odl_train_step *ts, char *buf, size_t cap);
void odl_train_step_free(odl_train_step *ts);

#endif
