/* test_nn_batch: odl_net_bind_batch / odl_net_unbind_batch (a step reading a loader's buffers) and
 * odl_net_dropout_offset (the RNG offsets per step and rank, fixed at ODL_NET_RNG_STRIDE). */
#include <string.h>

#include "odl/models.h"
#include "odl/nn.h"
#include "odl/ops.h"
#include "test_util.h"

int main(void) {
    TCHECK(odl_net_dropout_offset(0, 1, 0) == 0, "step 0");
    TCHECK(odl_net_dropout_offset(3, 2, 1) == (uint64_t)(3 * 2 + 1) * 32, "step 3 of rank 1 of 2: %llu",
           (unsigned long long)odl_net_dropout_offset(3, 2, 1));
    TCHECK(ODL_NET_RNG_STRIDE == 32 && ODL_MAX_LAYERS <= ODL_NET_RNG_STRIDE, "stride");

    odl_net net;
    TOK(odl_model_build(&net, ODL_MODEL_MNIST_MLP, odl_cpu(), 8, 0));
    TOK(odl_net_init_params(&net, 1));
    void *own_x = net.input.data, *own_y = net.labels.data;
    odl_tensor x = {0}, y = {0}, bad = {0};
    TOK(odl_tensor_alloc(&x, odl_cpu(), ODL_F32, 4, (int64_t[]){4, 1, 28, 28}));
    TOK(odl_tensor_alloc(&y, odl_cpu(), ODL_I32, 1, (int64_t[]){4}));
    TOK(odl_tensor_alloc(&bad, odl_cpu(), ODL_F32, 4, (int64_t[]){4, 1, 28, 27}));
    TFAIL(odl_net_bind_batch(&net, &bad, &y), ODL_E_INVAL);
    TCHECK(net.input.data == own_x && !net.batch_bound, "a refused batch changes nothing");
    TOK(odl_tensor_fill(&x, 0.5f));
    for (int i = 0; i < 4; i++) ((int32_t *)y.data)[i] = i;
    TOK(odl_net_bind_batch(&net, &x, &y));
    TCHECK(net.input.data == x.data && net.labels.data == y.data && !net.input.owns, "bound");
    TOK(odl_net_forward(&net, 4, 0, 1, 0));
    float bound_loss = *(float *)net.loss.data;
    odl_net_unbind_batch(&net);
    TCHECK(net.input.data == own_x && net.labels.data == own_y && net.input.owns, "own buffers back");
    /* The same samples copied into the net's own buffers give the same loss. */
    memcpy(net.input.data, x.data, odl_tensor_nbytes(&x));
    memcpy(net.labels.data, y.data, odl_tensor_nbytes(&y));
    TOK(odl_net_forward(&net, 4, 0, 1, 0));
    TCHECK(*(float *)net.loss.data == bound_loss, "loss %g vs %g", *(float *)net.loss.data, bound_loss);
    /* the grouped optimiser update (one call for every parameter) names a bad entry's parameter */
    odl_optim opt;
    odl_step_ctx ctx;
    TOK(odl_optim_init(&opt, ODL_OPTIM_ADADELTA, 1.0f, 0.0f, 0.0f, &net));
    TOK(odl_step_ctx_init(&ctx, odl_cpu(), &opt, 1, 0));
    TOK(odl_step_ctx_advance(&ctx));
    odl_tensor *g1 = &net.params[1].grad;
    g1->shape[0]--;
    TFAIL(odl_optim_step_at(&opt, &net, ctx.dev), ODL_E_INVAL);
    char want[96];
    snprintf(want, sizeof want, "1 %s", net.params[1].name);
    TCHECK(strstr(odl_error_msg(), "entry 1 of") && strstr(odl_error_msg(), want),
           "the bad entry and its parameter named: %s", odl_error_msg());
    g1->shape[0]++;
    TOK(odl_optim_step_at(&opt, &net, ctx.dev));
    odl_step_ctx_free(&ctx);
    odl_optim_free(&opt);
    TOK(odl_net_bind_batch(&net, &x, &y));
    odl_net_free(&net); /* frees the net's own buffers, not the batch's */
    TCHECK(x.data && ((int32_t *)y.data)[3] == 3, "the batch survives");
    odl_tensor_free(&bad);
    odl_tensor_free(&y);
    odl_tensor_free(&x);
    return odl_test_finish("test_nn_batch");
}
