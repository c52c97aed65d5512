# Communication layer and data-parallel training (issue: data-parallel training across MPI ranks).
#   test_comm                 unit: launcher detection, GPU choice, local group, bucket assignment
#   test_comm_mpi_np2/np4     unit;mpi: collectives, agreement, buckets, broadcast/check over 2 and 4 ranks
#   test_comm_hang            fault;mpi: a rank that never joins an AllReduce -> watchdog ends the job
#   test_comm_dp_equivalence  integration;mpi: odl_worker 1x64 vs 2x32 vs 4x16 on Fashion-MNIST, same params
#   test_comm_worker_faults   fault;mpi: a failing rank / a stopped rank / no GPU end the job with a message
#   test_comm_slurm_local     integration;mpi: a one-node Slurm cluster on localhost runs launch/odl.sbatch
# MPI runs go through tests/comm_mpirun.sh (adds --oversubscribe and, as root, --allow-run-as-root).
odl_add_test(test_comm SOURCES test_comm.c LABELS unit TIMEOUT 60)

if(ODL_HAVE_MPI)
  # Open MPI keeps allocations past MPI_Finalize that LeakSanitizer reports; our own leaks are checked
  # by the single-process tests.
  set(_comm_env "ODL_SOURCE_DIR=${PROJECT_SOURCE_DIR};ODL_BINARY_DIR=${PROJECT_BINARY_DIR};ASAN_OPTIONS=detect_leaks=0")

  add_executable(test_comm_mpi test_comm_mpi.c)
  target_link_libraries(test_comm_mpi PRIVATE odl ${ODL_PRIVATE_LIBS})
  target_include_directories(test_comm_mpi PRIVATE ${PROJECT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/tests)
  foreach(_np 2 4)
    add_test(NAME test_comm_mpi_np${_np}
      COMMAND sh ${PROJECT_SOURCE_DIR}/tests/comm_mpirun.sh ${_np} $<TARGET_FILE:test_comm_mpi>)
    set_tests_properties(test_comm_mpi_np${_np} PROPERTIES TIMEOUT 180 LABELS "unit;mpi" SKIP_RETURN_CODE 77
      ENVIRONMENT "${_comm_env}")
  endforeach()

  add_test(NAME test_comm_hang
    COMMAND sh ${PROJECT_SOURCE_DIR}/tests/comm_hang.sh ${PROJECT_SOURCE_DIR} $<TARGET_FILE:test_comm_mpi>)
  set_tests_properties(test_comm_hang PROPERTIES TIMEOUT 120 LABELS "fault;mpi" SKIP_RETURN_CODE 77
    ENVIRONMENT "${_comm_env}")

  add_executable(comm_compare_params comm_compare_params.c)
  target_link_libraries(comm_compare_params PRIVATE odl ${ODL_PRIVATE_LIBS})
  target_include_directories(comm_compare_params PRIVATE ${PROJECT_SOURCE_DIR})

  if(TARGET odl_worker)
    add_test(NAME test_comm_dp_equivalence
      COMMAND sh ${PROJECT_SOURCE_DIR}/tests/comm_dp_equivalence.sh ${PROJECT_SOURCE_DIR}
              $<TARGET_FILE:odl_worker> $<TARGET_FILE:comm_compare_params>)
    set_tests_properties(test_comm_dp_equivalence PROPERTIES TIMEOUT 900 LABELS "integration;mpi"
      SKIP_RETURN_CODE 77 ENVIRONMENT "${_comm_env}")
    add_test(NAME test_comm_worker_faults
      COMMAND sh ${PROJECT_SOURCE_DIR}/tests/comm_worker_faults.sh ${PROJECT_SOURCE_DIR} $<TARGET_FILE:odl_worker>)
    set_tests_properties(test_comm_worker_faults PROPERTIES TIMEOUT 300 LABELS "fault;mpi"
      SKIP_RETURN_CODE 77 ENVIRONMENT "${_comm_env}")
    add_test(NAME test_comm_slurm_local
      COMMAND sh ${PROJECT_SOURCE_DIR}/tests/slurm_local.sh ${PROJECT_SOURCE_DIR} $<TARGET_FILE:odl_worker>)
    set_tests_properties(test_comm_slurm_local PROPERTIES TIMEOUT 600 LABELS "integration;mpi"
      SKIP_RETURN_CODE 77 ENVIRONMENT "${_comm_env}" RUN_SERIAL TRUE)
  endif()
endif()
