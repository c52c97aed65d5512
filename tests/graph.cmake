# CUDA graphs of the training step (issue 22; worker/train_step.h): the step's scalars in device memory
# (update count, dropout offset, learning rate, Adam's bias corrections) against the host-scalar ops, the
# step object against the plain forward/backward/optimiser loop (CPU, label unit) and, on CUDA (label gpu;
# exit 77 without a device), graph replays against op-by-op steps bit for bit, and odl_worker end to end.
odl_add_test(test_step_scalars SOURCES test_step_scalars.c LABELS unit TIMEOUT 120)
add_test(NAME test_step_scalars_gpu COMMAND test_step_scalars --device cuda)
set_tests_properties(test_step_scalars_gpu PROPERTIES LABELS gpu TIMEOUT 300 SKIP_RETURN_CODE 77)
# (the ASan build runs it --quick: fewer steps of each kind, 15 min otherwise)
set(_quick "")
if(ODL_ASAN)
  set(_quick --quick)
endif()
odl_add_test(test_train_step SOURCES test_train_step.c ${PROJECT_SOURCE_DIR}/worker/train_step.c LABELS unit TIMEOUT 300
  ARGS ${_quick})
add_test(NAME test_train_step_gpu COMMAND test_train_step --device cuda)
set_tests_properties(test_train_step_gpu PROPERTIES LABELS gpu TIMEOUT 600 SKIP_RETURN_CODE 77)
# ... and with the optimiser's per-parameter calls instead of the grouped one (ODL_OPTIM_GROUP=0; the same bits)
add_test(NAME test_train_step_optim_each COMMAND test_train_step --quick)
set_tests_properties(test_train_step_optim_each PROPERTIES LABELS unit TIMEOUT 300 ENVIRONMENT ODL_OPTIM_GROUP=0)
odl_add_gpu_test(test_train_step_gpu_optim_each COMMAND test_train_step --device cuda --quick ENV ODL_OPTIM_GROUP=0)
if(TARGET odl_worker AND TARGET odl_ckpt)
  foreach(case equal precision resume cli fuse fuse_cpu)
    add_test(NAME train_graph_${case} COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_train_graph.sh
      $<TARGET_FILE:odl_worker> $<TARGET_FILE:odl_ckpt> ${case})
    set(labels gpu)
    if(case STREQUAL "cli" OR case STREQUAL "fuse_cpu")
      set(labels integration)
    endif()
    set_tests_properties(train_graph_${case} PROPERTIES LABELS "${labels}" TIMEOUT 900 SKIP_RETURN_CODE 77)
  endforeach()
  # graph replays against op-by-op steps with conv1's ReLU backward inside its weight gradient (the opt-in
  # ODL_CONV_WGRAD_RELU) beside conv2's fp32 bias gradient summed in its own (ODL_CONV_WGRAD_BIAS_FMA, the
  # default, set here so that the case stays if the default changes): captured as well as run
  add_test(NAME train_graph_equal_wgrad_fused COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_train_graph.sh
    $<TARGET_FILE:odl_worker> $<TARGET_FILE:odl_ckpt> equal)
  set_tests_properties(train_graph_equal_wgrad_fused PROPERTIES LABELS gpu TIMEOUT 900 SKIP_RETURN_CODE 77
    ENVIRONMENT "ODL_CONV_WGRAD_RELU=1;ODL_CONV_WGRAD_BIAS_FMA=1")
endif()
