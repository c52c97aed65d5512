# Checkpoints (docs/checkpoints.md): library and session unit tests, the sampler's cursor across world
# sizes, and end-to-end odl_worker runs on Fashion-MNIST (bit-exact resume, kill -9, damaged files,
# directories, a full disk, the odl_ckpt tool, a world-size change under mpirun).
odl_add_test(test_ckpt SOURCES test_ckpt.c LABELS unit TIMEOUT 120)
odl_add_test(test_ckpt_sampler SOURCES test_ckpt_sampler.c LABELS unit TIMEOUT 120)
foreach(case bitexact kill_random damaged mismatch dirs disk_full tool world_size)
  add_test(NAME ckpt_${case} COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_ckpt_resume.sh $<TARGET_FILE:odl_worker>
    $<TARGET_FILE:odl_ckpt> ${case})
  set(labels integration fault)
  if(case STREQUAL "world_size")
    set(labels integration mpi)
  endif()
  set_tests_properties(ckpt_${case} PROPERTIES LABELS "${labels}" TIMEOUT 900 SKIP_RETURN_CODE 77
    ENVIRONMENT "ODL_TEST_DATA_DEFAULT=${ODL_TEST_DATA_DEFAULT}")
endforeach()
add_test(NAME ckpt_gpu COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_ckpt_resume.sh $<TARGET_FILE:odl_worker>
  $<TARGET_FILE:odl_ckpt> gpu)
set_tests_properties(ckpt_gpu PROPERTIES LABELS gpu TIMEOUT 900 SKIP_RETURN_CODE 77
  ENVIRONMENT "ODL_TEST_DATA_DEFAULT=${ODL_TEST_DATA_DEFAULT}")
