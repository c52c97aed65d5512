# Alert rules over the coordinator's /metrics (launch/prometheus/odl_rules.yml).
#   prometheus_rules   unit: promtool check rules, promtool test rules with odl_rules_test.yml, and every
#                      metric the rules read exported by coordinator/metrics.c or health/prometheus.c
#                      (skipped without promtool: Debian's prometheus package)
add_test(NAME prometheus_rules COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/prometheus_rules.sh ${PROJECT_SOURCE_DIR})
set_tests_properties(prometheus_rules PROPERTIES TIMEOUT 60 LABELS unit SKIP_RETURN_CODE 77)
