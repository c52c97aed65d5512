#!/usr/bin/env bash
# On the GPU machine, from anywhere in the checkout:
#   bash bench/run_gpu.sh [BUILD_DIR]            (default build-gpu)
# Sources .devdeps/env.sh (the carried libraries; see ../shared/device/fetch-deps.sh), configures for
# Hopper (-DCMAKE_CUDA_ARCHITECTURES=90), builds with -j16, runs `ctest -L gpu --output-on-failure` and
# odl_bench_kernels, and writes every log under $OUT (when set) or BUILD_DIR/bench-logs:
#   configure.log build.log ctest_gpu.log kernels_bench.log kernels_bench.csv nvidia-smi.txt
#   resource_usage.txt (registers / spills of libodl's kernels, from cuobjdump)
# It prints a short table last. ODL_BENCH_ARGS passes options to odl_bench_kernels (e.g. --quick).
# Exit status: 0 when the build, the GPU tests and every benchmark check passed.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root" || exit 2
if [ -f .devdeps/env.sh ]; then
    # shellcheck disable=SC1091
    source .devdeps/env.sh
fi
build=${1:-build-gpu}
logs=${OUT:-$build/bench-logs}
mkdir -p "$logs"

nvidia-smi > "$logs/nvidia-smi.txt" 2>&1 || true

if ! cmake -S . -B "$build" -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release > "$logs/configure.log" 2>&1; then
    echo "configure failed:"; tail -n 40 "$logs/configure.log"; exit 2
fi
if ! cmake --build "$build" -j16 > "$logs/build.log" 2>&1; then
    echo "build failed:"; grep -E "error|undefined reference" "$logs/build.log" | head -n 40; tail -n 10 "$logs/build.log"; exit 2
fi

if command -v cuobjdump > /dev/null 2>&1; then
    cuobjdump --dump-resource-usage "$build/libodl.so" > "$logs/resource_usage.txt" 2>&1 || true
fi

(cd "$build" && ctest -L gpu --output-on-failure --timeout 900) > "$logs/ctest_gpu.log" 2>&1
ctest_rc=$?

bench="$build/bench/odl_bench_kernels"
bench_rc=2
if [ -x "$bench" ]; then
    # shellcheck disable=SC2086
    "$bench" --csv "$logs/kernels_bench.csv" ${ODL_BENCH_ARGS:-} > "$logs/kernels_bench.log" 2>&1
    bench_rc=$?
else
    echo "no $bench (is cuBLAS there?)" > "$logs/kernels_bench.log"
fi

echo "== ctest -L gpu: exit $ctest_rc (log: $logs/ctest_gpu.log) =="
grep -E "tests passed|tests failed|\*\*\*Failed|Failed  |\(Failed\)|Timeout" "$logs/ctest_gpu.log" | tail -n 15
echo "== odl_bench_kernels: exit $bench_rc (log: $logs/kernels_bench.log) =="
grep -E "^(device|measured|SOL ceilings|gemm sweep|conv sweep):" "$logs/kernels_bench.log"
grep -E "^BAD" "$logs/kernels_bench.log" | head -n 15
sed -n '/== summary/,$p' "$logs/kernels_bench.log"
if [ "$bench_rc" -gt 1 ]; then tail -n 20 "$logs/kernels_bench.log"; fi

[ "$ctest_rc" -eq 0 ] && [ "$bench_rc" -eq 0 ]
