#!/usr/bin/env bash
# odl_worker --task=infer through the device path (the device image pipeline, letterbox and candidate
# rows on the backend) against the CPU path, over a folder of the 18 reference images and the test
# images of tests/test_gpu_prep.c (progressive, CMYK, grey, PNG, EXIF 2..8, cut short, text, damaged):
#   cpu   CPU device: --backend-post, and --backend-post with the stand-in nvJPEG (tests/fake_nvjpeg.c;
#         --decoder nvjpeg, and auto, which decodes a folder of fewer than 64 images on the CPU),
#         give detections.json, the drawn images and the error lines of the CPU path byte for byte;
#   cuda  the GPU (--decoder nvjpeg) and the GPU with --decoder cpu: both complete with the CPU
#         path's errors; detections within 2 px / 0.02 (nvJPEG) and 1 px / 0.01 (--decoder cpu) of the CPU
#         path's (boxes of confidence >= 0.3); --square with --cuda-graph on: detections.json byte for byte
#         that of --square op by op, the timeline naming its graphs and replays.
# Usage: infer_device.sh WORKER WEIGHTS PREP_TEST FAKE_NVJPEG cpu|cuda; exit 77 without data or weights.
set -u
W=$1 WEIGHTS=$2 PREP=$3 FAKE=$4 MODE=$5
D=${ODL_TEST_DATA:-${ODL_TEST_DATA_DEFAULT:-../shared/data}}
[ -f "$D/yolov5/images/bus.jpg" ] || { echo "SKIP: no reference images in $D (set ODL_TEST_DATA)"; exit 77; }
[ -f "$WEIGHTS" ] || { echo "SKIP: no converted weights at $WEIGHTS (the yolov5_convert test writes them)"; exit 77; }
if [ "$MODE" = cuda ]; then # the GPU case needs a GPU: odl_worker says when it has none
  msg=$("$W" --task=infer --weights "$WEIGHTS" --source "$D/yolov5/images/bus.jpg" --device cuda --no-save-images \
        --output "${TMPDIR:-/tmp}/infer_device_probe.$$" 2>&1 >/dev/null)
  rm -rf "${TMPDIR:-/tmp}/infer_device_probe.$$"
  case $msg in *"no CUDA device"*) echo "SKIP: no CUDA device"; exit 77 ;; esac
fi
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
mkdir -p "$T/in"
"$PREP" write "$T/in" || fail "writing the test images"
cp "$D"/yolov5/images/*.jpg "$D"/yolov5/coco8/images/*/*.jpg "$T/in/"
rm -f "$T/in/fail.jpg" "$T/in/unsup.jpg" # the stand-in's markers: for test_gpu_prep
run() { # NAME [env...] -- args
  local name=$1; shift
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  env "${envs[@]}" "$W" --task=infer --weights "$WEIGHTS" --source "$T/in" --output "$T/$name" --batch-size 6 "$@" \
    >"$T/$name.out" 2>"$T/$name.err"
  echo $? >"$T/$name.rc"
  grep -E "decoding:|image\(s\) done" "$T/$name.err" | sed 's/^.*INFO /  '"$name"': /'
  grep "^odl_worker: error: .*: " "$T/$name.err" | grep -v "image(s) failed" | sed 's/ \[at [^]]*\]//g' | sort >"$T/$name.errors"
}
run cpu -- --device cpu
[ "$(cat "$T/cpu.rc")" = 1 ] || fail "the CPU path should exit 1 (bad images): $(cat "$T/cpu.rc")"
[ "$(wc -l <"$T/cpu.errors")" -eq 3 ] || fail "the CPU path's errors: $(cat "$T/cpu.errors")"
case $MODE in
cpu)
  run bp -- --device cpu --backend-post
  run nv ODL_NVJPEG_LIBRARY="$FAKE" -- --device cpu --backend-post --decoder nvjpeg
  run auto ODL_NVJPEG_LIBRARY="$FAKE" -- --device cpu --backend-post # fewer than 64 images: the CPU decodes
  grep -q "decoding: libjpeg-turbo on the CPU (--decoder auto with fewer than 64 images" "$T/auto.err" ||
    fail "--decoder auto took nvJPEG for $(ls "$T/in" | wc -l) images: $(grep decoding: "$T/auto.err")"
  grep -q "decoding: nvJPEG" "$T/nv.err" || fail "the stand-in nvJPEG was not used: $(cat "$T/nv.err")"
  for v in bp nv auto; do
    [ "$(cat "$T/$v.rc")" = 1 ] || fail "$v: exit $(cat "$T/$v.rc")"
    cmp "$T/cpu/detections.json" "$T/$v/detections.json" || fail "$v: detections.json differs from the CPU path's"
    diff "$T/cpu.errors" "$T/$v.errors" || fail "$v: other errors than the CPU path's"
    for f in "$T"/cpu/*.jpg; do cmp "$f" "$T/$v/$(basename "$f")" || fail "$v: drawn $(basename "$f") differs"; done
  done
  echo "infer device path on the CPU (and with the stand-in nvJPEG): detections, drawn images and errors as the CPU path's"
  ;;
cuda)
  run gpu -- --device cuda --decoder nvjpeg
  run gcpu -- --device cuda --decoder cpu
  # square batches of 6: one shape, so that its second batch is captured and later ones replayed
  run gsq -- --device cuda --decoder cpu --square
  run ggraph -- --device cuda --decoder cpu --square --cuda-graph on
  grep -Eq "; [1-9][0-9]* CUDA graphs, [1-9][0-9]* replays" "$T/ggraph.err" ||
    fail "--cuda-graph on: no graph or replay in the timeline: $(grep timeline "$T/ggraph.err")"
  cmp "$T/gsq/detections.json" "$T/ggraph/detections.json" || fail "--cuda-graph on: detections.json differs"
  for v in gpu gcpu gsq ggraph; do
    [ "$(cat "$T/$v.rc")" = 1 ] || fail "$v: exit $(cat "$T/$v.rc"): $(tail -3 "$T/$v.err")"
    diff "$T/cpu.errors" "$T/$v.errors" || fail "$v: other errors than the CPU path's"
  done
  "$PY" - "$T/cpu/detections.json" "$T/gpu/detections.json" "$T/gcpu/detections.json" <<'PYEOF' || fail "boxes differ"
import json, sys
ref = {d["file"]: d["detections"] for d in json.load(open(sys.argv[1]))}
ok = True
for path, tol_box, tol_conf, what in ((sys.argv[2], 2.0, 0.02, "GPU, nvJPEG where there"), (sys.argv[3], 1.0, 0.01, "GPU, --decoder cpu")):
    got = {d["file"]: d["detections"] for d in json.load(open(path))}
    worst_box = worst_conf = 0.0
    for f, rd in ref.items():
        gd = got.get(f)
        if gd is None:
            print(f"{what}: {f} missing"); ok = False; continue
        for a, b in ((rd, gd), (gd, rd)):
            for x in a:
                if x["conf"] < 0.3: continue
                cand = [y for y in b if y["class_id"] == x["class_id"]]
                d = min((max(abs(p - q) for p, q in zip(x["xyxy"], y["xyxy"])), abs(x["conf"] - y["conf"])) for y in cand) if cand else (1e9, 1e9)
                worst_box, worst_conf = max(worst_box, d[0]), max(worst_conf, d[1])
                if d[0] > tol_box or d[1] > tol_conf:
                    print(f"{what}: {f}: class {x['class_id']} conf {x['conf']}: nearest box {d[0]:.3f} px / {d[1]:.4f} away"); ok = False
    print(f"{what}: largest box difference {worst_box:.3f} px, confidence {worst_conf:.4f} from the CPU path (bounds {tol_box} / {tol_conf})")
sys.exit(0 if ok else 1)
PYEOF
  ;;
*) fail "mode $MODE" ;;
esac
