#!/usr/bin/env bash
# What a call to the lent GPU machine carries (at most 64 MiB with the checkout), packed on this machine:
#   bench/device_pack.sh DEST [--build DIR] [--fmnist DIR] [--data DIR] [--data-full]
#   bench/device_pack.sh DEST --synth [--build DIR]      (nothing else with it)
# DEST/build.txz: the build (default build/) packed with xz, less objects, static libraries, test outputs
# and fixtures (yolov5n.h5 stays: make it first with `ctest -R '^yolov5_convert$'`); DEST/lib: the
# libjpeg the build links, which the machine's image lacks; --fmnist: Fashion-MNIST's four .gz files
# (30 MB: the soak and the training tests); --data: of ../shared/data, the coco8 set, the images and the
# reference JSON files (2 MB: the soak's evaluations, eval/infer/detect tests); --data-full: all of it
# (37 MB: in a call of its own). --synth packs only yolov5_synth_gpu's fixture (DEST/synth.txz: the build's
# yolov5_synth.d/synth.h5 and synth_ref.h5, made here by a Python with h5py, which the machine lacks; 39 MB)
# for a later call, the build unpacked before staying on the warm machine.
# On the machine: `source bench/device_unpack.sh DEST`.
set -euo pipefail
dest=${1:?usage: bench/device_pack.sh DEST [--build DIR] [--fmnist DIR] [--data DIR] [--data-full] | DEST --synth [--build DIR]}
shift
build=build fmnist="" data="" full=0 synth=0
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --fmnist) fmnist=$2; shift 2 ;;
    --data) data=$2; shift 2 ;;
    --data-full) full=1; shift ;;
    --synth) synth=1; shift ;;
    *) echo "device_pack: error: unknown option $1" >&2; exit 2 ;;
  esac
done
if [ $synth = 1 ]; then
  [ -z "$fmnist$data" ] && [ $full = 0 ] ||
    { echo "device_pack: error: --synth packs the fixture alone (no --fmnist, --data, --data-full)" >&2; exit 2; }
  [ -f "$build/yolov5_synth.d/synth.h5" ] && [ -f "$build/yolov5_synth.d/synth_ref.h5" ] ||
    { echo "device_pack: error: no $build/yolov5_synth.d/synth{,_ref}.h5: run \`ctest -R '^yolov5_synth_convert$'\` first" >&2; exit 2; }
  rm -rf "$dest" && mkdir -p "$dest"
  tar cJf "$dest/synth.txz" -C "$build" yolov5_synth.d/synth.h5 yolov5_synth.d/synth_ref.h5
  echo "device_pack: $dest: $(du -sm "$dest" | cut -f1) MiB (yolov5_synth_gpu's fixture)"
  exit 0
fi
[ -x "$build/odl_worker" ] || { echo "device_pack: error: no $build/odl_worker: build first" >&2; exit 2; }
[ -f "$build/yolov5n.h5" ] || echo "device_pack: note: no $build/yolov5n.h5 (the YOLOv5 runs need it)" >&2
rm -rf "$dest" && mkdir -p "$dest/lib"
tar cJf "$dest/build.txz" --exclude='*.o' --exclude='*.a' --exclude=odl_bench_kernels --exclude='CMakeFiles/*.dir' \
  --exclude=Testing --exclude='CMakeFiles/CheckCUDA' --exclude='CMakeFiles/3.*' --exclude='*.out' --exclude='*.d' \
  --exclude=fuzz_coord_wire --exclude=find_package_work -C "$build" .
# awk reads all of ldd's output: an early exit could end ldd with SIGPIPE, which pipefail makes fatal
jpeg=$(ldd "$build/odl_worker" | awk '/libjpeg\.so/ && !seen {print $3; seen = 1}')
[ -n "$jpeg" ] && cp -L "$jpeg" "$dest/lib/"
if [ -n "$fmnist" ]; then mkdir -p "$dest/fmnist" && cp "$fmnist"/*-ubyte.gz "$dest/fmnist/"; fi
if [ -n "$data" ] && [ $full = 1 ]; then
  cp -r "$data" "$dest/data"
elif [ -n "$data" ]; then
  mkdir -p "$dest/data/yolov5/reference"
  cp -r "$data/yolov5/coco8" "$data/yolov5/images" "$dest/data/yolov5/"
  cp "$data"/yolov5/reference/*.json "$dest/data/yolov5/reference/"
fi
chmod -R u+w "$dest"
mib=$(du -sm "$dest" | cut -f1)
echo "device_pack: $dest: $mib MiB ($(du -sh "$dest/build.txz" | cut -f1) build)"
[ "$mib" -le 56 ] || echo "device_pack: warning: $mib MiB with the checkout and .devdeps may pass the 64 MiB a call carries" >&2
