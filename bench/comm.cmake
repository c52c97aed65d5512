# AllReduce benchmark of the communication layer beside raw NCCL (bench/allreduce_bench.c).
# Included by bench/CMakeLists.txt: include(${CMAKE_CURRENT_SOURCE_DIR}/comm.cmake)
# Needs CUDA, NCCL and MPI; run with one rank per GPU: mpirun -np 2 bench/allreduce_bench
# (bench/run_x2.sh runs it with the 1- and 2-GPU training comparison).
if(ODL_HAVE_NCCL AND ODL_HAVE_MPI)
  add_executable(allreduce_bench ${CMAKE_CURRENT_LIST_DIR}/allreduce_bench.c)
  target_link_libraries(allreduce_bench PRIVATE odl ${ODL_PRIVATE_LIBS})
  target_include_directories(allreduce_bench PRIVATE ${PROJECT_SOURCE_DIR})
else()
  message(STATUS "allreduce_bench: not built (needs NCCL and MPI)")
endif()
