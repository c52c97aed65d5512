#!/usr/bin/env bash
# One call on the H200 for the Hopper GEMM (issue 20): build the GEMM targets for sm_90 (+ the sm_90a
# objects), the CUDA GEMM tests (gemm_lowp, gemm_typed, float32 gemm), SASS check for HGMMA, the kernel
# lab rows beside cuBLAS (odl_bench_kernels --only tc) and the tuner; short table last.
# Usage: source .devdeps/env.sh && bench/sm90_run.sh [sanitize]   (logs under $OUT; build in $ODL_BUILD)
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/tmp/odl_out}
B=${ODL_BUILD:-/tmp/bsm90}
mkdir -p "$OUT"
sum=()
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
t0=$(date +%s)
cmake -S "$src" -B "$B" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >"$OUT/build.log" 2>&1 &&
  cmake --build "$B" -j"$(nproc)" --target odl test_gemm_tc test_ops odl_bench_kernels >>"$OUT/build.log" 2>&1 ||
  { echo "BUILD FAILED"; grep -E "error|warning" "$OUT/build.log" | head -30; tail -5 "$OUT/build.log"; exit 1; }
sum+=("build: $(( $(date +%s) - t0 )) s")
n=$(cuobjdump --dump-sass "$B"/libodl.so 2>/dev/null | grep -c HGMMA)
sum+=("HGMMA instructions in libodl.so: $n")
timeout 240 "$B/tests/test_gemm_tc" --backend cuda >"$OUT/test_gemm_tc.log" 2>&1
sum+=("test_gemm_tc cuda: rc $? $(tail -1 "$OUT/test_gemm_tc.log")")
grep -E "rounds float32|FAIL" "$OUT/test_gemm_tc.log" | head -40
timeout 120 "$B/tests/test_ops" --backend cuda --op gemm >"$OUT/test_ops_gemm.log" 2>&1
sum+=("test_ops cuda gemm: rc $? $(tail -1 "$OUT/test_ops_gemm.log")")
# every wgmma tile forced (the plan alone would not take the cluster tiles): the small cases, all layouts
for cfg in 128x256 128x128 64x128; do
  ODL_GEMM_CONFIG=$cfg timeout 120 "$B/tests/test_gemm_tc" --backend cuda --quick >"$OUT/test_gemm_tc_$cfg.log" 2>&1
  sum+=("test_gemm_tc cuda --quick ODL_GEMM_CONFIG=$cfg: rc $? $(tail -1 "$OUT/test_gemm_tc_$cfg.log")")
  grep -m3 FAIL "$OUT/test_gemm_tc_$cfg.log"
done
if [ "${1:-}" = sanitize ]; then
  for tool in memcheck racecheck; do
    timeout 300 compute-sanitizer --tool $tool --error-exitcode 9 "$B/tests/test_gemm_tc" --backend cuda --quick \
      >"$OUT/sanitize_$tool.log" 2>&1
    sum+=("compute-sanitizer $tool test_gemm_tc --quick: rc $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitize_$tool.log" | tail -1)")
  done
fi
timeout 300 "$B/bench/odl_bench_kernels" --only tc --csv "$OUT/bench_tc.csv" >"$OUT/bench_tc.txt" 2>&1
sum+=("bench rc $?")
timeout 120 "$B/bench/odl_bench_kernels" --tune --tune-out "$OUT/gemm_sm90.tsv" >"$OUT/tune.txt" 2>&1
sum+=("tune rc $?")
if [ "${1:-}" = profile ] || [ "${2:-}" = profile ]; then
  sections="--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats"
  for cfg in 128x256 128x128; do
    ODL_GEMM_CONFIG=$cfg timeout 120 ncu --clock-control none -k regex:gemm_sm90_kernel -s 1 -c 1 $sections \
      "$B/bench/odl_bench_kernels" --only tcq >"$OUT/ncu_$cfg.txt" 2>&1
    sum+=("ncu $cfg rc $?")
  done
  timeout 120 ncu --clock-control none -k regex:"sm90_xmma|cutlass|gemm" -s 4 -c 1 $sections \
    "$B/bench/odl_bench_kernels" --only tcq >"$OUT/ncu_cublas.txt" 2>&1
  (cd "$OUT" && tar czf ncu.tgz ncu_*.txt && rm -f ncu_*.txt)
fi
(cd "$OUT" && tar czf logs.tgz test_*.log sanitize_*.log build.log 2>/dev/null && rm -f test_*.log sanitize_*.log build.log)
grep -E "^(tf32|bf16|fp16) |^cfg" "$OUT/bench_tc.txt"
tail -25 "$OUT/tune.txt"
printf '%s\n' "${sum[@]}"
