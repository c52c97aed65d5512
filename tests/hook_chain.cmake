# The layers of odl_worker's training hooks (worker/hook_chain.c): call order, errors, reductions once.
odl_add_test(test_hook_chain SOURCES test_hook_chain.c ${PROJECT_SOURCE_DIR}/worker/hook_chain.c LABELS unit TIMEOUT 30)
