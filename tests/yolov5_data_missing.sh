#!/bin/sh
# Without the test data (ODL_TEST_DATA naming an empty folder) the YOLOv5 reference tests skip (exit 77)
# with one line naming the missing file, before their device is set up: a failure after the CUDA device
# and its pool are up leaked the pool (memcheck, 2026-12-07: 2.6 GB when a sanitizer run lacked the data).
#   yolov5_data_missing.sh DETECT_EXE FORWARD_EXE WEIGHTS WORK_DIR
set -u
detect=$1 forward=$2 weights=$3 work=$4
rm -rf "$work" && mkdir -p "$work/empty" || exit 2
[ -f "$weights" ] || { echo "SKIP: no $weights (the yolov5_convert fixture)"; exit 77; }
fails=0
check() { # name, command...
    name=$1
    shift
    ODL_TEST_DATA=$work/empty "$@" >"$work/$name.out" 2>&1
    rc=$?
    if [ $rc -ne 77 ] || ! grep -q "SKIP: reference data $work/empty/yolov5/reference/" "$work/$name.out"; then
        echo "FAIL: $name: exit $rc (want 77 and a SKIP line naming the reference file); its output:"
        sed 's/^/  /' "$work/$name.out" | head -20
        fails=$((fails + 1))
    else
        echo "ok: $name: $(grep 'SKIP:' "$work/$name.out")"
    fi
}
check detect_rect "$detect" cpu rect --weights="$weights"
check detect_square "$detect" cpu square --weights="$weights"
check forward_bus640 "$forward" cpu bus640 --weights="$weights"
[ $fails -eq 0 ] && echo "yolov5_data_missing: 3 checks, 0 failed" && exit 0
echo "yolov5_data_missing: 3 checks, $fails failed"
exit 1
