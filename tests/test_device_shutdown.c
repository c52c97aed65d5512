/* test_device_shutdown: odl_cuda_shutdown reports live device memory as uv_loop_close reports a busy
 * loop (ODL_E_BUSY, the pools kept, the memory still valid), releases the CUDA backend's workspace
 * through the table's release entry (registered with core's teardown hooks), and then frees the pools.
 * Label gpu: exits 77 without a CUDA device; in a CPU-only build odl_cuda_shutdown is a no-op. */
#include <string.h>

#include "odl/backend.h"
#include "odl/device.h"
#include "odl/ops.h"
#include "test_util.h"

int main(void) {
    TOK(odl_cuda_shutdown()); /* nothing set up: fine */
    if (odl_cuda_device_count() == 0) {
        printf("SKIP: no CUDA device (or a CPU-only build)\n");
        return ODL_TEST_SKIP;
    }
    TOK(odl_cuda_init(0, 0.1));
    const odl_backend *be = odl_backend_cuda();
    TCHECK(be && be->release, "the CUDA table has a release entry");
    /* A sum over many elements takes the backend's workspace for its partial sums. */
    odl_tensor x = {0}, s = {0};
    TOK(odl_tensor_alloc(&x, odl_cuda(0), ODL_F32, 1, (int64_t[]){1 << 20}));
    TOK(odl_tensor_alloc(&s, odl_cuda(0), ODL_F32, 1, (int64_t[]){1}));
    TOK(odl_tensor_fill(&x, 0.25f));
    TOK(odl_sum(&x, &s));
    float h = 0;
    TOK(odl_tensor_copy_to_host(&s, &h, sizeof h));
    TCHECK(h == 0.25f * (1 << 20), "sum %g", h);
    /* Two tensors live: busy, nothing freed. */
    TFAIL(odl_cuda_shutdown(), ODL_E_BUSY);
    TCHECK(strstr(odl_error_msg(), "cuda:0") && strstr(odl_error_msg(), "2 allocation(s)"), "%s", odl_error_msg());
    h = 0;
    TOK(odl_tensor_copy_to_host(&s, &h, sizeof h));
    TCHECK(h == 0.25f * (1 << 20), "memory still valid after a refused shutdown");
    odl_tensor_free(&s);
    odl_tensor_free(&x);
    odl_pool_stats ps;
    TOK(odl_pool_get_stats(odl_cuda(0), &ps));
    TCHECK(ps.in_use == 0, "workspace released by the first shutdown: %zu bytes in use", ps.in_use);
    TOK(odl_cuda_shutdown());
    /* A pool made again after a shutdown works (the workspace is taken afresh). */
    TOK(odl_cuda_init(0, 0.1));
    TOK(odl_tensor_alloc(&x, odl_cuda(0), ODL_F32, 1, (int64_t[]){1 << 20}));
    TOK(odl_tensor_alloc(&s, odl_cuda(0), ODL_F32, 1, (int64_t[]){1}));
    TOK(odl_tensor_fill(&x, 1.0f));
    TOK(odl_sum(&x, &s));
    TOK(odl_tensor_copy_to_host(&s, &h, sizeof h));
    TCHECK(h == (float)(1 << 20), "sum after re-init %g", h);
    odl_tensor_free(&s);
    odl_tensor_free(&x);
    TOK(odl_cuda_shutdown());
    return odl_test_finish("test_device_shutdown");
}
