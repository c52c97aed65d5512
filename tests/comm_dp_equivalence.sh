#!/bin/sh
# Data-parallel equivalence on the CPU backend (issue: "Checks, CI"):
#   tests/comm_dp_equivalence.sh SRCDIR ODL_WORKER COMM_COMPARE_PARAMS
# Trains mnist_mlp (no dropout) on the first 1000 Fashion-MNIST images for 2 epochs (32 steps of 64
# samples; the epoch boundary reshuffles and the last step of each epoch is short) as
#   1 process  x batch 64   (no launcher: must not initialise MPI)
#   2 ranks    x batch 32   (mpirun)
#   4 ranks    x batch 16   (mpirun, 0.1 MiB gradient buckets: several buckets)
# and mnist_cnn for 6 steps (the last one short) as 1 x 32 and 2 x 16. Every rank dumps its parameters (ODL_DUMP_PARAMS);
# the runs must agree within float tolerance and all ranks of a run must be bitwise equal.
# Data: $ODL_FMNIST_DIR, else /usr/share/datasets/fashion-mnist; skipped (77) when absent.
set -u
src="$1"
worker="$2"
compare="$3"
. "$src/tests/mpi_data_skip.sh" # data=; skip without Fashion-MNIST or mpirun
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
mpirun_sh="$src/tests/comm_mpirun.sh"
common="--task=train --data_dir $data --device cpu --seed 1 --no-dropout --progress off"
mlp="$common --model=mnist_mlp --max-train-samples 1000 --epochs 2"
cnn="$common --model=mnist_cnn --max-train-samples 180 --epochs 1 --test-batch-size 1000"

run() { # name, then the command; output kept in $tmp/name.log
    name="$1"
    shift
    echo "== $name: $*"
    "$@" >"$tmp/$name.log" 2>&1
    rc=$?
    if [ $rc != 0 ]; then
        cat "$tmp/$name.log"
        echo "FAIL: $name exited $rc"
        fail=1
    fi
    grep -E "epoch [0-9]+ step|data parallel|bitwise identical" "$tmp/$name.log"
}

# A single process must not initialise MPI: with an impossible MPI component selection, MPI_Init
# would abort the program.
run mlp_np1 env OMPI_MCA_pml=odl_no_such_pml ODL_DUMP_PARAMS="$tmp/mlp1" "$worker" $mlp --batch-size 64 \
    --metrics-out "$tmp/mlp1.jsonl"
run mlp_np2 env ODL_DUMP_PARAMS="$tmp/mlp2" sh "$mpirun_sh" 2 "$worker" $mlp --batch-size 32 \
    --metrics-out "$tmp/mlp2.jsonl"
run mlp_np4 env ODL_DUMP_PARAMS="$tmp/mlp4" sh "$mpirun_sh" 4 "$worker" $mlp --batch-size 16 --dist.bucket_mb=0.1
run cnn_np1 env ODL_DUMP_PARAMS="$tmp/cnn1" "$worker" $cnn --batch-size 32
run cnn_np2 env ODL_DUMP_PARAMS="$tmp/cnn2" sh "$mpirun_sh" 2 "$worker" $cnn --batch-size 16 --dist.bucket_mb=0.5

check() { # description, then compare_params arguments
    what="$1"
    shift
    echo "== $what"
    if ! "$compare" "$@"; then
        echo "FAIL: $what"
        fail=1
    fi
}
# Tolerances: the measured differences are ~5e-8 absolute (MLP, 32 steps) -- summation order only.
check "MLP 1x64 vs 2x32" "$tmp/mlp1.rank0.h5" "$tmp/mlp2.rank0.h5" --atol 1e-6 --rtol 1e-4
check "MLP 1x64 vs 4x16" "$tmp/mlp1.rank0.h5" "$tmp/mlp4.rank0.h5" --atol 1e-6 --rtol 1e-4
check "MLP 2x32: rank 1 vs rank 0" "$tmp/mlp2.rank0.h5" "$tmp/mlp2.rank1.h5" --bitwise
for r in 1 2 3; do
    check "MLP 4x16: rank $r vs rank 0" "$tmp/mlp4.rank0.h5" "$tmp/mlp4.rank$r.h5" --bitwise
done
check "CNN 1x32 vs 2x16" "$tmp/cnn1.rank0.h5" "$tmp/cnn2.rank0.h5" --atol 1e-5 --rtol 1e-3
check "CNN 2x16: rank 1 vs rank 0" "$tmp/cnn2.rank0.h5" "$tmp/cnn2.rank1.h5" --bitwise

# Logging: rank 0 logs progress; other ranks only warnings and errors. Metrics carry world_size.
if grep -q "\[rank [1-3]/[24]\] INFO" "$tmp/mlp2.log" "$tmp/mlp4.log"; then
    echo "FAIL: a rank other than 0 logged INFO lines"
    fail=1
fi
grep -q "\[rank 0/1\] INFO training" "$tmp/mlp_np1.log" || { echo "FAIL: the single process did not log as rank 0/1"; fail=1; }
grep -q '"world_size":2' "$tmp/mlp2.jsonl" || { echo "FAIL: metrics of the 2-rank run lack world_size 2"; fail=1; }
grep -q '"world_size":1' "$tmp/mlp1.jsonl" || { echo "FAIL: metrics of the 1-process run lack world_size 1"; fail=1; }
grep -q "4 gradient buckets\|[2-9] gradient buckets" "$tmp/mlp_np4.log" || { echo "FAIL: 0.1 MiB buckets did not split the MLP's gradients"; fail=1; }
# The same global batches: epoch losses of the three MLP runs agree to the printed precision.
l1=$(grep -o '"train_loss":[0-9.]*' "$tmp/mlp1.jsonl" | head -1)
l2=$(grep -o '"train_loss":[0-9.]*' "$tmp/mlp2.jsonl" | head -1)
[ "$l1" = "$l2" ] || { echo "FAIL: epoch-1 train loss $l1 (1 process) vs $l2 (2 ranks)"; fail=1; }
[ $fail = 0 ] && echo "comm_dp_equivalence: all runs agree"
exit $fail
