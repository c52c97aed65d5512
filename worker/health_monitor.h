/* The worker's GPU-health monitor (docs/health.md): one monitor thread per rank on a GPU (or on the CPU
 * when ODL_HEALTH_GPU names one or an injection source is set), ODL_FAULT's xidNN injection at a step,
 * findings checked at each step boundary, telemetry for the epoch line and the JSONL metrics. */
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
    struct odl_coord_client *coord; /* supervised: Xids and telemetry reported to it; NULL: none */
} odl_worker_health;

/* The identity of the GPU a rank watches, as its Hello carries it (the labels of /metrics). */
typedef struct odl_worker_gpu_id {
    char pci[32];    /* canonical bus id, "0000:3b:00.0" (odl_pci_format) */
    char uuid[64];   /* NVML's UUID; "" without NVML */
    char model[96];  /* NVML's name ("NVIDIA H200"); "" without NVML */
    int nvml_index;  /* NVML's index on its node (dcgm-exporter's gpu label); -1 without NVML */
} odl_worker_gpu_id;
/* The GPU this rank watches and names in its Hello: on a CUDA device that device; on the CPU entry
 * local_rank % n of ODL_HEALTH_GPU (n comma-separated PCI bus ids or UUIDs), else none.
 * Returns 1 with a GPU (*id filled), 0 without; ODL_E_CONFIG / ODL_E_FORMAT for a bad ODL_HEALTH_GPU
 * entry, an NVML error for a UUID NVML cannot resolve, ODL_E_CUDA for the CUDA device's bus id. */
int odl_worker_health_gpu(odl_device dev, int local_rank, odl_worker_gpu_id *id);
/* Start monitoring for this rank: with a GPU (odl_worker_health_gpu) /dev/kmsg (or ODL_HEALTH_KMSG) and
 * NVML; without one only when ODL_HEALTH_KMSG or an ODL_FAULT xid fault is set. ODL_HEALTH=off: nothing.
 * coord (NULL: unsupervised): the coordinator client the findings and telemetry go to, which must
 * outlive h; without it a finding stops the run.
 * Errors: ODL_E_CONFIG (malformed ODL_FAULT xid fault, Xid table or ODL_HEALTH_GPU), ODL_E_IO
 * (ODL_HEALTH_KMSG). */
odl_status odl_worker_health_start(odl_worker_health *h, odl_device dev, int rank, int local_rank,
                                   struct odl_coord_client *coord);
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
