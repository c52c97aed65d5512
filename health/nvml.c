/* NVML through dlopen, so that binaries run where no driver is installed. The few types, constants
 * and signatures used are declared here instead of including nvml.h, so the build needs no NVML
 * headers (checked against nvml.h of the NVML 13 API as vendored in NVIDIA/go-nvml, gen/nvml/nvml.h;
 * the CUDA 13 toolkit here ships none). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "odl/env.h"
#include "odl/health.h"

/* ---- from nvml.h ---- */
typedef int nvmlReturn_t;
enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NO_PERMISSION = 4,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_TIMEOUT = 10,
    NVML_ERROR_FUNCTION_NOT_FOUND = 13,
    NVML_ERROR_NO_DATA = 21,
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
};
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct nvmlEventSet_st *nvmlEventSet_t;
typedef struct { unsigned int gpu, memory; } nvmlUtilization_t;
typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
/* nvmlMemory_v2_t: `used` without the memory the driver and firmware reserve, which v1 counts as used
 * (an idle H200 reads about 600 MiB used through v1 and 0 MiB in nvidia-smi, which reads v2). */
typedef struct { unsigned int version; unsigned long long total, reserved, free, used; } nvmlMemory_v2_t;
#define ODL_NVML_MEMORY_V2_VERSION ((unsigned)sizeof(nvmlMemory_v2_t) | (2u << 24)) /* NVML_STRUCT_VERSION(Memory, 2) */
typedef struct {
    nvmlDevice_t device;
    unsigned long long eventType;
    unsigned long long eventData;
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
} nvmlEventData_t;
typedef struct { /* nvmlPciInfo_t (the _v3 layout) */
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;
#define NVML_TEMPERATURE_GPU 0
#define NVML_CLOCK_SM 1
#define NVML_MEMORY_ERROR_TYPE_CORRECTED 0
#define NVML_MEMORY_ERROR_TYPE_UNCORRECTED 1
#define NVML_VOLATILE_ECC 0
#define nvmlEventTypeXidCriticalError 0x0000000000000008ULL
/* NVML_VALUE_NOT_AVAILABLE is -1 cast to the field's type: a call that succeeds may still give it
 * (ECC counters and memory of some boards and vGPUs, remapped rows on some drivers). */
#define NVML_VALUE_NOT_AVAILABLE_UINT 0xFFFFFFFFu
#define NVML_VALUE_NOT_AVAILABLE_ULL 0xFFFFFFFFFFFFFFFFull

#define ODL_NVML_MAX_DEV 64

struct odl_nvml {
    void *lib;
    nvmlReturn_t (*Init)(void);
    nvmlReturn_t (*Shutdown)(void);
    const char *(*ErrorString)(nvmlReturn_t);
    nvmlReturn_t (*DriverVersion)(char *, unsigned);
    nvmlReturn_t (*Count)(unsigned *);
    nvmlReturn_t (*ByIndex)(unsigned, nvmlDevice_t *);
    nvmlReturn_t (*ByPci)(const char *, nvmlDevice_t *);
    nvmlReturn_t (*ByUuid)(const char *, nvmlDevice_t *);
    nvmlReturn_t (*Uuid)(nvmlDevice_t, char *, unsigned);
    nvmlReturn_t (*Name)(nvmlDevice_t, char *, unsigned);
    nvmlReturn_t (*Pci)(nvmlDevice_t, nvmlPciInfo_t *);
    nvmlReturn_t (*Util)(nvmlDevice_t, nvmlUtilization_t *);
    nvmlReturn_t (*Mem)(nvmlDevice_t, nvmlMemory_t *);
    nvmlReturn_t (*Mem2)(nvmlDevice_t, nvmlMemory_v2_t *); /* R510 and later drivers */
    nvmlReturn_t (*Temp)(nvmlDevice_t, int, unsigned *);
    nvmlReturn_t (*Power)(nvmlDevice_t, unsigned *);
    nvmlReturn_t (*Clock)(nvmlDevice_t, int, unsigned *);
    nvmlReturn_t (*Ecc)(nvmlDevice_t, int, int, unsigned long long *);
    nvmlReturn_t (*Remap)(nvmlDevice_t, unsigned *, unsigned *, unsigned *, unsigned *);
    nvmlReturn_t (*SetCreate)(nvmlEventSet_t *);
    nvmlReturn_t (*Register)(nvmlDevice_t, unsigned long long, nvmlEventSet_t);
    nvmlReturn_t (*Wait)(nvmlEventSet_t, nvmlEventData_t *, unsigned);
    nvmlReturn_t (*SetFree)(nvmlEventSet_t);
};

struct odl_nvml_events {
    odl_nvml *n;
    nvmlEventSet_t set;
    int count;
    nvmlDevice_t dev[ODL_NVML_MAX_DEV];
    odl_pci_id pci[ODL_NVML_MAX_DEV];
};

static const char *errstr(odl_nvml *n, nvmlReturn_t r) {
    const char *s = n->ErrorString ? n->ErrorString(r) : NULL;
    return s ? s : "unknown NVML error";
}

#define SYM(field, name, required)                                                          \
    do {                                                                                    \
        *(void **)&n->field = dlsym(n->lib, name);                                          \
        if (required && !n->field) {                                                        \
            s = ODL_ERR(ODL_E_UNSUPPORTED, "NVML not available: %s lacks %s", path, name);  \
            goto fail;                                                                      \
        }                                                                                   \
    } while (0)

odl_status odl_nvml_open(odl_nvml **out) {
    *out = NULL;
    const char *path = odl_env_str(ODL_ENV_NVML_LIBRARY);
    odl_nvml *n = calloc(1, sizeof *n);
    if (!n) return ODL_ERR(ODL_E_NOMEM, "NVML handle");
    odl_status s = ODL_OK;
    n->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!n->lib) {
        const char *e = dlerror();
        s = ODL_ERR(ODL_E_UNSUPPORTED, "NVML not available: %s", e ? e : path);
        goto fail;
    }
    SYM(Init, "nvmlInit_v2", 1);
    SYM(Shutdown, "nvmlShutdown", 1);
    SYM(ErrorString, "nvmlErrorString", 1);
    SYM(DriverVersion, "nvmlSystemGetDriverVersion", 0);
    SYM(Count, "nvmlDeviceGetCount_v2", 1);
    SYM(ByIndex, "nvmlDeviceGetHandleByIndex_v2", 1);
    SYM(ByPci, "nvmlDeviceGetHandleByPciBusId_v2", 1);
    SYM(ByUuid, "nvmlDeviceGetHandleByUUID", 1);
    SYM(Uuid, "nvmlDeviceGetUUID", 0);
    SYM(Name, "nvmlDeviceGetName", 0);
    SYM(Pci, "nvmlDeviceGetPciInfo_v3", 1);
    SYM(Util, "nvmlDeviceGetUtilizationRates", 0);
    SYM(Mem, "nvmlDeviceGetMemoryInfo", 0);
    SYM(Mem2, "nvmlDeviceGetMemoryInfo_v2", 0);
    SYM(Temp, "nvmlDeviceGetTemperature", 0);
    SYM(Power, "nvmlDeviceGetPowerUsage", 0);
    SYM(Clock, "nvmlDeviceGetClockInfo", 0);
    SYM(Ecc, "nvmlDeviceGetTotalEccErrors", 0);
    SYM(Remap, "nvmlDeviceGetRemappedRows", 0); /* Ampere and later drivers */
    SYM(SetCreate, "nvmlEventSetCreate", 0);
    SYM(Register, "nvmlDeviceRegisterEvents", 0);
    SYM(Wait, "nvmlEventSetWait_v2", 0);
    SYM(SetFree, "nvmlEventSetFree", 0);
    nvmlReturn_t r = n->Init();
    if (r != NVML_SUCCESS) {
        s = ODL_ERR(ODL_E_NODEV, "nvmlInit_v2 failed: %s (%d)", errstr(n, r), r);
        goto fail;
    }
    *out = n;
    return ODL_OK;
fail:
    if (n->lib) dlclose(n->lib);
    free(n);
    return s;
}
#undef SYM

void odl_nvml_close(odl_nvml *n) {
    if (!n) return;
    n->Shutdown();
    dlclose(n->lib);
    free(n);
}

odl_status odl_nvml_device_count(odl_nvml *n, int *count) {
    unsigned c = 0;
    nvmlReturn_t r = n->Count(&c);
    if (r != NVML_SUCCESS) return ODL_ERR(ODL_E_NODEV, "nvmlDeviceGetCount_v2: %s", errstr(n, r));
    *count = (int)c;
    return ODL_OK;
}

odl_status odl_nvml_driver_version(odl_nvml *n, char *buf, size_t cap) {
    if (!n->DriverVersion) return ODL_ERR(ODL_E_UNSUPPORTED, "nvmlSystemGetDriverVersion missing");
    nvmlReturn_t r = n->DriverVersion(buf, (unsigned)cap);
    if (r != NVML_SUCCESS) return ODL_ERR(ODL_E_NODEV, "nvmlSystemGetDriverVersion: %s", errstr(n, r));
    return ODL_OK;
}

static odl_status handle(odl_nvml *n, int index, nvmlDevice_t *d) {
    nvmlReturn_t r = n->ByIndex((unsigned)index, d);
    if (r != NVML_SUCCESS) return ODL_ERR(ODL_E_NODEV, "nvmlDeviceGetHandleByIndex_v2(%d): %s", index, errstr(n, r));
    return ODL_OK;
}

static odl_status pci_of(odl_nvml *n, nvmlDevice_t d, odl_pci_id *id) {
    nvmlPciInfo_t p;
    memset(&p, 0, sizeof p);
    nvmlReturn_t r = n->Pci(d, &p);
    if (r != NVML_SUCCESS) return ODL_ERR(ODL_E_NODEV, "nvmlDeviceGetPciInfo_v3: %s", errstr(n, r));
    p.busId[sizeof p.busId - 1] = '\0';
    return odl_pci_parse(p.busId, id);
}

odl_status odl_nvml_find(odl_nvml *n, const char *key, int *index) {
    int count;
    ODL_CHECK(odl_nvml_device_count(n, &count));
    odl_pci_id want = {0};
    int by_pci = strncmp(key, "GPU-", 4) != 0 && strncmp(key, "MIG-", 4) != 0;
    if (by_pci) ODL_CHECK(odl_pci_parse(key, &want));
    nvmlDevice_t target;
    nvmlReturn_t r;
    if (by_pci) {
        char canon[ODL_PCI_STR_LEN];
        r = n->ByPci(odl_pci_format(&want, canon), &target);
    } else {
        r = n->ByUuid(key, &target);
    }
    if (r == NVML_ERROR_NOT_FOUND) return ODL_ERR(ODL_E_NOTFOUND, "NVML sees no GPU %s", key);
    if (r != NVML_SUCCESS) return ODL_ERR(ODL_E_NODEV, "NVML lookup of %s: %s", key, errstr(n, r));
    for (int i = 0; i < count; i++) {
        nvmlDevice_t d;
        ODL_CHECK(handle(n, i, &d));
        if (d == target) {
            *index = i;
            return ODL_OK;
        }
    }
    return ODL_ERR(ODL_E_NOTFOUND, "NVML found %s but it is none of its %d devices", key, count);
}

/* An NVML reading: SUCCESS gives the value, "not supported"-like codes give NA, anything else marks
 * the GPU unhealthy (the issue: an NVML error is never silently ignored). */
static double reading(odl_nvml *n, odl_gpu_telemetry *t, const char *what, nvmlReturn_t r, double v) {
    if (r == NVML_SUCCESS) return v;
    if (r == NVML_ERROR_NOT_SUPPORTED || r == NVML_ERROR_NO_PERMISSION || r == NVML_ERROR_FUNCTION_NOT_FOUND ||
        r == NVML_ERROR_NO_DATA)
        return ODL_HEALTH_NA;
    if (t->healthy) snprintf(t->error, sizeof t->error, "%s: %s (%d)", what, errstr(n, r), r);
    t->healthy = 0;
    return ODL_HEALTH_NA;
}

/* A successful reading's value, or ODL_HEALTH_NA (and its bit in t->not_available) for NVML's "not
 * available" value of the field's width. Applied after reading(), whose NA for a failed call stays. */
static double u32(odl_gpu_telemetry *t, odl_gpu_reading bit, unsigned v, double scale) {
    if (v != NVML_VALUE_NOT_AVAILABLE_UINT) return v * scale;
    t->not_available |= bit;
    return ODL_HEALTH_NA;
}
static double u64(odl_gpu_telemetry *t, odl_gpu_reading bit, unsigned long long v, double scale) {
    if (v != NVML_VALUE_NOT_AVAILABLE_ULL) return (double)v * scale;
    t->not_available |= bit;
    return ODL_HEALTH_NA;
}
/* The value of a call that succeeded (r), through u32/u64; otherwise reading()'s verdict on r. */
#define READ32(what, r, bit, v, scale) ((r) == NVML_SUCCESS ? u32(t, bit, v, scale) : reading(n, t, what, r, 0))
#define READ64(what, r, bit, v, scale) ((r) == NVML_SUCCESS ? u64(t, bit, v, scale) : reading(n, t, what, r, 0))

odl_status odl_nvml_read(odl_nvml *n, int index, odl_gpu_telemetry *t) {
    memset(t, 0, sizeof *t);
    t->healthy = 1;
    t->have_index = 1;
    t->index = index;
    nvmlDevice_t d;
    ODL_CHECK(handle(n, index, &d));
    odl_pci_id id;
    if (pci_of(n, d, &id) == ODL_OK) odl_pci_format(&id, t->pci);
    if (n->Uuid) reading(n, t, "nvmlDeviceGetUUID", n->Uuid(d, t->uuid, sizeof t->uuid), 0);
    if (n->Name) reading(n, t, "nvmlDeviceGetName", n->Name(d, t->name, sizeof t->name), 0);
    /* Each call before its value is read (argument evaluation order is unspecified in C). */
    nvmlUtilization_t u = {0, 0};
    nvmlReturn_t r = n->Util ? n->Util(d, &u) : NVML_ERROR_FUNCTION_NOT_FOUND;
    t->util_gpu_pct = READ32("nvmlDeviceGetUtilizationRates", r, ODL_GPU_READING_UTIL, u.gpu, 1);
    /* v2 as nvidia-smi and dcgm-exporter's FB_USED report it; v1 where the driver has no v2. */
    nvmlMemory_v2_t m2 = {ODL_NVML_MEMORY_V2_VERSION, 0, 0, 0, 0};
    nvmlMemory_t m = {0, 0, 0};
    const char *mem_call = "nvmlDeviceGetMemoryInfo_v2";
    r = n->Mem2 ? n->Mem2(d, &m2) : NVML_ERROR_FUNCTION_NOT_FOUND;
    if (r == NVML_SUCCESS) {
        m.total = m2.total;
        m.used = m2.used;
    } else if (r == NVML_ERROR_FUNCTION_NOT_FOUND || r == NVML_ERROR_NOT_SUPPORTED || r == NVML_ERROR_ARGUMENT_VERSION_MISMATCH) {
        mem_call = "nvmlDeviceGetMemoryInfo";
        r = n->Mem ? n->Mem(d, &m) : NVML_ERROR_FUNCTION_NOT_FOUND;
    }
    t->mem_used_mib = READ64(mem_call, r, ODL_GPU_READING_MEM_USED, m.used, 1.0 / (1024.0 * 1024.0));
    t->mem_total_mib = READ64(mem_call, r, ODL_GPU_READING_MEM_TOTAL, m.total, 1.0 / (1024.0 * 1024.0));
    unsigned v = 0;
    r = n->Temp ? n->Temp(d, NVML_TEMPERATURE_GPU, &v) : NVML_ERROR_FUNCTION_NOT_FOUND;
    t->temp_c = READ32("nvmlDeviceGetTemperature", r, ODL_GPU_READING_TEMP, v, 1);
    v = 0;
    r = n->Power ? n->Power(d, &v) : NVML_ERROR_FUNCTION_NOT_FOUND;
    t->power_w = READ32("nvmlDeviceGetPowerUsage", r, ODL_GPU_READING_POWER, v, 1e-3);
    v = 0;
    r = n->Clock ? n->Clock(d, NVML_CLOCK_SM, &v) : NVML_ERROR_FUNCTION_NOT_FOUND;
    t->sm_clock_mhz = READ32("nvmlDeviceGetClockInfo", r, ODL_GPU_READING_SM_CLOCK, v, 1);
    unsigned long long e = 0;
    t->ecc_corrected = ODL_HEALTH_NA;
    t->ecc_uncorrected = ODL_HEALTH_NA;
    if (n->Ecc) {
        r = n->Ecc(d, NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_VOLATILE_ECC, &e);
        t->ecc_corrected = READ64("nvmlDeviceGetTotalEccErrors", r, ODL_GPU_READING_ECC_CORRECTED, e, 1);
        e = 0;
        r = n->Ecc(d, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, &e);
        t->ecc_uncorrected = READ64("nvmlDeviceGetTotalEccErrors", r, ODL_GPU_READING_ECC_UNCORRECTED, e, 1);
    }
    t->remap_corrected = t->remap_uncorrected = t->remap_pending = t->remap_failed = ODL_HEALTH_NA;
    if (n->Remap) {
        unsigned c = 0, un = 0, pend = 0, fail = 0;
        r = n->Remap(d, &c, &un, &pend, &fail);
        t->remap_corrected = READ32("nvmlDeviceGetRemappedRows", r, ODL_GPU_READING_REMAP_CORRECTED, c, 1);
        t->remap_uncorrected = READ32("nvmlDeviceGetRemappedRows", r, ODL_GPU_READING_REMAP_UNCORRECTED, un, 1);
        t->remap_pending = READ32("nvmlDeviceGetRemappedRows", r, ODL_GPU_READING_REMAP_PENDING, pend, 1);
        t->remap_failed = READ32("nvmlDeviceGetRemappedRows", r, ODL_GPU_READING_REMAP_FAILED, fail, 1);
    }
    return ODL_OK;
}
#undef READ32
#undef READ64

odl_status odl_nvml_events_open(odl_nvml *n, const int *indices, int count, odl_nvml_events **out) {
    *out = NULL;
    if (!n->SetCreate || !n->Register || !n->Wait || !n->SetFree)
        return ODL_ERR(ODL_E_UNSUPPORTED, "this NVML has no event API (nvmlEventSetWait_v2)");
    if (count < 1 || count > ODL_NVML_MAX_DEV) return ODL_ERR(ODL_E_INVAL, "events for %d devices", count);
    odl_nvml_events *e = calloc(1, sizeof *e);
    if (!e) return ODL_ERR(ODL_E_NOMEM, "NVML event set");
    e->n = n;
    nvmlReturn_t r = n->SetCreate(&e->set);
    odl_status s = ODL_OK;
    if (r != NVML_SUCCESS) {
        s = ODL_ERR(ODL_E_NODEV, "nvmlEventSetCreate: %s", errstr(n, r));
        free(e);
        return s;
    }
    for (int i = 0; i < count; i++) {
        ODL_CHECK_GOTO(handle(n, indices[i], &e->dev[i]), s, fail);
        ODL_CHECK_GOTO(pci_of(n, e->dev[i], &e->pci[i]), s, fail);
        r = n->Register(e->dev[i], nvmlEventTypeXidCriticalError, e->set);
        if (r != NVML_SUCCESS) {
            s = ODL_ERR(r == NVML_ERROR_NOT_SUPPORTED ? ODL_E_UNSUPPORTED : ODL_E_NODEV,
                        "nvmlDeviceRegisterEvents(GPU %d, Xid critical error): %s", indices[i], errstr(n, r));
            goto fail;
        }
        e->count = i + 1;
    }
    *out = e;
    return ODL_OK;
fail:
    n->SetFree(e->set);
    free(e);
    return s;
}

int odl_nvml_events_wait(odl_nvml_events *e, unsigned timeout_ms, odl_xid_record *rec) {
    nvmlEventData_t d;
    memset(&d, 0, sizeof d);
    nvmlReturn_t r = e->n->Wait(e->set, &d, timeout_ms);
    if (r == NVML_ERROR_TIMEOUT) return 0;
    if (r != NVML_SUCCESS)
        return ODL_ERR(ODL_E_NODEV, "nvmlEventSetWait_v2: %s (%d): the GPU is treated as unhealthy", errstr(e->n, r), r);
    memset(rec, 0, sizeof *rec);
    rec->xid = (int)d.eventData;
    /* 0xFFFFFFFF: the event is not attributed to a MIG instance. */
    rec->gpu_instance = d.gpuInstanceId == NVML_VALUE_NOT_AVAILABLE_UINT ? -1 : (int)d.gpuInstanceId;
    rec->compute_instance = d.computeInstanceId == NVML_VALUE_NOT_AVAILABLE_UINT ? -1 : (int)d.computeInstanceId;
    rec->pid = -1;
    rec->ts_us = odl_kmsg_now_us();
    for (int i = 0; i < e->count; i++)
        if (e->dev[i] == d.device) rec->pci = e->pci[i];
    snprintf(rec->text, sizeof rec->text, "NVML Xid critical error event");
    return 1;
}

void odl_nvml_events_close(odl_nvml_events *e) {
    if (!e) return;
    e->n->SetFree(e->set);
    free(e);
}
