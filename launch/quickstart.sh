#!/usr/bin/env bash
# One command on a fresh Debian/Ubuntu machine: install the dependencies, build, and train the
# PyTorch examples/mnist CNN on Fashion-MNIST (Debian's dataset-fashion-mnist).
# GPU present: 1 epoch on the full training set. CPU only: a shorter run (1 epoch of 10,000 samples).
# Extra arguments go to odl_worker (e.g. --epochs 14).
set -euo pipefail
cd "$(dirname "$0")/.."
./launch/install_deps.sh
BUILD=${BUILD:-build}
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release
cmake --build "$BUILD" -j"$(nproc)"
DATA=${DATA:-/usr/share/datasets/fashion-mnist}
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  set -x
  "$BUILD"/odl_worker --task=train --model=mnist --data_dir="$DATA" --epochs 1 --metrics-out "$BUILD"/metrics.jsonl "$@"
else
  set -x
  "$BUILD"/odl_worker --task=train --model=mnist --data_dir="$DATA" --epochs 1 --max-train-samples 10000 \
    --metrics-out "$BUILD"/metrics.jsonl "$@"
fi
