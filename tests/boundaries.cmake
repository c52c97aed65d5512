# Library boundaries (issue 11): the HDF5 reader entries the models use, and the layering check.
odl_add_test(test_h5io_reader SOURCES test_h5io_reader.c LABELS unit TIMEOUT 60)
# The environment-variable table (odl/env.h) against docs/environment.md, bad values, odl_worker's exit.
odl_add_test(test_env SOURCES test_env.c LABELS unit TIMEOUT 60)
# Layering (docs/DESIGN.md's list): includes and calls of each layer folder, HDF5 only in core/h5io.c,
# the installed libodl.so exporting only the ODL_API functions of include/odl, and no circle of calls
# among the files of odl_worker and of odl_coordinator.
find_program(ODL_LAYERING_PYTHON NAMES python3 python)
# Rule 4: no two files of worker/ (or of coordinator/) call each other, directly or round a circle.
set(_layering_programs --program worker=${PROJECT_BINARY_DIR}/CMakeFiles/odl_worker.dir/worker)
if(TARGET odl_coordinator)
  list(APPEND _layering_programs --program coordinator=${PROJECT_BINARY_DIR}/coordinator/CMakeFiles/odl_coordinator.dir)
endif()
add_test(NAME test_layering COMMAND ${ODL_LAYERING_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/layering.py
  ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR} ${_layering_programs})
set_tests_properties(test_layering PROPERTIES LABELS unit TIMEOUT 120)
# The Detect decoding op of the backend table against float64 (CPU: unit; CUDA device 0: gpu).
odl_add_test(test_detect_decode SOURCES test_detect_decode.c LABELS unit TIMEOUT 60)
add_test(NAME test_detect_decode_gpu COMMAND test_detect_decode --backend cuda)
set_tests_properties(test_detect_decode_gpu PROPERTIES LABELS gpu TIMEOUT 120 SKIP_RETURN_CODE 77)
# nn's functions for what callers used to do by hand: binding a batch's buffers, the dropout RNG offset.
odl_add_test(test_nn_batch SOURCES test_nn_batch.c LABELS unit TIMEOUT 60)
# odl_cuda_shutdown: ODL_E_BUSY with live allocations, the backend's workspace released through its table.
odl_add_test(test_device_shutdown SOURCES test_device_shutdown.c LABELS gpu TIMEOUT 120)
