#!/bin/sh
# Data-parallel training on one node: one odl_worker rank per GPU, started by mpirun.
#
#   launch/odl_mpirun.sh --model=mnist --data_dir=/usr/share/datasets/fashion-mnist --epochs 1
#
# Every argument goes to `odl_worker --task=train`; --batch-size is per rank (the global batch is
# NPROC times it). Variables (see docs/distributed.md):
#   NPROC        ranks; default: the number of GPUs (nvidia-smi -L), or 2 CPU ranks without GPUs
#   ODL_WORKER   the odl_worker binary; default: build/odl_worker beside this script, else PATH
#   MPIRUN       the mpirun to use (default: mpirun on PATH)
#   MPIRUN_ARGS  extra mpirun arguments (default: --bind-to none, so that each rank's loader thread and
#                CPU kernels are not pinned to one core)
#   ODL_TASK     odl_worker task (default: train)
# NCCL_* and CUDA_* variables are passed to every rank; NCCL_NVLS_ENABLE defaults to 0 (NVLink
# multicast off; set it to 1 yourself where multicast is wanted and safe).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
worker="${ODL_WORKER:-}"
if [ -z "$worker" ]; then
    if [ -x "$here/../build/odl_worker" ]; then worker="$here/../build/odl_worker"
    else worker=$(command -v odl_worker || true); fi
fi
if [ -z "$worker" ] || [ ! -x "$worker" ]; then
    echo "odl_mpirun.sh: error: odl_worker not found (build it, or set ODL_WORKER=/path/to/odl_worker)" >&2
    exit 2
fi
mpirun="${MPIRUN:-mpirun}"
if ! command -v "$mpirun" >/dev/null 2>&1; then
    echo "odl_mpirun.sh: error: $mpirun not found (install openmpi-bin, or set MPIRUN)" >&2
    exit 2
fi
np="${NPROC:-}"
if [ -z "$np" ]; then
    np=0
    if command -v nvidia-smi >/dev/null 2>&1; then np=$(nvidia-smi -L 2>/dev/null | grep -c "^GPU" || true); fi
    [ "$np" -gt 0 ] || np=2
fi
export NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"
extra="${MPIRUN_ARGS:---bind-to none}"
flags=""
if "$mpirun" --version 2>/dev/null | grep -q "Open MPI"; then
    [ "$(id -u)" = 0 ] && flags="--allow-run-as-root"
    # More ranks than cores is fine for CPU ranks on a small machine.
    flags="$flags --oversubscribe"
    # Pass the variables that matter to every rank (needed when ranks start on other nodes).
    for v in $(env | sed -n 's/^\(\(NCCL\|CUDA\|ODL\|OMP\)_[A-Za-z0-9_]*\)=.*/\1/p'); do flags="$flags -x $v"; done
fi
echo "odl_mpirun.sh: $np ranks of $worker" >&2
# shellcheck disable=SC2086
exec "$mpirun" $flags $extra -np "$np" "$worker" --task="${ODL_TASK:-train}" "$@"
