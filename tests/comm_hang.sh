#!/bin/sh
# A collective that never completes must end the whole job, not hang it:
#   tests/comm_hang.sh SRCDIR TEST_COMM_MPI_BINARY
# Rank 1 of 2 sleeps instead of joining an AllReduce; with a 1 s timeout rank 0's watchdog must print
# a message naming rank 0 and the collective, and mpirun must exit non-zero within seconds.
set -u
src="$1"
bin="$2"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
start=$(date +%s)
sh "$src/tests/comm_mpirun.sh" 2 "$bin" --hang >"$out" 2>&1
rc=$?
end=$(date +%s)
cat "$out"
[ "$rc" = 77 ] && exit 77
fail=0
if [ "$rc" = 0 ]; then echo "FAIL: the job exited 0"; fail=1; fi
if ! grep -q "rank 0 (host [^)]*): MPI_Allreduce #[0-9]* of 4 floats did not complete within 1 s" "$out"; then
    echo "FAIL: no watchdog message naming rank 0 and the collective"; fail=1
fi
if [ $((end - start)) -gt 40 ]; then echo "FAIL: took $((end - start)) s (rank 1 sleeps 60 s)"; fail=1; fi
echo "comm_hang: exit code $rc after $((end - start)) s"
exit $fail
