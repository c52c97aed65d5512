#!/bin/sh
# The worker's health monitor on the CPU, through the injection sources (no GPU needed):
#   1. ODL_FAULT=xid79@rank=0,step=5: the job stops after step 5 (its checkpoint written) with a
#      node-fatal error line naming the Xid; exit status 1.
#   2. an xid fault for another rank: the job trains to the end.
#   3. ODL_HEALTH_KMSG=FILE holding an application Xid 13 line: the job stops with an application error.
#   4. two MPI ranks, ODL_FAULT=xid79@rank=1,step=10: rank 1 reports it and the whole job ends non-zero.
#   5. a malformed xid fault: one clear error line.
#   tests/health_worker.sh SRCDIR ODL_WORKER
# Skipped (77) without Fashion-MNIST.
set -u
src="$1"
worker="$2"
data="${ODL_FMNIST_DIR:-/usr/share/datasets/fashion-mnist}"
if [ ! -e "$data/train-images-idx3-ubyte.gz" ] && [ ! -e "$data/train-images-idx3-ubyte" ]; then
    echo "SKIP: no Fashion-MNIST in $data (set ODL_FMNIST_DIR)"
    exit 77
fi
tmp=$(mktemp -d /tmp/odl_health_worker.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail=0
base="--task=train --model=mnist_mlp --data_dir $data --device cpu --seed 1 --no-dropout --progress off --max-train-samples 2000 --batch-size 32"
expect() { # name, log, want rc, got rc, pattern
    if [ "$3" != "$4" ] || ! grep -q -- "$5" "$2"; then
        echo "FAIL $1: exit status $4 (want $3), pattern '$5'; log:"
        cat "$2"
        fail=1
    else
        echo "ok   $1: $(grep -m1 -- "$5" "$2" | cut -c1-200)"
    fi
}

mkdir -p "$tmp/ck"
ODL_FAULT="xid79@rank=0,step=5" "$worker" $base --max-steps 20 --checkpoint-dir "$tmp/ck" --checkpoint-every 5 \
    >"$tmp/1.log" 2>&1
expect "xid79 at step 5" "$tmp/1.log" 1 $? "error: GPU health: node-fatal Xid 79 on 0000:00:00.0 at step 5 on node [^:]*: stopping (the node is to be fenced)"
grep -q "GPU health: xid=79 pci=0000:00:00.0 class=node-fatal" "$tmp/1.log" || { echo "FAIL: no finding line"; fail=1; }
grep -q "epoch 1/[0-9]* step [0-9]*:" "$tmp/1.log" && { echo "FAIL: trained past the fault"; fail=1; }
[ -e "$tmp/ck/ckpt-00000005.h5" ] && [ ! -e "$tmp/ck/ckpt-00000010.h5" ] || { echo "FAIL: want the step-5 checkpoint and no later one"; ls -R "$tmp/ck"; fail=1; }

ODL_FAULT="kill@rank=3,step=1;xid79@rank=1,step=5" "$worker" $base --max-steps 20 >"$tmp/2.log" 2>&1
expect "xid fault for another rank" "$tmp/2.log" 0 $? "done: 20 steps"

printf 'NVRM: Xid (PCI:0000:3b:00): 13, pid=1, name=odl_worker, Graphics SM Warp Exception\n' >"$tmp/kmsg"
ODL_HEALTH_KMSG="$tmp/kmsg" "$worker" $base --max-steps 20 >"$tmp/3.log" 2>&1
expect "kernel-log file, Xid 13" "$tmp/3.log" 1 $? "error: GPU health: application Xid 13 on 0000:3b:00.0 at step 1 on node [^:]*: stopping (the job is to be restarted)"

if command -v mpirun >/dev/null 2>&1; then
    ODL_FAULT="xid79@rank=1,step=10" sh "$src/tests/comm_mpirun.sh" 2 "$worker" $base --max-steps 40 >"$tmp/4.log" 2>&1
    rc=$?
    [ $rc = 0 ] && { echo "FAIL 2 ranks: exit status 0"; cat "$tmp/4.log"; fail=1; }
    expect "2 ranks, xid79 on rank 1 at step 10" "$tmp/4.log" $rc $rc "rank 1.*GPU health: node-fatal Xid 79 on 0000:00:00.0 at step 10 on node "
else
    echo "note: no mpirun; the 2-rank case is skipped"
fi

ODL_FAULT="xid79@rank=one" "$worker" $base --max-steps 20 >"$tmp/5.log" 2>&1
expect "malformed fault" "$tmp/5.log" 1 $? "error: ODL_FAULT: rank=one in xid79@ is not a non-negative integer"
[ $fail = 0 ] && echo "health_worker: all cases passed"
exit $fail
