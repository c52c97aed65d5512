# The GPU machine's tooling, checked without a GPU. bench/sanitize_gpu.sh (every gpu test under compute-sanitizer):
#   sanitize_gpu_selftest   unit: a stand-in compute-sanitizer's error summaries are added up per tool, the
#                           test with errors is named, exit 1; all zero: `sanitize_gpu: 0 errors`, exit 0;
#                           and bench/gpu_long_run.sh's named runs side by side, waited for and collected,
#                           and its start-sweep parts, which put every gpu test under every tool exactly once
add_test(NAME sanitize_gpu_selftest
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/sanitize_gpu_selftest.sh ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
set_tests_properties(sanitize_gpu_selftest PROPERTIES TIMEOUT 120 LABELS unit)

# bench/device_pack.sh / device_unpack.sh (what a call to the lent GPU machine carries), without one:
#   device_pack       unit: a stand-in build, Fashion-MNIST and data packed and unpacked elsewhere; --synth
add_test(NAME device_pack
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/device_pack_test.sh ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
set_tests_properties(device_pack PROPERTIES TIMEOUT 120 LABELS unit)
# bench/env_ab.sh's table (bench/env_ab_table.py: an ODL_* variable's A/B on the GPU machine) on real logs.
add_test(NAME env_ab_table COMMAND bash ${PROJECT_SOURCE_DIR}/tests/env_ab_table.sh ${PROJECT_SOURCE_DIR})
set_tests_properties(env_ab_table PROPERTIES TIMEOUT 60 LABELS unit)
