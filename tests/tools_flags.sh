#!/bin/sh
# test_tools_flags: odl_health and odl_ckpt parse flags with the worker's parser (worker/cli_flags.c):
# --name=value and --name value both set the option, an option without its value is a usage error that
# names it, and an unknown argument is one too. usage: tools_flags.sh ODL_HEALTH ODL_CKPT
health=$1
ckpt=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
mkdir "$tmp/job"

# expect WHAT STATUS PATTERN: the last command's exit status and a line of its output.
expect() {
    if [ "$rc" -ne "$2" ]; then echo "FAIL: $1: exit status $rc, want $2"; cat "$tmp/out"; fail=1; return; fi
    if ! grep -q -- "$3" "$tmp/out"; then echo "FAIL: $1: no line matching '$3' in:"; cat "$tmp/out"; fail=1; fi
}

"$health" fence add --job-dir="$tmp/job" --node=n1 --xid=79 --generation 3 >"$tmp/out" 2>&1; rc=$?
expect "fence add with --name=value" 0 "n1 fenced"
"$health" fence list --job-dir "$tmp/job" >"$tmp/out" 2>&1; rc=$?
expect "fence list with --name value" 0 "^n1 xid=79 .*generation=3 "
"$health" fence list --job-dir >"$tmp/out" 2>&1; rc=$?
expect "fence list --job-dir without a value" 4 "odl_health fence: error: --job-dir needs a value"
"$health" xid --kmsg >"$tmp/out" 2>&1; rc=$?
expect "xid --kmsg without a value" 4 "odl_health xid: error: --kmsg needs a value"
"$health" xid --kmsgs=x >"$tmp/out" 2>&1; rc=$?
expect "xid --kmsgs (a longer name)" 4 "unexpected argument '--kmsgs=x'"
"$ckpt" diff "$tmp/a.h5" "$tmp/b.h5" --prefix >"$tmp/out" 2>&1; rc=$?
expect "odl_ckpt diff --prefix without a value" 2 "usage: odl_ckpt"
"$ckpt" diff "$tmp/a.h5" "$tmp/b.h5" --prefix=/model >"$tmp/out" 2>&1; rc=$?
expect "odl_ckpt diff --prefix=/model on absent files" 1 "a.h5"
exit $fail
