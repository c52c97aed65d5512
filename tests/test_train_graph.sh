#!/usr/bin/env bash
# odl_worker --task=train with the step replayed from CUDA graphs (train.cuda_graph, --cuda-graph on|off;
# worker/train_step.h), end to end on Fashion-MNIST. Usage: test_train_graph.sh WORKER ODL_CKPT CASE
#   equal      3 epochs of 1,000 samples at batch 64 (15 full steps and a partial one of 40 per epoch),
#              dropout on, the test set's first 1,000 evaluated after every epoch (its batch of 1,000 grows
#              the backend's workspace after the graphs were captured): graphs on and off give the same parameters bit
#              for bit and the same loss lines, for Adadelta (StepLR: a new rate every epoch) and Adam
#   precision  the same with --precision tf32 and bf16
#   resume     a graphed run stopped in its second epoch and resumed from its checkpoint equals the
#              uninterrupted graphed run and the op-by-op one, bit for bit
#   fuse, fuse_cpu  the ReLU backwards fused into the layer above (nn/net.c: ODL_POOL_RELU_FUSE,
#              odl_maxpool2d_relu_bwd; ODL_CONV_RELU_FUSE, odl_conv2d_relu_bwd; ODL_CONV_WGRAD_RELU, conv1's own
#              ReLU in its weight gradient, odl_conv2d_relu_out_bwd_weight) change no bit of training: the
#              examples CNN (conv1 + ReLU, conv2 + ReLU, max-pool: both apply), 2 epochs of 640 samples, each
#              fusion off and on, op by op, the same parameters and loss lines (on CUDA, and on the CPU)
#   cli        (CPU) --cuda-graph on|off and train.cuda_graph accepted, a bad value an error naming the key,
#              the run's last lines say how the steps ran and the host time per step; the
#              memory.preallocate_fraction of train, infer and eval takes [0, 1] (0: grow on demand)
# Fashion-MNIST comes from $ODL_FMNIST_DIR (default /usr/share/datasets/fashion-mnist); exit 77 (skip)
# without it, and for the GPU cases without a usable CUDA device.
set -u
W=$(realpath "$1")
CK=$(realpath "$2")
CASE=$3
FM=${ODL_FMNIST_DIR:-/usr/share/datasets/fashion-mnist}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
skip() { echo "skipped: $*"; exit 77; }
[ -f "$FM/train-images-idx3-ubyte.gz" ] || [ -f "$FM/train-images-idx3-ubyte" ] || skip "no Fashion-MNIST in $FM"
cd "$T" || exit 1

# --cuda-graph on|off is each run's own (an option given twice is an error)
# ODL_TEST_QUICK (bench/sanitize_gpu.sh sets it; tests/test_util.h): 296 samples, 4 full steps and a partial
# one of 40 per epoch, the same kinds of step (captures per loader slot, the partial batch, the evaluation
# that grows the workspace) in 15 steps instead of 48: racecheck checks every shared-memory access of each launch
SAMPLES=1000 REPLAYS=40 STOP=20 EVERY=10 RESUMED=20 FUSE_SAMPLES=640
case ${ODL_TEST_QUICK:-} in
""|0) ;;
*) SAMPLES=296 REPLAYS=8 STOP=7 EVERY=7 RESUMED=3 FUSE_SAMPLES=256 ;;
esac
G=(--task=train --model=mnist --device cuda "--data_dir=$FM" --max-train-samples $SAMPLES --batch-size 64 --epochs 3
   --test-batch-size 1000 --max-test-samples 1000 --progress off)
# JSONL lines without what differs between runs that compute the same: timing, telemetry.
loss_lines() { # the epoch lines without what depends on the machine's moment (speed, the GPU's free memory)
  sed -E 's/,"samples_per_s":[^,]*,"wall_s":[^,]*//; s/,"gpu_util_mean":[^,}]*//; s/,"gpu_mem_peak_mib":[^,}]*//;
          s/,"pool_reserved_mib":[^,}]*//' "$1"
}
same_run() { # same_run A B WHAT: parameters bit for bit and the same loss lines
  "$CK" diff "$1.h5" "$2.h5" > diff.out 2>&1 || { cat diff.out; fail "$3: parameters differ"; }
  loss_lines "$1.jsonl" > "$1.cmp"; loss_lines "$2.jsonl" > "$2.cmp"
  cmp -s "$1.cmp" "$2.cmp" || { diff "$1.cmp" "$2.cmp"; fail "$3: loss lines differ"; }
  echo "ok: $3: parameters bit for bit ($(tail -1 diff.out)), $(wc -l < "$1.cmp") identical loss lines"
}
train() { # train NAME ARGS...: a run writing NAME.h5, NAME.jsonl, NAME.log
  local n=$1; shift
  "$W" "$@" --save "$n.h5" --metrics-out "$n.jsonl" 2> "$n.log" || fail "$n: $(grep error: "$n.log" | tail -3)"
}
replays() { sed -n 's/.*CUDA graphs: \([0-9]*\) captured (one per loader slot), \([0-9]*\) replays.*/\1 \2/p' "$1.log"; }
# Skips only where odl_worker says it has no CUDA device: any other failure of the probe is the test's
# (an option the worker refuses once skipped every GPU case here).
gpu_or_skip() {
  "$W" "${G[@]}" --cuda-graph on --max-steps 1 > probe.out 2> probe.log && return
  grep -q "no CUDA device" probe.log && skip "no usable CUDA device: $(grep 'error:' probe.log)"
  fail "the one-step probe: $(tail -3 probe.log)"
}

case "$CASE" in
equal)
  gpu_or_skip
  for opt in "adadelta 1.0" "adam 0.001"; do
    set -- $opt
    train g_$1 "${G[@]}" --cuda-graph on --optimizer "$1" --lr "$2"
    train e_$1 "${G[@]}" --optimizer "$1" --lr "$2" --cuda-graph off
    read -r cap rep <<< "$(replays g_$1)"
    [ "${cap:-0}" -eq 3 ] && [ "${rep:-0}" -ge $REPLAYS ] ||
      fail "$1: captures '$cap' replays '$rep' (want 3 and >= $REPLAYS): $(grep 'steps:' g_$1.log)"
    grep -q "CUDA graphs off: train.cuda_graph is off" e_$1.log || fail "--cuda-graph off not said: $(grep -i graph e_$1.log)"
    grep -Eq "us replayed \([0-9]+; [0-9.]+ us of it in the graph launch\)" g_$1.log ||
      fail "$1: the replayed steps' host time lacks the graph launch's part: $(grep 'steps:' g_$1.log)"
    same_run g_$1 e_$1 "$1, CUDA graphs ($cap captures, $rep replays) vs op by op"
    grep "steps:" g_$1.log e_$1.log
  done
  ;;
precision)
  gpu_or_skip
  for p in tf32 bf16; do
    train g_$p "${G[@]}" --cuda-graph on --precision $p
    train e_$p "${G[@]}" --precision $p --cuda-graph off
    read -r cap rep <<< "$(replays g_$p)"
    [ "${rep:-0}" -ge $REPLAYS ] || fail "$p: $rep replays (want >= $REPLAYS)"
    same_run g_$p e_$p "--precision $p, CUDA graphs vs op by op"
  done
  ;;
resume)
  gpu_or_skip
  mkdir A B
  train a "${G[@]}" --cuda-graph on --checkpoint-dir A --checkpoint-every $EVERY
  train e "${G[@]}" --cuda-graph off
  # 20 steps: the fourth step of epoch 2 (16 steps per epoch); quick: 7, the second of epoch 2 (5 per epoch)
  "$W" "${G[@]}" --cuda-graph on --max-steps $STOP --checkpoint-dir B --checkpoint-every $EVERY 2> b1.log ||
    fail "first part: $(tail -3 b1.log)"
  train b "${G[@]}" --cuda-graph on --checkpoint-dir B --checkpoint-every $EVERY --resume auto
  ck=$(printf 'B/ckpt-%08d.h5' $STOP)
  grep -q "resuming from $ck: step $STOP" b.log || fail "did not resume from step $STOP: $(grep -i resum b.log)"
  read -r cap rep <<< "$(replays b)"
  [ "${rep:-0}" -ge $RESUMED ] || fail "the resumed run replayed $rep steps (want >= $RESUMED)"
  "$CK" diff a.h5 b.h5 > diff.out 2>&1 || { cat diff.out; fail "resumed graphed run differs from the uninterrupted one"; }
  echo "ok: graphed run stopped at step $STOP and resumed ($cap captures, $rep replays after the resume) = uninterrupted"
  "$CK" diff a.h5 e.h5 > diff.out 2>&1 || { cat diff.out; fail "graphed run differs from the op-by-op one"; }
  echo "ok: graphed run = op-by-op run, bit for bit"
  ;;
cli)
  C=(--task=train --model=mnist --device cpu "--data_dir=$FM" --max-train-samples 128 --batch-size 64 --epochs 1
     --progress off --train.eval_every_epoch=false)
  "$W" "${C[@]}" --cuda-graph maybe > out.log 2> err.log && fail "--cuda-graph maybe accepted"
  grep -q "error: --cuda-graph: .*train.cuda_graph.*maybe" err.log || fail "bad value: $(cat err.log)"
  echo "ok: $(grep error: err.log)"
  "$W" --task=train --help | grep -q -- "--cuda-graph on|off" || fail "--help does not list --cuda-graph"
  printf 'train:\n  cuda_graph: off\n' > g.yaml
  "$W" "${C[@]}" --config g.yaml 2> run.log || fail "train.cuda_graph: off: $(tail -3 run.log)"
  grep -q "steps: 2 steps op by op; mean host time per step [0-9.]* us op by op (2)" run.log ||
    fail "no steps line: $(tail -3 run.log)"
  echo "ok: $(grep 'steps:' run.log | sed 's/.*INFO //')"
  "$W" "${C[@]}" --cuda-graph on 2> run2.log || fail "--cuda-graph on on the CPU: $(tail -3 run2.log)"
  echo "ok: --cuda-graph on accepted on the CPU (steps op by op there)"
  # memory.preallocate_fraction: [0, 1] everywhere, 0 = grow on demand (train, infer, eval)
  "$W" "${C[@]}" --preallocate-fraction 0 --max-steps 1 2> run3.log || fail "fraction 0 refused: $(tail -3 run3.log)"
  for task in "train" "infer --model=yolov5" "eval --model=yolov5" "eval --model=mnist"; do
    "$W" --task=$task --memory.preallocate_fraction 1.5 > out.log 2> err.log
    rc=$?
    [ $rc -eq 2 ] || fail "--task=$task --memory.preallocate_fraction 1.5: exit status $rc"
    grep -q "error: .*preallocate_fraction.*1.5" err.log && grep -q "\[0, 1\]" err.log ||
      fail "--task=$task: $(cat err.log)"
    echo "ok: --task=$task: $(grep error: err.log)"
  done
  ;;
fuse|fuse_cpu)
  dev=cuda
  if [ "$CASE" = fuse_cpu ]; then dev=cpu; else gpu_or_skip; fi
  F=(--task=train --model=mnist --device $dev "--data_dir=$FM" --max-train-samples $FUSE_SAMPLES --batch-size 64 --epochs 2
     --test-batch-size 1000 --max-test-samples 1000 --progress off --cuda-graph off)
  ODL_POOL_RELU_FUSE=0 ODL_CONV_RELU_FUSE=0 ODL_CONV_WGRAD_RELU=0 train plain "${F[@]}"
  for arm in "pool 1 0 0" "conv 0 1 0" "wgrad 0 0 1" "pool_wgrad 1 0 1" "all 1 1 1"; do
    set -- $arm
    ODL_POOL_RELU_FUSE=$2 ODL_CONV_RELU_FUSE=$3 ODL_CONV_WGRAD_RELU=$4 train "$1" "${F[@]}"
    same_run plain "$1" "$dev $1 (ODL_POOL_RELU_FUSE=$2 ODL_CONV_RELU_FUSE=$3 ODL_CONV_WGRAD_RELU=$4)"
  done
  ;;
*) fail "unknown case $CASE" ;;
esac
echo "PASS $CASE"
