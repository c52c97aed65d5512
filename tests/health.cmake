# GPU health (issue 13): Xid parsing and classification, fence list, NVML through dlopen, the monitor
# thread, odl_health's exit statuses.
#   test_health_xid       unit: a table of real-world kernel-log lines -> findings; classes, 45, escalation,
#                         job-start / GPU / MIG filters, YAML overrides, ODL_FAULT xidNN
odl_add_test(test_health_xid SOURCES test_health_xid.c LABELS unit TIMEOUT 60)
