#!/usr/bin/env bash
# Issue 22: a one-image `odl_worker --task=infer`, start to exit, of two builds (or two settings of one),
# interleaved run by run so that the machine's moments fall on both alike, on the GPU machine:
#   bench/startup_ab.sh BUILD_A BUILD_B [RUNS]          RUNS per side (default 7), one warm-up run each first
# Each build's odl_worker runs with its own folder first on LD_LIBRARY_PATH (a build unpacked on another
# machine finds libodl there); the weights are BUILD_A/yolov5n.h5, the image $ODL_TEST_DATA/yolov5/images/bus.jpg
# (IMAGE overrides; DEVICE: cuda unless set, cpu to try it without a GPU). ENV_A / ENV_B: VAR=VALUE words for one side (e.g. ENV_B=CUDA_MODULE_LOADING=EAGER with
# the same build twice). Prints per side the median of the whole process and of the timeline's device thread
# (driver, CUDA context and pool) and first forward (docs/yolov5.md, "Start-up"); logs under $OUT/startup_ab.
set -uo pipefail
A=${1:?usage: bench/startup_ab.sh BUILD_A BUILD_B [RUNS]}
Bb=${2:?usage: bench/startup_ab.sh BUILD_A BUILD_B [RUNS]}
runs=${3:-7}
img=${IMAGE:-${ODL_TEST_DATA:-}/yolov5/images/bus.jpg}
W8=$A/yolov5n.h5
D=${OUT:-/tmp/odl_out}/startup_ab
mkdir -p "$D"
[ -f "$img" ] || { echo "startup_ab: error: no image $img (set ODL_TEST_DATA or IMAGE)" >&2; exit 2; }
[ -f "$W8" ] || { echo "startup_ab: error: no $W8" >&2; exit 2; }
one() { # one SIDE BUILD ENVWORDS K: one run, its milliseconds and timeline line into $D/SIDE.txt
  local t0 t1
  t0=$(date +%s%N)
  env $3 LD_LIBRARY_PATH="$2${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$2/odl_worker" --task=infer --weights "$W8" \
    --source "$img" --output "$D/out_$1" --device "${DEVICE:-cuda}" >/dev/null 2>"$D/$1.$4.log" ||
    { echo "startup_ab: $1 run $4 failed: $(tail -2 "$D/$1.$4.log")" >&2; return 1; }
  t1=$(date +%s%N)
  [ "$4" -gt 0 ] && echo "$(( (t1 - t0) / 1000000 )) $(grep -o 'timeline.*' "$D/$1.$4.log")" >>"$D/$1.txt"
  return 0
}
rm -f "$D/a.txt" "$D/b.txt"
for k in $(seq 0 "$runs"); do
  one a "$A" "${ENV_A:-}" "$k" || exit 1
  one b "$Bb" "${ENV_B:-}" "$k" || exit 1
done
python3 - "$D" "$A ${ENV_A:-}" "$Bb ${ENV_B:-}" <<'PY'
import re, statistics, sys
d, names = sys.argv[1], sys.argv[2:]
def med(xs, fmt="%.1f"): return fmt % statistics.median(xs) if xs else "-"
print("| side | runs | whole process ms (median, min-max) | device thread ms | first forward ms |")
print("|---|---|---|---|---|")
for side, name in zip("ab", names):
    whole, dev, fwd = [], [], []
    for line in open(f"{d}/{side}.txt"):
        whole.append(float(line.split()[0]))
        m = re.search(r"driver, CUDA context and pool ([0-9.]+)", line)
        if m: dev.append(float(m.group(1)))
        m = re.search(r"first forward ([0-9.]+)", line)
        if m: fwd.append(float(m.group(1)))
    print(f"| {side}: {name.strip()} | {len(whole)} | {med(whole, '%.0f')} ({min(whole):.0f}-{max(whole):.0f}) | "
          f"{med(dev)} | {med(fwd)} |")
PY
