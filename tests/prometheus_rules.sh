#!/bin/sh
# launch/prometheus/odl_rules.yml: `promtool check rules`, `promtool check config` of the example
# prometheus.yml that loads them, `promtool test rules` with odl_rules_test.yml
# (each alert fires on its series and not on their near misses), and every metric the rules read is one
# the coordinator exports (its name in coordinator/metrics.c or health/prometheus.c, the /metrics sources).
#   tests/prometheus_rules.sh SRCDIR
# Skipped (77) without promtool (Debian: apt-get install prometheus; launch/install_deps.sh with ODL_TEST_DEPS=1).
set -u
src="$1"
dir="$src/launch/prometheus"
promtool=$(command -v promtool || true)
if [ -z "$promtool" ]; then
    echo "SKIP: no promtool (apt-get install prometheus)"
    exit 77
fi
fail=0
"$promtool" check rules "$dir/odl_rules.yml" || fail=1
"$promtool" check config "$dir/prometheus.yml" || fail=1 # the README's example, which loads the rules
(cd "$dir" && "$promtool" test rules odl_rules_test.yml) || fail=1
# the metric names of the expressions (an expr: runs to the rule's next key)
exprs=$(awk '/^ *(labels|for|annotations):/ { e = 0 } /^ *expr:/ { e = 1 } e' "$dir/odl_rules.yml")
for m in $(printf '%s\n' "$exprs" | grep -o '\b\(odl\|DCGM_FI_DEV\)_[A-Za-z_]*' | sort -u); do
    if grep -qw -- "$m" "$src/coordinator/metrics.c" "$src/health/prometheus.c"; then
        echo "ok   $m is exported by the coordinator"
    else
        echo "FAIL $m: not a metric of coordinator/metrics.c or health/prometheus.c"
        fail=1
    fi
done
[ $fail = 0 ] && echo "prometheus_rules: rules valid, their tests pass, every metric exported"
exit $fail
