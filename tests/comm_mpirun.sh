#!/bin/sh
# Run a command as NP MPI ranks on this machine, for the `mpi` tests:
#   tests/comm_mpirun.sh NP PROGRAM [ARGS...]
# Open MPI gets --oversubscribe (CI machines have fewer cores than ranks) and, as root,
# --allow-run-as-root. Exits 77 (ctest: skipped) when no mpirun is installed.
# MPIEXEC overrides the launcher (e.g. MPIEXEC=/opt/openmpi/bin/mpirun).
set -u
np="$1"
shift
mpiexec="${MPIEXEC:-}"
if [ -z "$mpiexec" ]; then
    mpiexec=$(command -v mpirun || command -v mpiexec || true)
fi
if [ -z "$mpiexec" ]; then
    echo "SKIP: no mpirun/mpiexec on PATH (install openmpi-bin, or set MPIEXEC)" >&2
    exit 77
fi
flags=""
if "$mpiexec" --version 2>/dev/null | grep -q "Open MPI"; then
    flags="--oversubscribe"
    [ "$(id -u)" = 0 ] && flags="$flags --allow-run-as-root"
    # Keep shared-memory/TCP transports on a plain host; quiet the "no high-performance network" note.
    export OMPI_MCA_btl_base_warn_component_unused=0
fi
# shellcheck disable=SC2086
exec "$mpiexec" $flags -np "$np" "$@"
