/* GPU health: kernel-log Xid parsing and classification, NVML telemetry and Xid events (through
 * dlopen, so nothing links against the driver), a monitor thread for the worker, and the persistent
 * fence list of a job with its hostfile / srun --exclude / scontrol drain helpers.
 *
 * Layer: comm (uses core only). Policy and sources of the Xid classes: docs/health.md. Every function
 * that can fail returns an odl_status with a message (odl/status.h); none exits.
 */
#ifndef ODL_HEALTH_H
#define ODL_HEALTH_H

#include <stddef.h>
#include <stdint.h>

#include "odl/api.h"
#include "odl/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- PCI bus ids ---- */

/* One GPU's PCI address. The kernel log prints "PCI:0000:3b:00" (domain 4 hex digits, no function);
 * NVML prints "00000000:3B:00.0" (domain 8 digits, upper case): both parse to the same value. */
typedef struct odl_pci_id {
    uint32_t domain;
    uint8_t bus, device, function;
    uint8_t valid; /* 0: unknown (a line that names no GPU) */
} odl_pci_id;

#define ODL_PCI_STR_LEN 16 /* "0000:3b:00.0" plus NUL */

/* Parse "[PCI:]DDDD[DDDD]:BB:DD[.F]" or "BB:DD[.F]" (domain 0), any case. Returns ODL_E_FORMAT with
 * the text on anything else. */
ODL_API odl_status odl_pci_parse(const char *s, odl_pci_id *out);
/* Canonical "dddd:bb:dd.f" (lower case; the form lspci and sysfs use). Returns buf. */
ODL_API char *odl_pci_format(const odl_pci_id *id, char buf[ODL_PCI_STR_LEN]);
/* 1 when a and b name the same GPU (both valid, equal address). */
ODL_API int odl_pci_eq(const odl_pci_id *a, const odl_pci_id *b);

/* ---- kernel-log records ---- */

/* Xid code of a "GPU has fallen off the bus" line that carries no Xid token (no real Xid is 0). */
#define ODL_XID_BUS_LOST 0

typedef struct odl_xid_record {
    int xid;                /* Xid code, or ODL_XID_BUS_LOST */
    odl_pci_id pci;         /* the GPU the driver names */
    int gpu_instance;       /* MIG GPU-I of the line, -1 when it has none */
    int compute_instance;   /* MIG GPU-CI of the line, -1 when it has none */
    int pid;                /* process the driver names, -1 when '<unknown>' or absent */
    char name[64];          /* process name, "" when unknown or absent */
    int64_t ts_us;          /* boot-relative time in microseconds (dmesg "[secs]" or the kmsg field), -1 unknown */
    char text[192];         /* the driver's message after the code (and pid/name) */
} odl_xid_record;

/* Parse one kernel-log line: a plain message, a dmesg line with or without a "[ 1234.567890]"
 * timestamp, a syslog/journal line ("... kernel: [..] NVRM: ..."), or a /dev/kmsg record
 * ("6,1234,5678901234,-;NVRM: ..."). Recognised messages:
 *   NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python3, GPU has fallen off the bus.
 *   NVRM: Xid (PCI:0000:3b:00 GPU-I:01 GPU-CI:02): 13, pid='<unknown>', name=<unknown>, ...   (MIG)
 *   NVRM: Xid (0000:3b:00): 13, 0001 00000000 ...                                            (old drivers)
 *   NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.    NVRM: GPU at PCI:0000:3b:00.0 has fallen off the bus.
 * (formats from NVIDIA's open kernel modules' printf, src/nvidia/src/kernel/gpu/rc; NVIDIA's A100
 * memory-error guide for the MIG form). Returns 1 and fills *out for a recognised line, 0 for any other
 * line (never fails: a log is untrusted text). */
ODL_API int odl_xid_parse_line(const char *line, odl_xid_record *out);

/* ---- classification ---- */

typedef enum odl_xid_class {
    ODL_XID_IGNORE = 0,      /* counted and printed, no action */
    ODL_XID_APPLICATION = 1, /* the job's fault: restart without fencing; repeats escalate */
    ODL_XID_NODE_FATAL = 2,  /* the node's fault: fence it */
} odl_xid_class;

#define ODL_XID_TABLE_SIZE 512

typedef struct odl_xid_table {
    uint8_t cls[ODL_XID_TABLE_SIZE];     /* odl_xid_class per code (index ODL_XID_BUS_LOST: bus lost) */
    uint8_t follows[ODL_XID_TABLE_SIZE]; /* 1: the code follows another error on the same GPU and is
                                          * attributed to it (Xid 45: channels torn down after it) */
    uint8_t unknown_cls;                 /* class of codes not in the table and >= ODL_XID_TABLE_SIZE */
    int escalate_after;                  /* application incidents on one node that escalate; 0 = never */
    double escalate_window_s;            /* ... counted within this window (log time); <= 0: all */
    double incident_window_s;            /* one process's application findings within this many seconds of
                                          * its incident's first are that incident (a crash prints Xid 13
                                          * twice and then 43): counted once; <= 0: every finding counts */
} odl_xid_table;

/* The project's defaults (docs/health.md, with the source of each choice). */
ODL_API void odl_xid_table_defaults(odl_xid_table *t);
/* Override entries from a YAML file (libyaml):
 *   node_fatal: [48, 62, 79, "144-150", bus_lost]   application: [13, 31]   ignore: [63, 92]
 *   follows: [45]   unknown: application   escalate_after: 3   escalate_window_s: 3600   incident_window_s: 10
 * Codes may be numbers, "A-B" ranges or bus_lost; a key replaces nothing but the codes it lists.
 * Errors: ODL_E_IO (cannot open), ODL_E_FORMAT (malformed YAML, unknown key, bad code, with line). */
ODL_API odl_status odl_xid_table_load_yaml(odl_xid_table *t, const char *path);
ODL_API odl_status odl_xid_table_load_yaml_string(odl_xid_table *t, const char *text, size_t len, const char *name);
/* "ignore", "application", "node-fatal". */
ODL_API const char *odl_xid_class_name(odl_xid_class c);
/* An Xid code as findings, messages and /metrics labels print it: "79", or "bus_lost" for
 * ODL_XID_BUS_LOST. Returns buf. */
ODL_API const char *odl_xid_code_str(int xid, char buf[16]);

/* A classified record. */
typedef struct odl_health_finding {
    odl_xid_record rec;
    odl_xid_class cls;
    int attributed_to; /* the Xid a 'follows' code (or a bus-lost line after Xid 79) belongs to, else -1 */
    int escalated;     /* 1: an application Xid made node-fatal by repetition */
    int app_count;     /* application findings on this node within the window, this one included */
} odl_health_finding;

#define ODL_XID_HISTORY 64

/* Classification state of one node (or one GPU's monitor). Plain data: zero it, then
 * odl_xid_classifier_init. */
typedef struct odl_xid_classifier {
    odl_xid_table table;
    int64_t since_us; /* records with a known time before this (boot-relative us) are ignored; 0 = all */
    odl_pci_id only;  /* when valid: only this GPU's records count */
    int only_gi;      /* >= 0: records of another MIG GPU instance are ignored */
    struct {
        odl_pci_id pci;
        int xid;
    } last[16]; /* last non-'follows' code per GPU */
    int n_last;
    int64_t app_ts[ODL_XID_HISTORY]; /* times of application incidents (-1 unknown), a ring */
    int64_t app_pid[ODL_XID_HISTORY]; /* ... the process of each (-1 unknown) */
    int app_xid[ODL_XID_HISTORY];     /* ... and its first code */
    int n_app;
} odl_xid_classifier;

ODL_API void odl_xid_classifier_init(odl_xid_classifier *c, const odl_xid_table *t);
/* Classify one record. Returns 1 with *out filled, 0 when the record is ignored (another GPU, another
 * MIG instance, older than since_us). A 'follows' code (45) with a predecessor on that GPU, and a
 * bus-lost line after Xid 79, take the predecessor's class and name it in attributed_to: they belong to
 * an error already reported, so a consumer acts on findings with attributed_to < 0 only. Without a
 * predecessor a 'follows' code is classified by its own entry. Only application incidents count
 * toward escalation (escalate_after within escalate_window_s of log time; unknown times always count):
 * an application finding of the process (pid) of a counted incident within incident_window_s of that
 * incident's first line is part of it, attributed to its first code (attributed_to) and not counted;
 * a line without pid is an incident of its own. */
ODL_API int odl_xid_classify(odl_xid_classifier *c, const odl_xid_record *rec, odl_health_finding *out);
/* One line "xid=79 pci=0000:3b:00.0 class=node-fatal ..." (no newline) into buf. Returns buf. */
ODL_API char *odl_health_finding_format(const odl_health_finding *f, char *buf, size_t cap);

/* ---- kernel-log reader ---- */

typedef struct odl_kmsg_reader odl_kmsg_reader;
/* Open a kernel log: /dev/kmsg (one record per read, non-blocking) or a file (dmesg output, or a file
 * that a test or ODL_FAULT appends to). follow = 1: end of file means "nothing yet" and a partial last
 * line waits for its newline; follow = 0: the end of the file ends the log. Errors: ODL_E_IO. */
ODL_API odl_status odl_kmsg_open(const char *path, int follow, odl_kmsg_reader **out);
/* Next line into buf (NUL-terminated, no newline). Returns 1 for a line, 0 when none is there now
 * (follow) or the log ended (no follow), or ODL_E_IO. A line longer than cap is cut. */
ODL_API int odl_kmsg_read_line(odl_kmsg_reader *r, char *buf, size_t cap);
ODL_API void odl_kmsg_close(odl_kmsg_reader *r);
/* Boot-relative time now in microseconds, the clock of kmsg and dmesg timestamps (CLOCK_MONOTONIC,
 * which the kernel's printk clock follows on machines that do not suspend). */
ODL_API int64_t odl_kmsg_now_us(void);

/* ---- NVML (dlopen) ---- */

/* A reading NVML could not give (not supported, its "not available" value, error) is ODL_HEALTH_NA,
 * never a number. */
#define ODL_HEALTH_NA (-1.0)

/* The readings of odl_gpu_telemetry, one bit each in its not_available mask. */
typedef enum odl_gpu_reading {
    ODL_GPU_READING_UTIL = 1u << 0,
    ODL_GPU_READING_MEM_USED = 1u << 1,
    ODL_GPU_READING_MEM_TOTAL = 1u << 2,
    ODL_GPU_READING_TEMP = 1u << 3,
    ODL_GPU_READING_POWER = 1u << 4,
    ODL_GPU_READING_SM_CLOCK = 1u << 5,
    ODL_GPU_READING_ECC_CORRECTED = 1u << 6,
    ODL_GPU_READING_ECC_UNCORRECTED = 1u << 7,
    ODL_GPU_READING_REMAP_CORRECTED = 1u << 8,
    ODL_GPU_READING_REMAP_UNCORRECTED = 1u << 9,
    ODL_GPU_READING_REMAP_PENDING = 1u << 10,
    ODL_GPU_READING_REMAP_FAILED = 1u << 11,
} odl_gpu_reading;

typedef struct odl_gpu_telemetry {
    char pci[ODL_PCI_STR_LEN];
    char uuid[96];
    char name[96];
    int have_index;          /* index below is known (else the gpu label is the entry's position in t) */
    int index;               /* NVML's index of the GPU on its node: the gpu label, as dcgm-exporter's */
    char hostname[64];       /* the Hostname label when odl_health_prometheus gets host NULL (a coordinator's
                                view of many nodes) */
    double util_gpu_pct;     /* nvmlDeviceGetUtilizationRates .gpu, percent */
    double mem_used_mib;     /* nvmlDeviceGetMemoryInfo, MiB (1024*1024 bytes, as nvidia-smi) */
    double mem_total_mib;
    double temp_c;           /* nvmlDeviceGetTemperature(NVML_TEMPERATURE_GPU), Celsius */
    double power_w;          /* nvmlDeviceGetPowerUsage, watts */
    double sm_clock_mhz;     /* nvmlDeviceGetClockInfo(NVML_CLOCK_SM), MHz */
    double ecc_corrected;    /* volatile ECC counts (since driver load) */
    double ecc_uncorrected;
    double remap_corrected;  /* nvmlDeviceGetRemappedRows: rows remapped for corrected / uncorrected errors */
    double remap_uncorrected;
    double remap_pending;    /* 1 when a remap waits for a GPU reset */
    double remap_failed;     /* 1 when a remap failed (node-fatal in practice, Xid 64) */
    int healthy;             /* 0 when an NVML call failed with anything but "not supported" */
    unsigned not_available;  /* ODL_GPU_READING_* bits: readings whose call succeeded but gave NVML's
                                "not available" value (NVML_VALUE_NOT_AVAILABLE, -1 in the field's type:
                                0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF); ODL_HEALTH_NA like the others, but a
                                verdict that rests on them is unknown, not healthy */
    char error[160];         /* the NVML error that made it unhealthy */
} odl_gpu_telemetry;

/* Every reading of t ODL_HEALTH_NA, healthy, no names (the start of a reading, or of a GPU only known by
 * name). */
ODL_API void odl_gpu_telemetry_clear(odl_gpu_telemetry *t);

/* One GPU's readings as a rank sends them with its heartbeats (odl/coord_client.h) and the coordinator
 * keeps them per rank: the first six of odl_gpu_telemetry, with its one encoding of "not available",
 * ODL_HEALTH_NA, on the wire too. */
typedef struct odl_gpu_sample {
    double util_pct, mem_used_mib, mem_total_mib, temp_c, power_w, sm_clock_mhz;
} odl_gpu_sample;
/* The sample of a reading. */
ODL_API void odl_gpu_sample_of(const odl_gpu_telemetry *t, odl_gpu_sample *s);
/* Put s's readings into t's six fields (the rest of t as it is). */
ODL_API void odl_gpu_sample_apply(const odl_gpu_sample *s, odl_gpu_telemetry *t);
/* What came from a peer: a value that is no reading (NaN, infinite, negative) becomes ODL_HEALTH_NA. */
ODL_API void odl_gpu_sample_clean(odl_gpu_sample *s);

typedef struct odl_nvml odl_nvml;
/* dlopen libnvidia-ml.so.1 (or ODL_NVML_LIBRARY) and nvmlInit_v2. Errors: ODL_E_UNSUPPORTED with
 * "NVML not available: <dlerror>" where no driver is installed; ODL_E_NODEV when nvmlInit fails. */
ODL_API odl_status odl_nvml_open(odl_nvml **out);
ODL_API void odl_nvml_close(odl_nvml *n);
/* Number of GPUs NVML sees, and the driver version string. */
ODL_API odl_status odl_nvml_device_count(odl_nvml *n, int *count);
ODL_API odl_status odl_nvml_driver_version(odl_nvml *n, char *buf, size_t cap);
/* Device index by PCI bus id (any form odl_pci_parse takes) or by UUID ("GPU-..."). ODL_E_NOTFOUND. */
ODL_API odl_status odl_nvml_find(odl_nvml *n, const char *pci_or_uuid, int *index);
/* One reading of device `index` (unavailable readings are ODL_HEALTH_NA). Fails only for a bad index;
 * an NVML error on a reading sets healthy = 0 and error instead. */
ODL_API odl_status odl_nvml_read(odl_nvml *n, int index, odl_gpu_telemetry *out);

/* Xid events of a set of devices (nvmlDeviceRegisterEvents with nvmlEventTypeXidCriticalError). */
typedef struct odl_nvml_events odl_nvml_events;
ODL_API odl_status odl_nvml_events_open(odl_nvml *n, const int *indices, int count, odl_nvml_events **out);
/* Wait up to timeout_ms (nvmlEventSetWait_v2). Returns 1 with *rec filled (xid, pci, MIG GPU-I/CI when
 * NVML gives them, ts_us now), 0 on a time-out, or ODL_E_NODEV for any other NVML error (the GPU is to
 * be treated as unhealthy; the message names the error). */
ODL_API int odl_nvml_events_wait(odl_nvml_events *e, unsigned timeout_ms, odl_xid_record *rec);
ODL_API void odl_nvml_events_close(odl_nvml_events *e);

/* ---- Prometheus text (the coordinator's /metrics, node_exporter's textfile collector) ---- */

typedef struct odl_xid_count {
    int gpu;        /* index into the telemetry array */
    int xid;        /* Xid code (ODL_XID_BUS_LOST: bus_lost) */
    odl_xid_class cls;
    uint64_t count; /* findings so far */
} odl_xid_count;

/* Render n GPUs' telemetry and Xid counters in the Prometheus text format 0.0.4 into buf (always
 * NUL-terminated). Names and labels follow dcgm-exporter where they overlap (DCGM_FI_DEV_GPU_UTIL,
 * DCGM_FI_DEV_FB_USED, DCGM_FI_DEV_FB_TOTAL (MiB), DCGM_FI_DEV_GPU_TEMP, DCGM_FI_DEV_POWER_USAGE (W),
 * DCGM_FI_DEV_SM_CLOCK, DCGM_FI_DEV_ECC_SBE_VOL_TOTAL, DCGM_FI_DEV_ECC_DBE_VOL_TOTAL,
 * DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS, DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS,
 * DCGM_FI_DEV_ROW_REMAP_FAILURE; labels gpu (t[i].index when have_index, else i), UUID, pci_bus_id, modelName, Hostname); Xids are a
 * counter per code, odl_gpu_xid_errors_total{...,xid="79",class="node-fatal"}, not dcgm-exporter's
 * "last Xid" gauge; odl_gpu_healthy is 1/0. An unavailable reading has no sample. Returns the length
 * the whole text needs (as snprintf), so a caller can retry with a larger buffer. */
struct odl_strbuf;
/* The same text appended to b (odl/strbuf.h), for a caller that builds more around it. */
ODL_API void odl_health_prometheus_append(struct odl_strbuf *b, const odl_gpu_telemetry *t, int n, const char *hostname,
                                          const odl_xid_count *xids, int n_xids);
ODL_API size_t odl_health_prometheus(char *buf, size_t cap, const odl_gpu_telemetry *t, int n, const char *hostname,
                             const odl_xid_count *xids, int n_xids);

/* ---- ODL_FAULT xidNN shorthand ---- */

typedef struct odl_fault_xid {
    int xid;
    int rank; /* -1: any rank */
    int64_t step;
} odl_fault_xid;

/* Find the first "xidNN@rank=R,step=S" fault in an ODL_FAULT value, parsed by the one ODL_FAULT
 * parser (odl_fault_parse, odl/fault.h; faults separated by ';', other kinds are fired by comm/).
 * Returns 1 when found, 0 when the value has no xid fault, ODL_E_CONFIG when any entry is malformed. */
ODL_API int odl_fault_xid_parse(const char *spec, odl_fault_xid *out);
/* The kernel-log line an injected fault appends: it goes through the same parser and classifier. */
ODL_API void odl_fault_xid_line(const odl_fault_xid *f, const odl_pci_id *pci, char *buf, size_t cap);

/* ---- monitor thread ---- */

typedef struct odl_health_monitor_opts {
    const char *pci_bus_id;  /* this rank's GPU (any form), or NULL on the CPU */
    int mig_gpu_instance;    /* -1: not a MIG instance */
    const char *kmsg_path;   /* kernel log to follow: "/dev/kmsg", an injection file, or NULL = none */
    int use_nvml;            /* 1: NVML telemetry and Xid events for pci_bus_id */
    int64_t since_us;        /* ignore kernel-log lines before this boot-relative time (0: all) */
    int telemetry_ms;        /* telemetry period; <= 0: ODL_HEALTH_TELEMETRY_MS_DEFAULT */
    const odl_xid_table *table; /* NULL: defaults */
    /* Called on the monitor thread for each finding (may be NULL; findings are also queued). */
    void (*on_finding)(void *ctx, const odl_health_finding *f);
    void *ctx;
} odl_health_monitor_opts;

#define ODL_HEALTH_TELEMETRY_MS_DEFAULT 5000

typedef struct odl_health_monitor odl_health_monitor;
/* Start the thread. Nothing *o points to is kept (the bus id is parsed, the table copied, the kernel
 * log opened here), so o and its strings may be on the caller's stack; only ctx is passed back as
 * given, and must live until odl_health_monitor_stop. NVML absent with use_nvml = 1 is not an error: telemetry stays unavailable and
 * odl_health_monitor_nvml_error says why. Errors: ODL_E_IO (kernel log cannot be opened), ODL_E_NOMEM. */
ODL_API odl_status odl_health_monitor_start(const odl_health_monitor_opts *o, odl_health_monitor **out);
/* Stop and join the thread, free everything. NULL is fine. */
ODL_API void odl_health_monitor_stop(odl_health_monitor *m);
/* Take up to cap queued findings (oldest first). Returns how many. */
ODL_API int odl_health_monitor_poll(odl_health_monitor *m, odl_health_finding *out, int cap);
/* Feed one kernel-log line as if the log had printed it (ODL_FAULT injection). */
ODL_API void odl_health_monitor_inject(odl_health_monitor *m, const char *line);
/* Latest telemetry; returns 0 when none was read yet. */
ODL_API int odl_health_monitor_telemetry(odl_health_monitor *m, odl_gpu_telemetry *out);
/* Mean GPU utilisation (percent) and peak memory used (MiB) since the last call with reset = 1;
 * ODL_HEALTH_NA when no reading was available. */
ODL_API void odl_health_monitor_window(odl_health_monitor *m, int reset, double *mean_util_pct, double *peak_mem_mib);
/* Why NVML is not in use ("" when it is). */
ODL_API const char *odl_health_monitor_nvml_error(odl_health_monitor *m);

/* ---- fence list (JSON in the job directory) ---- */

typedef struct odl_fence {
    char node[128];
    int xid;                 /* ODL_XID_BUS_LOST for a bus-lost line without Xid */
    char gpu[ODL_PCI_STR_LEN];
    int64_t time;            /* Unix seconds when fenced */
    int generation;          /* the job generation (relaunch count) that saw the error */
    char reason[160];
    int drained;             /* 1 once scontrol drain succeeded for this node */
    int64_t lifted_time;     /* 0 while the fence holds; Unix seconds when an operator lifted it */
    char lifted_by[64];
} odl_fence;

/* Every fence ever set in the job, lifted ones kept as history. */
typedef struct odl_fence_list {
    char path[4096]; /* <job dir>/fence.json */
    odl_fence *items;
    int n, cap;
} odl_fence_list;

/* Load <job_dir>/fence.json (an absent file is an empty list). File format (jansson):
 *   {"version": 1, "fences": [{"node": "n2", "xid": 79, "gpu": "0000:3b:00.0", "time": 1764580000,
 *     "generation": 3, "reason": "...", "drained": true, "lifted_time": 0, "lifted_by": ""}]}
 * Errors: ODL_E_IO, ODL_E_FORMAT (names the file and the bad field). */
ODL_API odl_status odl_fence_list_load(odl_fence_list *l, const char *job_dir);
/* Write it durably (odl_json_save_file: temporary file, fsync, rename, fsync of the folder). */
ODL_API odl_status odl_fence_list_save(const odl_fence_list *l);
ODL_API void odl_fence_list_free(odl_fence_list *l);
/* The holding fence of a node, or NULL. */
ODL_API const odl_fence *odl_fence_find(const odl_fence_list *l, const char *node);
/* Fence a node (once: a node already fenced keeps its first entry). Sets *added to 1 when new. Saves. */
ODL_API odl_status odl_fence_add(odl_fence_list *l, const odl_fence *f, int *added);
/* An operator lifts a node's fence (the only way one ends). ODL_E_NOTFOUND when it is not fenced. Saves. */
ODL_API odl_status odl_fence_lift(odl_fence_list *l, const char *node, const char *by);
/* Copy an Open MPI hostfile ("host slots=N ...", comments, blank lines) to out_path without the
 * fenced hosts, durably (odl/file.h). *kept = hosts left. Errors: ODL_E_IO; ODL_E_INVAL when no host is left
 * (out_path is then untouched). */
ODL_API odl_status odl_fence_write_hostfile(const odl_fence_list *l, const char *in_path, const char *out_path, int *kept);
/* "--exclude=n2,n3" for srun (buf = "" when nothing is fenced). ODL_E_INVAL when cap is too small. */
ODL_API odl_status odl_fence_srun_exclude(const odl_fence_list *l, char *buf, size_t cap);
/* For every holding fence not yet drained: run `scontrol update NodeName=N State=DRAIN
 * Reason="odl: Xid 79 on 0000:3b:00.0 (generation 3)"` (no shell; scontrol from ODL_SCONTROL or PATH),
 * mark it drained and save, so each node is drained once. *issued = commands that succeeded.
 * Errors: ODL_E_IO naming the node and scontrol's exit status (the others are still tried). */
ODL_API odl_status odl_fence_drain(odl_fence_list *l, int *issued);

/* ---- node name ---- */

/* The node that findings, the worker's stop message and drains name: ODL_NODE_NAME (odl/env.h; tests
 * emulate several nodes on one machine with it), else the short host name. Valid for the process. */
ODL_API const char *odl_health_node_name(void);

#ifdef __cplusplus
}
#endif
#endif
