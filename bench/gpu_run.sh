#!/usr/bin/env bash
# One call on the GPU machine (nvidia-h200): build for sm_90, run the GPU tests and the benchmarks, and
# print a short table last. Data travel in ignored folders of the checkout:
#   .devdata/fmnist      Fashion-MNIST (the four .gz files)
#   .devdata/data        a copy of ../shared/data (ODL_TEST_DATA), possibly partial
#   .devdata/bench       a copy of ../shared/bench (torch_baselines.py)
# Usage: source .devdeps/env.sh && bench/gpu_run.sh train|yolo|tests|all   (logs under $OUT)
#   tests: every GPU test (ctest -L gpu), then the YOLOv5 benchmark
set -uo pipefail
mode=${1:-all}
src=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/tmp/odl_out}
mkdir -p "$OUT"
B=${ODL_BUILD:-$src/build-h200}
export ODL_TEST_DATA=$src/.devdata/data ODL_FMNIST_DIR=$src/.devdata/fmnist NCCL_NVLS_ENABLE=0
summary=()
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
echo "== build"
t0=$(date +%s)
cmake -S "$src" -B "$B" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >"$OUT/cmake.log" 2>&1 &&
  cmake --build "$B" -j"$(nproc)" >"$OUT/build.log" 2>&1 ||
  { echo "BUILD FAILED"; grep -E "error|Error" "$OUT/build.log" | head -40; tail -20 "$OUT/cmake.log"; exit 1; }
grep -E "CUDA:|NCCL:|MPI:|HDF5:" "$OUT/cmake.log"
summary+=("build: $(( $(date +%s) - t0 )) s")

if [ "$mode" = train ] || [ "$mode" = all ]; then
  echo "== ctest -L gpu (training and ops)"
  ctest --test-dir "$B" -L gpu -E yolov5 --output-on-failure --timeout 300 >"$OUT/ctest_gpu.log" 2>&1
  grep -E "tests passed|tests failed|Failed|\*\*\*" "$OUT/ctest_gpu.log" | tail -12
  summary+=("ctest gpu: $(grep -E 'tests passed' "$OUT/ctest_gpu.log")")
  grep -E "worst loss|final fc1.weight" "$OUT/ctest_gpu.log" | head -3
  grep -E "FAIL" "$OUT/ctest_gpu.log" | head -30
  echo "== kernel benchmark"
  if [ -x "$B/bench/odl_bench_kernels" ]; then
    timeout 240 "$B/bench/odl_bench_kernels" >"$OUT/bench_kernels.txt" 2>&1
    tail -45 "$OUT/bench_kernels.txt"
  fi
  echo "== training benchmark"
  TORCH_BASELINES=$src/.devdata/bench/torch_baselines.py timeout 300 "$src/bench/train_bench.sh" "$B" "$ODL_FMNIST_DIR" "$OUT" | tee "$OUT/train_table.md"
fi
if [ "$mode" = tests ]; then
  echo "== ctest -L gpu (all)"
  ctest --test-dir "$B" -L gpu --output-on-failure --timeout 300 >"$OUT/ctest_gpu.log" 2>&1
  grep -E "tests passed|tests failed|Failed|\*\*\*" "$OUT/ctest_gpu.log" | tail -14
  summary+=("ctest gpu: $(grep -E 'tests passed' "$OUT/ctest_gpu.log")")
fi
if [ "$mode" = yolo ] || [ "$mode" = all ] || [ "$mode" = tests ]; then
  echo "== ctest -L gpu (YOLOv5 and the float16 ops)"
  if [ "$mode" = tests ]; then cp "$OUT/ctest_gpu.log" "$OUT/ctest_yolo.log"; else
    ctest --test-dir "$B" -L gpu -R "yolov5|ops_f16" --output-on-failure --timeout 300 >"$OUT/ctest_yolo.log" 2>&1
  fi
  grep -E "tests passed|tests failed|Failed|\*\*\*" "$OUT/ctest_yolo.log" | tail -14
  summary+=("ctest yolov5: $(grep -E 'tests passed' "$OUT/ctest_yolo.log")")
  grep -E "FAIL|float16|Detect|max box delta|checks" "$OUT/ctest_yolo.log" | head -40
  w=$(ls "$B"/*.h5 2>/dev/null | grep -i yolov5n | head -1)
  if [ -n "$w" ] && [ -x "$B/bench/yolov5_bench" ]; then
    # PyTorch in this call, when torch_baselines.py travelled along; otherwise no ratios are printed.
    TB=$src/.devdata/bench/torch_baselines.py torch_arg=()
    if [ -f "$TB" ]; then
      PYTHONUNBUFFERED=1 timeout 300 python3 "$TB" "$OUT/torch_yolo.json" yolov5n yolov5n_compiled >"$OUT/torch_yolo.log" 2>&1
      [ -s "$OUT/torch_yolo.json" ] && torch_arg=(--torch "$OUT/torch_yolo.json")
    fi
    timeout 240 "$B/bench/yolov5_bench" --weights "$w" --image "$ODL_TEST_DATA/yolov5/images/bus.jpg" \
      "${torch_arg[@]}" --layers >"$OUT/bench_yolov5.txt" 2>&1
    grep -v "^  layer" "$OUT/bench_yolov5.txt" | tail -14
  fi
fi
echo "== summary"
printf '%s\n' "${summary[@]}"
