/* NVML through dlopen.
 *   test_health_nvml absent          no NVML library: "NVML not available", the monitor still runs
 *                                    and telemetry reads as unavailable
 *   test_health_nvml sentinel LIB    tests/fake_nvml.c FAKE_NVML_SENTINEL: every reading NVML's "not available"
 *                                    value (32- and 64-bit) -> ODL_HEALTH_NA, flagged in not_available, healthy
 *   test_health_nvml fake LIB        tests/fake_nvml.c: readings, 0xFFFFFFFF and "not supported" as
 *                                    unavailable, an NVML error marks the GPU unhealthy, Xid events,
 *                                    and the monitor turning them (and a failed reading) into findings
 *                                    and telemetry */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "odl/env.h"
#include "odl/health.h"
#include "test_util.h"

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void test_absent(void) {
    odl_nvml *n = (odl_nvml *)1;
    TFAIL(odl_nvml_open(&n), ODL_E_UNSUPPORTED);
    TCHECK(n == NULL, "no handle");
    TCHECK(!strncmp(odl_error_msg(), "NVML not available", 18), "message: %s", odl_error_msg());
    odl_health_monitor_opts o = {.pci_bus_id = "0000:3b:00.0", .mig_gpu_instance = -1, .use_nvml = 1, .telemetry_ms = 20};
    odl_health_monitor *m;
    TOK(odl_health_monitor_start(&o, &m));
    if (!m) return;
    sleep_ms(100);
    TCHECK(strstr(odl_health_monitor_nvml_error(m), "NVML not available") != NULL, "monitor says why: %s",
           odl_health_monitor_nvml_error(m));
    odl_gpu_telemetry t;
    TCHECK(odl_health_monitor_telemetry(m, &t) == 0, "no telemetry without NVML");
    double u, p;
    odl_health_monitor_window(m, 1, &u, &p);
    TCHECK(u == ODL_HEALTH_NA && p == ODL_HEALTH_NA, "window unavailable (%g, %g)", u, p);
    odl_health_finding f[4];
    TCHECK(odl_health_monitor_poll(m, f, 4) == 0, "no findings");
    odl_health_monitor_stop(m);
}

static void test_fake(void) {
    odl_nvml *n = NULL;
    TOK(odl_nvml_open(&n));
    if (!n) return;
    int count = 0, idx = -1;
    TOK(odl_nvml_device_count(n, &count));
    TCHECK(count == 2, "count %d", count);
    char ver[64];
    TOK(odl_nvml_driver_version(n, ver, sizeof ver));
    TCHECK(!strcmp(ver, "999.99.99-fake"), "driver %s", ver);
    TOK(odl_nvml_find(n, "PCI:0000:5e:00", &idx));
    TCHECK(idx == 1, "kernel-log form finds index %d", idx);
    TOK(odl_nvml_find(n, "00000000:3B:00.0", &idx));
    TCHECK(idx == 0, "NVML form finds index %d", idx);
    TOK(odl_nvml_find(n, "GPU-fake-1", &idx));
    TCHECK(idx == 1, "UUID finds index %d", idx);
    TFAIL(odl_nvml_find(n, "0000:99:00.0", &idx), ODL_E_NOTFOUND);
    TFAIL(odl_nvml_find(n, "GPU-none", &idx), ODL_E_NOTFOUND);
    TFAIL(odl_nvml_find(n, "not-a-bus-id", &idx), ODL_E_FORMAT);

    odl_gpu_telemetry t;
    TOK(odl_nvml_read(n, 0, &t));
    TCHECK(t.healthy && !strcmp(t.pci, "0000:3b:00.0") && !strcmp(t.uuid, "GPU-fake-0"), "gpu 0 %s %s", t.pci, t.uuid);
    TCHECK(t.util_gpu_pct == 37 && t.mem_used_mib == 1024 && t.mem_total_mib == 81559 && t.temp_c == 45,
           "readings %g %g %g %g", t.util_gpu_pct, t.mem_used_mib, t.mem_total_mib, t.temp_c);
    TCHECK(t.power_w == ODL_HEALTH_NA, "0xFFFFFFFF power is unavailable, not %g", t.power_w);
    TCHECK(t.sm_clock_mhz == ODL_HEALTH_NA && t.ecc_corrected == ODL_HEALTH_NA && t.ecc_uncorrected == ODL_HEALTH_NA,
           "not supported -> unavailable");
    TCHECK(t.remap_corrected == 2 && t.remap_uncorrected == 0 && t.remap_pending == 1 && t.remap_failed == 0,
           "remapped rows %g %g %g %g", t.remap_corrected, t.remap_uncorrected, t.remap_pending, t.remap_failed);
    TOK(odl_nvml_read(n, 1, &t));
    TCHECK(t.util_gpu_pct == ODL_HEALTH_NA, "0xFFFFFFFF utilisation is unavailable");
    TCHECK(!t.healthy && strstr(t.error, "nvmlDeviceGetTemperature") && strstr(t.error, "GPU is lost"),
           "an NVML error marks the GPU unhealthy: '%s'", t.error);
    TCHECK(t.temp_c == ODL_HEALTH_NA, "the failed reading is unavailable");
    TFAIL(odl_nvml_read(n, 5, &t), ODL_E_NODEV);

    int dev = 0;
    odl_nvml_events *e = NULL;
    TOK(odl_nvml_events_open(n, &dev, 1, &e));
    if (e) {
        odl_xid_record r;
        int got = odl_nvml_events_wait(e, 50, &r);
        char pci[ODL_PCI_STR_LEN];
        TCHECK(got == 1 && r.xid == 79 && !strcmp(odl_pci_format(&r.pci, pci), "0000:3b:00.0") && r.gpu_instance == -1,
               "Xid event: got %d xid %d pci %s gi %d", got, r.xid, pci, r.gpu_instance);
        TCHECK(odl_nvml_events_wait(e, 5, &r) == 0, "time-out is not an error");
        odl_nvml_events_wait(e, 5, &r);
        odl_nvml_events_wait(e, 5, &r);
        odl_error_clear();
        TCHECK(odl_nvml_events_wait(e, 5, &r) == ODL_E_NODEV && strstr(odl_error_msg(), "GPU is lost"),
               "another NVML error: %s", odl_error_msg());
        odl_nvml_events_close(e);
    }
    odl_nvml_close(n);

    /* The monitor: the NVML Xid event becomes a node-fatal finding, the later NVML error another one
     * (the GPU is unhealthy), telemetry is read every 20 ms. */
    odl_health_monitor_opts o = {.pci_bus_id = "PCI:0000:3b:00", .mig_gpu_instance = -1, .use_nvml = 1, .telemetry_ms = 20};
    odl_health_monitor *m;
    TOK(odl_health_monitor_start(&o, &m));
    if (!m) return;
    odl_health_finding f[8];
    int nf = 0;
    for (int i = 0; i < 200 && nf < 2; i++) {
        nf += odl_health_monitor_poll(m, f + nf, 8 - nf);
        sleep_ms(10);
    }
    TCHECK(nf == 2, "two findings, got %d", nf);
    if (nf == 2) {
        TCHECK(f[0].rec.xid == 79 && f[0].cls == ODL_XID_NODE_FATAL, "first: Xid 79 node-fatal (%d)", f[0].rec.xid);
        TCHECK(f[1].rec.xid == ODL_XID_BUS_LOST && f[1].cls == ODL_XID_NODE_FATAL &&
                   strstr(f[1].rec.text, "nvmlEventSetWait_v2"),
               "second: NVML error -> unhealthy: %s", f[1].rec.text);
    }
    TCHECK(strstr(odl_health_monitor_nvml_error(m), "GPU is lost") != NULL, "nvml error kept: %s",
           odl_health_monitor_nvml_error(m));
    sleep_ms(60);
    odl_gpu_telemetry t2;
    TCHECK(odl_health_monitor_telemetry(m, &t2) == 1 && t2.util_gpu_pct == 37, "telemetry snapshot");
    double u, p;
    odl_health_monitor_window(m, 1, &u, &p);
    TCHECK(u == 37 && p == 1024, "window mean util %g peak mem %g", u, p);
    odl_health_monitor_stop(m);

    /* GPU 1, whose temperature call fails (GPU is lost): the monitor's first reading (before its first
     * event wait) is a node-fatal finding of that GPU naming the call, not a silently dropped reading. */
    o.pci_bus_id = "0000:5e:00.0";
    TOK(odl_health_monitor_start(&o, &m));
    if (!m) return;
    nf = 0;
    for (int i = 0; i < 200 && nf < 1; i++) {
        nf += odl_health_monitor_poll(m, f, 1);
        sleep_ms(10);
    }
    char pci[ODL_PCI_STR_LEN];
    TCHECK(nf == 1 && f[0].rec.xid == ODL_XID_BUS_LOST && f[0].cls == ODL_XID_NODE_FATAL &&
               !strcmp(odl_pci_format(&f[0].rec.pci, pci), "0000:5e:00.0") &&
               strstr(f[0].rec.text, "NVML reading failed: nvmlDeviceGetTemperature: GPU is lost"),
           "a failed NVML reading marks GPU 1 unhealthy: %d finding(s), '%s'", nf, nf ? f[0].rec.text : "");
    sleep_ms(60); /* more readings fail the same way: no second finding for them */
    int more = odl_health_monitor_poll(m, f, 8);
    for (int i = 0; i < more; i++)
        TCHECK(!strstr(f[i].rec.text, "NVML reading failed"), "the failed reading is reported once: '%s'", f[i].rec.text);
    TCHECK(odl_health_monitor_telemetry(m, &t2) == 1 && !t2.healthy && t2.util_gpu_pct == ODL_HEALTH_NA,
           "its telemetry: unhealthy, 0xFFFFFFFF utilisation unavailable");
    odl_health_monitor_stop(m);
}

/* tests/fake_nvml.c FAKE_NVML_SENTINEL: every call succeeds with NVML's "not available" value. */
static void test_sentinel(void) {
    odl_nvml *n = NULL;
    TOK(odl_nvml_open(&n));
    if (!n) return;
    odl_gpu_telemetry t;
    TOK(odl_nvml_read(n, 0, &t));
    const double v[] = {t.util_gpu_pct, t.mem_used_mib, t.mem_total_mib, t.temp_c, t.power_w, t.sm_clock_mhz,
                        t.ecc_corrected, t.ecc_uncorrected, t.remap_corrected, t.remap_uncorrected, t.remap_pending,
                        t.remap_failed};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        TCHECK(v[i] == ODL_HEALTH_NA, "reading %zu: NVML's 'not available' value read as %.17g", i, v[i]);
    TCHECK(t.not_available == 0xFFFu, "every reading is flagged not available: mask 0x%x", t.not_available);
    TCHECK(t.healthy, "a 'not available' value is no NVML error: %s", t.error);
    odl_nvml_close(n);
}

int main(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "absent")) {
        setenv("ODL_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
        TOK(odl_env_reload());
        test_absent();
        return odl_test_finish("test_health_nvml absent");
    }
    if (argc >= 3 && !strcmp(argv[1], "fake")) {
        setenv("ODL_NVML_LIBRARY", argv[2], 1);
        TOK(odl_env_reload());
        test_fake();
        return odl_test_finish("test_health_nvml fake");
    }
    if (argc >= 3 && !strcmp(argv[1], "sentinel")) {
        setenv("ODL_NVML_LIBRARY", argv[2], 1);
        TOK(odl_env_reload());
        test_sentinel();
        return odl_test_finish("test_health_nvml sentinel");
    }
    fprintf(stderr, "usage: test_health_nvml absent | fake LIB | sentinel LIB\n");
    return 2;
}
