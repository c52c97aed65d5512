#!/usr/bin/env bash
# One command on a fresh Debian/Ubuntu machine: install the dependencies, build, and train the
# PyTorch examples/mnist CNN on Fashion-MNIST (Debian's dataset-fashion-mnist).
# GPU present: 1 epoch on the full training set. CPU only: a shorter run (1 epoch of 10,000 samples).
# Extra arguments go to odl_worker (e.g. --epochs 14) and replace the defaults below of the same flags.
set -euo pipefail
cd "$(dirname "$0")/.."
./launch/install_deps.sh
BUILD=${BUILD:-build}
gpu=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then gpu=1; fi
cuda_opts=()
if [ $gpu = 0 ]; then
  # No GPU here: build the CPU runtime only (the CUDA kernels would take long to compile for nothing).
  # A GPU machine builds the CUDA backend for the GPU it has; ODL_WITH_CUDA=ON forces it anyway.
  cuda_opts=(-DODL_WITH_CUDA="${ODL_WITH_CUDA:-OFF}")
  if [ "${ODL_WITH_CUDA:-OFF}" = OFF ]; then
    echo "quickstart: no GPU found: building the CPU runtime only (ODL_WITH_CUDA=ON to build the CUDA backend too)"
  else
    echo "quickstart: no GPU found: building the CUDA backend anyway (ODL_WITH_CUDA=$ODL_WITH_CUDA); training runs on the CPU"
  fi
fi
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release "${cuda_opts[@]}"
cmake --build "$BUILD" -j"$(nproc)"
DATA=${DATA:-/usr/share/datasets/fashion-mnist}
# The quick start's defaults, each unless the arguments give it (odl_worker rejects a flag given twice).
given() { local a; for a in "${USER_ARGS[@]}"; do case $a in "$1" | "$1"=*) return 0 ;; esac; done; return 1; }
USER_ARGS=("$@")
defaults=()
given --model || defaults+=(--model=mnist)
given --data_dir || given --data-dir || defaults+=(--data_dir="$DATA")
given --epochs || defaults+=(--epochs 1)
given --metrics-out || defaults+=(--metrics-out "$BUILD"/metrics.jsonl)
[ $gpu = 1 ] || given --max-train-samples || defaults+=(--max-train-samples 10000)
set -x
"$BUILD"/odl_worker --task=train "${defaults[@]}" "$@"
