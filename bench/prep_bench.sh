#!/usr/bin/env bash
# The CPU image path per image beside OpenCV's, in one call on any machine: odl's decode + letterbox
# (bench/prep_bench.c) and cv2.imread + YOLOv5's letterbox (bench/prep_cv2.py), one thread each, on the
# same files, in alternating rounds (so that other load on the machine falls on both alike); the medians
# of the rounds and odl over OpenCV (target: at most 1.0x).
# Usage: bench/prep_bench.sh BUILD_DIR [DATA_DIR] [--square] [--rounds N] [--reps N]
#   DATA_DIR: the data folder (default $ODL_TEST_DATA, else ../shared/data): its yolov5/images and the
#   coco8 images. PYTHON: a python3 with cv2 and numpy (default python3; e.g. a venv with
#   opencv-python-headless).
set -uo pipefail
B=${1:?build dir}; shift
src=$(cd "$(dirname "$0")/.." && pwd)
D=${ODL_TEST_DATA:-$src/../shared/data}
if [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; then D=$1; shift; fi
PY=${PYTHON:-python3}
rounds=3 reps=10 extra=()
while [ $# -gt 0 ]; do
  case $1 in
    --square) extra+=(--square) ;;
    --rounds) rounds=$2; shift ;;
    --reps) reps=$2; shift ;;
    *) echo "prep_bench.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
bin=$B/bench/prep_bench
[ -x "$bin" ] || { echo "prep_bench.sh: $bin not built" >&2; exit 2; }
"$PY" -c "import cv2, numpy" 2>/dev/null || { echo "prep_bench.sh: $PY has no cv2/numpy (PYTHON=venv/bin/python3)" >&2; exit 2; }
inputs=("$D/yolov5/images" "$D"/yolov5/coco8/images/*)
odl=() cv=()
tmp=$(mktemp); trap 'rm -f "$tmp"' EXIT
for r in $(seq "$rounds"); do
  o=$("$bin" --reps "$reps" "${extra[@]}" "${inputs[@]}") || { echo "$o"; exit 1; }
  c=$("$PY" "$src/bench/prep_cv2.py" --reps "$reps" "${extra[@]}" "${inputs[@]}" 2>"$tmp") || { cat "$tmp"; echo "$c"; exit 1; }
  [ "$r" = 1 ] && cat "$tmp" >&2
  [ "$r" = 1 ] && { echo "$o" | head -1; echo "$c" | head -1; }
  odl+=("$(echo "$o" | tail -1)") cv+=("$(echo "$c" | tail -1)")
done
"$PY" - "${#odl[@]}" "${odl[@]}" "${cv[@]}" <<'PY'
import json, sys, statistics
n = int(sys.argv[1])
o = [json.loads(s) for s in sys.argv[2:2 + n]]
c = [json.loads(s) for s in sys.argv[2 + n:]]
print(f"medians of {n} alternating rounds, ms per image, one thread each:")
print("| stage | odl | OpenCV | odl / OpenCV |\n|---|---|---|---|")
for k, name in (("decode_ms", "read + decode"), ("letterbox_ms", "letterbox"), ("total_ms", "decode + letterbox")):
    a, b = statistics.median(x[k] for x in o), statistics.median(x[k] for x in c)
    print(f"| {name} | {a:.3f} | {b:.3f} | {a / b:.2f}x |")
a, b = statistics.median(x["total_ms"] for x in o), statistics.median(x["total_ms"] for x in c)
print(f"target odl <= 1.0x OpenCV: {'met' if a <= b else 'NOT met'} ({a / b:.2f}x)")
PY
