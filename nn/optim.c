/* Optimisers over a network's parameters; the update formulas are PyTorch's (odl/backend.h). */
#include <stdio.h>
#include <string.h>

#include "odl/device.h"
#include "odl/env.h"
#include "odl/nn.h"
#include "odl/ops.h"

/* The one table of optimisers: name (config files, checkpoints) and state tensors (PyTorch's state
 * dict names), in odl_optim_type order. */
static const struct {
    const char *name;
    int nstate;
    const char *state[2];
} k_optims[] = {
    [ODL_OPTIM_ADADELTA] = {"adadelta", 2, {"square_avg", "acc_delta"}},
    [ODL_OPTIM_SGD] = {"sgd", 1, {"momentum_buffer", NULL}},
    [ODL_OPTIM_ADAM] = {"adam", 2, {"exp_avg", "exp_avg_sq"}},
    [ODL_OPTIM_ADAMW] = {"adamw", 2, {"exp_avg", "exp_avg_sq"}},
};
#define N_OPTIMS ((int)(sizeof k_optims / sizeof k_optims[0]))

const char *const *odl_optim_names(void) {
    static const char *names[N_OPTIMS + 1];
    if (!names[0])
        for (int i = 0; i < N_OPTIMS; i++) names[i] = k_optims[i].name;
    return names;
}

const char *odl_optim_type_name(int type) { return type >= 0 && type < N_OPTIMS ? k_optims[type].name : "?"; }

int odl_optim_type_parse(const char *name) {
    for (int i = 0; name && i < N_OPTIMS; i++)
        if (!strcmp(name, k_optims[i].name)) return i;
    return -1;
}

int odl_optim_type_nstate(int type) { return type >= 0 && type < N_OPTIMS ? k_optims[type].nstate : -1; }

const char *odl_optim_type_state(int type, int j) {
    return j >= 0 && j < odl_optim_type_nstate(type) ? k_optims[type].state[j] : NULL;
}

const char *odl_optim_state_name(const odl_optim *opt, int j) { return odl_optim_type_state((int)opt->type, j); }

odl_status odl_optim_init(odl_optim *opt, odl_optim_type type, float lr, float momentum, float weight_decay,
                          const odl_net *net) {
    memset(opt, 0, sizeof *opt);
    if (!(lr > 0)) return ODL_ERR(ODL_E_INVAL, "learning rate %g must be > 0", lr);
    opt->type = type;
    opt->lr = lr;
    opt->momentum = momentum;
    opt->weight_decay = weight_decay;
    opt->rho = 0.9f;
    opt->eps = type == ODL_OPTIM_ADADELTA ? 1e-6f : 1e-8f;
    opt->beta1 = 0.9f;
    opt->beta2 = 0.999f;
    if (type == ODL_OPTIM_ADAMW && weight_decay == 0) opt->weight_decay = 0.01f; /* torch.optim.AdamW default */
    opt->n = net->n_params;
    for (int i = 0; i < net->n_params; i++)
        for (int j = 0; j < odl_optim_type_nstate((int)type); j++) {
            const odl_tensor *v = &net->params[i].value;
            ODL_CHECK(odl_tensor_zeros(&opt->state[i][j], v->device, ODL_F32, v->ndim, v->shape));
        }
    return ODL_OK;
}

/* Every parameter's update with the scalars read from sc, in one grouped call (on CUDA one launch, so one
 * node of a step's graph, per 16 parameters instead of one per parameter); bitwise the per-parameter *_at
 * updates (ODL_OPTIM_GROUP=0 makes those). */
static odl_status update_grouped(const odl_optim *opt, odl_net *net, const odl_step_scalars *sc) {
    odl_tensor *p[ODL_MAX_PARAMS], *g[ODL_MAX_PARAMS], *s0[ODL_MAX_PARAMS], *s1[ODL_MAX_PARAMS];
    const int n = net->n_params;
    for (int i = 0; i < n; i++) {
        p[i] = &net->params[i].value;
        g[i] = &net->params[i].grad;
        s0[i] = (odl_tensor *)&opt->state[i][0];
        s1[i] = (odl_tensor *)&opt->state[i][1];
    }
    odl_status s = ODL_OK;
    switch (opt->type) {
    case ODL_OPTIM_ADADELTA:
        s = odl_adadelta_step_group_at(n, p, g, s0, s1, sc, opt->rho, opt->eps, opt->weight_decay);
        break;
    case ODL_OPTIM_SGD:
        s = odl_sgd_step_group_at(n, p, g, s0, sc, opt->momentum, opt->dampening, opt->weight_decay, opt->nesterov);
        break;
    case ODL_OPTIM_ADAM:
    case ODL_OPTIM_ADAMW:
        s = odl_adam_step_group_at(n, p, g, s0, s1, sc, opt->beta1, opt->beta2, opt->eps, opt->weight_decay,
                                   opt->type == ODL_OPTIM_ADAMW);
        break;
    }
    if (s != ODL_OK) { /* the ops name an entry by its index: the legend names the parameters */
        char names[400];
        size_t k = 0;
        names[0] = '\0';
        for (int i = 0; i < n && k < sizeof names; i++)
            k += (size_t)snprintf(names + k, sizeof names - k, "%s%d %s", i ? ", " : "", i, net->params[i].name);
        odl_error_prefix("optimiser update of %d parameters (entries: %s)", n, names);
    }
    return s;
}

/* Every parameter's update, with lr and step as arguments (s NULL) or read from s. */
static odl_status update_all(const odl_optim *opt, odl_net *net, const odl_step_scalars *sc) {
    if (sc && odl_env_bool(ODL_ENV_OPTIM_GROUP)) return update_grouped(opt, net, sc);
    const int adamw = opt->type == ODL_OPTIM_ADAMW;
    for (int i = 0; i < net->n_params; i++) {
        odl_param *p = &net->params[i];
        odl_tensor *s0 = (odl_tensor *)&opt->state[i][0], *s1 = (odl_tensor *)&opt->state[i][1];
        odl_status s = ODL_OK;
        switch (opt->type) {
        case ODL_OPTIM_ADADELTA:
            s = sc ? odl_adadelta_step_at(&p->value, &p->grad, s0, s1, sc, opt->rho, opt->eps, opt->weight_decay)
                   : odl_adadelta_step(&p->value, &p->grad, s0, s1, opt->lr, opt->rho, opt->eps, opt->weight_decay);
            break;
        case ODL_OPTIM_SGD:
            s = sc ? odl_sgd_step_at(&p->value, &p->grad, s0, sc, opt->momentum, opt->dampening, opt->weight_decay,
                                     opt->nesterov)
                   : odl_sgd_step(&p->value, &p->grad, s0, opt->lr, opt->momentum, opt->dampening, opt->weight_decay,
                                  opt->nesterov, opt->step);
            break;
        case ODL_OPTIM_ADAM:
        case ODL_OPTIM_ADAMW:
            s = sc ? odl_adam_step_at(&p->value, &p->grad, s0, s1, sc, opt->beta1, opt->beta2, opt->eps,
                                      opt->weight_decay, adamw)
                   : odl_adam_step(&p->value, &p->grad, s0, s1, opt->lr, opt->beta1, opt->beta2, opt->eps,
                                   opt->weight_decay, adamw, opt->step);
            break;
        }
        if (s != ODL_OK) {
            odl_error_prefix("optimiser update of %s", p->name);
            return s;
        }
    }
    return ODL_OK;
}

odl_status odl_optim_step(odl_optim *opt, odl_net *net) {
    opt->step++;
    return update_all(opt, net, NULL);
}

odl_status odl_optim_step_at(const odl_optim *opt, odl_net *net, const odl_step_scalars *s) {
    if (!s) return ODL_ERR(ODL_E_INVAL, "odl_optim_step_at: NULL step scalars");
    return update_all(opt, net, s);
}

/* ---- the step's scalars on the device ---- */

odl_status odl_step_ctx_init(odl_step_ctx *ctx, odl_device dev, const odl_optim *opt, int world_size, int rank) {
    memset(ctx, 0, sizeof *ctx);
    if (world_size < 1 || rank < 0 || rank >= world_size)
        return ODL_ERR(ODL_E_INVAL, "odl_step_ctx_init: rank %d of a world of %d", rank, world_size);
    ctx->device = dev;
    ctx->hyper = (odl_step_hyper){world_size, rank, ODL_NET_RNG_STRIDE, opt->beta1, opt->beta2, opt->weight_decay};
    ODL_CHECK(odl_mem_alloc(dev, sizeof *ctx->dev, (void **)&ctx->dev));
    odl_status s = odl_step_ctx_write(ctx, opt, opt->step);
    if (s != ODL_OK) odl_step_ctx_free(ctx);
    return s;
}

odl_status odl_step_ctx_write(odl_step_ctx *ctx, const odl_optim *opt, int64_t rng_step) {
    odl_step_scalars h;
    memset(&h, 0, sizeof h);
    h.optim_step = opt->step;
    h.rng_step = rng_step;
    h.lr = opt->lr;
    /* pageable source: the copy takes it before returning, so a stack buffer is fine */
    return odl_memcpy_async(ctx->dev, ctx->device, &h, odl_cpu(), sizeof h, odl_stream_current());
}

odl_status odl_step_ctx_advance(odl_step_ctx *ctx) { return odl_step_scalars_advance(ctx->device, ctx->dev, &ctx->hyper); }

void odl_step_ctx_free(odl_step_ctx *ctx) {
    if (ctx->dev) odl_mem_free(ctx->device, ctx->dev);
    ctx->dev = NULL;
}

void odl_optim_free(odl_optim *opt) {
    for (int i = opt->n - 1; i >= 0; i--)
        for (int j = 1; j >= 0; j--) odl_tensor_free(&opt->state[i][j]);
    opt->n = 0;
}
