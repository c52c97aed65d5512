# CPU backend self-check (kernels/cpu/, kernels/ops.c) against the float64 loops of tests/ops_ref.c; the full op-by-op
# harness with finite differences is tests/test_ops.c.
odl_add_test(test_cpu_smoke SOURCES test_cpu_smoke.c ops_ref.c LABELS unit TIMEOUT 300)
