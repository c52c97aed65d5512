#!/bin/sh
# Every `ctest -L gpu` test under compute-sanitizer memcheck, racecheck, initcheck and synccheck, with the
# count of errors per tool (bench/README.md "Sanitizers on the GPU tests"; the logic is bench/sanitize_gpu.py):
#   bench/sanitize_gpu.sh [OUT_DIR] [--build DIR] [--tools memcheck,racecheck,...] [-R REGEX] [-E REGEX]
#                         [-j N] [--timeout S] [--deadline S]
# Binaries from $ODL_BUILD (default build/, a CUDA build). Last line `sanitize_gpu: 0 errors` and exit 0,
# or what broke and exit 1; 3 when nothing could run (no compute-sanitizer, no GPU).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
py=/usr/bin/python3
[ -x "$py" ] || py=python3
exec "$py" "$here/sanitize_gpu.py" "$@"
