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
# ODL_AB_PRECISIONS with fp32: its rows beside mnist_compile_ieee (the peer's figure from the H200 run of
# bench/results/2026-12-02/conv_tc/run_output.txt, a tf32 log standing in for fp32's: the table's choice of
# files and peers is what is checked)
mkdir -p "$T/f"
cp "$T/t/gpu.txt" "$T/f/"
python3 - "$T/t/torch.json" "$T/f/torch.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["mnist_compile_ieee"] = {"512": {"samples_per_s": 288288}}
json.dump(d, open(sys.argv[2], "w"))
PY
cp "$R/train_tf32_r1.jsonl" "$T/f/train_0_fp32_r1.jsonl"
cp "$R/train_bf16_r1.jsonl" "$T/f/train_0_bf16_r1.jsonl"
f=$(ODL_AB_PRECISIONS="bf16 fp32" python3 "$src/bench/env_ab_table.py" "$T/f" train ODL_X 0)
echo "$f"
grep -qx '| 0 | fp32 | 448561 | \[0.8554\] | 1.556x |' <<<"$f" || fail "train fp32 row (mnist_compile_ieee's peer)"
grep -qx '| 0 | bf16 | 440788 | \[0.8488\] | 1.060x |' <<<"$f" || fail "train bf16 row with fp32 asked"
grep -q '| 0 | tf32 |' <<<"$f" && fail "a tf32 row where ODL_AB_PRECISIONS did not ask for it"
echo "env_ab_table: ok"
