"""The soak's evaluations (bench/soak.py --eval-every S): YOLOv5 evaluation jobs, each under an
odl_coordinator of its own (the evaluation work queue, docs/coordinator.md), one after another beside the
training job on the same device, every other one with its rank killed after its second batch (a relaunch
that re-queues the chunk it held). What they must show: every job exits 0, writes a metrics.json equal
byte for byte to that of one unsupervised process at the start (tests/eval_coord.sh's check, now under
the training's load and faults), each killed one recovers with exactly one relaunch, and no process of
a finished job is left. On CUDA the soak's GPU samples (every 10 s) include these processes.
"""
import os
import re
import signal
import subprocess
import time


class EvalRuns:
    def __init__(self, soak, every_s, weights, data, plant_differs=False):
        self.s = soak
        self.every = every_s
        self.weights = os.path.abspath(weights)
        self.data = os.path.abspath(data)
        self.plant = plant_differs
        self.dir = os.path.join(soak.out, "eval")
        self.ref = None          # metrics.json bytes of the unsupervised run
        self.ref_map = ""
        self.run = None          # the job in flight: dict
        self.done = []           # judged jobs: dict(i, killed, rc, wall_s)
        self.next_at = 0.0
        self.stopping = False

    # the same evaluation settings for the reference and every supervised job (the queue's key is made of them)
    def worker_args(self, out):
        cuda = self.s.a.device == "cuda"
        return ["--task=eval", "--model=yolov5", "--weights", self.weights, "--data", self.data,
                "--img-size", "640" if cuda else "320", "--batch-size", "2", "--device", self.s.a.device,
                "--output", out]

    def check_inputs(self):
        """Before any run: a missing weights file or data set is an error (the user asked for evaluations)."""
        if not os.path.exists(self.weights):
            raise SystemExit("soak: error: --eval-every needs the YOLOv5 weights %s: make them with `ctest --test-dir "
                             "BUILD -R '^yolov5_convert$'` (or tools/convert_yolov5.py), or give --eval-weights"
                             % self.weights)
        if not os.path.isdir(self.data):
            raise SystemExit("soak: error: --eval-every needs the data set %s: set ODL_TEST_DATA to the folder holding "
                             "yolov5/coco8 (default ../shared/data beside the checkout), or give --eval-data" % self.data)

    def setup(self):
        """The unsupervised reference, whose metrics.json every supervised job must equal."""
        os.makedirs(self.dir, exist_ok=True)
        out = os.path.join(self.dir, "ref")
        t0 = time.time()
        with open(os.path.join(self.dir, "ref.log"), "w") as log:
            r = subprocess.run([self.s.bin["odl_worker"]] + self.worker_args(out), stdout=log, stderr=subprocess.STDOUT,
                               env=self.s.env_base(), cwd=self.dir)
        path = os.path.join(out, "metrics.json")
        if r.returncode != 0 or not os.path.exists(path):
            raise SystemExit("soak: error: the unsupervised evaluation failed (exit %d): %s" % (r.returncode, log.name))
        self.ref = open(path, "rb").read()
        m = re.search(rb'"map50_95":\s*([\d.]+)', self.ref)
        self.ref_map = m.group(1).decode() if m else "?"
        self.s.say("evaluation: the unsupervised reference took %.1f s (mAP50-95 %s); a supervised evaluation job "
                   "every %g s from now on, every other one with its rank killed after its second batch" % (
                       time.time() - t0, self.ref_map, self.every))
        self.next_at = time.time() + self.every

    def job_pids(self, job):
        return [pid for pid, gen, comm, state in self.s.job_procs(job) if state not in "ZX"]

    def start(self):
        i = len(self.done) + 1
        killed = i % 2 == 0
        job, out = os.path.join(self.dir, "job%d" % i), os.path.join(self.dir, "out%d" % i)
        env = self.s.env_base()
        if killed:
            env["ODL_FAULT"] = "kill@rank=0,step=2"
        args = self.worker_args(out)
        if self.plant and i == 2:
            args += ["--conf-thres", "0.01"]  # test switch: another evaluation, so its metrics.json differs
        mpi = self.s.local_mpi(1) + [self.s.bin["odl_worker"]]
        cmd = [self.s.bin["odl_coordinator"], "--job-dir", job, "--listen", "127.0.0.1:0", "--http", "off",
               "--timeout", str(self.s.a.timeout), "--backoff", "0", "--max-restarts", "2", "--"] + mpi + args
        log = open(os.path.join(self.dir, "job%d.log" % i), "w")
        p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=self.dir, stdin=subprocess.DEVNULL)
        self.run = {"i": i, "killed": killed, "job": job, "out": out, "p": p, "log": log, "t0": time.time()}

    def tick(self, now):
        """Called from the soak's monitor: judge a finished job, start the next one when due."""
        r = self.run
        if r:
            if r["p"].poll() is None:
                if now - r["t0"] > 300:
                    os.kill(r["p"].pid, signal.SIGKILL)
                    r["p"].wait()
                    self.judge(r, "ran past 300 s")
                return
            self.judge(r)
            self.next_at = now + self.every
        elif not self.stopping and now >= self.next_at:
            self.start()

    def judge(self, r, why=""):
        self.run = None
        r["log"].close()
        wall = time.time() - r["t0"]
        text = open(r["log"].name, errors="replace").read()
        rc = r["p"].returncode
        res = {"i": r["i"], "killed": r["killed"], "rc": rc, "wall_s": wall}
        self.done.append(res)
        name = "evaluation %d%s" % (r["i"], " (rank killed)" if r["killed"] else "")
        if why or rc != 0:
            self.s.problem("eval", "%s: %s (coordinator exit %s): %s" % (name, why or "failed", rc, r["log"].name))
            return
        path = os.path.join(r["out"], "metrics.json")
        if not os.path.exists(path) or open(path, "rb").read() != self.ref:
            self.s.problem("eval", "%s: metrics.json differs from the unsupervised one (%s)" % (name, path))
        relaunches = len(re.findall(r"relaunching in", text))
        if r["killed"] and (relaunches != 1 or "kill@rank=0,step=2 fires now" not in text):
            self.s.problem("eval", "%s: %d relaunches (want 1 after the kill): %s" % (name, relaunches, r["log"].name))
        if not r["killed"] and relaunches:
            self.s.problem("eval", "%s: %d relaunches without a fault: %s" % (name, relaunches, r["log"].name))
        deadline = time.time() + self.s.a.timeout + 5
        while self.job_pids(r["job"]) and time.time() < deadline:
            time.sleep(0.2)
        left = self.job_pids(r["job"])
        if left:
            self.s.problem("eval", "%s: processes left after its coordinator ended: %s" % (name, left))

    def finish(self):
        """No new job; the one in flight ends (the soak's monitor keeps running meanwhile)."""
        self.stopping = True
        self.s.wait(lambda: self.run is None, 320)

    def report(self):
        n, k = len(self.done), sum(d["killed"] for d in self.done)
        if not n:
            self.s.problem("eval", "no evaluation job ran")
            return
        ok = not [p for p in self.s.problems if p[0] == "eval"]
        walls = [d["wall_s"] for d in self.done]
        self.s.say("evaluation: %d jobs (%d with the rank killed and relaunched), %s; %.1f s each on average, at "
                   "most %.1f s" % (n, k, "every metrics.json equal to the unsupervised one (mAP50-95 %s)" % self.ref_map
                                    if ok else "FAILED", sum(walls) / n, max(walls)))

    def cleanup(self):
        if self.run and self.run["p"].poll() is None:
            os.kill(self.run["p"].pid, signal.SIGKILL)
            self.run["p"].wait()
        if self.run:
            for pid in self.job_pids(self.run["job"]):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
