/* Prometheus text exposition (format 0.0.4) of GPU telemetry and Xid counters, with dcgm-exporter's
 * metric names and labels where they overlap (NVIDIA dcgm-exporter default-counters.csv). */
#include <stdio.h>
#include <string.h>

#include "odl/health.h"
#include "odl/strbuf.h"

/* A label value with \, " and newline escaped, as the text format requires. */
static void put_label(odl_strbuf *o, const char *name, const char *v, int first) {
    odl_strbuf_printf(o, "%s%s=\"", first ? "" : ",", name);
    for (const char *p = v ? v : ""; *p; p++) {
        if (*p == '\\') odl_strbuf_printf(o, "\\\\");
        else if (*p == '"') odl_strbuf_printf(o, "\\\"");
        else if (*p == '\n') odl_strbuf_printf(o, "\\n");
        else odl_strbuf_printf(o, "%c", *p);
    }
    odl_strbuf_printf(o, "\"");
}

static void put_labels(odl_strbuf *o, const odl_gpu_telemetry *t, int gpu, const char *host) {
    char idx[16];
    snprintf(idx, sizeof idx, "%d", t->have_index ? t->index : gpu);
    put_label(o, "gpu", idx, 1);
    put_label(o, "UUID", t->uuid, 0);
    put_label(o, "pci_bus_id", t->pci, 0);
    put_label(o, "modelName", t->name, 0);
    put_label(o, "Hostname", host ? host : t->hostname, 0);
}

typedef struct family {
    const char *name, *type, *help;
    size_t offset; /* of the double in odl_gpu_telemetry */
} family;

#define F(name, type, help, field) {name, type, help, offsetof(odl_gpu_telemetry, field)}
static const family k_families[] = {
    F("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", util_gpu_pct),
    F("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", mem_used_mib),
    F("DCGM_FI_DEV_FB_TOTAL", "gauge", "Framebuffer memory total (in MiB).", mem_total_mib),
    F("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", temp_c),
    F("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", power_w),
    F("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", sm_clock_mhz),
    F("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter", "Total number of single-bit volatile ECC errors.", ecc_corrected),
    F("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Total number of double-bit volatile ECC errors.", ecc_uncorrected),
    F("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for correctable errors.",
      remap_corrected),
    F("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for uncorrectable errors.",
      remap_uncorrected),
    F("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed.", remap_failed),
};
#undef F

void odl_health_prometheus_append(odl_strbuf *o, const odl_gpu_telemetry *t, int n, const char *host,
                                  const odl_xid_count *xids, int n_xids) {
    for (size_t f = 0; f < sizeof k_families / sizeof k_families[0]; f++) {
        const family *fm = &k_families[f];
        int any = 0;
        for (int g = 0; g < n; g++) {
            double v = *(const double *)((const char *)&t[g] + fm->offset);
            if (v == ODL_HEALTH_NA) continue;
            if (!any) odl_strbuf_printf(o, "# HELP %s %s\n# TYPE %s %s\n", fm->name, fm->help, fm->name, fm->type);
            any = 1;
            odl_strbuf_printf(o, "%s{", fm->name);
            put_labels(o, &t[g], g, host);
            odl_strbuf_printf(o, "} %.17g\n", v);
        }
    }
    if (n > 0) {
        odl_strbuf_printf(o, "# HELP odl_gpu_healthy 1 while every NVML call on the GPU succeeds.\n# TYPE odl_gpu_healthy gauge\n");
        for (int g = 0; g < n; g++) {
            odl_strbuf_printf(o, "odl_gpu_healthy{");
            put_labels(o, &t[g], g, host);
            odl_strbuf_printf(o, "} %d\n", t[g].healthy ? 1 : 0);
        }
    }
    if (n_xids > 0) {
        odl_strbuf_printf(o, "# HELP odl_gpu_xid_errors_total Xid errors seen, per code.\n# TYPE odl_gpu_xid_errors_total counter\n");
        for (int i = 0; i < n_xids; i++) {
            const odl_xid_count *x = &xids[i];
            if (x->gpu < 0 || x->gpu >= n) continue;
            char code[16];
            odl_xid_code_str(x->xid, code);
            odl_strbuf_printf(o, "odl_gpu_xid_errors_total{");
            put_labels(o, &t[x->gpu], x->gpu, host);
            put_label(o, "xid", code, 0);
            put_label(o, "class", odl_xid_class_name(x->cls), 0);
            odl_strbuf_printf(o, "} %llu\n", (unsigned long long)x->count);
        }
    }
}

size_t odl_health_prometheus(char *buf, size_t cap, const odl_gpu_telemetry *t, int n, const char *host,
                             const odl_xid_count *xids, int n_xids) {
    odl_strbuf o = ODL_STRBUF_INIT;
    odl_health_prometheus_append(&o, t, n, host, xids, n_xids);
    size_t len = o.oom ? 0 : o.len;
    if (cap) {
        size_t k = len < cap ? len : cap - 1;
        if (k) memcpy(buf, o.s, k);
        buf[k] = '\0';
    }
    odl_strbuf_free(&o);
    return len;
}
