/* Training hooks in layers. Each layer of odl_worker that hooks into odl_train_run (the coordinator glue,
 * worker/coord.c; data parallelism, worker/launch.c) sets only the entries it has and pushes them in front
 * of the hooks already installed; the chain does the forwarding:
 *   on_start, after_step, on_finish: the layer below first, then this layer (an error of the one below
 *     is returned and this layer's entry is not called);
 *   reduce_grads, reduce_scalar: this layer's entry when it has one, else the one below (a reduction is
 *     done once, by the front-most layer that has it);
 *   graph_capturable, graph_replayed: those of the layer whose reduce_grads runs (none: capturable);
 *   step_request: the ODL_TRAIN_* flags of both, or-ed. */
#ifndef ODL_WORKER_HOOK_CHAIN_H
#define ODL_WORKER_HOOK_CHAIN_H

#include "worker/train.h"

typedef struct odl_hook_chain {
    odl_train_hooks own;          /* this layer's entries (NULL where it has none) and their ctx */
    const odl_train_hooks *inner; /* the hooks installed before this layer (NULL: none) */
    odl_train_hooks hooks;        /* the chain's entries, which odl_train_run calls */
} odl_hook_chain;

/* Install `own` in front of opts->hooks; c must stay in place until odl_hook_chain_pop. */
void odl_hook_chain_push(odl_hook_chain *c, const odl_train_hooks *own, odl_train_opts *opts);
/* Put back the hooks that were there before the push (when c is still the front one). */
void odl_hook_chain_pop(odl_hook_chain *c, odl_train_opts *opts);

#endif
