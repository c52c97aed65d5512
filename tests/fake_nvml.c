/* A stand-in libnvidia-ml for tests on machines without a driver (loaded through ODL_NVML_LIBRARY):
 * the NVML entry points health/nvml.c uses, with fixed answers. Signatures and codes as in nvml.h.
 * Two builds of this file (tests/health.cmake):
 *   fake_libnvidia-ml.so         (unit tests) 2 GPUs: a reading, NVML's 0xFFFFFFFF "not available",
 *                                NVML_ERROR_NOT_SUPPORTED, an NVML error (GPU is lost) and the event API
 *                                (one Xid 79, then time-outs, then GPU is lost).
 *   fake_libnvidia-ml-steady.so  (FAKE_NVML_STEADY; a training run watched through ODL_HEALTH_GPU) 3 GPUs
 *                                of steady readings, every event wait a time-out:
 *       GPU  bus id            UUID        util    mem used / total MiB  temp  power W  SM MHz
 *       0    00000000:3B:00.0  GPU-fake-0  94, 80  3000, 2000 / 81559    51    231.5    1980
 *       1    00000000:5E:00.0  GPU-fake-1  44, 40  1500, 1000 / 81559    NA    118.25   1755
 *       2    00000000:86:00.0  GPU-fake-2  10       100 / 81559          lost  50       1500
 *     (a, b: the reading alternates, first a, so a window's mean (87, 42) is no single reading and its
 *     peak is a; NA: 0xFFFFFFFF, unavailable; lost: nvmlDeviceGetTemperature fails with GPU_IS_LOST, an
 *     unhealthy GPU; ECC and remapped rows not supported). tests/health_telemetry.py holds the numbers.
 *   fake_libnvidia-ml-sentinel.so (FAKE_NVML_SENTINEL) 1 GPU (00000000:3B:00.0, GPU-fake-0) every reading
 *                                of which succeeds with NVML's "not available" value (NVML_VALUE_NOT_AVAILABLE:
 *                                0xFFFFFFFF, and 0xFFFFFFFFFFFFFFFF in the 64-bit ECC and memory fields). */
#include <string.h>
#include <time.h>

typedef int nvmlReturn_t;
#define OK 0
#define NOT_SUPPORTED 3
#define INVALID_ARGUMENT 2
#define NOT_FOUND 6
#define TIMEOUT 10
#define GPU_IS_LOST 15
#define NA 0xFFFFFFFFu
#define NA64 0xFFFFFFFFFFFFFFFFull
#define VERSION_MISMATCH 25
#define RESERVED (600ULL << 20) /* what the driver reserves: v1 counts it as used, v2 does not */

#ifdef FAKE_NVML_STEADY
#define NDEV 3
#elif defined(FAKE_NVML_SENTINEL)
#define NDEV 1
#else
#define NDEV 2
#endif
typedef struct fake_dev { int index; } fake_dev;
static fake_dev g_dev[3] = {{0}, {1}, {2}};
static const char *g_bus[3] = {"00000000:3B:00.0", "00000000:5E:00.0", "00000000:86:00.0"};
static const char *g_uuid[3] = {"GPU-fake-0", "GPU-fake-1", "GPU-fake-2"};
typedef struct { unsigned gpu, memory; } util_t;
typedef struct { unsigned long long total, free, used; } mem_t;
typedef struct { unsigned version; unsigned long long total, reserved, free, used; } mem2_t;
#define MEM2_VERSION ((unsigned)sizeof(mem2_t) | (2u << 24))
typedef struct { void *device; unsigned long long eventType, eventData; unsigned gpuInstanceId, computeInstanceId; } event_t;
typedef struct { char busIdLegacy[16]; unsigned domain, bus, device, pciDeviceId, pciSubSystemId; char busId[32]; } pci_t;
typedef struct { int calls; } fake_set;
static fake_set g_set;

static int idx(void *d) {
    for (int i = 0; i < NDEV; i++)
        if (d == &g_dev[i]) return i;
    return -1;
}

nvmlReturn_t nvmlInit_v2(void) { return OK; }
nvmlReturn_t nvmlShutdown(void) { return OK; }
const char *nvmlErrorString(nvmlReturn_t r) {
    return r == GPU_IS_LOST ? "GPU is lost" : r == NOT_SUPPORTED ? "Not Supported" : r == TIMEOUT ? "Timeout" : "Unknown Error";
}
nvmlReturn_t nvmlSystemGetDriverVersion(char *b, unsigned n) { strncpy(b, "999.99.99-fake", n); return OK; }
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned *c) { *c = NDEV; return OK; }
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned i, void **d) {
    if (i >= NDEV) return INVALID_ARGUMENT;
    *d = &g_dev[i];
    return OK;
}
nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *b, void **d) {
    /* NVML accepts the short form too; health/nvml.c passes "0000:3b:00.0". */
    for (int i = 0; i < NDEV; i++)
        if (!strcasecmp(b, g_bus[i]) || !strcasecmp(b, g_bus[i] + 4)) { *d = &g_dev[i]; return OK; }
    return NOT_FOUND;
}
nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *u, void **d) {
    for (int i = 0; i < NDEV; i++)
        if (!strcmp(u, g_uuid[i])) { *d = &g_dev[i]; return OK; }
    return NOT_FOUND;
}
nvmlReturn_t nvmlDeviceGetUUID(void *d, char *b, unsigned n) { strncpy(b, g_uuid[idx(d)], n); return OK; }
nvmlReturn_t nvmlDeviceGetName(void *d, char *b, unsigned n) { (void)d; strncpy(b, "Fake H200", n); return OK; }
nvmlReturn_t nvmlDeviceGetPciInfo_v3(void *d, pci_t *p) {
    memset(p, 0, sizeof *p);
    strcpy(p->busId, g_bus[idx(d)]);
    return OK;
}
#ifdef FAKE_NVML_STEADY
static const unsigned k_util[3][2] = {{94, 80}, {44, 40}, {10, 10}}, k_mem_mib[3][2] = {{3000, 2000}, {1500, 1000}, {100, 100}};
static const unsigned k_temp[3] = {51, NA, 0}, k_power_mw[3] = {231500, 118250, 50000}, k_sm_mhz[3] = {1980, 1755, 1500};
static unsigned g_util_calls[3], g_mem_calls[3];
nvmlReturn_t nvmlDeviceGetUtilizationRates(void *d, util_t *u) {
    u->gpu = k_util[idx(d)][g_util_calls[idx(d)]++ % 2];
    u->memory = 5;
    return OK;
}
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(void *d, mem2_t *m) {
    if (m->version != MEM2_VERSION) return VERSION_MISMATCH;
    m->total = 81559ULL << 20;
    m->reserved = RESERVED;
    m->used = (unsigned long long)k_mem_mib[idx(d)][g_mem_calls[idx(d)]++ % 2] << 20;
    m->free = m->total - m->used - m->reserved;
    return OK;
}
nvmlReturn_t nvmlDeviceGetMemoryInfo(void *d, mem_t *m) { /* v1 counts the reserved memory as used */
    m->total = 81559ULL << 20;
    m->used = ((unsigned long long)k_mem_mib[idx(d)][g_mem_calls[idx(d)]++ % 2] << 20) + RESERVED;
    m->free = m->total - m->used;
    return OK;
}
nvmlReturn_t nvmlDeviceGetTemperature(void *d, int s, unsigned *t) {
    (void)s;
    if (idx(d) == 2) return GPU_IS_LOST;
    *t = k_temp[idx(d)];
    return OK;
}
nvmlReturn_t nvmlDeviceGetPowerUsage(void *d, unsigned *p) { *p = k_power_mw[idx(d)]; return OK; }
nvmlReturn_t nvmlDeviceGetClockInfo(void *d, int t, unsigned *c) { (void)t; *c = k_sm_mhz[idx(d)]; return OK; }
nvmlReturn_t nvmlDeviceGetTotalEccErrors(void *d, int a, int b, unsigned long long *c) { (void)d; (void)a; (void)b; (void)c; return NOT_SUPPORTED; }
nvmlReturn_t nvmlDeviceGetRemappedRows(void *d, unsigned *c, unsigned *u, unsigned *p, unsigned *f) {
    (void)d; (void)c; (void)u; (void)p; (void)f;
    return NOT_SUPPORTED;
}
#elif defined(FAKE_NVML_SENTINEL)
nvmlReturn_t nvmlDeviceGetUtilizationRates(void *d, util_t *u) { (void)d; u->gpu = NA; u->memory = NA; return OK; }
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(void *d, mem2_t *m) {
    (void)d;
    if (m->version != MEM2_VERSION) return VERSION_MISMATCH;
    m->total = m->reserved = m->free = m->used = NA64;
    return OK;
}
nvmlReturn_t nvmlDeviceGetMemoryInfo(void *d, mem_t *m) { (void)d; m->total = m->free = m->used = NA64; return OK; }
nvmlReturn_t nvmlDeviceGetTemperature(void *d, int s, unsigned *t) { (void)d; (void)s; *t = NA; return OK; }
nvmlReturn_t nvmlDeviceGetPowerUsage(void *d, unsigned *p) { (void)d; *p = NA; return OK; }
nvmlReturn_t nvmlDeviceGetClockInfo(void *d, int t, unsigned *c) { (void)d; (void)t; *c = NA; return OK; }
nvmlReturn_t nvmlDeviceGetTotalEccErrors(void *d, int a, int b, unsigned long long *c) { (void)d; (void)a; (void)b; *c = NA64; return OK; }
nvmlReturn_t nvmlDeviceGetRemappedRows(void *d, unsigned *c, unsigned *u, unsigned *p, unsigned *f) {
    (void)d;
    *c = *u = *p = *f = NA;
    return OK;
}
#else
nvmlReturn_t nvmlDeviceGetUtilizationRates(void *d, util_t *u) { u->gpu = idx(d) ? NA : 37; u->memory = 5; return OK; }
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(void *d, mem2_t *m) {
    (void)d;
    if (m->version != MEM2_VERSION) return VERSION_MISMATCH;
    m->total = 81559ULL << 20;
    m->reserved = RESERVED;
    m->used = 1024ULL << 20;
    m->free = m->total - m->used - m->reserved;
    return OK;
}
nvmlReturn_t nvmlDeviceGetMemoryInfo(void *d, mem_t *m) { /* v1 counts the reserved memory as used */
    (void)d;
    m->total = 81559ULL << 20;
    m->used = (1024ULL << 20) + RESERVED;
    m->free = m->total - m->used;
    return OK;
}
nvmlReturn_t nvmlDeviceGetTemperature(void *d, int s, unsigned *t) { (void)s; if (idx(d)) return GPU_IS_LOST; *t = 45; return OK; }
nvmlReturn_t nvmlDeviceGetPowerUsage(void *d, unsigned *p) { (void)d; *p = NA; return OK; }
nvmlReturn_t nvmlDeviceGetClockInfo(void *d, int t, unsigned *c) { (void)d; (void)t; (void)c; return NOT_SUPPORTED; }
nvmlReturn_t nvmlDeviceGetTotalEccErrors(void *d, int a, int b, unsigned long long *c) { (void)d; (void)a; (void)b; (void)c; return NOT_SUPPORTED; }
nvmlReturn_t nvmlDeviceGetRemappedRows(void *d, unsigned *c, unsigned *u, unsigned *p, unsigned *f) {
    (void)d;
    *c = 2; *u = 0; *p = 1; *f = 0;
    return OK;
}
#endif
nvmlReturn_t nvmlEventSetCreate(void **s) { g_set.calls = 0; *s = &g_set; return OK; }
nvmlReturn_t nvmlDeviceRegisterEvents(void *d, unsigned long long types, void *s) {
    (void)s;
    return idx(d) >= 0 && types == 8 ? OK : INVALID_ARGUMENT; /* nvmlEventTypeXidCriticalError */
}
nvmlReturn_t nvmlEventSetWait_v2(void *s, event_t *e, unsigned ms) {
#ifdef FAKE_NVML_STEADY
    (void)s;
    (void)e;
    struct timespec wait = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    nanosleep(&wait, NULL);
    return TIMEOUT; /* a healthy GPU: no Xid */
#else
    fake_set *fs = s;
    int call = ++fs->calls;
    if (call == 1) {
        e->device = &g_dev[0];
        e->eventType = 8;
        e->eventData = 79;
        e->gpuInstanceId = NA;
        e->computeInstanceId = NA;
        return OK;
    }
    if (call <= 4) {
        struct timespec ts = {0, (long)(ms < 10 ? ms : 10) * 1000000L};
        nanosleep(&ts, NULL);
        return TIMEOUT;
    }
    return GPU_IS_LOST;
#endif
}
nvmlReturn_t nvmlEventSetFree(void *s) { (void)s; return OK; }
