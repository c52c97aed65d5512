/* Optimisers over a network's parameters; the update formulas are PyTorch's (odl/backend.h). */
#include <string.h>

#include "odl/nn.h"
#include "odl/ops.h"

static int n_state(odl_optim_type t) {
    switch (t) {
    case ODL_OPTIM_ADADELTA: return 2;
    case ODL_OPTIM_SGD: return 1;
    case ODL_OPTIM_ADAM:
    case ODL_OPTIM_ADAMW: return 2;
    }
    return 0;
}

const char *odl_optim_state_name(const odl_optim *opt, int j) {
    static const char *ada[] = {"square_avg", "acc_delta"}, *sgd[] = {"momentum_buffer"},
                      *adam[] = {"exp_avg", "exp_avg_sq"};
    if (j < 0 || j >= n_state(opt->type)) return NULL;
    switch (opt->type) {
    case ODL_OPTIM_ADADELTA: return ada[j];
    case ODL_OPTIM_SGD: return sgd[j];
    default: return adam[j];
    }
}

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
        for (int j = 0; j < n_state(type); j++) {
            const odl_tensor *v = &net->params[i].value;
            ODL_CHECK(odl_tensor_zeros(&opt->state[i][j], v->device, ODL_F32, v->ndim, v->shape));
        }
    return ODL_OK;
}

odl_status odl_optim_step(odl_optim *opt, odl_net *net) {
    opt->step++;
    for (int i = 0; i < net->n_params; i++) {
        odl_param *p = &net->params[i];
        odl_status s = ODL_OK;
        switch (opt->type) {
        case ODL_OPTIM_ADADELTA:
            s = odl_adadelta_step(&p->value, &p->grad, &opt->state[i][0], &opt->state[i][1], opt->lr, opt->rho,
                                  opt->eps, opt->weight_decay);
            break;
        case ODL_OPTIM_SGD:
            s = odl_sgd_step(&p->value, &p->grad, &opt->state[i][0], opt->lr, opt->momentum, opt->dampening,
                             opt->weight_decay, opt->nesterov, opt->step);
            break;
        case ODL_OPTIM_ADAM:
        case ODL_OPTIM_ADAMW:
            s = odl_adam_step(&p->value, &p->grad, &opt->state[i][0], &opt->state[i][1], opt->lr, opt->beta1,
                              opt->beta2, opt->eps, opt->weight_decay, opt->type == ODL_OPTIM_ADAMW, opt->step);
            break;
        }
        if (s != ODL_OK) {
            odl_error_prefix("optimiser update of %s", p->name);
            return s;
        }
    }
    return ODL_OK;
}

void odl_optim_free(odl_optim *opt) {
    for (int i = opt->n - 1; i >= 0; i--)
        for (int j = 1; j >= 0; j--) odl_tensor_free(&opt->state[i][j]);
    opt->n = 0;
}
