#!/usr/bin/env bash
# bench/device_pack.sh and bench/device_unpack.sh without a GPU machine: a small stand-in build (the real
# odl_worker, so that ldd finds the libjpeg it links), Fashion-MNIST and data trees packed, then unpacked
# in another folder as the machine does; --synth packs the YOLOv5 synthetic fixture alone, unpacked into the
# build unpacked before, and refused where there is none.
#   tests/device_pack_test.sh SRCDIR BUILDDIR
set -u
src=$1 build=$2
tmp=$(mktemp -d /tmp/odl_device_pack.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fail=1; }

b=$tmp/build && mkdir -p "$b/Testing" "$b/yolov5_synth.d" "$b/CMakeFiles/odl.dir"
cp "$build/odl_worker" "$b/" || exit 2
echo weights >"$b/yolov5n.h5"; echo obj >"$b/x.o"; echo t >"$b/Testing/t.log"; echo o >"$b/CMakeFiles/odl.dir/y.o"
echo s >"$b/yolov5_synth.d/synth.h5"; echo r >"$b/yolov5_synth.d/synth_ref.h5"
# made in a worktree's folders: ctest's files name them
printf 'CMAKE_CACHEFILE_DIR:INTERNAL=/elsewhere/wt-build\nCMAKE_HOME_DIRECTORY:INTERNAL=/elsewhere/wt\n' >"$b/CMakeCache.txt"
mkdir -p "$b/tests"
echo 'add_test([=[t]=] "/elsewhere/wt-build/tests/t" "/elsewhere/wt/tests/t.sh")' >"$b/tests/CTestTestfile.cmake"
mkdir -p "$tmp/fm" "$tmp/data/yolov5/coco8/images" "$tmp/data/yolov5/images" "$tmp/data/yolov5/reference" "$tmp/data/mnist"
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
    echo "$f" | gzip >"$tmp/fm/$f.gz"
done
echo j >"$tmp/data/yolov5/coco8/images/a.jpg"; echo j >"$tmp/data/yolov5/images/bus.jpg"
echo '{}' >"$tmp/data/yolov5/reference/boxes.json"; echo h >"$tmp/data/yolov5/reference/big.h5"
echo m >"$tmp/data/mnist/steps.h5"

out=$(bash "$src/bench/device_pack.sh" "$tmp/pack" --build "$b" --fmnist "$tmp/fm" --data "$tmp/data" 2>&1)
rc=$?
list=$(tar tJf "$tmp/pack/build.txz" 2>/dev/null | sed 's|^\./||')
if [ $rc = 0 ] && echo "$list" | grep -qx odl_worker && echo "$list" | grep -qx yolov5n.h5 &&
    ! echo "$list" | grep -q -e '\.o$' -e '^Testing' -e 'yolov5_synth' &&
    [ "$(ls "$tmp/pack/fmnist" | wc -l)" = 4 ] && [ -f "$tmp/pack/data/yolov5/coco8/images/a.jpg" ] &&
    [ -f "$tmp/pack/data/yolov5/reference/boxes.json" ] && [ ! -e "$tmp/pack/data/yolov5/reference/big.h5" ] &&
    [ ! -e "$tmp/pack/data/mnist" ]; then
    ok "pack: the build less objects, test outputs and fixtures; Fashion-MNIST; the YOLOv5 data less the .h5 references"
else bad "pack (exit $rc): $out"; echo "$list"; fi
if ldd "$build/odl_worker" | grep -q 'libjpeg\.so'; then
    if ls "$tmp/pack/lib/" | grep -q '^libjpeg\.so'; then ok "pack: the libjpeg the build links"
    else bad "pack: no libjpeg in $tmp/pack/lib"; fi
fi

mkdir -p "$tmp/machine"
(
    cd "$tmp/machine" || exit 1
    unset ODL_FMNIST_DIR ODL_TEST_DATA
    export ODL_UNPACK_LIB_DIR=$tmp/machine_lib
    # shellcheck source=/dev/null
    source "$src/bench/device_unpack.sh" "$tmp/pack" >/dev/null || exit 1
    [ -x build/odl_worker ] && [ -f build/yolov5n.h5 ] && [ "$ODL_FMNIST_DIR" = "$tmp/pack/fmnist" ] &&
        [ "$ODL_TEST_DATA" = "$tmp/pack/data" ] && [ "${LD_LIBRARY_PATH%%:*}" = "$tmp/machine_lib" ] &&
        case ":$LD_LIBRARY_PATH:" in *":$PWD/build:"*) true ;; *) false ;; esac &&
        [ "$(cat build/tests/CTestTestfile.cmake)" = "add_test([=[t]=] \"$PWD/build/tests/t\" \"$PWD/tests/t.sh\")" ]
) && ok "unpack: build/, ODL_FMNIST_DIR, ODL_TEST_DATA, the library folder first on LD_LIBRARY_PATH and build/ on it, ctest's files pointed here" || bad "unpack"

out=$(bash "$src/bench/device_pack.sh" "$tmp/synth" --synth --build "$b" 2>&1)
rc=$?
if [ $rc = 0 ] && [ "$(tar tJf "$tmp/synth/synth.txz" | sort | tr '\n' ' ')" = "yolov5_synth.d/synth.h5 yolov5_synth.d/synth_ref.h5 " ] &&
    [ ! -e "$tmp/synth/build.txz" ]; then ok "pack --synth: the fixture's two files alone"
else bad "pack --synth (exit $rc): $out"; fi
# a later call is a new shell: the library folder goes back on LD_LIBRARY_PATH
(
    unset LD_LIBRARY_PATH
    export ODL_UNPACK_LIB_DIR=$tmp/machine_lib
    cd "$tmp/machine" && source "$src/bench/device_unpack.sh" "$tmp/synth" && [ "$(cat build/yolov5_synth.d/synth_ref.h5)" = r ] &&
        [ -x build/odl_worker ] && [ "$LD_LIBRARY_PATH" = "$tmp/machine_lib" ]
) && ok "unpack --synth: into the build unpacked before, the library folder on LD_LIBRARY_PATH" || bad "unpack --synth"
mkdir -p "$tmp/bare"
err=$(cd "$tmp/bare" && ODL_UNPACK_LIB_DIR=$tmp/machine_lib && source "$src/bench/device_unpack.sh" "$tmp/synth" 2>&1)
rc=$?
if [ $rc = 2 ] && echo "$err" | grep -q "unpack the build first"; then ok "unpack --synth with no build/: refused (2), says why"
else bad "unpack --synth with no build/ (exit $rc): $err"; fi
# run instead of sourced: refused before it touches build/
err=$(cd "$tmp/machine" && bash "$src/bench/device_unpack.sh" "$tmp/synth" 2>&1)
rc=$?
if [ $rc = 2 ] && echo "$err" | grep -q "source it" && [ -x "$tmp/machine/build/odl_worker" ]; then
    ok "device_unpack.sh run, not sourced: exit 2, build/ untouched"
else bad "device_unpack.sh run, not sourced (exit $rc): $err"; fi
err=$(bash "$src/bench/device_pack.sh" "$tmp/synth3" --synth --build "$b" --data "$tmp/data" 2>&1)
rc=$?
if [ $rc = 2 ] && echo "$err" | grep -q "fixture alone"; then ok "pack --synth with --data: refused"
else bad "pack --synth with --data (exit $rc): $err"; fi
rm "$b/yolov5_synth.d/synth_ref.h5"
err=$(bash "$src/bench/device_pack.sh" "$tmp/synth2" --synth --build "$b" 2>&1)
rc=$?
if [ $rc = 2 ] && echo "$err" | grep -q "yolov5_synth_convert"; then ok "pack --synth without the fixture: exit 2, names the fixture test"
else bad "pack --synth without the fixture (exit $rc): $err"; fi
exit $fail
