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
