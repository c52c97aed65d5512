#!/bin/sh
# The Slurm path for real: a one-node Slurm cluster on localhost (munged, slurmctld, slurmd from
# Debian's slurm-wlm and munge; CPU only), launch/odl.sbatch submitted with 2 tasks, the job must train
# and finish. Run twice: with srun --mpi=pmix (ODL_LAUNCHER=srun; skipped when Slurm lacks the PMIx
# plugin) and with mpirun inside the allocation (ODL_LAUNCHER=mpirun). Then the GPU-health drain: a node
# fenced by odl_health (Xid 79) is drained once with the real scontrol and shows DRAIN with the reason,
# and so is one fenced by odl_coordinator --slurm after an injected Xid 79 (then RESUMEd).
#   tests/slurm_local.sh SRCDIR ODL_WORKER
# Needs root (slurmd starts job steps as the submitting user). Skips (77) with a message when the
# binaries, root or the data are missing. Everything lives in a temporary folder; the daemons this
# script started are stopped by their process ids at the end. Ports: ODL_SLURM_PORT (and +1), default
# a free-looking port from 20000-39999.
set -u
src="$1"
worker="$2"
data="${ODL_FMNIST_DIR:-/usr/share/datasets/fashion-mnist}"
for b in munged slurmctld slurmd sbatch scontrol sinfo srun; do
    if ! command -v "$b" >/dev/null 2>&1; then
        echo "SKIP: $b not found (apt-get install slurm-wlm munge)"
        exit 77
    fi
done
if [ "$(id -u)" != 0 ]; then
    echo "SKIP: a local Slurm cluster needs root (slurmd)"
    exit 77
fi
if [ ! -e "$data/train-images-idx3-ubyte.gz" ] && [ ! -e "$data/train-images-idx3-ubyte" ]; then
    echo "SKIP: no Fashion-MNIST in $data (set ODL_FMNIST_DIR)"
    exit 77
fi

tmp=$(mktemp -d /tmp/odl-slurm.XXXXXX)
chmod 755 "$tmp"
pids=""
cleanup() {
    for p in $pids; do kill "$p" 2>/dev/null; done
    sleep 1
    for p in $pids; do kill -KILL "$p" 2>/dev/null; done
    [ -n "${ODL_KEEP_SLURM_DIR:-}" ] || rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

host=$(hostname -s)
port="${ODL_SLURM_PORT:-$((20000 + ($$ * 7 + $(date +%s)) % 20000))}"
mkdir -p "$tmp/munge" "$tmp/state" "$tmp/spool" "$tmp/job"
chmod 755 "$tmp/munge"
dd if=/dev/urandom of="$tmp/munge/munge.key" bs=1024 count=1 2>/dev/null
chmod 400 "$tmp/munge/munge.key"

munged -F -f --key-file="$tmp/munge/munge.key" --socket="$tmp/munge/munge.sock" --pid-file="$tmp/munge/munged.pid" \
    --log-file="$tmp/munged.log" --seed-file="$tmp/munge/munged.seed" >"$tmp/munged.out" 2>&1 &
pids="$pids $!"

cat >"$tmp/slurm.conf" <<EOF
ClusterName=odltest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$tmp/munge/munge.sock
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/slurmctld.log
SlurmdLogFile=$tmp/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
NodeName=$host NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN
PartitionName=odl Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
export SLURM_CONF="$tmp/slurm.conf"

i=0
until [ -S "$tmp/munge/munge.sock" ] || [ $i -ge 50 ]; do sleep 0.2; i=$((i + 1)); done
slurmctld -D -i -f "$SLURM_CONF" >"$tmp/slurmctld.out" 2>&1 &
pids="$pids $!"
slurmd -D -f "$SLURM_CONF" -N "$host" >"$tmp/slurmd.out" 2>&1 &
pids="$pids $!"

state=""
i=0
while [ $i -lt 120 ]; do
    state=$(sinfo -h -N -o %T 2>/dev/null | head -1)
    [ "$state" = idle ] && break
    sleep 0.5
    i=$((i + 1))
done
if [ "$state" != idle ]; then
    echo "FAIL: the local Slurm node did not become idle (state '$state'); logs:"
    tail -n 20 "$tmp/munged.log" "$tmp/slurmctld.log" "$tmp/slurmd.log" "$tmp/slurmctld.out" "$tmp/slurmd.out" 2>/dev/null
    exit 1
fi
echo "local Slurm cluster up: node $host idle, slurmctld port $port"

fail=0
submit() { # launcher name; prints what it checks
    launcher="$1"
    out="$tmp/job/odl-$launcher.out"
    id=$(cd "$tmp/job" && ODL_WORKER="$worker" ODL_LAUNCHER="$launcher" sbatch --parsable -N 1 -n 2 \
        --output="$out" --export=ALL "$src/launch/odl.sbatch" \
        --device cpu --model=mnist_mlp --data_dir "$data" --max-steps 20 --max-train-samples 2000 \
        --batch-size 32 --no-dropout --progress off --metrics-out "$tmp/job/metrics-$launcher.jsonl" 2>&1)
    case "$id" in
    '' | *[!0-9]*)
        echo "FAIL ($launcher): sbatch: $id"
        fail=1
        return
        ;;
    esac
    jstate=""
    i=0
    while [ $i -lt 600 ]; do
        jstate=$(scontrol show job "$id" -o 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
        case "$jstate" in COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | BOOT_FAIL | DEADLINE) break ;; esac
        sleep 0.5
        i=$((i + 1))
    done
    exitcode=$(scontrol show job "$id" -o 2>/dev/null | sed -n 's/.* ExitCode=\([0-9:]*\).*/\1/p')
    echo "== job $id ($launcher): $jstate, exit code $exitcode"
    grep -E "odl.sbatch:|launcher|data parallel|epoch [0-9]+ step|done:|bitwise identical|error" "$out" 2>/dev/null | head -20
    ok=1
    [ "$jstate" = COMPLETED ] && [ "$exitcode" = 0:0 ] || ok=0
    grep -q "\[rank 0/2\] INFO done: 20 steps" "$out" || ok=0
    grep -q "all 2 ranks hold bitwise identical parameters after 20 steps" "$out" || ok=0
    grep -q '"world_size":2' "$tmp/job/metrics-$launcher.jsonl" 2>/dev/null || ok=0
    want=pmix
    [ "$launcher" = mpirun ] && want=openmpi
    grep -q "rank 0 of 2 (local 0 of 2 on [^)]*), launcher $want" "$out" || ok=0
    if [ $ok = 0 ]; then
        echo "FAIL ($launcher): the job did not train 20 steps on 2 ranks and finish cleanly; its output:"
        cat "$out" 2>/dev/null
        tail -n 20 "$tmp/slurmd.log" "$tmp/slurmctld.log"
        fail=1
    fi
}

if srun --mpi=list 2>&1 | grep -qw pmix; then
    submit srun
else
    echo "note: this Slurm has no PMIx plugin (srun --mpi=list); testing mpirun inside the allocation only"
fi
submit mpirun

# GPU health fencing (issue 13): a node fenced for Xid 79 is drained once with the real scontrol and
# shows DRAIN with the reason. odl_health sits beside odl_worker in the build folder.
health="${ODL_HEALTH_BIN:-$(dirname "$worker")/odl_health}"
if [ -x "$health" ]; then
    mkdir -p "$tmp/fencejob"
    "$health" fence add --job-dir "$tmp/fencejob" --node "$host" --xid 79 --gpu PCI:0000:3b:00 --generation 1 >"$tmp/fence.out" 2>&1
    "$health" fence drain --job-dir "$tmp/fencejob" >>"$tmp/fence.out" 2>&1 || { echo "FAIL (drain): odl_health fence drain:"; cat "$tmp/fence.out"; fail=1; }
    "$health" fence drain --job-dir "$tmp/fencejob" >>"$tmp/fence.out" 2>&1
    node=$(scontrol show node "$host" -o 2>/dev/null)
    nstate=$(echo "$node" | sed -n 's/.* State=\([A-Z+_]*\).*/\1/p')
    echo "== drain: node $host State=$nstate, $(echo "$node" | sed -n 's/.*\(Reason=[^[]*\).*/\1/p')"
    case "$nstate" in *DRAIN*) ;; *) echo "FAIL (drain): node state '$nstate' has no DRAIN"; fail=1 ;; esac
    echo "$node" | grep -q "Reason=odl: Xid 79 on 0000:3b:00.0 (generation 1)" || { echo "FAIL (drain): reason missing: $node"; fail=1; }
    grep -q "drained 1 node\$" "$tmp/fence.out" && grep -q "drained 0 nodes" "$tmp/fence.out" ||
        { echo "FAIL (drain): not exactly once:"; cat "$tmp/fence.out"; fail=1; }
    scontrol update NodeName="$host" State=RESUME >/dev/null 2>&1
else
    echo "note: $health not built; drain check skipped"
fi
# The coordinator's drain (odl_coordinator --slurm): an injected Xid 79 at step 10 fences this node; the
# next launch drains it once with the real scontrol (reason naming the Xid, the GPU ODL_HEALTH_GPU names
# and the generation) and gives srun --exclude=<node>. A one-node cluster has no node left then: that
# srun cannot be placed and the coordinator gives up after --max-restarts 1 (resuming at the smaller
# world size is tested through the hostfile path in test_health_supervised).
coord="${ODL_COORDINATOR_BIN:-$(dirname "$worker")/odl_coordinator}"
if [ -x "$coord" ]; then
    i=0
    until sinfo -h -N -o %T 2>/dev/null | grep -qx idle || [ $i -ge 60 ]; do sleep 0.5; i=$((i + 1)); done
    # the drain below must be the coordinator's: the node starts idle, without the earlier drain
    sinfo -h -N -o %T | grep -qx idle || { echo "FAIL: node $host not idle before the coordinator's run"; fail=1; }
    cjob="$tmp/coordjob"
    clog="$tmp/coord-slurm.log"
    mkdir -p "$cjob"
    # shellcheck disable=SC2086
    ODL_HEALTH_GPU=0000:5e:00.0 ODL_FAULT="xid79@rank=0,step=10;slow@rank=0,step=0,ms=20" \
        timeout 300 "$coord" --job-dir "$cjob" --listen 127.0.0.1:0 --http off --timeout 20 --backoff 0.2 \
        --max-restarts 1 --slurm -- srun {exclude} -N 1 -n 1 "$worker" --task=train --device cpu --model=mnist_mlp \
        --data_dir "$data" --epochs 1 --max-train-samples 6000 --batch-size 32 --no-dropout --progress off \
        --checkpoint-every 5 >"$clog" 2>&1
    crc=$?
    node=$(scontrol show node "$host" -o 2>/dev/null)
    nstate=$(echo "$node" | sed -n 's/.* State=\([A-Z+_]*\).*/\1/p')
    echo "== coordinator drain: exit status $crc, node $host State=$nstate, $(echo "$node" | sed -n 's/.*\(Reason=[^[]*\).*/\1/p')"
    cfail=0
    grep -q "rank 0 (node $host) reports node-fatal Xid 79 on 0000:5e:00.0" "$clog" || { echo "FAIL (coordinator drain): no Xid 79 report"; cfail=1; }
    case "$nstate" in *DRAIN*) ;; *) echo "FAIL (coordinator drain): node state '$nstate' has no DRAIN"; cfail=1 ;; esac
    echo "$node" | grep -q "Reason=odl: Xid 79 on 0000:5e:00.0 (generation 1)" || { echo "FAIL (coordinator drain): reason: $node"; cfail=1; }
    [ "$(grep -c "drained 1 fenced node with scontrol" "$clog")" = 1 ] || { echo "FAIL (coordinator drain): not drained exactly once"; cfail=1; }
    grep -q "generation 2: srun --exclude=$host\$" "$clog" || { echo "FAIL (coordinator drain): generation 2 has no --exclude=$host"; cfail=1; }
    grep -q '"drained": *true' "$cjob/fence.json" || { echo "FAIL (coordinator drain): fence.json does not record the drain"; cfail=1; }
    [ $crc != 0 ] && grep -q "giving up after 1 restart" "$clog" || { echo "FAIL (coordinator drain): want a give-up with the only node fenced (exit $crc)"; cfail=1; }
    [ $cfail = 0 ] && echo "ok   coordinator --slurm drained $host once with the real scontrol" || { fail=1; cat "$clog"; }
    scontrol update NodeName="$host" State=RESUME >/dev/null 2>&1
    i=0
    until sinfo -h -N -o %T 2>/dev/null | grep -qx idle || [ $i -ge 60 ]; do sleep 0.5; i=$((i + 1)); done
    sinfo -h -N -o %T | grep -qx idle || { echo "FAIL: node $host not idle again after State=RESUME"; fail=1; }
else
    echo "note: $coord not built; the coordinator's drain is not checked"
fi
[ $fail = 0 ] && echo "slurm_local: launch/odl.sbatch trained and finished on a 2-task Slurm job; fence drain shown by scontrol"
exit $fail
