# Tensor-core GEMM (odl_backend.gemm_lowp, TF32 and BF16 inputs with float32 accumulation) against the
# float64 reference: the CPU backend's emulation (unit) and the CUDA kernels of kernels/cuda/gemm_tc.cu
# on device 0 (gpu; 77 = skipped without one). `build/tests/test_gemm_tc --backend cuda --seed N`.
# Its cases are test_ops's GEMM cases (tests/gemm_cases.h).
set(_quick "")
if(ODL_ASAN) # the small cases only: 7 min under ASan otherwise
  set(_quick --quick)
endif()
odl_add_test(test_gemm_tc SOURCES test_gemm_tc.c ops_ref.c LABELS unit ARGS --backend cpu ${_quick} TIMEOUT 300)
odl_add_gpu_test(test_gemm_tc_gpu COMMAND test_gemm_tc --backend cuda)
# The same cases on the wgmma kernels of a 9.0 device with the TF32 swap off (an N-major B transposed into a
# copy instead, as the plan still does where A is M-major and the larger operand).
odl_add_gpu_test(test_gemm_tc_gpu_noswap COMMAND test_gemm_tc --backend cuda --quick ENV ODL_GEMM_TF32_SWAP=0)
# odl_worker --precision end to end on the CPU (default fp32 bit for bit; tf32 / bf16 train as well; bad values).
add_test(NAME worker_precision COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_precision_worker.sh $<TARGET_FILE:odl_worker>)
set_tests_properties(worker_precision PROPERTIES LABELS integration TIMEOUT 900 SKIP_RETURN_CODE 77)
# SASS of the sm_90a objects: every wgmma GEMM kernel issues HGMMA (no GPU needed; cuobjdump from PATH or the
# tests' venv, else skipped).
if(ODL_HAVE_CUDA)
  add_test(NAME sass_hgmma COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/sass_hgmma.sh $<TARGET_FILE:odl>)
  set_tests_properties(sass_hgmma PROPERTIES LABELS unit TIMEOUT 300 SKIP_RETURN_CODE 77)
endif()
# The tuned GEMM table and ODL_GEMM_CONFIG (kernels/gemm_table.c): read back, other GPUs' rows and damaged
# lines not taken, the forced configuration parsed whole. No GPU.
odl_add_test(test_gemm_table SOURCES test_gemm_table.c INTERNAL LABELS unit TIMEOUT 60)
# Tensor-core convolutions (odl_backend.conv2d_*_lowp, TF32 and BF16 operands with float32 accumulation)
# against the float64 reference: the CPU twin (unit) and kernels/cuda/conv2d_tc.cu on device 0 (gpu).
odl_add_test(test_conv_tc SOURCES test_conv_tc.c ops_ref.c LABELS unit ARGS --backend cpu ${_quick} TIMEOUT 300)
odl_add_gpu_test(test_conv_tc_gpu COMMAND test_conv_tc --backend cuda)
# The same cases with every TF32 / BF16 forward and stride-1 data gradient of a 9.0 device on the wgmma kernels
# of conv2d_sm90.cu (ODL_CONV_SM90=2), whatever their tile count: its tails, strides, pads and odd channels,
# from the NHWC copy where the gathered channels are whole 16-byte chunks (4 tf32, 8 bf16).
odl_add_gpu_test(test_conv_tc_gpu_sm90 COMMAND test_conv_tc --backend cuda ENV ODL_CONV_SM90=2)
# ... with the window patch on (ODL_CONV_PATCH=1): every stride-1 case on conv_patch_sm90_kernel (channels
# padded to whole slabs; C40 W200 with one patch buffer for two slabs),
odl_add_gpu_test(test_conv_tc_gpu_sm90_patch COMMAND test_conv_tc --backend cuda ENV ODL_CONV_SM90=2 ODL_CONV_PATCH=1)
# ... and with the NHWC copy off (ODL_CONV_NHWC=0): every case on the NCHW gather of the register-A kernel
# (the first test takes it only where the channels are not whole 16-byte chunks).
odl_add_gpu_test(test_conv_tc_gpu_sm90_nchw COMMAND test_conv_tc --backend cuda ENV ODL_CONV_SM90=2 ODL_CONV_NHWC=0)
# ... and with the weight gradient's other producers (ODL_CONV_WGRAD_PRODUCER 0: one warpgroup of 4-byte copies;
# 1: one warpgroup, dy's rows in 16-byte copies where P*Q % 32 == 0, as MNIST conv2's 24 x 24; the default 2 adds a
# second producer warpgroup),
foreach(v 0 1)
  odl_add_gpu_test(test_conv_tc_gpu_sm90_wgrad${v} COMMAND test_conv_tc --backend cuda ENV ODL_CONV_SM90=2 ODL_CONV_WGRAD_PRODUCER=${v})
endforeach()
# ... and with the BF16 weight gradient reading rounded copies of its operands (ODL_CONV_WGRAD_BF16_STAGE=0; by
# default it rounds them in shared memory, db fused as TF32's: the rounded-input bound of test_conv_tc checks both,
# and each run compares the two ways' dw bit for bit),
odl_add_gpu_test(test_conv_tc_gpu_sm90_wgrad_bf16copies COMMAND test_conv_tc --backend cuda ENV ODL_CONV_SM90=2 ODL_CONV_WGRAD_BF16_STAGE=0)
# ... and with the bias gradient in a pass of its own (ODL_CONV_WGRAD_BIAS=0; on by default, the weight gradients
# sum it: db against the float64 reference either way).
odl_add_gpu_test(test_conv_tc_gpu_sm90_wgrad_nobias COMMAND test_conv_tc --backend cuda ENV ODL_CONV_SM90=2 ODL_CONV_WGRAD_BIAS=0)
