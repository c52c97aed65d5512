#!/usr/bin/env bash
# A/B of one ODL_* variable's values on the GPU machine, interleaved, with PyTorch's peer in the same call:
#   bench/env_ab.sh train|yolo VAR "V1 V2 ..." [OUT_DIR]     (binaries from $ODL_BUILD, default build/)
# train: the examples CNN, batch 512, 2 epochs in tf32 and bf16 per value, two rounds, beside torch.compile
#        (`mnist_compile`, `mnist_compile_bf16`); Fashion-MNIST from $ODL_FMNIST_DIR. Table: warm samples/s,
#        epoch-2 accuracy, ratio to the peer. ODL_AB_PRECISIONS="tf32 bf16 fp32" adds fp32 beside
#        torch.compile with TF32 off (`mnist_compile_ieee`, issue 21's fp32 peer); any subset, in that order.
# yolo:  YOLOv5n batch 32 fp16 (yolov5_bench --no-tf32; its batch-1 rows too), two rounds, beside torch.compile
#        fp16 (`yolov5n_compiled`); weights $ODL_BUILD/yolov5n.h5, ODL_TEST_DATA for bus.jpg. Table: images/s and
#        the ratio yolov5_bench prints.
# TORCH_BASELINES: ../shared/bench/torch_baselines.py copied beside the checkout (it is not carried otherwise).
# Example: bench/env_ab.sh train ODL_POOL_RELU_FUSE "0 1" $OUT/ab; bench/env_ab.sh yolo ODL_CONV_F16_SM90 "0 1"
set -uo pipefail
mode=${1:?usage: bench/env_ab.sh train|yolo VAR "V1 V2 ..." [OUT_DIR]}
var=${2:?usage: bench/env_ab.sh train|yolo VAR "V1 V2 ..." [OUT_DIR]}
vals=${3:?usage: bench/env_ab.sh train|yolo VAR "V1 V2 ..." [OUT_DIR]}
OUT=${4:-${OUT:-/tmp/odl_out}/env_ab}
B=${ODL_BUILD:-build}
case $var in ODL_*) ;; *) echo "env_ab: error: $var is not an ODL_* variable" >&2; exit 2 ;; esac
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt" 2>&1
tb=${TORCH_BASELINES:-}
case $mode in
train)
  FM=${ODL_FMNIST_DIR:?ODL_FMNIST_DIR: the Fashion-MNIST folder}
  precs=${ODL_AB_PRECISIONS:-tf32 bf16}
  sections=""
  for p in $precs; do
    case $p in
    tf32) sections="$sections mnist_compile" ;;
    bf16) sections="$sections mnist_compile_bf16" ;;
    fp32) sections="$sections mnist_compile_ieee" ;;
    *) echo "env_ab: error: ODL_AB_PRECISIONS: $p (tf32, bf16, fp32)" >&2; exit 2 ;;
    esac
  done
  for r in 1 2; do for v in $vals; do for p in $precs; do
    f="$OUT/train_${v}_${p}_r$r"
    env "$var=$v" timeout 150 "$B/odl_worker" --task=train --model=mnist --data_dir="$FM" --device cuda --epochs 2 \
      --batch-size 512 --test-batch-size 1000 --progress off --precision $p --metrics-out "$f.jsonl" >/dev/null 2>"$f.log" ||
      { echo "env_ab: train $var=$v $p failed:"; tail -3 "$f.log"; }
  done; done; done
  [ -n "$tb" ] && PYTHONUNBUFFERED=1 timeout 300 python3 "$tb" "$OUT/torch.json" $sections >"$OUT/torch.log" 2>&1
  ;;
yolo)
  [ -n "$tb" ] && PYTHONUNBUFFERED=1 timeout 300 python3 "$tb" "$OUT/torch.json" yolov5n_compiled >"$OUT/torch.log" 2>&1
  img=${ODL_TEST_DATA:?ODL_TEST_DATA: the data folder (yolov5/images/bus.jpg)}/yolov5/images/bus.jpg
  for r in 1 2; do for v in $vals; do
    env "$var=$v" timeout 150 "$B/bench/yolov5_bench" --weights "$B/yolov5n.h5" --image "$img" --batch 32 --no-tf32 \
      $( [ -f "$OUT/torch.json" ] && echo --torch "$OUT/torch.json" ) >"$OUT/yolo_${v}_r$r.txt" 2>&1 ||
      { echo "env_ab: yolov5_bench $var=$v failed:"; tail -3 "$OUT/yolo_${v}_r$r.txt"; }
  done; done
  ;;
*) echo "env_ab: error: mode $mode: train or yolo" >&2; exit 2 ;;
esac
python3 "$(dirname "$0")/env_ab_table.py" "$OUT" "$mode" "$var" $vals
