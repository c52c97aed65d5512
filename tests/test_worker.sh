#!/usr/bin/env bash
# End-to-end checks of odl_worker --task=train on real data (CPU). Usage: test_worker.sh WORKER CASE
# Fashion-MNIST comes from $ODL_FMNIST_DIR (default /usr/share/datasets/fashion-mnist); exit 77 (skip)
# when it is absent.
set -u
W=$1
CASE=$2
FM=${ODL_FMNIST_DIR:-/usr/share/datasets/fashion-mnist}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
need_fm() { [ -f "$FM/train-images-idx3-ubyte.gz" ] || [ -f "$FM/train-images-idx3-ubyte" ] || { echo "skipped: no Fashion-MNIST in $FM"; exit 77; }; }
json_field() { sed -n "s/.*\"$2\":\([-0-9.eE+naif]*\).*/\1/p" "$1" | tail -1; }

# Expect a failure: non-zero exit, one "error:" line naming $2.
expect_error() {
  local what=$1 needle=$2; shift 2
  "$W" "$@" >"$T/out" 2>"$T/err"
  local rc=$?
  [ $rc -ne 0 ] || fail "$what: exit status 0"
  grep -q "error:" "$T/err" || fail "$what: no error line: $(cat "$T/err")"
  [ "$(grep -c 'error:' "$T/err")" -eq 1 ] || fail "$what: more than one error line: $(cat "$T/err")"
  grep -qF -- "$needle" "$T/err" || fail "$what: error does not name '$needle': $(cat "$T/err")"
  echo "ok: $what -> $(grep 'error:' "$T/err")"
}

copy_fm() { mkdir -p "$T/d"; cp "$FM"/*-ubyte* "$T/d/"; }

case $CASE in
cnn_accuracy)
  need_fm
  # 8,000 training samples, one epoch, the CNN: PyTorch reaches about 0.80 here; chance is 0.10.
  "$W" --task=train --model=mnist --device cpu --data_dir="$FM" --epochs 1 --max-train-samples 8000 \
      --test-batch-size 500 --metrics-out "$T/m.jsonl" --progress off || fail "training failed"
  acc=$(json_field "$T/m.jsonl" test_acc)
  echo "test_acc=$acc"
  awk -v a="$acc" 'BEGIN { exit !(a >= 0.70) }' || fail "test accuracy $acc below 0.70"
  grep -q '"event":"done"' "$T/m.jsonl" || fail "no done line"
  grep -q '"event":"epoch","epoch":1,"step":125,' "$T/m.jsonl" || fail "epoch line: $(cat "$T/m.jsonl")"
  ;;
mlp_accuracy)
  need_fm
  "$W" --task=train --model=mnist_mlp --device cpu --data_dir="$FM" --epochs 2 --max-train-samples 20000 \
      --metrics-out "$T/m.jsonl" --save "$T/w.h5" --progress off || fail "training failed"
  acc=$(json_field "$T/m.jsonl" test_acc)
  echo "test_acc=$acc"
  awk -v a="$acc" 'BEGIN { exit !(a >= 0.80) }' || fail "test accuracy $acc below 0.80"
  [ "$(grep -c '"event":"epoch"' "$T/m.jsonl")" -eq 2 ] || fail "expected 2 epoch lines"
  [ -s "$T/w.h5" ] || fail "--save wrote nothing"
  ;;
max_steps)
  need_fm
  "$W" --task=train --model=mnist_mlp --device cpu --data_dir="$FM" --epochs 3 --max-steps 7 \
      --metrics-out "$T/m.jsonl" --progress off || fail "training failed"
  # Step 7 lies in epoch 1 (938 steps): the partial epoch carries its own 1-based number.
  grep -q '"event":"epoch","epoch":1,"step":7,.*"partial":true' "$T/m.jsonl" || fail "epoch line: $(cat "$T/m.jsonl")"
  grep -q '"event":"done","epoch":1,"step":7,' "$T/m.jsonl" || fail "done line: $(cat "$T/m.jsonl")"
  ;;
mnist_t10k_loads)
  # The real MNIST test set in the shared data loads as both splits' stand-in (train = t10k copy).
  D=${ODL_TEST_DATA:-${ODL_TEST_DATA_DEFAULT:-../shared/data}}/mnist
  [ -f "$D/t10k-images-idx3-ubyte.gz" ] || { echo "skipped: no $D"; exit 77; }
  mkdir -p "$T/m"
  cp "$D/t10k-images-idx3-ubyte.gz" "$T/m/"; cp "$D/t10k-labels-idx1-ubyte.gz" "$T/m/"
  cp "$D/t10k-images-idx3-ubyte.gz" "$T/m/train-images-idx3-ubyte.gz"
  cp "$D/t10k-labels-idx1-ubyte.gz" "$T/m/train-labels-idx1-ubyte.gz"
  "$W" --task=train --model=mnist_mlp --device cpu --data_dir="$T/m" --epochs 1 --max-steps 50 \
      --metrics-out "$T/m.jsonl" --progress off || fail "training on MNIST t10k failed"
  acc=$(json_field "$T/m.jsonl" test_acc)
  awk -v a="$acc" 'BEGIN { exit !(a >= 0.75) }' || fail "MNIST accuracy after 50 steps $acc below 0.75"
  ;;
bad_truncated)
  need_fm; copy_fm
  gzip -dc "$FM/train-images-idx3-ubyte.gz" | head -c 100000 > "$T/d/train-images-idx3-ubyte"
  rm -f "$T/d/train-images-idx3-ubyte.gz"
  expect_error "truncated images" "train-images-idx3-ubyte" --task=train --device cpu --data_dir="$T/d"
  ;;
bad_labels)
  need_fm; copy_fm
  rm -f "$T/d/train-labels-idx1-ubyte.gz"
  cp "$FM/t10k-labels-idx1-ubyte.gz" "$T/d/train-labels-idx1-ubyte.gz"
  expect_error "labels that do not match images" "train-labels-idx1-ubyte" --task=train --device cpu --data_dir="$T/d"
  ;;
bad_dir)
  expect_error "directory without the files" "$T/nothing" --task=train --device cpu --data_dir="$T/nothing"
  ;;
bad_config)
  printf 'train:\n  lr: 0.5\n  learning_rate: 2\n' > "$T/c.yaml"
  expect_error "unknown config key" "learning_rate" --task=train --config "$T/c.yaml"
  printf 'train:\n  batch_size: -3\n' > "$T/c2.yaml"
  expect_error "bad config value" "batch_size" --task=train --config "$T/c2.yaml"
  expect_error "unknown flag" "--frobnicate" --task=train --frobnicate 3
  ;;
*) fail "unknown case $CASE" ;;
esac
echo "PASS $CASE"
