#!/usr/bin/env bash
# Issue 23's decoder questions in one GPU call: odl_worker --task=eval (fp16, --square) over eval_bench.sh's
# files repeated to 5,120, once per run spec BATCH:WORKERS:SHARE:FEEDERS:BACKEND[:GRAPH] --
#   BATCH the eval's batch (= the decode batch), WORKERS the CPU decoding threads (--workers), SHARE
#   ODL_NVJPEG_CPU_SHARE (percent of nvJPEG's JPEGs sent to the CPU), FEEDERS ODL_GPU_PREP_FEEDERS,
#   BACKEND ODL_NVJPEG_BACKEND (hardware, gpu-hybrid: nvJPEG's batched call decodes Huffman on the GPU
#   above 50 images), or cpu for --decoder cpu, GRAPH on for --cuda-graph on (default off) --
# beside odl's own forward-only throughput at batch 32 (yolov5_bench, same call), one table row each:
# images/s of the loop, its ratio to the forward alone, the device's busy share and the feeder's phases.
# Usage: bench/decode_sweep.sh BUILD_DIR WEIGHTS.h5 DATA_DIR [OUT_DIR] [SPEC...]
# Default specs: the hardware decoder alone, CPU shares with fewer threads than cores (does the feeder
# thread's nvJPEG call slow down beside busy CPU decoders?), and the GPU-hybrid backend's own rate.
set -uo pipefail
B=${1:?build dir}; W=${2:?weights .h5}; D=${3:?data dir}; O=${4:-${OUT:-/tmp/decode_sweep}}
shift $(($# < 4 ? $# : 4))
specs=("$@")
[ ${#specs[@]} -gt 0 ] || specs=(32:16:0:1:hardware 32:8:0:1:hardware 32:16:100:1:cpu 32:12:100:1:cpu
  32:8:30:1:hardware 32:12:40:1:hardware 32:16:40:1:hardware 32:12:40:2:hardware 32:12:30:3:hardware
  128:12:40:1:hardware 128:14:45:1:hardware 32:16:0:1:gpu-hybrid 64:16:0:1:gpu-hybrid 128:16:0:1:gpu-hybrid
  32:16:0:1:hardware:on 32:16:40:1:hardware:on 32:12:30:3:hardware:on)
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$O"
"$here/pipeline_files.sh" "$D" 5120 "$O/files"
fwd=nan
if [ -z "${NO_FORWARD:-}" ]; then
  timeout 300 "$B/bench/yolov5_bench" --weights "$W" --image "$D/yolov5/images/bus.jpg" --batch 32 >"$O/yolov5_bench.txt" 2>&1
  fwd=$(grep -o '"fp16_bN_img_per_s": *[0-9.]*' "$O/yolov5_bench.txt" | grep -o '[0-9.]*$' || echo nan)
fi
echo "odl forward only, fp16 batch 32 (yolov5_bench, this call): ${fwd:-nan} images/s; $(nproc) cores"
echo "| batch:workers:share:feeders:backend[:graph] | images/s | / forward | device busy | decoded | feeder per batch |"
echo "|---|---|---|---|---|---|"
for spec in "${specs[@]}"; do
  IFS=: read -r bs workers share feeders backend graph <<<"$spec"
  dec=auto; envb=(ODL_NVJPEG_BACKEND="$backend")
  [ "$backend" = cpu ] && dec=cpu envb=()
  log="$O/eval_${spec//:/_}.log"
  # a run takes seconds; one that hangs (as a CPU share with one feeder did before f5812a0) says where after 10 s
  env "${envb[@]}" ODL_GPU_PREP_FEEDERS="$feeders" ODL_NVJPEG_CPU_SHARE="$share" ODL_GPU_PREP_STALL_S=10 timeout 45 "$B"/odl_worker --task=eval \
    --model=yolov5 --weights "$W" --data "$O/files" --square --half --batch-size "$bs" --workers "$workers" \
    --device cuda --decoder "$dec" --cuda-graph "${graph:-off}" --output "$O/out_${spec//:/_}" >/dev/null 2>"$log"
  rc=$?
  python3 - "$log" "$spec" "$fwd" "$rc" "$here" <<'PY'
import sys
path, spec, fwd, rc = sys.argv[1:5]
sys.path.insert(0, sys.argv[5])
import eval_log  # bench/eval_log.py: the eval log's speed lines
try:
    text = open(path).read()
except OSError:
    text = ""
r = eval_log.parse(text)
ips = "nan" if r["pipe"] != r["pipe"] else f"{r['pipe']:.1f}"
try:
    ratio = f"{r['pipe'] / float(fwd):.2f}x" if float(fwd) > 0 and r["pipe"] == r["pipe"] else "n/a"
except ValueError:
    ratio = "n/a"
if rc != "0":
    lines = text.strip().splitlines()
    last = r["stalls"][-1] if r["stalls"] else lines[-1] if lines else ""
    ips = f"failed ({rc}): {last[:200]}"
prep = ", ".join(f"{ms:.2f} ms {name.split()[-1]}" for name, ms in r["phases"].items()) or "?"
busy = "?" if r["busy"] != r["busy"] else f"{r['busy']:.0f}%"
print(f"| {spec} | {ips} | {ratio} | {busy} | {r['decoded'] or '?'} | {prep} |")
PY
done
