# `cmake --install` then find_package(odl) from another project, built and run; every installed header
# compiles alone and together with only the installed headers (none of jansson, HDF5, ... reachable).
add_test(NAME install_find_package
  COMMAND ${CMAKE_COMMAND} -DBUILD=${PROJECT_BINARY_DIR} -DSRC=${CMAKE_CURRENT_SOURCE_DIR}/find_package
          -DWORK=${CMAKE_CURRENT_BINARY_DIR}/find_package_work -P ${CMAKE_CURRENT_SOURCE_DIR}/find_package/run.cmake)
set_tests_properties(install_find_package PROPERTIES LABELS integration TIMEOUT 300)
