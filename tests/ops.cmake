# Op-by-op verification of every op of odl/ops.h against the float64 reference (tests/ops_ref.c), on the
# CPU (label unit) and, in a second entry, on CUDA device 0 (label gpu; exits 77 = skipped without one).
# Run one op with e.g. `build/tests/test_ops --backend cpu --op conv2d_bwd --seed 123`.
odl_add_test(test_ops SOURCES test_ops.c ops_ref.c LABELS unit ARGS --backend cpu TIMEOUT 300)
odl_add_gpu_test(test_ops_gpu COMMAND test_ops --backend cuda TIMEOUT 600)
# The convolutions' backward with the FMA weight gradient leaving db to a pass of its own
# (ODL_CONV_WGRAD_BIAS_FMA=0; test_ops_gpu runs the default, db summed from the weight gradient's reads of dy):
# db against the float64 reference, dw unchanged.
odl_add_gpu_test(test_ops_gpu_wgrad_bias_pass COMMAND test_ops --backend cuda --op conv2d_bwd ENV ODL_CONV_WGRAD_BIAS_FMA=0)
# The convolutions with the FMA kernels' forward and stride-1 data gradient gathering by per-thread divisions
# (ODL_CONV_GATHER_TABLE=0; test_ops_gpu runs the default, a table of the reduction rows in shared memory,
# kernels/cuda/conv2d_tiles.cuh GatherTableTile, with the cases of test_ops.c's conv list for it: pads 0, 1 and
# 2, strides 1 and 2 (forward), tails of N*H*W, split-K ranges, the table full (1152 rows) and the divisions
# past it (1161, 1170 rows), every FMA tile).
odl_add_gpu_test(test_ops_gpu_gather_divide COMMAND test_ops --backend cuda --op conv2d ENV ODL_CONV_GATHER_TABLE=0)
# The float16 NHWC inference entries of the op table (conv2d_f16, maxpool2d_f16, upsample2x_f16, copy_f16,
# nchw_f32_to_nhwc_f16), odl/half.h and odl_conv2d_f16_check, against a float64 reference; CPU (unit) and
# CUDA device 0 (gpu; 77 = skipped without one).
odl_add_test(test_ops_f16 SOURCES test_ops_f16.c LABELS unit ARGS --backend cpu TIMEOUT 300)
odl_add_gpu_test(test_ops_f16_gpu COMMAND test_ops_f16 --backend cuda)
# The same with every convolution the wgmma kernels can take sent to them (kernels/cuda/conv2d_f16_sm90.cu;
# on a device other than 9.0 this is test_ops_f16_gpu again).
odl_add_gpu_test(test_ops_f16_gpu_sm90 COMMAND test_ops_f16 --backend cuda ENV ODL_CONV_F16_SM90=2)
