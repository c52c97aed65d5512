#!/usr/bin/env bash
# One call on the GPU machine (nvidia-h200) that builds this tree and, when `.base/` holds an earlier
# tree (e.g. `git archive REV | tar -x -C .base`), that one too, and times both in the same call, so a
# refactor or a kernel change is compared on the same GPU with PyTorch measured beside it.
#   source .devdeps/env.sh && bench/gpu_compare.sh train|yolo      (logs under $OUT, table last)
# train: ctest -L gpu without the YOLOv5 tests, odl_bench_kernels, bench/train_bench.sh with
#        torch_baselines.py mnist_eager mnist_compile mnist_compile_bf16.
# yolo:  every other GPU test, torch_baselines.py yolov5n yolov5n_compiled then yolov5_bench --torch on
#        its JSON, eval_bench.sh (with yolov5n_pipeline), and the health / coordinator scripts.
# Data travel in ignored folders (see bench/gpu_run.sh): .devdata/fmnist, .devdata/data, .devdata/bench.
set -uo pipefail
mode=${1:?train|yolo}
src=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/tmp/odl_out}
# Every log goes into one archive ($OUT/logs.tgz): the device tool brings back at most 8 files.
FINAL_OUT=$OUT OUT=$OUT/w
mkdir -p "$OUT"
trap 'tar czf "$FINAL_OUT/logs.tgz" -C "$OUT" . && rm -rf "$OUT"' EXIT
export ODL_TEST_DATA=$src/.devdata/data ODL_FMNIST_DIR=$src/.devdata/fmnist NCCL_NVLS_ENABLE=0
TB=$src/.devdata/bench/torch_baselines.py
H=/tmp/odl-head B=/tmp/odl-base
summary=()
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv,noheader | tee "$OUT/gpu.txt"

build() { # tree dir log
  cmake -S "$1" -B "$2" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >"$3.cmake" 2>&1 &&
    cmake --build "$2" -j8 >"$3" 2>&1
}
t0=$(date +%s)
build "$src" "$H" "$OUT/build_head.log" & ph=$!
have_base=0
if [ -f "$src/.base/CMakeLists.txt" ]; then build "$src/.base" "$B" "$OUT/build_base.log" & pb=$!; have_base=1; fi
wait $ph || { echo "HEAD BUILD FAILED"; grep -E "error" "$OUT/build_head.log" | head -30; exit 1; }
if [ $have_base = 1 ]; then wait $pb || { echo "base build failed"; have_base=0; }; fi
summary+=("build (both, in parallel): $(( $(date +%s) - t0 )) s")

if [ "$mode" = train ]; then
  ctest --test-dir "$H" -L gpu -E "yolov5|ops_f16|eval|health" --output-on-failure --timeout 300 >"$OUT/ctest_gpu_train.log" 2>&1
  summary+=("ctest -L gpu (training, ops, checkpoints): $(grep -E 'tests passed' "$OUT/ctest_gpu_train.log")")
  grep -E "\*\*\*Failed|FAIL" "$OUT/ctest_gpu_train.log" | head -20
  timeout 200 "$H/bench/odl_bench_kernels" >"$OUT/kernels_head.txt" 2>&1
  [ $have_base = 1 ] && timeout 200 "$B/bench/odl_bench_kernels" >"$OUT/kernels_base.txt" 2>&1
  mkdir -p "$OUT/train_head" "$OUT/train_base"
  TORCH_BASELINES=$TB timeout 400 "$src/bench/train_bench.sh" "$H" "$ODL_FMNIST_DIR" "$OUT/train_head" >"$OUT/train_head.md" 2>&1
  [ $have_base = 1 ] && timeout 120 "$src/bench/train_bench.sh" "$B" "$ODL_FMNIST_DIR" "$OUT/train_base" >"$OUT/train_base.md" 2>&1
  # --precision tf32|bf16 (issue 16): 2 epochs each, epoch-1 accuracy and warm epoch-2 samples/s
  for p in tf32 bf16; do for bs in 64 512; do
    timeout 60 "$H/odl_worker" --task=train --model=mnist --data_dir="$ODL_FMNIST_DIR" --device cuda --epochs 2 \
      --batch-size $bs --test-batch-size 1000 --progress off --precision $p \
      --metrics-out "$OUT/train_head/prec_${p}_b$bs.jsonl" 2>"$OUT/train_head/prec_${p}_b$bs.log"
  done; done
  PYTHONUNBUFFERED=1 timeout 200 python3 "$TB" "$OUT/torch_bf16.json" mnist_compile_bf16 >"$OUT/torch_bf16.log" 2>&1
  NP=1 STEPS=4000 REPEAT=4 timeout 150 "$src/bench/coord_overhead.sh" "$H" "$ODL_FMNIST_DIR" "$OUT/coord" >"$OUT/coord_overhead.txt" 2>&1
  echo "== kernels: time_us head vs base (same call)"
  python3 - "$OUT/kernels_head.txt" "$OUT/kernels_base.txt" <<'PY'
import re, sys
def rows(p):
    r = {}
    try:
        for l in open(p):
            m = re.match(r"^(\S.{33})\s+(\S+(?: \S+)?)\s+([0-9.]+)\s", l)
            if m and not l.startswith("name") and re.search(r"(OK|BAD|FAIL)\s*$", l):
                r[(m.group(1).strip(), m.group(2))] = float(m.group(3))
    except OSError:
        pass
    return r
h, b = rows(sys.argv[1]), rows(sys.argv[2])
import math
rs = []
for k, t in h.items():
    if k in b and b[k] > 0:
        rs.append(t / b[k])
        print(f"{k[0]:34s} {k[1]:30s} {t:9.1f} {b[k]:9.1f}  head/base {t / b[k]:.3f}")
if rs:
    print(f"kernels: {len(rs)} rows, time head/base geometric mean {math.exp(sum(map(math.log, rs)) / len(rs)):.3f}, min {min(rs):.3f}, max {max(rs):.3f}")
PY
  echo "== training, head"; cat "$OUT/train_head.md"
  echo "== training, base"; cat "$OUT/train_base.md" 2>/dev/null
  echo "== precision (epoch 1 acc, epoch 2 samples/s)"
  python3 - "$OUT" <<'PY'
import glob, json, os, sys
o = sys.argv[1]
for f in sorted(glob.glob(os.path.join(o, "train_head", "prec_*.jsonl"))):
    ep = [json.loads(l) for l in open(f) if '"epoch"' in l and json.loads(l).get("event") == "epoch"]
    if ep:
        print(os.path.basename(f), "acc1", ep[0].get("test_acc"), "sps2", ep[-1].get("samples_per_s"))
try:
    print("torch.compile bf16:", json.dumps(json.load(open(os.path.join(o, "torch_bf16.json"))).get("mnist_compile_bf16"))[:300])
except Exception as e:
    print("torch bf16:", e)
PY
  echo "== coordinator overhead"; tail -6 "$OUT/coord_overhead.txt"
fi

if [ "$mode" = yolo ]; then
  ctest --test-dir "$H" -L gpu --output-on-failure --timeout 300 >"$OUT/ctest_gpu_yolo.log" 2>&1
  summary+=("ctest -L gpu (all): $(grep -E 'tests passed' "$OUT/ctest_gpu_yolo.log")")
  grep -E "\*\*\*Failed|FAIL" "$OUT/ctest_gpu_yolo.log" | head -20
  # PyTorch first, in this call: yolov5_bench takes its ratios from this JSON only (--torch).
  PYTHONUNBUFFERED=1 timeout 300 python3 "$TB" "$OUT/torch_yolo.json" yolov5n yolov5n_compiled >"$OUT/torch_yolo.log" 2>&1
  torch_arg=(); [ -s "$OUT/torch_yolo.json" ] && torch_arg=(--torch "$OUT/torch_yolo.json")
  for t in head base; do
    d=$H; [ $t = base ] && d=$B
    [ $t = base ] && [ $have_base = 0 ] && continue
    w=$H/yolov5n.h5   # written by the yolov5_convert test (a fixture of the YOLOv5 GPU tests)
    [ -n "$w" ] && timeout 200 "$d/bench/yolov5_bench" --weights "$w" --image "$ODL_TEST_DATA/yolov5/images/bus.jpg" \
        "${torch_arg[@]}" >"$OUT/yolov5_$t.txt" 2>&1
  done
  TORCH_BASELINES=$TB timeout 300 "$src/bench/eval_bench.sh" "$H" "$H/yolov5n.h5" "$ODL_TEST_DATA" "$OUT/eval" >"$OUT/eval_bench.txt" 2>&1
  timeout 60 sh "$src/bench/health_gpu_check.sh" "$H" 5 >"$OUT/health.txt" 2>&1
  [ -d "$ODL_FMNIST_DIR" ] && NP=1 STEPS=4000 REPEAT=4 timeout 150 "$src/bench/coord_overhead.sh" "$H" "$ODL_FMNIST_DIR" "$OUT/coord" >"$OUT/coord_overhead.txt" 2>&1
  echo "== yolov5_bench head"; grep -v "^  layer" "$OUT/yolov5_head.txt" | tail -12
  echo "== yolov5_bench base"; grep -v "^  layer" "$OUT/yolov5_base.txt" 2>/dev/null | tail -12
  echo "== torch (pipeline from eval_bench; yolov5n and compiled, which yolov5_bench compared with)"
  for j in "$OUT/eval/torch_baselines.json" "$OUT/torch_yolo.json"; do
    python3 -c "import json,sys; d=json.load(open('$j')); [print(k, json.dumps(v)[:500]) for k,v in d.items() if not k.endswith('_wall_s')]" 2>&1
  done
  [ -f "$OUT/eval_bench.txt" ] && { echo "== eval"; tail -15 "$OUT/eval_bench.txt"; }
  [ -f "$OUT/health.txt" ] && { echo "== health"; tail -24 "$OUT/health.txt"; }
  [ -f "$OUT/coord_overhead.txt" ] && { echo "== coordinator overhead"; tail -6 "$OUT/coord_overhead.txt"; }
fi
echo "== summary"
printf '%s\n' "${summary[@]}"
