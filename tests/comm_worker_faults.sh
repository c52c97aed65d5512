#!/bin/sh
# Failures of one rank end the whole data-parallel job with a message naming the rank and a non-zero
# exit, never a hang (issue: "A rank that cannot reach its GPU, or a collective that does not complete
# within dist.timeout_s ..."):
#   tests/comm_worker_faults.sh SRCDIR ODL_WORKER
#   1. rank 0 fails mid-job (its metrics file cannot be created) while rank 1 waits in the first
#      gradient AllReduce -> rank 0 aborts the job.
#   2. rank 1 is stopped (SIGSTOP) during training -> rank 0's watchdog ends the job after
#      dist.timeout_s = 3.
#   3. --device cuda on a machine or build without a GPU -> every rank reports which rank failed.
#   4. Slurm variables of a two-task step, but a process started alone (srun without PMI) -> a clear
#      error instead of two independent trainings.
# Skipped (77) without Fashion-MNIST or mpirun.
set -u
src="$1"
worker="$2"
. "$src/tests/mpi_data_skip.sh" # data=; skip without Fashion-MNIST or mpirun
tmp=$(mktemp -d)
stopped=""
cleanup() {
    # The stopped rank is ours; make sure nothing of this test survives it.
    [ -n "$stopped" ] && kill -KILL "$stopped" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
fail=0
mpirun_sh="$src/tests/comm_mpirun.sh"
# No --device in base: case 3 gives its own (odl_worker rejects a flag given twice).
base="--task=train --model=mnist_mlp --data_dir $data --seed 1 --no-dropout --progress off"

expect() { # name, log, rc, seconds, max seconds, pattern
    name="$1" log="$2" rc="$3" secs="$4" max="$5" pattern="$6"
    ok=1
    [ "$rc" = 0 ] && { echo "FAIL $name: exit code 0"; ok=0; }
    [ "$secs" -gt "$max" ] && { echo "FAIL $name: took $secs s (limit $max s)"; ok=0; }
    grep -q "$pattern" "$log" || { echo "FAIL $name: no line matching: $pattern"; ok=0; }
    if [ $ok = 1 ]; then
        echo "ok   $name: exit code $rc after $secs s; $(grep -m1 "$pattern" "$log" | cut -c1-240)"
    else
        cat "$log"
        fail=1
    fi
}

# 1. a rank fails while its peer waits in a collective
t0=$(date +%s)
sh "$mpirun_sh" 2 "$worker" $base --device cpu --max-train-samples 2000 --batch-size 32 \
    --metrics-out "$tmp/no/such/dir/m.jsonl" >"$tmp/1.log" 2>&1
rc=$?
expect "failing rank" "$tmp/1.log" $rc $(( $(date +%s) - t0 )) 60 \
    "error: rank 0 (host [^)]*): --metrics-out $tmp/no/such/dir/m.jsonl: folder $tmp/no/such/dir does not exist"

# 2. a stopped rank: the other rank's watchdog ends the job
t0=$(date +%s)
sh "$mpirun_sh" 2 "$worker" $base --device cpu --max-train-samples 60000 --epochs 50 --batch-size 8 --dist.timeout_s=3 \
    --metrics-out "$tmp/2.jsonl" >"$tmp/2.log" 2>&1 &
job=$!
pid1=""
i=0
while [ $i -lt 600 ] && [ -z "$pid1" ]; do
    if grep -q "data parallel:" "$tmp/2.log" 2>/dev/null; then
        for p in $(pgrep -f -- "$tmp/2.jsonl"); do
            if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=1"; then pid1=$p; fi
        done
    fi
    [ -z "$pid1" ] && sleep 0.1
    i=$((i + 1))
done
if [ -z "$pid1" ]; then
    echo "FAIL stopped rank: could not find rank 1's process"
    cat "$tmp/2.log"
    kill "$job" 2>/dev/null
    fail=1
else
    sleep 1
    kill -STOP "$pid1"
    stopped=$pid1
    t1=$(date +%s)
    wait "$job"
    rc=$?
    expect "stopped rank" "$tmp/2.log" $rc $(( $(date +%s) - t1 )) 60 \
        "rank 0 (host [^)]*): MPI_Allreduce #[0-9]* of [0-9]* .*did not complete within 3 s (dist.timeout_s)"
fi

# 3. no GPU for --device cuda
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    echo "skip no-GPU case: this machine has GPUs"
else
    t0=$(date +%s)
    sh "$mpirun_sh" 2 "$worker" $base --device cuda --max-train-samples 1000 >"$tmp/3.log" 2>&1
    rc=$?
    expect "no GPU" "$tmp/3.log" $rc $(( $(date +%s) - t0 )) 60 \
        "error: rank [01] (host [^)]*): GPU selection failed on rank 0 (and 1 more rank): rank 0 (host [^)]*) cannot use its GPU"
fi

# 4. a "two-task step" process that MPI did not wire up
t0=$(date +%s)
env SLURM_PROCID=0 SLURM_NTASKS=2 SLURM_STEP_ID=0 SLURM_LOCALID=0 "$worker" $base --device cpu --max-train-samples 1000 \
    >"$tmp/4.log" 2>&1
rc=$?
expect "unwired srun task" "$tmp/4.log" $rc $(( $(date +%s) - t0 )) 60 \
    "says rank 0 of 2 but MPI started rank 0 of 1: the processes were not wired into one job"

[ $fail = 0 ] && echo "comm_worker_faults: every failure ended the job with a message"
exit $fail
