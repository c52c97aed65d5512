#!/usr/bin/env bash
# Kernel-level profile of the YOLOv5n forward on the GPU machine (nsys): per-kernel totals and the launch
# sequence of one batch-32 float16 forward, to find the layers that dominate.
# Usage: source .devdeps/env.sh && bench/profile_yolo.sh   (build dir $ODL_BUILD or build-h200; logs under $OUT)
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/tmp/odl_out}
B=${ODL_BUILD:-$src/build-h200}
export ODL_TEST_DATA=$src/.devdata/data
mkdir -p "$OUT"
if [ ! -x "$B/bench/yolov5_bench" ]; then
  cmake -S "$src" -B "$B" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >"$OUT/cmake.log" 2>&1 &&
    cmake --build "$B" -j"$(nproc)" >"$OUT/build.log" 2>&1 || { echo "BUILD FAILED"; tail -30 "$OUT/build.log"; exit 1; }
fi
w=$B/yolov5n.h5
[ -f "$w" ] || python3 "$src/tools/convert_yolov5.py" "$ODL_TEST_DATA/yolov5/yolov5n.pt" "$w" >/dev/null
NSYS=$(command -v nsys || ls /usr/local/cuda*/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -1)
if [ -z "$NSYS" ]; then echo "no nsys"; exit 1; fi
"$NSYS" profile -t cuda -o "$OUT/yolo" --force-overwrite true "$B/bench/yolov5_bench" --weights "$w" --iters 3 --warmup 1 \
  --no-graph --half-only --no-e2e --baselines "$ODL_TEST_DATA/baselines.json" >"$OUT/nsys_run.log" 2>&1
"$NSYS" stats --report cuda_gpu_kern_sum --format csv -o "$OUT/kern" "$OUT/yolo.nsys-rep" >/dev/null 2>&1
"$NSYS" stats --report cuda_gpu_trace --format csv -o "$OUT/trace" "$OUT/yolo.nsys-rep" >/dev/null 2>&1
ls "$OUT"
python3 - "$OUT" <<'PY'
import csv, sys, glob
out = sys.argv[1]
rows = list(csv.DictReader(open(glob.glob(out + "/kern*.csv")[0])))
print("== kernel totals (all runs)")
for r in rows[:25]:
    print(f"{float(r['Total Time (ns)'])/1e6:9.2f} ms {int(r['Instances']):6d}  {r['Name'][:110]}")
tr = [r for r in csv.DictReader(open(glob.glob(out + "/trace*.csv")[0]))
      if 'memcpy' not in r['Name'].lower() and 'memset' not in r['Name'].lower()]
start = [i for i, r in enumerate(tr) if 'nchw_to_nhwc' in r['Name']][-1]
print("== the last forward (float16, batch 32), kernel by kernel")
tot = 0
for r in tr[start:]:
    d = float(r['Duration (ns)']) / 1e3
    tot += d
    print(f"{d:9.1f} us  grid {r.get('GrdX','')}  {r['Name'][:100]}")
print(f"total {tot:.1f} us")
PY
