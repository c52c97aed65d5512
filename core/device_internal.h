/* Private interface of core/device.c for the layers above it (not installed, not exported).
 *
 * Teardown hooks: a layer that keeps device memory of its own between calls (the CUDA backend's
 * workspace, kernels/cuda/backend.cu) registers its release function; odl_cuda_shutdown runs the hooks,
 * newest first, before it checks the pools for live allocations. This keeps core from calling up into
 * kernels. Registering a function already registered is a no-op. Errors: ODL_E_NOMEM (more than 8). */
#ifndef ODL_CORE_DEVICE_INTERNAL_H
#define ODL_CORE_DEVICE_INTERNAL_H

#include "odl/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef void (*odl_device_release_fn)(void);
odl_status odl_device_at_shutdown(odl_device_release_fn fn);

#ifdef __cplusplus
}
#endif
#endif
