/* Device runtime: discovery, the per-device caching memory pool, streams and events.
 *
 * Each CUDA device has one caching pool. At odl_cuda_init it pre-allocates a fraction of the
 * device's free memory (config key memory.preallocate_fraction, default 0.5 for training) in one
 * cudaMalloc and serves every later allocation from it, so the training step never calls cudaMalloc; a
 * request that does not fit fails with ODL_E_NOMEM naming the size asked for and the pool's use. Or it
 * grows on demand (ODL_CUDA_POOL_GROW, memory.preallocate_fraction 0, the default of inference and
 * evaluation): arenas taken from the driver as requests need them and kept, so that a loop of
 * same-sized steps stops calling cudaMalloc after its first pass.
 * The CPU "device" uses aligned host memory and needs no init.
 */
#ifndef ODL_DEVICE_H
#define ODL_DEVICE_H

#include "odl/api.h"
#include <stddef.h>

#include "odl/status.h"
#include "odl/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 1 when this build has the CUDA backend. */
ODL_API int odl_cuda_built(void);
/* Number of usable CUDA devices (0 without a driver or GPU, or in a CPU-only build). Never fails. */
ODL_API int odl_cuda_device_count(void);

/* PCI bus id of CUDA device `index` ("0000:3B:00.0", cudaDeviceGetPCIBusId), for matching the GPU in
 * NVML and the kernel log. Errors: ODL_E_CUDA, ODL_E_NODEV (CPU-only build). */
ODL_API odl_status odl_cuda_pci_bus_id(int index, char *buf, size_t cap);
/* Make `index` the calling thread's current CUDA device and create its pool if needed.
 * preallocate_fraction in (0, 1]: fraction of free memory the pool reserves up front in one cudaMalloc,
 * at most ODL_CUDA_POOL_PERCENT_MAX percent (odl/env.h; several processes sharing one GPU)
 * (the program passes memory.preallocate_fraction); ODL_CUDA_POOL_GROW: no reservation, the pool takes
 * arenas of at least 32 MiB from the driver when a request does not fit and keeps them until
 * odl_cuda_shutdown (memory.preallocate_fraction 0); 0 = the choice of the last odl_cuda_init that made
 * one, else ODL_CUDA_DEFAULT_FRACTION (memory.preallocate_fraction's default for training). A pool
 * already made keeps its mode. An allocation on a device whose pool does not exist yet creates it the
 * same way. Errors: ODL_E_NODEV, ODL_E_CUDA, ODL_E_NOMEM, ODL_E_INVAL. */
#define ODL_CUDA_DEFAULT_FRACTION 0.5
#define ODL_CUDA_POOL_GROW (-1.0)
ODL_API odl_status odl_cuda_init(int index, double preallocate_fraction);
/* Release the layers' cached device buffers (the CUDA backend's workspace), then free every pool, as
 * uv_loop_close closes a loop: when a pool still has allocations in use it is kept and the call returns
 * ODL_E_BUSY naming the device, the number of live allocations and their bytes (free every tensor
 * first, then call again). ODL_OK in a CPU-only build. */
ODL_API odl_status odl_cuda_shutdown(void);

/* Pool statistics in bytes for a CUDA device. */
typedef struct odl_pool_stats {
    size_t reserved; /* bytes taken from the driver */
    size_t in_use;   /* bytes handed out now */
    size_t peak;     /* highest in_use since init or reset */
    size_t n_allocs; /* allocations served */
} odl_pool_stats;
ODL_API odl_status odl_pool_get_stats(odl_device dev, odl_pool_stats *out);

/* Raw allocation on a device (CPU: 64-byte aligned malloc; CUDA: the pool). */
ODL_API odl_status odl_mem_alloc(odl_device dev, size_t nbytes, void **out);
ODL_API void odl_mem_free(odl_device dev, void *p);
/* Pinned host memory for fast asynchronous copies (plain malloc in a CPU-only build). */
ODL_API odl_status odl_host_alloc_pinned(size_t nbytes, void **out);
ODL_API void odl_host_free_pinned(void *p);

/* Streams. odl_stream is an opaque handle (a cudaStream_t on CUDA, NULL on the CPU). Kernels of the
 * CUDA backend are launched on the calling thread's current stream (default: a non-blocking stream
 * created by odl_cuda_init). */
typedef void *odl_stream;
typedef void *odl_event;
ODL_API odl_status odl_stream_create(odl_stream *out);
ODL_API void odl_stream_destroy(odl_stream s);
ODL_API void odl_stream_set_current(odl_stream s);
ODL_API odl_stream odl_stream_current(void);
ODL_API odl_status odl_stream_synchronize(odl_stream s);
ODL_API odl_status odl_event_create(odl_event *out);
ODL_API void odl_event_destroy(odl_event e);
ODL_API odl_status odl_event_record(odl_event e, odl_stream s);
ODL_API odl_status odl_stream_wait_event(odl_stream s, odl_event e);
ODL_API odl_status odl_event_synchronize(odl_event e);
/* Milliseconds between two recorded events. */
ODL_API odl_status odl_event_elapsed_ms(odl_event start, odl_event end, float *ms);
/* Asynchronous copy on a stream (host side must be pinned for true overlap). kind is inferred. */
ODL_API odl_status odl_memcpy_async(void *dst, odl_device dst_dev, const void *src, odl_device src_dev, size_t nbytes,
                            odl_stream s);
/* Asynchronous copy of `rows` rows of `width` bytes each, from rows `spitch` bytes apart to rows `dpitch`
 * bytes apart (width <= both pitches), on a stream: cudaMemcpy2DAsync's contract (CUDA Runtime API). Only
 * the rows' bytes are read, never the padding between them (which may never have been written).
 * ODL_E_INVAL for width above a pitch; ODL_E_NODEV for a CUDA pointer in a CPU-only build. */
ODL_API odl_status odl_memcpy2d_async(void *dst, size_t dpitch, odl_device dst_dev, const void *src, size_t spitch,
                                      odl_device src_dev, size_t width, size_t rows, odl_stream s);
/* Wait for all work on the device. */
ODL_API odl_status odl_device_synchronize(odl_device dev);

#ifdef __cplusplus
}
#endif
#endif
