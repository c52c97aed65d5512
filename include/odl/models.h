/* Model zoo for training: MNIST-family classifiers on 1x28x28 inputs.
 * - ODL_MODEL_MNIST_CNN: PyTorch's examples/mnist network: conv1 1->32 3x3 + ReLU, conv2 32->64 3x3 +
 *   ReLU, max-pool 2, dropout 0.25, flatten (NCHW order: fc1's input is [64,12,12] flattened),
 *   fc1 9216->128 + ReLU, dropout 0.5, fc2 128->10; log-softmax + NLL loss.
 * - ODL_MODEL_MNIST_MLP: fc1 784->128 + ReLU, fc2 128->10, no dropout (quick CPU runs and
 *   data-parallel equivalence tests). */
#ifndef ODL_MODELS_H
#define ODL_MODELS_H

#include "odl/api.h"
#include "odl/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum odl_model_kind { ODL_MODEL_MNIST_CNN = 0, ODL_MODEL_MNIST_MLP = 1 } odl_model_kind;

/* The models' one name table (models/mnist.c): {"mnist", "mnist_cnn", "mnist_mlp", NULL}; "mnist" is
 * PyTorch examples/mnist's Net, the same network as mnist_cnn. The config schema's `model` key takes
 * these names (its value is the index). */
ODL_API const char *const *odl_model_names(void);
/* Parse one of odl_model_names(). Errors: ODL_E_INVAL naming the value. */
ODL_API odl_status odl_model_parse(const char *name, odl_model_kind *out);
ODL_API const char *odl_model_name(odl_model_kind k);
/* Build and allocate the network (parameters uninitialised). dropout = 0 leaves dropout layers out
 * (deterministic runs, as the PyTorch reference file). */
ODL_API odl_status odl_model_build(odl_net *net, odl_model_kind kind, odl_device dev, int max_batch, int dropout);

#ifdef __cplusplus
}
#endif
#endif
