#!/bin/sh
# Distributed evaluation (odl_worker --task=eval under mpirun), on coco8 at --img-size 320:
#   tests/eval_mpi.sh equal  SRCDIR ODL_WORKER WEIGHTS TMPDIR
#     one process without a launcher, 2 ranks and 3 ranks (8 images: shards of 4+4 and 2+3+3, batch 3
#     so that shards split batches) write byte-identical metrics.json files.
#   tests/eval_mpi.sh faults SRCDIR ODL_WORKER WEIGHTS TMPDIR
#     rank 1 killed (SIGKILL) after its first image (ODL_FAULT=kill@rank=1,step=1 with --batch-size 1: an
#     evaluation step is one batch): the job ends with a non-zero exit, mpirun naming the rank, within
#     60 s; rank 1 stopped (stop@, SIGSTOP): rank 0's watchdog (--timeout-s 3) ends the job and no rank
#     outlives it.
# Skipped (77) without mpirun, the weights or coco8.
set -u
mode="$1" src="$2" worker="$3" weights="$4" tmp="$5"
data="${ODL_TEST_DATA:-${ODL_TEST_DATA_DEFAULT:-$src/../shared/data}}/yolov5/coco8"
[ -e "$weights" ] || { echo "SKIP: no $weights (the yolov5_convert test makes it)"; exit 77; }
[ -d "$data" ] || { echo "SKIP: no $data"; exit 77; }
if ! command -v mpirun >/dev/null 2>&1 && [ -z "${MPIEXEC:-}" ]; then echo "SKIP: no mpirun"; exit 77; fi
rm -rf "$tmp" && mkdir -p "$tmp" || exit 1
mpirun_sh="$src/tests/comm_mpirun.sh"
# --batch-size per mode (odl_worker rejects a flag given twice)
args="--task=eval --model=yolov5 --weights $weights --data $data --img-size 320 --device cpu"
fail=0

if [ "$mode" = equal ]; then
    args="$args --batch-size 3"
    "$worker" $args --output "$tmp/np1" >"$tmp/np1.log" 2>&1 || { echo "FAIL single process"; cat "$tmp/np1.log"; exit 1; }
    for np in 2 3; do
        if ! sh "$mpirun_sh" $np "$worker" $args --output "$tmp/np$np" >"$tmp/np$np.log" 2>&1; then
            echo "FAIL $np ranks: exit code"; cat "$tmp/np$np.log"; fail=1; continue
        fi
        grep -q "; $np rank(s)" "$tmp/np$np.log" || { echo "FAIL $np ranks: not a $np-rank job"; cat "$tmp/np$np.log"; fail=1; }
        if cmp "$tmp/np1/metrics.json" "$tmp/np$np/metrics.json"; then
            echo "ok   $np ranks: metrics.json identical to one process ($(grep -m1 '"map50_95"' "$tmp/np1/metrics.json" | tr -d ' '))"
        else
            echo "FAIL $np ranks: metrics.json differs"; diff "$tmp/np1/metrics.json" "$tmp/np$np/metrics.json" | head; fail=1
        fi
    done
    grep -q '"images": 8' "$tmp/np1/metrics.json" || { echo "FAIL: not 8 images"; fail=1; }
    exit $fail
fi

expect() { # name log rc seconds max pattern
    if [ "$3" = 0 ]; then echo "FAIL $1: exit code 0"; cat "$2"; fail=1; return; fi
    if [ "$4" -gt "$5" ]; then echo "FAIL $1: took $4 s (limit $5 s)"; fail=1; fi
    if grep -q "$6" "$2"; then echo "ok   $1: exit code $3 after $4 s; $(grep -m1 "$6" "$2" | cut -c1-200)"
    else echo "FAIL $1: no line matching: $6"; cat "$2"; fail=1; fi
}
t0=$(date +%s)
ODL_FAULT=kill@rank=1,step=1 sh "$mpirun_sh" 2 "$worker" $args --batch-size 1 --output "$tmp/kill" >"$tmp/kill.log" 2>&1
rc=$?
expect "killed rank" "$tmp/kill.log" $rc $(( $(date +%s) - t0 )) 60 "rank 1.*exited on signal 9"
[ -e "$tmp/kill/metrics.json" ] && { echo "FAIL killed rank: metrics.json written"; fail=1; }

t0=$(date +%s)
ODL_FAULT=stop@rank=1,step=1 timeout -s KILL 90 sh "$mpirun_sh" 2 "$worker" $args --batch-size 1 --timeout-s 3 \
    --output "$tmp/stop" >"$tmp/stop.log" 2>&1
rc=$?
# The stopped rank is ours: it must be gone (or a zombie about to be reaped) once the job has ended.
grep -q "ODL_FAULT: stop@rank=1,step=1 fires now" "$tmp/stop.log" || { echo "FAIL stopped rank: the fault did not fire"; fail=1; }
for pid in $(pgrep -f -- "--output $tmp/stop" 2>/dev/null); do
    i=0
    while [ $i -lt 20 ]; do
        st=$(ps -o stat= -p "$pid" 2>/dev/null | cut -c1)
        [ -z "$st" ] || [ "$st" = Z ] && break
        sleep 0.25
        i=$((i + 1))
    done
    if [ -n "$st" ] && [ "$st" != Z ]; then
        echo "FAIL stopped rank: process $pid (state $st) survived the job"
        kill -CONT "$pid" 2>/dev/null
        kill -KILL "$pid" 2>/dev/null
        fail=1
    fi
done
expect "stopped rank" "$tmp/stop.log" $rc $(( $(date +%s) - t0 )) 60 "did not complete within 3 s"
exit $fail
