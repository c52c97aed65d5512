/* The worker's GPU-health monitor (docs/health.md): one monitor thread per rank on a GPU (or on the CPU
 * when an injection source is set), ODL_FAULT's xidNN injection at a step, findings checked at each
 * step boundary, telemetry for the epoch line and the JSONL metrics. */
#ifndef ODL_WORKER_HEALTH_MONITOR_H
#define ODL_WORKER_HEALTH_MONITOR_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "odl/fault.h"
#include "odl/health.h"
#include "odl/tensor.h"

typedef struct odl_worker_health {
    odl_health_monitor *mon; /* NULL: not monitoring */
    odl_fault_plan faults; /* ODL_FAULT's xid faults (several: each fires once, at its own step) */
    int have_fault;
    uint32_t faults_done;  /* bit i: faults.f[i] injected by this process */
    odl_pci_id pci;
    int rank;
    int nvml; /* telemetry expected */
} odl_worker_health;

/* Start monitoring for this rank's device. On a GPU: /dev/kmsg (or ODL_HEALTH_KMSG) and NVML; on the
 * CPU only when ODL_HEALTH_KMSG or an ODL_FAULT xid fault is set. ODL_HEALTH=off: nothing.
 * Errors: ODL_E_CONFIG (malformed ODL_FAULT xid fault or Xid table), ODL_E_IO (ODL_HEALTH_KMSG). */
odl_status odl_worker_health_start(odl_worker_health *h, odl_device dev, int rank);
/* At a step boundary (after `step` steps): inject the ODL_FAULT xid faults due, log the findings
 * since the last call, and fail for an application or node-fatal one (ODL_E_NODEV, the message names
 * the Xid, GPU, class and step) so that the job stops there. */
odl_status odl_worker_health_step(odl_worker_health *h, int64_t step);
/* The telemetry window since the last call (then reset): " gpu_util 85% peak_mem 1234 MiB" for the
 * epoch line, and the JSONL fields {"gpu_util_mean": percent, "gpu_mem_peak_mib": MiB} (null for a
 * reading NVML could not give) as a new jansson object. Without telemetry: "" and NULL. */
json_t *odl_worker_health_epoch(odl_worker_health *h, char *log_text, size_t log_cap);
void odl_worker_health_stop(odl_worker_health *h);

#endif
