#!/usr/bin/env python3
"""The coordinator's /metrics for a 2-rank CPU job whose health monitors watch the stand-in NVML's GPUs
(tests/fake_nvml.c, steady build) through ODL_HEALTH_GPU, read with prometheus_client's text-format
parser (tests/health_telemetry.sh):  health_telemetry.py HTTPHOST:PORT HOSTNAME

Polls (60 s at most) until both ranks' telemetry and rank 1's injected Xid 13 are there, then asserts:
dcgm-exporter's families (NVIDIA dcgm-exporter etc/default-counters.csv: DCGM_FI_DEV_GPU_UTIL,
DCGM_FI_DEV_FB_USED, DCGM_FI_DEV_GPU_TEMP, DCGM_FI_DEV_POWER_USAGE, DCGM_FI_DEV_SM_CLOCK; and DCGM's
DCGM_FI_DEV_FB_TOTAL) are gauges with the fake's readings and the labels gpu, UUID, pci_bus_id, modelName,
Hostname of each rank's GPU (from the rank's Hello; rank 0 watches NVML's GPU 1 and rank 1 GPU 0, so the gpu
label is NVML's index, not the coordinator's order of ranks); GPU 1's temperature, which the fake reports
as 0xFFFFFFFF, has no sample (never 4294967295, never NaN); the ECC and row-remap families, not
supported by the fake, are absent; odl_gpu_xid_errors_total counts one Xid 13 (application) on rank 1's GPU 0
only; odl_gpu_healthy is 1 for both."""
import math
import sys
import time
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

host, node = sys.argv[1:3]
# tests/fake_nvml.c (FAKE_NVML_STEADY): per GPU, the readings each family may show
GPUS = [
    {"gpu": "0", "UUID": "GPU-fake-0", "pci_bus_id": "0000:3b:00.0",
     "want": {"DCGM_FI_DEV_GPU_UTIL": {94, 80}, "DCGM_FI_DEV_FB_USED": {3000, 2000}, "DCGM_FI_DEV_FB_TOTAL": {81559},
              "DCGM_FI_DEV_GPU_TEMP": {51}, "DCGM_FI_DEV_POWER_USAGE": {231.5}, "DCGM_FI_DEV_SM_CLOCK": {1980}}},
    {"gpu": "1", "UUID": "GPU-fake-1", "pci_bus_id": "0000:5e:00.0",
     "want": {"DCGM_FI_DEV_GPU_UTIL": {44, 40}, "DCGM_FI_DEV_FB_USED": {1500, 1000}, "DCGM_FI_DEV_FB_TOTAL": {81559},
              "DCGM_FI_DEV_GPU_TEMP": None, "DCGM_FI_DEV_POWER_USAGE": {118.25}, "DCGM_FI_DEV_SM_CLOCK": {1755}}},
]
ABSENT = ["DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
          "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_ROW_REMAP_FAILURE"]


def scrape():
    with urllib.request.urlopen(f"http://{host}/metrics", timeout=5) as r:
        text = r.read().decode()
    return text, {f.name: f for f in text_string_to_metric_families(text)}


def ready(fams):
    util = fams.get("DCGM_FI_DEV_GPU_UTIL")
    xids = fams.get("odl_gpu_xid_errors")
    return util is not None and len(util.samples) == 2 and xids is not None and \
        any(s.labels.get("xid") == "13" for s in xids.samples)


deadline = time.monotonic() + 60
text, fams = scrape()
while not ready(fams) and time.monotonic() < deadline:
    time.sleep(0.1)
    text, fams = scrape()
fail = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        fail.append(what)


check(ready(fams), "both ranks' telemetry and the Xid 13 counter appeared within 60 s")


def samples(name, gpu):
    f = fams.get(name)
    return [s for s in (f.samples if f else []) if s.labels.get("UUID") == gpu["UUID"]]


for g in GPUS:
    for name, want in g["want"].items():
        got = samples(name, g)
        if want is None:
            check(got == [], f"{name} of {g['UUID']} (fake: 0xFFFFFFFF, unavailable) has no sample: {got}")
            continue
        check(fams.get(name) is not None and fams[name].type == "gauge", f"{name} is a gauge family")
        check(len(got) == 1 and got[0].value in want, f"{name} of {g['UUID']}: {[s.value for s in got]} in {want}")
        lab = got[0].labels if got else {}
        check(all(lab.get(k) == g[k] for k in ("gpu", "UUID", "pci_bus_id")) and lab.get("Hostname") == node and
              lab.get("modelName") == "Fake H200",
              f"{name} of {g['UUID']}: labels gpu={lab.get('gpu')} pci_bus_id={lab.get('pci_bus_id')} "
              f"modelName={lab.get('modelName')} Hostname={lab.get('Hostname')} (want {g['gpu']}, {g['pci_bus_id']}, "
              f"Fake H200, {node})")
for name in ABSENT:
    check(name not in fams, f"{name} (not supported by the fake) is absent")
bad = [(s.name, s.value) for f in fams.values() for s in f.samples
       if s.name.startswith("DCGM_") and (math.isnan(s.value) or s.value >= 4294967.0)]
check(bad == [], f"no unavailable reading printed as a number or NaN: {bad}")
check("4294967295" not in text, "the text holds no 4294967295")

xids = fams.get("odl_gpu_xid_errors")
check(xids is not None and xids.type == "counter", "odl_gpu_xid_errors_total is a counter family")
xs = [s for s in (xids.samples if xids else []) if s.name == "odl_gpu_xid_errors_total"]
x13 = [s for s in xs if s.labels.get("xid") == "13"]
check(len(x13) == 1 and x13[0].value == 1 and x13[0].labels.get("class") == "application",
      f"one Xid 13 (application) counted: {[(s.labels, s.value) for s in x13]}")
lab = x13[0].labels if x13 else {}
check(lab.get("UUID") == "GPU-fake-0" and lab.get("pci_bus_id") == "0000:3b:00.0" and lab.get("gpu") == "0" and
      lab.get("Hostname") == node, f"the Xid is rank 1's GPU's (labels {lab})")
check(len(xs) == 1, f"no other Xid counted: {[(s.labels.get('UUID'), s.labels.get('xid')) for s in xs]}")
healthy = {s.labels.get("UUID"): s.value for s in fams["odl_gpu_healthy"].samples} if "odl_gpu_healthy" in fams else {}
check(healthy == {"GPU-fake-0": 1, "GPU-fake-1": 1}, f"odl_gpu_healthy: {healthy}")
print("health_telemetry: " + ("ok" if not fail else f"{len(fail)} failed"))
sys.exit(1 if fail else 0)
