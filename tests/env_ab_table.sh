#!/usr/bin/env bash
# bench/env_ab_table.py on real GPU logs (bench/results/2026-12-07/tenth, laid out as bench/env_ab.sh leaves
# them): the figures of those logs in its rows, and the ratio to the same call's PyTorch peer.
set -euo pipefail
src=${1:?source dir}
R=$src/bench/results/2026-12-07/tenth
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/y" "$T/t"
echo "NVIDIA H100 80GB HBM3, 580.159.04" | tee "$T/y/gpu.txt" > "$T/t/gpu.txt"
cp "$R/yolov5_bench_f16sm90_0_p1.txt" "$T/y/yolo_0_r1.txt"
cp "$R/yolov5_bench_f16sm90_1_p1.txt" "$T/y/yolo_1_r1.txt"
cp "$R/torch_yolo.json" "$T/y/torch.json"
cp "$R/torch_mnist.json" "$T/t/torch.json"
cp "$R/train_tf32_r1.jsonl" "$T/t/train_0_tf32_r1.jsonl"
cp "$R/train_tf32_r2.jsonl" "$T/t/train_0_tf32_r2.jsonl"
cp "$R/train_bf16_r1.jsonl" "$T/t/train_0_bf16_r1.jsonl"
y=$(python3 "$src/bench/env_ab_table.py" "$T/y" yolo ODL_CONV_F16_SM90 0 1)
t=$(python3 "$src/bench/env_ab_table.py" "$T/t" train ODL_POOL_RELU_FUSE 0)
echo "$y"; echo "$t"
fail() { echo "env_ab_table: FAIL: $1"; exit 1; }
grep -qx '| 0 | 8733 | 1.33x | 0.992 |' <<<"$y" || fail "yolo row of 0"
grep -qx '| 1 | 9667 | 1.47x | 0.972 |' <<<"$y" || fail "yolo row of 1"
grep -qx '| 0 | tf32 | 448561, 448184 | \[0.8554\] | 1.341x |' <<<"$t" || fail "train tf32 row"
grep -qx '| 0 | bf16 | 440788 | \[0.8488\] | 1.060x |' <<<"$t" || fail "train bf16 row"
echo "env_ab_table: ok"
