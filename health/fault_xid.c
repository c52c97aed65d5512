/* The xidNN form of ODL_FAULT ("xid79@rank=1,step=10"): its entry of the one ODL_FAULT parser
 * (core/fault.c), and the driver line it injects. */
#include <stdio.h>
#include <unistd.h>

#include "odl/fault.h"
#include "odl/health.h"

int odl_fault_xid_parse(const char *spec, odl_fault_xid *out) {
    odl_fault_plan plan;
    odl_status st = odl_fault_parse(spec, &plan);
    if (st != ODL_OK) return st;
    for (int i = 0; i < plan.n; i++) {
        if (plan.f[i].action != ODL_FAULT_XID) continue;
        out->xid = plan.f[i].xid;
        out->rank = plan.f[i].rank;
        out->step = plan.f[i].step;
        return 1;
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
