/* A sequential network with explicit forward/backward; see odl/nn.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "odl/env.h"
#include "odl/nn.h"
#include "odl/ops.h"
#include "odl/rng.h"

static int64_t per_sample_numel(int ndim, const int64_t *shape) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    return n;
}

odl_status odl_net_init(odl_net *net, odl_device dev, int max_batch, int in_ndim, const int64_t *in_shape) {
    memset(net, 0, sizeof *net);
    if (max_batch < 1) return ODL_ERR(ODL_E_INVAL, "max batch %d < 1", max_batch);
    if (in_ndim != 1 && in_ndim != 3) return ODL_ERR(ODL_E_INVAL, "network input rank %d, need 1 or 3", in_ndim);
    net->device = dev;
    net->max_batch = max_batch;
    net->in_ndim = in_ndim;
    for (int i = 0; i < in_ndim; i++) net->in_shape[i] = in_shape[i];
    return ODL_OK;
}

/* Per-sample shape of the output of the last layer so far (the input when there is none). */
static void last_shape(const odl_net *net, int *ndim, int64_t *shape) {
    if (net->n_layers == 0) {
        *ndim = net->in_ndim;
        memcpy(shape, net->in_shape, sizeof(int64_t) * (size_t)net->in_ndim);
    } else {
        const odl_layer *l = &net->layers[net->n_layers - 1];
        *ndim = l->out_ndim;
        memcpy(shape, l->out_shape, sizeof(int64_t) * (size_t)l->out_ndim);
    }
}

static odl_status new_layer(odl_net *net, odl_layer_type type, const char *name, odl_layer **out) {
    if (net->n_layers == ODL_MAX_LAYERS) return ODL_ERR(ODL_E_INVAL, "more than %d layers", ODL_MAX_LAYERS);
    odl_layer *l = &net->layers[net->n_layers];
    memset(l, 0, sizeof *l);
    l->type = type;
    snprintf(l->name, sizeof l->name, "%s", name ? name : "");
    *out = l;
    return ODL_OK;
}

static odl_status new_param(odl_net *net, const char *layer, const char *suffix, int ndim, const int64_t *shape,
                            int64_t fan_in, odl_param **out) {
    if (net->n_params == ODL_MAX_PARAMS) return ODL_ERR(ODL_E_INVAL, "more than %d parameters", ODL_MAX_PARAMS);
    odl_param *p = &net->params[net->n_params];
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s.%s", layer, suffix);
    p->fan_in = fan_in;
    p->value.ndim = ndim; /* shape only; allocated in finalize */
    for (int i = 0; i < ndim; i++) p->value.shape[i] = shape[i];
    net->n_params++;
    *out = p;
    return ODL_OK;
}

odl_status odl_net_add_conv2d(odl_net *net, const char *name, int out_channels, int k, int stride, int pad,
                              odl_act act) {
    int nd;
    int64_t s[4];
    last_shape(net, &nd, s);
    if (nd != 3) return ODL_ERR(ODL_E_INVAL, "conv2d %s needs a [C,H,W] input, got rank %d", name, nd);
    if (out_channels < 1 || k < 1 || stride < 1 || pad < 0)
        return ODL_ERR(ODL_E_INVAL, "conv2d %s: bad geometry K=%d k=%d stride=%d pad=%d", name, out_channels, k, stride, pad);
    int P = odl_conv_out_size((int)s[1], k, stride, pad), Q = odl_conv_out_size((int)s[2], k, stride, pad);
    if (P < 1 || Q < 1) return ODL_ERR(ODL_E_INVAL, "conv2d %s: kernel %d larger than the padded input", name, k);
    odl_layer *l = NULL;
    ODL_CHECK(new_layer(net, ODL_LAYER_CONV2D, name, &l));
    l->k = k; l->stride = stride; l->pad = pad; l->out_features = out_channels; l->act = act;
    int64_t ws[4] = {out_channels, s[0], k, k}, bs[1] = {out_channels};
    int64_t fan_in = s[0] * k * k;
    ODL_CHECK(new_param(net, name, "weight", 4, ws, fan_in, &l->w));
    ODL_CHECK(new_param(net, name, "bias", 1, bs, fan_in, &l->b));
    l->out_ndim = 3;
    l->out_shape[0] = out_channels; l->out_shape[1] = P; l->out_shape[2] = Q;
    net->n_layers++;
    return ODL_OK;
}

odl_status odl_net_add_maxpool2d(odl_net *net, int k, int stride, int pad) {
    int nd;
    int64_t s[4];
    last_shape(net, &nd, s);
    if (nd != 3) return ODL_ERR(ODL_E_INVAL, "maxpool2d needs a [C,H,W] input, got rank %d", nd);
    int P = odl_conv_out_size((int)s[1], k, stride, pad), Q = odl_conv_out_size((int)s[2], k, stride, pad);
    if (k < 1 || stride < 1 || pad < 0 || 2 * pad > k || P < 1 || Q < 1)
        return ODL_ERR(ODL_E_INVAL, "maxpool2d: bad geometry k=%d stride=%d pad=%d", k, stride, pad);
    odl_layer *l = NULL;
    ODL_CHECK(new_layer(net, ODL_LAYER_MAXPOOL2D, "maxpool", &l));
    l->k = k; l->stride = stride; l->pad = pad;
    l->out_ndim = 3;
    l->out_shape[0] = s[0]; l->out_shape[1] = P; l->out_shape[2] = Q;
    net->n_layers++;
    return ODL_OK;
}

odl_status odl_net_add_dropout(odl_net *net, float p) {
    if (!(p >= 0 && p < 1)) return ODL_ERR(ODL_E_INVAL, "dropout probability %g outside [0, 1)", p);
    int nd;
    int64_t s[4];
    last_shape(net, &nd, s);
    odl_layer *l = NULL;
    ODL_CHECK(new_layer(net, ODL_LAYER_DROPOUT, "dropout", &l));
    l->p = p;
    l->out_ndim = nd;
    memcpy(l->out_shape, s, sizeof(int64_t) * (size_t)nd);
    net->n_layers++;
    return ODL_OK;
}

odl_status odl_net_add_flatten(odl_net *net) {
    int nd;
    int64_t s[4];
    last_shape(net, &nd, s);
    odl_layer *l = NULL;
    ODL_CHECK(new_layer(net, ODL_LAYER_FLATTEN, "flatten", &l));
    l->out_ndim = 1;
    l->out_shape[0] = per_sample_numel(nd, s);
    net->n_layers++;
    return ODL_OK;
}

odl_status odl_net_add_linear(odl_net *net, const char *name, int out_features, odl_act act) {
    int nd;
    int64_t s[4];
    last_shape(net, &nd, s);
    if (nd != 1) return ODL_ERR(ODL_E_INVAL, "linear %s needs a flat input, got rank %d (add a flatten)", name, nd);
    if (out_features < 1) return ODL_ERR(ODL_E_INVAL, "linear %s: %d output features", name, out_features);
    odl_layer *l = NULL;
    ODL_CHECK(new_layer(net, ODL_LAYER_LINEAR, name, &l));
    l->out_features = out_features;
    l->act = act;
    int64_t ws[2] = {out_features, s[0]}, bs[1] = {out_features};
    ODL_CHECK(new_param(net, name, "weight", 2, ws, s[0], &l->w));
    ODL_CHECK(new_param(net, name, "bias", 1, bs, s[0], &l->b));
    l->out_ndim = 1;
    l->out_shape[0] = out_features;
    net->n_layers++;
    return ODL_OK;
}

static odl_status alloc_batch(odl_net *net, odl_tensor *t, odl_dtype dt, int ndim, const int64_t *shape) {
    int64_t full[5];
    full[0] = net->max_batch;
    for (int i = 0; i < ndim; i++) full[i + 1] = shape[i];
    return odl_tensor_alloc(t, net->device, dt, ndim + 1, full);
}

odl_status odl_net_finalize(odl_net *net) {
    if (net->n_layers == 0) return ODL_ERR(ODL_E_INVAL, "network has no layers");
    const odl_layer *last = &net->layers[net->n_layers - 1];
    if (last->out_ndim != 1) return ODL_ERR(ODL_E_INVAL, "the last layer must produce flat logits");
    net->n_classes = (int)last->out_shape[0];
    for (int i = 0; i < net->n_params; i++) {
        odl_param *p = &net->params[i];
        int nd = p->value.ndim;
        int64_t s[ODL_MAX_DIMS];
        memcpy(s, p->value.shape, sizeof s);
        ODL_CHECK(odl_tensor_alloc(&p->value, net->device, ODL_F32, nd, s));
        ODL_CHECK(odl_tensor_zeros(&p->grad, net->device, ODL_F32, nd, s));
    }
    for (int i = 0; i < net->n_layers; i++) {
        odl_layer *l = &net->layers[i];
        if (l->type == ODL_LAYER_FLATTEN) continue; /* a view of its input */
        ODL_CHECK(alloc_batch(net, &l->out, ODL_F32, l->out_ndim, l->out_shape));
        ODL_CHECK(alloc_batch(net, &l->dout, ODL_F32, l->out_ndim, l->out_shape));
        if (l->type == ODL_LAYER_MAXPOOL2D) ODL_CHECK(alloc_batch(net, &l->argmax, ODL_I32, l->out_ndim, l->out_shape));
    }
    int64_t nc[1] = {net->n_classes};
    ODL_CHECK(alloc_batch(net, &net->input, ODL_F32, net->in_ndim, net->in_shape));
    ODL_CHECK(alloc_batch(net, &net->labels, ODL_I32, 0, NULL));
    ODL_CHECK(alloc_batch(net, &net->logprobs, ODL_F32, 1, nc));
    ODL_CHECK(alloc_batch(net, &net->dlogits, ODL_F32, 1, nc));
    ODL_CHECK(alloc_batch(net, &net->pred, ODL_I32, 0, NULL));
    int64_t one[1] = {1};
    ODL_CHECK(odl_tensor_zeros(&net->loss, net->device, ODL_F32, 1, one));
    return ODL_OK;
}

_Static_assert(ODL_MAX_LAYERS <= ODL_NET_RNG_STRIDE, "each layer needs its own dropout offset");

odl_status odl_net_bind_batch(odl_net *net, const odl_tensor *x, const odl_tensor *y) {
    const odl_tensor *own_x = net->batch_bound ? &net->own_input : &net->input;
    const odl_tensor *own_y = net->batch_bound ? &net->own_labels : &net->labels;
    if (!x || !y || x->dtype != ODL_F32 || y->dtype != ODL_I32 || !odl_device_eq(x->device, net->device) ||
        !odl_device_eq(y->device, net->device) || x->ndim != own_x->ndim || y->ndim != 1 || x->shape[0] != y->shape[0] ||
        x->shape[0] > own_x->shape[0])
        return ODL_ERR(ODL_E_INVAL, "odl_net_bind_batch: the batch does not match the network's input [%lld, ...] "
                       "float32 and labels int32 on %s", (long long)own_y->shape[0], odl_device_name(net->device));
    for (int d = 1; d < x->ndim; d++)
        if (x->shape[d] != own_x->shape[d])
            return ODL_ERR(ODL_E_INVAL, "odl_net_bind_batch: sample dimension %d is %lld, the network takes %lld", d,
                           (long long)x->shape[d], (long long)own_x->shape[d]);
    if (!net->batch_bound) {
        net->own_input = net->input;
        net->own_labels = net->labels;
        net->batch_bound = 1;
    }
    net->input = *x;
    net->input.owns = 0;
    net->labels = *y;
    net->labels.owns = 0;
    return ODL_OK;
}

void odl_net_unbind_batch(odl_net *net) {
    if (!net->batch_bound) return;
    net->input = net->own_input;
    net->labels = net->own_labels;
    memset(&net->own_input, 0, sizeof net->own_input);
    memset(&net->own_labels, 0, sizeof net->own_labels);
    net->batch_bound = 0;
}

uint64_t odl_net_dropout_offset(int64_t step, int world_size, int rank) {
    return ((uint64_t)step * (uint64_t)world_size + (uint64_t)rank) * ODL_NET_RNG_STRIDE;
}

void odl_net_free(odl_net *net) {
    odl_net_unbind_batch(net);
    /* Reverse order of allocation, as the pool prefers. */
    odl_tensor_free(&net->loss);
    odl_tensor_free(&net->pred);
    odl_tensor_free(&net->dlogits);
    odl_tensor_free(&net->logprobs);
    odl_tensor_free(&net->labels);
    odl_tensor_free(&net->input);
    for (int i = net->n_layers - 1; i >= 0; i--) {
        odl_tensor_free(&net->layers[i].argmax);
        odl_tensor_free(&net->layers[i].dout);
        odl_tensor_free(&net->layers[i].out);
    }
    for (int i = net->n_params - 1; i >= 0; i--) {
        odl_tensor_free(&net->params[i].grad);
        odl_tensor_free(&net->params[i].value);
    }
}

odl_status odl_net_init_params(odl_net *net, uint64_t seed) {
    for (int i = 0; i < net->n_params; i++) {
        odl_param *p = &net->params[i];
        int64_t n = odl_tensor_numel(&p->value);
        float *h = malloc((size_t)n * sizeof *h);
        if (!h) return ODL_ERR(ODL_E_NOMEM, "initialising %s", p->name);
        float bound = (float)(1.0 / sqrt((double)p->fan_in));
        for (int64_t j = 0; j < n; j++)
            h[j] = (2.0f * odl_philox_uniform(seed, 0x1000u + (uint64_t)i, (uint64_t)j) - 1.0f) * bound;
        odl_status s = odl_tensor_copy_from_host(&p->value, h, (size_t)n * sizeof *h);
        free(h);
        if (s != ODL_OK) {
            odl_error_prefix("initialising %s", p->name);
            return s;
        }
    }
    return ODL_OK;
}

odl_param *odl_net_param(odl_net *net, const char *name) {
    for (int i = 0; i < net->n_params; i++)
        if (strcmp(net->params[i].name, name) == 0) return &net->params[i];
    return NULL;
}

int64_t odl_net_num_params(const odl_net *net) {
    int64_t n = 0;
    for (int i = 0; i < net->n_params; i++) n += odl_tensor_numel(&net->params[i].value);
    return n;
}

/* A [B, per-sample shape] view of a buffer's first B rows, reshaped to the layer's output shape. */
static odl_status batch_view(const odl_tensor *buf, int B, int ndim, const int64_t *shape, odl_tensor *v) {
    int64_t full[5];
    full[0] = B;
    for (int i = 0; i < ndim; i++) full[i + 1] = shape[i];
    odl_tensor rows;
    ODL_CHECK(odl_tensor_view_rows(buf, 0, B, &rows));
    return odl_tensor_reshape(&rows, ndim + 1, full, v);
}

/* The tensors that flowed through the last forward: fwd_in[i] is layer i's input. Views only. */
typedef struct fwd_trace {
    odl_tensor in[ODL_MAX_LAYERS + 1];
} fwd_trace;

/* Where dropout takes its random numbers: Philox(seed) at offset + layer, or, with s, at s->rng_offset +
 * layer read on the device when the kernel runs (odl_net_forward_at). */
typedef struct net_rng {
    uint64_t seed, offset;
    const odl_step_scalars *s;
} net_rng;

static odl_status layer_forward(odl_net *net, int i, int B, int training, const net_rng *rng, const odl_tensor *x,
                                odl_tensor *y) {
    odl_layer *l = &net->layers[i];
    switch (l->type) {
    case ODL_LAYER_CONV2D:
        ODL_CHECK(batch_view(&l->out, B, l->out_ndim, l->out_shape, y));
        return odl_conv2d_fwd(x, &l->w->value, &l->b->value, NULL, l->act, l->stride, l->pad, y);
    case ODL_LAYER_MAXPOOL2D: {
        odl_tensor am;
        ODL_CHECK(batch_view(&l->out, B, l->out_ndim, l->out_shape, y));
        ODL_CHECK(batch_view(&l->argmax, B, l->out_ndim, l->out_shape, &am));
        return odl_maxpool2d_fwd(x, l->k, l->stride, l->pad, y, &am);
    }
    case ODL_LAYER_DROPOUT:
        if (!training || l->p == 0) {
            *y = *x; /* identity: pass the input through as a view */
            return ODL_OK;
        }
        ODL_CHECK(batch_view(&l->out, B, l->out_ndim, l->out_shape, y));
        if (rng->s) return odl_dropout_fwd_at(l->p, rng->seed, rng->s, rng->offset + (uint64_t)i, x, y);
        return odl_dropout_fwd(l->p, rng->seed, rng->offset + (uint64_t)i, x, y);
    case ODL_LAYER_FLATTEN: {
        int64_t s[2] = {B, l->out_shape[0]};
        return odl_tensor_reshape(x, 2, s, y);
    }
    case ODL_LAYER_LINEAR:
        ODL_CHECK(batch_view(&l->out, B, l->out_ndim, l->out_shape, y));
        return odl_linear_fwd(x, &l->w->value, &l->b->value, l->act, y);
    }
    return ODL_ERR(ODL_E_INTERNAL, "unknown layer type %d", (int)l->type);
}

static odl_status run_forward(odl_net *net, int B, int training, const net_rng *rng, fwd_trace *tr) {
    if (B < 1 || B > net->max_batch) return ODL_ERR(ODL_E_INVAL, "batch of %d outside 1..%d", B, net->max_batch);
    ODL_CHECK(batch_view(&net->input, B, net->in_ndim, net->in_shape, &tr->in[0]));
    for (int i = 0; i < net->n_layers; i++) {
        odl_status s = layer_forward(net, i, B, training, rng, &tr->in[i], &tr->in[i + 1]);
        if (s != ODL_OK) {
            odl_error_prefix("forward of layer %d (%s)", i, net->layers[i].name);
            return s;
        }
    }
    odl_tensor labels, logprobs, pred;
    int64_t nc[2] = {B, net->n_classes};
    ODL_CHECK(odl_tensor_view_rows(&net->labels, 0, B, &labels));
    ODL_CHECK(odl_tensor_view_rows(&net->pred, 0, B, &pred));
    ODL_CHECK(batch_view(&net->logprobs, B, 1, nc + 1, &logprobs));
    ODL_CHECK(odl_log_softmax_nll_fwd(&tr->in[net->n_layers], &labels, &logprobs, &net->loss));
    if (!training) ODL_CHECK(odl_argmax_rows(&logprobs, &pred)); /* predictions are for evaluation only */
    return ODL_OK;
}

odl_status odl_net_forward(odl_net *net, int B, int training, uint64_t seed, uint64_t offset) {
    fwd_trace tr;
    const net_rng rng = {seed, offset, NULL};
    return run_forward(net, B, training, &rng, &tr);
}

odl_status odl_net_forward_at(odl_net *net, int B, uint64_t seed, const odl_step_scalars *s) {
    if (!s) return ODL_ERR(ODL_E_INVAL, "odl_net_forward_at: NULL step scalars");
    fwd_trace tr;
    const net_rng rng = {seed, 0, s};
    return run_forward(net, B, 1, &rng, &tr);
}

static odl_status run_backward(odl_net *net, int B, float loss_scale, const net_rng *rng);

odl_status odl_net_backward(odl_net *net, int B, float loss_scale, uint64_t seed, uint64_t offset) {
    const net_rng rng = {seed, offset, NULL};
    return run_backward(net, B, loss_scale, &rng);
}

odl_status odl_net_backward_at(odl_net *net, int B, float loss_scale, uint64_t seed, const odl_step_scalars *s) {
    if (!s) return ODL_ERR(ODL_E_INVAL, "odl_net_backward_at: NULL step scalars");
    const net_rng rng = {seed, 0, s};
    return run_backward(net, B, loss_scale, &rng);
}

static odl_status run_backward(odl_net *net, int B, float loss_scale, const net_rng *rng) {
    /* Recover the forward's views (cheap: no computation, only shapes and pointers). */
    fwd_trace tr;
    ODL_CHECK(batch_view(&net->input, B, net->in_ndim, net->in_shape, &tr.in[0]));
    for (int i = 0; i < net->n_layers; i++) {
        odl_layer *l = &net->layers[i];
        if (l->type == ODL_LAYER_FLATTEN) {
            int64_t s[2] = {B, l->out_shape[0]};
            ODL_CHECK(odl_tensor_reshape(&tr.in[i], 2, s, &tr.in[i + 1]));
        } else if (l->type == ODL_LAYER_DROPOUT && l->p == 0) {
            tr.in[i + 1] = tr.in[i];
        } else {
            ODL_CHECK(batch_view(&l->out, B, l->out_ndim, l->out_shape, &tr.in[i + 1]));
        }
    }
    odl_tensor labels, logprobs, g;
    int64_t nc[1] = {net->n_classes};
    ODL_CHECK(odl_tensor_view_rows(&net->labels, 0, B, &labels));
    ODL_CHECK(batch_view(&net->logprobs, B, 1, nc, &logprobs));
    ODL_CHECK(batch_view(&net->dlogits, B, 1, nc, &g));
    ODL_CHECK(odl_log_softmax_nll_bwd(&logprobs, &labels, loss_scale, &g));
    int relu_fused = 0; /* the layer just run (max-pool or convolution) also ran the ReLU backward of the one below */
    for (int i = net->n_layers - 1; i >= 0; i--) {
        odl_layer *l = &net->layers[i];
        const int relu_done = relu_fused;
        relu_fused = 0;
        const odl_tensor *x = &tr.in[i];
        odl_tensor gin, *gin_p = NULL;
        if (i > 0 && l->type != ODL_LAYER_FLATTEN && !(l->type == ODL_LAYER_DROPOUT && l->p == 0)) {
            const odl_layer *prev = &net->layers[i - 1];
            const odl_tensor *buf = &prev->dout;
            /* A flatten has no buffer of its own: write into the layer before it, reshaped. */
            int j = i - 1;
            while (j >= 0 && net->layers[j].type == ODL_LAYER_FLATTEN) j--;
            if (j < 0) buf = NULL; else buf = &net->layers[j].dout;
            (void)prev;
            if (buf) {
                ODL_CHECK(odl_tensor_view_rows(buf, 0, B, &gin));
                ODL_CHECK(odl_tensor_reshape(&gin, x->ndim, x->shape, &gin));
                gin_p = &gin;
            }
        }
        /* The layer below ends with a ReLU (its epilogue's), whose output is this layer's input: that ReLU's
         * backward can run inside this layer's (the same bits, one pass over the [N,C,H,W] gradient fewer). */
        const odl_layer *below = i > 0 ? &net->layers[i - 1] : NULL;
        const int below_relu = gin_p && below && below->act == ODL_ACT_RELU &&
                               (below->type == ODL_LAYER_CONV2D || below->type == ODL_LAYER_LINEAR);
        odl_status s = ODL_OK;
        switch (l->type) {
        case ODL_LAYER_CONV2D: {
            /* odl_conv2d_relu_bwd: the ReLU applied as the data gradient is stored, with ODL_CONV_RELU_FUSE on
             * (off: 1 % slower on an H100, bench/NOTES.md) */
            const int fuse = below_relu && odl_env_bool(ODL_ENV_CONV_RELU_FUSE);
            if (!gin_p && l->act == ODL_ACT_RELU && !relu_done && odl_env_bool(ODL_ENV_CONV_WGRAD_RELU)) {
                /* a first layer's own ReLU backward inside its weight gradient (ODL_CONV_WGRAD_RELU) */
                s = odl_conv2d_relu_out_bwd_weight(x, &l->w->value, &tr.in[i + 1], &g, l->stride, l->pad,
                                                   &l->w->grad, &l->b->grad);
                break;
            }
            if (l->act != ODL_ACT_NONE && !relu_done) s = odl_act_bwd(l->act, &tr.in[i + 1], &tr.in[i + 1], &g, &g);
            if (s == ODL_OK)
                s = (fuse ? odl_conv2d_relu_bwd : odl_conv2d_bwd)(x, &l->w->value, &g, l->stride, l->pad, gin_p,
                                                                  &l->w->grad, &l->b->grad);
            relu_fused = fuse;
            break;
        }
        case ODL_LAYER_LINEAR:
            if (l->act != ODL_ACT_NONE && !relu_done) s = odl_act_bwd(l->act, &tr.in[i + 1], &tr.in[i + 1], &g, &g);
            if (s == ODL_OK) s = odl_linear_bwd(x, &l->w->value, &g, gin_p, &l->w->grad, &l->b->grad);
            break;
        case ODL_LAYER_MAXPOOL2D: {
            odl_tensor am;
            s = batch_view(&l->argmax, B, l->out_ndim, l->out_shape, &am);
            /* odl_maxpool2d_relu_bwd: one pass over the [N,C,H,W] gradient instead of three (ODL_POOL_RELU_FUSE,
             * on by default: +7 % examples-CNN batch-512 samples/s on an H100, bench/NOTES.md) */
            const int fuse = below_relu && odl_env_bool(ODL_ENV_POOL_RELU_FUSE);
            if (s == ODL_OK && gin_p) {
                s = fuse ? odl_maxpool2d_relu_bwd(&g, &am, &tr.in[i + 1], l->k, l->stride, l->pad, gin_p)
                         : odl_maxpool2d_bwd(&g, &am, l->k, l->stride, l->pad, gin_p);
                relu_fused = fuse;
            }
            break;
        }
        case ODL_LAYER_DROPOUT:
            if (l->p == 0) break; /* gradient passes through unchanged */
            if (gin_p && rng->s) s = odl_dropout_bwd_at(l->p, rng->seed, rng->s, rng->offset + (uint64_t)i, &g, gin_p);
            else if (gin_p) s = odl_dropout_bwd(l->p, rng->seed, rng->offset + (uint64_t)i, &g, gin_p);
            break;
        case ODL_LAYER_FLATTEN:
            s = odl_tensor_reshape(&g, x->ndim, x->shape, &g);
            break;
        }
        if (s != ODL_OK) {
            odl_error_prefix("backward of layer %d (%s)", i, l->name);
            return s;
        }
        if (net->on_grad_ready && (l->type == ODL_LAYER_CONV2D || l->type == ODL_LAYER_LINEAR)) {
            ODL_CHECK(net->on_grad_ready(net->on_grad_ready_ctx, (int)(l->w - net->params)));
            ODL_CHECK(net->on_grad_ready(net->on_grad_ready_ctx, (int)(l->b - net->params)));
        }
        if (gin_p) g = gin;
        else if (l->type != ODL_LAYER_FLATTEN && !(l->type == ODL_LAYER_DROPOUT && l->p == 0))
            break; /* nothing below this layer needs a gradient (only views remain) */
    }
    return ODL_OK;
}
