# YOLOv5 inference: converter, images and letterbox, NMS, forward and detections against the official
# outputs in ../shared/data/yolov5/reference, bad input and the odl_worker --task=infer command line.
#
# The converter runs with a python3 that can import h5py and numpy (Debian's /usr/bin/python3 first;
# the pyenv python3 on PATH usually has no h5py). It writes ${PROJECT_BINARY_DIR}/yolov5n.h5, the
# fixture `yolov5_weights` that the C tests require; without such a python they skip (exit 77).
set(ODL_YOLO_PYTHON "")
find_program(ODL_PY_DEBIAN python3 PATHS /usr/bin NO_DEFAULT_PATH)
find_program(ODL_PY_ON_PATH NAMES python3 python)
foreach(_py ${ODL_PY_DEBIAN} ${ODL_PY_ON_PATH})
  if(NOT ODL_YOLO_PYTHON AND _py)
    execute_process(COMMAND ${_py} -c "import h5py, numpy" RESULT_VARIABLE _rc OUTPUT_QUIET ERROR_QUIET)
    if(_rc EQUAL 0)
      set(ODL_YOLO_PYTHON ${_py})
    endif()
  endif()
endforeach()
if(ODL_YOLO_PYTHON)
  message(STATUS "  YOLOv5 converter tests: ${ODL_YOLO_PYTHON} (has h5py and numpy)")
else()
  message(STATUS "  YOLOv5 converter tests: SKIPPED (no python3 that imports h5py and numpy; apt-get install python3-h5py)")
endif()

set(ODL_YOLO_TEST_ENV "${ODL_TEST_ENV}")

function(odl_yolo_py_test name)
  if(ODL_YOLO_PYTHON)
    add_test(NAME ${name} COMMAND ${ODL_YOLO_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/yolov5_convert_test.py ${ARGN})
  else()
    add_test(NAME ${name} COMMAND sh -c "echo 'SKIP: no python3 with h5py and numpy (apt-get install python3-h5py)'; exit 77")
  endif()
  set_tests_properties(${name} PROPERTIES TIMEOUT 300 LABELS integration SKIP_RETURN_CODE 77
    ENVIRONMENT "${ODL_YOLO_TEST_ENV}")
endfunction()

odl_yolo_py_test(yolov5_convert convert ${PROJECT_BINARY_DIR}/yolov5n.h5)
set_tests_properties(yolov5_convert PROPERTIES FIXTURES_SETUP yolov5_weights)
odl_yolo_py_test(yolov5_convert_reject reject ${PROJECT_BINARY_DIR}/yolov5_convert_reject.d)

odl_add_test(yolov5_image SOURCES test_yolov5_image.c LABELS unit)
odl_add_test(yolov5_nms SOURCES test_yolov5_nms.c LABELS unit)

# The tests are given the weights' path (yolov5_test_util.h), so they run the same from any folder.
set(_w --weights=${PROJECT_BINARY_DIR}/yolov5n.h5)
# CPU tests (label integration) and the same programs on CUDA (label gpu; exit 77 without a GPU).
function(odl_yolo_device_tests name source mode)
  odl_add_test(${name} SOURCES ${source} ARGS cpu ${mode} ${_w} LABELS integration TIMEOUT 1200)
  set_tests_properties(${name} PROPERTIES FIXTURES_REQUIRED yolov5_weights)
  add_test(NAME ${name}_gpu COMMAND ${name} cuda ${mode} ${_w})
  set_tests_properties(${name}_gpu PROPERTIES TIMEOUT 600 LABELS gpu SKIP_RETURN_CODE 77
    FIXTURES_REQUIRED yolov5_weights ENVIRONMENT "${ODL_YOLO_TEST_ENV}")
endfunction()
odl_yolo_device_tests(yolov5_forward_bus640 test_yolov5_forward.c bus640)
# CUDA graphs of the forward against the op-by-op forward, bitwise (on the CPU: set_graphs changes nothing)
odl_yolo_device_tests(yolov5_graph test_yolov5_graph.c graph)
# Same program, other mode: reuse the executable.
add_test(NAME yolov5_layers_zidane320 COMMAND yolov5_forward_bus640 cpu zidane320 ${_w})
add_test(NAME yolov5_layers_zidane320_gpu COMMAND yolov5_forward_bus640 cuda zidane320 ${_w})
set_tests_properties(yolov5_layers_zidane320 PROPERTIES TIMEOUT 600 LABELS integration SKIP_RETURN_CODE 77
  FIXTURES_REQUIRED yolov5_weights ENVIRONMENT "${ODL_YOLO_TEST_ENV}")
set_tests_properties(yolov5_layers_zidane320_gpu PROPERTIES TIMEOUT 600 LABELS gpu SKIP_RETURN_CODE 77
  FIXTURES_REQUIRED yolov5_weights ENVIRONMENT "${ODL_YOLO_TEST_ENV}")

odl_yolo_device_tests(yolov5_detect_rect640 test_yolov5_detect.c rect)
# Without the test data the reference tests skip before their device is set up (yolo_test_start).
add_test(NAME yolov5_data_missing COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/yolov5_data_missing.sh
  $<TARGET_FILE:yolov5_detect_rect640> $<TARGET_FILE:yolov5_forward_bus640> ${PROJECT_BINARY_DIR}/yolov5n.h5
  ${CMAKE_CURRENT_BINARY_DIR}/yolov5_data_missing.d)
set_tests_properties(yolov5_data_missing PROPERTIES TIMEOUT 60 LABELS integration SKIP_RETURN_CODE 77
  FIXTURES_REQUIRED yolov5_weights)
add_test(NAME yolov5_detect_square640 COMMAND yolov5_detect_rect640 cpu square ${_w})
add_test(NAME yolov5_detect_square640_gpu COMMAND yolov5_detect_rect640 cuda square ${_w})
set_tests_properties(yolov5_detect_square640 PROPERTIES TIMEOUT 1200 LABELS integration SKIP_RETURN_CODE 77
  FIXTURES_REQUIRED yolov5_weights ENVIRONMENT "${ODL_YOLO_TEST_ENV}")
set_tests_properties(yolov5_detect_square640_gpu PROPERTIES TIMEOUT 600 LABELS gpu SKIP_RETURN_CODE 77
  FIXTURES_REQUIRED yolov5_weights ENVIRONMENT "${ODL_YOLO_TEST_ENV}")

odl_add_test(yolov5_worker SOURCES test_yolov5_worker.c ARGS ${_w} LABELS integration TIMEOUT 900)
set_tests_properties(yolov5_worker PROPERTIES FIXTURES_REQUIRED yolov5_weights)
if(TARGET odl_worker)
  add_dependencies(yolov5_worker odl_worker)
endif()

# Another size and class count: a synthetic yolov5m-multiples, 3-class checkpoint made without PyTorch,
# converted, and checked layer by layer against a NumPy float64 forward (batch 2, 64x96).
if(ODL_YOLO_PYTHON)
  add_test(NAME yolov5_synth_convert COMMAND ${ODL_YOLO_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/yolov5_synth.py
    ${PROJECT_BINARY_DIR}/yolov5_synth.d)
else()
  add_test(NAME yolov5_synth_convert COMMAND sh -c "echo 'SKIP: no python3 with h5py and numpy'; exit 77")
endif()
set_tests_properties(yolov5_synth_convert PROPERTIES TIMEOUT 300 LABELS integration SKIP_RETURN_CODE 77
  FIXTURES_SETUP yolov5_synth ENVIRONMENT "${ODL_YOLO_TEST_ENV}")
odl_add_test(yolov5_synth SOURCES test_yolov5_synth.c ARGS cpu LABELS integration TIMEOUT 600)
set_tests_properties(yolov5_synth PROPERTIES FIXTURES_REQUIRED yolov5_synth)
add_test(NAME yolov5_synth_gpu COMMAND yolov5_synth cuda)
set_tests_properties(yolov5_synth_gpu PROPERTIES TIMEOUT 600 LABELS gpu SKIP_RETURN_CODE 77
  FIXTURES_REQUIRED yolov5_synth ENVIRONMENT "${ODL_YOLO_TEST_ENV}")

# Float16 (odl_yolov5_set_half, --half): the same programs with a third argument. On the CPU the float16
# reference kernels run (kernels/cpu/nhwc_f16.c); on CUDA the tensor-core ones.
foreach(_dev cpu cuda)
  if(_dev STREQUAL cpu)
    set(_sfx "")
    set(_lab integration)
  else()
    set(_sfx "_gpu")
    set(_lab gpu)
  endif()
  add_test(NAME yolov5_half_forward_bus640${_sfx} COMMAND yolov5_forward_bus640 ${_dev} bus640 half ${_w})
  add_test(NAME yolov5_half_layers_zidane320${_sfx} COMMAND yolov5_forward_bus640 ${_dev} zidane320 half ${_w})
  add_test(NAME yolov5_half_detect_rect640${_sfx} COMMAND yolov5_detect_rect640 ${_dev} rect half ${_w})
  add_test(NAME yolov5_half_detect_square640${_sfx} COMMAND yolov5_detect_rect640 ${_dev} square half ${_w})
  set_tests_properties(yolov5_half_forward_bus640${_sfx} yolov5_half_layers_zidane320${_sfx}
    yolov5_half_detect_rect640${_sfx} yolov5_half_detect_square640${_sfx}
    PROPERTIES TIMEOUT 1200 LABELS ${_lab} SKIP_RETURN_CODE 77 FIXTURES_REQUIRED yolov5_weights
    ENVIRONMENT "${ODL_YOLO_TEST_ENV}")
endforeach()

# Float16 with every convolution the wgmma kernels of kernels/cuda/conv2d_f16_sm90.cu can take sent to them
# (a 9.0 device; elsewhere these are the two tests above again): the official boxes within the same tolerances.
foreach(_mode rect square)
  add_test(NAME yolov5_half_detect_${_mode}640_sm90_gpu COMMAND yolov5_detect_rect640 cuda ${_mode} half ${_w})
  set_tests_properties(yolov5_half_detect_${_mode}640_sm90_gpu PROPERTIES TIMEOUT 600 LABELS gpu SKIP_RETURN_CODE 77
    FIXTURES_REQUIRED yolov5_weights ENVIRONMENT "${ODL_YOLO_TEST_ENV};ODL_CONV_F16_SM90=2")
endforeach()

# --precision tf32 (odl_set_matmul_precision): the float32 network's convolutions with TF32 operands, held
# to the official boxes as float16 is; on the CPU the same rounding is emulated (kernels/cpu/conv2d_lowp.c),
# on CUDA the tensor-core kernels (kernels/cuda/conv2d_tc.cu) run.
foreach(_mode rect square)
  add_test(NAME yolov5_tf32_detect_${_mode}640 COMMAND yolov5_detect_rect640 cpu ${_mode} tf32 ${_w})
  add_test(NAME yolov5_tf32_detect_${_mode}640_gpu COMMAND yolov5_detect_rect640 cuda ${_mode} tf32 ${_w})
  set_tests_properties(yolov5_tf32_detect_${_mode}640 PROPERTIES TIMEOUT 1200 LABELS integration SKIP_RETURN_CODE 77
    FIXTURES_REQUIRED yolov5_weights ENVIRONMENT "${ODL_YOLO_TEST_ENV}")
  set_tests_properties(yolov5_tf32_detect_${_mode}640_gpu PROPERTIES TIMEOUT 600 LABELS gpu SKIP_RETURN_CODE 77
    FIXTURES_REQUIRED yolov5_weights ENVIRONMENT "${ODL_YOLO_TEST_ENV}")
endforeach()

# The input through the device image pipeline (odl/gpu_prep.h, `prep`): on the CPU with the stand-in
# nvJPEG (tests/fake_nvjpeg.c, defined in tests/image_prep.cmake) decoding the JPEGs; on CUDA with the
# real nvJPEG (the official boxes within the CPU decode's tolerances on the hardware backend, BOX_TOL_HYBRID /
# CONF_TOL_HYBRID of tests/test_yolov5_detect.c on the GPU-hybrid one).
if(ODL_HAVE_JPEG AND ODL_HAVE_PNG)
  add_test(NAME yolov5_detect_rect640_prep COMMAND yolov5_detect_rect640 cpu rect prep ${_w})
  set_tests_properties(yolov5_detect_rect640_prep PROPERTIES TIMEOUT 1200 LABELS integration SKIP_RETURN_CODE 77
    FIXTURES_REQUIRED yolov5_weights ENVIRONMENT "${ODL_YOLO_TEST_ENV};ODL_NVJPEG_LIBRARY=$<TARGET_FILE:fake_nvjpeg>")
endif()
foreach(_mode rect square)
  add_test(NAME yolov5_detect_${_mode}640_prep_gpu COMMAND yolov5_detect_rect640 cuda ${_mode} prep ${_w})
  set_tests_properties(yolov5_detect_${_mode}640_prep_gpu PROPERTIES TIMEOUT 600 LABELS gpu SKIP_RETURN_CODE 77
    FIXTURES_REQUIRED yolov5_weights ENVIRONMENT "${ODL_YOLO_TEST_ENV}")
endforeach()
