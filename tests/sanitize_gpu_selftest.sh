#!/bin/sh
# bench/sanitize_gpu.sh's own logic without a GPU: a stand-in compute-sanitizer prints the summaries a
# real one prints ("========= ERROR SUMMARY: N errors", racecheck's hazard summary) with counts chosen
# here, after running nothing; the script must add them up per tool, name the test that had errors and
# exit 1, and exit 0 with `sanitize_gpu: 0 errors` when every count is 0. Also bench/gpu_long_run.sh's named
# sanitizer runs (start-sanitize --name, wait, collect) with the same stand-in.
#   tests/sanitize_gpu_selftest.sh SRCDIR BUILDDIR
set -u
src="$1"
build="$2"
tmp=$(mktemp -d /tmp/odl_sanitize_selftest.XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
fail=0
cat >"$tmp/compute-sanitizer" <<'EOS'
#!/bin/sh
# stand-in: --tool T ... COMMAND; errors from $FAKE_ERRORS ("tool:test-regex:count")
tool=""
args="$*"
while [ $# -gt 0 ]; do
    case "$1" in
    --help) [ -z "${FAKE_OLD:-}" ] && echo "  --kernel-name-exclude arg  --launch-count arg"; exit 0 ;;
    --tool) tool="$2"; shift 2 ;;
    --*) shift 2 ;;
    *) break ;;
    esac
done
n=0
case "$FAKE_ERRORS" in "$tool:"*) pat=${FAKE_ERRORS#*:}; pat=${pat%:*}; printf '%s\n' "$*" | grep -q -- "$pat" && n=${FAKE_ERRORS##*:} ;; esac
# FAKE_RUN: run the test as the real one does and, like it for a process that makes no CUDA call (a GPU
# test skipping on a machine without one), lose its exit status: no summary, exit 0
if [ -n "${FAKE_RUN:-}" ]; then
    "$@"
    echo "========= Target application terminated before first instrumented API call"
    echo "========= Error: couldn't find exit code."
    exit 0
fi
# FAKE_NOLIB: the test cannot start, as a build unpacked elsewhere without its folder on LD_LIBRARY_PATH
if [ -n "${FAKE_NOLIB:-}" ]; then
    echo "/b/tests/test_ops: error while loading shared libraries: libodl.so.0: cannot open shared object file: No such file or directory"
    echo "========= Target application terminated before first instrumented API call"
    exit 127
fi
echo "test output (not run); pool cap ${ODL_CUDA_POOL_PERCENT_MAX:-none}; quick ${ODL_TEST_QUICK:-unset}"
echo "args: $args"
echo "nvjpeg backend ${ODL_NVJPEG_BACKEND:-unset}"
# FAKE_KILL=DIR: the first run of a test killed as the kernel's OOM killer does (SIGKILL: the shell's 137)
# (FAKE_KILL_SELF: the sanitizer itself killed by SIGKILL)
if [ -n "${FAKE_KILL:-}" ] && [ ! -e "$FAKE_KILL/killed" ]; then
    : >"$FAKE_KILL/killed"
    [ -n "${FAKE_KILL_SELF:-}" ] && kill -9 $$
    exit 137
fi
[ -n "${FAKE_SLEEP:-}" ] && sleep "$FAKE_SLEEP"
[ "$tool" = racecheck ] && echo "========= RACECHECK SUMMARY: $n hazards displayed ($n errors, 1 warning)"
# FAKE_RACE_ONLY: racecheck as on the H200 (compute-sanitizer 2025): its RACECHECK SUMMARY line alone
[ "$tool" = racecheck ] && [ -n "${FAKE_RACE_ONLY:-}" ] && exit 0
echo "========= ERROR SUMMARY: $n errors"
EOS
chmod +x "$tmp/compute-sanitizer"
run() { FAKE_ERRORS="$1" sh "$src/bench/sanitize_gpu.sh" "$tmp/out" --build "$build" --sanitizer "$tmp/compute-sanitizer" \
    --no-fixtures -R '^(test_ops_gpu|test_gemm_tc_gpu)$' >"$tmp/log" 2>&1; }
run "none::0"
rc=$?
if [ $rc = 0 ] && tail -1 "$tmp/log" | grep -qx "sanitize_gpu: 0 errors" &&
    grep -q "sanitize_gpu: racecheck: 0 errors, 2 warnings (2 tests: 2 ran, 0 skipped, 0 failed, 0 timed out)" "$tmp/log"; then
    echo "ok   clean run: exit 0, 0 errors per tool, racecheck's warnings counted apart"
else echo "FAIL clean run: exit $rc"; cat "$tmp/log"; fail=1; fi
run "racecheck:test_gemm_tc:3"
rc=$?
if [ $rc = 1 ] && grep -q "sanitize_gpu: racecheck: 3 errors, 2 warnings" "$tmp/log" &&
    grep -q "sanitize_gpu: memcheck: 0 errors" "$tmp/log" &&
    tail -1 "$tmp/log" | grep -q "sanitize_gpu: 3 errors; racecheck test_gemm_tc_gpu: 3 errors"; then
    echo "ok   3 racecheck errors in test_gemm_tc_gpu: counted, named, exit 1"
else echo "FAIL errors: exit $rc"; cat "$tmp/log"; fail=1; fi
FAKE_NOLIB=1 run "none::0"
rc=$?
if [ $rc = 1 ] && grep -q "memcheck  test_ops_gpu .*failed (exit 127: cannot load libodl.so.0)" "$tmp/log"; then
    echo "ok   a test that cannot start: failed, with the library the loader could not find, exit 1"
else echo "FAIL a test that cannot start: exit $rc"; cat "$tmp/log"; fail=1; fi
FAKE_RACE_ONLY=1 run "none::0"
rc=$?
if [ $rc = 0 ] && grep -q "sanitize_gpu: racecheck: 0 errors, 2 warnings (2 tests: 2 ran, 0 skipped, 0 failed" "$tmp/log"; then
    echo "ok   racecheck with only its RACECHECK SUMMARY line: a clean run, not 'no summary'"
else echo "FAIL racecheck summary alone: exit $rc"; cat "$tmp/log"; fail=1; fi
FAKE_RACE_ONLY=1 run "racecheck:test_gemm_tc:2"
rc=$?
if [ $rc = 1 ] && tail -1 "$tmp/log" | grep -q "sanitize_gpu: 2 errors; racecheck test_gemm_tc_gpu: 2 errors"; then
    echo "ok   2 hazards from the RACECHECK SUMMARY line alone: counted, named, exit 1"
else echo "FAIL racecheck summary alone, errors: exit $rc"; cat "$tmp/log"; fail=1; fi
rm -f "$tmp/out/summary.txt"
FAKE_SLEEP=5 FAKE_ERRORS="none::0" sh "$src/bench/sanitize_gpu.sh" "$tmp/out" --build "$build" --sanitizer "$tmp/compute-sanitizer" \
    --no-fixtures -R '^(test_ops_gpu|test_gemm_tc_gpu)$' --tools memcheck -j 1 --deadline 1 >"$tmp/log" 2>&1
rc=$?
if [ $rc = 1 ] && grep -q "memcheck: 0 errors (2 tests: 0 ran, 0 skipped, 0 failed, 0 timed out, 1 ended at the deadline, 1 not run: deadline)" "$tmp/log" &&
    tail -1 "$tmp/log" | grep -q "memcheck: 1 runs ended at the deadline; memcheck: 1 runs not started before the deadline" &&
    grep -q "ended at the deadline$" "$tmp/out/summary.txt"; then
    echo "ok   --deadline: the run in flight ended (named so, not a time-out), the next not started, the summary written, exit 1"
else echo "FAIL --deadline: exit $rc"; cat "$tmp/log"; fail=1; fi
# --timeout below the deadline: a run that passes it timed out, whatever the deadline
FAKE_SLEEP=5 FAKE_ERRORS="none::0" sh "$src/bench/sanitize_gpu.sh" "$tmp/out" --build "$build" --sanitizer "$tmp/compute-sanitizer" \
    --no-fixtures -R '^test_ops_gpu$' --tools memcheck -j 1 --timeout 1 --deadline 60 >"$tmp/log" 2>&1
rc=$?
if [ $rc = 1 ] && grep -q "memcheck: 0 errors (1 tests: 0 ran, 0 skipped, 0 failed, 1 timed out)" "$tmp/log" &&
    tail -1 "$tmp/log" | grep -q "memcheck test_ops_gpu: timed out"; then
    echo "ok   --timeout under the deadline: timed out"
else echo "FAIL --timeout: exit $rc"; cat "$tmp/log"; fail=1; fi
# --longest-first: earlier results.json files say which run took longest (the longest time of any file);
# with -j 1 that one starts, and ends, first
cat >"$tmp/earlier.json" <<'EOJ'
{"results": [{"tool": "memcheck", "test": "test_ops_gpu", "wall_s": 1.0, "status": "ok"},
             {"tool": "memcheck", "test": "test_gemm_tc_gpu", "wall_s": 400.0, "status": "timed out"}]}
EOJ
echo '{"results": [{"tool": "memcheck", "test": "test_ops_gpu", "wall_s": 900.0, "status": "ok"}]}' >"$tmp/later.json"
lf() { # want files...
    want=$1
    shift
    FAKE_ERRORS="none::0" sh "$src/bench/sanitize_gpu.sh" "$tmp/lf" --build "$build" --sanitizer "$tmp/compute-sanitizer" \
        --no-fixtures -R '^(test_ops_gpu|test_gemm_tc_gpu)$' --tools memcheck -j 1 "$@" >"$tmp/log" 2>&1
    rc=$?
    got=$(sed -n 's/^memcheck  *\([a-z_0-9]*\) .*/\1/p' "$tmp/log" | head -1)
    if [ $rc = 0 ] && [ "$got" = "$want" ]; then echo "ok   --longest-first $*: $got started first"
    else echo "FAIL --longest-first $*: exit $rc, first run $got (want $want)"; cat "$tmp/log"; fail=1; fi
}
lf test_gemm_tc_gpu --longest-first "$tmp/earlier.json"
lf test_ops_gpu --longest-first "$tmp/earlier.json" --longest-first "$tmp/later.json"
FAKE_ERRORS="none::0" sh "$src/bench/sanitize_gpu.sh" "$tmp/lf" --build "$build" --sanitizer "$tmp/compute-sanitizer" \
    --no-fixtures -R '^test_ops_gpu$' --tools memcheck --longest-first "$tmp/missing.json" >"$tmp/log" 2>&1
rc=$?
if [ $rc = 2 ] && grep -q "longest-first .*missing.json" "$tmp/log"; then echo "ok   --longest-first of a missing file: exit 2 naming it"
else echo "FAIL --longest-first missing file: exit $rc"; cat "$tmp/log"; fail=1; fi
# -j 2: each test's pool capped at 60/2 percent of the free memory (ODL_CUDA_POOL_PERCENT_MAX), said once
FAKE_ERRORS="none::0" env -u ODL_CUDA_POOL_PERCENT_MAX sh "$src/bench/sanitize_gpu.sh" "$tmp/cap" --build "$build" --sanitizer "$tmp/compute-sanitizer" \
    --no-fixtures -R '^(test_ops_gpu|test_gemm_tc_gpu)$' --tools memcheck -j 2 >"$tmp/log" 2>&1
rc=$?
if [ $rc = 0 ] && grep -q "pools at most 30% of free memory each" "$tmp/log" &&
    grep -q "pool cap 30" "$tmp/cap/logs/memcheck/test_ops_gpu.log" && grep -q "pool cap 30" "$tmp/cap/logs/memcheck/test_gemm_tc_gpu.log"; then
    echo "ok   -j 2: every test's pool capped at 30%"
else echo "FAIL -j 2 pool cap: exit $rc"; cat "$tmp/log"; fail=1; fi
# YOLOv5 reference tests selected and no reference data where they read it: refused at once (they would only
# skip); a YOLOv5 test of random inputs (yolov5_graph_gpu) is not one of them
ODL_TEST_DATA="$tmp/no_data" FAKE_ERRORS="none::0" sh "$src/bench/sanitize_gpu.sh" "$tmp/nd" --build "$build" \
    --sanitizer "$tmp/compute-sanitizer" --no-fixtures -R '^(test_ops_gpu|yolov5_graph_gpu|yolov5_forward_bus640_gpu)$' \
    --tools memcheck >"$tmp/log" 2>&1
rc=$?
ODL_TEST_DATA="$tmp/no_data" FAKE_ERRORS="none::0" sh "$src/bench/sanitize_gpu.sh" "$tmp/nd2" --build "$build" \
    --sanitizer "$tmp/compute-sanitizer" --no-fixtures -R '^(test_ops_gpu|yolov5_graph_gpu)$' --tools memcheck >"$tmp/log2" 2>&1
rc2=$?
if [ $rc = 2 ] && grep -q "sanitize_gpu: error: no YOLOv5 reference data in .*$tmp/no_data, which 1 of the tests read" "$tmp/log" &&
    [ ! -d "$tmp/nd/logs" ] && [ $rc2 = 0 ]; then
    echo "ok   no test data for the YOLOv5 reference tests: refused before any run (not for the random-input one)"
else echo "FAIL no test data: exit $rc / $rc2"; cat "$tmp/log" "$tmp/log2"; fail=1; fi
# the tests' smaller sizes: ODL_TEST_QUICK=1 unless the caller set it (0: the full sizes)
env -u ODL_TEST_QUICK FAKE_ERRORS="none::0" sh "$src/bench/sanitize_gpu.sh" "$tmp/q1" --build "$build" --sanitizer "$tmp/compute-sanitizer" \
    --no-fixtures -R '^test_ops_gpu$' --tools memcheck >"$tmp/log" 2>&1
rc1=$?
ODL_TEST_QUICK=0 FAKE_ERRORS="none::0" sh "$src/bench/sanitize_gpu.sh" "$tmp/q0" --build "$build" \
    --sanitizer "$tmp/compute-sanitizer" --no-fixtures -R '^test_ops_gpu$' --tools memcheck >>"$tmp/log" 2>&1
rc0=$?
if [ $rc1 = 0 ] && [ $rc0 = 0 ] && grep -q "quick 1$" "$tmp/q1/logs/memcheck/test_ops_gpu.log" &&
    grep -q "quick 0$" "$tmp/q0/logs/memcheck/test_ops_gpu.log" && grep -q "ODL_TEST_QUICK=1" "$tmp/log"; then
    echo "ok   ODL_TEST_QUICK=1 for the tests unless the caller set it"
else echo "FAIL ODL_TEST_QUICK: exit $rc1/$rc0"; cat "$tmp/log"; fail=1; fi
# a test that skips (exit 77: no GPU here) before any CUDA call: its own exit status counts, not the
# sanitizer's 0 ("no summary" before); every test skipped: exit 3
FAKE_RUN=1 FAKE_ERRORS="none::0" sh "$src/bench/sanitize_gpu.sh" "$tmp/skip" --build "$build" --sanitizer "$tmp/compute-sanitizer" \
    --no-fixtures -R '^test_ops_gpu$' --tools memcheck,racecheck >"$tmp/log" 2>&1
rc=$?
if [ $rc = 3 ] && grep -q "memcheck: 0 errors (1 tests: 0 ran, 1 skipped, 0 failed" "$tmp/log" &&
    grep -q "racecheck: 0 errors (1 tests: 0 ran, 1 skipped, 0 failed" "$tmp/log" && ! grep -q "no summary" "$tmp/log"; then
    echo "ok   a test that skips before any CUDA call (the sanitizer loses its exit status): skipped"
else echo "FAIL skip before CUDA: exit $rc"; cat "$tmp/log"; fail=1; fi
# the same with the output folder named relative to the caller's folder (the README's `runs/san`): the tests
# run in build/tests, where that name would not lead to the logs (their exit-status files then lost)
(cd "$tmp" && FAKE_RUN=1 FAKE_ERRORS="none::0" sh "$src/bench/sanitize_gpu.sh" rel/san --build "$build" \
    --sanitizer "$tmp/compute-sanitizer" --no-fixtures -R '^test_ops_gpu$' --tools memcheck >"$tmp/log" 2>&1)
rc=$?
if [ $rc = 3 ] && grep -q "memcheck: 0 errors (1 tests: 0 ran, 1 skipped, 0 failed" "$tmp/log" &&
    [ -f "$tmp/rel/san/logs/memcheck/test_ops_gpu.log.rc" ] && [ -f "$tmp/rel/san/summary.txt" ]; then
    echo "ok   a relative output folder: the logs and their exit statuses under it, the skip seen"
else echo "FAIL relative output folder: exit $rc"; cat "$tmp/log"; fail=1; fi
# --longest-first takes several files after one flag (as a shell glob gives them)
lf test_ops_gpu --longest-first "$tmp/earlier.json" "$tmp/later.json"
# --skip-done: a sweep in parts. A build of a known commit (the real build's tests, its own odl_build_info.h):
# the runs that ended ok with 0 errors are taken, the one with errors runs again; results of another commit
# are refused
mkdir -p "$tmp/fb"
printf 'subdirs("%s")\n' "$(cd "$build" && pwd)" >"$tmp/fb/CTestTestfile.cmake"
echo '#define ODL_BUILD_COMMIT "0123456789ab"' >"$tmp/fb/odl_build_info.h"
sd() { # OUT ERRORS ARGS...
    o=$1 e=$2
    shift 2
    FAKE_ERRORS="$e" sh "$src/bench/sanitize_gpu.sh" "$tmp/$o" --build "$tmp/fb" --sanitizer "$tmp/compute-sanitizer" \
        --no-fixtures -R '^(test_ops_gpu|test_gemm_tc_gpu)$' --tools memcheck,racecheck "$@" >"$tmp/log" 2>&1
}
sd sd1 "racecheck:test_gemm_tc:3"
rc1=$?
sd sd2 "none::0" --skip-done "$tmp/sd1/results.json"
rc2=$?
sed 's/"0123456789ab"/"ba9876543210"/' "$tmp/sd2/results.json" >"$tmp/other.json"
cp "$tmp/log" "$tmp/log_sd2"
sd sd3 "none::0" --skip-done "$tmp/other.json"
rc3=$?
cp "$tmp/log" "$tmp/log_sd3"
ODL_TEST_QUICK=0 sd sd4 "none::0" --skip-done "$tmp/sd2/results.json"
rc4=$?
cp "$tmp/log" "$tmp/log_sd4"
echo '#define ODL_BUILD_COMMIT "0123456789ab-dirty"' >"$tmp/fb/odl_build_info.h"
sd sd5 "none::0" --skip-done "$tmp/sd2/results.json"
rc5=$?
if [ $rc1 = 1 ] && [ $rc2 = 0 ] && grep -q "3 runs ended ok in earlier results of this build (0123456789ab)" "$tmp/log_sd2" &&
    [ "$(find "$tmp/sd2/logs" -name '*.log' | wc -l)" = 1 ] && [ -s "$tmp/sd2/logs/racecheck/test_gemm_tc_gpu.log" ] &&
    grep -q "sanitize_gpu: memcheck: 0 errors (2 tests: 2 ran" "$tmp/log_sd2" && grep -q '"commit": "0123456789ab"' "$tmp/sd2/results.json" &&
    grep -q "\"earlier\": \"$tmp/sd1/results.json\"" "$tmp/sd2/results.json" &&
    [ $rc3 = 2 ] && grep -q "error: --skip-done: .*other.json: its build commit is ba9876543210, this build's 0123456789ab" "$tmp/log_sd3" &&
    [ $rc4 = 2 ] && grep -q "error: --skip-done: .*ODL_TEST_QUICK=1 there, 0 here" "$tmp/log_sd4" &&
    [ $rc5 = 2 ] && grep -q "this build's 0123456789ab-dirty" "$tmp/log"; then
    echo "ok   --skip-done: 3 clean runs of the same commit taken, the one with errors run again; another commit, another size, a dirty build refused"
else echo "FAIL --skip-done: exit $rc1/$rc2/$rc3/$rc4/$rc5"; cat "$tmp/log_sd2" "$tmp/log_sd3" "$tmp/log_sd4" "$tmp/log"; fail=1; fi
# bench/gpu_long_run.sh: two named sanitizer runs side by side (errors in one), waited for and collected
# together; the name "soak" is the soak's and refused
glr() { env -u ODL_FMNIST_DIR -u ODL_TEST_DATA ODL_LONG_DIR="$tmp/long" ODL_BUILD="$build" bash "$src/bench/gpu_long_run.sh" "$@"; }
FAKE_ERRORS="initcheck:test_ops_gpu:4" glr start-sanitize --name init --tools initcheck -R '^test_ops_gpu$' --no-fixtures \
    --sanitizer "$tmp/compute-sanitizer" >"$tmp/log" 2>&1 &&
    FAKE_ERRORS="none::0" glr start-sanitize --name race --tools racecheck -R '^test_gemm_tc_gpu$' --no-fixtures \
        --sanitizer "$tmp/compute-sanitizer" >>"$tmp/log" 2>&1 &&
    glr wait 60 >>"$tmp/log" 2>&1 && glr collect "$tmp/collected" >>"$tmp/log" 2>&1
rc=$?
glr start-sanitize --name soak --tools memcheck >>"$tmp/log" 2>&1
rc_soak=$?
S="$tmp/collected/sanitize_summaries.txt"
if [ $rc = 0 ] && [ $rc_soak = 2 ] && grep -qx "## init" "$S" && grep -qx "## race" "$S" &&
    grep -q "sanitize_gpu: 4 errors; initcheck test_ops_gpu: 4 errors" "$S" && grep -q "sanitize_gpu: racecheck: 0 errors" "$S" &&
    grep -q "^init: ended" "$tmp/log" && grep -q "^race: ended" "$tmp/log" &&
    tar tzf "$tmp/collected/logs.tgz" | grep -qx "init/results.json" && tar tzf "$tmp/collected/logs.tgz" | grep -qx "race/results.json"; then
    echo "ok   gpu_long_run.sh: two named runs waited for and collected (4 errors in one), --name soak refused"
else echo "FAIL gpu_long_run.sh named runs: exit $rc, --name soak exit $rc_soak"; cat "$tmp/log" "$S"; fail=1; fi
# bench/gpu_long_run.sh start-sweep: its three parts check every gpu test (the fixtures apart) under every
# tool exactly once, racecheck of the op tests in full and of the rest with a launch limit
mkdir -p "$tmp/data/yolov5/reference"
glrd() { env -u ODL_FMNIST_DIR ODL_TEST_DATA="$tmp/data" ODL_LONG_DIR="$tmp/long2" ODL_BUILD="$build" bash "$src/bench/gpu_long_run.sh" "$@"; }
for part in main ref synth; do FAKE_ERRORS="none::0" glrd start-sweep $part --sanitizer "$tmp/compute-sanitizer"; done >"$tmp/log" 2>&1 &&
    glrd wait 120 >>"$tmp/log" 2>&1 && glrd collect "$tmp/swept" >>"$tmp/log" 2>&1
rc=$?
glrd start-sweep all >>"$tmp/log" 2>&1
rc_bad=$?
S="$tmp/swept/sanitize_summaries.txt"
(cd "$build" && ctest -N -L gpu) | sed -n 's/^ *Test *#[0-9]*: //p' | grep -v '_convert$' | sort >"$tmp/gpu_tests"
missing=""
for tool in memcheck racecheck initcheck synccheck; do
    grep "^$tool " "$S" | awk '{print $2}' | sort >"$tmp/swept_$tool"
    cmp -s "$tmp/gpu_tests" "$tmp/swept_$tool" || missing="$missing $tool"
done
section() { awk -v h="## $1" '$0 == h { on = 1; next } /^## / { on = 0 } on' "$S"; }
runs_named=$(grep -c -x -e "## mis" -e "## rop" -e "## rapp" -e "## ref" -e "## synth" "$S")
if [ $rc = 0 ] && [ $rc_bad = 2 ] && [ -z "$missing" ] && [ -s "$tmp/gpu_tests" ] && [ "$runs_named" = 5 ] &&
    section rop | grep -q "^racecheck test_ops_gpu .* ok$" && ! section rop | grep -q "first 200" &&
    section rapp | grep -q "launches checked per process: first 200"; then
    echo "ok   gpu_long_run.sh start-sweep: $(wc -l <"$tmp/gpu_tests") gpu tests, each under the four tools once; a wrong part refused"
else
    echo "FAIL start-sweep: exit $rc, wrong part exit $rc_bad, tools not covering every test exactly once:$missing"
    cat "$tmp/log" "$S"; for tool in memcheck racecheck initcheck synccheck; do diff "$tmp/gpu_tests" "$tmp/swept_$tool"; done
    fail=1
fi
# racecheck leaves nvJPEG's kernels out, and --racecheck-launches N checks the first N launches (racecheck
# only); a run with a limit is taken by --skip-done for an equal or smaller one, and never for a sweep of all
echo '#define ODL_BUILD_COMMIT "0123456789ab"' >"$tmp/fb/odl_build_info.h"
sd rl1 "none::0" --racecheck-launches 400
rc1=$?
cp "$tmp/log" "$tmp/log_rl1"
sd rl2 "none::0" --racecheck-launches 300 --skip-done "$tmp/rl1/results.json"
rc2=$?
cp "$tmp/log" "$tmp/log_rl2"
sd rl3 "none::0" --skip-done "$tmp/rl1/results.json"
rc3=$?
cp "$tmp/log" "$tmp/log_rl3"
FAKE_OLD=1 sd rl4 "none::0" --racecheck-launches 400
rc4=$?
R="$tmp/rl1/logs/racecheck/test_ops_gpu.log"
M="$tmp/rl1/logs/memcheck/test_ops_gpu.log"
if [ $rc1 = 0 ] && grep -q "args: .*--kernel-name-exclude kns=nvjpeg --launch-count 400 " "$R" && ! grep -q "launch-count" "$M" &&
    ! grep -q "kns=nvjpeg" "$M" && grep -q "racecheck of the first 400 launches of each process" "$tmp/log_rl1" &&
    grep -q "sanitize_gpu: racecheck: 0 errors, 2 warnings (2 tests: 2 ran, .*; launches checked per process: first 400" "$tmp/log_rl1" &&
    ! grep -q "memcheck: .*launches checked" "$tmp/log_rl1" &&
    [ $rc2 = 0 ] && grep -q "4 runs ended ok in earlier results" "$tmp/log_rl2" &&
    [ $rc3 = 0 ] && grep -q "2 runs ended ok in earlier results" "$tmp/log_rl3" && [ -s "$tmp/rl3/logs/racecheck/test_ops_gpu.log" ] &&
    ! grep -q "launch-count" "$tmp/rl3/logs/racecheck/test_ops_gpu.log" &&
    [ $rc4 = 2 ] && grep -q "error: .* has no --kernel-name-exclude or --launch-count" "$tmp/log"; then
    echo "ok   --racecheck-launches: racecheck alone limited, nvJPEG left out; --skip-done takes it for a smaller limit only; an old sanitizer refused"
else echo "FAIL --racecheck-launches: exit $rc1/$rc2/$rc3/$rc4"; cat "$tmp/log_rl1" "$tmp/log_rl2" "$tmp/log_rl3" "$tmp/log"; fail=1; fi
# a run killed by SIGKILL beside others (the OOM killer): named so, and run again alone once at the end
mkdir -p "$tmp/kill"
FAKE_KILL="$tmp/kill" FAKE_ERRORS="none::0" sh "$src/bench/sanitize_gpu.sh" "$tmp/k" --build "$build" --sanitizer "$tmp/compute-sanitizer" \
    --no-fixtures -R '^test_ops_gpu$' --tools memcheck >"$tmp/log" 2>&1
rc=$?
cp "$tmp/log" "$tmp/log_k1"
mkdir -p "$tmp/kill2"
FAKE_KILL="$tmp/kill2" FAKE_KILL_SELF=1 FAKE_ERRORS="none::0" sh "$src/bench/sanitize_gpu.sh" "$tmp/k2" --build "$build" \
    --sanitizer "$tmp/compute-sanitizer" --no-fixtures -R '^test_ops_gpu$' --tools memcheck >"$tmp/log" 2>&1
rc2=$?
if [ $rc = 0 ] && grep -q "memcheck  *test_ops_gpu .*killed (SIGKILL: out of host memory?)" "$tmp/log_k1" &&
    grep -q "memcheck test_ops_gpu was killed beside other runs: once more, alone" "$tmp/log_k1" &&
    grep -q "memcheck: 0 errors (1 tests: 1 ran, 0 skipped, 0 failed" "$tmp/log_k1" && grep -q '"killed_before": true' "$tmp/k/results.json" &&
    [ -s "$tmp/k/logs/memcheck/test_ops_gpu.log.killed" ] && [ $rc2 = 0 ] && grep -q "killed (SIGKILL" "$tmp/log" &&
    grep -q "memcheck: 0 errors (1 tests: 1 ran" "$tmp/log"; then
    echo "ok   a run killed by SIGKILL (the test's or the sanitizer's): reported, run again alone (its first log kept), the second run counted"
else echo "FAIL killed run: exit $rc / $rc2"; cat "$tmp/log_k1" "$tmp/log"; fail=1; fi
# initcheck decodes with nvJPEG's hybrid backend (the hardware engine's writes are unseen by it), unless the
# caller chose a backend; the other tools keep the caller's environment
env -u ODL_NVJPEG_BACKEND FAKE_ERRORS="none::0" sh "$src/bench/sanitize_gpu.sh" "$tmp/ic" --build "$build" \
    --sanitizer "$tmp/compute-sanitizer" --no-fixtures -R '^test_ops_gpu$' --tools memcheck,initcheck >"$tmp/log" 2>&1
rc1=$?
ODL_NVJPEG_BACKEND=hardware FAKE_ERRORS="none::0" sh "$src/bench/sanitize_gpu.sh" "$tmp/ic2" --build "$build" \
    --sanitizer "$tmp/compute-sanitizer" --no-fixtures -R '^test_ops_gpu$' --tools initcheck >>"$tmp/log" 2>&1
rc2=$?
if [ $rc1 = 0 ] && [ $rc2 = 0 ] && grep -q "nvjpeg backend gpu-hybrid" "$tmp/ic/logs/initcheck/test_ops_gpu.log" &&
    grep -q "^# env ODL_NVJPEG_BACKEND=gpu-hybrid" "$tmp/ic/logs/initcheck/test_ops_gpu.log" &&
    grep -q "nvjpeg backend unset" "$tmp/ic/logs/memcheck/test_ops_gpu.log" &&
    grep -q "nvjpeg backend hardware" "$tmp/ic2/logs/initcheck/test_ops_gpu.log"; then
    echo "ok   initcheck decodes with nvJPEG's hybrid backend unless the caller chose one"
else echo "FAIL initcheck's nvJPEG backend: exit $rc1/$rc2"; cat "$tmp/log"; fail=1; fi
[ -s "$tmp/out/summary.txt" ] && [ -s "$tmp/out/logs/racecheck/test_gemm_tc_gpu.log" ] && ok=1 || ok=0
if [ $ok = 1 ]; then echo "ok   summary.txt and one log per run"; else echo "FAIL no summary or logs"; fail=1; fi
[ $fail = 0 ] && echo "sanitize_gpu_selftest: passed"
exit $fail
