# YOLOv5 evaluation (odl_worker --task=eval, val.py's mAP):
#   eval_labels       unit: label files (bad lines name file:line), folders, dataset yaml, rect batch plan,
#                     the image-preparation pool against the synchronous path
#   eval_metrics      unit: val.py matching, np.interp, ap_per_class on hand-computed cases
#   eval_coco8        integration: coco8 --square against reference/coco8_map.json (mAP, per class, boxes
#                     per image), rect mode, bad labels and usage errors through odl_worker
#                     and with the stand-in nvJPEG (tests/fake_nvjpeg.c) decoding: the same metrics
#   eval_log_parse    integration: bench/eval_log.py (the benchmarks' reader of the eval's speed lines) on a
#                     real eval's log: images/s, decoded counts, image prep phases, a stall report
#   eval_coco8_gpu    gpu: the same coco8 check with --device cuda (nvJPEG, GPU letterbox, GPU NMS), and
#                     --decoder cpu within 0.001 of it; --cuda-graph on bitwise the op-by-op run
#   eval_mpi          integration;mpi: 1 = 2 = 3 ranks bit for bit in metrics.json
#   eval_rank_faults  fault;mpi: a killed rank and a stopped rank end the job without a hang
#   eval_coord_equal  integration;mpi: 3 ranks under odl_coordinator (chunks from its work queue) = 1
#                     unsupervised process bit for bit; a finished DIR is not evaluated again; another
#                     evaluation on DIR is refused (tests/eval_coord.sh)
#   eval_coord_kill   fault;mpi: a rank killed mid-evaluation: one relaunch, only the chunks not done are
#                     evaluated again, the log names the re-queued chunks, same metrics.json
#   eval_coord_slow   fault;mpi: a straggler's chunk is handed to another rank, the first result wins
#   eval_coord_stuck  fault;mpi: a rank that never finishes its chunk is ended after the queue is done; no hang
odl_add_test(eval_labels SOURCES test_eval_labels.c LABELS unit TIMEOUT 120)
odl_add_test(eval_metrics SOURCES test_det_metrics.c LABELS unit TIMEOUT 60)
if(TARGET odl_worker)
  odl_add_test(eval_coco8 SOURCES test_eval_worker.c ARGS cpu --weights=${PROJECT_BINARY_DIR}/yolov5n.h5
               LABELS integration TIMEOUT 900)
  set_tests_properties(eval_coco8 PROPERTIES FIXTURES_REQUIRED yolov5_weights)
  if(ODL_HAVE_JPEG AND ODL_HAVE_PNG) # the stand-in nvJPEG, defined in tests/image_prep.cmake
    set_tests_properties(eval_coco8 PROPERTIES ENVIRONMENT "${ODL_TEST_ENV};FAKE_NVJPEG_LIB=$<TARGET_FILE:fake_nvjpeg>")
    add_dependencies(eval_coco8 fake_nvjpeg)
  endif()
  add_dependencies(eval_coco8 odl_worker)
  if(ODL_HAVE_JPEG AND ODL_HAVE_PNG)
    find_package(Python3 COMPONENTS Interpreter QUIET)
    if(Python3_Interpreter_FOUND)
      add_test(NAME eval_log_parse COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/eval_log_test.py
               $<TARGET_FILE:odl_worker> ${PROJECT_BINARY_DIR}/yolov5n.h5 $<TARGET_FILE:fake_nvjpeg>)
      set_tests_properties(eval_log_parse PROPERTIES LABELS integration TIMEOUT 600 SKIP_RETURN_CODE 77
        FIXTURES_REQUIRED yolov5_weights ENVIRONMENT "${ODL_TEST_ENV}")
    endif()
  endif()
  add_test(NAME eval_coco8_gpu COMMAND eval_coco8 cuda --weights=${PROJECT_BINARY_DIR}/yolov5n.h5)
  set_tests_properties(eval_coco8_gpu PROPERTIES TIMEOUT 600 LABELS gpu SKIP_RETURN_CODE 77
    FIXTURES_REQUIRED yolov5_weights ENVIRONMENT "${ODL_TEST_ENV}")
  if(ODL_HAVE_MPI)
    set(_eval_env "ODL_TEST_DATA=$ENV{ODL_TEST_DATA};ODL_TEST_DATA_DEFAULT=${ODL_TEST_DATA_DEFAULT};ASAN_OPTIONS=detect_leaks=0")
    add_test(NAME eval_mpi COMMAND sh ${PROJECT_SOURCE_DIR}/tests/eval_mpi.sh equal ${PROJECT_SOURCE_DIR}
             $<TARGET_FILE:odl_worker> ${PROJECT_BINARY_DIR}/yolov5n.h5 ${PROJECT_BINARY_DIR}/eval_mpi.d)
    add_test(NAME eval_rank_faults COMMAND sh ${PROJECT_SOURCE_DIR}/tests/eval_mpi.sh faults ${PROJECT_SOURCE_DIR}
             $<TARGET_FILE:odl_worker> ${PROJECT_BINARY_DIR}/yolov5n.h5 ${PROJECT_BINARY_DIR}/eval_faults.d)
    set_tests_properties(eval_mpi PROPERTIES TIMEOUT 900 LABELS "integration;mpi" SKIP_RETURN_CODE 77
      FIXTURES_REQUIRED yolov5_weights ENVIRONMENT "${_eval_env}")
    set_tests_properties(eval_rank_faults PROPERTIES TIMEOUT 300 LABELS "fault;mpi" SKIP_RETURN_CODE 77
      FIXTURES_REQUIRED yolov5_weights ENVIRONMENT "${_eval_env}")
    if(TARGET odl_coordinator)
      foreach(case equal kill slow stuck)
        add_test(NAME eval_coord_${case} COMMAND sh ${PROJECT_SOURCE_DIR}/tests/eval_coord.sh ${case} ${PROJECT_SOURCE_DIR}
                 $<TARGET_FILE:odl_coordinator> $<TARGET_FILE:odl_worker> ${PROJECT_BINARY_DIR}/yolov5n.h5
                 ${PROJECT_BINARY_DIR}/eval_coord_${case}.d)
        set(_labels "fault;mpi")
        if(case STREQUAL "equal")
          set(_labels "integration;mpi")
        endif()
        set_tests_properties(eval_coord_${case} PROPERTIES TIMEOUT 300 LABELS "${_labels}" SKIP_RETURN_CODE 77
          FIXTURES_REQUIRED yolov5_weights ENVIRONMENT "${_eval_env}")
      endforeach()
    endif()
  endif()
endif()

# odl_comm_gather_host_bytes (the statistics gather): a local group, and 3 ranks of uneven sizes.
odl_add_test(test_comm_gather SOURCES test_comm_gather.c LABELS unit TIMEOUT 60)
if(ODL_HAVE_MPI)
  add_test(NAME test_comm_gather_np3 COMMAND sh ${PROJECT_SOURCE_DIR}/tests/comm_mpirun.sh 3 $<TARGET_FILE:test_comm_gather>)
  set_tests_properties(test_comm_gather_np3 PROPERTIES TIMEOUT 120 LABELS "unit;mpi" SKIP_RETURN_CODE 77
    ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0")
endif()

# The pipeline's backend entries (letterbox_u8_to_chw, yolo_nms): the CPU ones against the library's
# reference functions, the CUDA ones against the CPU ones (bitwise).
odl_add_test(detect_post SOURCES test_detect_post.c ARGS cpu --weights=${PROJECT_BINARY_DIR}/yolov5n.h5
             LABELS integration TIMEOUT 600)
set_tests_properties(detect_post PROPERTIES FIXTURES_REQUIRED yolov5_weights)
add_test(NAME detect_post_gpu COMMAND detect_post cuda --weights=${PROJECT_BINARY_DIR}/yolov5n.h5)
set_tests_properties(detect_post_gpu PROPERTIES TIMEOUT 600 LABELS gpu SKIP_RETURN_CODE 77
  FIXTURES_REQUIRED yolov5_weights ENVIRONMENT "${ODL_TEST_ENV}")
