#!/bin/sh
# bench/soak.sh's checks fail when broken: a short soak with both planted faults (--plant lose-sample,leftover:
# rank 0 trains one step without a sample, every generation's launcher leaves a process behind) must say
# so -- the lost sample (and the parameters it changed), the leftover processes -- and exit 1; and a soak that
# cannot start exits 2.
#   tests/soak_planted.sh SRCDIR BUILDDIR
set -u
src="$1"
build="$2"
out="$build/tests/soak_planted.out"
log="$build/tests/soak_planted.log"
# a soak that cannot start exits 2, apart from one whose checks failed (1): no binaries; a folder not a soak's
sh "$src/bench/soak.sh" 0.2 "$out.nobuild" --build "$build/no_such_build" >"$log" 2>&1
rc_nobuild=$?
mkdir -p "$out.other" && : >"$out.other/mine.txt"
sh "$src/bench/soak.sh" 0.2 "$out.other" --build "$build" >>"$log" 2>&1
rc_other=$?
grep -q "^soak: error: no .*no_such_build/" "$log" && [ $rc_nobuild = 2 ] &&
    { [ $rc_other = 77 ] || { [ $rc_other = 2 ] && grep -q "^soak: error: .*is not a soak's folder" "$log"; }; } &&
    [ -f "$out.other/mine.txt" ] && echo "ok   a soak that cannot start: exit 2, its reason said, the folder left alone" ||
    { echo "FAIL set-up errors: exit $rc_nobuild / $rc_other (want 2)"; cat "$log"; exit 1; }
rm -rf "$out.other"
sh "$src/bench/soak.sh" 0.2 "$out" --build "$build" --kinds kill --plant lose-sample,leftover >"$log" 2>&1
rc=$?
[ $rc = 77 ] && { tail -1 "$log"; exit 77; }
fail=0
expect() { # pattern, what
    if grep -q -- "$1" "$log"; then echo "ok   $2: $(grep -m1 -- "$1" "$log" | cut -c1-200)"
    else echo "FAIL $2: no line matching: $1"; fail=1; fi
}
[ $rc = 1 ] && echo "ok   the soak exited 1" || { echo "FAIL the soak exited $rc (want 1)"; fail=1; }
expect "PROBLEM \[samples\] epoch [0-9]*: 1 sample never seen (index [0-9]*)" "the lost sample named"
expect "PROBLEM \[params\] the final parameters differ from the fault-free replay" "the parameters it changed"
expect "PROBLEM \[processes\] leftover: pid [0-9]* (sleep, state [A-Z]) of generation [0-9]* still there" "a leftover named"
last=$(tail -1 "$log")
case "$last" in
"soak: FAILED (params, processes, samples): "*", 1 lost, "*" leftover, params DIFFER, "*) echo "ok   last line: $last" ;;
*) echo "FAIL last line: $last"; fail=1 ;;
esac
if [ $fail != 0 ]; then cat "$log"; fi
[ $fail = 0 ] && echo "soak_planted: the soak caught the lost sample and the leftover"
exit $fail
