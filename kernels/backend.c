/* Backend selection: the op table for a device (odl/backend.h). */
#include "odl/backend.h"

#include <stdatomic.h>

#include "odl/env.h"

static atomic_int g_label_check = 1;

void odl_backend_set_label_check(int on) { atomic_store(&g_label_check, on != 0); }

int odl_backend_label_check(void) {
    if (odl_env_is_set(ODL_ENV_CUDA_LABEL_CHECK)) return odl_env_bool(ODL_ENV_CUDA_LABEL_CHECK);
    return atomic_load(&g_label_check);
}

const odl_backend *odl_backend_for(odl_device dev) {
    switch (dev.type) {
    case ODL_DEV_CPU:
        return odl_backend_cpu();
    case ODL_DEV_CUDA: {
#ifdef ODL_HAVE_CUDA
        const odl_backend *b = odl_backend_cuda();
        if (!b) ODL_ERR(ODL_E_NODEV, "no CUDA backend for device cuda:%d", dev.index);
        return b;
#else
        ODL_ERR(ODL_E_NODEV, "device cuda:%d: this build of odl has no CUDA backend (configured with "
                "ODL_WITH_CUDA=OFF or without nvcc)", dev.index);
        return NULL;
#endif
    }
    }
    ODL_ERR(ODL_E_NODEV, "unknown device type %d", (int)dev.type);
    return NULL;
}

uint64_t odl_backend_workspace_epoch(odl_device dev) {
    const odl_backend *be = odl_backend_for(dev);
    return be && be->workspace_epoch ? be->workspace_epoch() : 0;
}

#ifndef ODL_HAVE_CUDA
/* CPU-only build: there is no CUDA op table (kernels/cuda/ defines this function in a CUDA build). */
const odl_backend *odl_backend_cuda(void) { return NULL; }
#endif
