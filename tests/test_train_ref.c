/* The MNIST CNN trained step by step against PyTorch: ../shared/data/mnist/fashion_mnist_cnn_steps.h5
 * holds a float64 CPU run of the examples/mnist network (dropout off) with Adadelta (lr 1.0, rho 0.9,
 * eps 1e-6) on 20 Fashion-MNIST batches of 64. We load its initial parameters, feed the same batches
 * and compare step-0 log-probabilities and gradients, every step's loss and the final parameters.
 *
 * Why the later steps cannot be held to 1e-4 on every backend: 2x2 max-pooling picks the larger of
 * activations that are often equal or within an ulp (uniform image regions give identical patches).
 * A rounding-sized difference flips an argmax now and then; the gradient then flows through another
 * cell, which moves conv2's weight gradient by ~1e-4 relative in that step, and Adadelta at lr 1.0
 * amplifies it. Measured: the CPU backend stays within 1.1e-5 for steps 0-15 and 2.9e-4 at step 19
 * (final parameters rel-L2 <= 1.1e-3); the CUDA backend, whose sums round differently, flips an
 * argmax at step 3 (lockstep below: conv2.weight gradient 1.1e-4 off, conv2.bias exact) and reaches
 * 1.3e-3 at step 8 and 1.8e-2 at step 15. Perturbing the CPU run's input normalisation by 3e-7 moves
 * its own numbers by as much. So the test holds:
 *   - every backend: step-0 log-probabilities (1e-5) and gradients (1e-4), steps 0-4 losses (1e-4), and
 *     all 20 losses within 3e-2 (a wrong kernel is off by far more within a few steps);
 *   - the CPU backend (deterministic, summing like PyTorch's CPU path): steps 0-15 within 1e-4, 16-19
 *     within 5e-4, final parameters rel-L2 and max-abs within 3e-3;
 *   - the CUDA backend, in lockstep with the CPU backend (before each step the CPU network receives
 *     the device's parameters and optimiser state, both take the step on the same batch): every step's
 *     log-probabilities within 1e-5, every gradient within rel-L2 2e-3 (an argmax flip costs ~3e-4)
 *     and every updated parameter within 1e-4.
 */
#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "odl/device.h"
#include "odl/loader.h"
#include "odl/mnist.h"
#include "odl/models.h"
#include "odl/nn.h"
#include "test_util.h"

static double *read_f64(hid_t f, const char *path, size_t expect) {
    hid_t d = H5Dopen2(f, path, H5P_DEFAULT);
    if (d < 0) return NULL;
    hid_t sp = H5Dget_space(d);
    hssize_t n = H5Sget_simple_extent_npoints(sp);
    double *buf = NULL;
    if (n == (hssize_t)expect) {
        buf = malloc((size_t)n * sizeof *buf);
        if (H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) {
            free(buf);
            buf = NULL;
        }
    }
    H5Sclose(sp);
    H5Dclose(d);
    return buf;
}

/* The reference of parameter p under group ("init", "step0_grad", "final"), or NULL (a failed check). */
static double *read_param_ref(hid_t f, const char *group, const odl_param *p) {
    char path[128];
    snprintf(path, sizeof path, "%s/%s", group, p->name);
    double *ref = read_f64(f, path, (size_t)odl_tensor_numel(&p->value));
    TCHECK(ref != NULL, "dataset %s missing or of the wrong size", path);
    return ref;
}

/* rel-L2 of a device tensor against a float64 reference. */
static double tensor_rel_err(const odl_tensor *t, const double *ref, size_t n, double *max_abs) {
    float *h = malloc(n * sizeof *h);
    double *hd = malloc(n * sizeof *hd);
    TOK(odl_tensor_copy_to_host(t, h, n * sizeof *h));
    *max_abs = 0;
    for (size_t i = 0; i < n; i++) {
        hd[i] = h[i];
        double d = fabs(hd[i] - ref[i]);
        if (!(d <= *max_abs)) *max_abs = d;
    }
    double r = odl_rel_l2(hd, ref, n);
    free(h);
    free(hd);
    return r;
}

/* Lockstep diagnosis (--compare-cpu): before each step the CPU network gets the device network's
 * parameters and optimiser state; both take the step on the same batch; the gradients and updated
 * parameters are compared. A kernel bug shows as one step whose error is far above rounding. */
static double max_rel_diff(const odl_tensor *a, const odl_tensor *b) {
    size_t n = (size_t)odl_tensor_numel(b);
    float *hb = malloc(n * sizeof *hb);
    double *db = malloc(n * sizeof *db), mx;
    TOK(odl_tensor_copy_to_host(b, hb, n * sizeof *hb));
    for (size_t i = 0; i < n; i++) db[i] = hb[i];
    double r = tensor_rel_err(a, db, n, &mx);
    free(hb);
    free(db);
    return r;
}

static void copy_tensor(odl_tensor *dst, const odl_tensor *src) {
    size_t n = odl_tensor_nbytes(src);
    void *h = malloc(n);
    odl_tensor_copy_to_host(src, h, n);
    odl_tensor_copy_from_host(dst, h, n);
    free(h);
}

int main(int argc, char **argv) {
    int use_cuda = argc > 2 && !strcmp(argv[1], "--device") && !strcmp(argv[2], "cuda");
    int lockstep = use_cuda; /* the device's every step against the CPU backend's from the same state */
    odl_device dev = odl_cpu();
    if (use_cuda && odl_cuda_device_count() == 0) {
        printf("skipped: no CUDA device\n");
        return ODL_TEST_SKIP;
    }
    /* the data first: a skip never leaves the device's pool allocated (memcheck's leak check) */
    const char *fm = getenv("ODL_FMNIST_DIR");
    if (!fm || !fm[0]) fm = "/usr/share/datasets/fashion-mnist";
    odl_mnist train;
    if (odl_mnist_load(fm, "train", &train) != ODL_OK) {
        printf("skipped: Fashion-MNIST not found (%s); apt-get install dataset-fashion-mnist\n", odl_error_msg());
        return ODL_TEST_SKIP;
    }
    if (!odl_test_have_data("mnist/fashion_mnist_cnn_steps.h5")) {
        odl_mnist_free(&train);
        return ODL_TEST_SKIP;
    }
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t f = H5Fopen(odl_test_data_path("mnist/fashion_mnist_cnn_steps.h5"), H5F_ACC_RDONLY, H5P_DEFAULT);
    TCHECK(f >= 0, "cannot open %s", odl_test_data_path("mnist/fashion_mnist_cnn_steps.h5"));
    if (f < 0) return odl_test_finish("test_train_ref");

    int64_t idx[20][64];
    {
        hid_t d = H5Dopen2(f, "batch_indices", H5P_DEFAULT);
        TCHECK(d >= 0 && H5Dread(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, idx) >= 0, "batch_indices");
        H5Dclose(d);
    }
    int64_t max_idx = 0;
    for (int st = 0; st < 20; st++)
        for (int b = 0; b < 64; b++)
            if (idx[st][b] > max_idx) max_idx = idx[st][b];
    if (max_idx >= train.n) { /* a smaller copy of the set (a subset, a different download) */
        printf("skipped: the reference steps use training sample %lld, and the Fashion-MNIST at %s has %lld\n",
               (long long)max_idx, fm, (long long)train.n);
        H5Fclose(f);
        odl_mnist_free(&train);
        return ODL_TEST_SKIP;
    }

    if (use_cuda) {
        TOK(odl_cuda_init(0, 0.2));
        dev = odl_cuda(0);
    }
    odl_net net;
    TOK(odl_model_build(&net, ODL_MODEL_MNIST_CNN, dev, 64, 0));
    for (int i = 0; i < net.n_params; i++) {
        odl_param *p = &net.params[i];
        size_t n = (size_t)odl_tensor_numel(&p->value);
        double *ref = read_param_ref(f, "init", p);
        if (!ref) return odl_test_finish("test_train_ref");
        float *h = malloc(n * sizeof *h);
        for (size_t j = 0; j < n; j++) h[j] = (float)ref[j];
        TOK(odl_tensor_copy_from_host(&p->value, h, n * sizeof *h));
        free(h);
        free(ref);
    }
    odl_optim opt;
    TOK(odl_optim_init(&opt, ODL_OPTIM_ADADELTA, 1.0f, 0, 0, &net));

    odl_net cnet;
    odl_optim copt;
    if (lockstep) {
        TOK(odl_model_build(&cnet, ODL_MODEL_MNIST_CNN, odl_cpu(), 64, 0));
        TOK(odl_optim_init(&copt, ODL_OPTIM_ADADELTA, 1.0f, 0, 0, &cnet));
    }
    double *losses = read_f64(f, "losses", 20);
    double *logp0 = read_f64(f, "step0_logprobs", 64 * 10);
    TCHECK(losses && logp0, "losses / step0_logprobs missing");
    float hx[64 * 784];
    int32_t hy[64];
    double worst_loss = 0;
    for (int step = 0; step < 20 && losses; step++) {
        odl_status gs = odl_loader_gather(train.images, train.labels, train.n, 784, 0.1307f, 0.3081f, idx[step], 64, hx, hy);
        TCHECK(gs == ODL_OK, "step %d: %s", step, odl_error_msg());
        if (gs != ODL_OK) break;
        if (lockstep) {
            for (int i = 0; i < net.n_params; i++) {
                copy_tensor(&cnet.params[i].value, &net.params[i].value);
                copy_tensor(&copt.state[i][0], &opt.state[i][0]);
                copy_tensor(&copt.state[i][1], &opt.state[i][1]);
            }
            TOK(odl_tensor_copy_from_host(&cnet.input, hx, sizeof hx));
            TOK(odl_tensor_copy_from_host(&cnet.labels, hy, sizeof hy));
            TOK(odl_net_forward(&cnet, 64, 1, 0, 0));
            TOK(odl_net_backward(&cnet, 64, 1.0f, 0, 0));
            TOK(odl_optim_step(&copt, &cnet));
        }
        TOK(odl_tensor_copy_from_host(&net.input, hx, sizeof hx));
        TOK(odl_tensor_copy_from_host(&net.labels, hy, sizeof hy));
        TOK(odl_net_forward(&net, 64, 1, 0, 0));
        float loss;
        TOK(odl_tensor_copy_to_host(&net.loss, &loss, sizeof loss));
        double rel = fabs(loss - losses[step]) / fabs(losses[step]);
        if (rel > worst_loss) worst_loss = rel;
        printf("step %2d loss %.6f reference %.6f rel %.2e\n", step, loss, losses[step], rel);
        double tol = step < 5 ? 1e-4 : !use_cuda ? (step < 16 ? 1e-4 : 5e-4) : 3e-2;
        TCHECK(rel < tol, "step %d: loss %.7f vs PyTorch %.7f (rel %.2e > %.0e)", step, loss, losses[step], rel, tol);
        TOK(odl_net_backward(&net, 64, 1.0f, 0, 0));
        if (step == 0) {
            double mx;
            double r = tensor_rel_err(&net.logprobs, logp0, 640, &mx);
            printf("step 0 logprobs rel-L2 %.2e max abs %.2e\n", r, mx);
            TCHECK(r < 1e-5, "step-0 log-probabilities rel-L2 %.2e", r);
            for (int i = 0; i < net.n_params; i++) {
                odl_param *p = &net.params[i];
                size_t n = (size_t)odl_tensor_numel(&p->grad);
                double *g = read_param_ref(f, "step0_grad", p);
                if (!g) continue;
                r = tensor_rel_err(&p->grad, g, n, &mx);
                printf("step 0 grad %-14s rel-L2 %.2e max abs %.2e\n", p->name, r, mx);
                TCHECK(r < 1e-4, "step-0 gradient of %s: rel-L2 %.2e", p->name, r);
                free(g);
            }
        }
        TOK(odl_optim_step(&opt, &net));
        if (lockstep) {
            double lp = max_rel_diff(&net.logprobs, &cnet.logprobs), worst_g = 0, worst_p = 0;
            TCHECK(lp < 1e-5, "lockstep step %d: log-probabilities rel-L2 %.2e", step, lp);
            for (int i = 0; i < net.n_params; i++) {
                double g = max_rel_diff(&net.params[i].grad, &cnet.params[i].grad);
                double v = max_rel_diff(&net.params[i].value, &cnet.params[i].value);
                TCHECK(g < 2e-3, "lockstep step %d: %s gradient rel-L2 %.2e", step, net.params[i].name, g);
                TCHECK(v < 1e-4, "lockstep step %d: updated %s rel-L2 %.2e", step, net.params[i].name, v);
                if (g > worst_g) worst_g = g;
                if (v > worst_p) worst_p = v;
            }
            printf("lockstep step %2d vs CPU: logprobs %.1e, worst gradient %.1e, worst updated parameter %.1e\n", step,
                   lp, worst_g, worst_p);
        }
    }
    for (int i = 0; i < net.n_params; i++) {
        odl_param *p = &net.params[i];
        size_t n = (size_t)odl_tensor_numel(&p->value);
        double *ref = read_param_ref(f, "final", p);
        if (!ref) continue;
        double mx, r = tensor_rel_err(&p->value, ref, n, &mx);
        printf("final %-14s rel-L2 %.2e max abs %.2e\n", p->name, r, mx);
        if (!use_cuda) TCHECK(r < 3e-3 && mx < 3e-3, "final %s: rel-L2 %.2e, max abs %.2e", p->name, r, mx);
        free(ref);
    }
    printf("worst loss relative error %.2e over 20 steps on %s\n", worst_loss, odl_device_name(dev));
    free(losses);
    free(logp0);
    H5Fclose(f);
    odl_optim_free(&opt);
    if (lockstep) {
        odl_optim_free(&copt);
        odl_net_free(&cnet);
    }
    odl_net_free(&net);
    odl_mnist_free(&train);
    if (odl_cuda_device_count() > 0) TOK(odl_cuda_shutdown()); /* no device memory left in use */
    return odl_test_finish("test_train_ref");
}
