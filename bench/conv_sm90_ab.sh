#!/usr/bin/env bash
# The wgmma TF32 convolutions (kernels/cuda/conv2d_sm90.cu, issue 21) beside the mma.sync ones they replace
# on a 9.0 device, in one call on the GPU machine: their GPU tests, the kernel lab's convolution rows with
# ODL_CONV_SM90=0 and 1 (cuDNN in both runs), and the examples CNN trained 2 epochs in tf32 at batch 64
# and 512 with the two paths interleaved (twice each), beside torch.compile (`mnist_compile`, PyTorch's
# defaults: cuDNN convolutions in TF32) in the same call. Table last.
# Usage: source .devdeps/env.sh && source bench/device_unpack.sh SRC && \
#        TORCH_BASELINES=path/torch_baselines.py bench/conv_sm90_ab.sh [OUT_DIR]
# (binaries from $ODL_BUILD, default build/; Fashion-MNIST from $ODL_FMNIST_DIR)
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
B=${ODL_BUILD:-$src/build}
OUT=${1:-${OUT:-/tmp/odl_out}}
FM=${ODL_FMNIST_DIR:?ODL_FMNIST_DIR: the Fashion-MNIST folder}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"

echo "== GPU tests"
(cd "$B" && timeout 400 ctest -FA '.*' -R '^(test_conv_tc_gpu|test_conv_tc_gpu_sm90|test_train_step_gpu|train_graph_precision)$' \
  --output-on-failure >"$OUT/ctest.log" 2>&1)
grep -E "tests passed|Failed|FAIL" "$OUT/ctest.log" | head -20

echo "== kernel lab (convolution rows), mma.sync then wgmma"
if [ -x "$B/bench/odl_bench_kernels" ]; then
  ODL_CONV_SM90=0 timeout 200 "$B/bench/odl_bench_kernels" --only convtc >"$OUT/convtc_mma.txt" 2>&1
  ODL_CONV_SM90=1 timeout 200 "$B/bench/odl_bench_kernels" --only convtc >"$OUT/convtc_wgmma.txt" 2>&1
else # device_pack.sh leaves it out (40 MB): carry it xz-compressed and unpack it into $B/bench first
  echo "no $B/bench/odl_bench_kernels: kernel lab skipped"
fi

echo "== training, tf32, interleaved"
for round in 1 2; do
  for bs in 512 64; do
    for mode in 1 0; do
      f="$OUT/train_sm90_${mode}_b${bs}_r$round"
      ODL_CONV_SM90=$mode timeout 120 "$B/odl_worker" --task=train --model=mnist --data_dir="$FM" --device cuda --epochs 2 \
        --batch-size "$bs" --test-batch-size 1000 --progress off --precision tf32 --metrics-out "$f.jsonl" \
        >/dev/null 2>"$f.log" || { echo "train sm90=$mode b$bs failed"; tail -3 "$f.log"; }
    done
  done
done
if [ -n "${TORCH_BASELINES:-}" ]; then
  PYTHONUNBUFFERED=1 timeout 300 python3 "$TORCH_BASELINES" "$OUT/torch.json" mnist_compile >"$OUT/torch.log" 2>&1 ||
    tail -5 "$OUT/torch.log"
fi

python3 - "$OUT" <<'PY'
import glob, json, os, re, sys
out = sys.argv[1]
def epochs(p):
    r = []
    for l in open(p):
        try:
            e = json.loads(l)
        except ValueError:
            continue
        if e.get("event") == "epoch":
            r.append(e)
    return r
peer = {}
try:
    t = json.load(open(os.path.join(out, "torch.json")))
    peer = {int(k): v["samples_per_s"] for k, v in t.get("mnist_compile", {}).items()}
except Exception:
    pass
print("| batch | convolutions | epoch-1 test_acc | epoch-2 samples/s (runs) | / torch.compile |")
print("|---|---|---|---|---|")
for bs in (512, 64):
    for mode, name in ((1, "wgmma (conv2d_sm90.cu)"), (0, "mma.sync (conv2d_tc.cu)")):
        acc, sps = [], []
        for p in sorted(glob.glob(os.path.join(out, "train_sm90_%d_b%d_r*.jsonl" % (mode, bs)))):
            e = epochs(p)
            if len(e) >= 2:
                acc.append(e[0].get("test_acc"))
                sps.append(e[-1].get("samples_per_s"))
        best = max(sps) if sps else float("nan")
        ratio = "%.2fx" % (best / peer[bs]) if bs in peer and sps else "-"
        print("| %d | %s | %s | %s | %s |" % (bs, name, acc, ", ".join("%.0f" % s for s in sps), ratio))
for bs, v in sorted(peer.items()):
    print("torch.compile reduce-overhead (PyTorch defaults) batch %d: %.0f samples/s" % (bs, v))
PY
echo "== kernel lab tf32 rows: mma.sync run, then wgmma run"
grep -E "^(conv|yolo).* tf32 " "$OUT/convtc_mma.txt" 2>/dev/null | head -40
echo "--"
grep -E "^(conv|yolo).* tf32 " "$OUT/convtc_wgmma.txt" 2>/dev/null | head -40
(cd "$OUT" && tar czf train_logs.tgz train_sm90_* && rm -f train_sm90_*)
