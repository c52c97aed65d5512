#!/usr/bin/env bash
# Issue 25's long GPU runs on a lent machine whose commands last at most 10 minutes: the one-GPU soak
# (bench/soak.sh --device cuda --ranks 1 --eval-every 30) and bench/sanitize_gpu.sh, each started in a
# session of its own so that it outlives the command that started it; later commands wait and collect.
#   bench/gpu_long_run.sh start MINUTES [sanitize_gpu.sh options...]   start both (no options: no sanitizer)
#   bench/gpu_long_run.sh start-soak MINUTES | start-sanitize [options]  one of them (the soak first: it
#                                                                       empties $W; each copies what it is given)
#   bench/gpu_long_run.sh wait SECONDS                                  until both ended or SECONDS passed
#   bench/gpu_long_run.sh collect OUT_DIR                               summaries to OUT_DIR, the rest in logs.tgz
# Binaries from $ODL_BUILD (default build/). Fashion-MNIST ($ODL_FMNIST_DIR) and the test data
# ($ODL_TEST_DATA) are copied under /tmp/odl-long first: a folder the device tool carried is removed by
# the next command that does not carry it again. Both runs share the GPU, so the soak's utilisation
# figure counts the sanitizer's work too (the soak's per-process checks count only its own).
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root" || exit 2
W=/tmp/odl-long
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
    copy_inputs
    setsid nohup bench/sanitize_gpu.sh "$W/sanitize" --build "$build" "$@" >"$W/sanitize.log" 2>&1 </dev/null &
    echo $! >"$W/sanitize.pid"
    echo "started: sanitizer pid $!; logs in $W"
}

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
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
wait)
    end=$((SECONDS + ${1:?seconds}))
    while [ $SECONDS -lt $end ] && { alive soak || alive sanitize; }; do sleep 5; done
    for r in soak sanitize; do
        [ -f "$W/$r.pid" ] || continue
        if alive $r; then echo "$r: running; last line: $(tail -1 "$W/$r.log")"; else echo "$r: ended; last line: $(tail -1 "$W/$r.log")"; fi
    done
    ;;
collect)
    out=${1:?out dir}
    mkdir -p "$out" || exit 2
    cp "$W"/soak.log "$W"/sanitize.log "$out"/ 2>/dev/null
    cp "$W/sanitize/summary.txt" "$W/sanitize/results.json" "$out"/ 2>/dev/null
    # everything else in one file (the device tool brings back at most 8): the soak's records and every
    # sanitizer log, less checkpoints and the per-step sample records
    (cd "$W" && find soak sanitize -type f \( -name '*.log' -o -name '*.json' -o -name '*.jsonl' -o -name '*.csv' \
        -o -name '*.txt' -o -name '*.err' -o -name '*.out' \) -size -4M ! -name '*.gen*.rank*.txt' 2>/dev/null |
        tar czf "$out/logs.tgz" -T -)
    ls -la "$out"
    ;;
*)
    sed -n '2,11p' "$0"
    exit 2
    ;;
esac
