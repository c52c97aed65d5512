# Sourced by the shell tests that drive odl_coordinator (tests/coord_test.sh, tests/health_supervised.sh);
# the caller defines bad() (one FAIL line).
# wait_for PATTERN FILE SECONDS: until grep finds PATTERN in FILE (polled every 0.1 s); bad() on time-out.
wait_for() {
    i=0
    while [ $i -lt $(($3 * 10)) ]; do
        grep -q -- "$1" "$2" 2>/dev/null && return 0
        sleep 0.1
        i=$((i + 1))
    done
    bad "waited $3 s for '$1' in $2"
    return 1
}
# json_field FILE KEY: a top-level string or number of a small JSON file written one key a line
# (DIR/coordinator.json).
json_field() { sed -n "s/.*\"$2\": *\"\{0,1\}\([^\",]*\)\"\{0,1\},\{0,1\}\$/\1/p" "$1" | head -1; }
# job_procs DIR: the pids of this user's processes whose environment names the job directory DIR
# (ODL_JOB_DIR, set by odl_coordinator to DIR's absolute path).
job_procs() {
    d=$(cd "$1" && pwd -P)
    for e in /proc/[0-9]*/environ; do
        tr '\0' '\n' 2>/dev/null <"$e" | grep -qxF "ODL_JOB_DIR=$d" && { p=${e#/proc/}; echo "${p%%/*}"; }
    done
}
# need_fashion_mnist: sets $data (ODL_FMNIST_DIR or the Debian package's folder), or skips (77).
need_fashion_mnist() {
    data="${ODL_FMNIST_DIR:-/usr/share/datasets/fashion-mnist}"
    if [ ! -e "$data/train-images-idx3-ubyte.gz" ] && [ ! -e "$data/train-images-idx3-ubyte" ]; then
        echo "SKIP: no Fashion-MNIST in $data (set ODL_FMNIST_DIR)"
        exit 77
    fi
}
# need_open_mpi: sets $mpirun, or skips the test (exit 77) without Open MPI's (emulate_nodes needs its
# rsh agent).
need_open_mpi() {
    mpirun=$(command -v mpirun || true)
    if [ -z "$mpirun" ] || ! "$mpirun" --version 2>/dev/null | grep -q "Open MPI"; then
        echo "SKIP: needs Open MPI's mpirun (its plm_rsh_agent emulates the nodes)"
        exit 77
    fi
}
# emulate_nodes DIR: sets $node_flags, mpirun's flags that make a hostfile's hosts nodes on this machine:
# Open MPI's rsh agent is DIR/fake_rsh, which runs the "remote" daemon here with ODL_NODE_NAME set to the
# host it was asked for and a session folder of its own (tests/health_supervised.sh, durable_writes.sh).
emulate_nodes() {
    cat >"$1/fake_rsh" <<'EOS'
#!/bin/sh
# Open MPI rsh agent: "fake_rsh HOST COMMAND..." runs COMMAND on this machine as node HOST.
ODL_NODE_NAME="$1"
# Each node's daemon gets its own session folder, as on separate machines.
TMPDIR="$(dirname "$0")/node-$1"
mkdir -p "$TMPDIR"
export ODL_NODE_NAME TMPDIR
shift
exec sh -c "$*"
EOS
    chmod +x "$1/fake_rsh"
    node_flags="--oversubscribe --mca plm_rsh_agent $1/fake_rsh --mca plm_rsh_no_tree_spawn 1 --mca routed direct"
    node_flags="$node_flags --mca btl_base_warn_component_unused 0"
    [ "$(id -u)" = 0 ] && node_flags="$node_flags --allow-run-as-root"
    return 0
}
