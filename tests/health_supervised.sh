#!/bin/sh
# A CPU job over two emulated nodes on one machine, supervised by the real odl_coordinator, which fences
# a node on a node-fatal Xid and relaunches the job without it (docs/health.md "Fencing"):
#   - Open MPI's rsh agent is pointed at a local starter (fake_rsh below) that runs the "remote" daemon
#     here with ODL_NODE_NAME set to the host name it was asked for, so a hostfile "nodeA / nodeB"
#     gives two ranks that report two nodes (in their Hello and in their Xid findings).
#   - odl_coordinator --hostfile hosts -- mpirun --hostfile {hostfile} -np {np} odl_worker ...
#   1. ODL_FAULT=xid79@rank=1,step=10: rank 1 (nodeB) reports a node-fatal Xid 79 at step 10; the
#      coordinator fences nodeB once (fence.json), the ranks checkpoint at the next step boundary and
#      stop, generation 2 runs from a hostfile without nodeB at world size 1 and finishes the epoch; the
#      cursor arithmetic shows every sample of the epoch was consumed once; /metrics counts the Xid
#      (prometheus_client's parser, when installed); the coordinator's loop closes cleanly.
#   2. The coordinator is kill -9ed right after fencing; one started again on the same job directory
#      relaunches without nodeB (the fence is read from fence.json) and finishes at world size 1.
#   3. ODL_FAULT=xid13@rank=1,step=10: an application Xid restarts the job on both nodes, no fence.
#   5. escalate_after: 2 (ODL_HEALTH_XID_TABLE): Xid 13 on nodeB at step 5 restarts the job unfenced;
#      Xid 13 on nodeB again at step 15 (the restarted generation) is the node's second application Xid
#      in the window: the coordinator fences nodeB as an escalation (xid_history.json counts across
#      generations) and the job finishes at world size 1.
#   4. --slurm: nodeB drained once (stand-in scontrol), the relaunch's srun gets --exclude=nodeB.
#   tests/health_supervised.sh SRCDIR ODL_WORKER ODL_HEALTH ODL_COORDINATOR
# Skipped (77) without Fashion-MNIST or Open MPI's mpirun.
set -u
src="$1"
worker="$2"
health="$3"
coord="$4"
. "$src/tests/coord_sh_util.sh" # need_*, emulate_nodes, wait_for, json_field, job_procs
need_fashion_mnist
need_open_mpi
py=""
for p in /usr/bin/python3 python3; do
    if "$p" -c "import prometheus_client.parser" 2>/dev/null; then py="$p"; break; fi
done
tmp=$(mktemp -d /tmp/odl_health_sup.XXXXXX)
trap '[ -n "${ODL_KEEP_TMP:-}" ] || rm -rf "$tmp"' EXIT
fail=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fail=1; }
printf 'nodeA slots=1\nnodeB slots=1\n' >"$tmp/hosts"
emulate_nodes "$tmp"
flags="$node_flags"
N=6000
B=32
base="--task=train --model=mnist_mlp --data_dir $data --device cpu --seed 1 --no-dropout --progress off
      --max-train-samples $N --batch-size $B --epochs 1 --checkpoint-every 5"
# rank 0 is slowed down (20 ms a step) so that the fence's checkpoint request, a second of steps ahead,
# lands inside the epoch
slow="slow@rank=0,step=0,ms=20"

# supervise JOB FAULT LOG: the coordinator in the background ($bg its pid)
supervise() {
    mkdir -p "$1"
    # shellcheck disable=SC2086
    ODL_FAULT="$2" timeout 300 "$coord" --job-dir "$1" --listen 127.0.0.1:0 --http 127.0.0.1:0 --timeout 20 \
        --backoff 0.2 --max-restarts 2 --hostfile "$tmp/hosts" -- \
        "$mpirun" $flags --hostfile {hostfile} -np {np} "$worker" $base >"$3" 2>&1 &
    bg=$!
}
expect() { # pattern file what
    if grep -q -- "$1" "$2"; then ok "$3"; else bad "$3 (no '$1' in $2)"; fi
}
# the log of generation G onwards
gen_log() { sed -n "/generation $1: started/,\$p" "$2"; }
# every sample of the epoch once: resumed at (step S, cursor C) with C = 2 ranks * B * S, then
# ceil((N - C) / B) steps of one rank end the epoch. $1: generation 2's log, $2: lowest S
check_epoch() {
    r=$(grep -o "resumed at epoch 1, step [0-9]*, sample cursor [0-9]*" "$1" | head -1)
    S=$(echo "$r" | sed 's/.*step \([0-9]*\),.*/\1/')
    C=$(echo "$r" | sed 's/.*cursor //')
    done_steps=$(grep -o "done: [0-9]* steps" "$1" | tail -1 | grep -o "[0-9]*")
    if [ -z "$S" ] || [ -z "$done_steps" ]; then bad "no resume / done line in the relaunch"; cat "$1"; return; fi
    want=$((S + (N - C + B - 1) / B))
    if [ "$C" = $((2 * B * S)) ] && [ "$done_steps" = "$want" ] && [ "$S" -ge "$2" ]; then
        ok "relaunch resumed at step $S, cursor $C and took the epoch's remaining samples once ($done_steps steps)"
    else
        bad "relaunch: resumed at step $S, cursor $C, done after $done_steps steps (want $want, step >= $2)"
        cat "$1"
    fi
}

# 1. Xid 79 on nodeB at step 10
job="$tmp/job79"
log="$tmp/coord79.log"
supervise "$job" "xid79@rank=1,step=10;$slow" "$log"
if wait_for "generation 2: started" "$log" 120 && [ -n "$py" ]; then
    # /metrics while generation 2 runs (the counter outlives the generation that saw the Xid)
    if "$py" "$src/tests/health_metrics.py" "$(json_field "$job/coordinator.json" http)" nodeB 79 node-fatal \
        >"$tmp/metrics.log" 2>&1; then ok "/metrics: $(tail -1 "$tmp/metrics.log")"
    else bad "/metrics"; cat "$tmp/metrics.log"; fi
fi
[ -z "$py" ] && echo "note: no Python with prometheus_client; /metrics not checked"
wait $bg
rc=$?
[ $rc = 0 ] && ok "coordinator finished the job (exit 0)" || { bad "coordinator exited $rc"; cat "$log"; }
expect "event loop closed cleanly; exit status 0" "$log" "coordinator loop closed cleanly"
expect "rank 0 of 2" "$log" "generation 1 ran 2 ranks"
expect "rank 1 (node nodeB) reports node-fatal Xid 79 on 0000:00:00.0" "$log" "rank 1 reported Xid 79 from nodeB"
[ "$(grep -c "node nodeB fenced (Xid 79" "$log")" = 1 ] && ok "nodeB fenced once" || bad "nodeB not fenced exactly once"
[ "$("$health" fence list --job-dir "$job" | grep -c ' fenced ')" = 1 ] && ok "fence.json holds one fence" ||
    bad "want one fence in fence.json"
"$health" fence list --job-dir "$job" | grep -q "^nodeB xid=79 gpu=0000:00:00.0 .*generation=1 .* fenced" &&
    ok "fence.json: nodeB, Xid 79, its GPU, generation 1" || { bad "nodeB's fence entry"; "$health" fence list --job-dir "$job"; }
grep -v '^#' "$job/hosts.1" | grep -q nodeB && ok "generation 1's hostfile has nodeB" || bad "hosts.1"
if [ -e "$job/hosts.2" ] && ! grep -v '^#' "$job/hosts.2" | grep -q nodeB; then ok "generation 2's hostfile has no nodeB"
else bad "generation 2's hostfile"; fi
gen_log 2 "$log" >"$tmp/gen2.log"
expect "world size 1" "$tmp/gen2.log" "generation 2 at world size 1"
# the ranks checkpointed at the boundary the coordinator chose after the report (not the step-10 one)
check_epoch "$tmp/gen2.log" 11
[ -e "$job/fault-xid79-rank1-step10" ] && ok "the injected Xid fired once (its marker in the job dir)" || bad "no marker"

# 2. The fence survives a coordinator restart: kill -9 it right after it fenced nodeB.
job="$tmp/job79r"
log="$tmp/coord79r.log"
supervise "$job" "xid79@rank=1,step=10;$slow" "$log"
if wait_for "node nodeB fenced" "$log" 120; then
    pkill -KILL -P $bg -x odl_coordinator # $bg is timeout(1), the coordinator its child
    wait $bg 2>/dev/null
    grep -q "event loop closed" "$log" && bad "the first coordinator was not killed"

    # Started again at once: generation 2 may be running or relaunching; the new coordinator ends
    # whatever of it is still on this machine before it launches (coordinator/leftovers.c).
    supervise "$job" "xid79@rank=1,step=10;$slow" "$tmp/coord79r2.log"
    wait $bg
    rc=$?
    [ $rc = 0 ] && ok "restarted coordinator finished the job" || { bad "restarted coordinator exited $rc"; cat "$tmp/coord79r2.log"; }
    expect "fenced: nodeB" "$tmp/coord79r2.log" "restarted coordinator's hostfile leaves nodeB out"
    expect "world size 1" "$tmp/coord79r2.log" "the relaunch after the restart ran at world size 1"
    expect "event loop closed cleanly; exit status 0" "$tmp/coord79r2.log" "restarted coordinator's loop closed cleanly"
    [ -z "$(job_procs "$job")" ] && ok "no process of the job is left" || bad "left behind: $(job_procs "$job")"
    [ "$("$health" fence list --job-dir "$job" | grep -c ' fenced ')" = 1 ] && ok "still one fence" || bad "fence count"
    [ "$("$health" fence exclude --job-dir "$job")" = "--exclude=nodeB" ] && ok "srun --exclude=nodeB" || bad "srun exclude"
fi

# 3. Xid 13 on nodeB: restart on both nodes, no fence.
job="$tmp/job13"
log="$tmp/coord13.log"
supervise "$job" "xid13@rank=1,step=10;$slow" "$log"
wait $bg
rc=$?
[ $rc = 0 ] && ok "Xid 13 job finished (exit 0)" || { bad "Xid 13 coordinator exited $rc"; cat "$log"; }
expect "application Xid 13 on 0000:00:00.0: restarting the job without fencing" "$log" "Xid 13 restarts the job"
[ -z "$("$health" fence list --job-dir "$job")" ] && ok "an application Xid fenced no node" || bad "Xid 13 fenced a node"
gen_log 2 "$log" >"$tmp/gen2.log"
expect "world size 2" "$tmp/gen2.log" "the restart after Xid 13 is on both nodes"
expect "done: [0-9]* steps" "$tmp/gen2.log" "the restart finished"
expect "event loop closed cleanly; exit status 0" "$log" "coordinator loop closed cleanly"

# 5. Repeated application Xids escalate: with escalate_after: 2 the second Xid 13 on nodeB fences it.
job="$tmp/job13e"
log="$tmp/coord13e.log"
printf 'escalate_after: 2\nescalate_window_s: 3600\n' >"$tmp/xid_table.yaml"
ODL_HEALTH_XID_TABLE="$tmp/xid_table.yaml"
export ODL_HEALTH_XID_TABLE
supervise "$job" "xid13@rank=1,step=5;xid13@rank=1,step=15;$slow" "$log"
wait $bg
rc=$?
unset ODL_HEALTH_XID_TABLE
[ $rc = 0 ] && ok "escalation job finished (exit 0)" || { bad "escalation coordinator exited $rc"; cat "$log"; }
[ -e "$job/fault-xid13-rank1-step5" ] && [ -e "$job/fault-xid13-rank1-step15" ] && ok "both Xid 13 faults fired" ||
    bad "markers: $(ls "$job" | grep fault-)"
[ "$(grep -c "application Xid 13 on 0000:00:00.0: restarting the job without fencing" "$log")" = 1 ] &&
    ok "the first Xid 13 restarted the job without a fence" || bad "want exactly one unfenced restart"
gen_log 2 "$log" | sed '/generation 3: started/,$d' >"$tmp/gen2e.log"
expect "world size 2" "$tmp/gen2e.log" "generation 2 (after the first Xid 13) ran on both nodes"
expect "node nodeB: 2 application Xids (13,13) within 3600 s (escalate_after 2): fencing it" "$log" \
    "the second Xid 13 on nodeB escalated"
[ "$(grep -c "node nodeB fenced (Xid 13" "$log")" = 1 ] && ok "nodeB fenced once by the escalation" || bad "nodeB escalation fence count"
"$health" fence list --job-dir "$job" | grep -q "^nodeB xid=13 .*generation=2 .* fenced reason=\"odl: escalated: 2 application Xids (13,13) within 3600 s" &&
    ok "fence.json: nodeB, Xid 13, generation 2, an escalation of 2 Xids" || { bad "escalation fence entry"; "$health" fence list --job-dir "$job"; }
[ "$("$health" fence list --job-dir "$job" | grep -c ' fenced ')" = 1 ] && ok "fence.json holds one fence" || bad "want one fence"
gen_log 3 "$log" >"$tmp/gen3e.log"
expect "world size 1" "$tmp/gen3e.log" "generation 3 at world size 1"
expect "done: [0-9]* steps" "$tmp/gen3e.log" "generation 3 finished"
expect "fenced: nodeB" "$log" "generation 3's hostfile leaves nodeB out"
expect "event loop closed cleanly; exit status 0" "$log" "coordinator loop closed cleanly"

# 4. Under Slurm (--slurm): the fenced node is drained once with scontrol (a recording stand-in here;
#    tests/slurm_local.sh drains with the real one) and the relaunch's {exclude} is --exclude=nodeB
#    (a stand-in srun records its arguments and runs the rest).
job="$tmp/job79s"
log="$tmp/coord79s.log"
cat >"$tmp/scontrol" <<EOS
#!/bin/sh
printf '%s\n' "\$*" >>"$tmp/scontrol.calls"
EOS
cat >"$tmp/srun" <<EOS
#!/bin/sh
# stand-in srun: records its options up to "--", runs what follows
while [ "\$1" != "--" ]; do printf '%s ' "\$1" >>"$tmp/srun.calls"; shift; done
echo >>"$tmp/srun.calls"
shift
exec "\$@"
EOS
chmod +x "$tmp/scontrol" "$tmp/srun"
mkdir -p "$job"
# shellcheck disable=SC2086
ODL_SCONTROL="$tmp/scontrol" ODL_FAULT="xid79@rank=1,step=10;$slow" timeout 300 "$coord" --job-dir "$job" \
    --listen 127.0.0.1:0 --http off --timeout 20 --backoff 0.2 --max-restarts 2 --hostfile "$tmp/hosts" --slurm -- \
    "$tmp/srun" --nodes=2 {exclude} -- "$mpirun" $flags --hostfile {hostfile} -np {np} "$worker" $base >"$log" 2>&1
rc=$?
[ $rc = 0 ] && ok "--slurm job finished (exit 0)" || { bad "--slurm coordinator exited $rc"; cat "$log"; }
[ "$(grep -c . "$tmp/scontrol.calls" 2>/dev/null)" = 1 ] && ok "scontrol called once" || bad "scontrol calls: $(cat "$tmp/scontrol.calls" 2>/dev/null)"
expect "update NodeName=nodeB State=DRAIN Reason=odl: Xid 79 on 0000:00:00.0 (generation 1)" "$tmp/scontrol.calls" \
    "nodeB drained with the Xid as the reason"
[ "$(sed -n 1p "$tmp/srun.calls")" = "--nodes=2 " ] && ok "generation 1: srun without --exclude" || bad "srun 1: $(sed -n 1p "$tmp/srun.calls")"
[ "$(sed -n 2p "$tmp/srun.calls")" = "--nodes=2 --exclude=nodeB " ] && ok "generation 2: srun --exclude=nodeB" ||
    bad "srun 2: $(sed -n 2p "$tmp/srun.calls")"

[ $fail = 0 ] && echo "health_supervised: Xid 79 fenced once and relaunched at world size 1 (also after a coordinator restart); Xid 13 restarted unfenced; a repeated Xid 13 escalated to a fence"
exit $fail
