#!/bin/sh
# A supervised CPU job over two emulated nodes on one machine, fenced and relaunched through the fence
# code (odl_health fence ...), as the coordinator (issue 12) is to do it:
#   - Open MPI's rsh agent is pointed at a local starter (fake_rsh below) that runs the "remote" daemon
#     here with ODL_NODE_NAME set to the host name it was asked for, so a hostfile "nodeA / nodeB"
#     gives two ranks that report two nodes.
#   1. ODL_FAULT=xid79@rank=1,step=10: rank 1 (nodeB) stops at step 10 with a node-fatal Xid; the
#      supervisor fences nodeB once, writes a hostfile without it and relaunches; the job resumes from
#      the last committed checkpoint at world size 1 and finishes the epoch; the cursor arithmetic shows
#      every sample of the epoch was consumed once.
#   2. A restarted supervisor (a new process reading fence.json) still excludes nodeB.
#   3. ODL_FAULT=xid13@rank=1,step=10: an application Xid restarts the job on both nodes, no fence.
#   tests/health_supervised.sh SRCDIR ODL_WORKER ODL_HEALTH
# Skipped (77) without Fashion-MNIST or Open MPI's mpirun.
set -u
src="$1"
worker="$2"
health="$3"
data="${ODL_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}"
if [ ! -e "$data/train-images-idx3-ubyte.gz" ] && [ ! -e "$data/train-images-idx3-ubyte" ]; then
    echo "SKIP: no Fashion-MNIST in $data (set ODL_FASHION_MNIST)"
    exit 77
fi
mpirun=$(command -v mpirun || true)
if [ -z "$mpirun" ] || ! "$mpirun" --version 2>/dev/null | grep -q "Open MPI"; then
    echo "SKIP: needs Open MPI's mpirun (its plm_rsh_agent emulates the nodes)"
    exit 77
fi
tmp=$(mktemp -d /tmp/odl_health_sup.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail=0
cat >"$tmp/fake_rsh" <<'EOF'
#!/bin/sh
# Open MPI rsh agent: "fake_rsh HOST COMMAND..." runs COMMAND on this machine as node HOST.
ODL_NODE_NAME="$1"
# Each node's daemon gets its own session folder, as on separate machines.
TMPDIR="$(dirname "$0")/node-$1"
mkdir -p "$TMPDIR"
export ODL_NODE_NAME TMPDIR
shift
exec sh -c "$*"
EOF
chmod +x "$tmp/fake_rsh"
printf 'nodeA slots=1\nnodeB slots=1\n' >"$tmp/hosts"
flags="--oversubscribe --mca plm_rsh_agent $tmp/fake_rsh --mca plm_rsh_no_tree_spawn 1 --mca routed direct"
flags="$flags --mca btl_base_warn_component_unused 0"
[ "$(id -u)" = 0 ] && flags="$flags --allow-run-as-root"
N=2000
B=32
base="--task=train --model=mnist_mlp --data_dir $data --device cpu --seed 1 --no-dropout --progress off
      --max-train-samples $N --batch-size $B --epochs 1 --checkpoint-every 5 --resume auto"

# supervise JOB FAULT: run generations until the job succeeds (at most 4); prints what it does.
supervise() {
    job="$1"
    fault="$2"
    mkdir -p "$job/ck"
    gen=0
    while [ $gen -lt 4 ]; do
        "$health" fence hostfile --job-dir "$job" --in "$tmp/hosts" --out "$job/hosts.$gen" >/dev/null 2>&1 ||
            { echo "supervisor: no host left"; return 1; }
        np=$(grep -vc '^#' "$job/hosts.$gen")
        echo "supervisor: generation $gen on $np node(s): $(grep -v '^#' "$job/hosts.$gen" | cut -d' ' -f1 | tr '\n' ' ')"
        # The injected fault acts once (in generation 0): a relaunched job meets a healthy machine.
        f=""
        [ $gen = 0 ] && f="$fault"
        # shellcheck disable=SC2086
        ODL_FAULT="$f" timeout 150 "$mpirun" $flags --hostfile "$job/hosts.$gen" -np "$np" "$worker" $base \
            --checkpoint-dir "$job/ck" >"$job/gen$gen.log" 2>&1
        rc=$?
        [ $rc = 0 ] && { echo "supervisor: generation $gen finished"; return 0; }
        line=$(grep -m1 -o "GPU health: [a-z-]* Xid [0-9]* on [0-9a-f:.]* at step [0-9]* on node [^:]*" "$job/gen$gen.log")
        [ -n "$line" ] || { echo "supervisor: generation $gen failed (exit $rc) without a health finding"; cat "$job/gen$gen.log"; return 1; }
        set -- $line # GPU health: CLASS Xid N on PCI at step S on node NODE
        cls=$3 xid=$5 gpu=$7 node=${13}
        echo "supervisor: generation $gen: $cls Xid $xid on $gpu of $node"
        if [ "$cls" = node-fatal ]; then
            "$health" fence add --job-dir "$job" --node "$node" --xid "$xid" --gpu "$gpu" --generation $gen
        fi
        gen=$((gen + 1))
    done
    return 1
}

# 1. Xid 79 on nodeB at step 10
job="$tmp/job79"
supervise "$job" "xid79@rank=1,step=10" || fail=1
[ "$("$health" fence list --job-dir "$job" | grep -c ' fenced ')" = 1 ] || { echo "FAIL: want one fence"; fail=1; }
"$health" fence list --job-dir "$job" | grep -q "^nodeB xid=79 gpu=0000:00:00.0 .*generation=0 .* fenced" ||
    { echo "FAIL: nodeB not fenced for Xid 79:"; "$health" fence list --job-dir "$job"; fail=1; }
grep -q "rank 0 of 2" "$job/gen0.log" || { echo "FAIL: generation 0 was not 2 ranks"; fail=1; }
grep -q "rank 1 (host [^)]*): GPU health: node-fatal Xid 79 on 0000:00:00.0 at step 10 on node nodeB" "$job/gen0.log" ||
    { echo "FAIL: generation 0 did not stop for rank 1's Xid 79:"; cat "$job/gen0.log"; fail=1; }
if [ -e "$job/gen1.log" ]; then
    grep -q "world size 1" "$job/gen1.log" || { echo "FAIL: generation 1 not at world size 1"; fail=1; }
    # Every sample of the epoch once: resumed at (step S, cursor C) with C = 2 ranks * B * S, then
    # ceil((N - C) / B) steps of one rank end the epoch.
    r=$(grep -o "resumed at epoch 1, step [0-9]*, sample cursor [0-9]*" "$job/gen1.log")
    S=$(echo "$r" | sed 's/.*step \([0-9]*\),.*/\1/')
    C=$(echo "$r" | sed 's/.*cursor //')
    done_steps=$(grep -o "done: [0-9]* steps" "$job/gen1.log" | grep -o "[0-9]*")
    want=$((S + (N - C + B - 1) / B))
    echo "generation 1: resumed at step $S, cursor $C; done after $done_steps steps (want $want)"
    if [ -z "$S" ] || [ "$C" != $((2 * B * S)) ] || [ "$done_steps" != "$want" ] || [ "$S" -lt 5 ] || [ "$S" -gt 10 ]; then
        echo "FAIL: the relaunched job did not take the epoch's remaining samples once:"
        cat "$job/gen1.log"
        fail=1
    fi
    if grep -v '^#' "$job/hosts.1" | grep -q nodeB; then echo "FAIL: generation 1's hostfile still has nodeB"; fail=1; fi
else
    echo "FAIL: no relaunch after the Xid 79"
    fail=1
fi

# 2. A restarted supervisor reads the same fence and excludes nodeB.
"$health" fence hostfile --job-dir "$job" --in "$tmp/hosts" --out "$tmp/hosts.again" >/dev/null
[ "$(grep -v '^#' "$tmp/hosts.again")" = "nodeA slots=1" ] || { echo "FAIL: fence lost across a restart"; fail=1; }
[ "$("$health" fence exclude --job-dir "$job")" = "--exclude=nodeB" ] || { echo "FAIL: srun exclude"; fail=1; }

# 3. Xid 13 on nodeB: restart on both nodes, no fence.
job="$tmp/job13"
supervise "$job" "xid13@rank=1,step=10" || fail=1
[ -z "$("$health" fence list --job-dir "$job")" ] || { echo "FAIL: an application Xid fenced a node"; fail=1; }
grep -q "application Xid 13 on 0000:00:00.0 at step 10 on node nodeB" "$job/gen0.log" || { echo "FAIL: no Xid 13 stop"; fail=1; }
if [ -e "$job/gen1.log" ]; then
    grep -q "world size 2" "$job/gen1.log" || { echo "FAIL: the restart after Xid 13 is not on both nodes"; fail=1; }
    grep -q "done: [0-9]* steps" "$job/gen1.log" || { echo "FAIL: the restart did not finish"; fail=1; }
else
    echo "FAIL: no restart after the Xid 13"
    fail=1
fi
[ $fail = 0 ] && echo "health_supervised: Xid 79 fenced once and relaunched at world size 1; Xid 13 restarted unfenced"
exit $fail
