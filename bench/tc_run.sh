#!/usr/bin/env bash
# One call on the GPU machine for the tensor-core GEMM (issue 16): build for sm_90, the CUDA op tests of
# gemm_lowp, the float32 GEMM and the float16 convolution, the kernel-lab rows (odl_bench_kernels --only tc), and one training
# two training epochs of the examples CNN per precision at batch 64 and 512 (epoch-1 test accuracy,
# epoch-2 warm samples/s); short table last.
# Usage: source .devdeps/env.sh && bench/tc_run.sh FMNIST_DIR   (logs under $OUT; build in $ODL_BUILD)
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
FM=${1:?Fashion-MNIST dir}
OUT=${OUT:-/tmp/odl_out}
B=${ODL_BUILD:-/tmp/b16}
mkdir -p "$OUT"
sum=()
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader | tee "$OUT/gpu.txt"
t0=$(date +%s)
cmake -S "$src" -B "$B" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DODL_BUILD_TESTS=ON >"$OUT/cmake.log" 2>&1 &&
  cmake --build "$B" -j"$(nproc)" --target odl odl_worker test_gemm_tc test_ops test_ops_f16 odl_bench_kernels >"$OUT/build.log" 2>&1 ||
  { echo "BUILD FAILED"; grep -E "error" "$OUT/build.log" | head -30; exit 1; }
sum+=("build: $(( $(date +%s) - t0 )) s")
timeout 120 "$B/tests/test_gemm_tc" --backend cuda >"$OUT/test_gemm_tc.log" 2>&1
sum+=("test_gemm_tc cuda: rc $? $(tail -1 "$OUT/test_gemm_tc.log")")
grep -E "FAIL" "$OUT/test_gemm_tc.log" | head -20
timeout 120 "$B/tests/test_ops" --backend cuda --op gemm >"$OUT/test_ops_gemm.log" 2>&1
sum+=("test_ops cuda gemm: rc $? $(tail -1 "$OUT/test_ops_gemm.log")")
timeout 120 "$B/tests/test_ops_f16" --backend cuda >"$OUT/test_ops_f16.log" 2>&1
sum+=("test_ops_f16 cuda: rc $? $(tail -1 "$OUT/test_ops_f16.log")")
timeout 150 "$B/bench/odl_bench_kernels" --only tc --csv "$OUT/bench_tc.csv" >"$OUT/bench_tc.txt" 2>&1
sum+=("bench rc $?")
for bs in 64 512; do
  for p in fp32 tf32 bf16; do
    timeout 60 "$B/odl_worker" --task=train --model=mnist --data_dir="$FM" --device cuda --epochs 2 --batch-size $bs \
      --test-batch-size 1000 --progress off --precision $p --metrics-out "$OUT/train_${p}_b$bs.jsonl" \
      >/dev/null 2>"$OUT/train_${p}_b$bs.log" || { echo "train $p b$bs failed"; tail -3 "$OUT/train_${p}_b$bs.log"; }
  done
done
grep -E "^(tf32|bf16) " "$OUT/bench_tc.txt"
echo "| batch | precision | test_acc (1 epoch) | acc - fp32 | samples/s (epoch 2, warm) |"
for bs in 64 512; do
  a32=$(sed -n 's/.*"event":"epoch".*"test_acc":\([0-9.]*\).*/\1/p' "$OUT/train_fp32_b$bs.jsonl" | head -1)
  for p in fp32 tf32 bf16; do
    a=$(sed -n 's/.*"event":"epoch".*"test_acc":\([0-9.]*\).*/\1/p' "$OUT/train_${p}_b$bs.jsonl" | head -1)
    s=$(sed -n 's/.*"event":"epoch".*"samples_per_s":\([0-9.]*\).*/\1/p' "$OUT/train_${p}_b$bs.jsonl" | sed -n 2p)
    d=$(awk -v a="${a:-nan}" -v b="${a32:-nan}" 'BEGIN { printf "%+.4f", a - b }')
    echo "| $bs | $p | ${a:-nan} | $d | ${s:-nan} |"
  done
done
printf '%s\n' "${sum[@]}"
# at most 8 files come back: the training logs and build logs travel as one archive
(cd "$OUT" && tar czf logs.tgz train_*.jsonl train_*.log cmake.log build.log test_ops_*.log && rm -f train_*.jsonl train_*.log cmake.log build.log test_ops_*.log)
