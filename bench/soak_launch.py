#!/usr/bin/env python3
"""The job command of bench/soak.sh's coordinator: odl_coordinator starts it for every generation as
    soak_launch.py OUT_DIR -- mpirun ... --hostfile HOSTS.G -np N odl_worker ...
It arms the soak's next faults that act inside the workers (ODL_FAULT kill@, hang@, stop@, slow@, xidNN@;
docs/coordinator.md "Fault injection") for this generation, then execs the command.

ODL_FAULT is read once per process, so a fault can only be armed when a generation starts; bench/soak.py
keeps OUT_DIR/plan.json (replaced atomically) with the faults to come, in order, each with the time it
is due ("at", Unix seconds). This generation arms them up to the first one that ends a generation
(every kind but slow@), at the step the job should reach at that time: the resume step (the job
directory's plan.json) plus the due time times the measured rate, and at least min_steps further, so
that the generation commits a checkpoint first and the previous fault's recovery is seen. A fault
armed before and fired (its once-per-job marker DIR/fault-<action>-rank<R>-step<S> is there) is not
armed again; slow@, which has no marker, is armed once. What was armed goes to OUT_DIR/armed.jsonl,
one record per fault and generation, which bench/soak.py reads to know where each fault landed.

Test switch: SOAK_PLANT_LEFTOVER=1 (bench/soak.sh --plant leftover) leaves a process of this
generation behind on purpose, in a session of its own, so that the coordinator's kill of the job's
process group misses it: the soak's leftover check must catch it.
"""
import json
import math
import os
import subprocess
import sys
import time


def load(path, default):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return default


def arg_after(cmd, flag):
    for i, a in enumerate(cmd[:-1]):
        if a == flag:
            return cmd[i + 1]
    return None


def main():
    if len(sys.argv) < 4 or sys.argv[2] != "--":
        print("usage: soak_launch.py OUT_DIR -- COMMAND...", file=sys.stderr)
        return 2
    out, cmd = sys.argv[1], sys.argv[3:]
    job = os.environ.get("ODL_JOB_DIR", "")
    gen = int(os.environ.get("ODL_COORD_GENERATION", "0"))
    plan = load(os.path.join(out, "plan.json"), {})
    resume = int(load(os.path.join(job, "plan.json"), {}).get("step", 0)) if job else 0
    np_ = int(arg_after(cmd, "-np") or plan.get("full_world", 1))
    hostfile = arg_after(cmd, "--hostfile")
    hosts = []
    if hostfile and os.path.exists(hostfile):
        hosts = [ln.split()[0] for ln in open(hostfile) if ln.strip() and not ln.lstrip().startswith("#")]
    armed_path = os.path.join(out, "armed.jsonl")
    before = [json.loads(ln) for ln in open(armed_path)] if os.path.exists(armed_path) else []
    rate = float(plan.get("rate", 10.0))
    min_steps = int(plan.get("min_steps", 20))
    # where the job is expected to be: step `step` at time `t` (ranks train from about startup_s on)
    t = time.time() + float(plan.get("startup_s", 2.0))
    step = resume
    specs, records = [], []
    for f in plan.get("faults", []):
        if not f.get("in_worker"):
            break
        earlier = [r for r in before if r["id"] == f["id"]]
        if f["kind"] == "slow" and earlier:
            continue  # armed once: it acted in that generation, or that generation ended first
        if any(os.path.exists(os.path.join(job, "fault-%s-rank%d-step%d" % (r["action"], r["rank"], r["step"])))
               for r in earlier):
            continue  # fired already; the soak drops it from the plan
        rank = f.get("rank", 0) % np_
        if f.get("node") and f["node"] in hosts:
            rank = hosts.index(f["node"])  # slots=1 per host: rank i runs on host i
        want = step + int(math.ceil(max(0.0, f["at"] - t) * rate))
        # min_steps lets the generation commit a checkpoint first (the previous fault's recovery); after a
        # straggler in the same generation there is nothing to recover from
        s = max(step + (3 if specs else min_steps), want)
        t += (s - step) / rate
        action = "xid%d" % f["xid"] if f["kind"].startswith("xid") else f["kind"]
        spec = "%s@rank=%d,step=%d" % (action, rank, s)
        if f["kind"] == "slow":
            spec += ",ms=%d" % f["ms"]
        specs.append(spec)
        records.append({"id": f["id"], "kind": f["kind"], "action": action, "rank": rank, "step": s,
                        "node": hosts[rank] if rank < len(hosts) else "", "generation": gen, "spec": spec,
                        "time": time.time()})
        step = s
        if f["kind"] != "slow":
            break
        rate = 1000.0 / (1000.0 / rate + f["ms"])  # a straggler sets the pace from its step on
    with open(armed_path, "a") as a:
        for r in records:
            a.write(json.dumps(r) + "\n")
    fault = ";".join([p for p in [plan.get("pace", "")] if p] + specs)
    env = dict(os.environ)
    if fault:
        env["ODL_FAULT"] = fault
    else:
        env.pop("ODL_FAULT", None)
    print("soak_launch: generation %d (%d ranks, resuming at step %d): ODL_FAULT=%s" % (gen, np_, resume, fault or "(none)"),
          file=sys.stderr, flush=True)
    if env.get("SOAK_PLANT_LEFTOVER") == "1":
        # a planted leak: a process of this generation in its own session, out of the job's process group
        subprocess.Popen(["sleep", "100000"], env=env, start_new_session=True, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.execvpe(cmd[0], cmd, env)


if __name__ == "__main__":
    sys.exit(main())
