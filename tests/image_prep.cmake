# The device image pipeline (odl/gpu_prep.h) and the nvJPEG loader (odl/nvjpeg.h), tests/test_gpu_prep.c:
#   gpu_prep_nvjpeg_absent       unit: no nvJPEG library (ODL_NVJPEG_LIBRARY names no file): the loader says
#                                "nvJPEG not available", every image decodes on the CPU, bitwise the CPU path
#   gpu_prep_nvjpeg_fake         unit: nvJPEG through the stand-in tests/fake_nvjpeg.c on the CPU device: the
#                                baseline/grey/EXIF JPEGs through it (hardware backend), progressive, CMYK, PNG
#                                and refused ones on the CPU, corrupt files one error each, a failed nvJPEG
#                                batch decoded again on the CPU; bitwise the CPU path
#   gpu_prep_nvjpeg_fake_hybrid  unit: the same where the hardware backend reports ARCH_MISMATCH (hybrid)
#   gpu_prep_gpu                 gpu: the real GPU and nvJPEG: CPU-decoded images bitwise, nvJPEG-decoded ones
#                                within the pixel bounds of test_gpu_prep.c; exit 77 without a GPU
if(ODL_HAVE_JPEG AND ODL_HAVE_PNG)
  add_library(fake_nvjpeg MODULE fake_nvjpeg.c)
  target_link_libraries(fake_nvjpeg PRIVATE JPEG::JPEG)
  set_target_properties(fake_nvjpeg PROPERTIES PREFIX "" OUTPUT_NAME "fake_libnvjpeg")
  odl_add_test(gpu_prep_nvjpeg_absent SOURCES test_gpu_prep.c ARGS absent LABELS unit TIMEOUT 300)
  set_tests_properties(gpu_prep_nvjpeg_absent PROPERTIES
    ENVIRONMENT "${ODL_TEST_ENV};ODL_NVJPEG_LIBRARY=/nonexistent/libnvjpeg.so.13")
  add_test(NAME gpu_prep_nvjpeg_fake COMMAND gpu_prep_nvjpeg_absent fake $<TARGET_FILE:fake_nvjpeg>)
  add_test(NAME gpu_prep_nvjpeg_fake_hybrid COMMAND gpu_prep_nvjpeg_absent fake $<TARGET_FILE:fake_nvjpeg>)
  set_tests_properties(gpu_prep_nvjpeg_fake PROPERTIES TIMEOUT 300 LABELS unit SKIP_RETURN_CODE 77
    ENVIRONMENT "${ODL_TEST_ENV};ODL_NVJPEG_LIBRARY=$<TARGET_FILE:fake_nvjpeg>")
  set_tests_properties(gpu_prep_nvjpeg_fake_hybrid PROPERTIES TIMEOUT 300 LABELS unit SKIP_RETURN_CODE 77
    ENVIRONMENT "${ODL_TEST_ENV};ODL_NVJPEG_LIBRARY=$<TARGET_FILE:fake_nvjpeg>;FAKE_NVJPEG_NO_HW=1")
  add_dependencies(gpu_prep_nvjpeg_absent fake_nvjpeg)
  add_test(NAME gpu_prep_gpu COMMAND gpu_prep_nvjpeg_absent cuda)
  set_tests_properties(gpu_prep_gpu PROPERTIES TIMEOUT 600 LABELS gpu SKIP_RETURN_CODE 77 ENVIRONMENT "${ODL_TEST_ENV}")
endif()
