# shellcheck shell=bash
# On the lent GPU machine, in the repository root: `source bench/device_unpack.sh SRC` (SRC from
# bench/device_pack.sh, carried; sourced, not run: it sets the caller's environment). Unpacks SRC/build.txz
# into build/ (replacing it; a build made in another folder has ctest's files pointed at build/ and this
# checkout, and build/ goes on LD_LIBRARY_PATH after the rest), puts SRC/lib on LD_LIBRARY_PATH (from
# /opt/odl-deps/lib, or $ODL_UNPACK_LIB_DIR: outside the checkout, which a later call may not carry), and
# sets ODL_FMNIST_DIR and
# ODL_TEST_DATA where SRC has them. SRC from `device_pack.sh --synth`: yolov5_synth_gpu's fixture into the
# build/ unpacked before (and the library folder on LD_LIBRARY_PATH again: each call is a new shell).
# Returns 2 when it cannot unpack.
if ! (return 0 2>/dev/null); then
  echo "device_unpack: error: source it (source bench/device_unpack.sh SRC): run, it cannot set your environment" >&2
  exit 2
fi
odl_unpack_src=$(cd "${1:?usage: source bench/device_unpack.sh SRC}" && pwd)
odl_unpack_lib=${ODL_UNPACK_LIB_DIR:-/opt/odl-deps/lib}
mkdir -p "$odl_unpack_lib" && cp "$odl_unpack_src"/lib/* "$odl_unpack_lib"/ 2>/dev/null
case ":${LD_LIBRARY_PATH:-}:" in
  *":$odl_unpack_lib:"*) ;;
  *) export LD_LIBRARY_PATH=$odl_unpack_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} ;;
esac
if [ -f "$odl_unpack_src/synth.txz" ]; then
  if [ -d build ] && tar xJf "$odl_unpack_src/synth.txz" -C build; then
    true
  else
    echo "device_unpack: error: cannot unpack $odl_unpack_src/synth.txz into build/ (unpack the build first)" >&2
    return 2
  fi
elif rm -rf build && mkdir -p build && tar xJf "$odl_unpack_src/build.txz" -C build; then
  # a build made in another folder (a worktree's) names that folder in ctest's files and in its run path:
  # ctest's files are pointed here, and build/ goes on LD_LIBRARY_PATH for libodl
  odl_unpack_was_b=$(sed -n 's/^CMAKE_CACHEFILE_DIR:INTERNAL=//p' build/CMakeCache.txt 2>/dev/null)
  odl_unpack_was_s=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' build/CMakeCache.txt 2>/dev/null)
  if [ -n "$odl_unpack_was_b" ] && [ -n "$odl_unpack_was_s" ] && [ "$odl_unpack_was_b" != "$PWD/build" ]; then
    find build -name CTestTestfile.cmake -exec sed -i "s#$odl_unpack_was_b#$PWD/build#g; s#$odl_unpack_was_s#$PWD#g" {} +
  fi
  case ":$LD_LIBRARY_PATH:" in
    *":$PWD/build:"*) ;;
    *) export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$PWD/build ;;
  esac
  [ -d "$odl_unpack_src/fmnist" ] && export ODL_FMNIST_DIR=$odl_unpack_src/fmnist
  [ -d "$odl_unpack_src/data" ] && export ODL_TEST_DATA=$odl_unpack_src/data
  if ldd build/odl_worker | grep -q "not found"; then echo "device_unpack: missing libraries:"; ldd build/odl_worker | grep "not found"; fi
  true
else
  echo "device_unpack: error: cannot unpack $odl_unpack_src/build.txz" >&2
  return 2
fi
