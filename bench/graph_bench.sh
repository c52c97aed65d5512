#!/usr/bin/env bash
# Issue 22 on the GPU machine (nvidia-h200): the training step replayed from CUDA graphs, the YOLOv5 batch-1
# graphs, and what a one-image --task=infer spends before its first box, beside PyTorch in the same call.
#   source .devdeps/env.sh && bench/graph_bench.sh tests   build (build-h200), the GPU tests of the graphs
#                                                          (bit for bit against op by op), compute-sanitizer
#   source .devdeps/env.sh && bench/graph_bench.sh bench   training graph on/off, yolov5_bench, --task=infer
#                                                          start-up, torch_baselines.py mnist_compile
#                                                          yolov5n_compiled detect_process; the table last
#   (all: both, when one call may take that long). Logs under $OUT, also packed as $OUT/logs.tgz.
# Data travel in ignored folders of the checkout (as bench/gpu_run.sh): .devdata/fmnist (Fashion-MNIST),
# .devdata/data (a copy of ../shared/data, ODL_TEST_DATA), .devdata/bench (torch_baselines.py and the
# YOLOv5 v7.0 code beside it, a copy of ../shared/bench).
set -uo pipefail
mode=${1:-all}
src=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/tmp/odl_out}
mkdir -p "$OUT"
trap 'tar czf "$OUT/logs.tgz" -C "$OUT" --exclude logs.tgz . 2>/dev/null' EXIT
B=${ODL_BUILD:-$src/build-h200}
export ODL_TEST_DATA=$src/.devdata/data ODL_FMNIST_DIR=$src/.devdata/fmnist NCCL_NVLS_ENABLE=0
TB=$src/.devdata/bench/torch_baselines.py
W8=$B/yolov5n.h5
summary=()
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv,noheader | tee "$OUT/gpu.txt"

build() {
  local t0=$(date +%s)
  cmake -S "$src" -B "$B" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >"$OUT/cmake.log" 2>&1 &&
    cmake --build "$B" -j"$(nproc)" >"$OUT/build.log" 2>&1 ||
    { echo "BUILD FAILED"; grep -E "error" "$OUT/build.log" | head -30; exit 1; }
  # the converter needs NumPy and h5py: Debian's python3 where it has them, else the PATH's (the GPU
  # machine's /usr/bin/python3 has no NumPy)
  local py=python3
  /usr/bin/python3 -c "import numpy, h5py" 2>/dev/null && py=/usr/bin/python3
  [ -f "$W8" ] || "$py" "$src/tools/convert_yolov5.py" "$ODL_TEST_DATA/yolov5/yolov5n.pt" "$W8" >"$OUT/convert.log" 2>&1
  summary+=("build: $(( $(date +%s) - t0 )) s")
}

tests() {
  echo "== ctest: the graph tests (bit for bit), checkpoints and shutdown on CUDA"
  ctest --test-dir "$B" -R "step_scalars|train_step|train_graph|ckpt_gpu|device_shutdown|test_ops_gpu" \
    --output-on-failure --timeout 600 >"$OUT/ctest_graph.log" 2>&1
  grep -E "tests passed|\*\*\*Failed|FAIL|bit for bit|equal|replays|ok:" "$OUT/ctest_graph.log" | head -40
  summary+=("ctest graph tests: $(grep -E 'tests passed' "$OUT/ctest_graph.log")")
  echo "== compute-sanitizer (memcheck) on the step test, graphs on"
  if command -v compute-sanitizer >/dev/null; then
    timeout 500 compute-sanitizer --tool memcheck --leak-check full "$B/tests/test_train_step" --device cuda \
      >"$OUT/sanitizer_train_step.log" 2>&1
    tail -4 "$OUT/sanitizer_train_step.log"
    summary+=("compute-sanitizer test_train_step: $(grep -E 'ERROR SUMMARY' "$OUT/sanitizer_train_step.log")")
  else
    summary+=("compute-sanitizer: not found on the PATH")
  fi
}

# One training run: warm epoch samples/s (epoch 2) and the host time per step of the run's steps line.
train() { # NAME BATCH ARGS...
  local n=$1 bs=$2; shift 2
  timeout 240 "$B/odl_worker" --task=train --model=mnist --data_dir="$ODL_FMNIST_DIR" --device cuda --epochs 2 \
    --batch-size "$bs" --test-batch-size 1000 --progress off --metrics-out "$OUT/$n.jsonl" "$@" 2>"$OUT/$n.log" ||
    echo "training $n failed: $(tail -2 "$OUT/$n.log")"
}

bench() {
  if [ -f "$TB" ]; then
    echo "== PyTorch (same call): mnist_compile yolov5n_compiled detect_process"
    PYTHONUNBUFFERED=1 timeout 420 python3 "$TB" "$OUT/torch.json" mnist_compile yolov5n_compiled detect_process \
      >"$OUT/torch.log" 2>&1
    tail -3 "$OUT/torch.log"
  fi
  echo "== training, examples CNN: CUDA graphs on / off"
  for bs in 64 512; do
    train g$bs $bs
    train e$bs $bs --cuda-graph off
  done
  echo "== YOLOv5n: forward and the GPU pipeline at batch 1 (fp32, fp16)"
  local targ=()
  [ -s "$OUT/torch.json" ] && targ=(--torch "$OUT/torch.json")
  timeout 300 "$B/bench/yolov5_bench" --weights "$W8" --image "$ODL_TEST_DATA/yolov5/images/bus.jpg" "${targ[@]}" \
    >"$OUT/yolov5_bench.txt" 2>&1
  grep -v "^  layer" "$OUT/yolov5_bench.txt" | tail -16
  echo "== --task=infer on bus.jpg, whole process (8 runs, the first dropped), variants"
  local img=$ODL_TEST_DATA/yolov5/images/bus.jpg
  for v in default fp16 pool_half eager_modules; do
    local extra=() envs=()
    case $v in
      fp16) extra=(--half) ;;
      pool_half) extra=(--memory.preallocate_fraction 0.5) ;; # what inference reserved before issue 22
      eager_modules) envs=(CUDA_MODULE_LOADING=EAGER) ;;
    esac
    : > "$OUT/infer_$v.ms"
    for k in 0 1 2 3 4 5 6 7; do
      local t0=$(date +%s%N)
      env "${envs[@]}" "$B/odl_worker" --task=infer --weights "$W8" --source "$img" --output "$OUT/infer_$v" \
        --device cuda "${extra[@]}" >/dev/null 2>"$OUT/infer_$v.$k.log"
      local t1=$(date +%s%N)
      [ $k -gt 0 ] && echo $(( (t1 - t0) / 1000000 )) >> "$OUT/infer_$v.ms"
    done
    grep "timeline" "$OUT/infer_$v.7.log" | sed 's/.*INFO //' > "$OUT/infer_$v.timeline"
  done
  python3 - "$OUT" <<'PY'
import json, os, re, statistics, sys
out = sys.argv[1]
t = {}
p = os.path.join(out, "torch.json")
if os.path.exists(p):
    t = json.load(open(p))
def epoch2(n):
    try:
        rec = [json.loads(l) for l in open(os.path.join(out, n + ".jsonl")) if '"event":"epoch"' in l]
        return rec[1]["samples_per_s"]
    except Exception:
        return float("nan")
def steps_line(n):
    try:
        for l in open(os.path.join(out, n + ".log")):
            if "steps:" in l:
                return l.split("INFO ", 1)[1].strip()
    except Exception:
        pass
    return "-"
print("\n## Training, examples CNN, warm epoch (epoch 2), samples/s")
print("| batch | graphs on | graphs off | on/off | torch.compile reduce-overhead | on / compile | target |")
print("|---|---|---|---|---|---|---|")
for bs in (64, 512):
    g, e = epoch2(f"g{bs}"), epoch2(f"e{bs}")
    c = t.get("mnist_compile", {}).get(str(bs), {}).get("samples_per_s") if isinstance(t.get("mnist_compile"), dict) else None
    tgt = ">= 4x compile" if bs == 64 else "not slower than before (off)"
    print(f"| {bs} | {g:,.0f} | {e:,.0f} | {g / e:.2f}x | {c or '-'} | {g / c if c else float('nan'):.2f}x | {tgt} |")
for bs in (64, 512):
    for k in ("g", "e"):
        print(f"- {k}{bs}: {steps_line(f'{k}{bs}')}")
print("\n## --task=infer bus.jpg, whole process (ms, median of 7 after one dropped)")
dp = t.get("detect_process", {}) if isinstance(t.get("detect_process"), dict) else {}
print(f"PyTorch detect_process (fresh python3, fp32): {dp.get('process_bus_fp32_ms_median', '-')} ms")
for v in ("default", "fp16", "pool_half", "eager_modules"):
    try:
        ms = [int(x) for x in open(os.path.join(out, f"infer_{v}.ms")) if x.strip()]
        tl = open(os.path.join(out, f"infer_{v}.timeline")).read().strip()
        print(f"- {v}: median {statistics.median(ms):.0f} ms (min {min(ms)}, max {max(ms)}); {tl}")
    except Exception as ex:
        print(f"- {v}: no result ({ex})")
PY
}

case $mode in
  tests) build; tests ;;
  bench) [ -x "$B/odl_worker" ] || build; bench | tee "$OUT/bench_table.md" ;;
  all) build; tests; bench | tee "$OUT/bench_table.md" ;;
  *) echo "usage: bench/graph_bench.sh tests|bench|all"; exit 2 ;;
esac
echo "== summary"
printf '%s\n' "${summary[@]}"
