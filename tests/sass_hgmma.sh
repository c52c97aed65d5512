#!/usr/bin/env bash
# The Hopper GEMM kernels of libodl.so are wgmma kernels: in cuobjdump --dump-sass of the library every
# gemm_sm90_kernel instantiation (kernels/cuda/gemm_sm90_kernel.cuh: 3 tiles x (4 bf16 + 4 f16 layouts + 2
# tf32: K-major, and the swapped product with A from registers)) holds HGMMA instructions, 4 per kernel at
# least (one per K step of a 128-byte stage), and so do the convolution kernels of kernels/cuda/conv2d_sm90.cu
# (conv_fwd_sm90_kernel with the NCHW and the NHWC gather and conv_patch_sm90_kernel, in TF32 and BF16, for
# channel tiles of 32 and 64; conv_wgrad_sm90_kernel with one and two producer warpgroups) and
# kernels/cuda/conv2d_f16_sm90.cu (conv_f16_sm90_kernel:
# channel tiles of 16, 32, 64 and 128, half and float output).
# No GPU needed. cuobjdump: on PATH, else the venv's PyPI wheel (launch/install_deps.sh, ODL_TEST_DEPS=1);
# exit 77 (skipped) when there is none.
#   tests/sass_hgmma.sh build/libodl.so
set -uo pipefail
lib=${1:?libodl.so}
venv=${ODL_TEST_VENV:-/opt/odl-test-venv}
cuobj=$(command -v cuobjdump || ls "$venv"/lib/python3*/site-packages/nvidia/cu*/bin/cuobjdump 2>/dev/null | head -1)
if [ -z "$cuobj" ] || [ ! -x "$cuobj" ]; then
  echo "sass_hgmma: skipped: no cuobjdump (pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm into $venv)"
  exit 77
fi
export PATH="$(dirname "$cuobj"):$PATH" # its nvdisasm beside it
sass=$(mktemp)
trap 'rm -f "$sass"' EXIT
if ! "$cuobj" --dump-sass "$lib" >"$sass" 2>&1; then
  echo "sass_hgmma: FAIL: $cuobj --dump-sass $lib: $(head -3 "$sass")"
  exit 1
fi
awk '
  /Function :/ { fn = $3; if (fn ~ /gemm_sm90_kernel|conv_fwd_sm90_kernel|conv_patch_sm90_kernel|conv_wgrad_sm90_kernel|conv_f16_sm90_kernel/) { kernels[fn] = 0 } }
  /HGMMA/ { if (fn in kernels) kernels[fn]++; else other++ }
  END {
    n = 0; bad = 0; min = 1e9; max = 0;
    for (k in kernels) { n++; c = kernels[k]; if (c < min) min = c; if (c > max) max = c; if (c < 4) { bad++; print "sass_hgmma: FAIL: " c " HGMMA in " k } }
    if (n < 52) { print "sass_hgmma: FAIL: " n " wgmma kernel instantiations in the SASS, 52 expected"; bad++ }
    if (!bad) printf "sass_hgmma: ok: %d wgmma GEMM and convolution kernels, %d..%d HGMMA each\n", n, min, max;
    exit bad ? 1 : 0
  }' "$sass"
