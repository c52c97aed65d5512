#!/usr/bin/env bash
# End-to-end checkpoint checks of odl_worker on Fashion-MNIST (CPU). Usage:
#   test_ckpt_resume.sh WORKER ODL_CKPT CASE
# Cases: bitexact kill_random damaged mismatch dirs disk_full tool world_size (CPU), gpu (CUDA)
# Fashion-MNIST comes from $ODL_FMNIST_DIR (default /usr/share/datasets/fashion-mnist); exit 77 (skip)
# when it is absent, and for cases whose tools (mpirun, mount namespaces) this machine lacks.
set -u
W=$(realpath "$1")
CK=$(realpath "$2")
CASE=$3
FM=${ODL_FMNIST_DIR:-/usr/share/datasets/fashion-mnist}
T=$(mktemp -d)
BG=""
cleanup() {
  [ -n "$BG" ] && kill -9 "$BG" 2>/dev/null
  chmod -R u+w "$T" 2>/dev/null
  rm -rf "$T"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
skip() { echo "skipped: $*"; exit 77; }
[ -f "$FM/train-images-idx3-ubyte.gz" ] || [ -f "$FM/train-images-idx3-ubyte" ] || skip "no Fashion-MNIST in $FM"
cd "$T" || exit 1

# The MLP (fast, no dropout) and the CNN with dropout on; 10 (MLP) and 6 (CNN) steps per epoch.
MLP=(--task=train --model=mnist_mlp --device cpu "--data_dir=$FM" --max-train-samples 640 --epochs 3
     --progress off)
CNN=(--task=train --model=mnist --device cpu "--data_dir=$FM" --max-train-samples 192 --batch-size 32 --epochs 3
     --test-batch-size 1000 --progress off --train.eval_every_epoch=false)

# The array named $1 with the value of flag $2 set to $3 (odl_worker rejects a flag given twice).
set_flag() { local -n _a=$1; local i; for i in "${!_a[@]}"; do [ "${_a[$i]}" = "$2" ] && _a[$((i + 1))]=$3; done; }

# Metrics lines without the timing fields, the GPU telemetry (utilisation is sampled, not computed) and
# the device pool (its peak is the process's: a resumed one allocates in another order).
loss_lines() { sed -E 's/,"samples_per_s":[^,]*,"wall_s":[^,]*//; s/,"gpu_util_mean":[^,}]*//; s/,"gpu_mem_peak_mib":[^,}]*//; s/,"pool_peak_mib":[^,}]*//; s/,"pool_reserved_mib":[^,}]*//' "$1"; }
same_loss_lines() {
  loss_lines "$1" > "$1.cmp"; loss_lines "$2" > "$2.cmp"
  cmp -s "$1.cmp" "$2.cmp" || { diff "$1.cmp" "$2.cmp"; fail "$3: loss lines differ"; }
  echo "ok: $3: identical loss lines ($(wc -l < "$1.cmp") lines)"
}
same_params() {
  "$CK" diff "$1" "$2" > diff.out 2>&1 || { cat diff.out; fail "$3: parameters differ"; }
  echo "ok: $3: $(cat diff.out)"
}
# Expect a failure: exit status 1, exactly one "error:" line, naming $2.
expect_error() {
  local what=$1 needle=$2; shift 2
  "$@" > out.log 2> err.log
  local rc=$?
  [ $rc -ne 0 ] || fail "$what: exit status 0"
  [ "$(grep -c 'error:' err.log)" -eq 1 ] || fail "$what: not one error line: $(cat err.log | tail -5)"
  grep 'error:' err.log | grep -qF -- "$needle" || fail "$what: error does not name '$needle': $(grep 'error:' err.log)"
  echo "ok: $what -> $(grep 'error:' err.log)"
}
# A directory's files and their checksums, to show that nothing changed.
snapshot() { (cd "$1" && find . -type f | sort | xargs -r md5sum); }
wait_for() { # wait_for SECONDS COMMAND...: poll until the command succeeds
  local t=$1; shift
  for _ in $(seq 1 $((t * 10))); do "$@" && return 0; sleep 0.1; done
  return 1
}
newest_step() { "$CK" latest "$1" 2>/dev/null | sed -E 's/.*ckpt-0*([0-9]+)\.h5$/\1/'; }
flip_byte_in() { # flip_byte_in FILE DATASET: flip one bit in the middle of a dataset's stored bytes
  local off size
  off=$(h5dump -p -H -d "$2" "$1" 2>/dev/null | sed -n 's/.*OFFSET \([0-9]*\).*/\1/p' | head -1)
  size=$(h5dump -p -H -d "$2" "$1" 2>/dev/null | sed -n 's/.*SIZE \([0-9]*\).*/\1/p' | head -1)
  [ -n "$off" ] && [ -n "$size" ] || fail "no storage offset of $2 in $1 (h5dump -p)"
  python3 - "$1" $((off + size / 2)) <<'EOF'
import sys
p, at = sys.argv[1], int(sys.argv[2])
with open(p, "r+b") as f:
    f.seek(at); b = f.read(1); f.seek(at); f.write(bytes([b[0] ^ 0x10]))
EOF
}

case $CASE in
bitexact)
  # 2N steps in one run against N steps, a stop, --resume auto, N more steps; and against N steps, a
  # kill -9 while the next checkpoint is being written, --resume auto, N more. The CNN with dropout on.
  mkdir A B K
  "$W" "${CNN[@]}" --max-steps 8 --checkpoint-dir A --checkpoint-every 4 --metrics-out a.jsonl --save a.h5 2> a.log ||
    fail "uninterrupted run: $(tail -3 a.log)"
  grep -q "step loop stalled" a.log || fail "no stall line in the log"
  grep "step loop stalled" a.log
  "$W" "${CNN[@]}" --max-steps 4 --checkpoint-dir B --checkpoint-every 4 --metrics-out b.jsonl 2> b.log ||
    fail "first half: $(tail -3 b.log)"
  "$W" "${CNN[@]}" --max-steps 8 --checkpoint-dir B --checkpoint-every 4 --resume auto --metrics-out c.jsonl --save c.h5 \
      2> c.log || fail "resumed run: $(tail -3 c.log)"
  grep -q "resuming from B/ckpt-00000004.h5: step 4" c.log || fail "did not resume from step 4: $(grep -i resum c.log)"
  same_params a.h5 c.h5 "stop + resume"
  "$CK" diff --prefix / A/ckpt-00000008.h5 B/ckpt-00000008.h5 > d.out || { cat d.out; fail "final checkpoints differ"; }
  echo "ok: stop + resume: final checkpoints (parameters, optimiser state, counters) identical"
  same_loss_lines a.jsonl c.jsonl "stop + resume"

  ODL_CKPT_TEST_PAUSE_AT_STEP=8 "$W" "${CNN[@]}" --max-steps 8 --checkpoint-dir K --checkpoint-every 4 \
      --metrics-out k.jsonl 2> k.log &
  BG=$!
  wait_for 600 grep -q "pausing the write" k.log || fail "the paused write never came: $(tail -3 k.log)"
  kill -9 "$BG"; wait "$BG" 2>/dev/null; BG=""
  [ -f K/ckpt-00000008.h5.tmp ] || fail "expected the interrupted K/ckpt-00000008.h5.tmp: $(ls K)"
  grep -q '"latest": "ckpt-00000004.h5"' K/manifest.json || fail "manifest: $(cat K/manifest.json)"
  "$CK" verify K > v.out || { cat v.out; fail "K after kill -9 does not verify"; }
  grep -q "auto takes K/ckpt-00000004.h5" v.out || fail "verify: $(cat v.out)"
  echo "ok: kill -9 during the write of step 8: step 4 verifies, the manifest names it"
  "$W" "${CNN[@]}" --max-steps 8 --checkpoint-dir K --checkpoint-every 4 --resume auto --metrics-out k2.jsonl \
      --save k.h5 2> k2.log || fail "resume after kill -9: $(tail -3 k2.log)"
  grep -q "removed K/ckpt-00000008.h5.tmp" k2.log || fail "stale .tmp not reported"
  same_params a.h5 k.h5 "kill -9 + resume"
  # The uninterrupted run's lines after step 4 against the resumed run's.
  loss_lines a.jsonl > a.all; loss_lines k2.jsonl > k2.all
  cmp -s a.all k2.all || { diff a.all k2.all; fail "kill -9 + resume: loss lines differ"; }
  echo "ok: kill -9 + resume: identical loss lines"
  ;;

kill_random)
  # kill -9 at random moments of a run that checkpoints every step: the newest checkpoint always
  # verifies, and a resume from it matches an uninterrupted run bit for bit.
  mkdir R
  M1000=("${MLP[@]}")
  set_flag M1000 --epochs 1000
  for round in 1 2 3; do
    resume=()
    [ "$round" -gt 1 ] && resume=(--resume auto)
    "$W" "${M1000[@]}" --max-steps 100000 --checkpoint-dir R --checkpoint-every 1 --keep 2 "${resume[@]}" \
        2> r$round.log &
    BG=$!
    wait_for 120 test -f R/manifest.json || fail "round $round: no checkpoint: $(tail -3 r$round.log)"
    sleep "0.$((RANDOM % 9 + 1))"
    kill -9 "$BG"; wait "$BG" 2>/dev/null; BG=""
    "$CK" verify R > v.out || { cat v.out; fail "round $round: a checkpoint does not verify after kill -9"; }
    S=$(newest_step R)
    echo "ok: round $round: killed; newest good checkpoint at step $S; $(ls R | tr '\n' ' ')"
  done
  S=$(newest_step R)
  END=$((S + 3))
  "$W" "${M1000[@]}" --max-steps $END --checkpoint-dir R --checkpoint-every 1 --keep 2 --resume auto \
      --save r.h5 2> rf.log || fail "final resume: $(tail -3 rf.log)"
  grep -q "resuming from R/ckpt-0*$S.h5: step $S" rf.log || fail "did not resume at $S: $(grep -i resum rf.log)"
  "$W" "${M1000[@]}" --max-steps $END --save ref.h5 2> ref.log || fail "reference: $(tail -3 ref.log)"
  same_params ref.h5 r.h5 "3 x kill -9 + resume to step $END"
  ;;

damaged)
  mkdir D
  "$W" "${MLP[@]}" --max-steps 9 --checkpoint-dir D --checkpoint-every 3 --keep 3 2> d1.log || fail "run: $(tail -3 d1.log)"
  flip_byte_in D/ckpt-00000009.h5 /model/fc1/weight
  head -c 400000 D/ckpt-00000006.h5 > D/t && mv D/t D/ckpt-00000006.h5
  cp D/ckpt-00000009.h5 corrupt9.h5
  "$CK" verify D/ckpt-00000009.h5 > v9.out; rc=$?
  [ $rc -eq 1 ] && grep -q "/model/fc1/weight" v9.out && grep -qi "checksum\|crc" v9.out ||
    { cat v9.out; fail "verify of the corrupt file: rc $rc"; }
  echo "ok: verify corrupt -> $(grep BAD v9.out | head -1)"
  "$CK" verify D/ckpt-00000006.h5 > v6.out; rc=$?
  [ $rc -eq 1 ] && grep -q "truncated" v6.out || { cat v6.out; fail "verify of the truncated file: rc $rc"; }
  echo "ok: verify truncated -> $(head -1 v6.out)"
  "$CK" verify D > vd.out; [ $? -eq 1 ] || fail "verify of the directory should fail"
  grep -q "auto takes D/ckpt-00000003.h5" vd.out || { cat vd.out; fail "verify D"; }
  expect_error "resume from the corrupt file" "ckpt-00000009.h5" \
      "$W" "${MLP[@]}" --max-steps 12 --resume D/ckpt-00000009.h5
  grep 'error:' err.log | grep -q "fc1/weight" || fail "the error does not name the dataset"
  "$W" "${MLP[@]}" --max-steps 12 --checkpoint-dir D --checkpoint-every 3 --keep 3 --resume auto --save d.h5 \
      2> d2.log || fail "auto over damaged files: $(tail -3 d2.log)"
  grep "skipping checkpoint D/ckpt-00000009.h5" d2.log | grep -q "checksum" || fail "no skip message for 9: $(grep WARN d2.log)"
  grep "skipping checkpoint D/ckpt-00000006.h5" d2.log | grep -q "truncated" || fail "no skip message for 6: $(grep WARN d2.log)"
  grep -q "resuming from D/ckpt-00000003.h5: step 3" d2.log || fail "did not fall back to step 3"
  grep WARN d2.log
  cmp -s D/ckpt-00000009.h5.superseded corrupt9.h5 || fail "the damaged file was not kept aside unchanged"
  "$CK" verify D > vd2.out || { cat vd2.out; fail "D after the resumed run"; }
  "$W" "${MLP[@]}" --max-steps 12 --save ref.h5 2> ref.log || fail "reference: $(tail -3 ref.log)"
  same_params ref.h5 d.h5 "resume over damaged files"
  ;;

mismatch)
  mkdir M
  "$W" "${MLP[@]}" --max-steps 4 --checkpoint-dir M --checkpoint-every 2 2> m.log || fail "run: $(tail -3 m.log)"
  before=$(snapshot M)
  C640=("${CNN[@]}")
  set_flag C640 --max-train-samples 640
  expect_error "another model" "/model/conv1/weight" "$W" "${C640[@]}" --max-steps 6 \
      --checkpoint-dir M --checkpoint-every 2 --resume auto
  grep 'error:' err.log | grep -q "mnist_mlp" || fail "the error does not name the checkpoint's model"
  expect_error "another seed" "--seed 1" "$W" "${MLP[@]}" --seed 2 --max-steps 6 --checkpoint-dir M \
      --checkpoint-every 2 --resume auto
  expect_error "another optimiser" "adadelta" "$W" "${MLP[@]}" --optimizer sgd --max-steps 6 --checkpoint-dir M \
      --checkpoint-every 2 --resume auto
  M320=("${MLP[@]}")
  set_flag M320 --max-train-samples 320
  expect_error "another epoch size" "max_train_samples" "$W" "${M320[@]}" --max-steps 6 \
      --checkpoint-dir M --checkpoint-every 2 --resume auto
  "$W" "${MLP[@]}" --max-steps 2 --save w.h5 2> w.log || fail "weights: $(tail -3 w.log)"
  expect_error "a weights file" "weights file" "$W" "${MLP[@]}" --max-steps 6 --resume w.h5
  expect_error "a fresh run into a directory with checkpoints" "--resume auto" "$W" "${MLP[@]}" --max-steps 6 \
      --checkpoint-dir M --checkpoint-every 2
  [ "$before" = "$(snapshot M)" ] || fail "the checkpoint directory changed"
  echo "ok: nothing in M changed"
  ;;

dirs)
  expect_error "missing directory" "$T/nope" "$W" "${MLP[@]}" --max-steps 2 --checkpoint-dir "$T/nope" --checkpoint-every 1
  expect_error "missing directory for auto" "$T/nope" "$W" "${MLP[@]}" --max-steps 2 --checkpoint-dir "$T/nope" --resume auto
  touch afile
  expect_error "a path under a file" "Not a directory" "$W" "${MLP[@]}" --max-steps 2 --checkpoint-dir "$T/afile/sub" \
      --checkpoint-every 1
  expect_error "a missing resume file" "no such file" "$W" "${MLP[@]}" --max-steps 2 --resume "$T/nothing.h5"
  expect_error "every without a directory" "checkpoint.dir" "$W" "${MLP[@]}" --max-steps 2 --checkpoint-every 1
  # An empty auto directory: a fresh start, said so.
  mkdir E
  "$W" "${MLP[@]}" --max-steps 2 --checkpoint-dir E --checkpoint-every 1 --resume auto 2> e.log || fail "empty auto dir"
  grep -q "no checkpoint in E; starting fresh" e.log || fail "no fresh-start message: $(grep -i resume e.log)"
  echo "ok: --resume auto on an empty directory starts fresh and says so"
  # A read-only directory holding checkpoints: saving is refused before training, resuming (reading) works.
  mkdir RO
  "$W" "${MLP[@]}" --max-steps 2 --checkpoint-dir RO --checkpoint-every 2 2> ro0.log || fail "run: $(tail -3 ro0.log)"
  chmod 555 RO
  before=$(snapshot RO)
  RUN=()
  if [ "$(id -u)" -ne 0 ]; then
    RUN=()
  elif unshare -m true 2>/dev/null; then
    # Root ignores permissions: a read-only bind mount in a private mount namespace really refuses writes.
    RUN=(unshare -m sh -c 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && shift && exec "$@"' "$T/RO" --)
  elif command -v setpriv > /dev/null && setpriv --reuid=65534 --regid=65534 --clear-groups true 2>/dev/null; then
    chmod 755 "$T"
    RUN=(setpriv --reuid=65534 --regid=65534 --clear-groups)
  else
    skip "root without mount namespaces or setpriv: the read-only case cannot be made to fail here"
  fi
  "${RUN[@]}" "$W" "${MLP[@]}" --max-steps 4 --checkpoint-dir "$T/RO" --checkpoint-every 2 --resume auto > out.log 2> err.log
  rc=$?
  [ $rc -ne 0 ] && grep 'error:' err.log | grep -q "cannot write checkpoints into $T/RO" ||
    fail "read-only directory: rc $rc: $(tail -3 err.log)"
  echo "ok: read-only directory -> $(grep 'error:' err.log)"
  "${RUN[@]}" "$W" "${MLP[@]}" --max-steps 4 --checkpoint-dir "$T/RO" --resume auto 2> ro.log ||
    fail "resume from a read-only directory: $(tail -3 ro.log)"
  grep -q "resuming from $T/RO/ckpt-00000002.h5" ro.log || fail "did not resume from the read-only directory"
  echo "ok: resuming from the read-only directory works (reading only)"
  [ "$before" = "$(snapshot RO)" ] || fail "the read-only directory changed"
  ;;

disk_full)
  # A real full disk: a 3 MiB tmpfs in a private mount namespace holds two MLP checkpoints (1.2 MB
  # each), not three. Training must stop with an error naming the file and the reason, the earlier
  # checkpoints and the manifest intact, no temporary left behind.
  if unshare -m true 2>/dev/null; then NS=(unshare -m)
  elif unshare -r -m true 2>/dev/null; then NS=(unshare -r -m)
  else skip "no mount namespaces here (unshare -m): cannot make a small file system"; fi
  mkdir F
  cat > full.sh <<EOF
set -u
mount -t tmpfs -o size=3m odltest "$T/F" || exit 99
"$W" ${MLP[@]} --max-steps 20 --checkpoint-dir "$T/F" --checkpoint-every 2 --keep 5 --metrics-out "$T/f.jsonl" \
    > "$T/f.out" 2> "$T/f.err"
echo \$? > "$T/f.rc"
ls -la "$T/F" > "$T/f.ls"
cat "$T/F/manifest.json" > "$T/f.manifest"
"$CK" verify "$T/F" > "$T/f.verify"; echo \$? > "$T/f.vrc"
EOF
  "${NS[@]}" bash full.sh; nsrc=$?
  [ $nsrc -ne 99 ] || skip "cannot mount a tmpfs in a mount namespace"
  rc=$(cat f.rc)
  cat f.ls
  [ "$rc" -eq 1 ] || fail "training with a full disk: exit status $rc, expected 1: $(tail -3 f.err)"
  [ "$(grep -c 'error:' f.err)" -eq 1 ] || fail "not one error line: $(tail -5 f.err)"
  grep 'error:' f.err | grep -q "No space left on device" || fail "the error does not say the disk is full: $(grep 'error:' f.err)"
  grep 'error:' f.err | grep -q "ckpt-00000006.h5" || fail "the error does not name the file: $(grep 'error:' f.err)"
  echo "ok: full disk -> $(grep 'error:' f.err | cut -c1-300)"
  grep -q "ckpt-00000002.h5" f.ls && grep -q "ckpt-00000004.h5" f.ls || fail "earlier checkpoints missing"
  ! grep -q "\.tmp" f.ls || fail "a temporary file was left behind"
  grep -q '"latest": "ckpt-00000004.h5"' f.manifest || fail "manifest: $(cat f.manifest)"
  [ "$(cat f.vrc)" -eq 0 ] || { cat f.verify; fail "the earlier checkpoints do not verify"; }
  ! grep -q '"event":"done"' f.jsonl || fail "training went on to the end"
  grep -q "training stops" f.err || fail "no message that training stops"
  echo "ok: steps 2 and 4 intact and verified, the manifest names step 4, training stopped before its end"
  ;;

tool)
  mkdir C
  "$W" "${MLP[@]}" --max-steps 4 --checkpoint-dir C --checkpoint-every 4 --save w.h5 2> t.log || fail "run: $(tail -3 t.log)"
  F=C/ckpt-00000004.h5
  "$CK" inspect "$F" > i.out; rc=$?
  [ $rc -eq 0 ] || { cat i.out; fail "inspect: rc $rc"; }
  for s in "format:          odl-checkpoint, version 1" "step:            4" "epoch:           1 (0 completed" \
           "sample cursor:   256" "optimizer:       adadelta, step 4" "/model/fc1/weight" "[128, 784]" \
           "/optim/fc2/bias/acc_delta" "max_train_samples: 640" "14 datasets verified"; do
    grep -qF -- "$s" i.out || { cat i.out; fail "inspect does not show '$s'"; }
  done
  echo "ok: inspect shows step, epoch, cursor, optimiser, tensors, config; exit 0"
  "$CK" verify w.h5 > wv.out || { cat wv.out; fail "verify of the --save file"; }
  grep -q "odl-weights file, 4 datasets verified" wv.out || fail "weights verify: $(cat wv.out)"
  "$CK" inspect w.h5 --no-config | grep -q "format:          odl-weights" || fail "inspect weights"
  "$CK" diff w.h5 "$F" > /dev/null || fail "the --save weights differ from the checkpoint's parameters"
  echo "ok: --save writes the same format (odl-weights), equal to the checkpoint's /model"
  "$CK" latest C | grep -q "C/ckpt-00000004.h5" || fail "latest"
  "$CK" > /dev/null 2>&1; [ $? -eq 2 ] || fail "usage exit status"
  "$CK" verify "$T/missing.h5" > /dev/null; [ $? -eq 1 ] || fail "verify of a missing file"
  echo "not hdf5" > bad.h5
  "$CK" verify bad.h5 > b.out; [ $? -eq 1 ] && grep -q "not an HDF5 file" b.out || fail "verify of a non-HDF5 file: $(cat b.out)"
  echo "ok: exit status 2 for usage, 1 for bad files"
  if command -v h5dump > /dev/null; then
    h5dump -H "$F" > /dev/null || fail "h5dump cannot read $F"
    h5dump -a /train/step "$F" | grep -q "(0): 4" || fail "h5dump /train@step"
    echo "ok: h5dump reads the checkpoint"
  fi
  if python3 -c "import h5py" 2>/dev/null; then
    python3 - "$F" <<'EOF' || fail "h5py cannot read the checkpoint"
import sys, zlib, h5py, numpy as np
with h5py.File(sys.argv[1], "r") as f:
    assert f.attrs["format"] == "odl-checkpoint", f.attrs["format"]
    assert int(f["train"].attrs["step"]) == 4
    for name in ("model/fc1/weight", "optim/fc1/weight/square_avg", "train/counters"):
        d = f[name]
        raw = np.ascontiguousarray(d[()]).astype(d.dtype.newbyteorder("<")).tobytes()
        assert zlib.crc32(raw) == int(d.attrs["crc32"]), name
    assert f["model/fc1/weight"].shape == (128, 784)
print("ok: h5py reads the checkpoint and its crc32 attributes match zlib.crc32")
EOF
  else
    echo "note: h5py is not installed; the h5py check is skipped"
  fi
  ;;

world_size)
  # A checkpoint of a 2-rank job resumed by 1 rank, and the reverse: the epoch continues from the
  # global sample cursor (each sample once: the epoch ends exactly when the cursor reaches 640), the
  # loss continues.
  command -v mpirun > /dev/null || skip "no mpirun"
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  MPI=(mpirun --oversubscribe -np 2)
  "${MPI[@]}" "$W" "${MLP[@]}" --batch-size 32 --max-steps 1 > p.out 2> p.log
  grep -q "world size 2" p.log || skip "odl_worker does not run data-parallel under mpirun here: $(tail -2 p.log)"
  mkdir S2 S1
  # 2 ranks x 32 = 64 per step; stop with the checkpoint at step 3 (cursor 192).
  "${MPI[@]}" "$W" "${MLP[@]}" --batch-size 32 --max-steps 3 --checkpoint-dir S2 --checkpoint-every 3 2> s2.log ||
    fail "2 ranks: $(tail -3 s2.log)"
  "$CK" inspect S2/ckpt-00000003.h5 --no-config > i2.out
  grep -q "world size:      2" i2.out && grep -q "sample cursor:   192" i2.out || { cat i2.out; fail "2-rank checkpoint"; }
  # 1 rank x 48 from cursor 192: 448 left = 9 steps of 48 + one of 16; the epoch ends at step 13.
  "$W" "${MLP[@]}" --batch-size 48 --max-steps 14 --checkpoint-dir S2 --checkpoint-every 3 --resume auto \
      --metrics-out s21.jsonl 2> s21.log || fail "resume with 1 rank: $(tail -3 s21.log)"
  grep -q "world size 2, this one has 1" s21.log || fail "no world-size message"
  grep -q '"event":"epoch","epoch":1,"step":13,' s21.jsonl || { cat s21.jsonl; fail "2 -> 1: the epoch did not end at step 13"; }
  "$CK" inspect S2/ckpt-00000012.h5 --no-config | grep -q "epoch so far:    624 samples" ||
    fail "2 -> 1: step 12 should have seen 192 + 9 x 48 = 624 samples of the epoch"
  [ -f S2/ckpt-00000014.h5 ] || fail "no final checkpoint after the last step (14, not a multiple of 3)"
  echo "ok: 2 -> 1 ranks: epoch 1 ended at step 13 with the cursor at 640 (each sample once)"
  # 1 rank x 64, checkpoint at step 3 (cursor 192), resumed by 2 ranks x 40: 448 left = 5 steps of
  # 80 + one of 48; the epoch ends at step 9.
  "$W" "${MLP[@]}" --max-steps 3 --checkpoint-dir S1 --checkpoint-every 3 --metrics-out s1.jsonl 2> s1.log ||
    fail "1 rank: $(tail -3 s1.log)"
  "${MPI[@]}" "$W" "${MLP[@]}" --batch-size 40 --max-steps 10 --checkpoint-dir S1 --checkpoint-every 3 --resume auto \
      --metrics-out s12.jsonl 2> s12.log || fail "resume with 2 ranks: $(tail -3 s12.log)"
  grep -q "world size 1, this one has 2" s12.log || fail "no world-size message"
  grep -q '"event":"epoch","epoch":1,"step":9,' s12.jsonl || { cat s12.jsonl; fail "1 -> 2: the epoch did not end at step 9"; }
  "$CK" inspect S1/ckpt-00000006.h5 --no-config | grep -q "epoch so far:    432 samples" ||
    fail "1 -> 2: step 6 should have seen 192 + 3 x 80 = 432 samples"
  echo "ok: 1 -> 2 ranks: epoch 1 ended at step 9 with the cursor at 640 (each sample once)"
  # The loss continues: the resumed epoch's mean loss is that of a trained, not a fresh, model.
  for f in s21.jsonl s12.jsonl; do
    l=$(sed -n 's/.*"event":"epoch","epoch":2,.*"train_loss":\([0-9.]*\).*/\1/p' $f | head -1)
    [ -z "$l" ] && l=$(sed -n 's/.*"train_loss":\([0-9.]*\).*/\1/p' $f | tail -1)
    awk -v l="$l" 'BEGIN { exit !(l > 0 && l < 1.5) }' || fail "$f: loss $l does not continue training (fresh: about 2.3)"
    echo "ok: $f: train loss $l after the world-size change"
  done
  ;;

gpu)
  # The same stop + resume on a CUDA device, and the stall of a device-to-host checkpoint copy. Bit
  # for bit when two uninterrupted runs are (deterministic kernels); otherwise only said.
  # 20 steps an epoch and the test set's first 1,000 at the end: small enough for compute-sanitizer's
  # racecheck, which checks every shared-memory access of every launch; ODL_TEST_QUICK (bench/sanitize_gpu.sh
  # sets it): 10 steps an epoch, 30 in all, stopped after 5
  N=1280 STEPS=60 STOP=10
  case ${ODL_TEST_QUICK:-} in ""|0) ;; *) N=640 STEPS=30 STOP=5 ;; esac
  G=(--task=train --model=mnist --device cuda "--data_dir=$FM" --max-train-samples $N --batch-size 64 --epochs 3
     --test-batch-size 1000 --max-test-samples 1000 --progress off --train.eval_every_epoch=false)
  if ! "$W" "${G[@]}" --max-steps 1 > g.out 2> g.log; then
    grep -q "no CUDA device" g.log && skip "no usable CUDA device: $(grep 'error:' g.log)"
    fail "the one-step probe: $(tail -3 g.log)"
  fi
  mkdir A B
  "$W" "${G[@]}" --max-steps $STEPS --checkpoint-dir A --checkpoint-every $STOP --metrics-out a.jsonl --save a.h5 2> a.log ||
    fail "uninterrupted run: $(tail -3 a.log)"
  "$W" "${G[@]}" --max-steps $STEPS --save a2.h5 2> a2.log || fail "second uninterrupted run: $(tail -3 a2.log)"
  # Stop inside the first epoch, so that the resumed run prints every epoch line of run A.
  "$W" "${G[@]}" --max-steps $STOP --checkpoint-dir B --checkpoint-every $STOP 2> b.log || fail "first part: $(tail -3 b.log)"
  "$W" "${G[@]}" --max-steps $STEPS --checkpoint-dir B --checkpoint-every $STOP --resume auto --metrics-out c.jsonl --save c.h5 \
      2> c.log || fail "resumed run: $(tail -3 c.log)"
  grep -q "resuming from $(printf 'B/ckpt-%08d.h5' $STOP): step $STOP" c.log || fail "did not resume from step $STOP"
  grep "step loop stalled\|checkpoints:" a.log
  if "$CK" diff a.h5 a2.h5 > /dev/null; then
    same_params a.h5 c.h5 "CUDA stop + resume"
    same_loss_lines a.jsonl c.jsonl "CUDA stop + resume"
  else
    echo "note: two uninterrupted CUDA runs differ (non-deterministic kernels): resume checked, not bit for bit"
    "$CK" diff a.h5 c.h5 | tail -3
  fi
  ;;

*) fail "unknown case $CASE" ;;
esac
echo "PASS $CASE"
