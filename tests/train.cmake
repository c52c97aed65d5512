# Training: the PyTorch step-by-step reference, end-to-end runs of odl_worker, bad input.
odl_add_test(test_train_ref SOURCES test_train_ref.c LABELS integration TIMEOUT 600)
add_test(NAME test_train_ref_gpu COMMAND test_train_ref --device cuda)
set_tests_properties(test_train_ref_gpu PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 600
  ENVIRONMENT "ODL_TEST_DATA_DEFAULT=${ODL_TEST_DATA_DEFAULT}")
