# What `odl_worker --version` prints about the build (odl_build_info.h, cmake/OdlBuildInfoWrite.cmake): written
# at configure time, and again by the odl_build_info target before every build of odl_worker, so that it names
# the commit the binaries were built from (bench/sanitize_gpu.py trusts it to tell two builds apart).
if(ODL_HAVE_CUDA)
  string(REPLACE ";" "," ODL_BUILD_CUDA_ARCHS "${CMAKE_CUDA_ARCHITECTURES}")
else()
  set(ODL_BUILD_CUDA_ARCHS "")
endif()
set(ODL_BUILD_VERSION "${PROJECT_VERSION}")
set(ODL_SOURCE_DIR "${PROJECT_SOURCE_DIR}")
set(ODL_BINARY_DIR "${PROJECT_BINARY_DIR}")
include(${CMAKE_CURRENT_LIST_DIR}/OdlBuildInfoWrite.cmake)
add_custom_target(odl_build_info
  COMMAND ${CMAKE_COMMAND} -DODL_SOURCE_DIR=${PROJECT_SOURCE_DIR} -DODL_BINARY_DIR=${PROJECT_BINARY_DIR}
          -DODL_BUILD_VERSION=${PROJECT_VERSION} -DODL_BUILD_CUDA_ARCHS=${ODL_BUILD_CUDA_ARCHS}
          -P ${CMAKE_CURRENT_LIST_DIR}/OdlBuildInfoWrite.cmake
  BYPRODUCTS ${PROJECT_BINARY_DIR}/odl_build_info.h
  COMMENT "odl_build_info.h: the checkout's commit"
  VERBATIM)
include_directories(${PROJECT_BINARY_DIR})
