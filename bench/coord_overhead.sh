#!/usr/bin/env bash
# Step time of data-parallel training with and without odl_coordinator (docs/coordinator.md; target:
# no measurable difference). Runs the same short training REPEAT times each way, alternating, and
# prints the median step time of each and their ratio.
# Usage: bench/coord_overhead.sh BUILD_DIR DATA_DIR [OUT_DIR]
#   NP=2 (ranks, mpirun), DEVICE=cuda, MODEL=mnist, BATCH=64 (per rank), STEPS=3000, REPEAT=3,
#   HEARTBEAT_MS=200, CHECKPOINT_EVERY=0 (no checkpoints in either run, so that only the coordinator differs)
set -uo pipefail
B=${1:?build dir}; D=${2:?data dir}; O=${3:-${OUT:-/tmp/coord_overhead}}
NP=${NP:-2} DEVICE=${DEVICE:-cuda} MODEL=${MODEL:-mnist} BATCH=${BATCH:-64} STEPS=${STEPS:-3000}
REPEAT=${REPEAT:-3} HEARTBEAT_MS=${HEARTBEAT_MS:-200}
mkdir -p "$O"
mpirun_sh="$(cd "$(dirname "$0")/.." && pwd)/tests/comm_mpirun.sh"
args=(--task=train --model="$MODEL" --data_dir="$D" --device "$DEVICE" --batch-size "$BATCH" --max-steps "$STEPS"
      --epochs 1000 --progress off --test-batch-size 1000)
# samples/s of the training steps of the run (the epoch line at the stop excludes start-up and evaluation)
sps_of() { sed -n 's/.*"event":"epoch".*"samples_per_s":\([0-9.]*\).*/\1/p' "$1" | tail -1; }
plain=() coord=()
for i in $(seq 1 "$REPEAT"); do
  sh "$mpirun_sh" "$NP" "$B/odl_worker" "${args[@]}" --metrics-out "$O/plain$i.jsonl" >"$O/plain$i.log" 2>&1 \
    || { echo "plain run $i failed:"; tail -5 "$O/plain$i.log"; exit 1; }
  plain+=("$(sps_of "$O/plain$i.jsonl")")
  rm -rf "$O/job$i"
  "$B/odl_coordinator" --job-dir "$O/job$i" --listen 127.0.0.1:0 --heartbeat-ms "$HEARTBEAT_MS" \
      --max-restarts 0 -- sh "$mpirun_sh" "$NP" "$B/odl_worker" "${args[@]}" --metrics-out "$O/coord$i.jsonl" \
      >"$O/coord$i.log" 2>&1 || { echo "coordinated run $i failed:"; tail -5 "$O/coord$i.log"; exit 1; }
  coord+=("$(sps_of "$O/coord$i.jsonl")")
done
python3 - "$NP" "$BATCH" "${plain[*]}" "${coord[*]}" <<'PY'
import statistics, sys
np_, batch = int(sys.argv[1]), int(sys.argv[2])
plain = [float(x) for x in sys.argv[3].split()]
coord = [float(x) for x in sys.argv[4].split()]
step = lambda sps: 1e3 * np_ * batch / sps
p, c = statistics.median(step(s) for s in plain), statistics.median(step(s) for s in coord)
print(f"ranks {np_}, batch {batch} per rank, {len(plain)} runs each")
print(f"step time without coordinator: {p:.4f} ms  (runs: {', '.join(f'{step(s):.4f}' for s in plain)})")
print(f"step time with coordinator:    {c:.4f} ms  (runs: {', '.join(f'{step(s):.4f}' for s in coord)})")
print(f"ratio with/without: {c / p:.4f}")
PY
