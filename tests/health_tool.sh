#!/bin/sh
# odl_health's exit statuses and output on kernel logs made here, its fence commands, `gpu` and `events`
# without NVML (3) and against the stand-in NVML (tests/fake_nvml.c: one GPU lost -> 2), and the
# Prometheus text of `gpu --prometheus` parsed by prometheus_client; against the stand-in whose every
# reading is NVML's "not available" value (FAKE_NVML_SENTINEL): no number printed or exported for any
# of them, and no "healthy" verdict on the strength of one (1, needs attention).
#   tests/health_tool.sh ODL_HEALTH FAKE_NVML_LIB FAKE_NVML_SENTINEL_LIB
set -u
bin="$1"
fake="$2"
sentinel="$3"
tmp=$(mktemp -d /tmp/odl_health_tool.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { # name, want status, got status
    if [ "$2" != "$3" ]; then
        echo "FAIL: $1: exit status $3, want $2"
        fail=1
    fi
}
has() { # name, file, fixed string
    if ! grep -qF -- "$3" "$2"; then
        echo "FAIL: $1: no '$3' in:"
        cat "$2"
        fail=1
    fi
}

cat >"$tmp/healthy.log" <<'L'
[    1.000000] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.104.05
[    2.000000] NVRM: GPU at PCI:0000:3b:00: GPU-6e3a0d5b-0000-0000-0000-000000000000
[    3.000000] NVRM: Xid (PCI:0000:3b:00): 63, pid=1, Row remapping event
L
cat >"$tmp/app.log" <<'L'
[  100.000000] NVRM: Xid (PCI:0000:3b:00): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp Exception
[  100.100000] NVRM: Xid (PCI:0000:3b:00): 45, pid=12, name=python3, Preemptive cleanup, due to previous errors
L
cat >"$tmp/fatal.log" <<'L'
6,1,100000000,-;NVRM: Xid (PCI:0000:3b:00): 31, pid=5, name=p, MMU Fault
6,2,200000000,-;NVRM: Xid (PCI:0000:86:00): 79, pid=1234, GPU has fallen off the bus.
6,3,200000100,-;NVRM: GPU 0000:86:00.0: GPU has fallen off the bus.
L
printf 'NVRM: GPU 00000000:5E:00.0: GPU has fallen off the bus.' >"$tmp/busonly.log" # no final newline

"$bin" xid --kmsg "$tmp/healthy.log" >"$tmp/out" 2>&1
check healthy 0 $?
has healthy "$tmp/out" "xid=63 pci=0000:3b:00.0 class=ignore"
has healthy "$tmp/out" "1 finding: healthy"

"$bin" xid --kmsg "$tmp/app.log" >"$tmp/out" 2>&1
check application 1 $?
has application "$tmp/out" "xid=13 pci=0000:3b:00.0 class=application"
has application "$tmp/out" "xid=45 pci=0000:3b:00.0 class=application follows=13"

"$bin" xid --kmsg "$tmp/fatal.log" >"$tmp/out" 2>&1
check fatal 2 $?
has fatal "$tmp/out" "xid=79 pci=0000:86:00.0 class=node-fatal pid=1234 t=200.000000"
has fatal "$tmp/out" "xid=bus_lost pci=0000:86:00.0 class=node-fatal follows=79"
has fatal "$tmp/out" "3 findings: node-fatal"

# Only lines after the job's start (150 s after boot): the 31 is older.
"$bin" xid --kmsg "$tmp/fatal.log" --since-s 150 >"$tmp/out" 2>&1
check since 2 $?
if grep -q "xid=31" "$tmp/out"; then echo "FAIL: --since-s kept an older line"; fail=1; fi

"$bin" xid --kmsg - <"$tmp/busonly.log" >"$tmp/out" 2>&1
check bus-only-stdin 2 $?
has bus-only-stdin "$tmp/out" "xid=bus_lost pci=0000:5e:00.0 class=node-fatal"

# A table that makes 13 node-fatal.
printf 'node_fatal: [13]\n' >"$tmp/table.yaml"
"$bin" xid --kmsg "$tmp/app.log" --table "$tmp/table.yaml" >"$tmp/out" 2>&1
check table 2 $?
ODL_HEALTH_XID_TABLE="$tmp/table.yaml" "$bin" xid --kmsg "$tmp/app.log" >"$tmp/out" 2>&1
check table-env 2 $?
printf 'node_fatal: [thirteen]\n' >"$tmp/bad.yaml"
"$bin" xid --kmsg "$tmp/app.log" --table "$tmp/bad.yaml" >"$tmp/out" 2>&1
check bad-table 4 $?
has bad-table "$tmp/out" "bad.yaml:1"

"$bin" xid --kmsg /nonexistent/log >"$tmp/out" 2>&1
check missing-log 4 $?
has missing-log "$tmp/out" "cannot open kernel log /nonexistent/log"
"$bin" xid >"$tmp/out" 2>&1
check no-kmsg 4 $?
"$bin" frobnicate >"$tmp/out" 2>&1
check unknown-command 4 $?
"$bin" >"$tmp/out" 2>&1
check no-command 4 $?

# --drain: Slurm's HealthCheckProgram path (a recording stand-in scontrol).
cat >"$tmp/scontrol" <<EOS
#!/bin/sh
for a in "\$@"; do printf '[%s]' "\$a"; done >>"$tmp/scontrol.log"
echo >>"$tmp/scontrol.log"
EOS
chmod +x "$tmp/scontrol"
ODL_SCONTROL="$tmp/scontrol" "$bin" xid --kmsg "$tmp/fatal.log" --drain >"$tmp/out" 2>&1
check drain 2 $?
host=$(hostname -s 2>/dev/null || hostname)
has drain "$tmp/scontrol.log" "[update][NodeName=${host%%.*}][State=DRAIN][Reason=odl: Xid 79 on 0000:86:00.0 (generation 0)]"
ODL_SCONTROL="$tmp/scontrol" "$bin" xid --kmsg "$tmp/app.log" --drain >"$tmp/out" 2>&1
check drain-app 1 $?
[ "$(wc -l <"$tmp/scontrol.log")" = 1 ] || { echo "FAIL: an application error drained the node"; fail=1; }

# Fence commands.
job="$tmp/job"
mkdir -p "$job"
"$bin" fence add --job-dir "$job" --node n2 --xid 79 --gpu PCI:0000:3b:00 --generation 2 >"$tmp/out" 2>&1
check fence-add 0 $?
has fence-add "$tmp/out" "n2 fenced"
"$bin" fence add --job-dir "$job" --node n2 --xid 48 >"$tmp/out" 2>&1
has fence-add-again "$tmp/out" "n2 was already fenced"
"$bin" fence add --job-dir "$job" --node n3 --xid bus_lost >"$tmp/out" 2>&1
"$bin" fence list --job-dir "$job" >"$tmp/out" 2>&1
check fence-list 0 $?
has fence-list "$tmp/out" "n2 xid=79 gpu=0000:3b:00.0"
has fence-list "$tmp/out" "generation=2 drained=0 fenced"
"$bin" fence exclude --job-dir "$job" >"$tmp/out" 2>&1
has fence-exclude "$tmp/out" "--exclude=n2,n3"
printf 'n1 slots=2\nn2 slots=2\nn3 slots=2\nn4 slots=2\n' >"$tmp/hosts"
"$bin" fence hostfile --job-dir "$job" --in "$tmp/hosts" --out "$tmp/hosts2" >"$tmp/out" 2>&1
check fence-hostfile 0 $?
if [ "$(grep -v '^#' "$tmp/hosts2")" != "$(printf 'n1 slots=2\nn4 slots=2')" ]; then
    echo "FAIL: hostfile:"; cat "$tmp/hosts2"; fail=1
fi
ODL_SCONTROL="$tmp/scontrol" "$bin" fence drain --job-dir "$job" >"$tmp/out" 2>&1
check fence-drain 0 $?
has fence-drain "$tmp/out" "drained 2 nodes"
has fence-drain "$tmp/scontrol.log" "[NodeName=n3][State=DRAIN][Reason=odl: GPU fallen off the bus on unknown GPU (generation 0)]"
"$bin" fence lift --job-dir "$job" --node n2 --by bob >"$tmp/out" 2>&1
check fence-lift 0 $?
"$bin" fence lift --job-dir "$job" --node n2 --by bob >"$tmp/out" 2>&1
check fence-lift-again 4 $?
has fence-lift-again "$tmp/out" "node n2 is not fenced"
"$bin" fence list --job-dir "$job" >"$tmp/out" 2>&1
has fence-list-lifted "$tmp/out" "lifted reason="
has fence-list-lifted "$tmp/out" "lifted_by=bob"
"$bin" fence exclude --job-dir "$job" >"$tmp/out" 2>&1
has fence-exclude-after-lift "$tmp/out" "--exclude=n3"
printf '{"fences": 3}' >"$job/fence.json"
"$bin" fence list --job-dir "$job" >"$tmp/out" 2>&1
check fence-corrupt 4 $?
has fence-corrupt "$tmp/out" "fence.json"

# gpu: no NVML (3); the stand-in NVML: readings, unavailable values, one GPU lost (2).
ODL_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1 "$bin" gpu >"$tmp/out" 2>&1
check gpu-none 3 $?
has gpu-none "$tmp/out" "no GPU to check: NVML not available"
ODL_NVML_LIBRARY="$fake" "$bin" gpu --timeout-s 20 >"$tmp/out" 2>&1
check gpu-fake 2 $?
has gpu-fake "$tmp/out" "gpu 0 0000:3b:00.0 GPU-fake-0 Fake H200: util=37% mem_used=1024MiB mem_total=81559MiB temp=45C power=unavailable sm_clock=unavailable"
has gpu-fake "$tmp/out" "gpu 0: needs attention: a row remap is pending"
has gpu-fake "$tmp/out" "gpu 1: unhealthy: nvmlDeviceGetTemperature: GPU is lost"
has gpu-fake "$tmp/out" "odl_health gpu: unhealthy"

ODL_NVML_LIBRARY="$fake" "$bin" gpu --readings-only >"$tmp/out" 2>&1
check gpu-readings-only 2 $?
if grep -q "compute check" "$tmp/out"; then echo "FAIL: --readings-only ran the compute check"; fail=1; fi

# events: registration, the stand-in's Xid 79, then its "GPU is lost" error.
ODL_NVML_LIBRARY="$fake" "$bin" events --seconds 5 >"$tmp/out" 2>&1
check events-fake 2 $?
has events-fake "$tmp/out" "Xid critical-error events registered on 2 GPUs"
has events-fake "$tmp/out" "xid=79 pci=0000:3b:00.0 class=node-fatal"
has events-fake "$tmp/out" "nvmlEventSetWait_v2: GPU is lost"
ODL_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1 "$bin" events --seconds 1 >"$tmp/out" 2>&1
check events-none 3 $?

# Prometheus text, parsed by prometheus_client (Debian's python3-prometheus-client) when available.
ODL_NVML_LIBRARY="$fake" "$bin" gpu --prometheus >"$tmp/metrics.prom" 2>"$tmp/err"
check gpu-prometheus 2 $?
if /usr/bin/python3 -c "import prometheus_client" 2>/dev/null; then
    /usr/bin/python3 - "$tmp/metrics.prom" <<'PY' || fail=1
import sys
from prometheus_client.parser import text_string_to_metric_families
fams = {f.name: f for f in text_string_to_metric_families(open(sys.argv[1]).read())}
def value(name, gpu):
    return [s.value for s in fams[name].samples if s.labels["gpu"] == gpu]
ok = True
def want(cond, what):
    global ok
    if not cond:
        print("FAIL: prometheus:", what); ok = False
want(value("DCGM_FI_DEV_GPU_UTIL", "0") == [37.0] and value("DCGM_FI_DEV_GPU_UTIL", "1") == [], "util (gpu 1 unavailable)")
want(value("DCGM_FI_DEV_FB_USED", "1") == [1024.0], "fb used")
want("DCGM_FI_DEV_POWER_USAGE" not in fams, "0xFFFFFFFF power has no sample")
want(value("odl_gpu_healthy", "0") == [1.0] and value("odl_gpu_healthy", "1") == [0.0], "healthy gauge")
s = fams["DCGM_FI_DEV_GPU_TEMP"].samples[0]
want(s.labels == {"gpu": "0", "UUID": "GPU-fake-0", "pci_bus_id": "0000:3b:00.0", "modelName": "Fake H200",
                  "Hostname": s.labels["Hostname"]}, "labels %r" % s.labels)
print("prometheus_client parsed %d families" % len(fams))
sys.exit(0 if ok else 1)
PY
else
    echo "note: no prometheus_client for /usr/bin/python3; the parse check is skipped"
fi

# NVML's "not available" values (0xFFFFFFFF; 0xFFFFFFFFFFFFFFFF in ECC and memory): unavailable readings,
# no sample, and the verdict that rests on the remap state is unknown, not healthy.
ODL_NVML_LIBRARY="$sentinel" "$bin" gpu --readings-only >"$tmp/out" 2>&1
check gpu-sentinel 1 $?
has gpu-sentinel "$tmp/out" "gpu 0 0000:3b:00.0 GPU-fake-0 Fake H200: util=unavailable mem_used=unavailable mem_total=unavailable temp=unavailable power=unavailable sm_clock=unavailable ecc_corrected=unavailable ecc_uncorrected=unavailable remapped_corrected=unavailable remapped_uncorrected=unavailable remap_pending=unavailable remap_failed=unavailable"
has gpu-sentinel "$tmp/out" "gpu 0: needs attention: NVML answered its \"not available\" value for remap_pending remap_failed: the row-remap state is unknown"
has gpu-sentinel "$tmp/out" "odl_health gpu: needs attention"
if grep -q "4294967295\|18446744073709551615\|e+19\|: healthy" "$tmp/out"; then
    echo "FAIL: gpu-sentinel: a 'not available' value printed as a number or called healthy:"; cat "$tmp/out"; fail=1
fi
ODL_NVML_LIBRARY="$sentinel" "$bin" gpu --prometheus >"$tmp/sentinel.prom" 2>"$tmp/err"
check gpu-prometheus-sentinel 1 $?
if grep -q "^DCGM_FI_DEV" "$tmp/sentinel.prom"; then
    echo "FAIL: gpu-prometheus-sentinel: a 'not available' value exported as a sample:"; cat "$tmp/sentinel.prom"; fail=1
fi
has gpu-prometheus-sentinel "$tmp/sentinel.prom" 'odl_gpu_healthy{gpu="0",UUID="GPU-fake-0",pci_bus_id="0000:3b:00.0"'
# numbers are checked whole: "abc" or "12x" is a usage error naming the flag, never 0
for bad in "xid --kmsg $tmp/empty.log --since-s abc" "gpu --timeout-s 5s" "events --seconds -1" \
           "fence add --job-dir $job --node n9 --xid 79x" "fence add --job-dir $job --node n9 --generation abc"; do
    : >"$tmp/empty.log"
    # shellcheck disable=SC2086
    "$bin" $bad >"$tmp/out" 2>&1
    check "bad number: $bad" 4 $?
    has "bad number: $bad" "$tmp/out" "expected a"
done

# every command's --help: the usage on stdout, status 0
for cmd in xid gpu events fence "fence add"; do
    # shellcheck disable=SC2086
    "$bin" $cmd --help >"$tmp/out" 2>&1
    check "$cmd --help" 0 $?
    has "$cmd --help" "$tmp/out" "usage: odl_health xid"
done

[ $fail = 0 ] && echo "health_tool: all checks passed"
exit $fail
