#!/usr/bin/env bash
# The detection pipeline on the GPU machine, beside PyTorch in the same call:
#   1. odl_worker --task=eval over 512 files, built as torch_baselines.py's yolov5n_pipeline builds them
#      (the images/ and coco8 JPEGs, sorted, repeated to 512), square 640, conf 0.001, IoU 0.6, max_det 300,
#      --half, batch 32, 16 decoding threads, once with --decoder auto (nvJPEG) and once with --decoder cpu:
#      images/s of the decode -> letterbox -> forward -> NMS loop (and wall, weights loading included), the
#      device's busy share (CUDA events) and GPU utilisation (nvidia-smi every 100 ms), beside odl's own
#      forward-only throughput at the same batch and precision (yolov5_bench, this call) and PyTorch's
#      yolov5n_pipeline (8 DataLoader workers, OpenCV) and yolov5n_pipeline_nvjpeg (torchvision's GPU decode);
#      The same --decoder auto eval over 5,120 files (the set repeated): a 512-file run is 16 batches, and its
#      first batch (lazy kernel loading, pool and buffer growth, the decoder's first call) weighs in it;
#      the steady rate, (5120 - 512) / (T5120 - T512) over the loop times, says what a batch costs after it;
#      and the 5,120-file eval with 2 and 3 feeder threads (ODL_GPU_PREP_FEEDERS), then 3 with a 30% CPU share;
#   2. end to end on bus.jpg in the process (yolov5_bench: decode .. NMS, fp32 and fp16, median of 50),
#      beside PyTorch's in-process e2e_bus_fp32_ms_median (yolov5n);
#   3. odl_worker --task=infer on bus.jpg as a whole process (start to exit, median of 7, --no-save-images:
#      it prints the boxes, as the peer does; split into before the task, the task and after its timeline
#      line -- the process's exit -- from the log's timestamps), beside PyTorch's detect_process (a python3 process that
#      imports torch, loads the model, reads, detects and prints). In-process and whole-process figures
#      are compared each with its own peer, never with one another.
# Usage: bench/eval_bench.sh BUILD_DIR WEIGHTS.h5 DATA_DIR [OUT_DIR]
#   DATA_DIR: the data folder (../shared/data); TORCH_BASELINES=path/torch_baselines.py adds PyTorch (its
#   sections yolov5n yolov5n_pipeline yolov5n_pipeline_nvjpeg detect_process, run first).
set -uo pipefail
B=${1:?build dir}; W=${2:?weights .h5}; D=${3:?data dir}; O=${4:-${OUT:-/tmp/eval_bench}}
mkdir -p "$O"
here=$(cd "$(dirname "$0")" && pwd)
for n in 512 5120; do "$here/pipeline_files.sh" "$D" "$n" "$O/pipeline$n"; done
if [ -n "${TORCH_BASELINES:-}" ] && [ -f "$TORCH_BASELINES" ]; then
  ODL_TEST_DATA="$D" PYTHONUNBUFFERED=1 timeout 400 python3 "$TORCH_BASELINES" "$O/torch_baselines.json" yolov5n \
    yolov5n_pipeline yolov5n_pipeline_nvjpeg detect_process >"$O/torch_baselines.log" 2>&1
fi
targ=(); [ -s "$O/torch_baselines.json" ] && targ=(--torch "$O/torch_baselines.json")
timeout 300 "$B/bench/yolov5_bench" --weights "$W" --image "$D/yolov5/images/bus.jpg" --batch 32 "${targ[@]}" \
  >"$O/yolov5_bench.txt" 2>&1 || { echo "yolov5_bench failed:"; tail -5 "$O/yolov5_bench.txt"; }
# tag (its files' names):decoder:files:feeders:CPU share (ODL_GPU_PREP_FEEDERS, ODL_NVJPEG_CPU_SHARE)
for run in auto:auto:512:1:0 cpu:cpu:512:1:0 auto5120:auto:5120:1:0 f2_5120:auto:5120:2:0 f3_5120:auto:5120:3:0 \
  f3s30_5120:auto:5120:3:30; do
  IFS=: read -r tag dec n feeders share <<<"$run"
  smi=""
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits -lms 100 >"$O/util_$tag.txt" 2>/dev/null &
    smi=$!
  fi
  ODL_GPU_PREP_FEEDERS=$feeders ODL_NVJPEG_CPU_SHARE=$share \
    "$B"/odl_worker --task=eval --model=yolov5 --weights "$W" --data "$O/pipeline$n" --square --half --batch-size 32 \
    --workers 16 --device cuda --decoder "$dec" --output "$O/eval_$tag" >"$O/eval_$tag.out" 2>"$O/eval_$tag.log" ||
    { echo "eval --decoder $dec over $n files failed:"; tail -5 "$O/eval_$tag.log"; }
  [ -n "$smi" ] && kill "$smi" 2>/dev/null
done
ts=()
: >"$O/infer_times.txt"
for k in 1 2 3 4 5 6 7 8; do
  t0=$(date +%s%N)
  "$B"/odl_worker --task=infer --weights "$W" --input "$D/yolov5/images/bus.jpg" --output "$O/infer" --device cuda \
    --no-save-images >/dev/null 2>"$O/infer.$k.log"
  t1=$(date +%s%N)
  cat "$O/infer.$k.log" >>"$O/infer.log"
  echo "$k $t0 $t1" >>"$O/infer_times.txt" # beside the log's clock: what the process spends outside its task
  [ "$k" -gt 1 ] && ts+=($(( (t1 - t0) / 1000 ))) # the first warms the file cache, as detect_process's
done
bus_ms=$(printf '%s\n' "${ts[@]}" | sort -n | sed -n 4p | awk '{printf "%.1f", $1 / 1000}')
python3 - "$O" "${bus_ms:-nan}" "$here" <<'PY'
import json, os, re, sys
out, proc = sys.argv[1], float(sys.argv[2])
sys.path.insert(0, sys.argv[3])
import eval_log  # bench/eval_log.py: the eval log's speed lines
def load(p):
    try:
        return json.load(open(p))
    except Exception:
        return {}
t = load(os.path.join(out, "torch_baselines.json"))
yb = {}
try:
    yb = json.loads([l for l in open(os.path.join(out, "yolov5_bench.txt")) if l.startswith('{"bench"')][-1])
except Exception:
    pass
def ev(dec):
    r = eval_log.read(os.path.join(out, f"eval_{dec}.log"))
    r["util"] = float("nan")
    try:
        u = [float(x) for x in open(os.path.join(out, f"util_{dec}.txt")) if x.strip() and float(x) > 0]
        r["util"] = sum(u) / len(u) if u else float("nan")
    except (OSError, ValueError):
        pass
    return r
def ratio(a, b):
    return f"{a / b:.2f}x" if a == a and b and b == b else "n/a"
fwd = yb.get("fp16_bN_img_per_s", float("nan"))
tp = t.get("yolov5n_pipeline", {}).get("workers8_img_per_s", float("nan"))
tn = t.get("yolov5n_pipeline_nvjpeg", {}).get("img_per_s", float("nan"))
te = t.get("yolov5n", {}).get("e2e_bus_fp32_ms_median", float("nan"))
tproc = t.get("detect_process", {}).get("process_bus_fp32_ms_median", float("nan"))
print("| what | OriginDL | peer (same call) | OriginDL / peer | target |\n|---|---|---|---|---|")
for dec, name in (("auto", "nvJPEG"), ("cpu", "--decoder cpu")):
    e = ev(dec)
    print(f"| 512-file eval, fp16 batch 32, {name} (images/s) | {e['pipe']:.0f} | odl forward only (yolov5_bench) {fwd:.0f} | {ratio(e['pipe'], fwd)} | >= 0.8x |")
    print(f"|   same, beside PyTorch's DataLoader (8 workers, OpenCV) | | {tp} | {ratio(e['pipe'], tp)} | >= 10x |")
    print(f"|   same, beside PyTorch with torchvision's nvJPEG decode | | {tn} | {ratio(e['pipe'], tn)} | >= 10x |")
    print(f"|   wall incl. start-up (images/s) | {e['wall']:.0f} | | | |")
    print(f"|   GPU utilisation: nvidia-smi mean of non-zero samples / device busy (CUDA events), % | {e['util']:.0f} / {e['busy']:.0f} | | | > 80 |")
e5, e512 = ev("auto5120"), ev("auto")
steady = (5120 - 512) / (5120 / e5["pipe"] - 512 / e512["pipe"]) if e5["pipe"] == e5["pipe"] and e512["pipe"] == e512["pipe"] else float("nan")
print(f"| 5,120-file eval, nvJPEG (images/s) | {e5['pipe']:.0f} | odl forward only {fwd:.0f} | {ratio(e5['pipe'], fwd)} | |")
print(f"|   steady, (5120 - 512) / (T5120 - T512) over the loop times (images/s) | {steady:.0f} | | {ratio(steady, fwd)} | |")
print(f"|   GPU utilisation: nvidia-smi / device busy, % | {e5['util']:.0f} / {e5['busy']:.0f} | | | > 80 |")
for tag, what in (("f2_5120", "2 feeders"), ("f3_5120", "3 feeders"), ("f3s30_5120", "3 feeders, CPU share 30%")):
    e = ev(tag)
    print(f"|   same, {what} (images/s) | {e['pipe']:.0f} | odl forward only {fwd:.0f} | {ratio(e['pipe'], fwd)} | >= 0.8x |")
for prec in ("fp32", "fp16"):
    v = yb.get(f"{prec}_e2e_bus_ms", float("nan"))
    print(f"| bus.jpg end to end in the process, {prec} (ms) | {v:.2f} ({yb.get('e2e_decoder', '?')}) | PyTorch fp32 {te} | {ratio(v, te)} | <= 0.5x |")
    c = yb.get(f"{prec}_e2e_bus_cpu_path_ms", float("nan"))
    print(f"|   same on the CPU image path, {prec} (ms) | {c:.2f} | | {ratio(c, te)} | |")
print(f"| --task=infer bus.jpg, whole process (ms, median of 7) | {proc:.1f} | detect_process {tproc} | {ratio(proc, tproc)} | |")
# where the whole process's time goes: before the task (exec, loading, main), the task (its timeline line),
# after that line (the release and the process's exit); the log's UTC timestamps and date's are one clock
import datetime, statistics
split = []
try:
    for line in open(os.path.join(out, "infer_times.txt")):
        k, t0, t1 = line.split()
        if k == "1":
            continue
        tl = [l for l in open(os.path.join(out, f"infer.{k}.log")) if "timeline (ms)" in l][-1]
        at = datetime.datetime.strptime(tl.split()[0], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc)
        at_ms = at.timestamp() * 1e3
        task = float(re.search(r"([0-9.]+) since the task started", tl).group(1))
        split.append((at_ms - task - int(t0) / 1e6, task, int(t1) / 1e6 - at_ms))
except Exception as e:
    print(f"(no start/exit split: {e})")
if split:
    b, t_, a = (statistics.median(x[i] for x in split) for i in range(3))
    print(f"|   of which (medians): before the task {b:.1f}, the task {t_:.1f}, after its timeline line {a:.1f} ms | | | | |")
for tag, what in (("auto", "--decoder auto"), ("cpu", "--decoder cpu"), ("auto5120", "--decoder auto, 5,120 files"),
                  ("f2_5120", "5,120 files, 2 feeders"), ("f3_5120", "5,120 files, 3 feeders"),
                  ("f3s30_5120", "5,120 files, 3 feeders, CPU share 30%")):
    e = ev(tag)
    print(f"\neval {what}: decoded {e['decoded'] or '?'}; per image on rank 0: {e['per']}; image prep: {e['prep'] or '?'}")
PY
echo
sed -n '/end to end by stage/,/^{/p' "$O/yolov5_bench.txt" | grep -v '^{'
