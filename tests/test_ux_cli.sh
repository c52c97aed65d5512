#!/usr/bin/env bash
# odl_worker as a new user meets it (issue 17): --version, "did you mean", a flag given twice, output
# paths checked before training, brief errors ([at file:line] only with --verbose), progress lines off a
# terminal, 1-based epochs in the JSONL, manifest.json and odl_ckpt (a partial epoch with its own number),
# a resumed run appending without repeats, --task=eval and --init-from.
# Usage: test_ux_cli.sh WORKER ODL_CKPT CASE. Fashion-MNIST from $ODL_FMNIST_DIR (default
# /usr/share/datasets/fashion-mnist); the cases that train exit 77 (skip) without it.
set -u
W=$1
CK=$2
CASE=$3
FM=${ODL_FMNIST_DIR:-/usr/share/datasets/fashion-mnist}
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
fail() { echo "FAIL: $*"; exit 1; }
need_fm() { [ -f "$FM/train-images-idx3-ubyte.gz" ] || [ -f "$FM/train-images-idx3-ubyte" ] || { echo "SKIP: no Fashion-MNIST in $FM"; exit 77; }; }
# Small, fast runs: the MLP, 320 training samples (5 steps of 64), no dropout.
TRAIN=(--task=train --model=mnist_mlp --device cpu --data_dir="$FM" --max-train-samples 320 --no-dropout)

# A python that imports module $1: $ODL_TEST_PYTHON, the venv launch/install_deps.sh makes with
# ODL_TEST_DEPS=1 ($ODL_TEST_VENV, default /opt/odl-test-venv), Debian's, the PATH's.
py_with() {
  local c
  for c in "${ODL_TEST_PYTHON:-}" "${ODL_TEST_VENV:-/opt/odl-test-venv}/bin/python3" /usr/bin/python3 python3; do
    [ -n "$c" ] && command -v "$c" >/dev/null 2>&1 && "$c" -c "import $1" 2>/dev/null && { echo "$c"; return 0; }
  done
  return 1
}

# Expect exit status $1 and one error line containing $2.
expect() {
  local want=$1 needle=$2; shift 2
  "$W" "$@" >out 2>err
  local rc=$?
  [ "$rc" -eq "$want" ] || fail "$*: exit status $rc, expected $want: $(cat err)"
  [ "$(grep -c 'error:' err)" -eq 1 ] || fail "$*: expected one error line: $(cat err)"
  grep -qF -- "$needle" err || fail "$*: error does not say '$needle': $(cat err)"
  echo "ok: $* -> $(grep 'error:' err)"
}

# The JSONL checks: python's json module parses every line (so no NaN, no bare words).
jsonl() { "$PY" - "$@" <<'PYEOF'
import json, sys
path, expr = sys.argv[1], sys.argv[2]
recs = [json.loads(l, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c))) for l in open(path) if l.strip()]
ok = eval(expr, {"recs": recs})
print(path, "->", [(r["event"], r.get("epoch"), r.get("step"), r.get("partial")) for r in recs])
sys.exit(0 if ok else 1)
PYEOF
}

case $CASE in
version)
  "$W" --version >out 2>err || fail "--version exit status $?"
  cat out
  grep -Eq '^odl_worker \(OriginDL\) [0-9]+\.[0-9]+\.[0-9]+, commit ([0-9a-f]{12}(-dirty)?|unknown)$' out || fail "version line"
  grep -q '^CUDA: ' out && grep -q '^NCCL: ' out && grep -q '^MPI: ' out || fail "CUDA/NCCL/MPI lines"
  if [ -d "$ODL_SOURCE_DIR/.git" ] || [ -f "$ODL_SOURCE_DIR/.git" ]; then
    head=$(git -C "$ODL_SOURCE_DIR" rev-parse --short=12 HEAD 2>/dev/null) || head=""
    # The commit is the one at configure time; a later commit in the checkout is fine, an unrelated hash is not.
    c=$(sed -n 's/.*commit \([0-9a-f]\{12\}\).*/\1/p' out)
    [ -z "$head" ] || [ -z "$c" ] || git -C "$ODL_SOURCE_DIR" cat-file -e "$c^{commit}" 2>/dev/null || fail "commit $c not in the checkout"
  fi
  ;;
flags)
  expect 2 "unknown option --epocs (did you mean --epochs?)" "${TRAIN[@]}" --epocs 2
  expect 2 "unknown option --max-step (did you mean --max-steps?)" "${TRAIN[@]}" --max-step=3
  expect 2 "--epochs=3 given twice (first as --epochs)" "${TRAIN[@]}" --epochs 2 --epochs=3
  expect 2 "--batch_size given twice (first as --batch-size)" "${TRAIN[@]}" --batch-size 4 --batch_size 8
  expect 2 "--train.lr=0.5 given twice (first as --lr)" "${TRAIN[@]}" --lr 1 --train.lr=0.5
  expect 2 "unknown option --conf-thresh (did you mean --conf-thres?)" --task=infer --weights w.h5 --source x.jpg --conf-thresh 0.3
  expect 2 "--iou-thres given twice" --task=infer --weights w.h5 --source x.jpg --iou-thres 0.3 --iou-thres 0.5
  expect 2 "--source given twice (first as --input)" --task=infer --weights w.h5 --input a.jpg --source b.jpg
  ;;
outputs_checked)
  need_fm
  # Each bad path fails before any data is read or any step is taken.
  expect 1 "--save nodir/w.h5: folder nodir does not exist" "${TRAIN[@]}" --save nodir/w.h5
  mkdir adir
  expect 1 "--metrics-out adir: is a folder" "${TRAIN[@]}" --metrics-out adir
  touch afile
  expect 1 "--tensorboard afile/tb: afile is not a folder" "${TRAIN[@]}" --tensorboard afile/tb
  grep -q "training mnist" err && fail "training started before the check"
  # Brief errors; the [at file:line] trace with --verbose.
  expect 1 "--save nodir/w.h5" "${TRAIN[@]}" --save nodir/w.h5
  grep -q '\[at ' err && fail "trace in a user-facing error: $(cat err)"
  expect 1 "--save nodir/w.h5" "${TRAIN[@]}" --save nodir/w.h5 --verbose
  grep -q '\[at outputs.c:' err || fail "no trace with --verbose: $(cat err)"
  grep -q "effective config:" err || fail "--verbose: no effective config at debug"
  ;;
progress_lines)
  need_fm
  "$W" "${TRAIN[@]}" --epochs 2 --log-interval 2 --train.eval_every_epoch=false --save w.h5 2>err ||
    fail "training: $(cat err)"
  cat err
  # stderr is a file here: lines, not a bar; steps 2 and 4 of epoch 1, 6 8 10 of epoch 2.
  [ "$(grep -Ec 'INFO epoch [12]/2 step (2|4|6|8|10) \[[0-9]+/320 samples\] loss [0-9.]+ [0-9]+ samples/s ETA [0-9hms?]+$' err)" -ge 5 ] ||
    fail "progress lines"
  grep -q $'\r' err && fail "a terminal bar in a file"
  grep -Eq 'INFO epoch 1/2 step 5: lr 1 train_loss' err || fail "epoch line with the learning rate"
  grep -Eq 'INFO epoch 2/2 step 10: lr 0.7 train_loss' err || fail "epoch 2's learning rate (StepLR 0.7)"
  grep -q "INFO training mnist_mlp on .* 2 epochs of 5 steps, adadelta lr 1" err || fail "start-up summary"
  grep -q "effective config" err && fail "the full config belongs at debug level"
  grep -q "weights written to w.h5" err || fail "--save does not say where it wrote"
  # The terminal bar (forced with --progress on): redrawn in place with epoch N/M, loss and ETA.
  "$W" "${TRAIN[@]}" --epochs 2 --progress on --train.eval_every_epoch=false 2>bar || fail "training with the bar"
  grep -Eq $'\repoch 2/2 \[=+ *\] 320/320 loss [0-9.]+ [0-9]+ samples/s ETA [0-9hms]+' bar || fail "progress bar: $(cat -v bar)"
  ;;
epochs_resume)
  need_fm
  mkdir ck
  # 2 epochs of 5 steps, stopped at step 8 (inside epoch 2), checkpoints at 3, 6 and 8.
  "$W" "${TRAIN[@]}" --epochs 2 --max-steps 8 --checkpoint-dir ck --checkpoint-every 3 --metrics-out m.jsonl \
      --train.eval_every_epoch=false 2>err1 || fail "run 1: $(cat err1)"
  jsonl m.jsonl '[(r["event"], r["epoch"], r["step"], r["partial"]) for r in recs] == [("epoch",1,5,False),("epoch",2,8,True),("done",2,8,True)] and recs[0]["test_loss"] is None and recs[1]["test_loss"] is not None' ||
    fail "run 1 records: $(cat m.jsonl)"
  grep -q "INFO epoch 2/2 step 8: .*(stopped mid-epoch)" err1 || fail "partial epoch's log line"
  "$PY" -c 'import json,sys; m=json.load(open("ck/manifest.json")); sys.exit(not (m["epoch"]==2 and m["epochs_completed"]==1 and m["step"]==8))' ||
    fail "manifest: $(cat ck/manifest.json)"
  "$CK" verify ck/ckpt-00000008.h5 | grep -q "step 8 (epoch 2, 1 completed" || fail "odl_ckpt verify: $("$CK" verify ck/ckpt-00000008.h5)"
  "$CK" inspect ck/ckpt-00000003.h5 --no-config | grep -q "^epoch: *1 (0 completed; taken inside it)" || fail "odl_ckpt inspect"
  # The run dies after writing the step-8 record but before its checkpoint: resume from step 6.
  rm ck/ckpt-00000008.h5
  "$W" "${TRAIN[@]}" --epochs 2 --checkpoint-dir ck --checkpoint-every 3 --resume auto --metrics-out m.jsonl \
      --train.eval_every_epoch=false 2>err2 || fail "run 2: $(cat err2)"
  grep -q "record(s) after step 6" err2 || fail "no note of the dropped records: $(cat err2)"
  jsonl m.jsonl '[(r["event"], r["epoch"], r["step"], r["partial"]) for r in recs] == [("epoch",1,5,False),("epoch",2,10,False),("done",2,10,False)]' ||
    fail "resumed records: $(cat m.jsonl)"
  "$PY" -c 'import json,sys; m=json.load(open("ck/manifest.json")); sys.exit(not (m["epoch"]==2 and m["epochs_completed"]==2 and m["latest"]=="ckpt-00000010.h5"))' ||
    fail "manifest at the end: $(cat ck/manifest.json)"
  "$CK" inspect ck/ckpt-00000010.h5 --no-config | grep -q "^epoch: *2 (2 completed; taken at its end)" || fail "inspect at the end"
  # A fresh run overwrites.
  "$W" "${TRAIN[@]}" --epochs 1 --metrics-out m.jsonl --train.eval_every_epoch=false 2>err3 || fail "run 3"
  jsonl m.jsonl '[r["event"] for r in recs] == ["epoch", "done"]' || fail "a fresh run overwrites"
  ;;
eval_finetune)
  need_fm
  "$W" "${TRAIN[@]}" --epochs 1 --save w.h5 --metrics-out t.jsonl 2>err || fail "training: $(cat err)"
  "$W" --task=eval --model=mnist_mlp --data_dir="$FM" --weights w.h5 --metrics-out e.jsonl >out 2>err || fail "eval: $(cat err)"
  cat out
  # The same weights and test set as the training's own evaluation: the same numbers; per-class
  # accuracies weighted by the class counts (1,000 each in t10k) average to the accuracy.
  "$PY" - <<'PYEOF' || fail "eval numbers"
import json, sys
t = [json.loads(l) for l in open("t.jsonl")][0]
e = json.loads(open("e.jsonl").read())
print("train:", t, "\neval:", e)
assert e["event"] == "eval" and len(e["class_acc"]) == 10
assert abs(e["test_acc"] - t["test_acc"]) < 1e-9 and abs(e["test_loss"] - t["test_loss"]) < 1e-5
assert abs(sum(e["class_acc"]) / 10 - e["test_acc"]) < 1e-3
assert e["test_acc"] > 0.3
PYEOF
  grep -Eq '^  class 9: [01]\.[0-9]{4} \([0-9]+/1000\)$' out || fail "per-class lines"
  # --init-from with SGD at lr 1e-30: no float32 parameter moves, so the test accuracy is the saved weights' one.
  "$W" "${TRAIN[@]}" --epochs 1 --max-steps 1 --optimizer sgd --lr 1e-30 --init-from w.h5 --metrics-out f.jsonl 2>err || fail "init-from: $(cat err)"
  grep -q "parameters initialised from w.h5" err || fail "no init-from line"
  jsonl f.jsonl "abs(recs[0]['test_acc'] - $(sed -n 's/.*"test_acc":\([0-9.]*\).*/\1/p' e.jsonl)) < 1e-9" || fail "init-from accuracy"
  # --max-test-samples N: the epoch's evaluation over the test set's first N (an accuracy in steps of 1/N);
  # N past the set's size is all of it, the full evaluation's figure again.
  "$W" "${TRAIN[@]}" --epochs 1 --max-steps 1 --optimizer sgd --lr 1e-30 --init-from w.h5 --max-test-samples 500 \
      --metrics-out m500.jsonl 2>err || fail "max-test-samples 500: $(cat err)"
  grep -q "train / 500 test samples" err || fail "max-test-samples: the start line does not say 500: $(cat err)"
  jsonl m500.jsonl "abs(recs[0]['test_acc'] * 500 - round(recs[0]['test_acc'] * 500)) < 0.05" || fail "max-test-samples: accuracy not in steps of 1/500"
  "$W" "${TRAIN[@]}" --epochs 1 --max-steps 1 --optimizer sgd --lr 1e-30 --init-from w.h5 --max-test-samples 20000 \
      --metrics-out mall.jsonl 2>err || fail "max-test-samples 20000: $(cat err)"
  grep -q "train / 10000 test samples" err || fail "max-test-samples 20000: not the whole set: $(cat err)"
  jsonl mall.jsonl "abs(recs[0]['test_acc'] - $(sed -n 's/.*"test_acc":\([0-9.]*\).*/\1/p' e.jsonl)) < 1e-9" || fail "max-test-samples past the set"
  expect 2 "train.max_test_samples" "${TRAIN[@]}" --max-test-samples -1
  # --task=eval takes it too: the same 500 images, the same accuracy as the training's evaluation of them
  "$W" --task=eval --model=mnist_mlp --data_dir="$FM" --weights w.h5 --max-test-samples 500 --metrics-out e500.jsonl \
      >out 2>err || fail "eval --max-test-samples: $(cat err)"
  grep -q "(t10k, 500 images)" out || fail "eval --max-test-samples: $(cat out)"
  jsonl e500.jsonl "recs[0]['samples'] == 500 and abs(recs[0]['test_acc'] - $(sed -n 's/.*"test_acc":\([0-9.]*\).*/\1/p' m500.jsonl | head -1)) < 1e-9" ||
      fail "eval --max-test-samples: not the training's figure for the same 500"
  # Weights of another model.
  "$W" --task=train --model=mnist --device cpu --data_dir="$FM" --max-steps 1 --max-train-samples 64 --save cnn.h5 \
      --progress off 2>/dev/null || fail "cnn"
  expect 1 "cnn.h5 holds model 'mnist', not 'mnist_mlp'" --task=eval --model=mnist_mlp --data_dir="$FM" --weights cnn.h5
  expect 2 "--task=eval needs --weights" --task=eval --model=mnist_mlp
  ;;
tensorboard)
  need_fm
  TBPY=$(py_with tensorboard) || { echo "SKIP: no python with the tensorboard package (ODL_TEST_DEPS=1 launch/install_deps.sh installs it)"; exit 77; }
  "$W" "${TRAIN[@]}" --epochs 2 --tensorboard tb/run --log-interval 2 --metrics-out m.jsonl 2>err || fail "training: $(cat err)"
  grep -q "TensorBoard events: tb/run/events.out.tfevents." err || fail "no line naming the event file"
  # Read back by TensorBoard itself; every record's CRCs checked with tensorboard's masked_crc32c.
  "$TBPY" - <<'PYEOF' || fail "TensorBoard read-back"
import glob, json, struct
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.summary.writer.record_writer import masked_crc32c
files = glob.glob("tb/run/events.out.tfevents.*")
assert len(files) == 1, files
data, off, n = open(files[0], "rb").read(), 0, 0
while off < len(data):
    (length,) = struct.unpack("<Q", data[off:off + 8])
    (lcrc,) = struct.unpack("<I", data[off + 8:off + 12])
    body = data[off + 12:off + 12 + length]
    (dcrc,) = struct.unpack("<I", data[off + 12 + length:off + 16 + length])
    assert lcrc == masked_crc32c(data[off:off + 8]) and dcrc == masked_crc32c(body), "record %d: bad CRC" % n
    off += 16 + length
    n += 1
ea = EventAccumulator("tb/run")
ea.Reload()
tags = set(ea.Tags()["scalars"])
want = {"train/loss", "test/loss", "test/accuracy", "train/lr", "train/samples_per_s", "train/batch_loss"}
assert want <= tags, tags
recs = [json.loads(l) for l in open("m.jsonl") if '"epoch"' in l and '"event":"epoch"' in l]
def sc(t): return [(e.step, e.value) for e in ea.Scalars(t)]
for key, tag in (("train_loss", "train/loss"), ("test_loss", "test/loss"), ("test_acc", "test/accuracy"), ("lr", "train/lr")):
    got = sc(tag)
    assert [s for s, _ in got] == [r["step"] for r in recs], (tag, got)
    for (s, v), r in zip(got, recs):
        assert abs(v - r[key]) <= 1e-6 * max(1, abs(r[key])) + 1e-6, (tag, s, v, r[key])
assert [s for s, _ in sc("train/batch_loss")] == [2, 4, 6, 8, 10], sc("train/batch_loss")
print("%d records, CRCs ok; scalars %s" % (n, sorted(tags)))
PYEOF
  ;;
tensorboard_frames)
  need_fm
  # Without the tensorboard package: the TFRecord framing, CRC-32C (computed here bit by bit, check value
  # 0xE3069283 for "123456789") and the Event/Summary wire format decoded by hand, against the JSONL.
  "$W" "${TRAIN[@]}" --epochs 2 --tensorboard tb --log-interval 2 --metrics-out m.jsonl 2>err || fail "training: $(cat err)"
  "$PY" - <<'PYEOF' || fail "event file"
import glob, json, struct
def crc32c(b):
    c = 0xFFFFFFFF
    for x in b:
        c ^= x
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    return c ^ 0xFFFFFFFF
def mask(c): return (((c >> 15) | (c << 17)) + 0xa282ead8) & 0xFFFFFFFF
assert crc32c(b"123456789") == 0xE3069283
def fields(b):  # protobuf wire format: (field number, wire type, value)
    i, out = 0, []
    while i < len(b):
        key, i = varint(b, i)
        f, t = key >> 3, key & 7
        if t == 0: v, i = varint(b, i)
        elif t == 1: v, i = b[i:i + 8], i + 8
        elif t == 5: v, i = b[i:i + 4], i + 4
        elif t == 2:
            n, i = varint(b, i)
            v, i = b[i:i + n], i + n
        else: raise ValueError("wire type %d" % t)
        out.append((f, t, v))
    return out
def varint(b, i):
    v = s = 0
    while True:
        x = b[i]; i += 1
        v |= (x & 0x7F) << s; s += 7
        if not x & 0x80: return v, i
(path,) = glob.glob("tb/events.out.tfevents.*")
data, off, events = open(path, "rb").read(), 0, []
while off < len(data):
    n, lc = struct.unpack("<QI", data[off:off + 12])
    body = data[off + 12:off + 12 + n]
    (dc,) = struct.unpack("<I", data[off + 12 + n:off + 16 + n])
    assert lc == mask(crc32c(data[off:off + 8])) and dc == mask(crc32c(body)), "bad CRC at %d" % off
    events.append(fields(body))
    off += 16 + n
first = dict((f, v) for f, _, v in events[0])
assert first[3] == b"brain.Event:2" and struct.unpack("<d", first[1])[0] > 1.7e9, first
scal = {}
for ev in events[1:]:
    d = dict((f, v) for f, _, v in ev)
    (val,) = [v for f, _, v in fields(d[5]) if f == 1]
    vd = dict((f, v) for f, _, v in fields(val))
    scal.setdefault(vd[1].decode(), []).append((d.get(2, 0), struct.unpack("<f", vd[2])[0]))
recs = [json.loads(l) for l in open("m.jsonl")]
recs = [r for r in recs if r["event"] == "epoch"]
for key, tag in (("train_loss", "train/loss"), ("test_acc", "test/accuracy"), ("lr", "train/lr")):
    assert [s for s, _ in scal[tag]] == [r["step"] for r in recs], (tag, scal[tag])
    assert all(abs(v - r[key]) < 1e-6 * max(1, abs(r[key])) for (_, v), r in zip(scal[tag], recs)), (tag, scal[tag])
assert [s for s, _ in scal["train/batch_loss"]] == [2, 4, 6, 8, 10]
print(len(events), "events:", sorted(scal))
PYEOF
  ;;
plot)
  need_fm
  MPY=$(py_with matplotlib) || { echo "SKIP: no python with matplotlib (apt-get install python3-matplotlib)"; exit 77; }
  "$W" "${TRAIN[@]}" --epochs 2 --metrics-out m.jsonl 2>/dev/null || fail "training"
  "$MPY" "$ODL_SOURCE_DIR/tools/plot_metrics.py" m.jsonl -o curves.png || fail "plot_metrics.py"
  "$MPY" - <<'PYEOF' || fail "curves.png"
import struct
b = open("curves.png", "rb").read()
assert b[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
w, h = struct.unpack(">II", b[16:24])
assert (w, h) == (1100, 400), (w, h)
PYEOF
  echo '{"event":"done"}' > empty.jsonl
  "$MPY" "$ODL_SOURCE_DIR/tools/plot_metrics.py" empty.jsonl -o x.png 2>perr && fail "no epoch records: exit 0"
  grep -q "no epoch records" perr || fail "plot_metrics error line: $(cat perr)"
  ;;
*) fail "unknown case $CASE" ;;
esac
echo "PASS: $CASE"
