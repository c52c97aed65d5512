#!/usr/bin/env bash
# Training throughput of the examples/mnist CNN, epochs of 60,000 samples at batch 64 and 512 (the first
# cold, the second warm), on
# the GPU machine, beside PyTorch's eager and torch.compile figures measured in the same run by
# ../shared/bench/torch_baselines.py (pass its path as TORCH_BASELINES, or it is skipped).
# Usage: bench/train_bench.sh BUILD_DIR DATA_DIR [OUT_DIR]
set -uo pipefail
B=${1:?build dir}; D=${2:?data dir}; O=${3:-${OUT:-/tmp}}
mkdir -p "$O"
rows=()
for bs in 64 512; do
  "$B"/odl_worker --task=train --model=mnist --data_dir="$D" --device cuda --epochs 2 --batch-size $bs \
      --test-batch-size 1000 --progress off --metrics-out "$O/train_b$bs.jsonl" 2> "$O/train_b$bs.log" \
      || { echo "training at batch $bs failed:"; tail -5 "$O/train_b$bs.log"; }
  # epoch 1 (cold: start-up included) and epoch 2 (warm, as PyTorch's figures after warm-up steps)
  sps=$(sed -n 's/.*"event":"epoch".*"samples_per_s":\([0-9.]*\).*/\1/p' "$O/train_b$bs.jsonl" | head -1)
  sps2=$(sed -n 's/.*"event":"epoch".*"samples_per_s":\([0-9.]*\).*/\1/p' "$O/train_b$bs.jsonl" | sed -n 2p)
  acc=$(sed -n 's/.*"event":"epoch".*"test_acc":\([0-9.]*\).*/\1/p' "$O/train_b$bs.jsonl" | head -1)
  rows+=("$bs ${sps:-nan} ${sps2:-nan} ${acc:-nan}")
done
if [ -n "${TORCH_BASELINES:-}" ] && [ -f "$TORCH_BASELINES" ]; then
  PYTHONUNBUFFERED=1 python3 "$TORCH_BASELINES" "$O/torch_baselines.json" mnist_eager mnist_compile > "$O/torch_baselines.log" 2>&1
fi
python3 - "$O" "${rows[@]}" <<'PY'
import json, os, sys
out = sys.argv[1]
rows = [r.split() for r in sys.argv[2:]]
t = {}
p = os.path.join(out, "torch_baselines.json")
if os.path.exists(p):
    t = json.load(open(p))
print("| batch | odl epoch 1 samples/s | odl epoch 2 (warm) | test_acc (1 epoch) | torch eager | ratio (warm) | torch.compile | ratio (warm) |")
print("|---|---|---|---|---|---|---|---|")
for bs, sps, sps2, acc in rows:
    e = t.get("mnist_eager", {}).get(bs, {}).get("samples_per_s")
    c = t.get("mnist_compile", {}).get(bs, {}).get("samples_per_s")
    f, f2 = float(sps), float(sps2)
    print(f"| {bs} | {f:,.0f} | {f2:,.0f} | {acc} | {e or '-'} | {f2/e if e else float('nan'):.2f}x | {c or '-'} | {f2/c if c else float('nan'):.2f}x |")
PY
