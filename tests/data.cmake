# Logging, configuration, MNIST IDX loader and HDF5 tensor files.
odl_add_test(test_log SOURCES test_log.c LABELS unit TIMEOUT 60)
