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
odl_add_test(test_health_nvml_absent SOURCES test_health_nvml.c LABELS unit TIMEOUT 60 ARGS absent)
odl_add_test(test_health_nvml_fake SOURCES test_health_nvml.c LABELS unit TIMEOUT 60 ARGS fake $<TARGET_FILE:fake_nvml>)
add_dependencies(test_health_nvml_fake fake_nvml)
