#!/usr/bin/env bash
# One call on the GPU machine for the detection pipeline on the GPU (issue 23): build for sm_90; the tests
# of the device image pipeline on the GPU and on the CPU (nvJPEG real, absent and the stand-in; the
# letterbox_u8 and yolo_candidates entries; the official boxes through the pipeline; infer and eval on the
# device path); the same GPU tests with the GPU-hybrid backend forced; compute-sanitizer memcheck and
# initcheck on the GPU letterbox / decode tests; then bench/eval_bench.sh with PyTorch in the same call; a
# table last.
# Data travel in ignored folders (see bench/gpu_run.sh): .devdata/data (a copy of ../shared/data),
# .devdata/bench (a copy of ../shared/bench: torch_baselines.py and the YOLOv5 code).
# Usage: source .devdeps/env.sh && bench/nvjpeg_run.sh [tests|bench|all]   (every log in $OUT/logs.tgz)
#   tests: build, the tests and memcheck; bench: build (kept in build-nvjpeg/ of the checkout between the
#   calls of a warm machine), eval_bench.sh; all (default): both, which may pass a 10-minute call limit.
set -uo pipefail
mode=${1:-all}
src=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/tmp/odl_out}
FINAL_OUT=$OUT OUT=$OUT/w # the device tool brings back at most 8 files: one archive
mkdir -p "$OUT"
trap 'tar czf "$FINAL_OUT/logs.tgz" -C "$OUT" . && rm -rf "$OUT"' EXIT
export ODL_TEST_DATA=$src/.devdata/data NCCL_NVLS_ENABLE=0
B=${ODL_BUILD:-$src/build-nvjpeg}
sum=()
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader | tee "$OUT/gpu.txt"
ls /usr/local/cuda/targets/x86_64-linux/lib/libnvjpeg.so* 2>&1 | tee "$OUT/nvjpeg_lib.txt"
t0=$(date +%s)
cmake -S "$src" -B "$B" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >"$OUT/cmake.log" 2>&1 &&
  cmake --build "$B" -j"$(nproc)" >"$OUT/build.log" 2>&1 ||
  { echo "BUILD FAILED"; grep -E "error" "$OUT/build.log" | head -30; tail -20 "$OUT/cmake.log"; exit 1; }
grep -E "CUDA:|nvJPEG" "$OUT/cmake.log"
sum+=("build: $(( $(date +%s) - t0 )) s")
if [ "$mode" != bench ]; then
R="gpu_prep|detect_post|_prep|infer_device|eval_coco8|yolov5_image|yolov5_detect_rect640"
ctest --test-dir "$B" -R "$R" -j4 --output-on-failure --timeout 600 >"$OUT/ctest.log" 2>&1
sum+=("ctest -R '$R' (GPU and CPU): $(grep -E 'tests passed' "$OUT/ctest.log")")
grep -E "\*\*\*Failed|\*\*\*Skipped|FAIL" "$OUT/ctest.log" | head -20
ODL_NVJPEG_BACKEND=gpu-hybrid ctest --test-dir "$B" -R "gpu_prep_gpu|_prep_gpu|infer_device_gpu" --output-on-failure \
  --timeout 600 >"$OUT/ctest_hybrid.log" 2>&1
sum+=("the same GPU tests, ODL_NVJPEG_BACKEND=gpu-hybrid: $(grep -E 'tests passed' "$OUT/ctest_hybrid.log")")
grep -E "\*\*\*Failed|FAIL" "$OUT/ctest_hybrid.log" | head -10
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
# memcheck sees accesses outside a cudaMalloc'd block, and the device pool is one block: initcheck adds
# reads of device bytes never written (a letterbox reading past a decoded image inside the pool)
for tool in memcheck initcheck; do
  for t in "gpu_prep_nvjpeg_absent cuda" "detect_post cuda"; do
    n=${t%% *}
    (cd "$B/tests" && ODL_BINARY_DIR=$B timeout 600 "$CS" --tool $tool --error-exitcode 9 ./$t) >"$OUT/${tool}_$n.log" 2>&1
    sum+=("compute-sanitizer $tool $t: rc $? ($(grep -cE '^========= (Invalid|Uninitialized|Program hit|Error)' "$OUT/${tool}_$n.log") reports), $(tail -1 "$OUT/${tool}_$n.log")")
  done
done
grep -E "nvJPEG vs libjpeg-turbo over|decoder:|odl_nvjpeg_open" "$OUT/ctest.log" | sed 's/^[0-9]*: //' | head -6
grep -E "largest box difference|letterbox on cuda: |input through" "$OUT/ctest.log" | sed 's/^[0-9]*: //' | head -10
grep -E "decoder auto:|map50" "$OUT/ctest.log" | sed 's/^[0-9]*: //' | head -6
fi
if [ "$mode" != tests ]; then
[ -f "$B/yolov5n.h5" ] || ctest --test-dir "$B" -R "^yolov5_convert$" >"$OUT/convert.log" 2>&1 # the weights
echo "== eval_bench (PyTorch in this call)"
TORCH_BASELINES=$src/.devdata/bench/torch_baselines.py ODL_YOLOV5_CODE=$src/.devdata/bench/yolov5-v7.0 \
  timeout 900 "$src/bench/eval_bench.sh" "$B" "$B/yolov5n.h5" "$ODL_TEST_DATA" "$OUT/eval" | tee "$OUT/eval_bench.txt"
fi
echo "== summary"
printf '%s\n' "${sum[@]}"
