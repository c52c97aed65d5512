#!/bin/sh
# The telemetry path without a GPU, through the same code as on one: the health monitors of ranks that
# train on the CPU watch GPUs named by ODL_HEALTH_GPU, read through the stand-in NVML that
# ODL_NVML_LIBRARY names (tests/fake_nvml.c, steady build: known readings, one 0xFFFFFFFF, one GPU whose
# temperature call fails), dlopened as libnvidia-ml.so.1 would be (docs/health.md "Watching a GPU from a
# CPU rank").
#   1. odl_coordinator -- mpirun -np 2 odl_worker ..., ODL_HEALTH_GPU=GPU-fake-1,0000:3b:00.0 (one UUID,
#      one bus id; rank 0 watches NVML's GPU 1, rank 1 GPU 0, so /metrics' gpu label must be NVML's index,
#      not the order of ranks), ODL_FAULT=xid13@rank=1,step=10: each rank's Hello names its GPU's UUID and bus id
#      (coordinator log); /metrics (tests/health_telemetry.py, prometheus_client's parser) shows each
#      rank's readings under dcgm-exporter's names and labels, no sample for the unavailable one, and
#      the Xid 13 as a per-code counter on rank 1's GPU; the restarted job finishes; its epoch lines and
#      the JSONL epoch record (rank 0's) carry the window's mean utilisation and peak memory (42% and
#      1500 MiB, GPU-fake-1's: the fake alternates 44/40 and 1500/1000, so the mean is no single reading); the
#      coordinator's loop closes cleanly.
#   2. A GPU whose NVML temperature call fails (GPU_IS_LOST, not a time-out): the worker's monitor marks
#      it unhealthy with a node-fatal bus_lost finding and the unsupervised run stops at step 1.
#   3. Bad ODL_HEALTH_GPU values: one clear error line each.
#   tests/health_telemetry.sh SRCDIR ODL_WORKER ODL_COORDINATOR FAKE_NVML_STEADY
# Skipped (77) without Fashion-MNIST, mpirun or a Python with prometheus_client.
set -u
src="$1"
worker="$2"
coord="$3"
fake="$4"
data="${ODL_FMNIST_DIR:-/usr/share/datasets/fashion-mnist}"
if [ ! -e "$data/train-images-idx3-ubyte.gz" ] && [ ! -e "$data/train-images-idx3-ubyte" ]; then
    echo "SKIP: no Fashion-MNIST in $data (set ODL_FMNIST_DIR)"
    exit 77
fi
command -v mpirun >/dev/null 2>&1 || { echo "SKIP: no mpirun"; exit 77; }
py=""
for p in /usr/bin/python3 python3; do
    if "$p" -c "import prometheus_client.parser" 2>/dev/null; then py="$p"; break; fi
done
[ -n "$py" ] || { echo "SKIP: no Python with prometheus_client"; exit 77; }
tmp=$(mktemp -d /tmp/odl_health_tel.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fail=1; }
expect() { # pattern file what
    if grep -q -- "$1" "$2"; then ok "$3"; else bad "$3 (no '$1' in $2)"; fi
}
. "$src/tests/coord_sh_util.sh" # wait_for, json_field
unset ODL_NODE_NAME ODL_HEALTH ODL_HEALTH_KMSG ODL_HEALTH_XID_TABLE
node=$(hostname | cut -d. -f1) # odl_health_node_name: the short host name
ODL_NVML_LIBRARY="$fake"
ODL_HEALTH_TELEMETRY_MS=50
export ODL_NVML_LIBRARY ODL_HEALTH_TELEMETRY_MS
base="--task=train --model=mnist_mlp --data_dir $data --device cpu --seed 1 --no-dropout --progress off
      --batch-size 32 --epochs 1"

# 1. supervised, two ranks
job="$tmp/job"
log="$tmp/coord.log"
mkdir -p "$job"
# rank 0 slowed (30 ms a step) so that the restarted generation runs long enough to be scraped and
# each epoch window holds dozens of readings
# shellcheck disable=SC2086
ODL_HEALTH_GPU="GPU-fake-1,0000:3b:00.0" ODL_FAULT="xid13@rank=1,step=10;slow@rank=0,step=0,ms=30" \
    timeout 300 "$coord" --job-dir "$job" --listen 127.0.0.1:0 --http 127.0.0.1:0 --timeout 20 --backoff 0.2 \
    --max-restarts 2 -- sh "$src/tests/comm_mpirun.sh" 2 "$worker" $base --max-train-samples 6000 \
    --checkpoint-every 5 --metrics-out "$job/metrics.jsonl" >"$log" 2>&1 &
bg=$!
if wait_for "generation 2: started" "$log" 120; then
    if "$py" "$src/tests/health_telemetry.py" "$(json_field "$job/coordinator.json" http)" "$node" \
        >"$tmp/metrics.log" 2>&1; then ok "/metrics: $(tail -1 "$tmp/metrics.log")"
    else bad "/metrics"; cat "$tmp/metrics.log"; fi
fi
wait $bg
rc=$?
[ $rc = 0 ] && ok "coordinator finished the job (exit 0)" || { bad "coordinator exited $rc"; cat "$log"; }
expect "event loop closed cleanly; exit status 0" "$log" "coordinator loop closed cleanly"
expect "rank 0 of 2 registered: node $node, pid [0-9]*, GPU GPU-fake-1 (0000:5e:00.0), generation 1" "$log" \
    "rank 0's Hello: UUID and bus id of the GPU its UUID names"
expect "rank 1 of 2 registered: node $node, pid [0-9]*, GPU GPU-fake-0 (0000:3b:00.0), generation 1" "$log" \
    "rank 1's Hello: UUID and bus id of the GPU its bus id names"
expect "GPU health monitor: kernel log [^,]*, NVML on.*, GPU 0000:5e:00.0 (ODL_HEALTH_GPU; training on the CPU)" "$log" \
    "rank 0's monitor watches GPU-fake-1 through NVML"
expect "application Xid 13 on 0000:3b:00.0: restarting the job without fencing" "$log" "Xid 13 restarts the job"
# the epoch line of the generation that finished (mean utilisation, peak memory of the epoch's window;
# rank 0 logs it and writes the JSONL, rank 1's readings are in /metrics)
sed -n '/generation 2: started/,$p' "$log" >"$tmp/gen2.log"
expect "rank 0/2.*epoch 1/1 step [0-9]*:.* gpu_util 42% peak_mem 1500 MiB" "$tmp/gen2.log" "rank 0's epoch line"
rec=$(grep '"event":"epoch"' "$job/metrics.jsonl" | tail -1)
if "$py" - "$rec" <<'EOS'; then ok "JSONL epoch record: $rec"; else bad "JSONL epoch record: $rec"; fi
import json, sys
r = json.loads(sys.argv[1])
u, m = r.get("gpu_util_mean"), r.get("gpu_mem_peak_mib")
# a window of n readings alternating 44, 40 (GPU-fake-1's) has a mean within 2/n of 42 (n is dozens here)
sys.exit(0 if u is not None and abs(u - 42) <= 0.5 and u not in (44, 40) and m == 1500 else 1)
EOS

# 2. an NVML error other than a time-out marks the GPU unhealthy
# shellcheck disable=SC2086
ODL_HEALTH_GPU=0000:86:00.0 "$worker" $base --max-train-samples 2000 >"$tmp/2.log" 2>&1
rc=$?
[ $rc = 1 ] && ok "unhealthy GPU: exit status 1" || bad "unhealthy GPU: exit status $rc"
expect 'GPU health: xid=bus_lost pci=0000:86:00.0 class=node-fatal .*msg="NVML reading failed: nvmlDeviceGetTemperature: GPU is lost (15): the GPU is treated as unhealthy"' \
    "$tmp/2.log" "the failed NVML call is a node-fatal finding naming the call"
expect "error: GPU health: node-fatal Xid bus_lost on 0000:86:00.0 at step 1 on node $node: stopping (the node is to be fenced)" \
    "$tmp/2.log" "the run stops at step 1"

# 3. bad values
# shellcheck disable=SC2086
ODL_HEALTH_GPU=GPU-nope "$worker" $base --max-steps 2 >"$tmp/3a.log" 2>&1
rc=$?
[ $rc != 0 ] && ok "unknown UUID: exit status $rc" || bad "unknown UUID: exit status 0"
expect "error: .*ODL_HEALTH_GPU entry GPU-nope: NVML cannot resolve this UUID: NVML sees no GPU GPU-nope" "$tmp/3a.log" "unknown UUID named"
# shellcheck disable=SC2086
ODL_HEALTH_GPU="0000:3b:00.0,,x" "$worker" $base --max-steps 2 >"$tmp/3b.log" 2>&1
rc=$?
[ $rc = 0 ] && ok "an empty entry another local rank would take does not stop local rank 0" ||
    { bad "local rank 0 with entry 0 valid: exit status $rc"; cat "$tmp/3b.log"; }
# shellcheck disable=SC2086
ODL_HEALTH_GPU="bus-3b" "$worker" $base --max-steps 2 >"$tmp/3c.log" 2>&1
rc=$?
[ $rc != 0 ] && ok "malformed bus id: exit status $rc" || bad "malformed bus id: exit status 0"
expect "error: .*ODL_HEALTH_GPU entry 'bus-3b': neither a PCI bus id nor a UUID" "$tmp/3c.log" "malformed bus id named"
[ $fail = 0 ] && echo "health_telemetry: all cases passed"
exit $fail
