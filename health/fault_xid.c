/* The xidNN form of ODL_FAULT ("xid79@rank=1,step=10"). The other fault kinds (kill, hang, exit)
 * have their own parser in the coordinator work; this one only picks out xid faults. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "odl/health.h"

static int parse_one(const char *s, size_t n, odl_fault_xid *out) {
    char tmp[128];
    if (n >= sizeof tmp) return ODL_ERR(ODL_E_CONFIG, "ODL_FAULT: fault '%.*s' is too long", (int)n, s);
    memcpy(tmp, s, n);
    tmp[n] = '\0';
    odl_fault_xid f = {.xid = 0, .rank = -1, .step = 0};
    char *p = tmp + 3, *end;
    long x = strtol(p, &end, 10);
    if (end == p || x < 1 || x > 100000)
        return ODL_ERR(ODL_E_CONFIG, "ODL_FAULT: '%s': want xidNN@rank=R,step=S (NN an Xid code)", tmp);
    f.xid = (int)x;
    p = end;
    if (*p == '@') {
        p++;
        while (*p) {
            char *comma = strchr(p, ',');
            if (comma) *comma = '\0';
            char *eq = strchr(p, '=');
            long long v = 0;
            if (eq) {
                v = strtoll(eq + 1, &end, 10);
                if (end == eq + 1 || *end || v < 0) eq = NULL;
            }
            if (!eq) return ODL_ERR(ODL_E_CONFIG, "ODL_FAULT: '%s': '%s' is not key=N", s, p);
            *eq = '\0';
            if (!strcmp(p, "rank")) f.rank = (int)v;
            else if (!strcmp(p, "step")) f.step = v;
            else return ODL_ERR(ODL_E_CONFIG, "ODL_FAULT: xid fault: unknown key '%s' (rank, step)", p);
            if (!comma) break;
            p = comma + 1;
        }
    } else if (*p) {
        return ODL_ERR(ODL_E_CONFIG, "ODL_FAULT: '%s': want xidNN@rank=R,step=S", tmp);
    }
    *out = f;
    return 1;
}

int odl_fault_xid_parse(const char *spec, odl_fault_xid *out) {
    if (!spec) return 0;
    const char *p = spec;
    while (*p) {
        while (*p == ';' || isspace((unsigned char)*p)) p++;
        if (!*p) break;
        size_t n = strcspn(p, "; \t");
        if (n > 3 && !strncmp(p, "xid", 3) && isdigit((unsigned char)p[3])) return parse_one(p, n, out);
        p += n;
    }
    return 0;
}

void odl_fault_xid_line(const odl_fault_xid *f, const odl_pci_id *pci, char *buf, size_t cap) {
    odl_pci_id none = {0, 0, 0, 0, 1};
    const odl_pci_id *id = pci && pci->valid ? pci : &none;
    /* The driver's own format, so that the injected line takes the parser's real path. */
    snprintf(buf, cap, "NVRM: Xid (PCI:%04x:%02x:%02x): %d, pid=%d, name=odl_worker, injected by ODL_FAULT",
             (unsigned)(id->domain & 0xffff), id->bus, id->device, f->xid, (int)getpid());
}
