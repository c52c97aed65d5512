/* odl_gpu_check INDEX: odl_health gpu's compute check of GPU INDEX (NVML's order = CUDA's with
 * CUDA_DEVICE_ORDER=PCI_BUS_ID, which odl_health sets), a program of its own so that odl_health links no
 * CUDA. Prints one line (the verdict) and exits 0 ok, 1 CUDA cannot use the GPU, 2 the check failed or
 * the results differ from the CPU's, 3 this build has no CUDA backend. odl_health runs it in a child
 * under a time limit. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "odl/device.h"
#include "odl/models.h"
#include "odl/nn.h"
#include "odl/ops.h"
#include "odl/parse.h"

static void fill_uniform(float *x, size_t n, uint32_t seed) {
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)((seed >> 8) & 0xffff) / 65536.0f - 0.5f;
    }
}

/* A 64x64x64 GEMM with bias and ReLU, and the MNIST CNN's forward of 4 samples, on cuda:index and on
 * the CPU; the largest absolute difference must stay under 1e-3 (float32 sums of 64..9216 terms). */
static int compute_check(int index, double *max_diff) {
    enum { M = 64 };
    odl_status s = odl_cuda_init(index, 0.05);
    if (s != ODL_OK) return -2;
    odl_tensor a[2] = {{0}}, b[2] = {{0}}, c[2] = {{0}}, bias[2] = {{0}};
    static float ha[M * M], hb[M * M], hbias[M], hc[2][M * M];
    fill_uniform(ha, M * M, 1);
    fill_uniform(hb, M * M, 2);
    fill_uniform(hbias, M, 3);
    int64_t sq[2] = {M, M}, vec[1] = {M};
    odl_device devs[2] = {odl_cpu(), odl_cuda(index)};
    *max_diff = 0;
    for (int d = 0; d < 2 && s == ODL_OK; d++) {
        if ((s = odl_tensor_alloc(&a[d], devs[d], ODL_F32, 2, sq)) ||
            (s = odl_tensor_alloc(&b[d], devs[d], ODL_F32, 2, sq)) ||
            (s = odl_tensor_zeros(&c[d], devs[d], ODL_F32, 2, sq)) ||
            (s = odl_tensor_alloc(&bias[d], devs[d], ODL_F32, 1, vec)) ||
            (s = odl_tensor_copy_from_host(&a[d], ha, sizeof ha)) || (s = odl_tensor_copy_from_host(&b[d], hb, sizeof hb)) ||
            (s = odl_tensor_copy_from_host(&bias[d], hbias, sizeof hbias)) ||
            (s = odl_gemm(0, 1, 1.0f, &a[d], &b[d], 0.0f, &c[d], &bias[d], NULL, ODL_ACT_RELU)) ||
            (s = odl_tensor_copy_to_host(&c[d], hc[d], sizeof hc[d])))
            break;
    }
    for (int d = 0; d < 2; d++) {
        odl_tensor_free(&a[d]);
        odl_tensor_free(&b[d]);
        odl_tensor_free(&c[d]);
        odl_tensor_free(&bias[d]);
    }
    if (s != ODL_OK) return -1;
    for (int i = 0; i < M * M; i++) *max_diff = fmax(*max_diff, fabs((double)hc[0][i] - hc[1][i]));

    enum { B = 4 };
    static float hx[B * 28 * 28], lp[2][B * 10];
    int32_t hy[B] = {0, 1, 2, 3};
    fill_uniform(hx, B * 28 * 28, 4);
    odl_net net[2];
    int built[2] = {0, 0};
    for (int d = 0; d < 2 && s == ODL_OK; d++) {
        if ((s = odl_model_build(&net[d], ODL_MODEL_MNIST_CNN, devs[d], B, 0)) != ODL_OK) break;
        built[d] = 1;
        if ((s = odl_net_init_params(&net[d], 7)) || (s = odl_tensor_copy_from_host(&net[d].input, hx, sizeof hx)) ||
            (s = odl_tensor_copy_from_host(&net[d].labels, hy, sizeof hy)) || (s = odl_net_forward(&net[d], B, 0, 0, 0)) ||
            (s = odl_tensor_copy_to_host(&net[d].logprobs, lp[d], sizeof lp[d])))
            break;
    }
    for (int d = 0; d < 2; d++)
        if (built[d]) odl_net_free(&net[d]);
    if (s != ODL_OK) return -1;
    for (int i = 0; i < B * 10; i++) *max_diff = fmax(*max_diff, fabs((double)lp[0][i] - lp[1][i]));
    odl_cuda_shutdown();
    return *max_diff < 1e-3 && isfinite(*max_diff) ? 0 : 1;
}

int main(int argc, char **argv) {
    int64_t index;
    if (argc != 2 || odl_parse_i64(argv[1], 0, 1023, &index) != ODL_PARSE_OK) {
        fprintf(stderr, "usage: odl_gpu_check INDEX (run by odl_health gpu)\n");
        return 2;
    }
    if (!odl_cuda_built()) {
        printf("this build has no CUDA backend");
        return 3;
    }
    double diff = 0;
    int r = compute_check((int)index, &diff);
    if (r == -2) printf("CUDA cannot use this GPU (CUDA_VISIBLE_DEVICES?): %s", odl_error_msg_user());
    else if (r < 0) printf("compute check failed: %s", odl_error_msg_user());
    else printf("GEMM and forward vs CPU: max |diff| %.3g%s", diff, r ? " (over 1e-3)" : "");
    return r == 0 ? 0 : r == -2 ? 1 : 2;
}
