# The coordinator's cost to a training step on the worker's side (bench/coord_step_cost.c); no GPU
# needed. Included by bench/CMakeLists.txt. Run: bench/coord_step_cost.sh BUILD_DIR (starts a serving
# odl_coordinator on loopback and runs coord_step_cost against it).
if(TARGET odl_coordinator)
  add_executable(coord_step_cost ${CMAKE_CURRENT_LIST_DIR}/coord_step_cost.c)
  target_link_libraries(coord_step_cost PRIVATE odl ${ODL_PRIVATE_LIBS})
  target_include_directories(coord_step_cost PRIVATE ${PROJECT_SOURCE_DIR})
endif()
