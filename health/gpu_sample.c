/* A GPU's readings between the monitor, the wire and /metrics (odl/health.h: odl_gpu_sample). */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "odl/health.h"

/* Each field of a sample and the field of a reading it is (the one place that pairs them). */
#define PAIR(s, t) {offsetof(odl_gpu_sample, s), offsetof(odl_gpu_telemetry, t)}
static const struct {
    size_t sample, telemetry;
} k_fields[] = {
    PAIR(util_pct, util_gpu_pct), PAIR(mem_used_mib, mem_used_mib), PAIR(mem_total_mib, mem_total_mib),
    PAIR(temp_c, temp_c),         PAIR(power_w, power_w),           PAIR(sm_clock_mhz, sm_clock_mhz),
};
#define N_FIELDS (sizeof k_fields / sizeof k_fields[0])

static double *in_sample(odl_gpu_sample *s, size_t i) {
    return (double *)((char *)s + k_fields[i].sample);
}
static double *in_telemetry(odl_gpu_telemetry *t, size_t i) {
    return (double *)((char *)t + k_fields[i].telemetry);
}

void odl_gpu_telemetry_clear(odl_gpu_telemetry *t) {
    memset(t, 0, sizeof *t);
    for (size_t i = 0; i < N_FIELDS; i++) *in_telemetry(t, i) = ODL_HEALTH_NA;
    t->ecc_corrected = t->ecc_uncorrected = ODL_HEALTH_NA;
    t->remap_corrected = t->remap_uncorrected = t->remap_pending = t->remap_failed = ODL_HEALTH_NA;
    t->healthy = 1;
}

void odl_gpu_sample_of(const odl_gpu_telemetry *t, odl_gpu_sample *s) {
    for (size_t i = 0; i < N_FIELDS; i++) *in_sample(s, i) = *in_telemetry((odl_gpu_telemetry *)t, i);
}

void odl_gpu_sample_apply(const odl_gpu_sample *s, odl_gpu_telemetry *t) {
    for (size_t i = 0; i < N_FIELDS; i++) *in_telemetry(t, i) = *in_sample((odl_gpu_sample *)s, i);
}

void odl_gpu_sample_clean(odl_gpu_sample *s) {
    for (size_t i = 0; i < N_FIELDS; i++) {
        double *v = in_sample(s, i);
        if (!isfinite(*v) || *v < 0) *v = ODL_HEALTH_NA;
    }
}
