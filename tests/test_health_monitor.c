/* The monitor thread following an injection file as this rank's kernel log: lines appended while it
 * runs (including one written in two pieces) become findings through the real parser and classifier;
 * lines from before the job, of another GPU or another MIG instance do not; an ODL_FAULT xidNN line
 * injected through odl_health_monitor_inject does; the callback sees each finding once; stop joins. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "odl/health.h"
#include "test_util.h"

static int g_callbacks;

static void on_finding(void *ctx, const odl_health_finding *f) {
    (void)f;
    __atomic_fetch_add((int *)ctx, 1, __ATOMIC_SEQ_CST);
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void append(const char *path, const char *text) {
    FILE *f = fopen(path, "a");
    if (!f) {
        perror(path);
        exit(1);
    }
    fputs(text, f);
    fclose(f);
}

/* Poll until `want` findings arrived in total or 10 s passed. */
static int wait_for(odl_health_monitor *m, odl_health_finding *f, int have, int want) {
    for (int i = 0; i < 1000 && have < want; i++) {
        have += odl_health_monitor_poll(m, f + have, want - have);
        if (have < want) sleep_ms(10);
    }
    return have;
}

int main(void) {
    char path[] = "/tmp/odl_kmsg_test.XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) {
        perror("mkstemp");
        return 1;
    }
    close(fd);
    /* The job starts 1000 s after boot; the log already holds older lines. */
    append(path, "[  999.000000] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.\n"
                 "5,100,999500000,-;NVRM: Xid (PCI:0000:3b:00): 48, pid=1, old double bit error\n");
    odl_health_monitor_opts o = {.pci_bus_id = "00000000:3B:00.0", .mig_gpu_instance = 2, .kmsg_path = path,
                                 .use_nvml = 0, .since_us = 1000 * 1000000LL, .on_finding = on_finding,
                                 .ctx = &g_callbacks};
    odl_health_monitor *m = NULL;
    TOK(odl_health_monitor_start(&o, &m));
    if (!m) return odl_test_finish("test_health_monitor");
    odl_health_finding f[16];
    sleep_ms(300);
    TCHECK(odl_health_monitor_poll(m, f, 16) == 0, "lines from before the job are ignored");

    append(path, "[ 1001.000000] NVRM: Xid (PCI:0000:5e:00): 79, pid=1, another GPU's\n"
                 "[ 1001.100000] NVRM: Xid (PCI:0000:3b:00 GPU-I:01 GPU-CI:00): 43, pid=1, another instance's\n"
                 "[ 1001.200000] kernel: unrelated line\n"
                 "[ 1001.300000] NVRM: Xid (PCI:0000:3b:00 GPU-I:02 GPU-CI:00): 13, pid=77, name=odl_worker, Graphics\n");
    int n = wait_for(m, f, 0, 1);
    TCHECK(n == 1 && f[0].rec.xid == 13 && f[0].cls == ODL_XID_APPLICATION && f[0].rec.gpu_instance == 2,
           "our instance's Xid 13 (n %d xid %d)", n, n ? f[0].rec.xid : -1);

    /* A line written in two pieces is read once it is whole. */
    append(path, "[ 1002.000000] NVRM: Xid (PCI:0000:3b:00): 7");
    sleep_ms(300);
    TCHECK(odl_health_monitor_poll(m, f, 16) == 0, "a partial line waits for its newline");
    append(path, "9, pid=1, GPU has fallen off the bus.\n[ 1002.000001] NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.\n");
    n = wait_for(m, f, 0, 2);
    TCHECK(n == 2 && f[0].rec.xid == 79 && f[0].cls == ODL_XID_NODE_FATAL && f[0].attributed_to == -1,
           "Xid 79 node-fatal (n %d xid %d)", n, n ? f[0].rec.xid : -1);
    TCHECK(n == 2 && f[1].rec.xid == ODL_XID_BUS_LOST && f[1].attributed_to == 79, "bus-lost line belongs to the 79");

    /* ODL_FAULT's shorthand takes the same path. */
    odl_fault_xid fx;
    TCHECK(odl_fault_xid_parse("xid48@rank=0,step=3", &fx) == 1, "fault parses");
    odl_pci_id pci;
    TOK(odl_pci_parse("0000:3b:00.0", &pci));
    char line[256];
    odl_fault_xid_line(&fx, &pci, line, sizeof line);
    odl_health_monitor_inject(m, line);
    n = wait_for(m, f, 0, 1);
    TCHECK(n == 1 && f[0].rec.xid == 48 && f[0].cls == ODL_XID_NODE_FATAL && strstr(f[0].rec.text, "ODL_FAULT"),
           "injected Xid 48 (n %d)", n);

    TCHECK(__atomic_load_n(&g_callbacks, __ATOMIC_SEQ_CST) == 4, "callback saw %d findings, want 4", g_callbacks);
    odl_health_monitor_stop(m);

    odl_health_monitor *bad = NULL;
    o.kmsg_path = "/nonexistent/kmsg";
    TFAIL(odl_health_monitor_start(&o, &bad), ODL_E_IO);
    TCHECK(bad == NULL, "no monitor on error");
    o.kmsg_path = path;
    o.pci_bus_id = "GPU-0";
    TFAIL(odl_health_monitor_start(&o, &bad), ODL_E_FORMAT);
    unlink(path);
    return odl_test_finish("test_health_monitor");
}
