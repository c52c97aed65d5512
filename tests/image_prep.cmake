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
#   infer_device                 integration: odl_worker --task=infer on the device path (--backend-post, and
#                                with the stand-in nvJPEG) = the CPU path byte for byte (detections.json, drawn
#                                images, errors) over the reference images and test_gpu_prep's mixed files
#   infer_device_gpu             gpu: the same folder on CUDA (nvJPEG, and --decoder cpu) against the CPU path
if(ODL_HAVE_JPEG AND ODL_HAVE_PNG AND TARGET odl_worker)
  foreach(_m cpu cuda)
    set(_n infer_device)
    set(_l integration)
    if(_m STREQUAL cuda)
      set(_n infer_device_gpu)
      set(_l gpu)
    endif()
    add_test(NAME ${_n} COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/infer_device.sh $<TARGET_FILE:odl_worker>
             ${PROJECT_BINARY_DIR}/yolov5n.h5 $<TARGET_FILE:gpu_prep_nvjpeg_absent> $<TARGET_FILE:fake_nvjpeg> ${_m})
    set_tests_properties(${_n} PROPERTIES TIMEOUT 900 LABELS ${_l} SKIP_RETURN_CODE 77
      FIXTURES_REQUIRED yolov5_weights ENVIRONMENT "${ODL_TEST_ENV}")
  endforeach()
endif()
