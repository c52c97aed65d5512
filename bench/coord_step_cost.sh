#!/bin/sh
# The coordinator's cost to a training step on the worker's side (docs/coordinator.md "Overhead"):
# starts odl_coordinator serving on loopback (no command to supervise), runs coord_step_cost against
# it as rank 0 of 1 for SECONDS (default 3), prints its two lines, stops the coordinator.
# Usage: bench/coord_step_cost.sh BUILD_DIR [SECONDS] [COORD_STEP_COST]
#   (COORD_STEP_COST: the benchmark binary, default BUILD_DIR/bench/coord_step_cost)
set -u
B=${1:?build dir}
S=${2:-3}
bin=${3:-$B/bench/coord_step_cost}
dir=$(mktemp -d /tmp/odl_coord_cost.XXXXXX)
trap 'kill -KILL "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$dir"' EXIT
"$B/odl_coordinator" --job-dir "$dir/job" --listen 127.0.0.1:0 --heartbeat-ms 200 >"$dir/coord.log" 2>&1 &
pid=$!
i=0
while ! grep -q '"listen"' "$dir/job/coordinator.json" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
addr=$(sed -n 's/.*"listen": *"\([^"]*\)".*/\1/p' "$dir/job/coordinator.json")
gen=$(sed -n 's/.*"generation": *\([0-9]*\).*/\1/p' "$dir/job/coordinator.json")
[ -n "$addr" ] || { echo "coord_step_cost.sh: the coordinator did not start:"; cat "$dir/coord.log"; exit 1; }
"$bin" "$addr" "$dir/job/secret" "$gen" "$S"
