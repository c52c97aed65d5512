/* Prometheus text of GPU telemetry and Xid counters: dcgm-exporter names and labels, unavailable
 * readings without a sample, label escaping, one HELP/TYPE per family with every GPU's samples under
 * it, Xid counters per code, and the snprintf-like length. The text is also parsed by
 * prometheus_client in tests/health_tool.sh. */
#include <math.h>
#include <string.h>

#include "odl/health.h"
#include "test_util.h"

static int count_of(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

int main(void) {
    odl_gpu_telemetry t[2];
    memset(t, 0, sizeof t);
    for (int g = 0; g < 2; g++) {
        t[g].healthy = 1;
        t[g].util_gpu_pct = 80 + g;
        t[g].mem_used_mib = 1000;
        t[g].mem_total_mib = 143771;
        t[g].temp_c = 40;
        t[g].power_w = ODL_HEALTH_NA;
        t[g].sm_clock_mhz = 1980;
        t[g].ecc_corrected = t[g].ecc_uncorrected = ODL_HEALTH_NA;
        t[g].remap_corrected = t[g].remap_uncorrected = t[g].remap_pending = t[g].remap_failed = ODL_HEALTH_NA;
        snprintf(t[g].pci, sizeof t[g].pci, "0000:%02x:00.0", 0x3b + g);
        snprintf(t[g].uuid, sizeof t[g].uuid, "GPU-%d", g);
    }
    snprintf(t[1].name, sizeof t[1].name, "odd \"name\" \\ x\ny");
    t[1].healthy = 0;
    odl_xid_count x[2] = {{1, 79, ODL_XID_NODE_FATAL, 2}, {0, ODL_XID_BUS_LOST, ODL_XID_NODE_FATAL, 1}};
    char buf[8192];
    size_t need = odl_health_prometheus(buf, sizeof buf, t, 2, "node-7", x, 2);
    TCHECK(need == strlen(buf), "length %zu vs %zu", need, strlen(buf));
    TCHECK(strstr(buf, "# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n"
                       "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-0\",pci_bus_id=\"0000:3b:00.0\",modelName=\"\","
                       "Hostname=\"node-7\"} 80\n"
                       "DCGM_FI_DEV_GPU_UTIL{gpu=\"1\",UUID=\"GPU-1\",pci_bus_id=\"0000:3c:00.0\","
                       "modelName=\"odd \\\"name\\\" \\\\ x\\ny\",Hostname=\"node-7\"} 81\n") != NULL,
           "two GPUs under one family, escaped labels:\n%s", buf);
    TCHECK(count_of(buf, "# TYPE DCGM_FI_DEV_FB_USED gauge") == 1, "one TYPE per family");
    TCHECK(!strstr(buf, "DCGM_FI_DEV_POWER_USAGE") && !strstr(buf, "ECC") && !strstr(buf, "REMAP"),
           "unavailable readings have no sample (nor family)");
    TCHECK(strstr(buf, "DCGM_FI_DEV_SM_CLOCK{gpu=\"0\"") && strstr(buf, "} 1980\n"), "SM clock");
    TCHECK(strstr(buf, "odl_gpu_healthy{gpu=\"1\"") && count_of(buf, "} 0\n") == 1, "GPU 1 unhealthy");
    TCHECK(strstr(buf, "# TYPE odl_gpu_xid_errors_total counter\n") != NULL, "Xid counter family");
    TCHECK(strstr(buf, "odl_gpu_xid_errors_total{gpu=\"1\",UUID=\"GPU-1\",pci_bus_id=\"0000:3c:00.0\","
                       "modelName=\"odd \\\"name\\\" \\\\ x\\ny\",Hostname=\"node-7\",xid=\"79\",class=\"node-fatal\"} 2\n"),
           "Xid 79 counter");
    TCHECK(strstr(buf, "xid=\"bus_lost\",class=\"node-fatal\"} 1\n") != NULL, "bus_lost counter");
    char small[64];
    size_t need2 = odl_health_prometheus(small, sizeof small, t, 2, "node-7", x, 2);
    TCHECK(need2 == need && strlen(small) == sizeof small - 1 && !strncmp(small, buf, sizeof small - 1),
           "truncated text, full length returned (%zu)", need2);
    TCHECK(odl_health_prometheus(NULL, 0, t, 2, "node-7", x, 2) == need, "length query");
    TCHECK(odl_health_prometheus(buf, sizeof buf, t, 0, "h", NULL, 0) == 0 && buf[0] == 0, "no GPUs: empty");

    /* The sample a rank sends with its heartbeats (odl_gpu_sample): one encoding of "unavailable". */
    odl_gpu_telemetry c;
    odl_gpu_telemetry_clear(&c);
    TCHECK(c.healthy && c.util_gpu_pct == ODL_HEALTH_NA && c.sm_clock_mhz == ODL_HEALTH_NA &&
               c.ecc_uncorrected == ODL_HEALTH_NA && c.remap_failed == ODL_HEALTH_NA && !c.uuid[0],
           "a cleared reading is all unavailable, healthy");
    odl_gpu_sample s;
    odl_gpu_sample_of(&t[0], &s);
    TCHECK(s.util_pct == 80 && s.mem_used_mib == 1000 && s.mem_total_mib == 143771 && s.temp_c == 40 &&
               s.power_w == ODL_HEALTH_NA && s.sm_clock_mhz == 1980, "the sample of a reading");
    odl_gpu_sample_apply(&s, &c);
    TCHECK(c.util_gpu_pct == 80 && c.mem_total_mib == 143771 && c.power_w == ODL_HEALTH_NA && c.sm_clock_mhz == 1980 &&
               c.ecc_corrected == ODL_HEALTH_NA, "applied back: the six readings, the rest untouched");
    odl_gpu_sample peer = {NAN, -5, 7, INFINITY, 300, 0};
    odl_gpu_sample_clean(&peer);
    TCHECK(peer.util_pct == ODL_HEALTH_NA && peer.mem_used_mib == ODL_HEALTH_NA && peer.mem_total_mib == 7 &&
               peer.temp_c == ODL_HEALTH_NA && peer.power_w == 300 && peer.sm_clock_mhz == 0,
           "a peer's NaN, negative or infinite value is unavailable");
    return odl_test_finish("test_health_prometheus");
}
