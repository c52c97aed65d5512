# CPU backend self-check (kernels/cpu/, kernels/ops.c) against naive double loops; the full op-by-op
# harness with finite differences is tests/test_ops.c.
odl_add_test(test_cpu_smoke SOURCES test_cpu_smoke.c LABELS unit TIMEOUT 300)
