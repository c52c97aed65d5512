#!/bin/sh
# test_durable_writes: every file the programs replace is made durable the odl/file.h way -- the
# temporary file fsynced before the rename (or link), the directory fsynced after it. Real processes
# run under tests/fsync_shim.c (LD_PRELOAD), which logs their renames, links and fsyncs;
# tests/fsync_check.py then checks each rename under the test's folder and that each writer below ran:
#   1. odl_coordinator supervising 2 ranks on two emulated nodes (Open MPI's rsh agent, as in
#      tests/health_supervised.sh) with --hostfile: an application Xid 13 on nodeB restarts the job
#      (DIR/xid_history.json), then Xid 79 on nodeB fences it (DIR/fence.json) and the job is relaunched
#      without it (DIR/hosts.N); DIR/state.json, plan.json, coordinator.json, committed.json, the job
#      secret, the checkpoints rank 0 writes (HDF5) and the coordinator's manifest.json.
#   2. odl_worker alone: checkpoints and its own manifest.json, then a resume that rewrites the
#      --metrics-out file without the records after the checkpoint (worker/outputs.c).
#   3. odl_health fence lift rewrites fence.json.
#   0. The check itself: a writer that renames without the directory's fsync is caught.
#   tests/durable_writes.sh SRCDIR ODL_WORKER ODL_COORDINATOR ODL_HEALTH FSYNC_SHIM
# Skipped (77) without Fashion-MNIST or Open MPI's mpirun.
set -u
src="$1" worker="$2" coord="$3" health="$4" shim="$5"
. "$src/tests/coord_sh_util.sh" # need_*, emulate_nodes, wait_for, json_field, job_procs
need_fashion_mnist
need_open_mpi
py=$(command -v python3)
tmp=$(mktemp -d /tmp/odl_durable.XXXXXX)
tmp=$(cd "$tmp" && pwd -P)
trap '[ -n "${ODL_KEEP_TMP:-}" ] || rm -rf "$tmp"' EXIT
fail=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fail=1; }
unset ODL_NODE_NAME ODL_HEALTH ODL_HEALTH_KMSG ODL_HEALTH_XID_TABLE ODL_HEALTH_GPU
shimlog="$tmp/fsync.log"
under_shim() { env LD_PRELOAD="$shim" ODL_FSYNC_LOG="$shimlog" "$@"; }

# 0. the check catches a rename without the directory's fsync
mkdir -p "$tmp/self"
under_shim "$py" -c '
import os, sys
p = sys.argv[1]
with open(p + ".tmp", "w") as f:
    f.write("x\n"); f.flush(); os.fsync(f.fileno())
os.rename(p + ".tmp", p)' "$tmp/self/careless.json"
if "$py" "$src/tests/fsync_check.py" "$shimlog" "$tmp/self" "careless.json" >"$tmp/self.out" 2>&1; then
    bad "a rename without the directory's fsync went unnoticed"; cat "$tmp/self.out"
elif grep -q "careless.json: rename .* without an fsync of its directory" "$tmp/self.out"; then
    ok "the check catches a writer that skips the directory's fsync"
else
    bad "the check failed for another reason"; cat "$tmp/self.out"
fi
: >"$shimlog"

# 1. the coordinator's files, fencing and the checkpoints of a supervised job
printf 'nodeA slots=1\nnodeB slots=1\n' >"$tmp/hosts"
emulate_nodes "$tmp"
flags="$node_flags"
base="--task=train --model=mnist_mlp --data_dir $data --device cpu --seed 1 --no-dropout --progress off
      --max-train-samples 2000 --batch-size 32 --epochs 1 --checkpoint-every 5"
job="$tmp/job"
mkdir -p "$job"
# shellcheck disable=SC2086
under_shim env ODL_FAULT="xid13@rank=1,step=4;xid79@rank=1,step=12;slow@rank=0,step=0,ms=20" timeout 300 "$coord" \
    --job-dir "$job" --listen 127.0.0.1:0 --http off --timeout 20 --backoff 0.2 --max-restarts 3 \
    --hostfile "$tmp/hosts" -- "$mpirun" $flags --hostfile {hostfile} -np {np} "$worker" $base >"$tmp/coord.log" 2>&1
rc=$?
if [ $rc = 0 ] && grep -q "node nodeB fenced" "$tmp/coord.log" && grep -q "restarting the job without fencing" "$tmp/coord.log"; then
    ok "supervised job: an application Xid restarted it, Xid 79 fenced nodeB, it finished (exit 0)"
else
    bad "supervised job: exit $rc, or no restart / fence in its log"; tail -40 "$tmp/coord.log"
fi

# 2. a worker's own checkpoints and manifest, and the metrics file rewritten on resume
d="$tmp/alone"
mkdir -p "$d/ck"
one="--task=train --model=mnist_mlp --data_dir $data --device cpu --seed 1 --progress off --max-train-samples 640
     --batch-size 32 --epochs 2 --checkpoint-dir $d/ck --checkpoint-every 4 --metrics-out $d/metrics.jsonl"
# shellcheck disable=SC2086
under_shim "$worker" $one --max-steps 8 >"$tmp/alone1.log" 2>&1 &&
    under_shim "$worker" $one --max-steps 30 --resume auto >"$tmp/alone2.log" 2>&1
rc=$?
if [ $rc = 0 ]; then ok "a worker alone wrote checkpoints, then resumed"; else bad "a worker alone: exit $rc"; tail -20 "$tmp"/alone*.log; fi

# 3. odl_health rewrites the fence list
if under_shim "$health" fence lift --job-dir "$job" --node nodeB --by durable_writes >"$tmp/lift.log" 2>&1; then
    ok "odl_health fence lift"
else
    bad "odl_health fence lift failed"; cat "$tmp/lift.log"
fi

if "$py" "$src/tests/fsync_check.py" "$shimlog" "$tmp" job/state.json job/plan.json job/coordinator.json \
    job/committed.json job/secret job/xid_history.json job/fence.json "job/hosts.*" "job/checkpoints/ckpt-*.h5" \
    job/checkpoints/manifest.json "alone/ck/ckpt-*.h5" alone/ck/manifest.json alone/metrics.jsonl >"$tmp/check.out" 2>&1; then
    ok "$(tail -1 "$tmp/check.out")"
else
    bad "files replaced without the durable steps:"; cat "$tmp/check.out"
fi
exit $fail
