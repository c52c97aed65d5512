#!/usr/bin/env python3
"""The long run: one supervised job under odl_coordinator with a seeded random fault every 10-20 s, and
at the end the checks a user must be able to trust (bench/soak.sh is the entry point; bench/README.md
"soak.sh" and docs/coordinator.md "Soak" describe it).

The job: N ranks (default 2) of odl_worker --task=train on emulated nodes (Open MPI's rsh agent pointed
at a local starter that sets ODL_NODE_NAME, as tests/health_supervised.sh does), launched by
odl_coordinator --hostfile with checkpoints every few seconds and retention (--keep), rank 0 paced by
slow@ so that a CPU job of a few minutes stays short to replay. The faults, drawn from a shuffled deck
of every kind so that each comes up: kill@, hang@, stop@, slow@ (a straggler), xid79@ (node-fatal: a
fence, relaunch on the other nodes, then the fence lifted), xid13@ (application: a restart; the third
on a node within the hour escalates to a fence), SIGKILL of the coordinator and a restart on the same
job directory, SIGTERM (preemption, exit 75) and a restart, and the checkpoint folder refusing writes
for a while. The in-worker kinds are armed by bench/soak_launch.py when a generation starts.

Checks (each failure is one line; the last line sums up):
  params    the final parameters (ODL_DUMP_PARAMS of the last generation) equal bit for bit those of a
            fault-free replay over the same schedule: one unsupervised run per stretch of equal world
            size, each resumed from the previous one's last checkpoint (one run when the world size never
            changed: the uninterrupted run)
  samples   from the sampler's record (ODL_SAMPLE_RECORD: each rank's sample indices per step) along the
            lineage of the final checkpoint: every step once, every sample of every completed epoch once
            and none twice in the last one; the metrics JSONL counts no step twice
  processes no process of an older generation left (grace: --timeout + 5 s after a newer one started),
            none of the job at all after the end; the generation in state.json never goes back
  disk      checkpoint files never more than --keep + 2 (one being written, one not yet committed);
            *.superseded ones counted apart (kept by design)
  memory    RSS and open files of the coordinator and of each worker flat after their first seconds
            (bounds --rss-bound-mib, --fd-bound)
  faults    each named in the coordinator's log within its time limit, and a checkpoint committed after
            it (its recovery time); no failure the soak did not cause
"""
import argparse
import collections
import glob
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from soak_eval import EvalRuns  # noqa: E402

KINDS = ["kill", "hang", "stop", "slow", "xid79", "xid13", "coord_kill", "preempt", "ckpt_ro"]
IN_WORKER = {"kill", "hang", "stop", "slow", "xid79", "xid13"}
ESCALATE_AFTER, ESCALATE_WINDOW_S = 3, 3600  # the Xid table's defaults (docs/health.md)
TS = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+)Z \[([^\]]*)\] (\w+) +(.*)$")


def parse_ts(s):
    # ISO UTC with milliseconds, as core/log.c writes it
    return time.mktime(time.strptime(s[:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone + float("0" + s[19:])


def ckpt_step(path):
    m = re.search(r"ckpt-(\d+)\.h5", path or "")
    return int(m.group(1)) if m else 0


class Fault:
    def __init__(self, fid, kind, at):
        self.id, self.kind, self.at = fid, kind, at
        self.rank, self.node, self.xid, self.ms = 0, "", 0, 0
        self.escalates = False
        self.armed = []          # soak_launch.py's records
        self.injected = None     # time it acted
        self.gen = None          # generation it hit
        self.detected, self.named = None, ""
        self.recovered, self.recover_step = None, None
        self.window_end = None   # ckpt_ro
        self.blocked = []        # ckpt_ro: steps whose checkpoint cannot be written
        self.killed_pid = None   # coord_kill / preempt: the coordinator
        self.limit = 0           # ckpt_ro: seconds to its first refused write (the next checkpoint at the pace now)
        self.problems = []
        self.note = ""
        self.done = False

    @property
    def in_worker(self):
        return self.kind in IN_WORKER

    def spec(self):
        if self.armed:
            return self.armed[-1]["spec"]
        return {"coord_kill": "SIGKILL of the coordinator", "preempt": "SIGTERM of the coordinator",
                "ckpt_ro": "checkpoint folder unwritable"}.get(self.kind, self.kind)


class SetupError(Exception):
    """The soak could not start (no build, a folder not a soak's, too few GPUs, the calibration run failed):
    exit 2, apart from a check that failed (1)."""


class Soak:
    def __init__(self, a):
        self.a = a
        self.rng = random.Random(a.seed)
        self.out = os.path.abspath(a.out_dir)
        self.job = os.path.join(self.out, "job")
        self.build = os.path.abspath(a.build)
        self.src = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        self.bin = {n: os.path.join(self.build, n) for n in ("odl_coordinator", "odl_worker", "odl_health")}
        self.compare = os.path.join(self.build, "tests", "comm_compare_params")
        self.nodes = ["node" + chr(ord("A") + i) for i in range(a.ranks)]
        self.problems = []      # (check, text)
        self.lines = []         # the report
        # what the logs said
        self.gens = {}          # G -> dict(start, resume, world, ranks{r: (node, pid)}, life)
        self.commits = []       # (t, step, path)
        self.failures = []      # (t, gen, text)
        self.events = []        # (t, key, match, life)
        self.write_fail = []    # (t, step)
        self.cur_gen = 0
        # the coordinator
        self.life = 0
        self.coord = None
        self.coord_log = None
        self.tails = []         # [path, offset, partial]
        self.http = None
        self.metrics = {}
        self.metrics_t = 0
        self.step_samples = collections.deque(maxlen=64)  # (t, gen, max step, alive == world)
        self.rate = 1000.0 / (a.pace_ms + 2.0) if a.pace_ms > 0 else 50.0
        self.rate_seen = 0
        self.t_end = float("inf")
        # faults
        self.deck = []
        self.queue = []         # drawn, not finished, in order
        self.history = []       # finished
        self.next_id = 1
        self.last_at = None
        # monitors
        self.state_gens = []    # generations read from state.json, in order
        self.older_seen = {}    # pid -> (first seen as older, gen, comm)
        self.leftovers = {}     # pid -> text
        self.res = collections.defaultdict(list)  # pid -> [(t, role, gen, rss_kib, fds)]
        self.coord_fds = []     # (t, fds) in steady state
        self.disk_max = (0, 0, 0)  # live ckpt files, bytes, superseded
        self.gpu_rows = []
        self.t_mon = self.t_res = self.t_gpu = 0
        self.evals = EvalRuns(self, a.eval_every, a.eval_weights, a.eval_data, "eval-differs" in a.plant) \
            if a.eval_every > 0 else None

    # ------------------------------------------------------------------ setup
    def say(self, text):
        line = "soak: " + text
        print(line, flush=True)
        with open(os.path.join(self.out, "soak.log"), "a") as f:
            f.write("%.3f %s\n" % (time.time(), line))

    def problem(self, check, text):
        self.problems.append((check, text))
        self.say("PROBLEM [%s] %s" % (check, text))

    def setup(self):
        """The folders, the fake rsh agent and the calibration; SetupError where the soak cannot start."""
        a = self.a
        for n, p in self.bin.items():
            if not os.access(p, os.X_OK):
                raise SetupError("no %s (build first; ODL_BUILD=%s)" % (p, self.build))
        mpirun = shutil.which("mpirun")
        if not mpirun or "Open MPI" not in subprocess.run([mpirun, "--version"], capture_output=True, text=True).stdout:
            print("SKIP: the soak needs Open MPI's mpirun (its rsh agent emulates the nodes)")
            sys.exit(77)
        if not (os.path.exists(os.path.join(a.data, "train-images-idx3-ubyte.gz")) or
                os.path.exists(os.path.join(a.data, "train-images-idx3-ubyte"))):
            print("SKIP: no Fashion-MNIST in %s (ODL_FMNIST_DIR)" % a.data)
            sys.exit(77)
        if os.path.exists(os.path.join(self.out, ".soak")):
            shutil.rmtree(self.out)  # a previous soak's folder
        elif os.path.isdir(self.out) and os.listdir(self.out):
            raise SetupError("%s exists and is not a soak's folder; give an empty or new one" % self.out)
        for d in ("", "samples", "params", "replay"):
            os.makedirs(os.path.join(self.out, d), exist_ok=True)
        open(os.path.join(self.out, ".soak"), "w").close()
        self.mpirun = mpirun
        if self.evals:
            self.evals.check_inputs()
        if a.device == "cuda":
            smi = shutil.which("nvidia-smi")
            n = len(subprocess.run([smi, "-L"], capture_output=True, text=True).stdout.splitlines()) if smi else 0
            if n < a.ranks:
                raise SetupError("--device cuda runs one rank per GPU (NCCL takes no two ranks on one): "
                                 "%d GPUs for %d ranks" % (n, a.ranks))
        rsh = os.path.join(self.out, "fake_rsh")
        gpu_map = ""
        if a.device == "cuda":
            gpu_map = 'i=0; for n in %s; do [ "$n" = "$1" ] && break; i=$((i + 1)); done\nCUDA_VISIBLE_DEVICES=$i\nexport CUDA_VISIBLE_DEVICES\n' % " ".join(self.nodes)
        with open(rsh, "w") as f:
            f.write("#!/bin/sh\n# Open MPI rsh agent: \"fake_rsh HOST COMMAND...\" runs COMMAND here as node HOST, with\n"
                    "# its own session folder (tests/health_supervised.sh)\nODL_NODE_NAME=\"$1\"\n"
                    "TMPDIR=\"$(dirname \"$0\")/node-$1\"\nmkdir -p \"$TMPDIR\"\nexport ODL_NODE_NAME TMPDIR\n" + gpu_map +
                    "shift\nexec sh -c \"$*\"\n")
        os.chmod(rsh, 0o755)
        self.hosts = os.path.join(self.out, "hosts")
        with open(self.hosts, "w") as f:
            f.write("".join("%s slots=1\n" % n for n in self.nodes))
        # plm rsh named: an environment may choose another launcher (OMPI_MCA_plm=isolated launches on
        # this host only, and then refuses the emulated nodes as "already filled")
        self.mpi_flags = ["--oversubscribe", "--mca", "plm", "rsh", "--mca", "plm_rsh_agent", rsh, "--mca", "plm_rsh_no_tree_spawn", "1",
                          "--mca", "routed", "direct", "--mca", "btl_base_warn_component_unused", "0"]
        if os.getuid() == 0:
            self.mpi_flags.append("--allow-run-as-root")
        self.worker_args = ["--task=train", "--model=" + a.model, "--data_dir", a.data, "--device", a.device,
                            "--seed", str(a.seed), "--progress", "off", "--batch-size", str(a.batch),
                            "--max-train-samples", str(a.samples), "--epochs", "1000000", "--gamma", "1"]
        if a.device == "cuda":
            # a relaunched generation starts while the old one may still hold its pool, and the evaluations
            # share the GPU: a small reservation that grows on demand
            self.worker_args += ["--preallocate-fraction", "0.05"]
        self.steps_per_epoch_full = -(-a.samples // (a.batch * a.ranks))
        self.calibrate()
        self.every = max(5, int(round(self.rate * a.checkpoint_s)))
        self.min_steps = 2 * self.every + 5
        self.say("%s: %d rank%s on emulated node%s %s, %s on %s, batch %d per rank, %d samples per epoch (%d steps), "
                 "checkpoint every %d steps (~%.1f s) keeping %d, rank 0 paced at %d ms a step, --timeout %g s, "
                 "faults every %s s (seed %d)%s" % (
                     self.out, a.ranks, "s" if a.ranks > 1 else "", "s" if a.ranks > 1 else "", ",".join(self.nodes), a.model, a.device, a.batch, a.samples,
                     self.steps_per_epoch_full, self.every, self.every / self.rate, a.keep, a.pace_ms, a.timeout,
                     a.gap, a.seed, ", planted: " + ",".join(a.plant) if a.plant else ""))
        if self.evals:
            self.evals.setup()

    def local_mpi(self, np_):
        """Plain mpirun on this machine, no emulated nodes (the replay, the evaluation jobs): the environment's
        launcher (shared memory, far faster than the emulated nodes' TCP)."""
        return [self.mpirun, "--oversubscribe"] + (["--allow-run-as-root"] if os.getuid() == 0 else []) + ["-np", str(np_)]

    def mpi_cmd(self, hostfile, np_):
        return [self.mpirun] + self.mpi_flags + ["--hostfile", hostfile, "-np", str(np_), self.bin["odl_worker"]] + \
            self.worker_args

    def calibrate(self):
        """Steps per second of the job as it will run (emulated nodes, paced): the checkpoint interval is a
        number of steps, and the launcher turns a fault's time into a step."""
        d = os.path.join(self.out, "calibrate")
        os.makedirs(d, exist_ok=True)
        steps = 600 if self.a.pace_ms == 0 else max(40, int(2000 / self.a.pace_ms))
        cmd = self.mpi_cmd(self.hosts, self.a.ranks) + ["--max-steps", str(steps)]
        env = self.env_base()
        if self.a.pace_ms > 0:
            env["ODL_FAULT"] = "slow@rank=0,step=0,ms=%d" % self.a.pace_ms
        t0 = time.time()
        r = subprocess.run(cmd, cwd=d, capture_output=True, text=True, env=env)
        m = re.findall(r"done: (\d+) steps.*?([\d.]+) s$", r.stdout + r.stderr, re.M)
        if r.returncode != 0 or not m:
            raise SetupError("the calibration run failed:\n" + (r.stdout + r.stderr)[-3000:])
        self.rate = int(m[-1][0]) / max(0.1, float(m[-1][1]))
        self.say("calibration: %.1f steps/s (%d steps, %.1f s in all)" % (self.rate, steps, time.time() - t0))

    def env_base(self):
        env = dict(os.environ)
        for k in list(env):
            if k.startswith("ODL_COORD_") or k in ("ODL_JOB_DIR", "ODL_FAULT"):
                del env[k]
        env["NCCL_NVLS_ENABLE"] = env.get("NCCL_NVLS_ENABLE", "0")
        env["OMPI_MCA_btl_base_warn_component_unused"] = "0"
        return env

    # ------------------------------------------------------------------ the coordinator
    def start_coordinator(self):
        a = self.a
        self.life += 1
        log = os.path.join(self.out, "coord.%d.log" % self.life)
        env = self.env_base()
        env["ODL_SAMPLE_RECORD"] = os.path.join(self.out, "samples", "rec")
        env["ODL_DUMP_PARAMS"] = os.path.join(self.out, "params", "sup")
        if "lose-sample" in a.plant:
            env["ODL_SAMPLE_TEST_LOSE_AT_STEP"] = str(self.every + 3)
        if "leftover" in a.plant:
            env["SOAK_PLANT_LEFTOVER"] = "1"
        sup = ["--metrics-out", os.path.join(self.out, "metrics.jsonl")]
        cmd = [self.bin["odl_coordinator"], "--job-dir", self.job, "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0",
               "--timeout", str(a.timeout), "--heartbeat-ms", "200", "--backoff", str(a.backoff),
               "--max-restarts", "1000000", "--checkpoint-every", str(self.every), "--keep", str(a.keep),
               "--hostfile", self.hosts, "--", sys.executable, os.path.join(self.src, "bench", "soak_launch.py"),
               self.out, "--"] + self.mpi_cmd("{hostfile}", "{np}") + sup
        self.coord_log = open(log, "a")
        self.coord = subprocess.Popen(cmd, stdout=self.coord_log, stderr=subprocess.STDOUT, env=env, cwd=self.out,
                                      stdin=subprocess.DEVNULL)
        self.tails.append([log, 0, ""])
        self.http = None
        self.say("coordinator %d started (pid %d), log %s" % (self.life, self.coord.pid, log))

    def coordinator_ended(self):
        rc = self.coord.returncode
        self.coord_log.close()
        self.coord = None
        return rc

    # ------------------------------------------------------------------ reading the logs
    def read_logs(self):
        for t in self.tails:
            try:
                with open(t[0], errors="replace") as f:
                    f.seek(t[1])
                    data = f.read()
                    t[1] = f.tell()
            except OSError:
                continue
            data = t[2] + data
            *full, t[2] = data.split("\n")
            for ln in full:
                self.on_line(ln)

    def on_line(self, ln):
        m = TS.match(ln)
        if not m:
            return
        t, who, msg = parse_ts(m.group(1)), m.group(2), m.group(4)
        ev = lambda key, mm: self.events.append((t, key, mm, self.life))
        if who == "coordinator":
            if (mm := re.match(r"generation (\d+): started .*?(?:, resuming from (\S+))?$", msg)):
                g = int(mm.group(1))
                self.gens[g] = {"start": t, "resume": ckpt_step(mm.group(2)), "world": 0, "ranks": {},
                                "life": self.life}
                if g <= self.cur_gen:
                    self.problem("processes", "generation %d started after generation %d" % (g, self.cur_gen))
                self.cur_gen = max(self.cur_gen, g)
            elif (mm := re.match(r"rank (\d+) of (\d+) registered: node (\S+), pid (\d+).*generation (\d+)$", msg)):
                g = self.gens.setdefault(int(mm.group(5)), {"start": t, "resume": 0, "world": 0, "ranks": {},
                                                            "life": self.life})
                g["world"] = int(mm.group(2))
                g["ranks"][int(mm.group(1))] = (mm.group(3).rstrip(","), int(mm.group(4)))
            elif (mm := re.match(r"committed checkpoint (\S+) \(step (\d+),", msg)):
                self.commits.append((t, int(mm.group(2)), mm.group(1)))
            elif (mm := re.match(r"generation (\d+) failed: (.*?)(?:; killing the job's process group)?$", msg)):
                self.failures.append((t, int(mm.group(1)), mm.group(2)))
            elif (mm := re.match(r"rank (\d+) could not write the checkpoint of step (\d+)", msg)):
                self.write_fail.append((t, int(mm.group(2))))
            elif (mm := re.match(r"node (\S+) (fenced|was fenced already) \(Xid (\w+)", msg)):
                ev("fence", mm)
            elif (mm := re.match(r"node (\S+): (\d+) application Xids .* fencing it", msg)):
                ev("escalate", mm)
            elif (mm := re.match(r"the previous coordinator \(pid (\d+)\) ended without finishing the job", msg)):
                ev("prev_coord", mm)
            elif (mm := re.match(r"ended (\d+) process(?:es)? of generation (\d+) that outlived", msg)):
                ev("ended_leftovers", mm)
            elif (mm := re.match(r"preempted(: stopped after the checkpoint of step (\d+)| before a checkpoint)", msg)):
                ev("preempted", mm)
            elif (mm := re.match(r"giving up after", msg)):
                self.problem("faults", "the coordinator gave up: " + msg)
            elif (mm := re.match(r"event loop (closed cleanly|did not close cleanly).*", msg)):
                ev("loop", mm)
                if "did not" in msg:
                    self.problem("faults", "coordinator %d: %s" % (self.life, msg))

    # ------------------------------------------------------------------ monitors
    def fetch_metrics(self):
        if not self.http:
            try:
                info = json.load(open(os.path.join(self.job, "coordinator.json")))
                if info.get("pid") == (self.coord.pid if self.coord else None) and info.get("http"):
                    self.http = info["http"]
            except (OSError, ValueError):
                return
            if not self.http:
                return
        try:
            with urllib.request.urlopen("http://%s/metrics" % self.http, timeout=1) as r:
                text = r.read().decode()
        except OSError:
            return
        m = {}
        for ln in text.splitlines():
            if ln.startswith("#") or not ln.strip():
                continue
            k, _, v = ln.rpartition(" ")
            try:
                m[k] = float(v)
            except ValueError:
                pass
        self.metrics, self.metrics_t = m, time.time()
        steps = [v for k, v in m.items() if k.startswith("odl_rank_step{")]
        world, alive = m.get("odl_world_size", 0), m.get("odl_ranks_alive", 0)
        if steps:
            self.step_samples.append((self.metrics_t, int(m.get("odl_generation", 0)), max(steps),
                                      world > 0 and alive == world))

    def cur_step(self):
        return int(self.step_samples[-1][2]) if self.step_samples else 0

    def measure_rate(self):
        """Steps per second, from the last two commits of one generation (a checkpoint every `every` steps)
        while no straggler slows it: what the launcher turns a fault's time into a step with."""
        if len(self.commits) < 2 or len(self.commits) == self.rate_seen:
            return
        self.rate_seen = len(self.commits)
        (t1, s1, _), (t2, s2, _) = self.commits[-2:]
        if self.gen_at(t1) == self.gen_at(t2) and s2 > s1 and t2 > t1 and not self.slow_active():
            self.rate = 0.5 * self.rate + 0.5 * (s2 - s1) / (t2 - t1)

    def slow_active(self):
        return any(f.kind == "slow" and f.injected and f.gen == self.cur_gen for f in self.history + self.queue)

    def job_procs(self, job=None):
        """A job's processes on this machine (the training job's, or those of the job directory JOB): the
        environment names the job directory (coordinator/leftovers.c finds them the same way)."""
        out = []
        want = ("ODL_JOB_DIR=" + os.path.realpath(job or self.job)).encode()
        for p in os.listdir("/proc"):
            if not p.isdigit():
                continue
            try:
                env = open("/proc/%s/environ" % p, "rb").read().split(b"\0")
                if want not in env:
                    continue
                gen = next((int(e.split(b"=", 1)[1]) for e in env if e.startswith(b"ODL_COORD_GENERATION=")), -1)
                st = open("/proc/%s/stat" % p).read()
                state = st[st.rindex(")") + 2]
                comm = st[st.index("(") + 1:st.rindex(")")]
                out.append((int(p), gen, comm, state))
            except (OSError, ValueError, IndexError):
                continue
        return out

    @staticmethod
    def rss_fds(pid):
        try:
            rss = next(int(ln.split()[1]) for ln in open("/proc/%d/status" % pid) if ln.startswith("VmRSS:"))
            fds = len(os.listdir("/proc/%d/fd" % pid))
            return rss, fds
        except (OSError, StopIteration, ValueError):
            return None

    def monitor(self):
        now = time.time()
        if now - self.t_mon < 1.0:
            return
        self.t_mon = now
        # state.json: the generation never goes back
        try:
            g = json.load(open(os.path.join(self.job, "state.json")))["generation"]
            if self.state_gens and g < self.state_gens[-1]:
                self.problem("processes", "state.json went from generation %d back to %d" % (self.state_gens[-1], g))
            if not self.state_gens or g != self.state_gens[-1]:
                self.state_gens.append(g)
        except (OSError, ValueError, KeyError):
            pass
        # processes of an older generation
        cur = max(self.cur_gen, self.state_gens[-1] if self.state_gens else 0)
        procs = self.job_procs()
        alive = set()
        for pid, gen, comm, state in procs:
            if state in "ZX":
                continue
            alive.add(pid)
            if 0 <= gen < cur:
                first = self.older_seen.setdefault(pid, (now, gen, comm))[0]
                newer = self.gens.get(gen + 1, {}).get("start", first)
                if now - max(first, newer) > self.a.timeout + 5 and pid not in self.leftovers:
                    self.leftovers[pid] = "pid %d (%s, state %s) of generation %d still there %.0f s after generation %d " \
                                          "started" % (pid, comm, state, gen, now - newer, gen + 1)
                    self.problem("processes", "leftover: " + self.leftovers[pid])
        for pid in list(self.older_seen):
            if pid not in alive:
                del self.older_seen[pid]
        # disk: live checkpoints bounded by retention
        ck = os.path.join(self.job, "checkpoints")
        try:
            names = os.listdir(ck)
            live = [n for n in names if re.fullmatch(r"ckpt-\d+\.h5", n)]
            sup = [n for n in names if n.endswith(".superseded")]
            size = sum(os.path.getsize(os.path.join(ck, n)) for n in live + sup if os.path.exists(os.path.join(ck, n)))
            if len(live) > self.disk_max[0] or size > self.disk_max[1]:
                self.disk_max = (max(len(live), self.disk_max[0]), max(size, self.disk_max[1]), len(sup))
            self.disk_max = (self.disk_max[0], self.disk_max[1], len(sup))
            if len(live) > self.a.keep + 2:
                self.problem("disk", "%d checkpoint files on disk, over --keep %d + 2: %s" % (
                    len(live), self.a.keep, ",".join(sorted(live))))
        except OSError:
            pass
        # RSS and open files, every 2 s
        if now - self.t_res >= 2.0:
            self.t_res = now
            members = [(self.coord.pid, "coordinator", self.cur_gen)] if self.coord else []
            members += [(pid, "worker", gen) for pid, gen, comm, st in procs if comm == "odl_worker" and st not in "ZXT"]
            for pid, role, gen in members:
                v = self.rss_fds(pid)
                if v:
                    self.res[pid].append((now, role, gen, v[0], v[1]))
            steady = self.metrics and now - self.metrics_t < 2 and \
                self.metrics.get("odl_world_size", 0) > 0 and \
                self.metrics.get("odl_ranks_alive") == self.metrics.get("odl_world_size") == \
                self.metrics.get("odl_connections")
            if steady and self.coord and self.res.get(self.coord.pid):
                self.coord_fds.append((now, self.coord.pid, self.res[self.coord.pid][-1][4]))
        if self.a.device == "cuda" and now - self.t_gpu >= 10:
            self.t_gpu = now
            self.sample_gpu(now)
        if self.evals:
            self.evals.tick(now)

    def sample_gpu(self, now):
        smi = shutil.which("nvidia-smi")
        if not smi:
            return
        r = subprocess.run([smi, "--query-gpu=index,utilization.gpu,memory.used", "--format=csv,noheader,nounits"],
                           capture_output=True, text=True)
        apps = subprocess.run([smi, "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                              capture_output=True, text=True)
        for ln in r.stdout.splitlines():
            f = [x.strip() for x in ln.split(",")]
            if len(f) == 3:
                self.gpu_rows.append((now, "gpu", int(f[0]), float(f[1]), float(f[2])))
        # per process: only the soak's own (the training job's and the evaluations'), whatever else runs there
        mine = {pid for pid, gen, comm, st in self.job_procs()}
        if self.evals and self.evals.run:
            mine.update(self.evals.job_pids(self.evals.run["job"]))
        for ln in apps.stdout.splitlines():
            f = [x.strip() for x in ln.split(",")]
            if len(f) == 2 and f[0].isdigit() and int(f[0]) in mine:
                self.gpu_rows.append((now, "pid", int(f[0]), 0.0, float(f[1])))
        # rank 0's device pool, from its last epoch record (worker/train.c: pool_peak_mib, pool_reserved_mib)
        try:
            with open(os.path.join(self.out, "metrics.jsonl"), "rb") as fh:
                fh.seek(max(0, os.path.getsize(fh.name) - 4096))
                tail = fh.read().decode(errors="replace").splitlines()[1:]  # the first may be cut
                last = [json.loads(x) for x in tail if "pool_peak_mib" in x]
            if last and last[-1].get("pool_peak_mib") is not None:
                self.gpu_rows.append((now, "pool", self.cur_gen, last[-1]["pool_reserved_mib"] or 0.0,
                                      last[-1]["pool_peak_mib"]))
        except (OSError, ValueError):
            pass

    def poll(self):
        self.read_logs()
        self.fetch_metrics()
        self.measure_rate()
        self.monitor()
        if self.coord and self.coord.poll() is not None:
            rc = self.coordinator_ended()
            self.problem("faults", "coordinator %d exited by itself with status %d" % (self.life, rc))
            raise Abort("the coordinator exited")

    def wait(self, cond, timeout, step=0.2):
        t_end = time.time() + timeout
        while time.time() < t_end:
            self.poll()
            if cond():
                return True
            time.sleep(step)
        self.poll()
        return cond()

    # ------------------------------------------------------------------ the plan
    def gap(self):
        lo, hi = (float(x) for x in self.a.gap.split("-"))
        return self.rng.uniform(lo, hi)

    def fencing(self, f):
        return f.kind == "xid79" or (f.kind == "xid13" and f.escalates)

    def draw(self):
        """The next fault: the first card of the deck that may come now. An Xid after a fence (the generation
        that will run it lacks the fenced node until a relaunch) would fence the last nodes: it waits."""
        chain = self.history + self.queue
        last_ending = next((f for f in reversed(chain) if f.kind != "slow"), None)
        shrunk = last_ending is not None and self.fencing(last_ending)
        allowed = [k for k in self.a.kinds if not (shrunk and k.startswith("xid"))]
        if self.a.ranks == 1:  # a fence would leave no node to relaunch on: no Xid 79, no third Xid 13 in the hour
            allowed = [k for k in allowed if k != "xid79" and not (k == "xid13" and self.xid13_escalates(self.nodes[0], chain))]
        if not allowed:
            allowed = [k for k in self.a.kinds if not k.startswith("xid")] or ["kill"]
        while True:
            if not any(k in allowed for k in self.deck):
                deck = list(self.a.kinds)
                self.rng.shuffle(deck)
                self.deck += deck
            else:
                break
        kind = next(k for k in self.deck if k in allowed)
        self.deck.remove(kind)
        base = self.last_at if self.last_at else time.time()
        f = Fault(self.next_id, kind, base + self.gap())
        self.next_id += 1
        self.last_at = f.at
        f.rank = self.rng.randrange(self.a.ranks)
        if kind in ("xid79", "xid13"):
            f.node = self.nodes[self.rng.randrange(self.a.ranks)]
            f.xid = int(kind[3:])
        if kind == "xid13":
            f.escalates = self.xid13_escalates(f.node, chain, f.at)
        if kind == "slow":
            f.ms = self.rng.randrange(150, 400)
        self.queue.append(f)
        return f

    def xid13_escalates(self, node, chain, at=None):
        """Whether one more Xid 13 on NODE would be the one the coordinator fences for: it counts the reports
        (DIR/xid_history.json), those that acted and those to come."""
        at = time.time() if at is None else at
        recent = [x for x in chain if x.kind == "xid13" and x.node == node and x.at > at - ESCALATE_WINDOW_S
                  and (x.injected or x in self.queue)]
        return len(recent) + 1 >= ESCALATE_AFTER

    def fill_queue(self):
        """Two faults ahead that end a generation (every kind but slow@), among those that have not acted: a
        generation arms its in-worker faults when it starts, up to the first such one
        (bench/soak_launch.py), so that one must be drawn by then, whichever fault acts first. True when
        it drew."""
        drew = False
        while True:
            ahead = [q for q in self.queue if not q.injected]
            if sum(q.kind != "slow" for q in ahead) >= 2:
                return drew
            f = self.draw()
            if f.at > self.t_end:  # none due after the end: the run stops about then
                self.queue.remove(f)
                return drew
            drew = True

    def write_plan(self):
        faults = []
        for f in self.queue:
            if f.injected:
                continue
            if not f.in_worker:
                faults.append({"id": f.id, "kind": f.kind, "in_worker": False, "at": f.at})
                break
            faults.append({"id": f.id, "kind": f.kind, "in_worker": True, "at": f.at, "rank": f.rank, "node": f.node,
                           "xid": f.xid, "ms": f.ms})
        plan = {"pace": "slow@rank=0,step=0,ms=%d" % self.a.pace_ms if self.a.pace_ms > 0 else "",
                "rate": self.rate, "min_steps": self.min_steps, "startup_s": 2.0, "full_world": self.a.ranks,
                "faults": faults}
        tmp = os.path.join(self.out, "plan.json.tmp")
        with open(tmp, "w") as fh:
            json.dump(plan, fh)
        os.replace(tmp, os.path.join(self.out, "plan.json"))

    def read_armed(self):
        p = os.path.join(self.out, "armed.jsonl")
        recs = [json.loads(ln) for ln in open(p)] if os.path.exists(p) else []
        for f in self.queue:
            f.armed = [r for r in recs if r["id"] == f.id]

    # ------------------------------------------------------------------ faults
    def commit_after(self, t, gen_min=0):
        for tc, step, path in self.commits:
            if tc > t and self.gen_at(tc) >= gen_min:
                return tc, step
        return None

    def gen_at(self, t):
        g = 0
        for n, info in self.gens.items():
            if info["start"] <= t:
                g = max(g, n)
        return g

    def deadline(self, f):
        T = self.a.timeout
        return {"kill": T, "hang": T + 3, "stop": T + 3, "xid79": 3, "xid13": 3, "coord_kill": 15,
                "preempt": 6 * T + 30, "ckpt_ro": f.limit}.get(f.kind, T)

    def find_injection(self, f):
        if not f.armed:
            return
        for r in f.armed:
            if f.kind == "slow":
                ok = [s for s in self.step_samples if s[1] == r["generation"] and s[2] >= r["step"]]
                if ok:
                    f.injected, f.gen = ok[0][0], r["generation"]
                    return
                continue
            # the once-per-job marker, created (and fsynced) just before the fault acts: a rank's own "fires
            # now" line may be lost with the rank (mpirun forwards its output)
            marker = os.path.join(self.job, "fault-%s-rank%d-step%d" % (r["action"], r["rank"], r["step"]))
            if os.path.exists(marker):
                t = os.stat(marker).st_mtime
                f.injected, f.gen = t, r["generation"]
                return

    def find_detection(self, f):
        t0 = f.injected - 0.5
        if f.kind in ("kill", "hang", "stop"):
            pats = {"kill": r"rank %d \(node [^)]*\) disconnected at step",
                    "hang": r"no rank made progress .*: rank %d hangs at step",
                    "stop": r"rank %d \(node [^)]*\) sent no heartbeat|no rank made progress .*: rank %d hangs"}
            r = f.armed[-1]["rank"] if f.armed else f.rank
            for t, g, text in self.failures:
                if t >= t0:
                    if re.search(pats[f.kind].replace("%d", str(r)), text):
                        return t, "generation %d failed: %s" % (g, text)
                    return t, "WRONG: generation %d failed: %s" % (g, text)
        elif f.kind in ("xid79", "xid13"):
            # a fence (Xid 79, or an escalated Xid 13) or an unfenced restart (Xid 13): what came first
            seen = [(t, "node %s %s (Xid %s)" % (mm.group(1), mm.group(2), mm.group(3)))
                    for t, key, mm, life in self.events if t >= t0 and key == "fence"]
            if f.kind == "xid13":
                seen += [(t, "generation %d failed: %s" % (g, text)) for t, g, text in self.failures
                         if t >= t0 and "application Xid" in text]
            if seen:
                t, text = min(seen)
                f.escalates = f.kind == "xid13" and text.startswith("node ")
                return t, text
        elif f.kind == "coord_kill":
            for t, key, mm, life in self.events:
                if t >= t0 and key == "prev_coord" and int(mm.group(1)) == f.killed_pid:
                    return t, mm.group(0)
        elif f.kind == "preempt":
            for t, key, mm, life in self.events:
                if t >= t0 and key == "preempted":
                    return t, mm.group(0)
        elif f.kind == "ckpt_ro":
            for t, step in self.write_fail:
                if t >= t0:
                    return t, "rank 0 could not write the checkpoint of step %d" % step
        return None

    def advance(self, f):
        """One fault's progress; True when it is finished."""
        now = time.time()
        if f.kind == "slow" and f.armed and not f.injected:
            self.find_injection(f)
            gen = f.armed[-1]["generation"]
            if not f.injected and self.cur_gen > gen:
                f.note = "its generation ended before step %d" % f.armed[-1]["step"]
                return True
            if f.injected:
                f.detected = f.recovered = f.injected
                f.named = "a straggler (rank %d, +%d ms a step) is tolerated: no failure while it lasts" % (
                    f.armed[-1]["rank"], f.ms)
                return True
            return False
        if f.in_worker and not f.injected:
            self.find_injection(f)
            if not f.injected:
                if now > f.at + 120:
                    f.problems.append("armed but never fired (%s)" % (f.armed[-1]["spec"] if f.armed else "not armed"))
                    return True
                return False
        if not f.detected:
            d = self.find_detection(f)
            if d:
                f.detected, f.named = d
                if f.named.startswith("WRONG: "):
                    f.named = f.named[7:]
                    f.problems.append("the failure names the wrong rank or cause: " + f.named)
                elif f.detected - f.injected > self.deadline(f) + (f.window_end - f.injected if f.window_end else 0):
                    f.problems.append("named after %.1f s, over its %.0f s limit" % (f.detected - f.injected, self.deadline(f)))
            elif now - f.injected > self.deadline(f) + 30 + (f.window_end - f.injected if f.window_end else 0):
                f.problems.append("not named in the coordinator's log within %.0f s" % (now - f.injected))
                f.detected = now
            else:
                return False
        if f.kind == "ckpt_ro" and f.window_end is None:
            # refuse writes "for a while": 2-6 s more after the first failed write
            f.window_end = now + self.rng.uniform(2, 6)
            return False
        if f.kind == "ckpt_ro" and now < f.window_end:
            return False
        if f.kind == "ckpt_ro" and f.blocked is not None:
            self.unblock(f)
        if not f.recovered:
            gen_min = f.gen + 1 if f.kind not in ("ckpt_ro",) else 0
            t_from = f.window_end if f.kind == "ckpt_ro" else f.detected
            c = self.commit_after(t_from, gen_min)
            if c:
                f.recovered, f.recover_step = c
                if self.fencing_happened(f):
                    self.lift(f)
                return True
            if now - t_from > 6 * self.a.timeout + 60:
                f.problems.append("no checkpoint committed within %.0f s after it" % (now - t_from))
                return True
            return False
        return True

    def fencing_happened(self, f):
        return any(key == "fence" and t >= f.injected - 0.5 for t, key, mm, life in self.events) and \
            f.kind in ("xid79", "xid13")

    def lift(self, f):
        fenced = [mm.group(1) for t, key, mm, life in self.events if key == "fence" and t >= f.injected - 0.5]
        for node in sorted(set(fenced)):
            r = subprocess.run([self.bin["odl_health"], "fence", "lift", "--job-dir", self.job, "--node", node,
                                "--by", "soak"], capture_output=True, text=True)
            if r.returncode != 0:
                f.problems.append("fence lift of %s: %s" % (node, (r.stdout + r.stderr).strip()))
                continue
            ok = self.wait(lambda: self.metrics.get("odl_fenced_nodes") == 0 and time.time() - self.metrics_t < 1, 5)
            f.note = "fence of %s lifted%s" % (node, "" if ok else "; /metrics still shows a fence")
            if not ok:
                f.problems.append("/metrics odl_fenced_nodes is not 0 after the lift")

    def block(self, f):
        """The checkpoint folder refuses writes: as root, whom permissions do not stop, the temporary path of
        every checkpoint due soon is taken by a directory (the write fails as on a full disk); otherwise
        the folder is made read-only."""
        ck = os.path.join(self.job, "checkpoints")
        cur = self.cur_step()
        if os.getuid() == 0:
            committed = max([s for t, s, p in self.commits] or [0])
            lo = min(cur, committed)
            hi = cur + int(self.rate * 60) + 2 * self.every
            due = [s for s in range((lo // self.every + 1) * self.every, hi + 1, self.every)]
            f.blocked = []
            for s in due:
                try:
                    os.makedirs(os.path.join(ck, "ckpt-%08d.h5.tmp" % s), exist_ok=True)
                    f.blocked.append(s)
                except FileExistsError:
                    pass  # that checkpoint is being written at this moment: its temporary file has the name
            if not f.blocked:
                f.note = "no checkpoint write could be refused (each one due was already being written)"
                return
            f.note = "checkpoint writes of steps %d..%d refused" % (f.blocked[0], f.blocked[-1])
        else:
            os.chmod(ck, 0o555)
            f.blocked = ["chmod"]
            f.note = "checkpoint folder read-only"

    def unblock(self, f):
        ck = os.path.join(self.job, "checkpoints")
        if f.blocked == ["chmod"]:
            os.chmod(ck, 0o755)
        else:
            for s in f.blocked:
                p = os.path.join(ck, "ckpt-%08d.h5.tmp" % s)
                if os.path.isdir(p):
                    os.rmdir(p)
        f.blocked = None
        f.note += " for %.1f s" % (time.time() - f.injected)

    def inject_external(self, f):
        # the generations this starts arm the faults after it
        f.injected = time.time()
        if time.time() < self.t_end:
            self.fill_queue()
        self.write_plan()
        if f.kind == "coord_kill":
            f.killed_pid = self.coord.pid
            f.injected, f.gen = time.time(), self.cur_gen
            os.kill(self.coord.pid, signal.SIGKILL)
            self.coord.wait()
            self.coordinator_ended()
            delay = self.rng.uniform(0, 2)
            self.wait(lambda: False, delay)
            f.note = "restarted after %.1f s" % delay
            self.start_coordinator()
        elif f.kind == "preempt":
            f.killed_pid = self.coord.pid
            f.injected, f.gen = time.time(), self.cur_gen
            self.coord.send_signal(signal.SIGTERM)
            limit = 6 * self.a.timeout + 40
            ended = self.wait_coord_exit(limit)
            if not ended:
                f.problems.append("the coordinator did not exit within %.0f s of SIGTERM" % limit)
                os.kill(self.coord.pid, signal.SIGKILL)
                self.coord.wait()
            rc = self.coordinator_ended()
            if rc != 75:
                f.problems.append("preempted coordinator exited %d, not 75" % rc)
            self.read_logs()
            stop = [mm for t, key, mm, life in self.events if key == "preempted" and t >= f.injected - 0.5]
            resume_at = int(stop[-1].group(2)) if stop and stop[-1].group(2) else None
            delay = self.rng.uniform(0, 1)
            self.wait(lambda: False, delay)
            self.start_coordinator()
            if resume_at is not None:
                ok = self.wait(lambda: any(v["resume"] == resume_at and v["life"] == self.life for v in self.gens.values()),
                               30)
                f.note = "exit 75 after the checkpoint of step %d%s" % (
                    resume_at, ", resumed from it" if ok else "; NOT resumed from it")
                if not ok:
                    f.problems.append("the restarted coordinator did not resume from the preemption checkpoint %d" % resume_at)
        elif f.kind == "ckpt_ro":
            f.injected, f.gen = time.time(), self.cur_gen
            s = [x for x in self.step_samples if x[0] > f.injected - 6 and x[1] == self.cur_gen]
            pace = (s[-1][2] - s[0][2]) / (s[-1][0] - s[0][0]) if len(s) >= 2 and s[-1][0] > s[0][0] else self.rate
            f.limit = self.every / max(pace, 0.2) + self.a.timeout + 3
            self.block(f)

    def wait_coord_exit(self, limit):
        t_end = time.time() + limit
        while time.time() < t_end:
            self.read_logs()
            self.monitor()
            if self.coord.poll() is not None:
                return True
            time.sleep(0.2)
        return False

    def report_fault(self, f):
        if f.injected is None:
            text = "fault %d %s: not injected (%s)" % (f.id, f.kind, f.note or "; ".join(f.problems))
        elif f.kind == "slow":
            text = "fault %d %s %s: %s" % (f.id, f.kind, f.spec(), f.named)
        else:
            rec = "recovered in %.1f s (checkpoint of step %d committed)" % (f.recovered - f.injected, f.recover_step) \
                if f.recovered else "not recovered"
            text = "fault %d %s %s in generation %s: named after %.1f s: \"%s\"; %s%s" % (
                f.id, f.kind, f.spec(), f.gen, (f.detected or time.time()) - f.injected, f.named[:160], rec,
                "; " + f.note if f.note else "")
        self.say(text)
        for p in f.problems:
            self.problem("faults", "fault %d %s: %s" % (f.id, f.kind, p))

    def unexplained_failures(self):
        """Failures no fault explains: each one inside a fault's span (its injection to its recovery) is its."""
        spans = [(f.injected - 1, (f.recovered or time.time()) + 1) for f in self.history + self.queue
                 if f.injected and f.kind != "slow"]
        return [x for x in self.failures if not any(a <= x[0] <= b for a, b in spans)]

    # ------------------------------------------------------------------ the run
    def run(self):
        a = self.a
        self.setup()
        self.fill_queue()
        self.write_plan()
        self.start_coordinator()
        if not self.wait(lambda: self.commits, 120):
            raise Abort("no checkpoint committed within 120 s of the start")
        self.say("first checkpoint committed (step %d); faults from now on, for %.1f min" % (
            self.commits[0][1], a.minutes))
        t_end = self.t_end = time.time() + a.minutes * 60
        # the schedule starts now
        self.last_at = None
        for f in self.queue:
            f.at = (self.last_at or time.time()) + self.gap()
            self.last_at = f.at
        self.queue = [f for f in self.queue if f.at <= t_end]
        self.write_plan()
        prev_done = time.time()
        t_plan = 0
        ending = False
        while True:
            self.poll()
            self.read_armed()
            changed = time.time() < t_end and self.fill_queue()
            if time.time() >= t_end and not ending:
                ending = changed = True
            if ending:
                # the end: no new fault; one already armed in the running generation still acts
                self.queue = [q for q in self.queue if q.injected or (q.in_worker and q.armed and
                                                                      q.armed[-1]["generation"] == self.cur_gen)]
            if not self.queue:
                break
            f = self.queue[0]
            if not f.in_worker and not f.injected:
                if time.time() >= max(f.at, prev_done):
                    self.inject_external(f)
            if (f.injected or f.in_worker) and self.advance(f):
                self.queue.pop(0)
                self.history.append(f)
                self.report_fault(f)
                prev_done = (f.recovered or time.time()) + 1
                changed = True
            if changed or time.time() - t_plan > 2:  # and the rate the launcher uses kept fresh
                self.write_plan()
                t_plan = time.time()
            time.sleep(0.2)
        self.finish()

    def finish(self):
        a = self.a
        # the job runs on: one more checkpoint, every rank connected, then the final preemption
        if self.evals:
            self.evals.finish()
        self.say("faults done; stopping the job with SIGTERM after its next checkpoint")
        n0 = len(self.commits)
        # a straggler injected in the running generation slows it until the generation ends: the next
        # checkpoint is then `every` slowed steps away (+335 ms a step took 72 s in the soak of 2026-12-06)
        slow_ms = max([f.ms for f in self.history + self.queue if f.kind == "slow" and f.injected and f.gen == self.cur_gen],
                      default=0)
        limit = max(60.0, 2 * self.every * (1.0 / self.rate + slow_ms / 1000.0))
        ok = self.wait(lambda: len(self.commits) > n0 and self.metrics.get("odl_ranks_alive", 0) ==
                       self.metrics.get("odl_world_size", -1) > 0, limit)
        if not ok:
            self.problem("faults", "no checkpoint committed in the %.0f s after the last fault%s" % (
                limit, " (a straggler of +%d ms a step running)" % slow_ms if slow_ms else ""))
        for p in glob.glob(os.path.join(self.out, "params", "sup.rank*.h5")):
            os.unlink(p)  # only the last generation's, written when it stops
        self.coord.send_signal(signal.SIGTERM)
        if not self.wait_coord_exit(6 * a.timeout + 40):
            self.problem("faults", "the final SIGTERM did not end the coordinator")
            os.kill(self.coord.pid, signal.SIGKILL)
            self.coord.wait()
        rc = self.coordinator_ended()
        self.read_logs()
        if rc != 75:
            self.problem("faults", "the final preemption: the coordinator exited %d, not 75" % rc)
        # nothing of the job may outlive it
        self.wait(lambda: not [p for p in self.job_procs() if p[3] not in "ZX"], a.timeout + 5)
        for pid, gen, comm, state in self.job_procs():
            if state not in "ZX" and pid not in self.leftovers:
                self.leftovers[pid] = "pid %d (%s, state %s) of generation %d still there after the coordinator ended" % (
                    pid, comm, state, gen)
                self.problem("processes", "leftover: " + self.leftovers[pid])
        self.check_generations()
        lineage = self.lineage()
        self.check_samples(lineage)
        self.check_jsonl()
        self.check_disk()
        self.check_memory()
        for x in self.unexplained_failures():
            self.problem("faults", "a failure no fault explains: generation %d failed: %s" % (x[1], x[2]))
        self.check_params(lineage)
        if self.evals:
            self.evals.report()
        self.summary()

    # ------------------------------------------------------------------ end checks
    def check_generations(self):
        started = sorted(self.gens)
        seq = [g for g in started if "start" in self.gens[g]]
        if seq != list(range(1, len(seq) + 1)):
            self.problem("processes", "generations started: %s (want 1..%d, each once)" % (seq, len(seq)))
        final = json.load(open(os.path.join(self.job, "state.json")))["generation"]
        if seq and final != seq[-1]:
            self.problem("processes", "state.json says generation %d, the last started is %d" % (final, seq[-1]))
        self.say("generations 1..%d, state.json's generation read %d times, never going back" % (
            final, len(self.state_gens)))

    def records(self):
        """ODL_SAMPLE_RECORD lines: (gen, rank) -> {step: (epoch, cursor, world, [idx])}; a step twice is a problem."""
        rec = {}
        for p in glob.glob(os.path.join(self.out, "samples", "rec.gen*.rank*.txt")):
            m = re.search(r"rec\.gen(\d+)\.rank(\d+)\.txt$", p)
            d = rec.setdefault((int(m.group(1)), int(m.group(2))), {})
            for ln in open(p):
                f = ln.split()
                if len(f) < 5:
                    continue
                step = int(f[0])
                if step in d:
                    self.problem("samples", "generation %s rank %s recorded step %d twice" % (m.group(1), m.group(2), step))
                d[step] = (int(f[1]), int(f[2]), int(f[3]), [int(x) for x in f[5:5 + int(f[4])]])
        return rec

    def lineage(self):
        """The stretches of steps the final checkpoint is made of: from the final step back, the latest
        generation that took that step, from where it resumed."""
        rec = self.records()
        self.rec = rec
        try:
            final = json.load(open(os.path.join(self.job, "committed.json")))["step"]
        except (OSError, ValueError, KeyError):
            self.problem("params", "no committed.json at the end")
            return []
        self.final_step = final
        segs, end = [], final
        while end > 0:
            gens = sorted({g for (g, r), d in rec.items() if end in d}, reverse=True)
            if not gens:
                self.problem("samples", "no generation recorded step %d, which the final checkpoint includes" % end)
                return segs[::-1]
            g = gens[0]
            resume = self.gens.get(g, {}).get("resume")
            world = next(iter(rec[(g, 0)].values()))[2] if (g, 0) in rec and rec[(g, 0)] else self.gens[g]["world"]
            if resume is None:
                resume = min(min(d) for (gg, r), d in rec.items() if gg == g) - 1
            if resume >= end:
                self.problem("samples", "generation %d resumed at step %d but took step %d" % (g, resume, end))
                return segs[::-1]
            segs.append({"gen": g, "from": resume, "to": end, "world": world})
            end = resume
        return segs[::-1]

    def check_samples(self, segs):
        n = self.a.samples
        per_epoch = collections.defaultdict(collections.Counter)
        lost_steps = []
        last = None
        for s in segs:
            for r in range(s["world"]):
                d = self.rec.get((s["gen"], r), {})
                for step in range(s["from"] + 1, s["to"] + 1):
                    if step not in d:
                        lost_steps.append((s["gen"], r, step))
                        continue
                    epoch, cursor, world, idx = d[step]
                    per_epoch[epoch].update(idx)
                    if r == 0:
                        last = (epoch, cursor, world)
        for g, r, step in lost_steps[:5]:
            self.problem("samples", "step %d of generation %d rank %d is not in the record" % (step, g, r))
        if len(lost_steps) > 5:
            self.problem("samples", "%d more steps missing from the record" % (len(lost_steps) - 5))
        lost = dup = 0
        epochs = sorted(per_epoch)
        for e in epochs:
            c = per_epoch[e]
            complete = e != epochs[-1] or (last and last[1] + last[2] * self.a.batch >= n)
            missing = [i for i in range(n) if c[i] == 0] if complete else []
            twice = [i for i, k in c.items() if k > 1]
            if missing:
                self.problem("samples", "epoch %d: %d sample%s never seen (index %s)" % (
                    e + 1, len(missing), "" if len(missing) == 1 else "s", ", ".join(map(str, missing[:8]))))
            if twice:
                self.problem("samples", "epoch %d: %d sample%s seen more than once (%s)" % (
                    e + 1, len(twice), "" if len(twice) == 1 else "s", ", ".join(map(str, twice[:8]))))
            lost += len(missing)
            dup += len(twice)
        self.lost = lost + dup + len(lost_steps)
        complete = sum(1 for e in epochs if e != epochs[-1]) if epochs else 0
        self.say("samples: %d steps in %d stretch%s (generations %s), %d completed epochs: %d never seen, "
                 "%d seen twice" % (segs[-1]["to"] if segs else 0, len(segs), "" if len(segs) == 1 else "es",
                                    ",".join(str(s["gen"]) for s in segs), complete, lost, dup))

    def check_jsonl(self):
        p = os.path.join(self.out, "metrics.jsonl")
        if not os.path.exists(p):
            self.problem("samples", "no metrics JSONL")
            return
        steps, epochs, bad = [], [], 0
        for ln in open(p):
            try:
                o = json.loads(ln)
            except ValueError:
                bad += 1
                continue
            if o.get("event") == "epoch":
                steps.append(o["step"])
                epochs.append((o["epoch"], o["partial"]))
        twice = [s for s, k in collections.Counter(steps).items() if k > 1]
        if twice:
            self.problem("samples", "the metrics JSONL counts step%s %s more than once" % (
                "" if len(twice) == 1 else "s", ",".join(map(str, twice[:8]))))
        if steps != sorted(steps):
            self.problem("samples", "the metrics JSONL's steps go back")
        full = [e for e, part in epochs if not part]
        if full != list(range(1, len(full) + 1)):
            self.problem("samples", "the metrics JSONL's epochs are not 1..%d once each: %s" % (len(full), full[:20]))
        if bad:
            self.problem("samples", "%d lines of the metrics JSONL are not JSON" % bad)
        self.say("metrics JSONL: %d epoch records, no step twice%s" % (len(steps), "" if not twice else " (FAILED)"))

    def check_disk(self):
        live, size, sup = self.disk_max
        self.say("disk: at most %d checkpoint files (--keep %d), %.1f MB; %d *.superseded (newer than a commit at a "
                 "relaunch, kept by design)" % (live, self.a.keep, size / 1e6, sup))

    def check_memory(self):
        warm = self.a.warmup_s
        growth = {"coordinator": (0.0, None), "worker": (0.0, None)}
        fd_growth = {"coordinator": (0, None), "worker": (0, None)}
        judged = collections.Counter()
        for pid, rows in self.res.items():
            role = rows[0][1]
            t0 = rows[0][0]
            after = [r for r in rows if r[0] - t0 >= warm]
            if len(after) < 2 or after[-1][0] - after[0][0] < warm:
                continue
            judged[role] += 1
            g = (max(r[3] for r in after) - after[0][3]) / 1024.0
            if g > growth[role][0]:
                growth[role] = (g, pid)
            if role == "worker":
                fg = max(r[4] for r in after) - after[0][4]
                if fg > fd_growth[role][0]:
                    fd_growth[role] = (fg, pid)
        # the coordinator's open files with every rank connected: the median of its last samples against
        # that of its first (a file written at that moment is noise; a leak per generation is a trend)
        by_pid = collections.defaultdict(list)
        for t, pid, fds in self.coord_fds:
            by_pid[pid].append(fds)
        med = lambda v: sorted(v)[len(v) // 2]
        for pid, v in by_pid.items():
            if len(v) >= 6 and med(v[-5:]) - med(v[:5]) > fd_growth["coordinator"][0]:
                fd_growth["coordinator"] = (med(v[-5:]) - med(v[:5]), pid)
        for role in growth:
            if growth[role][0] > self.a.rss_bound_mib:
                self.problem("memory", "%s pid %d grew %.1f MiB after its first %.0f s (bound %g MiB)" % (
                    role, growth[role][1], growth[role][0], warm, self.a.rss_bound_mib))
            if fd_growth[role][0] > self.a.fd_bound:
                self.problem("memory", "%s pid %d: open files grew by %d (bound %d)" % (
                    role, fd_growth[role][1], fd_growth[role][0], self.a.fd_bound))
        self.rss_growth = max(growth["coordinator"][0], growth["worker"][0])
        self.rss_judged = judged["coordinator"] + judged["worker"]
        with open(os.path.join(self.out, "resources.csv"), "w") as f:
            f.write("time,pid,role,generation,rss_kib,fds\n")
            for pid, rows in sorted(self.res.items()):
                for t, role, gen, rss, fds in rows:
                    f.write("%.1f,%d,%s,%d,%d,%d\n" % (t, pid, role, gen, rss, fds))
        self.say("memory: RSS growth after %.0f s at most %.1f MiB (coordinator %.1f, worker %.1f; bound %g), open files "
                 "grew by at most %d (coordinator, all ranks connected: median of its last 5 samples over its first 5) "
                 "and %d (worker); %d coordinator and %d worker processes judged" % (warm, self.rss_growth, growth["coordinator"][0], growth["worker"][0],
                                       self.a.rss_bound_mib, fd_growth["coordinator"][0], fd_growth["worker"][0],
                                       judged["coordinator"], judged["worker"]))
        if self.gpu_rows:
            with open(os.path.join(self.out, "gpu.csv"), "w") as f:
                f.write("time,what,index_or_pid,util_pct,mem_mib\n")
                for r in self.gpu_rows:
                    f.write("%.1f,%s,%d,%.0f,%.0f\n" % r)
            util = [r[3] for r in self.gpu_rows if r[1] == "gpu"]
            per_pid = collections.defaultdict(list)
            for r in self.gpu_rows:
                if r[1] == "pid":
                    per_pid[r[2]].append(r[4])
            judged_gpu = [v for v in per_pid.values() if len(v) >= 3]
            mem_growth = max([max(v[1:]) - v[1] for v in judged_gpu] or [0])
            # the pool's peak: the same model and batch in every generation, so one value all along
            by_gen = collections.defaultdict(list)
            for r in self.gpu_rows:
                if r[1] == "pool":
                    by_gen[r[2]].append(r[4])
            peaks = [v for g in by_gen.values() for v in g[1:]]
            pool_spread = max(peaks) - min(peaks) if peaks else 0.0
            self.say("GPU: utilisation mean %.0f%% (%d samples every 10 s; the whole GPU, whatever runs there); "
                     "per-process GPU memory growth after its second sample at most %.0f MiB (%d of the soak's "
                     "processes sampled 3 times or more); rank 0's pool peak %s MiB over %d samples (spread %.1f MiB)" % (
                         sum(util) / max(1, len(util)), len(util), mem_growth, len(judged_gpu),
                         "%.1f-%.1f" % (min(peaks), max(peaks)) if peaks else "n/a", len(peaks), pool_spread))
            if mem_growth > self.a.rss_bound_mib:
                self.problem("memory", "a worker's GPU memory grew %.0f MiB" % mem_growth)
            if pool_spread > self.a.rss_bound_mib:
                self.problem("memory", "rank 0's device pool peak varied by %.1f MiB" % pool_spread)
        errs = []
        for p in glob.glob(os.path.join(self.out, "coord.*.log")) + glob.glob(os.path.join(self.out, "eval", "*.log")):
            errs += [ln.strip() for ln in open(p, errors="replace") if re.search(r"CUDA error|cuda.*failed|NCCL error", ln)]
        if errs:
            self.problem("memory", "%d CUDA/NCCL error lines, the first: %s" % (len(errs), errs[0][:200]))

    def replay_run(self, i, seg, resume, last):
        d = os.path.join(self.out, "replay", "seg%d" % i)
        os.makedirs(d, exist_ok=True)
        # the ranks' sums are the same for either transport
        cmd = self.local_mpi(seg["world"]) + [self.bin["odl_worker"]] + self.worker_args + \
            ["--max-steps", str(seg["to"]), "--checkpoint-dir", d, "--checkpoint-every", "1000000000"]
        if self.a.device == "cuda":
            env_gpus = ",".join(str(i) for i in range(seg["world"]))
            cmd = ["env", "CUDA_VISIBLE_DEVICES=" + env_gpus] + cmd
        if resume:
            cmd += ["--resume", resume]
        env = self.env_base()
        if last:
            env["ODL_DUMP_PARAMS"] = os.path.join(self.out, "params", "replay")
        with open(os.path.join(self.out, "replay", "seg%d.log" % i), "w") as log:
            r = subprocess.run(cmd, cwd=d, env=env, stdout=log, stderr=subprocess.STDOUT)
        if r.returncode != 0:
            self.problem("params", "replay run %d failed (exit %d): %s" % (i, r.returncode, log.name))
            return None
        return os.path.join(d, "ckpt-%08d.h5" % seg["to"])

    def check_params(self, segs):
        self.params_equal = False
        if not segs:
            return
        merged = []
        for s in segs:
            if merged and merged[-1]["world"] == s["world"]:
                merged[-1]["to"] = s["to"]
            else:
                merged.append(dict(s))
        t0 = time.time()
        resume = None
        for i, s in enumerate(merged):
            resume = self.replay_run(i, s, resume, i == len(merged) - 1)
            if not resume:
                return
        world = merged[-1]["world"]
        diff = []
        for r in range(world):
            a_, b = os.path.join(self.out, "params", "sup.rank%d.h5" % r), os.path.join(self.out, "params", "replay.rank0.h5")
            if not os.path.exists(a_):
                diff.append("rank %d wrote no final parameters" % r)
                continue
            if os.path.exists(self.compare):
                c = subprocess.run([self.compare, a_, b, "--bitwise"], capture_output=True, text=True)
                if c.returncode != 0:
                    diff.append("rank %d: %s" % (r, " ".join((c.stdout + c.stderr).strip().splitlines()[-1:])))
            elif open(a_, "rb").read() != open(b, "rb").read():
                diff.append("rank %d differs" % r)
        sched = ", ".join("steps %d-%d at world size %d" % (s["from"] + 1, s["to"], s["world"]) for s in merged)
        if diff:
            self.problem("params", "the final parameters differ from the fault-free replay (%s): %s" % (sched, "; ".join(diff)))
        else:
            self.params_equal = True
            self.say("params: the final parameters (step %d, %d rank%s) equal bit for bit a fault-free replay (%s; %.1f s)" % (
                segs[-1]["to"], world, "s" if world > 1 else "", sched, time.time() - t0))

    def summary(self):
        faults = [f for f in self.history if f.injected]
        kinds = collections.Counter(f.kind for f in faults)
        with open(os.path.join(self.out, "faults.json"), "w") as fh:
            json.dump([{"id": f.id, "kind": f.kind, "spec": f.spec(), "generation": f.gen, "injected": f.injected,
                        "named_after_s": (f.detected - f.injected) if f.detected and f.injected else None,
                        "named": f.named, "recovered_after_s": (f.recovered - f.injected) if f.recovered and f.injected else None,
                        "recovered_at_step": f.recover_step, "note": f.note, "problems": f.problems}
                       for f in self.history], fh, indent=1)
        rec_times = [f.recovered - f.injected for f in faults if f.recovered and f.kind != "slow"]
        if rec_times:
            self.say("recovery: %.1f s mean, %.1f s at most, over %d faults" % (
                sum(rec_times) / len(rec_times), max(rec_times), len(rec_times)))
        missing = [k for k in self.a.kinds if k not in kinds]
        if missing and self.a.minutes * 60 >= 20 * len(self.a.kinds):
            self.problem("faults", "kinds never injected: %s" % ",".join(missing))
        ktext = ", ".join("%s %d" % (k, kinds[k]) for k in KINDS if kinds[k])
        # no process lived past its warm-up with two samples (a short run, faults every few seconds): no figure
        rss = "rss +%.1f MiB" % self.rss_growth if self.rss_judged else "rss not judged (no process outlived its warm-up)"
        head = "%d faults%s, %d lost, %d leftover, params %s, %s" % (
            len(faults), " (%s)" % ktext if ktext else "", self.lost, len(self.leftovers), "equal" if self.params_equal else "DIFFER",
            rss)
        if self.problems:
            checks = sorted({c for c, t in self.problems})
            self.say("FAILED (%s): %s" % (", ".join(checks), head))
            self.exit = 1
        else:
            self.say(head)
            self.exit = 0

    def cleanup(self):
        if self.evals:
            self.evals.cleanup()
        if self.coord and self.coord.poll() is None:
            os.kill(self.coord.pid, signal.SIGKILL)
            self.coord.wait()
        for f in self.history + self.queue:
            if f.kind == "ckpt_ro" and f.blocked:
                self.unblock(f)
        for pid, gen, comm, state in self.job_procs():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


class Abort(Exception):
    pass


def main():
    ap = argparse.ArgumentParser(prog="bench/soak.sh", description=__doc__.split("\n\n")[0])
    ap.add_argument("minutes", type=float, help="minutes of faults")
    ap.add_argument("out_dir", help="the soak's folder (job directory, logs, records); replaced if a soak's")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--ranks", type=int, default=2,
                    help="ranks, one per emulated node (default 2; with 1, no fault that fences: no xid79, no "
                         "escalating xid13)")
    ap.add_argument("--seed", type=int, default=1, help="of the faults and of the training (default 1)")
    ap.add_argument("--gap", default="10-20", help="seconds between faults, MIN-MAX (default 10-20)")
    ap.add_argument("--kinds", default=",".join(KINDS), help="fault kinds to draw from (default all: %s)" % ",".join(KINDS))
    ap.add_argument("--timeout", type=float, default=5, help="the coordinator's --timeout (default 5 s)")
    ap.add_argument("--backoff", type=float, default=0.05, help="the coordinator's --backoff (default 0.05 s)")
    ap.add_argument("--keep", type=int, default=3, help="checkpoints kept (default 3)")
    ap.add_argument("--checkpoint-s", type=float, default=2.5, help="seconds between checkpoints (default 2.5)")
    ap.add_argument("--pace-ms", type=int, help="rank 0 sleeps this after each step (default: cpu 40, cuda 10)")
    ap.add_argument("--model", help="default: cpu mnist_mlp, cuda mnist (the CNN)")
    ap.add_argument("--batch", type=int, help="per rank (default: cpu 32, cuda 64)")
    ap.add_argument("--samples", type=int, help="training samples per epoch (default: cpu 3200, cuda 60000)")
    ap.add_argument("--rss-bound-mib", type=float, default=16, help="RSS growth allowed after the warm-up (default 16)")
    ap.add_argument("--fd-bound", type=int, default=4,
                    help="open files' variation allowed (default 4: a checkpoint write holds its file and folder)")
    ap.add_argument("--warmup-s", type=float, default=10, help="seconds of a process's start not judged for memory")
    ap.add_argument("--plant", default="", help="test switch: lose-sample, leftover and/or eval-differs "
                                                "(comma-separated): the soak must say so and exit 1")
    ap.add_argument("--eval-every", type=float, default=0,
                    help="seconds between evaluation jobs beside the training (bench/soak_eval.py; default 0: none)")
    test_data = os.environ.get("ODL_TEST_DATA") or os.environ.get("ODL_TEST_DATA_DEFAULT") or os.path.join(
        os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "shared", "data")
    ap.add_argument("--eval-weights", help="YOLOv5 weights, .h5 (default: BUILD/yolov5n.h5)")
    ap.add_argument("--eval-data", default=os.path.join(test_data, "yolov5", "coco8"),
                    help="the evaluation's data set (default: $ODL_TEST_DATA/yolov5/coco8)")
    ap.add_argument("--build", default=os.environ.get("ODL_BUILD", "build"),
                    help="the build folder with odl_worker, odl_coordinator, odl_health (default $ODL_BUILD or build; "
                         "a `cmake --preset cpu` build is build-cpu)")
    ap.add_argument("--data", default=os.environ.get("ODL_FMNIST_DIR", "/usr/share/datasets/fashion-mnist"),
                    help="Fashion-MNIST (default $ODL_FMNIST_DIR or /usr/share/datasets/fashion-mnist)")
    a = ap.parse_args()
    a.kinds = [k for k in a.kinds.split(",") if k]
    a.plant = [p for p in a.plant.split(",") if p]
    bad = [k for k in a.kinds if k not in KINDS] + \
        [p for p in a.plant if p not in ("lose-sample", "leftover", "eval-differs")]
    if a.ranks == 1:
        if "xid79" in a.kinds and "--kinds" in " ".join(sys.argv):
            ap.error("--kinds xid79 with one rank: the fence would leave no node to relaunch on")
        a.kinds = [k for k in a.kinds if k != "xid79"]
    if bad or not a.kinds or a.ranks < 1 or not re.fullmatch(r"[\d.]+-[\d.]+", a.gap):
        ap.error("bad --kinds/--plant/--ranks/--gap: %s" % ",".join(bad))
    a.eval_weights = a.eval_weights or os.path.join(a.build, "yolov5n.h5")
    cpu = a.device == "cpu"
    # cuda: 10 ms keeps the fault-free replay of a 20-minute soak to a couple of minutes (it runs unpaced)
    a.pace_ms = a.pace_ms if a.pace_ms is not None else (40 if cpu else 10)
    a.model = a.model or ("mnist_mlp" if cpu else "mnist")
    a.batch = a.batch or (32 if cpu else 64)
    a.samples = a.samples or (3200 if cpu else 60000)
    s = Soak(a)
    s.exit = 1
    try:
        s.run()
    except SetupError as e:
        print("soak: error: %s" % e, file=sys.stderr, flush=True)
        s.exit = 2
    except Abort as e:
        s.problem("faults", "stopped early: %s" % e)
        print("soak: FAILED: %s" % e, flush=True)
        s.exit = 1
    except KeyboardInterrupt:
        print("soak: interrupted", flush=True)
        s.exit = 130
    finally:
        s.cleanup()
    return s.exit


if __name__ == "__main__":
    sys.exit(main())
