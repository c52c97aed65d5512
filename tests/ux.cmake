# What users meet first (issue 17): bad inputs, JSON outputs, the command line, logs and metrics,
# evaluation and fine-tuning of saved weights, TensorBoard files, detect.py habits.
odl_add_test(test_ux_inputs SOURCES test_ux_inputs.c LABELS unit TIMEOUT 120)
foreach(case version flags outputs_checked progress_lines epochs_resume eval_finetune tensorboard tensorboard_frames plot)
  add_test(NAME ux_cli_${case} COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_ux_cli.sh $<TARGET_FILE:odl_worker>
    $<TARGET_FILE:odl_ckpt> ${case})
  set_tests_properties(ux_cli_${case} PROPERTIES LABELS integration TIMEOUT 600 SKIP_RETURN_CODE 77
    ENVIRONMENT "ODL_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
endforeach()
foreach(case detect_py save_txt nonfinite)
  add_test(NAME ux_infer_${case} COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_ux_infer.sh $<TARGET_FILE:odl_worker>
    ${PROJECT_BINARY_DIR}/yolov5n.h5 ${case})
  set_tests_properties(ux_infer_${case} PROPERTIES LABELS integration TIMEOUT 900 SKIP_RETURN_CODE 77
    FIXTURES_REQUIRED yolov5_weights ENVIRONMENT "ODL_TEST_DATA_DEFAULT=${ODL_TEST_DATA_DEFAULT}")
endforeach()
