/* Kernel-log parsing and Xid classification against a table of real-world lines: driver generations
 * (old "Xid (0000:..)", 4xx/5xx "pid=", 5xx "pid='<unknown>', name=<unknown>"), MIG attributions,
 * no-Xid "fallen off the bus" lines, dmesg / kmsg / syslog prefixes, both PCI id forms; then the
 * class table, 'follows', escalation, the job-start filter, YAML overrides and ODL_FAULT's xid form.
 * Lines are the formats of NVIDIA's open kernel modules and the examples of NVIDIA's A100 memory-error
 * guide, gpud's and k8s-device-plugin's tests (rewritten, no copied text beyond the driver's format). */
#include <string.h>

#include "odl/health.h"
#include "test_util.h"

typedef struct {
    const char *line;
    int match;
    int xid;
    const char *pci; /* canonical, or NULL for "unknown" */
    int gi, ci, pid;
    const char *name;
    long long ts_us;
    const char *text_prefix;
} line_case;

#define NOMATCH(s) {s, 0, 0, NULL, -1, -1, -1, NULL, -1, NULL}
static const line_case k_lines[] = {
    /* 5xx driver, process known */
    {"NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python3, GPU has fallen off the bus.", 1, 79, "0000:3b:00.0", -1,
     -1, 1234, "python3", -1, "GPU has fallen off the bus."},
    /* 5xx driver, process unknown (quoted) */
    {"[Fri Aug 30 11:43:09 2024] NVRM: Xid (PCI:0000:cb:00): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp "
     "Exception on (GPC 7, TPC 1, SM 0): Out Of Range Address",
     1, 13, "0000:cb:00.0", -1, -1, -1, "", -1, "Graphics SM Warp Exception"},
    /* 4xx driver: pid only, dmesg timestamp */
    {"[12345.678901] NVRM: Xid (PCI:0000:18:00): 79, pid=1234, GPU has fallen off the bus.", 1, 79, "0000:18:00.0", -1,
     -1, 1234, "", 12345678901LL, "GPU has fallen off the bus."},
    /* old drivers: no "PCI:", no pid, hex words */
    {"[  301.2] NVRM: Xid (0000:02:00): 13, 0001 00000000 000090c0 00001b0c 00000004 00000000", 1, 13, "0000:02:00.0",
     -1, -1, -1, "", 301200000LL, "0001 00000000"},
    /* quoted pid and name */
    {"NVRM: Xid (PCI:0000:03:00): 31, pid='1234', name='python3', 'Illegal memory access'", 1, 31, "0000:03:00.0", -1,
     -1, 1234, "python3", -1, "'Illegal memory access'"},
    /* MIG: GPU instance only (A100 memory-error guide) */
    {"NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, pid=7194, Contained: CE User Channel (0x9). RST: No, D-RST: No", 1, 94,
     "0000:01:00.0", 5, -1, 7194, "", -1, "Contained: CE User Channel"},
    /* MIG: GPU and compute instance */
    {"NVRM: Xid (PCI:0000:3b:00 GPU-I:01 GPU-CI:02): 13, pid=9, name=a, Graphics Exception", 1, 13, "0000:3b:00.0", 1, 2,
     9, "a", -1, "Graphics Exception"},
    /* short MIG field names */
    {"NVRM: Xid (PCI:0000:3b:00 GI:3 CI:0): 43, pid=77, name=train, Ch 00000010", 1, 43, "0000:3b:00.0", 3, 0, 77,
     "train", -1, "Ch 00000010"},
    /* /dev/kmsg record */
    {"4,1123,5678901234,-;NVRM: Xid (PCI:0000:b9:00): 74, pid=<unknown>, name=<unknown>, NVLink: fatal error detected "
     "on link 6(0x10000, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0)",
     1, 74, "0000:b9:00.0", -1, -1, -1, "", 5678901234LL, "NVLink: fatal error"},
    /* kmsg record with a caller field (newer kernels) */
    {"3,88,999000,-,caller=T1234;NVRM: Xid (PCI:0000:3b:00): 48, pid=4, name=x, An uncorrectable double bit error", 1,
     48, "0000:3b:00.0", -1, -1, 4, "x", 999000LL, "An uncorrectable double bit error"},
    /* syslog / journal prefix with a dmesg timestamp */
    {"Oct 02 10:41:07 srv-r07-u12 kernel: [ 8812.000100] NVRM: Xid (PCI:0000:3d:00): 79, pid=0, GPU has fallen off the "
     "bus.",
     1, 79, "0000:3d:00.0", -1, -1, 0, "", 8812000100LL, "GPU has fallen off the bus."},
    /* journal prefix without timestamp; NVML-style 8-digit domain and function, upper case */
    {"Jan 15 14:30:45 dgx-01 kernel: NVRM: Xid (PCI:00000000:3B:00.0): 119, pid=1, name=x, Timeout after 6s of waiting "
     "for RPC response from GPU0 GSP!",
     1, 119, "0000:3b:00.0", -1, -1, 1, "x", -1, "Timeout after 6s"},
    /* fallen off the bus, no Xid token (two phrasings) */
    {"NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.", 1, ODL_XID_BUS_LOST, "0000:3b:00.0", -1, -1, -1, "", -1,
     "GPU 0000:3b:00.0"},
    {"[12345.678902] NVRM: GPU at PCI:0000:18:00.0 has fallen off the bus.", 1, ODL_XID_BUS_LOST, "0000:18:00.0", -1, -1,
     -1, "", 12345678902LL, "GPU at PCI"},
    {"[   55.100000] NVRM: The NVIDIA GPU 00000000:5E:00.0 (PCI ID: 10de:2330) has fallen off the bus", 1,
     ODL_XID_BUS_LOST, "0000:5e:00.0", -1, -1, -1, "", 55100000LL, "The NVIDIA GPU"},
    /* not Xid lines */
    NOMATCH("[ 1.0] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.104.05"),
    NOMATCH("NVRM: GPU at PCI:0000:18:00: GPU-6e3a0d5b-0000-0000-0000-000000000000"),
    NOMATCH("nvidia-peermem nv_get_p2p_free_callback:127 ERROR detected invalid context, skipping further processing"),
    NOMATCH("NVRM: Xid (PCI:zz:00): 79, garbage"),
    NOMATCH("NVRM: Xid (PCI:0000:3b:00): , no code"),
    NOMATCH(""),
    NOMATCH("pcieport 0000:17:01.0: AER: Corrected error message received from 0000:3d:00.0"),
};

static void test_lines(void) {
    for (size_t i = 0; i < sizeof k_lines / sizeof k_lines[0]; i++) {
        const line_case *c = &k_lines[i];
        odl_xid_record r;
        int m = odl_xid_parse_line(c->line, &r);
        TCHECK(m == c->match, "line %zu '%s': match %d, want %d", i, c->line, m, c->match);
        if (!m || !c->match) continue;
        char pci[ODL_PCI_STR_LEN];
        odl_pci_format(&r.pci, pci);
        TCHECK(r.xid == c->xid, "line %zu: xid %d want %d", i, r.xid, c->xid);
        TCHECK(!strcmp(pci, c->pci), "line %zu: pci %s want %s", i, pci, c->pci);
        TCHECK(r.gpu_instance == c->gi && r.compute_instance == c->ci, "line %zu: MIG %d/%d want %d/%d", i,
               r.gpu_instance, r.compute_instance, c->gi, c->ci);
        TCHECK(r.pid == c->pid, "line %zu: pid %d want %d", i, r.pid, c->pid);
        TCHECK(!strcmp(r.name, c->name), "line %zu: name '%s' want '%s'", i, r.name, c->name);
        TCHECK(r.ts_us == c->ts_us, "line %zu: ts %lld want %lld", i, (long long)r.ts_us, c->ts_us);
        TCHECK(!strncmp(r.text, c->text_prefix, strlen(c->text_prefix)), "line %zu: text '%s' want prefix '%s'", i,
               r.text, c->text_prefix);
    }
}

static void test_pci(void) {
    odl_pci_id a, b, c;
    TOK(odl_pci_parse("PCI:0000:3b:00", &a));
    TOK(odl_pci_parse("00000000:3B:00.0", &b));
    TOK(odl_pci_parse("3b:00.0", &c));
    TCHECK(odl_pci_eq(&a, &b) && odl_pci_eq(&b, &c), "the three forms are one GPU");
    TOK(odl_pci_parse("0000:3b:00.1", &c));
    TCHECK(!odl_pci_eq(&a, &c), "another function is another device");
    TOK(odl_pci_parse("0001:3b:00.0", &c));
    TCHECK(!odl_pci_eq(&a, &c), "another domain is another device");
    char buf[ODL_PCI_STR_LEN];
    TCHECK(!strcmp(odl_pci_format(&b, buf), "0000:3b:00.0"), "canonical form %s", buf);
    TFAIL(odl_pci_parse("GPU-1234", &c), ODL_E_FORMAT);
    TFAIL(odl_pci_parse("0000:3b:00.0 x", &c), ODL_E_FORMAT);
    TFAIL(odl_pci_parse("", &c), ODL_E_FORMAT);
}

static odl_health_finding classify_line(odl_xid_classifier *c, const char *line, int *kept) {
    odl_xid_record r;
    odl_health_finding f;
    memset(&f, 0, sizeof f);
    *kept = 0;
    if (odl_xid_parse_line(line, &r)) *kept = odl_xid_classify(c, &r, &f);
    return f;
}

static void test_classes(void) {
    odl_xid_table t;
    odl_xid_table_defaults(&t);
    static const int fatal[] = {48, 62, 64, 74, 79, 95, 119, 120, 140, 144, 145, 146, 147, 148, 149, 150, 44};
    for (size_t i = 0; i < sizeof fatal / sizeof fatal[0]; i++)
        TCHECK(t.cls[fatal[i]] == ODL_XID_NODE_FATAL, "Xid %d is node-fatal", fatal[i]);
    TCHECK(t.cls[ODL_XID_BUS_LOST] == ODL_XID_NODE_FATAL, "bus lost is node-fatal");
    static const int app[] = {13, 31, 43, 45, 68, 94, 109};
    for (size_t i = 0; i < sizeof app / sizeof app[0]; i++)
        TCHECK(t.cls[app[i]] == ODL_XID_APPLICATION, "Xid %d is an application error", app[i]);
    TCHECK(t.cls[63] == ODL_XID_IGNORE && t.cls[92] == ODL_XID_IGNORE, "63 and 92 are informational");
    TCHECK(t.follows[45] && !t.follows[13], "45 follows another error");
    TCHECK(t.cls[143] == ODL_XID_APPLICATION && t.unknown_cls == ODL_XID_APPLICATION, "unknown codes restart the job");

    /* 45 after 13 on the same GPU belongs to 13; 45 on another GPU stands alone. */
    odl_xid_classifier c;
    odl_xid_table_defaults(&t);
    t.escalate_after = 0;
    odl_xid_classifier_init(&c, &t);
    int kept;
    odl_health_finding f = classify_line(&c, "NVRM: Xid (PCI:0000:3b:00): 13, pid=5, name=p, Graphics", &kept);
    TCHECK(kept && f.cls == ODL_XID_APPLICATION && f.attributed_to == -1, "13: application");
    f = classify_line(&c, "NVRM: Xid (PCI:0000:3b:00): 45, pid=5, name=p, Preemptive cleanup", &kept);
    TCHECK(kept && f.attributed_to == 13 && f.cls == ODL_XID_APPLICATION, "45 after 13 -> attributed %d", f.attributed_to);
    f = classify_line(&c, "NVRM: Xid (PCI:0000:5e:00): 45, pid=5, name=p, Preemptive cleanup", &kept);
    TCHECK(kept && f.attributed_to == -1 && f.cls == ODL_XID_APPLICATION, "45 alone on another GPU: application");
    /* 45 after 79: belongs to the node-fatal error. */
    f = classify_line(&c, "NVRM: Xid (PCI:0000:86:00): 79, pid=5, GPU has fallen off the bus.", &kept);
    TCHECK(kept && f.cls == ODL_XID_NODE_FATAL, "79 node-fatal");
    f = classify_line(&c, "NVRM: Xid (PCI:0000:86:00): 45, pid=5, Preemptive cleanup", &kept);
    TCHECK(kept && f.attributed_to == 79 && f.cls == ODL_XID_NODE_FATAL, "45 after 79 attributed to 79");
    f = classify_line(&c, "NVRM: GPU 0000:86:00.0: GPU has fallen off the bus.", &kept);
    TCHECK(kept && f.attributed_to == 79 && f.cls == ODL_XID_NODE_FATAL, "bus-lost line after 79 is the same event");
    f = classify_line(&c, "NVRM: GPU 0000:87:00.0: GPU has fallen off the bus.", &kept);
    TCHECK(kept && f.attributed_to == -1 && f.cls == ODL_XID_NODE_FATAL, "bus-lost line alone: node-fatal");
    f = classify_line(&c, "NVRM: Xid (PCI:0000:3b:00): 63, pid=5, Row remapping event", &kept);
    TCHECK(kept && f.cls == ODL_XID_IGNORE, "63 informational");
    f = classify_line(&c, "NVRM: Xid (PCI:0000:3b:00): 999, pid=5, something new", &kept);
    TCHECK(kept && f.cls == ODL_XID_APPLICATION, "999 (beyond the table) is unknown -> application");
}

static void test_escalation(void) {
    odl_xid_table t;
    odl_xid_table_defaults(&t);
    t.escalate_after = 3;
    t.escalate_window_s = 60;
    odl_xid_classifier c;
    odl_xid_classifier_init(&c, &t);
    int kept;
    /* Three application Xids within 60 s of log time escalate; the third one is node-fatal. */
    odl_health_finding f = classify_line(&c, "[100.0] NVRM: Xid (PCI:0000:3b:00): 13, pid=1, a", &kept);
    TCHECK(f.cls == ODL_XID_APPLICATION && f.app_count == 1, "1st: app, count %d", f.app_count);
    f = classify_line(&c, "[200.0] NVRM: Xid (PCI:0000:3b:00): 31, pid=1, b", &kept);
    TCHECK(f.cls == ODL_XID_APPLICATION && f.app_count == 1, "2nd, 100 s later: the 1st is outside the window (count %d)",
           f.app_count);
    f = classify_line(&c, "[210.0] NVRM: Xid (PCI:0000:3c:00): 43, pid=1, c", &kept);
    TCHECK(f.cls == ODL_XID_APPLICATION && f.app_count == 2, "3rd: count %d (node-wide)", f.app_count);
    f = classify_line(&c, "[220.0] NVRM: Xid (PCI:0000:3b:00): 13, pid=1, d", &kept);
    TCHECK(f.cls == ODL_XID_NODE_FATAL && f.escalated && f.app_count == 3, "4th: 3 within 60 s -> escalated (count %d)",
           f.app_count);
    char buf[512];
    odl_health_finding_format(&f, buf, sizeof buf);
    TCHECK(strstr(buf, "class=node-fatal") && strstr(buf, "escalated=3"), "format: %s", buf);
    /* 45s do not count toward escalation. */
    odl_xid_classifier_init(&c, &t);
    for (int i = 0; i < 5; i++) {
        f = classify_line(&c, i == 0 ? "NVRM: Xid (PCI:0000:3b:00): 13, pid=1, a" : "NVRM: Xid (PCI:0000:3b:00): 45, pid=1, x",
                          &kept);
        TCHECK(f.cls == ODL_XID_APPLICATION && !f.escalated, "13 then 45s: no escalation (line %d)", i);
    }
    /* Unknown times count without a window. */
    odl_xid_classifier_init(&c, &t);
    for (int i = 0; i < 3; i++) f = classify_line(&c, "NVRM: Xid (PCI:0000:3b:00): 31, pid=1, a", &kept);
    TCHECK(f.escalated, "three untimed application Xids escalate");
    /* Incidents, not lines: one crashing process prints Xid 13 twice (the SM warp exception, the ESR
     * dump) and 43 as its channel is torn down -- one incident; another process's Xid 31 minutes later is
     * a second one: two, under escalate_after 3 (docs/health.md "Escalation"). */
    odl_xid_table_defaults(&t);
    TCHECK(t.escalate_after == 3 && t.incident_window_s == 5, "defaults: escalate_after 3, incident_window_s 5");
    odl_xid_classifier_init(&c, &t);
    f = classify_line(&c, "[300.000000] NVRM: Xid (PCI:0000:3b:00): 13, pid=77, name=python, Graphics SM Warp Exception", &kept);
    TCHECK(f.cls == ODL_XID_APPLICATION && f.attributed_to == -1 && f.app_count == 1, "the crash's first line: incident 1");
    f = classify_line(&c, "[300.000400] NVRM: Xid (PCI:0000:3b:00): 13, pid=77, name=python, Graphics Exception: ESR", &kept);
    TCHECK(f.cls == ODL_XID_APPLICATION && f.attributed_to == 13 && !f.escalated, "its ESR dump: the same incident (%d)",
           f.attributed_to);
    f = classify_line(&c, "[301.200000] NVRM: Xid (PCI:0000:3b:00): 43, pid=77, name=python, Ch 00000010", &kept);
    TCHECK(f.cls == ODL_XID_APPLICATION && f.attributed_to == 13 && !f.escalated, "its channel torn down: the same incident");
    f = classify_line(&c, "[480.000000] NVRM: Xid (PCI:0000:3b:00): 31, pid=91, name=train, MMU Fault", &kept);
    TCHECK(f.cls == ODL_XID_APPLICATION && f.attributed_to == -1 && f.app_count == 2 && !f.escalated,
           "another process's Xid 31 minutes later: incident 2, not escalated (count %d)", f.app_count);
    f = classify_line(&c, "[480.000000] NVRM: Xid (PCI:0000:3b:00): 13, pid=77, name=python, late", &kept);
    TCHECK(f.attributed_to == -1 && f.app_count == 3 && f.escalated,
           "the first process again, past the incident window: incident 3, escalated");
    const char *y = "incident_window_s: 0\n";
    TOK(odl_xid_table_load_yaml_string(&t, y, strlen(y), "inline"));
    TCHECK(t.incident_window_s == 0, "incident_window_s from YAML");
    odl_xid_classifier_init(&c, &t);
    classify_line(&c, "[300.0] NVRM: Xid (PCI:0000:3b:00): 13, pid=77, a", &kept);
    f = classify_line(&c, "[300.1] NVRM: Xid (PCI:0000:3b:00): 13, pid=77, b", &kept);
    TCHECK(f.attributed_to == -1 && f.app_count == 2, "incident_window_s 0: every line counts");
    y = "incident_window_s: soon\n";
    TFAIL(odl_xid_table_load_yaml_string(&t, y, strlen(y), "inline"), ODL_E_FORMAT);
}

static void test_filters(void) {
    odl_xid_classifier c;
    odl_xid_classifier_init(&c, NULL);
    c.since_us = 500 * 1000000LL; /* the job started 500 s after boot */
    int kept;
    classify_line(&c, "[ 499.999999] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.", &kept);
    TCHECK(!kept, "a line from before the job is ignored");
    classify_line(&c, "6,10,499000000,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=1, old", &kept);
    TCHECK(!kept, "a kmsg record from before the job is ignored");
    classify_line(&c, "[ 500.000001] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.", &kept);
    TCHECK(kept, "a line after the start counts");
    classify_line(&c, "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, untimed", &kept);
    TCHECK(kept, "an untimed line counts (cannot tell its age)");

    odl_xid_classifier_init(&c, NULL);
    TOK(odl_pci_parse("00000000:3B:00.0", &c.only));
    c.only_gi = 1;
    classify_line(&c, "NVRM: Xid (PCI:0000:5e:00): 79, pid=1, other GPU", &kept);
    TCHECK(!kept, "another GPU's line is ignored");
    classify_line(&c, "NVRM: Xid (PCI:0000:3b:00 GPU-I:02 GPU-CI:00): 43, pid=1, other MIG instance", &kept);
    TCHECK(!kept, "another MIG instance's line is ignored");
    odl_health_finding f = classify_line(&c, "NVRM: Xid (PCI:0000:3b:00 GPU-I:01 GPU-CI:00): 43, pid=1, ours", &kept);
    TCHECK(kept && f.rec.gpu_instance == 1, "our MIG instance's line counts");
    classify_line(&c, "NVRM: Xid (PCI:0000:3b:00): 48, pid=1, whole GPU", &kept);
    TCHECK(kept, "a line without GPU-I concerns every instance of the GPU");
}

static void test_yaml(void) {
    odl_xid_table t;
    odl_xid_table_defaults(&t);
    const char *y = "node_fatal: [13, \"200-202\"]\napplication: [79]\nignore: [bus_lost]\nfollows: [46]\n"
                    "unknown: node_fatal\nescalate_after: 5\nescalate_window_s: 10.5\n";
    TOK(odl_xid_table_load_yaml_string(&t, y, strlen(y), "t.yaml"));
    TCHECK(t.cls[13] == ODL_XID_NODE_FATAL && t.cls[200] == ODL_XID_NODE_FATAL && t.cls[202] == ODL_XID_NODE_FATAL &&
               t.cls[203] == ODL_XID_APPLICATION,
           "node_fatal overrides and ranges");
    TCHECK(t.cls[79] == ODL_XID_APPLICATION && t.cls[ODL_XID_BUS_LOST] == ODL_XID_IGNORE, "application/ignore overrides");
    TCHECK(t.cls[48] == ODL_XID_NODE_FATAL, "codes not listed keep their default");
    TCHECK(t.follows[46] && t.follows[45], "follows adds");
    TCHECK(t.unknown_cls == ODL_XID_NODE_FATAL && t.escalate_after == 5 && t.escalate_window_s == 10.5, "scalars");
    odl_xid_table before = t;
    const char *bad[] = {"node_fatal: [abc]\n", "node_fatal: 13\n", "nodefatal: [13]\n", "unknown: maybe\n",
                         "escalate_after: -1\n", "node_fatal: [0]\n", "application: [\"9-3\"]\n", "[1, 2]\n",
                         "node_fatal: [13\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        TFAIL(odl_xid_table_load_yaml_string(&t, bad[i], strlen(bad[i]), "bad.yaml"), ODL_E_FORMAT);
        TCHECK(strstr(odl_error_msg(), "bad.yaml"), "message names the file: %s", odl_error_msg());
    }
    TCHECK(!memcmp(&before, &t, sizeof t), "a failed load changes nothing");
    /* partial failure: the first key is fine, the second is bad -> nothing applied */
    const char *half = "node_fatal: [31]\nignore: [x]\n";
    TFAIL(odl_xid_table_load_yaml_string(&t, half, strlen(half), "half.yaml"), ODL_E_FORMAT);
    TCHECK(t.cls[31] == before.cls[31], "all or nothing");
    TFAIL(odl_xid_table_load_yaml(&t, "/nonexistent/table.yaml"), ODL_E_IO);
}

static void test_fault(void) {
    odl_fault_xid f;
    TCHECK(odl_fault_xid_parse("xid79@rank=1,step=10", &f) == 1 && f.xid == 79 && f.rank == 1 && f.step == 10, "xid79");
    TCHECK(odl_fault_xid_parse("kill@rank=0,step=3;xid13@step=5", &f) == 1 && f.xid == 13 && f.rank == -1 && f.step == 5,
           "xid among other faults");
    TCHECK(odl_fault_xid_parse("xid48", &f) == ODL_E_CONFIG, "bare xid48: every kind is ACTION@...,step=S");
    TCHECK(odl_fault_xid_parse("kill@rank=0,step=3", &f) == 0, "no xid fault");
    TCHECK(odl_fault_xid_parse(NULL, &f) == 0, "unset");
    TCHECK(odl_fault_xid_parse("xid79@rank=1,stp=10", &f) == ODL_E_CONFIG, "unknown key");
    TCHECK(odl_fault_xid_parse("xid79@rank=x", &f) == ODL_E_CONFIG, "bad value");
    TCHECK(odl_fault_xid_parse("xid79junk", &f) == ODL_E_CONFIG, "junk");
    /* The injected line goes through the real parser. */
    odl_fault_xid g = {79, 1, 10};
    odl_pci_id pci;
    TOK(odl_pci_parse("0000:3b:00.0", &pci));
    char line[256];
    odl_fault_xid_line(&g, &pci, line, sizeof line);
    odl_xid_record r;
    TCHECK(odl_xid_parse_line(line, &r) == 1 && r.xid == 79 && odl_pci_eq(&r.pci, &pci), "injected line parses: %s", line);
}

/* A log is untrusted text: mutated real lines and random bytes never crash the parser (run under
 * ODL_ASAN to check bounds), and whatever parses has a sane record. */
static void test_garbage(void) {
    uint32_t seed = 12345;
    char line[300];
    int parsed = 0;
    for (int iter = 0; iter < 200000; iter++) {
        const char *base = k_lines[iter % (sizeof k_lines / sizeof k_lines[0])].line;
        size_t n = strlen(base);
        if (n >= sizeof line) n = sizeof line - 1;
        memcpy(line, base, n);
        line[n] = '\0';
        int muts = 1 + iter % 4;
        for (int k = 0; k < muts && n > 0; k++) {
            seed = seed * 1664525u + 1013904223u;
            size_t at = (seed >> 8) % n;
            seed = seed * 1664525u + 1013904223u;
            int kind = (int)((seed >> 12) % 3);
            if (kind == 0) line[at] = (char)(seed >> 20); /* any byte, NUL included: cuts the line */
            else if (kind == 1) line[at] = "():,.=' \t0123456789abcdefPCIGU-"[(seed >> 20) % 32];
            else { line[at] = '\0'; n = at; }
        }
        odl_xid_record r;
        if (odl_xid_parse_line(line, &r)) {
            parsed++;
            if (r.xid < 0 || r.xid > 100000 || r.text[sizeof r.text - 1] || r.name[sizeof r.name - 1]) {
                TCHECK(0, "bad record from '%s'", line);
                break;
            }
        }
    }
    TCHECK(parsed > 1000, "mutated lines still parse often (%d)", parsed);
}

int main(void) {
    test_lines();
    test_garbage();
    test_pci();
    test_classes();
    test_escalation();
    test_filters();
    test_yaml();
    test_fault();
    return odl_test_finish("test_health_xid");
}
