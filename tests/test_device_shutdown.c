/* test_device_shutdown: odl_cuda_shutdown reports live device memory as uv_loop_close reports a busy
 * loop (ODL_E_BUSY, the pools kept, the memory still valid), releases the CUDA backend's workspace
 * through the table's release entry (registered with core's teardown hooks), and then frees the pools;
 * a pool that grows on demand (ODL_CUDA_POOL_GROW) takes arenas as requests need them and reuses them;
 * ODL_CUDA_POOL_PERCENT_MAX caps what a pre-allocated pool reserves.
 * Label gpu: exits 77 without a CUDA device; in a CPU-only build odl_cuda_shutdown is a no-op. */
#include <stdlib.h>
#include <string.h>

#include "odl/backend.h"
#include "odl/device.h"
#include "odl/env.h"
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
    /* Growing on demand (memory.preallocate_fraction 0): nothing reserved up front, arenas of at least
     * 32 MiB taken as requests need them, kept (and reused) until the shutdown. */
    TOK(odl_cuda_init(0, ODL_CUDA_POOL_GROW));
    odl_pool_stats g0, g1, g2, g3;
    TOK(odl_pool_get_stats(odl_cuda(0), &g0));
    TCHECK(g0.reserved == 0, "grow mode reserves nothing at init: %zu bytes", g0.reserved);
    void *a = NULL, *b = NULL, *c = NULL;
    TOK(odl_mem_alloc(odl_cuda(0), 1000, &a));
    TOK(odl_pool_get_stats(odl_cuda(0), &g1));
    TCHECK(g1.reserved == ((size_t)32 << 20), "a small request takes one 32 MiB arena: %zu bytes", g1.reserved);
    TOK(odl_mem_alloc(odl_cuda(0), (size_t)100 << 20, &b));
    TOK(odl_pool_get_stats(odl_cuda(0), &g2));
    TCHECK(g2.reserved == ((size_t)132 << 20) && g2.in_use >= ((size_t)100 << 20) + 1000,
           "100 MiB more: its own arena (reserved %zu, in use %zu)", g2.reserved, g2.in_use);
    odl_mem_free(odl_cuda(0), b);
    TOK(odl_mem_alloc(odl_cuda(0), (size_t)64 << 20, &c));
    TOK(odl_pool_get_stats(odl_cuda(0), &g3));
    TCHECK(g3.reserved == g2.reserved, "a freed arena is reused, not given back: reserved %zu then %zu", g2.reserved,
           g3.reserved);
    TOK(odl_memcpy_async(c, odl_cuda(0), &h, odl_cpu(), sizeof h, odl_stream_current())); /* usable memory */
    odl_mem_free(odl_cuda(0), c);
    odl_mem_free(odl_cuda(0), a);
    TOK(odl_cuda_shutdown());
    TFAIL(odl_cuda_init(0, 1.5), ODL_E_INVAL);
    /* ODL_CUDA_POOL_PERCENT_MAX caps the up-front reservation (several GPU processes sharing a device):
     * 10% of the free memory asked for, at most 1% taken. Free memory may move between the two pools
     * (other processes), hence a factor 4 rather than 10. */
    const char *was = getenv("ODL_CUDA_POOL_PERCENT_MAX");
    char *saved = was ? strdup(was) : NULL;
    odl_pool_stats u, c1;
    setenv("ODL_CUDA_POOL_PERCENT_MAX", "100", 1);
    TOK(odl_env_reload());
    TOK(odl_cuda_init(0, 0.1));
    TOK(odl_pool_get_stats(odl_cuda(0), &u));
    TOK(odl_cuda_shutdown());
    setenv("ODL_CUDA_POOL_PERCENT_MAX", "1", 1);
    TOK(odl_env_reload());
    TOK(odl_cuda_init(0, 0.1));
    TOK(odl_pool_get_stats(odl_cuda(0), &c1));
    TOK(odl_cuda_shutdown());
    TCHECK(c1.reserved > 0 && c1.reserved * 4 <= u.reserved, "10%% asked under a 1%% cap: %zu bytes reserved, %zu "
           "without the cap", c1.reserved, u.reserved);
    if (saved) setenv("ODL_CUDA_POOL_PERCENT_MAX", saved, 1);
    else unsetenv("ODL_CUDA_POOL_PERCENT_MAX");
    free(saved);
    TOK(odl_env_reload());
    return odl_test_finish("test_device_shutdown");
}
