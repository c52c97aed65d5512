# The tools' command line through the programs' one flag parser (worker/cli_flags.c).
add_test(NAME test_tools_flags COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/tools_flags.sh $<TARGET_FILE:odl_health>
  $<TARGET_FILE:odl_ckpt>)
set_tests_properties(test_tools_flags PROPERTIES LABELS unit TIMEOUT 60)
