/* A stand-in libnvidia-ml for tests on machines without a driver (loaded through ODL_NVML_LIBRARY):
 * the NVML entry points health/nvml.c uses, with fixed answers that cover a reading, NVML's
 * 0xFFFFFFFF "not available", NVML_ERROR_NOT_SUPPORTED, an NVML error (GPU is lost) and the event
 * API (one Xid 79, then time-outs, then GPU is lost). Signatures and codes as in nvml.h. */
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

typedef struct fake_dev { int index; } fake_dev;
static fake_dev g_dev[2] = {{0}, {1}};
static const char *g_bus[2] = {"00000000:3B:00.0", "00000000:5E:00.0"};
typedef struct { unsigned gpu, memory; } util_t;
typedef struct { unsigned long long total, free, used; } mem_t;
typedef struct { void *device; unsigned long long eventType, eventData; unsigned gpuInstanceId, computeInstanceId; } event_t;
typedef struct { char busIdLegacy[16]; unsigned domain, bus, device, pciDeviceId, pciSubSystemId; char busId[32]; } pci_t;
typedef struct { int calls; } fake_set;
static fake_set g_set;

static int idx(void *d) { return d == &g_dev[0] ? 0 : d == &g_dev[1] ? 1 : -1; }

nvmlReturn_t nvmlInit_v2(void) { return OK; }
nvmlReturn_t nvmlShutdown(void) { return OK; }
const char *nvmlErrorString(nvmlReturn_t r) {
    return r == GPU_IS_LOST ? "GPU is lost" : r == NOT_SUPPORTED ? "Not Supported" : r == TIMEOUT ? "Timeout" : "Unknown Error";
}
nvmlReturn_t nvmlSystemGetDriverVersion(char *b, unsigned n) { strncpy(b, "999.99.99-fake", n); return OK; }
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned *c) { *c = 2; return OK; }
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned i, void **d) {
    if (i > 1) return INVALID_ARGUMENT;
    *d = &g_dev[i];
    return OK;
}
nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *b, void **d) {
    /* NVML accepts the short form too; health/nvml.c passes "0000:3b:00.0". */
    for (int i = 0; i < 2; i++)
        if (!strcasecmp(b, g_bus[i]) || !strcasecmp(b, g_bus[i] + 4)) { *d = &g_dev[i]; return OK; }
    return NOT_FOUND;
}
nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *u, void **d) {
    if (!strcmp(u, "GPU-fake-0")) { *d = &g_dev[0]; return OK; }
    if (!strcmp(u, "GPU-fake-1")) { *d = &g_dev[1]; return OK; }
    return NOT_FOUND;
}
nvmlReturn_t nvmlDeviceGetUUID(void *d, char *b, unsigned n) { strncpy(b, idx(d) ? "GPU-fake-1" : "GPU-fake-0", n); return OK; }
nvmlReturn_t nvmlDeviceGetName(void *d, char *b, unsigned n) { (void)d; strncpy(b, "Fake H200", n); return OK; }
nvmlReturn_t nvmlDeviceGetPciInfo_v3(void *d, pci_t *p) {
    memset(p, 0, sizeof *p);
    strcpy(p->busId, g_bus[idx(d)]);
    return OK;
}
nvmlReturn_t nvmlDeviceGetUtilizationRates(void *d, util_t *u) { u->gpu = idx(d) ? NA : 37; u->memory = 5; return OK; }
nvmlReturn_t nvmlDeviceGetMemoryInfo(void *d, mem_t *m) {
    (void)d;
    m->total = 81559ULL << 20;
    m->used = 1024ULL << 20;
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
nvmlReturn_t nvmlEventSetCreate(void **s) { g_set.calls = 0; *s = &g_set; return OK; }
nvmlReturn_t nvmlDeviceRegisterEvents(void *d, unsigned long long types, void *s) {
    (void)s;
    return idx(d) >= 0 && types == 8 ? OK : INVALID_ARGUMENT; /* nvmlEventTypeXidCriticalError */
}
nvmlReturn_t nvmlEventSetWait_v2(void *s, event_t *e, unsigned ms) {
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
}
nvmlReturn_t nvmlEventSetFree(void *s) { (void)s; return OK; }
