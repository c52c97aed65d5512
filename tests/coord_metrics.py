#!/usr/bin/env python3
"""/metrics of a running coordinator read with prometheus_client's text-format parser
(tests/coord_test.sh metrics):  coord_metrics.py HTTPHOST:PORT
Asserts the metric families of docs/coordinator.md and their values for a 2-rank job that has
committed its step-10 checkpoint."""
import sys
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

with urllib.request.urlopen(f"http://{sys.argv[1]}/metrics", timeout=5) as r:
    ctype = r.headers.get("Content-Type", "")
    text = r.read().decode()
fams = {f.name: f for f in text_string_to_metric_families(text)}
fail = []


def value(name, **labels):
    """A sample's value; counters' families are named without their _total suffix."""
    fam = fams[name[:-len("_total")] if name.endswith("_total") and name not in fams else name]
    for s in fam.samples:
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
            return s.value
    raise KeyError(f"{name}{labels}")


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        fail.append(what)


check(ctype.startswith("text/plain; version=0.0.4"), f"content type {ctype}")
want = ["odl_generation", "odl_world_size", "odl_ranks_alive", "odl_rank_step", "odl_rank_samples_per_second",
        "odl_rank_heartbeat_age_seconds", "odl_restarts", "odl_refused_connections", "odl_last_checkpoint_step",
        "odl_last_checkpoint_age_seconds", "odl_last_checkpoint_bytes", "odl_last_checkpoint_write_seconds"]
for n in want:
    check(n in fams, f"family {n}")
if not fail:
    check(value("odl_generation") == 1, "generation 1")
    check(value("odl_world_size") == 2 and value("odl_ranks_alive") == 2, "2 ranks, both alive")
    for r in ("0", "1"):
        check(value("odl_rank_step", rank=r) >= 10, f"rank {r} step >= 10")
        check(0 <= value("odl_rank_heartbeat_age_seconds", rank=r) < 5, f"rank {r} heartbeat age < 5 s")
    check(value("odl_last_checkpoint_step") >= 10, "last checkpoint step >= 10")
    check(value("odl_last_checkpoint_bytes") > 100000, "last checkpoint bytes > 100 kB")
    check(value("odl_restarts_total") == 0, "no restarts")
    check(value("odl_refused_connections_total", reason="auth") == 0, "no refusals")
if fail:
    print(text)
    sys.exit(1)
print(f"{len(fams)} metric families parsed")
