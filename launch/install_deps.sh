#!/usr/bin/env bash
# Installs OriginDL's build and run dependencies from Debian/Ubuntu packages (run as root or with sudo).
# The CUDA toolkit (nvcc, NCCL, cuBLAS/cuDNN for the benchmarks) is not a Debian package here: when it is
# installed (/usr/local/cuda), the CUDA backend is built; otherwise the build is CPU-only.
set -euo pipefail
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
pkgs=(build-essential cmake pkg-config git
      libopenmpi-dev openmpi-bin libhdf5-dev hdf5-tools zlib1g-dev libyaml-dev
      libjpeg-dev libpng-dev libuv1-dev libprotobuf-c-dev protobuf-c-compiler
      libsodium-dev libmicrohttpd-dev libjansson-dev
      python3 python3-numpy python3-h5py
      dataset-fashion-mnist)
# Extra packages for the integration tests (local Slurm cluster).
# clang: libFuzzer targets; python3-prometheus-client: the /metrics parser test.
# python3-matplotlib: tools/plot_metrics.py's test; python3-venv: the venv below; prometheus: its
# promtool checks and unit-tests the alert rules (launch/prometheus/); xz-utils: bench/device_pack.sh's test.
if [ "${ODL_TEST_DEPS:-0}" = 1 ]; then
  pkgs+=(slurm-wlm munge clang libclang-rt-14-dev python3-prometheus-client python3-matplotlib python3-venv prometheus xz-utils)
fi
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# The TensorBoard read-back test (ux_cli_tensorboard) uses the tensorboard package itself, which Debian
# does not package: pip installs it into a venv ($ODL_TEST_VENV, default /opt/odl-test-venv) that the
# test finds by itself.
# The SASS check of the wgmma kernels (sass_hgmma) needs cuobjdump and nvdisasm, which CUDA toolkits without
# a driver may lack: PyPI's nvidia-cuda-cuobjdump / nvidia-cuda-nvdisasm wheels go into the same venv.
if [ "${ODL_TEST_DEPS:-0}" = 1 ]; then
  VENV=${ODL_TEST_VENV:-/opt/odl-test-venv}
  if ! "$VENV/bin/python3" -c "import tensorboard" 2>/dev/null; then
    $SUDO /usr/bin/python3 -m venv "$VENV"
    $SUDO "$VENV/bin/pip" install -q tensorboard
  fi
  if ! ls "$VENV"/lib/python3*/site-packages/nvidia/cu*/bin/nvdisasm >/dev/null 2>&1; then
    $SUDO "$VENV/bin/pip" install -q "nvidia-cuda-cuobjdump>=13,<14" "nvidia-cuda-nvdisasm>=13,<14"
  fi
fi
echo "dependencies installed"
