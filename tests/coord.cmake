# The coordinator (docs/coordinator.md): wire codec, fault parser, fuzzing, and real processes on
# loopback (odl_coordinator supervising mpirun-launched odl_worker ranks).
#   test_coord_wire          unit: frame codec bad inputs, HMAC binding, ODL_FAULT parser
#   test_coord_fuzz          unit: libFuzzer on the frame decoder for 20 s (clang builds only)
#   coord_<case>             fault/integration: tests/coord_test.sh <case>
if(NOT ODL_HAVE_COORDINATOR)
  return()
endif()
odl_add_test(test_coord_wire SOURCES test_coord_wire.c LABELS unit TIMEOUT 60)
target_include_directories(test_coord_wire PRIVATE ${PROJECT_BINARY_DIR})

find_program(ODL_CLANG clang)
if(ODL_CLANG)
  # Built directly with clang -fsanitize=fuzzer (the project's compiler may be gcc).
  set(_fz ${CMAKE_CURRENT_BINARY_DIR}/fuzz_coord_wire)
  add_custom_command(OUTPUT ${_fz}
    COMMAND ${ODL_CLANG} -g -O1 -fsanitize=fuzzer,address,undefined -DODL_HAVE_COORDINATOR=1 -D_GNU_SOURCE
            -I${PROJECT_SOURCE_DIR} -I${PROJECT_SOURCE_DIR}/include -I${PROJECT_BINARY_DIR}
            ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_coord_wire.c ${PROJECT_SOURCE_DIR}/comm/coord_wire.c
            ${PROJECT_SOURCE_DIR}/core/status.c ${PROJECT_BINARY_DIR}/proto/odl.pb-c.c
            ${PROTOBUFC_LINK_LIBRARIES} ${SODIUM_LINK_LIBRARIES} -o ${_fz}
    DEPENDS fuzz_coord_wire.c ${PROJECT_SOURCE_DIR}/comm/coord_wire.c ${PROJECT_SOURCE_DIR}/core/status.c
            ${PROJECT_BINARY_DIR}/proto/odl.pb-c.c
    COMMENT "clang libFuzzer target fuzz_coord_wire" VERBATIM)
  add_custom_target(fuzz_coord_wire_bin ALL DEPENDS ${_fz})
  add_dependencies(fuzz_coord_wire_bin odl)
  add_test(NAME test_coord_fuzz COMMAND sh -c "mkdir -p corpus && exec ${_fz} -max_total_time=20 -max_len=4096 -timeout=10 -rss_limit_mb=1024 corpus"
    WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
  set_tests_properties(test_coord_fuzz PROPERTIES TIMEOUT 120 LABELS unit)
endif()
