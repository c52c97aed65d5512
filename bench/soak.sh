#!/bin/sh
# The long run under faults (bench/README.md "soak.sh"; the logic is bench/soak.py):
#   bench/soak.sh MINUTES OUT_DIR [--device cuda] [--ranks N] [--seed S] [--gap 10-20] [--kinds k1,k2,...]
#                 [--plant lose-sample,leftover] ...      (bench/soak.sh --help lists every option)
# One job under odl_coordinator on emulated nodes with a seeded random fault every 10-20 s for MINUTES,
# then the checks. Binaries from $ODL_BUILD (default build/). Last line
#   soak: N faults (kinds...), 0 lost, 0 leftover, params equal, rss +X MiB          (exit 0)
# or `soak: FAILED (checks): ...` after one line per problem (exit 1); 2 when it cannot start (no build, OUT_DIR
# not a soak's, too few GPUs); 77 without Open MPI or Fashion-MNIST. `rss not judged` where no process outlived
# its warm-up.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
py=/usr/bin/python3
[ -x "$py" ] || py=python3
exec "$py" "$here/soak.py" "$@"
