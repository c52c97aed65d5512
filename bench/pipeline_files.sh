#!/usr/bin/env bash
# The detection benchmarks' file set, as torch_baselines.py's yolov5n_pipeline builds it: the images/ and
# coco8 JPEGs of DATA (../shared/data), sorted, repeated to N, as symbolic links with their labels:
#   bench/pipeline_files.sh DATA N DEST      DEST/images/0000_bus.jpg ..., DEST/labels/0000_bus.txt ...
set -euo pipefail
D=${1:?data dir} n=${2:?file count} ds=${3:?dest}
mapfile -t files < <(ls "$D"/yolov5/images/*.jpg "$D"/yolov5/coco8/images/*/*.jpg | LC_ALL=C sort)
rm -rf "$ds" && mkdir -p "$ds/images" "$ds/labels"
for i in $(seq 0 $((n - 1))); do
  f=${files[$((i % ${#files[@]}))]}
  name=$(printf '%04d_%s' "$i" "$(basename "$f")")
  ln -s "$f" "$ds/images/$name"
  lab="${f%/*}"; lab="${lab/\/images\//\/labels\/}/$(basename "${f%.*}").txt"
  if [ -f "$lab" ]; then ln -s "$lab" "$ds/labels/${name%.*}.txt"; fi
done
