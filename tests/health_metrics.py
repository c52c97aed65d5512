#!/usr/bin/env python3
"""The coordinator's /metrics after a rank reported an injected Xid, read with prometheus_client's
text-format parser (tests/health_supervised.sh):  health_metrics.py HTTPHOST:PORT NODE XID CLASS
Asserts odl_gpu_xid_errors_total{Hostname=NODE,xid=XID,class=CLASS} == 1 (a counter per code, with
dcgm-exporter's labels) and odl_gpu_healthy == 0 for that GPU when the class is node-fatal, and then
odl_fenced_nodes == 1 with odl_node_fenced{node=NODE,xid=XID} == 1 (none fenced otherwise)."""
import sys
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

host, node, xid, cls = sys.argv[1:5]
with urllib.request.urlopen(f"http://{host}/metrics", timeout=5) as r:
    text = r.read().decode()
fams = {f.name: f for f in text_string_to_metric_families(text)}
fail = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        fail.append(what)


xids = fams.get("odl_gpu_xid_errors")
check(xids is not None and xids.type == "counter", "odl_gpu_xid_errors_total is a counter family")
got = [s for s in (xids.samples if xids else []) if s.name == "odl_gpu_xid_errors_total" and
       s.labels.get("Hostname") == node and s.labels.get("xid") == xid and s.labels.get("class") == cls]
check(len(got) == 1 and got[0].value == 1, f"one Xid {xid} ({cls}) counted on {node}: {[s.value for s in got]}")
check(all(k in (got[0].labels if got else {}) for k in ("gpu", "UUID", "pci_bus_id", "Hostname")),
      "dcgm-exporter's labels gpu, UUID, pci_bus_id, Hostname")
healthy = [s.value for s in fams["odl_gpu_healthy"].samples if s.labels.get("Hostname") == node] \
    if "odl_gpu_healthy" in fams else []
check(healthy == [0 if cls == "node-fatal" else 1], f"odl_gpu_healthy of {node}'s GPU: {healthy}")
fenced = [s.value for s in fams["odl_fenced_nodes"].samples] if "odl_fenced_nodes" in fams else []
node_fenced = [(s.labels, s.value) for s in fams["odl_node_fenced"].samples] if "odl_node_fenced" in fams else []
if cls == "node-fatal":
    check(fenced == [1] and node_fenced == [({"node": node, "xid": xid}, 1)],
          f"odl_fenced_nodes {fenced}, odl_node_fenced {node_fenced}: {node} fenced for Xid {xid}")
else:
    check(fenced == [0] and node_fenced == [], f"no fence: odl_fenced_nodes {fenced}, odl_node_fenced {node_fenced}")
check("odl_generation" in fams, "the coordinator's own families are still there")
print("health_metrics: " + ("ok" if not fail else f"{len(fail)} failed"))
sys.exit(1 if fail else 0)
