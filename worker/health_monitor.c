/* The worker's GPU-health monitor: see worker/health_monitor.h. */
#include "worker/health_monitor.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "odl/coord_client.h"
#include "odl/device.h"
#include "odl/fault.h"
#include "odl/env.h"
#include "odl/json.h"
#include "odl/log.h"

/* Entry local_rank % n of ODL_HEALTH_GPU's comma-separated list, into buf. */
static odl_status env_gpu_entry(int local_rank, char *buf, size_t cap) {
    const char *list = odl_env_str(ODL_ENV_HEALTH_GPU);
    int n = 1;
    for (const char *p = list; *p; p++) n += *p == ',';
    const char *p = list;
    for (int i = local_rank % n; i > 0; i--) p = strchr(p, ',') + 1;
    size_t len = strcspn(p, ",");
    while (len && p[len - 1] == ' ') len--;
    while (len && *p == ' ') p++, len--;
    if (len == 0 || len >= cap)
        return ODL_ERR(ODL_E_CONFIG, "ODL_HEALTH_GPU='%s': entry %d (local rank %d) is %s", list, local_rank % n,
                       local_rank, len ? "too long" : "empty");
    memcpy(buf, p, len);
    buf[len] = '\0';
    return ODL_OK;
}

int odl_worker_health_gpu(odl_device dev, int local_rank, odl_worker_gpu_id *gid) {
    memset(gid, 0, sizeof *gid);
    gid->nvml_index = -1;
    char key[96];
    const char *what = dev.type == ODL_DEV_CUDA ? "the CUDA device's PCI bus id" : "ODL_HEALTH_GPU entry";
    if (dev.type == ODL_DEV_CUDA) {
        ODL_CHECK(odl_cuda_pci_bus_id(dev.index, key, sizeof key));
    } else if (odl_env_is_set(ODL_ENV_HEALTH_GPU)) {
        ODL_CHECK(env_gpu_entry(local_rank, key, sizeof key));
    } else {
        return 0;
    }
    int by_uuid = !strncmp(key, "GPU-", 4) || !strncmp(key, "MIG-", 4);
    odl_pci_id id;
    if (!by_uuid) {
        odl_status s = odl_pci_parse(key, &id);
        if (s != ODL_OK) return ODL_ERR(s, "%s '%s': neither a PCI bus id nor a UUID (GPU-...)", what, key);
    }
    /* NVML gives the UUID (and the bus id of a UUID); without it a bus id still names the GPU. */
    odl_nvml *n = NULL;
    int idx;
    odl_gpu_telemetry t;
    odl_status s = odl_nvml_open(&n);
    if (s == ODL_OK) s = odl_nvml_find(n, key, &idx);
    if (s == ODL_OK) s = odl_nvml_read(n, idx, &t);
    odl_nvml_close(n);
    if (s == ODL_OK) {
        snprintf(gid->uuid, sizeof gid->uuid, "%.63s", t.uuid);
        snprintf(gid->model, sizeof gid->model, "%.95s", t.name);
        gid->nvml_index = idx;
        if (by_uuid && odl_pci_parse(t.pci, &id) != ODL_OK)
            return ODL_ERR(ODL_E_NODEV, "%s %s: NVML gives no PCI bus id for it", what, key);
    } else if (by_uuid) {
        char why[256];
        snprintf(why, sizeof why, "%s", odl_error_msg()); /* ODL_ERR rewrites the message buffer */
        return ODL_ERR(s, "%s %s: NVML cannot resolve this UUID: %s", what, key, why);
    } else {
        odl_error_clear();
    }
    char canon[ODL_PCI_STR_LEN];
    snprintf(gid->pci, sizeof gid->pci, "%s", odl_pci_format(&id, canon)); /* one form everywhere: Hello, XidReport, /metrics */
    return 1;
}

odl_status odl_worker_health_start(odl_worker_health *h, odl_device dev, int rank, int local_rank,
                                   odl_coord_client *coord) {
    memset(h, 0, sizeof *h);
    h->rank = rank;
    h->coord = coord;
    if (!odl_env_bool(ODL_ENV_HEALTH)) return ODL_OK;
    /* NULL when unset: the monitor's defaults apply */
    const char *env_kmsg = odl_env_is_set(ODL_ENV_HEALTH_KMSG) ? odl_env_str(ODL_ENV_HEALTH_KMSG) : NULL;
    const char *env_table = odl_env_is_set(ODL_ENV_HEALTH_XID_TABLE) ? odl_env_str(ODL_ENV_HEALTH_XID_TABLE) : NULL;
    odl_fault_xid first;
    int f = odl_fault_xid_parse(odl_env_is_set(ODL_ENV_FAULT) ? odl_env_str(ODL_ENV_FAULT) : NULL, &first);
    if (f < 0) return f;
    h->have_fault = f == 1;
    if (h->have_fault) ODL_CHECK(odl_fault_from_env(&h->faults));
    odl_worker_gpu_id gid;
    const char *kmsg = env_kmsg;
    int g = odl_worker_health_gpu(dev, local_rank, &gid);
    const char *bus = g == 1 ? gid.pci : "";
    if (g < 0) return g;
    if (g == 1) { /* the training GPU, or on the CPU the one ODL_HEALTH_GPU names */
        ODL_CHECK(odl_pci_parse(bus, &h->pci));
        if (!kmsg && access("/dev/kmsg", R_OK) == 0) kmsg = "/dev/kmsg";
        h->nvml = 1;
    } else if (!kmsg && !h->have_fault) {
        return ODL_OK;
    }
    odl_xid_table table;
    odl_xid_table_defaults(&table);
    if (env_table) ODL_CHECK(odl_xid_table_load_yaml(&table, env_table));
    odl_health_monitor_opts o = {
        .pci_bus_id = bus[0] ? bus : NULL,
        .mig_gpu_instance = -1,
        .kmsg_path = kmsg,
        .use_nvml = h->nvml,
        .since_us = odl_kmsg_now_us(), /* lines from before this process are another job's */
        .telemetry_ms = (int)odl_env_int(ODL_ENV_HEALTH_TELEMETRY_MS),
        .table = &table,
    };
    odl_status s = odl_health_monitor_start(&o, &h->mon);
    if (s == ODL_E_IO && kmsg && !env_kmsg) {
        /* /dev/kmsg unreadable (kernel.dmesg_restrict for a non-root user): NVML's events remain. */
        ODL_LOG_WARN("GPU health: %s; following NVML events only", odl_error_msg());
        o.kmsg_path = kmsg = NULL;
        s = odl_health_monitor_start(&o, &h->mon);
    }
    ODL_CHECK(s);
    if (h->nvml && odl_health_monitor_nvml_error(h->mon)[0])
        ODL_LOG_WARN("GPU health: %s; telemetry unavailable", odl_health_monitor_nvml_error(h->mon));
    ODL_LOG_INFO("GPU health monitor: kernel log %s, NVML %s%s, GPU %s%s", kmsg ? kmsg : "none",
                 h->nvml && !odl_health_monitor_nvml_error(h->mon)[0] ? "on" : "off",
                 h->have_fault ? ", injecting an Xid by ODL_FAULT" : "", bus[0] ? bus : "none (CPU)",
                 bus[0] && dev.type != ODL_DEV_CUDA ? " (ODL_HEALTH_GPU; training on the CPU)" : "");
    return ODL_OK;
}

static void send_telemetry(odl_worker_health *h, odl_coord_client *cc) {
    odl_gpu_telemetry t;
    if (!cc || !h->nvml || !odl_health_monitor_telemetry(h->mon, &t)) return;
    odl_gpu_sample g;
    odl_gpu_sample_of(&t, &g);
    odl_coord_client_gpu(cc, &g);
}

odl_status odl_worker_health_step(odl_worker_health *h, int64_t step) {
    if (!h->mon) return ODL_OK;
    odl_coord_client *cc = h->coord;
    send_telemetry(h, cc);
    int injected = 0;
    for (int i = 0; h->have_fault && i < h->faults.n && i < 32; i++) {
        const odl_fault *q = &h->faults.f[i];
        /* odl_fault_claim: once per job directory, as the process faults (a relaunch meets a healthy machine) */
        if (q->action != ODL_FAULT_XID || (h->faults_done >> i & 1) || step < q->step ||
            (q->rank >= 0 && q->rank != h->rank) || !odl_fault_claim(q, h->rank))
            continue;
        odl_fault_xid x = {q->xid, q->rank, q->step};
        char line[256];
        odl_fault_xid_line(&x, &h->pci, line, sizeof line);
        odl_health_monitor_inject(h->mon, line);
        h->faults_done |= 1u << i;
        injected = 1;
    }
    odl_health_finding f[16];
    int n = odl_health_monitor_poll(h->mon, f, 16);
    /* The injected line is parsed on the monitor thread: wait for it so the fault acts at its step. */
    for (int i = 0; injected && n == 0 && i < 200; i++) {
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
        n = odl_health_monitor_poll(h->mon, f, 16);
    }
    odl_status s = ODL_OK;
    for (int i = 0; i < n; i++) {
        char text[512];
        odl_health_finding_format(&f[i], text, sizeof text);
        if (f[i].attributed_to >= 0 || f[i].cls == ODL_XID_IGNORE) {
            ODL_LOG_INFO("GPU health: %s", text);
            continue;
        }
        ODL_LOG_ERROR("GPU health: %s", text);
        char pci[ODL_PCI_STR_LEN], code[16];
        odl_pci_format(&f[i].rec.pci, pci);
        odl_xid_code_str(f[i].rec.xid, code);
        if (cc) {
            /* Supervised: the coordinator fences (node-fatal) or restarts (application) the job and
             * tells this rank what to do; until then it trains on where it still can. */
            ODL_LOG_WARN("GPU health: %s Xid %s on %s at step %lld on node %s: reported to the coordinator",
                         odl_xid_class_name(f[i].cls), code, pci, (long long)step, odl_health_node_name());
            odl_coord_client_xid(cc, f[i].rec.xid, (int)f[i].cls, pci, text);
            continue;
        }
        if (s == ODL_OK) {
            s = ODL_ERR(ODL_E_NODEV, "GPU health: %s Xid %s on %s at step %lld on node %s: stopping (%s)",
                        odl_xid_class_name(f[i].cls), code, pci, (long long)step, odl_health_node_name(),
                        f[i].cls == ODL_XID_NODE_FATAL ? "the node is to be fenced" : "the job is to be restarted");
        }
    }
    return s;
}

json_t *odl_worker_health_epoch(odl_worker_health *h, char *log_text, size_t log_cap) {
    log_text[0] = '\0';
    if (!h->mon || !h->nvml) return NULL;
    double util, mem;
    odl_health_monitor_window(h->mon, 1, &util, &mem);
    if (util == ODL_HEALTH_NA && mem == ODL_HEALTH_NA) return NULL;
    char u[32] = "unavailable", m[32] = "unavailable";
    if (util != ODL_HEALTH_NA) snprintf(u, sizeof u, "%.0f%%", util);
    if (mem != ODL_HEALTH_NA) snprintf(m, sizeof m, "%.0f MiB", mem);
    snprintf(log_text, log_cap, " gpu_util %s peak_mem %s", u, m);
    return json_pack("{s:o,s:o}", "gpu_util_mean", odl_json_num(util == ODL_HEALTH_NA ? NAN : util, 1),
                     "gpu_mem_peak_mib", odl_json_num(mem == ODL_HEALTH_NA ? NAN : mem, 0));
}

void odl_worker_health_stop(odl_worker_health *h) {
    odl_health_monitor_stop(h->mon);
    h->mon = NULL;
}
