# The long run (bench/soak.sh, docs/coordinator.md "Soak"): one supervised job on emulated nodes under a
# seeded random fault every 10-20 s of every kind, then its checks.
#   soak           soak: 2 minutes (about 8 faults), every check passes: parameters equal a fault-free replay,
#                  every sample of every completed epoch once, no leftover, disk and memory bounded, every
#                  fault named and recovered from. Alone on the machine (RUN_SERIAL): its time limits are
#                  the coordinator's.
#   soak_planted   soak: a planted lost sample and leftover process: the soak says so and exits 1
if(ODL_HAVE_COORDINATOR AND ODL_HAVE_MPI AND TARGET odl_worker AND TARGET comm_compare_params)
  add_test(NAME soak COMMAND sh ${PROJECT_SOURCE_DIR}/bench/soak.sh 2 ${CMAKE_CURRENT_BINARY_DIR}/soak.out
           --build ${PROJECT_BINARY_DIR})
  add_test(NAME soak_planted COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/soak_planted.sh ${PROJECT_SOURCE_DIR}
           ${PROJECT_BINARY_DIR})
  set_tests_properties(soak soak_planted PROPERTIES TIMEOUT 600 LABELS soak RUN_SERIAL TRUE SKIP_RETURN_CODE 77)
endif()
#   soak_eval      soak: one rank and an evaluation job every 4 s beside it (bench/soak_eval.py), every
#                  metrics.json equal to an unsupervised evaluation's; and with --plant eval-differs the
#                  differing one named, exit 1 (tests/soak_eval.sh)
if(ODL_HAVE_COORDINATOR AND ODL_HAVE_MPI AND TARGET odl_worker AND TARGET comm_compare_params)
  add_test(NAME soak_eval COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/soak_eval.sh ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
  set_tests_properties(soak_eval PROPERTIES TIMEOUT 600 LABELS soak RUN_SERIAL TRUE SKIP_RETURN_CODE 77
    FIXTURES_REQUIRED yolov5_weights ENVIRONMENT "ODL_TEST_DATA=$ENV{ODL_TEST_DATA};ODL_TEST_DATA_DEFAULT=${ODL_TEST_DATA_DEFAULT}")
endif()
