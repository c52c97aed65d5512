#!/bin/sh
# bench/soak.sh with evaluation jobs beside the training (--eval-every, bench/soak_eval.py), on one rank
# (the one-GPU soak's shape, here on the CPU):
#   1. a 1-minute soak, one rank, an evaluation job every 4 s (every other one with its rank killed):
#      exit 0, the evaluation line says every metrics.json equals the unsupervised one, at least 2 jobs
#      ran and one had its rank killed, and no fault that fences was drawn (one node)
#   2. a short soak with --plant eval-differs (the second evaluation job runs with another --conf-thres):
#      the soak names that job's differing metrics.json and exits 1
#   tests/soak_eval.sh SRCDIR BUILDDIR
set -u
src="$1"
build="$2"
data="${ODL_TEST_DATA:-${ODL_TEST_DATA_DEFAULT:-$src/../shared/data}}/yolov5/coco8"
[ -e "$build/yolov5n.h5" ] || { echo "SKIP: no $build/yolov5n.h5 (the yolov5_convert test makes it)"; exit 77; }
[ -d "$data" ] || { echo "SKIP: no $data"; exit 77; }
out="$build/tests/soak_eval.out"
log="$build/tests/soak_eval.log"
sh "$src/bench/soak.sh" 1 "$out" --build "$build" --ranks 1 --eval-every 4 >"$log" 2>&1
rc=$?
[ $rc = 77 ] && { tail -1 "$log"; exit 77; }
fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=1; }
expect() { # log pattern what
    if grep -q -- "$2" "$1"; then ok "$3: $(grep -m1 -- "$2" "$1" | cut -c1-220)"
    else bad "$3: no line matching: $2"; fi
}
[ $rc = 0 ] && ok "the one-rank soak with evaluations exited 0: $(tail -1 "$log")" || bad "the soak exited $rc: $(tail -1 "$log")"
expect "$log" "evaluation: [0-9]* jobs ([1-9][0-9]* with the rank killed and relaunched), every metrics.json equal to the unsupervised one" \
    "every evaluation equal"
n=$(sed -n 's/.*evaluation: \([0-9]*\) jobs.*/\1/p' "$log")
[ "${n:-0}" -ge 2 ] && ok "$n evaluation jobs" || bad "${n:-0} evaluation jobs (want 2 or more)"
grep -q "^soak: fault [0-9]* xid79" "$log" && bad "an Xid 79 was drawn with one node" || ok "no Xid 79 drawn with one node"
[ $fail != 0 ] && cat "$log"

plog="$build/tests/soak_eval_planted.log"
sh "$src/bench/soak.sh" 0.3 "$out" --build "$build" --ranks 1 --kinds kill --eval-every 1 --plant eval-differs >"$plog" 2>&1
rc=$?
[ $rc = 1 ] && ok "the planted soak exited 1" || bad "the planted soak exited $rc (want 1)"
expect "$plog" "PROBLEM \[eval\] evaluation 2 (rank killed): metrics.json differs from the unsupervised one" \
    "the differing evaluation named"
case "$(tail -1 "$plog")" in
"soak: FAILED (eval): "*) ok "last line: $(tail -1 "$plog")" ;;
*) bad "last line: $(tail -1 "$plog")" ;;
esac
[ $fail != 0 ] && cat "$plog"
[ $fail = 0 ] && echo "soak_eval: evaluations beside the one-rank training all equal; a differing one caught"
exit $fail
