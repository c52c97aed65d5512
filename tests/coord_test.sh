#!/bin/sh
# The coordinator with real processes on loopback (docs/coordinator.md):
#   tests/coord_test.sh CASE SRCDIR ODL_COORDINATOR ODL_WORKER COMM_COMPARE_PARAMS COORD_PEER
# Every case supervises a 2-rank CPU training (mpirun, mnist_mlp on Fashion-MNIST, 30 steps of 2 x 256,
# checkpoints every 10 steps decided by the coordinator; rank 0 is slowed down with
# ODL_FAULT=slow@rank=0,step=0,ms=M so that the job lasts long enough to be hit), and checks that the
# coordinator's loop closed cleanly. Cases:
#   kill                 ODL_FAULT=kill@rank=1,step=15: the death is reported within the timeout naming rank 1,
#                        the job is relaunched once from the step-10 checkpoint, final parameters equal an
#                        uninterrupted run's bit for bit
#   hang                 the same with hang@rank=1,step=15 (rank 1 stops inside its next collective and
#                        keeps heartbeating)
#   last_words           kill@rank=1,step=15 with the job's output passing through a relay that holds each chunk
#                        0.3 s (as mpirun's I/O forwarding, a process of the job's group): the dying rank's
#                        last line still reaches the log (the group is killed COORD_KILL_GRACE_MS after the
#                        failure unless it ends first)
#   coordinator_restart  the coordinator is kill -9ed mid-job; its workers end; started again on the same DIR it
#                        finishes the job at a higher generation, same parameters
#   restart_leftovers    the same with generation 1 frozen (SIGSTOP): the restarted coordinator ends its processes
#                        before it relaunches; a second coordinator on the live DIR is refused
#   refuse               a wrong secret, an old generation and a duplicate rank are refused with one log line each,
#                        the job unaffected (no restart, same parameters)
#   bad_input            tests/coord_bad_input.py: garbage on the port and a trickling /metrics client; the job
#                        unaffected
#   metrics              /metrics parsed by prometheus_client's text parser (skipped without it)
#   stop                 rank 1 SIGSTOPped (socket open, no heartbeats): named within the timeout, relaunched once
#   checkpoint_now       SIGUSR1: a checkpoint at one step on every rank, committed; the job goes on unaffected
#   give_up              a command that always fails: --max-restarts relaunches, then the job's exit status
#   serve_preempt        a serving coordinator whose only rank finished ends at once on SIGTERM (exit 75)
#   refused_rank         a rank refused before it registers (wrong secret) is named with the reason when the job fails
#   two_fenced           Xid 79 on two nodes of one generation (coord_peer): both fenced, the relaunch on the third
#   bad_options          a number option that is not all a number of its kind is a usage error naming it
#   damaged_state        a damaged state.json, committed.json or plan.json is an error naming the field (exit 1),
#                        nothing is launched; a sound state.json's generation goes on
#   preempt              SIGTERM: every rank stops at the same step after a committed checkpoint, exit 75; started
#                        again on DIR the job finishes with the same parameters
#   retain               checkpoint.keep 2: the coordinator commits and applies retention: exactly the newest 2
#                        checkpoints stay, manifest.json names the committed one, committed.json agrees, the writer
#                        neither wrote the manifest nor deleted; then --keep 1 on the coordinator overrides it
#   commit_refused       committed.json cannot be written (a directory stands where its temporary goes): the
#                        checkpoints written meanwhile are not committed, nothing is deleted, the manifest and
#                        committed.json still name the previous commit; once it can be written again the job
#                        resumes from that commit and retention goes on
#   write_fails          rank 0's write of step 30 fails (its temporary's path is a directory): the job fails,
#                        the step-20 commit, its manifest and the older checkpoint kept with it stay
# In an ASan build (ODL_ASAN) the coordinator and coord_peer run with leak detection; the MPI ranks
# without (Open MPI keeps allocations past MPI_Finalize).
# Skipped (77) without Fashion-MNIST or mpirun.
set -u
case_="$1" src="$2" coord="$3" worker="$4" compare="$5" peer="$6"
# ODL_COORD_TEST_WORKER: another odl_worker (e.g. a Release one while the coordinator is an ASan build's,
# whose Debug CPU kernels make the training too slow for the timeouts)
worker="${ODL_COORD_TEST_WORKER:-$worker}"
. "$src/tests/mpi_data_skip.sh" # data=; skip without Fashion-MNIST or mpirun
tmp=$(mktemp -d)
job="$tmp/job"
bg=""
cleanup() {
    [ -n "$bg" ] && kill -KILL "$bg" 2>/dev/null
    # Nothing of this test may outlive it: the job's ranks carry $tmp in their arguments.
    for p in $(pgrep -f -- "$tmp/" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
    [ -n "${ODL_KEEP_TMP:-}" ] || rm -rf "$tmp"
}
trap cleanup EXIT
fail=0
mpirun_sh="$src/tests/comm_mpirun.sh"
wargs="--task=train --model=mnist_mlp --data_dir $data --device cpu --seed 1 --no-dropout --progress off
       --batch-size 256 --max-steps 30 --metrics-out $tmp/metrics.jsonl"
timeout_s=5

ok() { echo "ok   $*"; }
bad() {
    echo "FAIL $*"
    fail=1
}
finish() {
    if [ $fail != 0 ]; then
        for f in "$tmp"/*.log; do
            echo "----- $f"
            grep -v "INFO   \|INFO [a-z_]*:\$\|INFO [a-z_]*: " "$f" | tail -80
        done
    fi
    [ $fail = 0 ] && echo "coord_test $case_: passed"
    exit $fail
}
# seconds of the day of a log line's ISO timestamp
ts() { printf '%s\n' "$1" | sed -E 's/^[0-9-]+T([0-9]+):([0-9]+):([0-9.]+)Z.*/\1 \2 \3/' | awk '{printf "%.3f\n", $1*3600+$2*60+$3}'; }
within() { awk -v a="$1" -v b="$2" -v m="$3" 'BEGIN { exit !(b - a >= 0 && b - a <= m) }'; }
expect_line() { # log, pattern, what
    if grep -q -- "$2" "$1"; then ok "$3: $(grep -m1 -- "$2" "$1" | cut -c1-220)"; else bad "$3: no line matching: $2"; fi
}
count() { grep -c -- "$2" "$1"; }
wait_bg() {
    wait "$bg"
    rc=$?
    bg=""
}
expect_rc() { # status, what
    if [ "$rc" = "$1" ]; then ok "$2 (exit $1)"; else bad "$2: coordinator exited $rc (want $1)"; fi
}
expect_relaunches() { # count, log
    n=$(count "$2" "relaunching in")
    if [ "$n" = "$1" ]; then ok "relaunched $1 time(s)"; else bad "relaunched $n times (want $1)"; fi
}

reference() {
    # shellcheck disable=SC2086
    ODL_DUMP_PARAMS="$tmp/ref" ASAN_OPTIONS=detect_leaks=0 sh "$mpirun_sh" 2 "$worker" $wargs >"$tmp/reference.log" 2>&1 ||
        bad "uninterrupted run failed"
}
# supervised LOG FAULT [coordinator args...]: runs in the foreground, sets rc
supervised() {
    log="$1" fault="$2"
    shift 2
    # shellcheck disable=SC2086
    ODL_FAULT="$fault" ODL_DUMP_PARAMS="$tmp/sup" ASAN_OPTIONS=detect_leaks=1 "$coord" --job-dir "$job" \
        --listen 127.0.0.1:0 --timeout $timeout_s --backoff 0.2 --checkpoint-every 10 "$@" -- \
        env ASAN_OPTIONS=detect_leaks=0 sh "$mpirun_sh" 2 "$worker" $wargs >"$log" 2>&1
    rc=$?
}
supervised_bg() { # LOG FAULT [args]: in the background, $bg its pid
    log="$1" fault="$2"
    shift 2
    # shellcheck disable=SC2086
    ODL_FAULT="$fault" ODL_DUMP_PARAMS="$tmp/sup" ASAN_OPTIONS=detect_leaks=1 "$coord" --job-dir "$job" \
        --listen 127.0.0.1:0 --timeout $timeout_s --backoff 0.2 --checkpoint-every 10 "$@" -- \
        env ASAN_OPTIONS=detect_leaks=0 sh "$mpirun_sh" 2 "$worker" $wargs >"$log" 2>&1 &
    bg=$!
}
. "$src/tests/coord_sh_util.sh" # wait_for, json_field, job_procs
same_params() {
    for r in 0 1; do
        if "$compare" "$tmp/ref.rank$r.h5" "$tmp/sup.rank$r.h5" --bitwise >"$tmp/cmp$r.txt" 2>&1; then
            ok "rank $r parameters equal the uninterrupted run's bit for bit"
        else
            bad "rank $r parameters differ from the uninterrupted run's"
            cat "$tmp/cmp$r.txt"
        fi
    done
    rm -f "$tmp"/sup.rank*.h5
}
loop_closed() { # log, expected exit status
    expect_line "$1" "event loop closed cleanly; exit status $2" "coordinator loop closed cleanly"
}
# ckpt_state: "disk=<ckpt files> manifest=<latest>:<checkpoints> committed=<step>:<file>" of $job
ckpt_state() {
    python3 - "$job" <<'PY'
import json, os, sys
job = sys.argv[1]
ck = os.path.join(job, "checkpoints")
disk = sorted((f for f in os.listdir(ck) if f.startswith("ckpt-") and f.endswith(".h5")), reverse=True)
def load(p):
    try:
        with open(p) as f:
            return json.load(f)
    except OSError:
        return None
m = load(os.path.join(ck, "manifest.json"))
c = load(os.path.join(job, "committed.json"))
print("disk=%s manifest=%s committed=%s" % (
    ",".join(disk),
    "%s:%s" % (m["latest"], ",".join(m["checkpoints"])) if m else "none",
    "%s:%s" % (c["step"], os.path.basename(c["path"])) if c else "none"))
PY
}
expect_ckpt_state() { # want, what
    got=$(ckpt_state)
    if [ "$got" = "$1" ]; then ok "$2: $got"; else bad "$2: $got (want $1)"; fi
}
c10=ckpt-00000010.h5 c20=ckpt-00000020.h5 c30=ckpt-00000030.h5 c40=ckpt-00000040.h5 c50=ckpt-00000050.h5

case "$case_" in
kill | hang)
    reference
    supervised "$tmp/coord.log" "$case_@rank=1,step=15;slow@rank=0,step=0,ms=40" --max-restarts 2
    expect_rc 0 "job finished"
    if [ "$case_" = kill ]; then
        pat="generation 1 failed: rank 1 (node [^)]*) disconnected at step"
    else
        pat="generation 1 failed: no rank made progress for [0-9.]* s (timeout 5 s): rank 1 hangs at step 15"
    fi
    expect_line "$tmp/coord.log" "$pat" "failure named rank 1"
    if [ "$case_" = kill ]; then
        expect_line "$tmp/coord.log" "  rank 0 (node [^)]*, pid [0-9]*): step [0-9]*, epoch 1, collective #[0-9]*, " "what every rank was doing"
    else
        expect_line "$tmp/coord.log" "  rank 0 (node [^)]*, pid [0-9]*): step 15, .*waiting in MPI_" "what every rank was doing"
        expect_line "$tmp/coord.log" "ODL_FAULT: hang@rank=1,step=15: the rank stops at the entry of its next collective" \
            "rank 1 stopped inside step 16's collective"
    fi
    t_fault=$(ts "$(grep -m1 "ODL_FAULT: $case_@rank=1,step=15 fires now" "$tmp/coord.log")")
    t_seen=$(ts "$(grep -m1 "generation 1 failed" "$tmp/coord.log")")
    if within "$t_fault" "$t_seen" $((timeout_s + 2)); then ok "reported $t_fault -> $t_seen (timeout $timeout_s s)"
    else bad "failure reported at $t_seen, fault at $t_fault: not within the timeout"; fi
    expect_relaunches 1 "$tmp/coord.log"
    expect_line "$tmp/coord.log" "generation 2: started .*resuming from .*ckpt-00000010.h5" "resumed from the committed step 10"
    [ "$(json_field "$job/state.json" generation)" = 2 ] && ok "state.json: generation 2" || bad "state.json: $(cat "$job/state.json")"
    same_params
    loop_closed "$tmp/coord.log" 0
    ;;
last_words)
    cat >"$tmp/relay.py" <<'EOS'
import os, select, sys, time
hold = float(sys.argv[1])
queue, eof = [], False
while queue or not eof:
    wait = max(0.0, queue[0][0] - time.monotonic()) if queue else None
    ready = select.select([] if eof else [0], [], [], wait)[0]
    if ready:
        chunk = os.read(0, 65536)
        if chunk:
            queue.append((time.monotonic() + hold, chunk))
        else:
            eof = True
    while queue and queue[0][0] <= time.monotonic():
        os.write(1, queue.pop(0)[1])
EOS
    cat >"$tmp/relayed.sh" <<EOS
#!/bin/sh
sh "$mpirun_sh" 2 "$worker" $(echo $wargs) 2>&1 | python3 "$tmp/relay.py" 0.3
EOS
    ODL_FAULT="kill@rank=1,step=15;slow@rank=0,step=0,ms=40" ASAN_OPTIONS=detect_leaks=1 "$coord" --job-dir "$job" \
        --listen 127.0.0.1:0 --timeout $timeout_s --backoff 0.2 --checkpoint-every 10 --max-restarts 1 -- \
        env ASAN_OPTIONS=detect_leaks=0 sh "$tmp/relayed.sh" >"$tmp/coord.log" 2>&1
    rc=$?
    expect_rc 0 "job finished"
    expect_line "$tmp/coord.log" "generation 1 failed: rank 1 (node [^)]*) disconnected at step" "failure named rank 1"
    expect_line "$tmp/coord.log" "ODL_FAULT: kill@rank=1,step=15 fires now" "the dying rank's last line, held 0.3 s by the relay, reached the log"
    expect_relaunches 1 "$tmp/coord.log"
    loop_closed "$tmp/coord.log" 0
    ;;
coordinator_restart)
    reference
    supervised_bg "$tmp/coord1.log" "slow@rank=0,step=0,ms=150"
    wait_for "committed checkpoint .*ckpt-00000010.h5" "$tmp/coord1.log" 60
    kill -KILL "$bg"
    wait "$bg" 2>/dev/null
    bg=""
    ok "coordinator kill -9ed after the step-10 commit"
    i=0
    while pgrep -f -- "$tmp/metrics.jsonl" >/dev/null && [ $i -lt 200 ]; do sleep 0.1; i=$((i + 1)); done
    if pgrep -f -- "$tmp/metrics.jsonl" >/dev/null; then bad "workers of generation 1 still run 20 s after their coordinator died"
    else ok "workers of generation 1 ended when their coordinator died"; fi
    supervised "$tmp/coord2.log" "slow@rank=0,step=0,ms=10"
    expect_rc 0 "restarted coordinator finished the job"
    expect_line "$tmp/coord2.log" "job directory $job: generation 1 so far" "restarted coordinator read generation 1"
    expect_line "$tmp/coord2.log" "generation 2: started .*resuming from .*ckpt-000000[123]0.h5" "generation 2 resumed"
    [ "$(json_field "$job/state.json" generation)" = 2 ] && ok "state.json: generation 2" || bad "state.json: $(cat "$job/state.json")"
    same_params
    loop_closed "$tmp/coord2.log" 0
    ;;
restart_leftovers)
    # The coordinator is kill -9ed while its generation is frozen (SIGSTOP, as on a hung filesystem):
    # nothing of generation 1 notices. One started again on the same DIR ends those processes before
    # it launches generation 2. Meanwhile a second coordinator on the live DIR is refused.
    reference
    supervised_bg "$tmp/coord1.log" "slow@rank=0,step=0,ms=150"
    wait_for "committed checkpoint .*ckpt-00000010.h5" "$tmp/coord1.log" 60
    "$coord" --job-dir "$job" --listen 127.0.0.1:0 -- true >"$tmp/second.log" 2>&1
    r=$?
    [ $r = 2 ] && grep -q "error: another odl_coordinator (pid [0-9]*) runs on the job directory" "$tmp/second.log" &&
        ok "a second coordinator on the same DIR refused: $(cat "$tmp/second.log")" ||
        bad "second coordinator: exit $r: $(cat "$tmp/second.log")"
    frozen=$(job_procs "$job")
    # shellcheck disable=SC2086
    kill -STOP $frozen
    # until every thread of them has stopped (a SIGSTOP takes effect asynchronously): only then can
    # nothing of generation 1 notice its coordinator's death
    i=0
    while [ $i -lt 40 ]; do
        running=0
        for p in $frozen; do
            st=$(sed 's/.*) \(.\).*/\1/' "/proc/$p/stat" 2>/dev/null)
            [ -n "$st" ] && [ "$st" != T ] && [ "$st" != Z ] && running=1
        done
        [ $running = 0 ] && break
        sleep 0.05
        i=$((i + 1))
    done
    sleep 0.2
    kill -KILL "$bg"
    wait "$bg" 2>/dev/null
    bg=""
    # what is left: the frozen ones still there (one busy in the kernel stops a moment later), not zombies
    sleep 0.5
    frozen=$(for p in $(job_procs "$job"); do
        st=$(sed 's/.*) \(.\).*/\1/' "/proc/$p/stat" 2>/dev/null)
        [ -n "$st" ] && [ "$st" != Z ] && echo "$p"
    done)
    n=$(echo $frozen | wc -w)
    [ "$n" -gt 0 ] && ok "generation 1: $n processes frozen, their coordinator dead" || bad "no process of the job found"
    supervised "$tmp/coord2.log" "slow@rank=0,step=0,ms=10"
    expect_rc 0 "restarted coordinator finished the job"
    expect_line "$tmp/coord2.log" "WARN ended [1-9][0-9]* process.* of generation 1 that outlived their coordinator" \
        "the restarted coordinator ended generation 1's processes"
    left=""
    for p in $frozen; do
        st=$(sed 's/.*) \(.\).*/\1/' "/proc/$p/stat" 2>/dev/null)
        [ -n "$st" ] && [ "$st" != Z ] && left="$left $p"
    done
    [ -z "$left" ] && ok "no process of generation 1 is left" || { bad "left behind:$left"; kill -9 $left 2>/dev/null; }
    expect_line "$tmp/coord2.log" "generation 2: started .*resuming from .*ckpt-00000010.h5" "generation 2 resumed from step 10"
    same_params
    loop_closed "$tmp/coord2.log" 0
    ;;
refuse)
    reference
    supervised_bg "$tmp/coord.log" "slow@rank=0,step=0,ms=150"
    wait_for "rank 1 of 2 registered" "$tmp/coord.log" 60 && wait_for "rank 0 of 2 registered" "$tmp/coord.log" 10
    addr=$(json_field "$job/coordinator.json" listen)
    printf 'not the job secret\n' >"$tmp/wrong"
    chmod 600 "$tmp/wrong"
    "$peer" "$addr" "$tmp/wrong" 0 2 1 >"$tmp/p1.txt" 2>&1
    r1=$?
    "$peer" "$addr" "$job/secret" 0 2 0 >"$tmp/p2.txt" 2>&1
    r2=$?
    "$peer" "$addr" "$job/secret" 0 2 1 >"$tmp/p3.txt" 2>&1
    r3=$?
    wait_bg
    [ $r1 = 3 ] && grep -q "wrong job secret" "$tmp/p1.txt" && ok "wrong secret refused: $(cat "$tmp/p1.txt")" || bad "wrong secret: exit $r1: $(cat "$tmp/p1.txt")"
    [ $r2 = 3 ] && grep -q "generation 0, the job is at generation 1 (an older job)" "$tmp/p2.txt" && ok "old generation refused" || bad "old generation: exit $r2: $(cat "$tmp/p2.txt")"
    [ $r3 = 3 ] && grep -q "duplicate rank 0" "$tmp/p3.txt" && ok "duplicate rank refused" || bad "duplicate rank: exit $r3: $(cat "$tmp/p3.txt")"
    for what in "wrong job secret" "an older job" "duplicate rank 0"; do
        n=$(grep "WARN refused" "$tmp/coord.log" | grep -c "$what")
        [ "$n" = 1 ] && ok "one log line: $(grep "WARN refused" "$tmp/coord.log" | grep -m1 "$what" | cut -c1-200)" || bad "$n log lines for '$what'"
    done
    expect_rc 0 "job finished"
    expect_relaunches 0 "$tmp/coord.log"
    same_params
    loop_closed "$tmp/coord.log" 0
    ;;
bad_input)
    reference
    supervised_bg "$tmp/coord.log" "slow@rank=0,step=0,ms=400"
    wait_for "rank 0 of 2 registered" "$tmp/coord.log" 60 && wait_for "rank 1 of 2 registered" "$tmp/coord.log" 10
    if python3 "$src/tests/coord_bad_input.py" "$(json_field "$job/coordinator.json" listen)" \
        "$(json_field "$job/coordinator.json" http)" >"$tmp/bad_input.log" 2>&1; then
        ok "bad input: $(tail -1 "$tmp/bad_input.log")"
        sed 's/^/     /' "$tmp/bad_input.log"
    else
        bad "coord_bad_input.py failed"
        cat "$tmp/bad_input.log"
    fi
    wait_bg
    expect_rc 0 "job finished"
    expect_relaunches 0 "$tmp/coord.log"
    same_params
    loop_closed "$tmp/coord.log" 0
    ;;
metrics)
    py=""
    for p in /usr/bin/python3 python3; do
        if "$p" -c "import prometheus_client.parser" 2>/dev/null; then py="$p"; break; fi
    done
    if [ -z "$py" ]; then
        echo "SKIP: no Python with prometheus_client (apt-get install python3-prometheus-client)"
        exit 77
    fi
    supervised_bg "$tmp/coord.log" "slow@rank=0,step=0,ms=150"
    wait_for "committed checkpoint .*ckpt-00000010.h5" "$tmp/coord.log" 60
    # rank 0's CheckpointWritten can arrive before the heartbeats that say step 10 (every 200 ms) and the
    # tick that rebuilds /metrics: wait for both
    sleep 0.6
    if "$py" "$src/tests/coord_metrics.py" "$(json_field "$job/coordinator.json" http)" >"$tmp/metrics.log" 2>&1; then
        ok "/metrics: $(tail -1 "$tmp/metrics.log")"
    else
        bad "/metrics check failed"
        cat "$tmp/metrics.log"
    fi
    wait_bg
    expect_rc 0 "job finished"
    loop_closed "$tmp/coord.log" 0
    ;;
preempt)
    reference
    supervised_bg "$tmp/coord1.log" "slow@rank=0,step=0,ms=150"
    wait_for "committed checkpoint .*ckpt-00000010.h5" "$tmp/coord1.log" 60
    kill -TERM "$bg"
    wait_bg
    expect_rc 75 "preempted"
    stop=$(sed -n 's/.*checkpoint requested for preemption: every rank stops at the boundary after step \([0-9]*\).*/\1/p' "$tmp/coord1.log" | tail -1)
    [ -n "$stop" ] && ok "preemption step $stop" || bad "no preemption request in the log"
    # rank 0 logs the stop; every rank said goodbye with status 0 (a rank at another step would have hung)
    expect_line "$tmp/coord1.log" "rank 0/2] INFO stopping after step $stop as the coordinator asked" "rank 0 stopped after step $stop"
    expect_line "$tmp/coord1.log" "all 2 ranks of generation 1 finished" "every rank stopped cleanly"
    [ "$(json_field "$job/committed.json" step)" = "$stop" ] && ok "committed.json: step $stop" || bad "committed.json: $(cat "$job/committed.json")"
    loop_closed "$tmp/coord1.log" 75
    rm -f "$tmp"/sup.rank*.h5
    supervised "$tmp/coord2.log" ""
    expect_rc 0 "resumed job finished"
    expect_line "$tmp/coord2.log" "resuming from .*ckpt-0*$stop.h5" "resumed from the preemption checkpoint"
    same_params
    loop_closed "$tmp/coord2.log" 0
    ;;
stop)
    reference
    supervised_bg "$tmp/coord.log" "slow@rank=0,step=0,ms=100"
    wait_for "committed checkpoint .*ckpt-00000010.h5" "$tmp/coord.log" 60
    pid1=$(sed -n 's/.*rank 1 of 2 registered: node [^,]*, pid \([0-9]*\),.*/\1/p' "$tmp/coord.log" | head -1)
    kill -STOP "$pid1"
    t_stop=$(date +%s)
    ok "rank 1 (pid $pid1) SIGSTOPped"
    wait_bg
    kill -KILL "$pid1" 2>/dev/null
    expect_rc 0 "job finished"
    expect_line "$tmp/coord.log" "generation 1 failed: rank 1 (node [^,]*, pid $pid1) sent no heartbeat for [0-9.]* s (timeout 5 s)" \
        "stopped rank named"
    t_seen=$(date -d "$(grep -m1 "generation 1 failed" "$tmp/coord.log" | cut -c1-23)" +%s 2>/dev/null || echo 0)
    within "$t_stop" "$t_seen" $((timeout_s + 2)) && ok "reported $((t_seen - t_stop)) s after the stop" || bad "reported at $t_seen, stopped at $t_stop"
    expect_relaunches 1 "$tmp/coord.log"
    same_params
    loop_closed "$tmp/coord.log" 0
    ;;
checkpoint_now)
    reference
    supervised_bg "$tmp/coord.log" "slow@rank=0,step=0,ms=150"
    wait_for "committed checkpoint .*ckpt-00000010.h5" "$tmp/coord.log" 60
    kill -USR1 "$bg"
    wait_for "checkpoint requested: every rank stops at the boundary after step" "$tmp/coord.log" 10
    at=$(sed -n 's/.*checkpoint requested: every rank stops at the boundary after step \([0-9]*\).*/\1/p' "$tmp/coord.log" | head -1)
    wait_bg
    expect_rc 0 "job finished"
    name=$(printf 'ckpt-%08d.h5' "$at")
    if [ $((at % 10)) != 0 ]; then
        expect_line "$tmp/coord.log" "committed checkpoint .*$name (step $at," "SIGUSR1: checkpoint at step $at committed"
    else
        ok "SIGUSR1 landed on a periodic step ($at)"
    fi
    expect_relaunches 0 "$tmp/coord.log"
    same_params
    loop_closed "$tmp/coord.log" 0
    ;;
evaluate)
    # Rank 0 evaluates the 10,000-image test set after epoch 1 (seconds of CNN forward on a CPU) while
    # rank 1 waits in epoch 2's first AllReduce: with a 2 s timeout that is no hang (the heartbeats say
    # "evaluating"), and the job finishes in its first generation.
    ASAN_OPTIONS=detect_leaks=1 "$coord" --job-dir "$job" --listen 127.0.0.1:0 --http off --timeout 2 --max-restarts 0 \
        -- env ASAN_OPTIONS=detect_leaks=0 sh "$mpirun_sh" 2 "$worker" --task=train --model=mnist --data_dir "$data" \
        --device cpu --seed 1 --no-dropout --progress off --max-train-samples 640 --batch-size 32 --epochs 2 \
        >"$tmp/coord.log" 2>&1
    rc=$?
    expect_rc 0 "job finished"
    grep -q "generation 1 failed" "$tmp/coord.log" && bad "a false hang: $(grep 'generation 1 failed' "$tmp/coord.log")" ||
        ok "the evaluation was not taken for a hang"
    expect_relaunches 0 "$tmp/coord.log"
    loop_closed "$tmp/coord.log" 0
    ;;
retain)
    wargs="$wargs --keep 2"
    supervised "$tmp/coord.log" "" --max-restarts 0
    expect_rc 0 "job finished"
    expect_ckpt_state "disk=$c30,$c20 manifest=$c30:$c30,$c20 committed=30:$c30" "newest 2 kept, manifest and commit agree"
    n=$(count "$tmp/coord.log" "written: .* (reported; the coordinator commits it)")
    [ "$n" = 3 ] && ok "the writer reported 3 checkpoints" || bad "$n writes reported (want 3)"
    n=$(count "$tmp/coord.log" "manifest updated")
    [ "$n" = 0 ] && ok "the writer did not write the manifest" || bad "the writer updated the manifest $n times"
    expect_line "$tmp/coord.log" "committed checkpoint .*$c30 (step 30, .*keeping 2, 1 older deleted)" "the coordinator deleted $c10"
    loop_closed "$tmp/coord.log" 0
    # The coordinator's --keep overrides the workers' checkpoint.keep.
    job="$tmp/job_keep1"
    supervised "$tmp/coord_keep1.log" "" --max-restarts 0 --keep 1
    expect_rc 0 "job with --keep 1 finished"
    expect_ckpt_state "disk=$c30 manifest=$c30:$c30 committed=30:$c30" "--keep 1 overrides checkpoint.keep 2"
    loop_closed "$tmp/coord_keep1.log" 0
    ;;
commit_refused)
    base="$wargs"
    wargs=$(printf '%s\n' "$base" | sed 's/--max-steps 30/--max-steps 20/')
    wargs="$wargs --keep 2"
    supervised "$tmp/coord1.log" "" --max-restarts 0
    expect_rc 0 "first job (20 steps) finished"
    expect_ckpt_state "disk=$c20,$c10 manifest=$c20:$c20,$c10 committed=20:$c20" "step 20 committed"
    mkdir "$job/committed.json.tmp" # open(O_CREAT) of the temporary fails with EISDIR, for root too
    wargs=$(printf '%s\n' "$base" | sed 's/--max-steps 30/--max-steps 40/')
    wargs="$wargs --keep 2"
    supervised "$tmp/coord2.log" "" --max-restarts 0
    expect_rc 0 "second job (to step 40) finished, its checkpoints uncommitted"
    expect_line "$tmp/coord2.log" "generation 2: started .*resuming from .*$c20" "generation 2 resumed from the commit"
    expect_line "$tmp/coord2.log" "cannot commit the checkpoint of step 30: .*; the last committed one stays .*$c20" \
        "commit of step 30 refused"
    expect_line "$tmp/coord2.log" "cannot commit the checkpoint of step 40: .*; the last committed one stays .*$c20" \
        "commit of step 40 refused"
    grep -q "committed checkpoint .*\($c30\|$c40\)" "$tmp/coord2.log" && bad "a refused checkpoint was committed"
    expect_ckpt_state "disk=$c40,$c30,$c20,$c10 manifest=$c20:$c20,$c10 committed=20:$c20" \
        "uncommitted 30 and 40 kept, nothing deleted, step 20 still the commit"
    loop_closed "$tmp/coord2.log" 0
    rmdir "$job/committed.json.tmp"
    wargs=$(printf '%s\n' "$base" | sed 's/--max-steps 30/--max-steps 50/')
    wargs="$wargs --keep 2"
    supervised "$tmp/coord3.log" "" --max-restarts 0
    expect_rc 0 "job finished once committed.json could be written again"
    expect_line "$tmp/coord3.log" "generation 3: started .*resuming from .*$c20" "generation 3 resumed from the step-20 commit"
    expect_ckpt_state "disk=$c50,$c40 manifest=$c50:$c50,$c40 committed=50:$c50" "retention after the recovery"
    loop_closed "$tmp/coord3.log" 0
    ;;
write_fails)
    wargs="$wargs --keep 2"
    mkdir -p "$job/checkpoints/$c30.tmp" # HDF5 cannot create the temporary of step 30: that write fails
    supervised "$tmp/coord.log" "" --max-restarts 0
    # the job's status: rank 0 exits 1 and the coordinator kills the process group (mpirun: 137)
    [ "$rc" != 0 ] && ok "job failed after the failed write (exit $rc)" || bad "job with a failed write exited 0"
    expect_line "$tmp/coord.log" "giving up after 0 restarts (--max-restarts 0): rank 0 .* failed with status 1" \
        "rank 0 failed"
    expect_line "$tmp/coord.log" "rank 0 could not write the checkpoint of step 30: .*; the last committed one stays step 20" \
        "failed write reported, not committed"
    expect_ckpt_state "disk=$c20,$c10 manifest=$c20:$c20,$c10 committed=20:$c20" "step 20 and its older checkpoint kept"
    loop_closed "$tmp/coord.log" "$rc"
    ;;
give_up)
    ASAN_OPTIONS=detect_leaks=1 "$coord" --job-dir "$job" --listen 127.0.0.1:0 --http off --max-restarts 2 --backoff 0.1 \
        -- sh -c 'exit 3' >"$tmp/coord.log" 2>&1
    rc=$?
    expect_rc 3 "the job's own status"
    expect_relaunches 2 "$tmp/coord.log"
    expect_line "$tmp/coord.log" "giving up after 2 restarts (--max-restarts 2): the job's command exited with status 3" "gave up"
    [ "$(json_field "$job/state.json" generation)" = 3 ] && ok "state.json: generation 3" || bad "state.json: $(cat "$job/state.json")"
    loop_closed "$tmp/coord.log" 3
    ;;
refused_rank)
    # A rank refused before it registers (its node has another secret file) is named with the reason in
    # the failure and give-up lines, not only in an earlier warning: the rank its launcher then kills
    # merely looks dead. The worker's own error says why without "[at file:line]".
    head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/other_secret"
    chmod 600 "$tmp/other_secret"
    cat >"$tmp/job.sh" <<EOS
#!/bin/sh
"$peer" "\$ODL_COORD_ADDR" "\$ODL_COORD_SECRET_FILE" 0 2 1 30 &
p0=\$!
"$peer" "\$ODL_COORD_ADDR" "$tmp/other_secret" 1 2 1 30 >"$tmp/peer1.txt" 2>&1
kill -9 \$p0   # as mpirun ends the job when one rank fails
sleep 5       # the coordinator sees rank 0 go, kills this group itself (SIGKILL) and still exits 1, not 137
exit 1
EOS
    ASAN_OPTIONS=detect_leaks=1 "$coord" --job-dir "$job" --listen 127.0.0.1:0 --http off --max-restarts 0 \
        -- sh "$tmp/job.sh" >"$tmp/coord.log" 2>&1
    rc=$?
    expect_rc 1 "the job failed"
    expect_line "$tmp/coord.log" "generation 1 failed: .*; earlier, rank 1 was refused before it registered, from .*: wrong job secret (claimed rank 1, generation 1)" \
        "the failure line names the refused rank and why"
    expect_line "$tmp/coord.log" "giving up after 0 restarts .*rank 1 was refused before it registered.*wrong job secret" \
        "so does the give-up line"
    grep -q "refused: .*wrong job secret" "$tmp/peer1.txt" && ok "rank 1 was told why" || bad "rank 1: $(cat "$tmp/peer1.txt")"
    loop_closed "$tmp/coord.log" 1
    # A real worker refused (the job's only rank): the failure names it instead of "the launch itself
    # failed", and the worker's own error is one line without a source location (no --verbose).
    rm -rf "$job"
    ASAN_OPTIONS=detect_leaks=1 "$coord" --job-dir "$job" --listen 127.0.0.1:0 --http off --max-restarts 0 \
        -- env ODL_COORD_SECRET_FILE="$tmp/other_secret" ASAN_OPTIONS=detect_leaks=0 "$worker" --task=train \
        --model=mnist_mlp --data_dir "$data" --device cpu --max-steps 1 >"$tmp/coord2.log" 2>&1
    expect_line "$tmp/coord2.log" "generation 1 failed: the job's command exited with status 1; earlier, rank 0 was refused before it registered.*wrong job secret" \
        "a refused worker named instead of a failed launch"
    if grep -q "odl_worker: error: .*refused rank 0: wrong job secret" "$tmp/coord2.log" && ! grep "odl_worker: error" "$tmp/coord2.log" | grep -q "\[at "; then
        ok "the worker's error has no [at file:line]: $(grep -m1 'odl_worker: error' "$tmp/coord2.log")"
    else
        bad "the worker's error: $(grep 'odl_worker: error' "$tmp/coord2.log")"
    fi
    loop_closed "$tmp/coord2.log" 1
    ;;
two_fenced)
    # Xid 79 on two nodes of one generation, the second while the first one's stop is under way: both
    # are fenced (the second was once only counted, and the relaunch landed on it). Three peers on three
    # nodes; the generation ends (exit 1) and is relaunched from a hostfile without nodeB and nodeC.
    printf 'nodeA slots=1\nnodeB slots=1\nnodeC slots=1\n' >"$tmp/hosts"
    cat >"$tmp/job.sh" <<EOS
#!/bin/sh
[ "\$ODL_COORD_GENERATION" = 1 ] || exit 0
ODL_PEER_NODE=nodeA "$peer" "\$ODL_COORD_ADDR" "\$ODL_COORD_SECRET_FILE" 0 3 1 3 &
ODL_PEER_NODE=nodeB ODL_PEER_XID=79@0.5 "$peer" "\$ODL_COORD_ADDR" "\$ODL_COORD_SECRET_FILE" 1 3 1 3 &
ODL_PEER_NODE=nodeC ODL_PEER_XID=79@1.5 "$peer" "\$ODL_COORD_ADDR" "\$ODL_COORD_SECRET_FILE" 2 3 1 3 &
wait
exit 1
EOS
    ASAN_OPTIONS=detect_leaks=1 "$coord" --job-dir "$job" --listen 127.0.0.1:0 --http off --max-restarts 1 --backoff 0 \
        --hostfile "$tmp/hosts" -- sh "$tmp/job.sh" {hostfile} >"$tmp/coord.log" 2>&1
    rc=$?
    expect_rc 0 "the relaunch finished"
    expect_line "$tmp/coord.log" "node nodeB fenced (Xid 79 .*checkpointing at the next step boundary" "the first fence stops the job"
    expect_line "$tmp/coord.log" "node nodeC fenced (Xid 79 .*the job is already stopping; its relaunch leaves the node out" \
        "the second node is fenced while the stop is under way"
    if grep -q '"node": "nodeB"' "$job/fence.json" && grep -q '"node": "nodeC"' "$job/fence.json"; then
        ok "fence.json holds nodeB and nodeC"
    else
        bad "fence.json: $(cat "$job/fence.json")"
    fi
    if [ "$(grep -v '^#' "$job/hosts.2")" = "nodeA slots=1" ]; then ok "generation 2's hostfile: nodeA only"
    else bad "generation 2's hostfile: $(cat "$job/hosts.2")"; fi
    loop_closed "$tmp/coord.log" 0
    ;;
bad_options)
    # Numbers are checked whole: a count that is not an integer, or any value with trailing text, is a
    # usage error (exit 2) naming the option, never 0 and never truncated.
    for opt in "--max-restarts abc" "--max-restarts 1.5" "--keep -1" "--checkpoint-every 10x" "--timeout 2s" \
               "--heartbeat-ms 5" "--backoff nan" "--listen 127.0.0.1:80x"; do
        # shellcheck disable=SC2086
        "$coord" --job-dir "$job" $opt -- true >"$tmp/coord.log" 2>&1
        rc=$?
        name=${opt%% *}
        if [ $rc = 2 ] && grep -q "error: $name " "$tmp/coord.log"; then ok "$opt: exit 2 naming $name"
        else bad "$opt: exit $rc: $(cat "$tmp/coord.log")"; fi
    done
    ;;
damaged_state)
    # A damaged job file is an error naming the field, never generation 0 (which would let an older
    # launch's workers back in) and never a silent default; nothing is launched.
    check_damaged() { # file, content, field, what
        rm -rf "$job" && mkdir -p "$job"
        printf '%s\n' "$2" >"$job/$1"
        ASAN_OPTIONS=detect_leaks=1 "$coord" --job-dir "$job" --listen 127.0.0.1:0 --http off --max-restarts 0 \
            -- sh -c 'echo launched >"$ODL_JOB_DIR/launched"' >"$tmp/coord.log" 2>&1
        rc=$?
        if [ $rc = 1 ] && grep -q "error: .*$1: \"$3\" is missing or not" "$tmp/coord.log" && [ ! -e "$job/launched" ]; then
            ok "$4: exit 1 naming $1's \"$3\", nothing launched"
        else
            bad "$4: exit $rc, launched: $([ -e "$job/launched" ] && echo yes || echo no): $(tail -1 "$tmp/coord.log")"
        fi
    }
    check_damaged state.json '{"generation": "7", "restarts": 0}' generation "a generation that is a string"
    check_damaged state.json '{"restarts": 0, "status": "running"}' generation "no generation"
    check_damaged state.json '{"generation": -3, "restarts": 0}' generation "a negative generation"
    check_damaged state.json '{"generation": 4}' restarts "no restart count"
    check_damaged committed.json '{"step": 10, "epochs_completed": 0, "cursor": "x", "path": "a.h5"}' cursor \
        "a committed checkpoint's cursor that is not a number"
    check_damaged committed.json '{"step": 10, "epochs_completed": 0, "cursor": 640}' path "a committed checkpoint without a path"
    check_damaged plan.json '{"generation": 1, "seed": 1.5}' seed "a plan's seed that is not an integer"
    rm -rf "$job" && mkdir -p "$job"
    printf '{"generation": 4, "restarts": 1, "status": "done"}\n' >"$job/state.json"
    ASAN_OPTIONS=detect_leaks=1 "$coord" --job-dir "$job" --listen 127.0.0.1:0 --http off --max-restarts 0 \
        -- sh -c 'exit 0' >"$tmp/coord.log" 2>&1
    rc=$?
    expect_rc 0 "a sound state.json"
    expect_line "$tmp/coord.log" "generation 5: started" "the generation goes on from the file's 4"
    ;;
serve_preempt)
    # A serving coordinator (no command) whose only rank finished: SIGTERM has nothing to checkpoint
    # and must end it at once, not wait for a checkpoint no rank will write.
    ASAN_OPTIONS=detect_leaks=1 "$coord" --job-dir "$job" --listen 127.0.0.1:0 --http off >"$tmp/coord.log" 2>&1 &
    bg=$!
    wait_for '"listen"' "$job/coordinator.json" 20
    "$peer" "$(json_field "$job/coordinator.json" listen)" "$job/secret" 0 1 1 >"$tmp/p.txt" 2>&1 ||
        bad "coord_peer: $(cat "$tmp/p.txt")"
    wait_for "all 1 ranks of generation 1 finished" "$tmp/coord.log" 20
    kill -TERM "$bg"
    i=0
    while kill -0 "$bg" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
    if kill -0 "$bg" 2>/dev/null; then bad "still running 10 s after SIGTERM"; kill -KILL "$bg"; fi
    wait "$bg"
    rc=$?
    bg=""
    expect_rc 75 "preempted with nothing to checkpoint"
    loop_closed "$tmp/coord.log" 75
    ;;
*)
    echo "unknown case $case_"
    exit 2
    ;;
esac
finish
