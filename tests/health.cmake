# GPU health (issue 13): Xid parsing and classification, fence list, NVML through dlopen, the monitor
# thread, odl_health's exit statuses.
#   test_health_xid       unit: a table of real-world kernel-log lines -> findings; classes, 45, escalation,
#                         job-start / GPU / MIG filters, YAML overrides, ODL_FAULT xidNN
odl_add_test(test_health_xid SOURCES test_health_xid.c LABELS unit TIMEOUT 60)
#   test_health_fence     unit: fence.json persistence across processes, fence once, operator lift, hostfile
#                         and srun --exclude output, scontrol drain once per node (a recording stand-in)
odl_add_test(test_health_fence SOURCES test_health_fence.c LABELS unit TIMEOUT 60)
#   test_health_nvml_absent  unit: no NVML library -> "NVML not available", monitor runs, telemetry unavailable
#   test_health_nvml_fake    unit: NVML calls against tests/fake_nvml.c (a stand-in libnvidia-ml): readings,
#                         0xFFFFFFFF / NOT_SUPPORTED unavailable, NVML errors -> unhealthy, Xid events, monitor
add_library(fake_nvml MODULE fake_nvml.c)
set_target_properties(fake_nvml PROPERTIES PREFIX "" OUTPUT_NAME "fake_libnvidia-ml")
# the same file with steady readings for a training run (tests/fake_nvml.c says which)
add_library(fake_nvml_steady MODULE fake_nvml.c)
target_compile_definitions(fake_nvml_steady PRIVATE FAKE_NVML_STEADY)
set_target_properties(fake_nvml_steady PROPERTIES PREFIX "" OUTPUT_NAME "fake_libnvidia-ml-steady")
# and one whose every reading is NVML's "not available" value (0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF)
add_library(fake_nvml_sentinel MODULE fake_nvml.c)
target_compile_definitions(fake_nvml_sentinel PRIVATE FAKE_NVML_SENTINEL)
set_target_properties(fake_nvml_sentinel PROPERTIES PREFIX "" OUTPUT_NAME "fake_libnvidia-ml-sentinel")
odl_add_test(test_health_nvml_absent SOURCES test_health_nvml.c LABELS unit TIMEOUT 60 ARGS absent)
odl_add_test(test_health_nvml_fake SOURCES test_health_nvml.c LABELS unit TIMEOUT 60 ARGS fake $<TARGET_FILE:fake_nvml>)
add_dependencies(test_health_nvml_fake fake_nvml)
#   test_health_nvml_sentinel  unit: every reading NVML's "not available" value -> unavailable, flagged, no error
odl_add_test(test_health_nvml_sentinel SOURCES test_health_nvml.c LABELS unit TIMEOUT 60
             ARGS sentinel $<TARGET_FILE:fake_nvml_sentinel>)
add_dependencies(test_health_nvml_sentinel fake_nvml_sentinel)
#   test_health_monitor   fault: the monitor thread following an injection file (lines appended while it runs,
#                         partial lines, pre-job / other-GPU / other-MIG lines ignored, ODL_FAULT xid injection)
odl_add_test(test_health_monitor SOURCES test_health_monitor.c LABELS fault TIMEOUT 60)
#   test_health_tool      unit: odl_health xid exit statuses 0/1/2/4 on logs made by the test, --since-s,
#                         --table, --drain; fence add/list/exclude/hostfile/drain/lift; gpu without NVML (3)
#                         and against the stand-in NVML (2); NVML's "not available" values: no sample, no
#                         "healthy" (1)
add_test(NAME test_health_tool COMMAND sh ${PROJECT_SOURCE_DIR}/tests/health_tool.sh $<TARGET_FILE:odl_health>
         $<TARGET_FILE:fake_nvml> $<TARGET_FILE:fake_nvml_sentinel>)
set_tests_properties(test_health_tool PROPERTIES TIMEOUT 120 LABELS unit SKIP_RETURN_CODE 77)
#   test_health_worker    fault: odl_worker on the CPU with ODL_FAULT=xid79@rank=R,step=S and ODL_HEALTH_KMSG:
#                         stops at that step with the finding (after its checkpoint), 2 MPI ranks end the job
if(TARGET odl_worker)
  add_test(NAME test_health_worker
    COMMAND sh ${PROJECT_SOURCE_DIR}/tests/health_worker.sh ${PROJECT_SOURCE_DIR} $<TARGET_FILE:odl_worker>)
  set_tests_properties(test_health_worker PROPERTIES TIMEOUT 300 LABELS "fault" SKIP_RETURN_CODE 77
    ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0")
endif()
#   test_health_prometheus unit: Prometheus text of telemetry and Xid counters (dcgm-exporter names, escaping,
#                         no sample for unavailable readings)
odl_add_test(test_health_prometheus SOURCES test_health_prometheus.c LABELS unit TIMEOUT 60)
#   test_health_supervised fault;mpi: odl_coordinator over two emulated nodes (Open MPI's rsh agent -> a
#                         local starter setting ODL_NODE_NAME): Xid 79 on nodeB at step 10 fenced once, relaunch
#                         from a hostfile without it at world size 1 finishes the epoch, /metrics counts the Xid,
#                         the fence survives a coordinator restart, Xid 13 restarts unfenced, a second Xid 13
#                         on nodeB with escalate_after: 2 fences it (coordinator/xid_history.c)
if(TARGET odl_worker AND TARGET odl_coordinator AND ODL_HAVE_MPI)
  add_test(NAME test_health_supervised
    COMMAND sh ${PROJECT_SOURCE_DIR}/tests/health_supervised.sh ${PROJECT_SOURCE_DIR} $<TARGET_FILE:odl_worker>
            $<TARGET_FILE:odl_health> $<TARGET_FILE:odl_coordinator>)
  # RUN_SERIAL: its extra daemons would disturb the timing limits of the other MPI fault tests.
  set_tests_properties(test_health_supervised PROPERTIES TIMEOUT 600 LABELS "fault;mpi" SKIP_RETURN_CODE 77 RUN_SERIAL TRUE
    ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0")
endif()
#   test_health_telemetry fault;mpi: the telemetry path without a GPU: 2 CPU ranks under odl_coordinator whose
#                         monitors watch the stand-in NVML's GPUs (ODL_HEALTH_GPU, ODL_NVML_LIBRARY -> the
#                         steady tests/fake_nvml.c): Hello UUID/bus id, /metrics with dcgm-exporter's names,
#                         labels and the fake's readings (prometheus_client), no sample for 0xFFFFFFFF, an
#                         injected Xid 13 as a per-code counter, epoch lines and JSONL with the window's mean
#                         utilisation and peak memory; an NVML call failing (GPU is lost) stops the run as an
#                         unhealthy GPU; bad ODL_HEALTH_GPU values
if(TARGET odl_worker AND TARGET odl_coordinator AND ODL_HAVE_MPI)
  add_test(NAME test_health_telemetry
    COMMAND sh ${PROJECT_SOURCE_DIR}/tests/health_telemetry.sh ${PROJECT_SOURCE_DIR} $<TARGET_FILE:odl_worker>
            $<TARGET_FILE:odl_coordinator> $<TARGET_FILE:fake_nvml_steady>)
  # asan: the debug-asan preset runs it too (issue 27: its monitor once read a returned frame)
  set_tests_properties(test_health_telemetry PROPERTIES TIMEOUT 300 LABELS "fault;mpi;asan" SKIP_RETURN_CODE 77
    ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0")
endif()
