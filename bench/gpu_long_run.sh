#!/usr/bin/env bash
# Issue 25's long GPU runs on a lent machine whose commands last at most 10 minutes: the one-GPU soak
# (bench/soak.sh --device cuda --ranks 1 --eval-every 30) and bench/sanitize_gpu.sh, each started in a
# session of its own so that it outlives the command that started it; later commands wait and collect.
#   bench/gpu_long_run.sh start MINUTES [sanitize_gpu.sh options...]   start both (no options: no sanitizer)
#   bench/gpu_long_run.sh start-soak MINUTES                            the soak alone (first: it empties $W)
#   bench/gpu_long_run.sh start-sanitize [--name NAME] [options]        a sanitizer run (NAME: default
#                                                                       sanitize; several runs side by side,
#                                                                       each its tools and tests, by name)
#   bench/gpu_long_run.sh start-sweep main|ref|synth [options]          a whole sweep's runs, in three parts
#                                                                       (below; options go to each run)
#   bench/gpu_long_run.sh wait SECONDS                                  until every run ended or SECONDS passed
#   bench/gpu_long_run.sh collect OUT_DIR                               soak.log, every run's summary in
#                                                                       sanitize_summaries.txt, the rest in logs.tgz
# Binaries from $ODL_BUILD (default build/). Fashion-MNIST ($ODL_FMNIST_DIR) and the test data
# ($ODL_TEST_DATA) are copied under /tmp/odl-long ($ODL_LONG_DIR) first: a folder the device tool
# carried is removed by the next command that does not carry it again. The runs share the GPU, so the
# soak's utilisation figure counts the sanitizers' work too (the soak's per-process checks count only its own).
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root" || exit 2
W=${ODL_LONG_DIR:-/tmp/odl-long} # the runs' folder (a test sets its own)
build=${ODL_BUILD:-build}
what=${1:-}
shift || true

# Fashion-MNIST and the test data (or the part carried this time) under $W, which the runs then read
copy_inputs() {
    mkdir -p "$W/fmnist" "$W/data" || exit 2
    if [ -n "${ODL_FMNIST_DIR:-}" ] && [ "$ODL_FMNIST_DIR" != "$W/fmnist" ]; then
        cp "$ODL_FMNIST_DIR"/* "$W/fmnist/" || exit 2
    fi
    if [ -n "${ODL_TEST_DATA:-}" ] && [ "$ODL_TEST_DATA" != "$W/data" ]; then
        cp -r "$ODL_TEST_DATA"/. "$W/data/" || exit 2
    fi
    export ODL_FMNIST_DIR=$W/fmnist ODL_TEST_DATA=$W/data
}

alive() { [ -f "$W/$1.pid" ] && kill -0 "$(cat "$W/$1.pid")" 2>/dev/null; }

start_soak() {
    : "${ODL_FMNIST_DIR:?ODL_FMNIST_DIR}"
    rm -rf "$W" || exit 2
    copy_inputs
    setsid nohup bench/soak.sh "$1" "$W/soak" --device cuda --ranks 1 --eval-every 30 --build "$build" \
        --data "$W/fmnist" --eval-data "$W/data/yolov5/coco8" >"$W/soak.log" 2>&1 </dev/null &
    echo $! >"$W/soak.pid"
    echo "started: soak pid $!; logs in $W"
}

start_sanitize() {
    local name=sanitize
    if [ "${1:-}" = --name ]; then
        name=${2:?--name NAME}
        shift 2
    fi
    case $name in soak | *[!A-Za-z0-9_-]*) echo "gpu_long_run: error: --name $name: letters, digits, _ and - (not soak)" >&2; exit 2 ;; esac
    copy_inputs
    setsid nohup bench/sanitize_gpu.sh "$W/$name" --build "$build" "$@" >"$W/$name.log" 2>&1 </dev/null &
    echo $! >"$W/$name.pid"
    echo "started: sanitizer run $name, pid $!; logs in $W"
}

# Every `ctest -L gpu` test under the four tools (issue 25), in parts that fit the lent machine's calls:
#   main   three runs side by side, 9 at once in all (13 were slower, not faster: bench/README.md):
#          mis   memcheck, initcheck, synccheck of every test but those of ref and synth (-j 4)
#          rop   racecheck of the op tests in full (-j 2: one process each, every launch checked)
#          rapp  racecheck of the other tests, the first 200 launches of each process (-j 3)
#   ref    the tests that read the full test data, all four tools (-j 3): yolov5n_reference.h5 (19 MB) and
#          mnist/fashion_mnist_cnn_steps.h5 (14 MB) go in a call of their own (device_pack.sh --data-full)
#   synth  yolov5_synth_gpu, all four tools (-j 4): its 39 MB fixture in a call of its own (--synth)
# Pools at 6% of the free memory each unless ODL_CUDA_POOL_PERCENT_MAX is set (9 runs: about half the GPU).
# The fixtures are not run (three runs at once would each write yolov5n.h5): the build must have them
# (ctest -R '^yolov5_(synth_)?convert$' first; device_pack.sh carries yolov5n.h5, --synth the other). Options
# other than -R and -E (each run has its own) go to every run: --deadline, --skip-done, --longest-first.
SWEEP_REF='yolov5_forward_bus640_gpu|yolov5_layers_zidane320_gpu|yolov5_half_forward_bus640_gpu|yolov5_half_layers_zidane320_gpu|detect_post_gpu|test_train_ref_gpu'
SWEEP_SYNTH='yolov5_synth_gpu'
SWEEP_OPS='test_detect_decode_gpu|test_device_shutdown|test_step_scalars_gpu|gpu_prep_gpu|test_ops_gpu.*|test_ops_f16_gpu.*|test_gemm_tc_gpu.*|test_conv_tc_gpu.*'
start_sweep() {
    local part=${1:-}
    shift || true
    export ODL_CUDA_POOL_PERCENT_MAX=${ODL_CUDA_POOL_PERCENT_MAX:-6}
    case $part in
    main)
        start_sanitize --name mis --tools memcheck,initcheck,synccheck -E "^($SWEEP_REF|$SWEEP_SYNTH)\$" -j 4 --no-fixtures "$@"
        start_sanitize --name rop --tools racecheck -R "^($SWEEP_OPS)\$" -j 2 --no-fixtures "$@"
        start_sanitize --name rapp --tools racecheck --racecheck-launches 200 -E "^($SWEEP_REF|$SWEEP_SYNTH|$SWEEP_OPS)\$" \
            -j 3 --no-fixtures "$@"
        ;;
    ref) start_sanitize --name ref -R "^($SWEEP_REF)\$" --racecheck-launches 200 -j 3 --no-fixtures "$@" ;;
    synth) start_sanitize --name synth -R "^($SWEEP_SYNTH)\$" --racecheck-launches 200 -j 4 --no-fixtures "$@" ;;
    *) echo "gpu_long_run: error: start-sweep main|ref|synth, not '$part'" >&2; exit 2 ;;
    esac
}

# the runs started under $W: the soak and each named sanitizer run (NAME.pid beside NAME.log)
runs() { (cd "$W" 2>/dev/null && for f in *.pid; do [ -f "$f" ] && echo "${f%.pid}"; done); }
any_alive() { local r; for r in $(runs); do alive "$r" && return 0; done; return 1; }

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# a build made on another machine finds libodl through the library path, not its run path (device_unpack.sh
# sets it; a later call's new shell has lost it: 2026-12-07, every test of a run exited 127)
case $build in /*) build_abs=$build ;; *) build_abs=$root/$build ;; esac
case ":${LD_LIBRARY_PATH:-}:" in *":$build_abs:"*) ;; *) export LD_LIBRARY_PATH=$build_abs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} ;; esac
case "$what" in
start)
    minutes=${1:?minutes}
    shift
    start_soak "$minutes"
    if [ $# -gt 0 ]; then start_sanitize "$@"; fi
    ;;
start-soak)
    start_soak "${1:?minutes}"
    ;;
start-sanitize)
    start_sanitize "$@"
    ;;
start-sweep)
    start_sweep "$@"
    ;;
wait)
    end=$((SECONDS + ${1:?seconds}))
    while [ $SECONDS -lt $end ] && any_alive; do sleep 5; done
    for r in $(runs); do
        if alive $r; then echo "$r: running; last line: $(tail -1 "$W/$r.log")"; else echo "$r: ended; last line: $(tail -1 "$W/$r.log")"; fi
    done
    ;;
collect)
    out=${1:?out dir}
    mkdir -p "$out" || exit 2
    cp "$W"/soak.log "$out"/ 2>/dev/null
    san=$(runs | grep -vx soak)
    if [ -n "$san" ]; then
        for r in $san; do
            if [ -f "$W/$r/summary.txt" ]; then echo "## $r"; cat "$W/$r/summary.txt"; else echo "## $r: no summary; its log ends:"; tail -5 "$W/$r.log"; fi
        done >"$out/sanitize_summaries.txt" 2>&1
    fi
    # everything else in one file (the device tool brings back at most 8): the soak's records, every
    # sanitizer run's log, results.json and per-test logs, less checkpoints and the per-step sample records
    (cd "$W" && find soak $san $(for r in $san; do echo "$r.log"; done) -type f \( -name '*.log' -o -name '*.json' \
        -o -name '*.jsonl' -o -name '*.csv' -o -name '*.txt' -o -name '*.err' -o -name '*.out' -o -name '*.rc' \) \
        -size -4M ! -name '*.gen*.rank*.txt' 2>/dev/null | tar czf "$out/logs.tgz" -T -)
    ls -la "$out"
    ;;
*)
    sed -n '2,14p' "$0"
    exit 2
    ;;
esac
