/* Kernel-log Xid lines: PCI ids, parsing, the default class table and classification.
 * Line formats: NVIDIA's open kernel modules print "NVRM: Xid (PCI:%04x:%02x:%02x[ GPU-I:%02u
 * GPU-CI:%02u]): %d, pid=%s, name=%s, %s" (src/nvidia/src/kernel/gpu/rc); older drivers omit "PCI:",
 * pid and name. Classes and their sources: docs/health.md. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "odl/health.h"

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    c = tolower(c);
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* Reads up to max hex digits; returns the count read (0 on none). */
static int read_hex(const char **p, int max, uint32_t *v) {
    int n = 0;
    uint32_t x = 0;
    while (n < max && hexval((unsigned char)**p) >= 0) {
        x = x * 16 + (uint32_t)hexval((unsigned char)**p);
        (*p)++;
        n++;
    }
    *v = x;
    return n;
}

/* Parses a PCI id at *p, advancing past it. Returns 1 on success. */
static int pci_scan(const char **pp, odl_pci_id *out) {
    const char *p = *pp;
    if (!strncasecmp(p, "PCI:", 4)) p += 4;
    uint32_t a = 0, b = 0, c = 0, f = 0;
    int na = read_hex(&p, 8, &a);
    if (!na || *p != ':') return 0;
    p++;
    int nb = read_hex(&p, 2, &b);
    if (!nb) return 0;
    odl_pci_id id = {0};
    if (*p == ':') { /* domain:bus:device */
        p++;
        if (!read_hex(&p, 2, &c)) return 0;
        id.domain = a;
        id.bus = (uint8_t)b;
        id.device = (uint8_t)c;
    } else { /* bus:device */
        if (na > 2) return 0;
        id.bus = (uint8_t)a;
        id.device = (uint8_t)b;
    }
    if (*p == '.') {
        const char *q = p + 1;
        if (read_hex(&q, 1, &f)) p = q;
    }
    if (hexval((unsigned char)*p) >= 0) return 0; /* trailing digits: not an id */
    id.function = (uint8_t)f;
    id.valid = 1;
    *out = id;
    *pp = p;
    return 1;
}

odl_status odl_pci_parse(const char *s, odl_pci_id *out) {
    if (!s || !out) return ODL_ERR(ODL_E_INVAL, "odl_pci_parse: NULL argument");
    const char *p = s;
    while (isspace((unsigned char)*p)) p++;
    if (!pci_scan(&p, out)) return ODL_ERR(ODL_E_FORMAT, "'%s' is not a PCI bus id (want 0000:3b:00.0)", s);
    while (isspace((unsigned char)*p)) p++;
    if (*p) return ODL_ERR(ODL_E_FORMAT, "'%s' is not a PCI bus id (trailing '%s')", s, p);
    return ODL_OK;
}

char *odl_pci_format(const odl_pci_id *id, char buf[ODL_PCI_STR_LEN]) {
    if (!id || !id->valid) snprintf(buf, ODL_PCI_STR_LEN, "unknown");
    else snprintf(buf, ODL_PCI_STR_LEN, "%04x:%02x:%02x.%x", (unsigned)(id->domain & 0xffff), id->bus, id->device,
                  id->function & 7);
    return buf;
}

int odl_pci_eq(const odl_pci_id *a, const odl_pci_id *b) {
    return a->valid && b->valid && a->domain == b->domain && a->bus == b->bus && a->device == b->device &&
           a->function == b->function;
}

/* ---- parsing ---- */

static void copy_trim(char *dst, size_t cap, const char *src, size_t n) {
    while (n && isspace((unsigned char)*src)) src++, n--;
    while (n && isspace((unsigned char)src[n - 1])) n--;
    if (n >= cap) n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* Timestamp and message start of a log line. */
static const char *split_prefix(const char *line, int64_t *ts_us) {
    *ts_us = -1;
    const char *p = line;
    /* /dev/kmsg: "prio,seq,usec,flags[,...];message" */
    if (isdigit((unsigned char)*p)) {
        const char *q = p;
        int fields = 0;
        long long v[3] = {0, 0, 0};
        while (fields < 3 && isdigit((unsigned char)*q)) {
            char *end;
            v[fields] = strtoll(q, &end, 10);
            q = end;
            fields++;
            if (*q != ',') break;
            q++;
        }
        const char *semi = strchr(q, ';');
        if (fields == 3 && semi) {
            *ts_us = v[2];
            return semi + 1;
        }
    }
    const char *nv = strstr(line, "NVRM:");
    if (!nv) return line;
    /* dmesg "[ 1234.567890] " (possibly after a syslog prefix): the last '[' before NVRM. */
    const char *br = NULL;
    for (const char *q = line; q < nv; q++)
        if (*q == '[') br = q;
    if (br) {
        const char *q = br + 1;
        while (*q == ' ') q++;
        char *end;
        long long sec = strtoll(q, &end, 10);
        if (end != q && *end == '.') {
            const char *f = end + 1;
            long long us = 0;
            int nd = 0;
            while (isdigit((unsigned char)*f) && nd < 6) us = us * 10 + (*f++ - '0'), nd++;
            while (isdigit((unsigned char)*f)) f++;
            for (; nd < 6; nd++) us *= 10;
            while (*f == ' ') f++;
            if (*f == ']') *ts_us = sec * 1000000 + us;
        }
    }
    return nv;
}

/* "pid=1234", "pid='<unknown>'", "name=python3", "name='x'" at *p; advances past the field and the
 * following ", ". */
static int take_field(const char **pp, const char *key, char *val, size_t cap) {
    const char *p = *pp;
    size_t kl = strlen(key);
    if (strncmp(p, key, kl) != 0 || p[kl] != '=') return 0;
    p += kl + 1;
    const char *v = p;
    while (*p && *p != ',') p++;
    size_t n = (size_t)(p - v);
    if (n >= 2 && (v[0] == '\'' || v[0] == '"') && v[n - 1] == v[0]) v++, n -= 2;
    copy_trim(val, cap, v, n);
    if (*p == ',') p++;
    while (*p == ' ') p++;
    *pp = p;
    return 1;
}

static void record_init(odl_xid_record *r, int64_t ts) {
    memset(r, 0, sizeof *r);
    r->gpu_instance = r->compute_instance = -1;
    r->pid = -1;
    r->ts_us = ts;
}

static int parse_xid(const char *msg, int64_t ts, odl_xid_record *out) {
    const char *p = msg + 9; /* "NVRM: Xid" */
    while (*p == ' ') p++;
    if (*p != '(') return 0;
    p++;
    odl_xid_record r;
    record_init(&r, ts);
    if (!pci_scan(&p, &r.pci)) return 0;
    /* MIG attribution inside the parentheses: " GPU-I:05 GPU-CI:01" (also "GI:", "CI:"). */
    while (*p && *p != ')') {
        while (*p == ' ' || *p == ',') p++;
        int *dst = NULL;
        if (!strncmp(p, "GPU-I:", 6)) dst = &r.gpu_instance, p += 6;
        else if (!strncmp(p, "GPU-CI:", 7)) dst = &r.compute_instance, p += 7;
        else if (!strncmp(p, "GI:", 3)) dst = &r.gpu_instance, p += 3;
        else if (!strncmp(p, "CI:", 3)) dst = &r.compute_instance, p += 3;
        if (dst && isdigit((unsigned char)*p)) {
            *dst = (int)strtol(p, (char **)&p, 10);
        } else {
            while (*p && *p != ' ' && *p != ')') p++;
        }
    }
    if (*p != ')') return 0;
    p++;
    if (*p != ':') return 0;
    p++;
    while (*p == ' ') p++;
    if (!isdigit((unsigned char)*p)) return 0;
    long code = strtol(p, (char **)&p, 10);
    if (code <= 0 || code > 100000) return 0;
    r.xid = (int)code;
    if (*p == ',') p++;
    while (*p == ' ') p++;
    char pid[32] = "";
    for (int k = 0; k < 2; k++) {
        if (take_field(&p, "pid", pid, sizeof pid)) continue;
        if (take_field(&p, "name", r.name, sizeof r.name)) continue;
    }
    if (pid[0] && isdigit((unsigned char)pid[0])) r.pid = atoi(pid);
    if (!strcmp(r.name, "<unknown>")) r.name[0] = '\0';
    copy_trim(r.text, sizeof r.text, p, strlen(p));
    *out = r;
    return 1;
}

/* "NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus." / "NVRM: GPU at PCI:0000:3b:00.0 has fallen
 * off the bus." / "NVRM: The NVIDIA GPU 0000:3b:00.0 ... has fallen off the bus": the first PCI id. */
static int parse_bus_lost(const char *msg, int64_t ts, odl_xid_record *out) {
    if (!strstr(msg, "fallen off the bus")) return 0;
    odl_xid_record r;
    record_init(&r, ts);
    for (const char *p = msg + 5; *p; p++) {
        if (p[-1] != ' ' && p[-1] != '(') continue;
        const char *q = p;
        if (pci_scan(&q, &r.pci)) break;
    }
    r.xid = ODL_XID_BUS_LOST;
    copy_trim(r.text, sizeof r.text, msg + 5, strlen(msg + 5));
    *out = r;
    return 1;
}

int odl_xid_parse_line(const char *line, odl_xid_record *out) {
    if (!line || !out) return 0;
    int64_t ts;
    const char *msg = split_prefix(line, &ts);
    msg = strstr(msg, "NVRM:");
    if (!msg) return 0;
    if (!strncmp(msg, "NVRM: Xid", 9)) return parse_xid(msg, ts, out);
    return parse_bus_lost(msg, ts, out);
}

/* ---- table ---- */

const char *odl_xid_class_name(odl_xid_class c) {
    switch (c) {
    case ODL_XID_IGNORE: return "ignore";
    case ODL_XID_APPLICATION: return "application";
    case ODL_XID_NODE_FATAL: return "node-fatal";
    }
    return "?";
}

void odl_xid_table_defaults(odl_xid_table *t) {
    memset(t, 0, sizeof *t);
    /* Unknown codes: the job restarts (NVIDIA's catalog lists most codes as driver or application
     * errors); repeats escalate like any application error. */
    memset(t->cls, ODL_XID_APPLICATION, sizeof t->cls);
    t->unknown_cls = ODL_XID_APPLICATION;
    /* Node-fatal: hardware, bus, NVLink or memory faults that need a GPU reset or a repair (NVIDIA's
     * Xid catalog "reset GPU"/"contact support"; gpud's reboot/hw-inspection set; GCM). */
    static const int fatal[] = {ODL_XID_BUS_LOST, 44, 48, 62, 64, 74, 79, 95, 119, 120, 140};
    for (size_t i = 0; i < sizeof fatal / sizeof fatal[0]; i++) t->cls[fatal[i]] = ODL_XID_NODE_FATAL;
    for (int x = 144; x <= 150; x++) t->cls[x] = ODL_XID_NODE_FATAL;
    /* Application: the job's own faults (k8s-device-plugin's skipped Xids 13, 31, 43, 45, 68, 109). */
    static const int app[] = {13, 31, 43, 45, 68, 94, 109};
    for (size_t i = 0; i < sizeof app / sizeof app[0]; i++) t->cls[app[i]] = ODL_XID_APPLICATION;
    /* Informational: ECC page retirement / row-remap recorded (63), high single-bit ECC rate (92). */
    t->cls[63] = ODL_XID_IGNORE;
    t->cls[92] = ODL_XID_IGNORE;
    /* Xid 45: "preemptive cleanup, due to previous errors" - it follows the error that caused it. */
    t->follows[45] = 1;
    t->escalate_after = 3;
    t->escalate_window_s = 3600;
    t->incident_window_s = 5; /* one crash's lines come within a second of each other */
}

/* ---- classification ---- */

void odl_xid_classifier_init(odl_xid_classifier *c, const odl_xid_table *t) {
    memset(c, 0, sizeof *c);
    if (t) c->table = *t;
    else odl_xid_table_defaults(&c->table);
    c->only_gi = -1;
}

static int last_slot(odl_xid_classifier *c, const odl_pci_id *pci, int create) {
    for (int i = 0; i < c->n_last; i++)
        if (c->last[i].pci.valid == pci->valid && (!pci->valid || odl_pci_eq(&c->last[i].pci, pci))) return i;
    if (!create) return -1;
    int n = (int)(sizeof c->last / sizeof c->last[0]);
    int i = c->n_last < n ? c->n_last++ : n - 1;
    c->last[i].pci = *pci;
    c->last[i].xid = -1;
    return i;
}

static odl_xid_class class_of(const odl_xid_table *t, int xid) {
    if (xid < 0 || xid >= ODL_XID_TABLE_SIZE) return (odl_xid_class)t->unknown_cls;
    return (odl_xid_class)t->cls[xid];
}

/* The ring slot of the counted incident that rec belongs to (the same process, known times within
 * incident_window_s of the incident's first line), or -1. */
static int same_incident(const odl_xid_classifier *c, const odl_xid_record *rec) {
    const double w = c->table.incident_window_s;
    if (w <= 0 || rec->pid < 0 || rec->ts_us < 0) return -1;
    int n = c->n_app < ODL_XID_HISTORY ? c->n_app : ODL_XID_HISTORY;
    for (int i = 0; i < n; i++)
        if (c->app_pid[i] == rec->pid && c->app_ts[i] >= 0 && rec->ts_us >= c->app_ts[i] &&
            (double)(rec->ts_us - c->app_ts[i]) <= w * 1e6)
            return i;
    return -1;
}

int odl_xid_classify(odl_xid_classifier *c, const odl_xid_record *rec, odl_health_finding *out) {
    if (rec->ts_us >= 0 && c->since_us > 0 && rec->ts_us < c->since_us) return 0;
    if (c->only.valid && rec->pci.valid && !odl_pci_eq(&c->only, &rec->pci)) return 0;
    /* A line of another MIG instance; a line without GPU-I concerns the whole GPU and counts. */
    if (c->only_gi >= 0 && rec->gpu_instance >= 0 && rec->gpu_instance != c->only_gi) return 0;
    memset(out, 0, sizeof *out);
    out->rec = *rec;
    out->attributed_to = -1;
    const odl_xid_table *t = &c->table;
    int follows = rec->xid >= 0 && rec->xid < ODL_XID_TABLE_SIZE && t->follows[rec->xid];
    int slot = last_slot(c, &rec->pci, 1);
    int prev = c->last[slot].xid;
    if (follows && prev >= 0) {
        out->attributed_to = prev;
        out->cls = class_of(t, prev); /* acted upon with its predecessor: attributed_to says so */
        return 1;
    }
    if (rec->xid == ODL_XID_BUS_LOST && prev == 79) { /* the driver prints both for one event */
        out->attributed_to = 79;
        out->cls = ODL_XID_NODE_FATAL;
        return 1;
    }
    if (!follows) c->last[slot].xid = rec->xid;
    out->cls = class_of(t, rec->xid);
    if (out->cls == ODL_XID_APPLICATION) {
        int first = same_incident(c, rec);
        if (first >= 0) { /* a further line of an incident already counted: acted upon with it */
            out->attributed_to = c->app_xid[first];
            return 1;
        }
        c->app_ts[c->n_app % ODL_XID_HISTORY] = rec->ts_us;
        c->app_pid[c->n_app % ODL_XID_HISTORY] = rec->pid;
        c->app_xid[c->n_app % ODL_XID_HISTORY] = rec->xid;
        c->n_app++;
        int n = c->n_app < ODL_XID_HISTORY ? c->n_app : ODL_XID_HISTORY;
        int count = 0;
        for (int i = 0; i < n; i++) {
            int64_t ts = c->app_ts[i];
            if (t->escalate_window_s <= 0 || ts < 0 || rec->ts_us < 0 ||
                (double)(rec->ts_us - ts) <= t->escalate_window_s * 1e6)
                count++;
        }
        out->app_count = count;
        if (t->escalate_after > 0 && count >= t->escalate_after) {
            out->cls = ODL_XID_NODE_FATAL;
            out->escalated = 1;
        }
    }
    return 1;
}

const char *odl_xid_code_str(int xid, char buf[16]) {
    if (xid == ODL_XID_BUS_LOST) snprintf(buf, 16, "bus_lost");
    else snprintf(buf, 16, "%d", xid);
    return buf;
}

char *odl_health_finding_format(const odl_health_finding *f, char *buf, size_t cap) {
    char pci[ODL_PCI_STR_LEN], code[16];
    odl_pci_format(&f->rec.pci, pci);
    int n = snprintf(buf, cap, "xid=%s", odl_xid_code_str(f->rec.xid, code));
    size_t off = n > 0 && (size_t)n < cap ? (size_t)n : cap - 1;
#define APPEND(...)                                                                                                    \
    do {                                                                                                               \
        int k_ = snprintf(buf + off, cap - off, __VA_ARGS__);                                                         \
        if (k_ > 0) off = off + (size_t)k_ < cap ? off + (size_t)k_ : cap - 1;                                          \
    } while (0)
    APPEND(" pci=%s class=%s", pci, odl_xid_class_name(f->cls));
    if (f->rec.gpu_instance >= 0) APPEND(" gpu_instance=%d", f->rec.gpu_instance);
    if (f->rec.compute_instance >= 0) APPEND(" compute_instance=%d", f->rec.compute_instance);
    if (f->attributed_to >= 0) APPEND(" follows=%d", f->attributed_to);
    if (f->escalated) APPEND(" escalated=%d_application_xids", f->app_count);
    if (f->rec.pid >= 0) APPEND(" pid=%d", f->rec.pid);
    if (f->rec.name[0]) APPEND(" name=%s", f->rec.name);
    if (f->rec.ts_us >= 0) APPEND(" t=%.6f", (double)f->rec.ts_us / 1e6);
    if (f->rec.text[0]) APPEND(" msg=\"%s\"", f->rec.text);
#undef APPEND
    return buf;
}
