#!/usr/bin/env bash
# Issue 25's long GPU runs on a lent machine whose commands last at most 10 minutes: the one-GPU soak
# (bench/soak.sh --device cuda --ranks 1 --eval-every 30) and bench/sanitize_gpu.sh, each started in a
# session of its own so that it outlives the command that started it; later commands wait and collect.
#   bench/gpu_long_run.sh start MINUTES [sanitize_gpu.sh options...]   start both (no options: no sanitizer)
#   bench/gpu_long_run.sh wait SECONDS                                  until both ended or SECONDS passed
#   bench/gpu_long_run.sh collect OUT_DIR                               copy logs and summaries to OUT_DIR
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

alive() { [ -f "$W/$1.pid" ] && kill -0 "$(cat "$W/$1.pid")" 2>/dev/null; }

case "$what" in
start)
    minutes=${1:?minutes}
    shift
    rm -rf "$W" && mkdir -p "$W/fmnist" "$W/data" || exit 2
    cp "${ODL_FMNIST_DIR:?ODL_FMNIST_DIR}"/* "$W/fmnist/" || exit 2
    [ -n "${ODL_TEST_DATA:-}" ] && cp -r "$ODL_TEST_DATA"/. "$W/data/"
    export ODL_FMNIST_DIR=$W/fmnist ODL_TEST_DATA=$W/data OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    setsid nohup bench/soak.sh "$minutes" "$W/soak" --device cuda --ranks 1 --eval-every 30 --build "$build" \
        --data "$W/fmnist" --eval-data "$W/data/yolov5/coco8" >"$W/soak.log" 2>&1 </dev/null &
    echo $! >"$W/soak.pid"
    if [ $# -gt 0 ]; then
        setsid nohup bench/sanitize_gpu.sh "$W/sanitize" --build "$build" "$@" >"$W/sanitize.log" 2>&1 </dev/null &
        echo $! >"$W/sanitize.pid"
    fi
    echo "started: soak pid $(cat "$W/soak.pid")$([ -f "$W/sanitize.pid" ] && echo ", sanitizer pid $(cat "$W/sanitize.pid")"); logs in $W"
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
    for f in faults.json gpu.csv resources.csv soak.log; do cp "$W/soak/$f" "$out/soak_$f" 2>/dev/null; done
    cp "$W/sanitize/summary.txt" "$W/sanitize/results.json" "$out"/ 2>/dev/null
    ls "$out"
    ;;
*)
    sed -n '2,11p' "$0"
    exit 2
    ;;
esac
