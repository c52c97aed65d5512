#!/usr/bin/env bash
# The detection pipeline on the GPU machine, beside PyTorch in the same call:
#   1. odl_worker --task=eval over 512 files, built as torch_baselines.py's yolov5n_pipeline builds them
#      (the images/ and coco8 JPEGs, sorted, repeated to 512), square 640, conf 0.001, IoU 0.6,
#      max_det 300, --half, batch 32, 16 decoding threads: images/s of the decode -> letterbox -> forward -> NMS loop (and
#      wall, weights loading included), beside yolov5n_pipeline's workers8_img_per_s;
#   2. odl_worker --task=infer on bus.jpg, end to end (process start to exit, median of 7), beside
#      yolov5n's e2e_bus_fp32_ms_median;
#   3. GPU utilisation sampled by nvidia-smi every 100 ms during step 1.
# Usage: bench/eval_bench.sh BUILD_DIR WEIGHTS.h5 DATA_DIR [OUT_DIR]
#   DATA_DIR: the data folder (../shared/data); TORCH_BASELINES=path/torch_baselines.py adds PyTorch.
set -uo pipefail
B=${1:?build dir}; W=${2:?weights .h5}; D=${3:?data dir}; O=${4:-${OUT:-/tmp/eval_bench}}
mkdir -p "$O"
ds="$O/pipeline512"
rm -rf "$ds" && mkdir -p "$ds/images" "$ds/labels"
mapfile -t files < <(ls "$D"/yolov5/images/*.jpg "$D"/yolov5/coco8/images/*/*.jpg | LC_ALL=C sort)
for i in $(seq 0 511); do
  f=${files[$((i % ${#files[@]}))]}
  name=$(printf '%03d_%s' "$i" "$(basename "$f")")
  ln -s "$f" "$ds/images/$name"
  lab="${f%/*}"; lab="${lab/\/images\//\/labels\/}/$(basename "${f%.*}").txt"
  [ -f "$lab" ] && ln -s "$lab" "$ds/labels/${name%.*}.txt"
done
smi=""
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits -lms 100 > "$O/util.txt" 2>/dev/null &
  smi=$!
fi
"$B"/odl_worker --task=eval --model=yolov5 --weights "$W" --data "$ds" --square --half --batch-size 32 --workers 16 --device cuda \
  --output "$O/eval" > "$O/eval.out" 2> "$O/eval.log" || { echo "eval failed:"; tail -5 "$O/eval.log"; }
[ -n "$smi" ] && kill "$smi" 2>/dev/null
pipe=$(sed -n 's/.*pipeline \([0-9.]*\) images\/s.*/\1/p' "$O/eval.log")
wall=$(sed -n 's/.*wall (\([0-9.]*\) images\/s.*/\1/p' "$O/eval.log")
bounds=$(sed -n 's/.*speed on rank 0: \(.*per image\);.*/\1/p' "$O/eval.log")
util=$(awk '$1 > 0 {s += $1; n++} END {if (n) printf "%.0f", s / n; else print "nan"}' "$O/util.txt" 2>/dev/null)
ts=()
for k in 1 2 3 4 5 6 7; do
  t0=$(date +%s%N)
  "$B"/odl_worker --task=infer --weights "$W" --input "$D/yolov5/images/bus.jpg" --output "$O/infer" --device cuda \
    > /dev/null 2>> "$O/infer.log"
  ts+=($(( ($(date +%s%N) - t0) / 1000 )))
done
bus_ms=$(printf '%s\n' "${ts[@]}" | sort -n | sed -n 4p | awk '{printf "%.1f", $1 / 1000}')
if [ -n "${TORCH_BASELINES:-}" ] && [ -f "$TORCH_BASELINES" ]; then
  ODL_TEST_DATA="$D" PYTHONUNBUFFERED=1 python3 "$TORCH_BASELINES" "$O/torch_baselines.json" yolov5n yolov5n_pipeline \
    > "$O/torch_baselines.log" 2>&1
fi
python3 - "$O" "${pipe:-nan}" "${wall:-nan}" "${bus_ms:-nan}" "${util:-nan}" "${bounds:-}" <<'PY'
import json, os, sys
out, pipe, wall, bus, util, bounds = sys.argv[1], *map(float, sys.argv[2:6]), sys.argv[6]
t = {}
p = os.path.join(out, "torch_baselines.json")
if os.path.exists(p):
    t = json.load(open(p))
tp = t.get("yolov5n_pipeline", {}).get("workers8_img_per_s")
tb = t.get("yolov5n", {}).get("e2e_bus_fp32_ms_median")
print("| what | OriginDL | PyTorch | ratio |\n|---|---|---|---|")
print(f"| 512-file eval pipeline, fp16 batch 32 (images/s) | {pipe:.1f} | {tp or 'n/a'} | {pipe / tp if tp else float('nan'):.2f}x |")
print(f"| same, wall incl. start-up (images/s) | {wall:.1f} | | |")
print(f"| --task=infer bus.jpg end to end (ms, median of 7) | {bus:.1f} | {tb or 'n/a'} | {bus / tb if tb else float('nan'):.2f}x of PyTorch's time |")
print(f"| GPU utilisation during eval (mean of non-zero samples, %) | {util:.0f} | | |")
print(f"\nper image on rank 0: {bounds}")
PY
