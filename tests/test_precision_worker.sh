#!/usr/bin/env bash
# odl_worker --precision on the CPU (the TF32 / BF16 rounding emulated by kernels/cpu/gemm_lowp.c), on real
# Fashion-MNIST ($ODL_FMNIST_DIR, default /usr/share/datasets/fashion-mnist; exit 77 when absent).
# Usage: test_precision_worker.sh WORKER
#  - the default is fp32, bit for bit: the loss lines of a run without the flag equal those of --precision fp32;
#  - tf32 and bf16 change the numbers (their losses differ from fp32's) but train as well: after one epoch of
#    8,000 samples the test accuracy is within 0.01 of fp32's (one-run spread on this short run: the
#    0.005 target of issue 16 is for a full epoch, measured on the H200 by bench/tc_run.sh);
#  - --precision fp16 and precision: fp8 in a config file are refused with one error line naming the key.
set -u
W=$1
FM=${ODL_FMNIST_DIR:-/usr/share/datasets/fashion-mnist}
[ -f "$FM/train-images-idx3-ubyte.gz" ] || [ -f "$FM/train-images-idx3-ubyte" ] || { echo "skipped: no Fashion-MNIST in $FM"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
field() { sed -n "s/.*\"event\":\"epoch\".*\"$2\":\([-0-9.eE+naif]*\).*/\1/p" "$1" | tail -1; }
run() { # name, extra flags...
  local n=$1; shift
  "$W" --task=train --model=mnist --device cpu --data_dir="$FM" --epochs 1 --max-train-samples 8000 \
      --test-batch-size 500 --progress off --metrics-out "$T/$n.jsonl" "$@" 2>"$T/$n.log" || fail "$n: training failed: $(tail -3 "$T/$n.log")"
}
run default --max-steps 30
run fp32_30 --max-steps 30 --precision fp32
done_field() { sed -n "s/.*\"event\":\"done\".*\"$2\":\([-0-9.eE+naif]*\).*/\1/p" "$1" | tail -1; }
for k in train_loss test_loss test_acc; do
  v=$(done_field "$T/default.jsonl" $k)
  [ -n "$v" ] && [ "$v" = "$(done_field "$T/fp32_30.jsonl" $k)" ] || fail "default and --precision fp32 differ in $k"
done
run fp32 --precision fp32
run tf32 --precision tf32 --log-level debug # the effective config is logged at debug
run bf16 --precision=bf16
a32=$(field "$T/fp32.jsonl" test_acc)
for p in tf32 bf16; do
  [ "$(field "$T/$p.jsonl" train_loss)" != "$(field "$T/fp32.jsonl" train_loss)" ] || fail "$p: train loss equal to fp32's: not rounded?"
  a=$(field "$T/$p.jsonl" test_acc)
  echo "$p: test_acc $a (fp32 $a32)"
  awk -v a="$a" -v b="$a32" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.01) }' || fail "$p: test accuracy $a vs fp32 $a32"
done
grep -q "precision.*tf32\|tf32.*precision" "$T/tf32.log" || fail "the effective config does not show precision: tf32"
"$W" --task=train --device cpu --data_dir="$FM" --precision fp16 >"$T/out" 2>"$T/err" && fail "--precision fp16 accepted"
[ "$(grep -c 'error:' "$T/err")" -eq 1 ] && grep -q "precision" "$T/err" || fail "--precision fp16: $(cat "$T/err")"
printf 'precision: fp8\n' >"$T/c.yaml"
"$W" --task=train --device cpu --data_dir="$FM" --config "$T/c.yaml" >"$T/out" 2>"$T/err" && fail "precision: fp8 accepted"
grep -q "precision" "$T/err" || fail "precision: fp8: $(cat "$T/err")"
echo "ok"
