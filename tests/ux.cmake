# What users meet first (issue 17): bad inputs, JSON outputs, the command line, logs and metrics,
# evaluation and fine-tuning of saved weights, TensorBoard files, detect.py habits.
odl_add_test(test_ux_inputs SOURCES test_ux_inputs.c LABELS unit TIMEOUT 120)
