# Op-by-op verification of every op of odl/ops.h against the float64 reference (tests/ops_ref.c), on the
# CPU (label unit) and, in a second entry, on CUDA device 0 (label gpu; exits 77 = skipped without one).
# Run one op with e.g. `build/tests/test_ops --backend cpu --op conv2d_bwd --seed 123`.
odl_add_test(test_ops SOURCES test_ops.c ops_ref.c LABELS unit ARGS --backend cpu TIMEOUT 300)
add_test(NAME test_ops_gpu COMMAND test_ops --backend cuda)
set_tests_properties(test_ops_gpu PROPERTIES TIMEOUT 600 LABELS gpu SKIP_RETURN_CODE 77
  ENVIRONMENT "ODL_TEST_DATA=$ENV{ODL_TEST_DATA};ODL_TEST_DATA_DEFAULT=${ODL_TEST_DATA_DEFAULT};ODL_SOURCE_DIR=${PROJECT_SOURCE_DIR};ODL_BINARY_DIR=${PROJECT_BINARY_DIR}")
