# Durable file replacement (odl/file.h, issue 24).
#   test_durable_writes fault;mpi: every file the programs replace -- the coordinator's job-directory files,
#                       the fence list, hostfiles, the Xid history, checkpoints and manifests, the metrics
#                       file rewritten on resume -- is fsynced before its rename and its directory after it
#                       (tests/fsync_shim.c logs the calls under LD_PRELOAD, tests/fsync_check.py checks
#                       them and that each writer ran); the check catches a writer that skips the folder.
#                       Not in ASan builds (a preloaded library would come before the sanitizer's runtime).
add_library(fsync_shim MODULE fsync_shim.c)
target_link_libraries(fsync_shim PRIVATE ${CMAKE_DL_LIBS})
if(TARGET odl_worker AND TARGET odl_coordinator AND ODL_HAVE_MPI AND NOT ODL_ASAN)
  add_test(NAME test_durable_writes
    COMMAND sh ${PROJECT_SOURCE_DIR}/tests/durable_writes.sh ${PROJECT_SOURCE_DIR} $<TARGET_FILE:odl_worker>
            $<TARGET_FILE:odl_coordinator> $<TARGET_FILE:odl_health> $<TARGET_FILE:fsync_shim>)
  # RUN_SERIAL: emulated nodes, as test_health_supervised
  set_tests_properties(test_durable_writes PROPERTIES TIMEOUT 400 LABELS "fault;mpi" SKIP_RETURN_CODE 77 RUN_SERIAL TRUE)
endif()
