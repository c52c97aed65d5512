# The coordinator (docs/coordinator.md): wire codec, fault parser, fuzzing, and real processes on
# loopback (odl_coordinator supervising mpirun-launched odl_worker ranks).
#   test_coord_wire          unit: frame codec bad inputs, HMAC binding, ODL_FAULT parser
#   test_coord_fuzz          unit: libFuzzer on the frame decoder for 20 s (clang builds only)
#   coord_<case>             fault/integration: tests/coord_test.sh <case>
if(NOT ODL_HAVE_COORDINATOR)
  return()
endif()
# INTERNAL: the wire codec is hidden in libodl.so (its protobuf-c types are no public API).
odl_add_test(test_coord_wire INTERNAL SOURCES test_coord_wire.c LABELS unit TIMEOUT 60)
target_include_directories(test_coord_wire PRIVATE ${PROJECT_BINARY_DIR})

find_program(ODL_CLANG clang)
if(ODL_CLANG)
  # Built directly with clang -fsanitize=fuzzer (the project's compiler may be gcc).
  set(_fz ${CMAKE_CURRENT_BINARY_DIR}/fuzz_coord_wire)
  add_custom_command(OUTPUT ${_fz}
    COMMAND ${ODL_CLANG} -g -O1 -fsanitize=fuzzer,address,undefined -DODL_HAVE_COORDINATOR=1 -D_GNU_SOURCE
            -I${PROJECT_SOURCE_DIR} -I${PROJECT_SOURCE_DIR}/include -I${PROJECT_BINARY_DIR}
            ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_coord_wire.c ${PROJECT_SOURCE_DIR}/comm/coord_wire.c
            ${PROJECT_SOURCE_DIR}/core/status.c ${PROJECT_SOURCE_DIR}/core/log.c ${PROJECT_BINARY_DIR}/proto/odl.pb-c.c
            ${PROTOBUFC_LINK_LIBRARIES} ${SODIUM_LINK_LIBRARIES} -o ${_fz}
    DEPENDS fuzz_coord_wire.c ${PROJECT_SOURCE_DIR}/comm/coord_wire.c ${PROJECT_SOURCE_DIR}/core/status.c ${PROJECT_SOURCE_DIR}/core/log.c
            ${PROJECT_BINARY_DIR}/proto/odl.pb-c.c
    COMMENT "clang libFuzzer target fuzz_coord_wire" VERBATIM)
  add_custom_target(fuzz_coord_wire_bin ALL DEPENDS ${_fz})
  add_dependencies(fuzz_coord_wire_bin odl)
  add_test(NAME test_coord_fuzz COMMAND sh -c "mkdir -p corpus && exec ${_fz} -max_total_time=20 -max_len=4096 -timeout=10 -rss_limit_mb=1024 corpus"
    WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
  set_tests_properties(test_coord_fuzz PROPERTIES TIMEOUT 120 LABELS unit)
endif()

add_executable(coord_peer coord_peer.c)
target_link_libraries(coord_peer PRIVATE odl ${ODL_PRIVATE_LIBS})
target_include_directories(coord_peer PRIVATE ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})

if(ODL_HAVE_MPI AND TARGET odl_worker AND TARGET comm_compare_params)
  # coord_test.sh runs the MPI ranks without leak detection, the coordinator with it (ASan builds).
  foreach(case kill hang last_words stop coordinator_restart restart_leftovers refuse bad_input metrics checkpoint_now preempt
               give_up evaluate retain commit_refused write_fails serve_preempt damaged_state
               bad_options two_fenced refused_rank)
    set(labels fault mpi)
    if(case STREQUAL "metrics")
      set(labels integration mpi)
    endif()
    add_test(NAME coord_${case}
      COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/coord_test.sh ${case} ${PROJECT_SOURCE_DIR} $<TARGET_FILE:odl_coordinator>
              $<TARGET_FILE:odl_worker> $<TARGET_FILE:comm_compare_params> $<TARGET_FILE:coord_peer>)
    set_tests_properties(coord_${case} PROPERTIES TIMEOUT 300 LABELS "${labels}" SKIP_RETURN_CODE 77)
  endforeach()
endif()
