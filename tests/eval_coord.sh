#!/bin/sh
# Evaluation under odl_coordinator (docs/eval.md "Under the coordinator"), real processes on loopback,
# CPU, coco8 at --img-size 320 with --batch-size 2 (8 images: 4 chunks of 2):
#   tests/eval_coord.sh CASE SRCDIR ODL_COORDINATOR ODL_WORKER WEIGHTS TMPDIR
#   equal  3 ranks under the coordinator write metrics.json byte-identical to one unsupervised process;
#          every chunk is done exactly once, DIR/eval holds the 4 chunk files and queue.json says 4 done;
#          the same command again on DIR evaluates nothing and writes the same metrics.json; a damaged
#          chunk file is an error naming it (metrics.json of before kept); with queue.json removed the
#          leftover chunk files are removed and everything is evaluated again, same metrics.json; another
#          evaluation (--conf-thres 0.01) on DIR is refused with a message naming queue.json
#   kill   ODL_FAULT=kill@rank=1,step=2 (rank 1 dies after its second batch, before committing it; rank 0
#          slowed by slow@ so that rank 1 gets there): one relaunch, the coordinator's log names the
#          re-queued chunks (exactly those handed out in generation 1 and not done), generation 2 hands
#          out exactly the chunks not done in generation 1, every chunk is done once, metrics.json
#          byte-identical to the uninterrupted run's
#   slow   ODL_FAULT=slow@rank=1,step=1,ms=5000 (rank 1 sleeps 5 s before committing each chunk): its
#          chunk is handed to rank 0 too, rank 0's result wins, rank 1's is discarded, no relaunch,
#          metrics.json byte-identical
#   stuck  ODL_FAULT=slow@rank=1,step=1,ms=600000 (rank 1 never finishes its first chunk; its heartbeats go
#          on) with --timeout 3: its chunk is taken over, and once the queue is finished and every other
#          rank has gone, the coordinator ends it; one relaunch only recomputes the metrics (no chunk
#          handed out), exit 0, metrics.json byte-identical: no hang
# Skipped (77) without mpirun, the weights or coco8.
set -u
case_="$1" src="$2" coord="$3" worker="$4" weights="$5" tmp="$6"
data="${ODL_TEST_DATA:-${ODL_TEST_DATA_DEFAULT:-$src/../shared/data}}/yolov5/coco8"
[ -e "$weights" ] || { echo "SKIP: no $weights (the yolov5_convert test makes it)"; exit 77; }
[ -d "$data" ] || { echo "SKIP: no $data"; exit 77; }
if ! command -v mpirun >/dev/null 2>&1 && [ -z "${MPIEXEC:-}" ]; then echo "SKIP: no mpirun"; exit 77; fi
rm -rf "$tmp" && mkdir -p "$tmp" || exit 1
cleanup() {
    # Nothing of this test may outlive it: the job's processes carry $tmp in their arguments.
    for p in $(pgrep -f -- "$tmp/" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
}
trap cleanup EXIT
mpirun_sh="$src/tests/comm_mpirun.sh"
args="--task=eval --model=yolov5 --weights $weights --data $data --img-size 320 --batch-size 2 --device cpu"
job="$tmp/job"
fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=1; }
finish() {
    if [ $fail != 0 ]; then
        for f in "$tmp"/*.log; do echo "----- $f"; tail -60 "$f"; done
    fi
    exit $fail
}
# supervise NP LOG [coordinator flags] -- runs the 'args' job under the coordinator on $job
supervise() {
    np="$1" log="$2"
    shift 2
    timeout -s KILL 240 "$coord" --job-dir "$job" --http off --backoff 0 --max-restarts 2 "$@" -- \
        sh "$mpirun_sh" "$np" "$worker" $args --output "$tmp/out" >"$log" 2>&1
    rc=$?
}
same_metrics() { # what
    if cmp -s "$tmp/ref/metrics.json" "$tmp/out/metrics.json"; then
        ok "$1: metrics.json identical to one unsupervised process ($(grep -m1 '"map50_95"' "$tmp/ref/metrics.json" | tr -d ' '))"
    else
        bad "$1: metrics.json differs"
        diff "$tmp/ref/metrics.json" "$tmp/out/metrics.json" | head
    fi
}
# chunk indices of a log's lines matching "evaluation chunk K PATTERN", one a line, sorted
chunks() { sed -n "s/.*INFO evaluation chunk \([0-9]*\) $2.*/\1/p" "$1" | sort -n | tr '\n' ' '; }
each_done_once() { # log what
    d=$(chunks "$1" "done by rank")
    if [ "$d" = "0 1 2 3 " ]; then ok "$2: every chunk done exactly once"; else bad "$2: chunks done: '$d' (want 0 1 2 3 once each)"; fi
}

"$worker" $args --output "$tmp/ref" >"$tmp/ref.log" 2>&1 || { bad "the unsupervised run failed"; finish; }

case "$case_" in
equal)
    supervise 3 "$tmp/equal.log"
    [ "$rc" = 0 ] && ok "3 ranks under the coordinator: exit 0" || bad "3 ranks: coordinator exit $rc"
    grep -q "rank 2 of 3 registered" "$tmp/equal.log" || bad "not a 3-rank job"
    same_metrics "3 ranks"
    each_done_once "$tmp/equal.log" "3 ranks"
    n=$(ls "$job"/eval/chunk-*.bin 2>/dev/null | wc -l)
    [ "$n" = 4 ] && grep -q '"n_done": 4' "$job/eval/queue.json" && ok "DIR/eval: 4 chunk files, queue.json 4 done" ||
        bad "DIR/eval: $n chunk files; $(cat "$job/eval/queue.json" 2>/dev/null | tr -d '\n ')"
    rm -rf "$tmp/out"
    supervise 2 "$tmp/again.log"
    if [ "$rc" = 0 ] && ! grep -q "INFO evaluation chunk [0-9]* (images" "$tmp/again.log"; then
        ok "the same evaluation again on DIR: no chunk evaluated, exit 0"
    else
        bad "again on DIR: exit $rc or chunks handed out: $(grep -c 'evaluation chunk [0-9]* (images' "$tmp/again.log")"
    fi
    same_metrics "again on DIR"
    cp "$job/eval/chunk-000002.bin" "$tmp/chunk2.bin"
    printf 'not a chunk' >"$job/eval/chunk-000002.bin"
    supervise 1 "$tmp/damaged.log" --max-restarts 0
    if [ "$rc" != 0 ] && grep -q "chunk-000002.bin: not an evaluation chunk file" "$tmp/damaged.log"; then
        ok "a damaged chunk file: exit $rc naming it"
    else bad "a damaged chunk file: exit $rc, no error naming chunk-000002.bin"; fi
    same_metrics "after the damaged chunk (kept)"
    rm "$job/eval/queue.json"
    rm -rf "$tmp/out"
    supervise 2 "$tmp/fresh.log"
    if [ "$rc" = 0 ] && grep -q "removed 4 chunk files of an earlier queue" "$tmp/fresh.log"; then
        ok "queue.json removed: the 4 leftover chunk files removed, evaluated again"
    else bad "queue.json removed: exit $rc, leftovers not removed"; fi
    each_done_once "$tmp/fresh.log" "evaluated again"
    same_metrics "evaluated again"
    args="$args --conf-thres 0.01"
    supervise 2 "$tmp/other.log" --max-restarts 0
    if [ "$rc" != 0 ] && grep -q "refused the evaluation: .*queue.json is of another evaluation" "$tmp/other.log"; then
        ok "another evaluation on DIR refused (exit $rc): $(grep -m1 'refused the evaluation' "$tmp/other.log" | cut -c1-160)"
    else
        bad "another evaluation on DIR: exit $rc, no refusal naming queue.json"
    fi
    ;;
kill)
    export ODL_FAULT="kill@rank=1,step=2;slow@rank=0,step=0,ms=1500"
    supervise 2 "$tmp/kill.log"
    unset ODL_FAULT
    log="$tmp/kill.log"
    [ "$rc" = 0 ] && ok "killed rank: the job finished (exit 0)" || bad "killed rank: coordinator exit $rc"
    grep -q "ODL_FAULT: kill@rank=1,step=2 fires now" "$log" || bad "the kill did not fire"
    n=$(grep -c "relaunching in" "$log")
    [ "$n" = 1 ] && ok "one relaunch" || bad "$n relaunches (want 1)"
    # generation 1's part of the log and generation 2's
    sed -n '1,/generation 2: started/p' "$log" >"$tmp/g1.txt"
    sed -n '/generation 2: started/,$p' "$log" >"$tmp/g2.txt"
    given1=$(chunks "$tmp/g1.txt" "(images") done1=$(chunks "$tmp/g1.txt" "done by rank")
    requeued=""
    for k in $given1; do case " $done1" in *" $k "*) ;; *) requeued="$requeued$k ";; esac; done
    todo=""
    for k in 0 1 2 3; do case " $done1" in *" $k "*) ;; *) todo="$todo$k ";; esac; done
    [ -n "$done1" ] && ok "generation 1 committed chunks ${done1}before the kill" || bad "no chunk done in generation 1"
    line=$(grep -m1 "generation 2 resumes" "$log")
    got=$(printf '%s\n' "$line" | sed -n 's/.*re-queued (handed out before, not done): \([^;]*\);.*/\1/p' | tr -d ',' )
    want=$(echo $requeued | sed 's/ $//')
    # the log writes ranges ("0-2"); expand them for the comparison
    exp=""
    for r in $got; do
        case "$r" in *-*) a=${r%-*} b=${r#*-}; while [ "$a" -le "$b" ]; do exp="$exp$a "; a=$((a + 1)); done ;; *) exp="$exp$r ";; esac
    done
    if [ -n "$line" ] && [ "$(echo $exp)" = "$want" ]; then ok "the log names the re-queued chunks: $(echo "$line" | sed 's/.*\(INFO\|WARN\) //' | cut -c1-200)"
    else bad "re-queued chunks: log says '$got' ($line), want '$want'"; fi
    given2=$(chunks "$tmp/g2.txt" "(images")
    [ "$given2" = "$todo" ] && ok "generation 2 evaluated only the chunks not done: $given2" ||
        bad "generation 2 handed out '$given2', want the chunks not done: '$todo'"
    each_done_once "$log" "killed rank"
    same_metrics "killed rank"
    ;;
slow)
    export ODL_FAULT="slow@rank=1,step=1,ms=5000"
    supervise 2 "$tmp/slow.log"
    unset ODL_FAULT
    log="$tmp/slow.log"
    [ "$rc" = 0 ] && ok "slow rank: exit 0" || bad "slow rank: coordinator exit $rc"
    n=$(grep -c "relaunching in" "$log")
    [ "$n" = 0 ] || bad "$n relaunches (want none)"
    if grep -q "WARN evaluation chunk [0-9]* held by rank 1 for .*: handed to rank 0 too; the first result wins" "$log"; then
        ok "the straggler's chunk was handed to rank 0: $(grep -m1 'handed to rank 0 too' "$log" | sed 's/.*\(INFO\|WARN\) //' | cut -c1-200)"
    else bad "no chunk of rank 1 handed to rank 0"; fi
    k=$(sed -n 's/.*WARN evaluation chunk \([0-9]*\) held by rank 1.*/\1/p' "$log" | head -1)
    grep -q "evaluation chunk $k done by rank 0" "$log" && grep -q "evaluation chunk $k from rank 1 discarded: rank 0's result came first" "$log" &&
        ok "chunk $k: rank 0's result won, rank 1's discarded" || bad "chunk $k: not won by rank 0 and discarded from rank 1"
    each_done_once "$log" "slow rank"
    same_metrics "slow rank"
    ;;
stuck)
    export ODL_FAULT="slow@rank=1,step=1,ms=600000"
    supervise 2 "$tmp/stuck.log" --timeout 3
    unset ODL_FAULT
    log="$tmp/stuck.log"
    [ "$rc" = 0 ] && ok "stuck rank: the job finished (exit 0)" || bad "stuck rank: coordinator exit $rc"
    grep -q "handed to rank 0 too" "$log" && ok "its chunk was handed to rank 0" || bad "its chunk was not handed to rank 0"
    if grep -q "ERROR evaluation queue: rank 1 .* is stuck: the evaluation is complete" "$log"; then
        ok "the coordinator ended it: $(grep -m1 'is stuck' "$log" | sed 's/.*ERROR //' | cut -c1-160)"
    else bad "no 'rank 1 is stuck' line"; fi
    n=$(grep -c "relaunching in" "$log")
    [ "$n" = 1 ] && ok "one relaunch" || bad "$n relaunches (want 1)"
    sed -n '/generation 2: started/,$p' "$log" >"$tmp/g2.txt"
    given2=$(chunks "$tmp/g2.txt" "(images")
    [ -z "$given2" ] && ok "generation 2 evaluated no chunk" || bad "generation 2 handed out '$given2'"
    each_done_once "$log" "stuck rank"
    same_metrics "stuck rank"
    ;;
*) echo "unknown case $case_"; exit 2 ;;
esac
finish
