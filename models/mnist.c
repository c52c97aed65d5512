#include <string.h>

#include "odl/models.h"

/* The one table of model names and the network each builds. */
static const char *const k_names[] = {"mnist", "mnist_cnn", "mnist_mlp", NULL};
static const odl_model_kind k_kinds[] = {ODL_MODEL_MNIST_CNN, ODL_MODEL_MNIST_CNN, ODL_MODEL_MNIST_MLP};

const char *const *odl_model_names(void) { return k_names; }

odl_status odl_model_parse(const char *name, odl_model_kind *out) {
    for (int i = 0; name && k_names[i]; i++)
        if (!strcmp(name, k_names[i])) {
            *out = k_kinds[i];
            return ODL_OK;
        }
    return ODL_ERR(ODL_E_INVAL, "unknown model '%s' (mnist, mnist_cnn, mnist_mlp)", name ? name : "(null)");
}

const char *odl_model_name(odl_model_kind k) { return k == ODL_MODEL_MNIST_MLP ? "mnist_mlp" : "mnist_cnn"; }

odl_status odl_model_build(odl_net *net, odl_model_kind kind, odl_device dev, int max_batch, int dropout) {
    int64_t img[3] = {1, 28, 28};
    ODL_CHECK(odl_net_init(net, dev, max_batch, 3, img));
    odl_status s = ODL_OK;
    if (kind == ODL_MODEL_MNIST_CNN) {
        ODL_CHECK_GOTO(odl_net_add_conv2d(net, "conv1", 32, 3, 1, 0, ODL_ACT_RELU), s, fail);
        ODL_CHECK_GOTO(odl_net_add_conv2d(net, "conv2", 64, 3, 1, 0, ODL_ACT_RELU), s, fail);
        ODL_CHECK_GOTO(odl_net_add_maxpool2d(net, 2, 2, 0), s, fail);
        if (dropout) ODL_CHECK_GOTO(odl_net_add_dropout(net, 0.25f), s, fail);
        ODL_CHECK_GOTO(odl_net_add_flatten(net), s, fail);
        ODL_CHECK_GOTO(odl_net_add_linear(net, "fc1", 128, ODL_ACT_RELU), s, fail);
        if (dropout) ODL_CHECK_GOTO(odl_net_add_dropout(net, 0.5f), s, fail);
        ODL_CHECK_GOTO(odl_net_add_linear(net, "fc2", 10, ODL_ACT_NONE), s, fail);
    } else {
        ODL_CHECK_GOTO(odl_net_add_flatten(net), s, fail);
        ODL_CHECK_GOTO(odl_net_add_linear(net, "fc1", 128, ODL_ACT_RELU), s, fail);
        ODL_CHECK_GOTO(odl_net_add_linear(net, "fc2", 10, ODL_ACT_NONE), s, fail);
    }
    ODL_CHECK_GOTO(odl_net_finalize(net), s, fail);
    return ODL_OK;
fail:
    odl_net_free(net);
    return s;
}
