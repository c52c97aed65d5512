/* A network of CPU parameters only ("layer<i>.weight", zero-filled, no layers): enough for the gradient
 * buckets and the replica helpers of comm/, shared by test_comm and test_comm_mpi. */
#ifndef ODL_TEST_FAKE_NET_H
#define ODL_TEST_FAKE_NET_H

#include <stdio.h>
#include <string.h>

#include "odl/nn.h"

static inline void fake_net(odl_net *net, int n, const int64_t *numel) {
    memset(net, 0, sizeof *net);
    net->device = odl_cpu();
    net->n_params = n;
    for (int i = 0; i < n; i++) {
        odl_param *p = &net->params[i];
        snprintf(p->name, sizeof p->name, "layer%d.weight", i);
        odl_tensor_zeros(&p->value, odl_cpu(), ODL_F32, 1, &numel[i]);
        odl_tensor_zeros(&p->grad, odl_cpu(), ODL_F32, 1, &numel[i]);
    }
}

static inline void free_net(odl_net *net) {
    for (int i = 0; i < net->n_params; i++) {
        odl_tensor_free(&net->params[i].value);
        odl_tensor_free(&net->params[i].grad);
    }
}

#endif
