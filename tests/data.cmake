# Logging, configuration, MNIST IDX loader and HDF5 tensor files.
odl_add_test(test_log SOURCES test_log.c LABELS unit TIMEOUT 60)
# test_config checks the training program's schema (worker/config.c) over the library's YAML engine.
odl_add_test(test_config SOURCES test_config.c ${PROJECT_SOURCE_DIR}/worker/config.c LABELS unit TIMEOUT 60)
odl_add_test(test_mnist_idx SOURCES test_mnist_idx.c LABELS unit TIMEOUT 120)
odl_add_test(test_h5io SOURCES test_h5io.c LABELS unit TIMEOUT 120)
