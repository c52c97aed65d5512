/* Layers with explicit forward and backward (as darknet and llm.c do), a sequential network of them,
 * and optimisers over the network's parameters.
 *
 * A network is built for a device and a maximum batch size; every activation and gradient buffer is
 * allocated once at build time (from the device's pool), so a training step allocates nothing.
 * Parameters are named as in a PyTorch state_dict ("conv1.weight"); checkpoints store them under
 * /model/<name with '.' replaced by '/'>.
 */
#ifndef ODL_NN_H
#define ODL_NN_H

#include "odl/api.h"
#include <stdint.h>

#include "odl/backend.h"
#include "odl/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ODL_NAME_MAX 64
#define ODL_MAX_LAYERS 32
/* Philox offsets reserved per (step, rank) for dropout: layer i of step s on rank r draws at
 * odl_net_dropout_offset(s, world_size, r) + i. Fixed (not ODL_MAX_LAYERS) so that the random numbers,
 * and checkpoints that rely on them, do not change when the layer cap does; nn/net.c asserts the cap fits. */
#define ODL_NET_RNG_STRIDE 32
#define ODL_MAX_PARAMS 64

typedef struct odl_param {
    char name[ODL_NAME_MAX];
    odl_tensor value; /* float32 on the network's device */
    odl_tensor grad;  /* same shape */
    int64_t fan_in;   /* for PyTorch's default initialisation */
} odl_param;

typedef enum odl_layer_type {
    ODL_LAYER_CONV2D = 0,  /* x [B,C,H,W] -> act(conv(x) + b) [B,K,P,Q] */
    ODL_LAYER_MAXPOOL2D,   /* -> [B,C,P,Q] */
    ODL_LAYER_DROPOUT,     /* identity shape; active in training only */
    ODL_LAYER_FLATTEN,     /* [B, ...] -> [B, prod(...)] (a view, NCHW order as torch.flatten) */
    ODL_LAYER_LINEAR,      /* [B,in] -> act(x W^T + b) [B,out] */
} odl_layer_type;

typedef struct odl_layer {
    odl_layer_type type;
    char name[ODL_NAME_MAX];
    int k, stride, pad;      /* conv/pool geometry; conv: k = kernel size */
    int out_features;        /* conv: output channels; linear: output features */
    float p;                 /* dropout probability */
    odl_act act;             /* fused activation of conv/linear (NONE or RELU) */
    odl_param *w, *b;        /* conv/linear parameters */
    int out_ndim;
    int64_t out_shape[4];    /* per sample, without the batch dimension */
    odl_tensor out, dout;    /* [max_batch, out_shape...] */
    odl_tensor argmax;       /* maxpool: I32 [max_batch, out_shape...] */
} odl_layer;

typedef struct odl_net {
    odl_device device;
    int max_batch;
    int in_ndim;
    int64_t in_shape[3];     /* per sample, e.g. {1, 28, 28} */
    int n_classes;
    int n_layers;
    odl_layer layers[ODL_MAX_LAYERS];
    int n_params;
    odl_param params[ODL_MAX_PARAMS];
    odl_tensor input;        /* [max_batch, in_shape...] float32 */
    odl_tensor labels;       /* [max_batch] int32 */
    odl_tensor logprobs;     /* [max_batch, n_classes] */
    odl_tensor dlogits;      /* [max_batch, n_classes] */
    odl_tensor loss;         /* [1]: mean NLL of the last forward */
    odl_tensor pred;         /* [max_batch] int32: argmax of the last forward */
    odl_tensor own_input, own_labels; /* the net's buffers while a batch is bound (odl_net_bind_batch) */
    int batch_bound;
    /* Called by odl_net_backward as soon as a parameter's gradient is final (layers last to first), so
     * that data parallelism can start reducing it while the rest of backward runs. NULL: none. */
    odl_status (*on_grad_ready)(void *ctx, int param_index);
    void *on_grad_ready_ctx;
} odl_net;

/* Start an empty network for inputs of per-sample shape in_shape[in_ndim] (ndim 1 or 3). */
ODL_API odl_status odl_net_init(odl_net *net, odl_device dev, int max_batch, int in_ndim, const int64_t *in_shape);
/* Append layers; shapes are inferred from the previous layer. Names prefix the parameters
 * ("conv1" -> "conv1.weight", "conv1.bias"). Errors: ODL_E_INVAL for bad geometry or too many layers. */
ODL_API odl_status odl_net_add_conv2d(odl_net *net, const char *name, int out_channels, int k, int stride, int pad, odl_act act);
ODL_API odl_status odl_net_add_maxpool2d(odl_net *net, int k, int stride, int pad);
ODL_API odl_status odl_net_add_dropout(odl_net *net, float p);
ODL_API odl_status odl_net_add_flatten(odl_net *net);
ODL_API odl_status odl_net_add_linear(odl_net *net, const char *name, int out_features, odl_act act);
/* Allocate every buffer; the last layer's output is the logits (log-softmax + NLL follows). */
ODL_API odl_status odl_net_finalize(odl_net *net);
ODL_API void odl_net_free(odl_net *net);

/* Make input and labels non-owning views of a batch's buffers (x [B, in_shape...] float32, y [B] int32 on
 * the net's device, B <= max_batch), e.g. a loader's, so that a step reads them without a copy;
 * odl_net_unbind_batch gives the net its own buffers back (odl_net_free does too). Errors: ODL_E_INVAL
 * (shape, dtype or device differ). */
ODL_API odl_status odl_net_bind_batch(odl_net *net, const odl_tensor *x, const odl_tensor *y);
ODL_API void odl_net_unbind_batch(odl_net *net);

/* The dropout RNG offset of a step on a rank (see ODL_NET_RNG_STRIDE): (step * world_size + rank) *
 * ODL_NET_RNG_STRIDE, so that every rank and step draws its own numbers, the same on CPU and GPU. */
ODL_API uint64_t odl_net_dropout_offset(int64_t step, int world_size, int rank);

/* PyTorch's default initialisation of Conv2d and Linear (kaiming_uniform with a = sqrt(5), i.e.
 * U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weights and biases), drawn from Philox(seed) with one offset
 * per parameter: identical on every rank and at every world size. */
ODL_API odl_status odl_net_init_params(odl_net *net, uint64_t seed);

/* Forward a batch of B <= max_batch samples already in net->input / net->labels (rows 0..B-1).
 * training: dropout on, with RNG (seed, offset). Fills logprobs and loss (mean over B); pred (argmax)
 * only when not training. */
ODL_API odl_status odl_net_forward(odl_net *net, int B, int training, uint64_t seed, uint64_t offset);
/* Backward of the last forward (same B, seed, offset): overwrites every param's grad with
 * d(loss_scale * mean loss)/dparam. loss_scale = B / B_global makes ranks' gradients sum to the
 * gradient of the global mean (data parallelism). */
ODL_API odl_status odl_net_backward(odl_net *net, int B, float loss_scale, uint64_t seed, uint64_t offset);
/* The same training forward and backward with dropout at s->rng_offset + layer, read from the device's
 * memory when the kernels run (odl_step_ctx below), so that a CUDA graph of them replays with each
 * step's own random numbers; bitwise odl_net_forward / odl_net_backward at offset = s->rng_offset.
 * Errors: as theirs, ODL_E_INVAL for a NULL s. */
ODL_API odl_status odl_net_forward_at(odl_net *net, int B, uint64_t seed, const odl_step_scalars *s);
ODL_API odl_status odl_net_backward_at(odl_net *net, int B, float loss_scale, uint64_t seed, const odl_step_scalars *s);
/* Find a parameter by name; NULL if absent. */
ODL_API odl_param *odl_net_param(odl_net *net, const char *name);
ODL_API int64_t odl_net_num_params(const odl_net *net);

/* ---- optimisers (PyTorch torch.optim semantics; formulas in odl/backend.h) ---- */
typedef enum odl_optim_type { ODL_OPTIM_ADADELTA = 0, ODL_OPTIM_SGD, ODL_OPTIM_ADAM, ODL_OPTIM_ADAMW } odl_optim_type;

typedef struct odl_optim {
    odl_optim_type type;
    float lr, momentum, dampening, weight_decay, beta1, beta2, eps, rho;
    int nesterov;
    int64_t step; /* number of updates done */
    int n;
    odl_tensor state[ODL_MAX_PARAMS][2]; /* adadelta: square_avg, acc_delta; sgd: momentum_buffer;
                                            adam: exp_avg, exp_avg_sq */
} odl_optim;

/* Defaults: adadelta rho 0.9 eps 1e-6; sgd dampening 0; adam/adamw betas (0.9, 0.999) eps 1e-8. */
ODL_API odl_status odl_optim_init(odl_optim *opt, odl_optim_type type, float lr, float momentum, float weight_decay,
                          const odl_net *net);
/* One update of every parameter from its grad. */
ODL_API odl_status odl_optim_step(odl_optim *opt, odl_net *net);
ODL_API void odl_optim_free(odl_optim *opt);
/* Name of state tensor j ("square_avg", "acc_delta", "momentum_buffer", "exp_avg", "exp_avg_sq"), or
 * NULL when the optimiser has fewer. */
ODL_API const char *odl_optim_state_name(const odl_optim *opt, int j);

/* ---- a training step's scalars in the device's memory ----
 * What changes from one step to the next (the update count, the dropout offset, the learning rate and
 * the scalars derived from them) lives in one odl_step_scalars on the network's device, read by the
 * kernels when they run: a step captured once into a CUDA graph replays correctly at every later step,
 * and a StepLR change at an epoch's end needs no new capture. Use per step: odl_step_ctx_advance, then
 * odl_net_forward_at / odl_net_backward_at with ctx->dev, then odl_optim_step_at; the host keeps its
 * own counters (opt->step, the training step) and writes them with odl_step_ctx_write whenever it sets
 * them otherwise (start, resume, a new learning rate). */
typedef struct odl_step_ctx {
    odl_device device;
    odl_step_scalars *dev; /* on `device` (the CUDA pool, or host memory on the CPU) */
    odl_step_hyper hyper;
} odl_step_ctx;
/* Allocate ctx->dev on dev for a rank of world_size ranks training with opt's hyperparameters, and
 * write opt's step and learning rate with rng_step = opt->step. Errors: ODL_E_INVAL, ODL_E_NOMEM. */
ODL_API odl_status odl_step_ctx_init(odl_step_ctx *ctx, odl_device dev, const odl_optim *opt, int world_size, int rank);
/* optim_step = opt->step, rng_step, lr = opt->lr into ctx->dev, ordered on the current stream after the
 * work already queued there (not while the stream is captured). Errors: device errors. */
ODL_API odl_status odl_step_ctx_write(odl_step_ctx *ctx, const odl_optim *opt, int64_t rng_step);
/* The first operation of a step: odl_step_scalars_advance on ctx->dev. */
ODL_API odl_status odl_step_ctx_advance(odl_step_ctx *ctx);
ODL_API void odl_step_ctx_free(odl_step_ctx *ctx);
/* One update of every parameter with lr and the step read from s (the *_at ops of odl/ops.h); bitwise
 * odl_optim_step at opt->lr = s->lr, opt->step + 1 = s->optim_step. opt->step is not changed (the
 * caller counts). */
ODL_API odl_status odl_optim_step_at(const odl_optim *opt, odl_net *net, const odl_step_scalars *s);

/* The optimisers' one name table (nn/optim.c), used by the config schema and the checkpoints:
 * odl_optim_names() = {"adadelta", "sgd", "adam", "adamw", NULL}, index = odl_optim_type. */
ODL_API const char *const *odl_optim_names(void);
/* Name of a type ("?" when out of range); type of a name (-1 when unknown). */
ODL_API const char *odl_optim_type_name(int type);
ODL_API int odl_optim_type_parse(const char *name);
/* State tensors per parameter (adadelta 2, sgd 1, adam/adamw 2; -1 when out of range) and their names
 * (NULL for j out of range). */
ODL_API int odl_optim_type_nstate(int type);
ODL_API const char *odl_optim_type_state(int type, int j);

#ifdef __cplusplus
}
#endif
#endif
