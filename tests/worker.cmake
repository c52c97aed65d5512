# odl_worker end to end on the CPU: accuracy on real Fashion-MNIST, step limits, bad input.
foreach(case cnn_accuracy mlp_accuracy max_steps mnist_t10k_loads bad_truncated bad_labels bad_dir bad_config)
  add_test(NAME worker_${case} COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_worker.sh $<TARGET_FILE:odl_worker> ${case})
  set_tests_properties(worker_${case} PROPERTIES LABELS integration TIMEOUT 900 SKIP_RETURN_CODE 77
    ENVIRONMENT "ODL_TEST_DATA_DEFAULT=${ODL_TEST_DATA_DEFAULT}")
endforeach()
