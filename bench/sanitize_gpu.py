#!/usr/bin/env python3
"""Every `ctest -L gpu` test under compute-sanitizer's memcheck, racecheck, initcheck and synccheck
(bench/sanitize_gpu.sh is the entry point; bench/README.md "Sanitizers on the GPU tests").

Each test runs as ctest would run it -- its command, working folder and ENVIRONMENT from
`ctest --show-only=json-v1` -- prefixed by
    compute-sanitizer --tool T --target-processes all --require-cuda-init no [tool options]
so that the processes a test starts (odl_worker, mpirun's ranks) are checked too and a shell or Python
parent is not an error. The fixtures the GPU tests require (the converted YOLOv5 weights, the synthetic
checkpoint) are set up first by ctest itself, without a sanitizer. The error count of a run is the sum
of its "ERROR SUMMARY: N errors" lines (one per checked process); racecheck's warnings are counted
apart. A run that times out, or whose test fails under the tool, is reported as such: its count is not
a clean 0.

Output: one line per (tool, test), then per tool
    sanitize_gpu: memcheck: 0 errors (20 tests: 20 ran, 0 skipped, 0 failed, 0 timed out)
and the last line `sanitize_gpu: 0 errors` (exit 0) or what broke (exit 1); exit 2 on a usage error,
3 where there is nothing to run (no compute-sanitizer, no GPU). Everything is kept in OUT_DIR:
summary.txt, results.json (with the build's commit, from BUILD/odl_build_info.h) and one log per run
(OUT_DIR/logs/TOOL/TEST.log).

racecheck leaves out nvJPEG's own kernels (`--kernel-name-exclude kns=nvjpeg`: not this project's code, and
under racecheck one batched decode of 8 images took over 180 s on an H100, 2026-12-07), and with
`--racecheck-launches N` checks only the first N kernel launches of each process (compute-sanitizer's
--launch-count): a test that runs the same kernels for 18 images or 30 steps has every kernel it uses
checked on the first, where the whole run would take an hour under racecheck. memcheck, initcheck and
synccheck check every launch. A run the kernel kills (SIGKILL, not the time-out: racecheck of one YOLOv5
test held 39 GB of host memory, and 12 at once ran a 128 GB machine out) is run again once at the end with
nothing beside it. initcheck runs decode with nvJPEG's hybrid backend (ODL_NVJPEG_BACKEND=gpu-hybrid, unless
set): the hardware decoder writes where initcheck does not see it, and every read of what it wrote was
reported (TOOL_ENV).

A sweep longer than one lent machine's call goes in parts: `--skip-done OLD/results.json` takes the runs
that ended "ok" with 0 errors there, for the same build commit and ODL_TEST_QUICK only, instead of running
them again (each is marked with the file it came from), and runs the rest.
"""
import argparse
import concurrent.futures
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")
# Per tool: what it checks is in the docs; these options make the count complete. memcheck's leak
# check reports device memory still allocated when a process ends (the pool is given back at exit).
TOOL_ARGS = {
    "memcheck": ["--leak-check", "full"],
    "racecheck": ["--racecheck-report", "all", "--kernel-name-exclude", "kns=nvjpeg"],
    "initcheck": [],
    "synccheck": [],
}
# Per tool, environment its runs get unless the caller set it. initcheck: nvJPEG's hybrid backend, whose
# every step is a CUDA kernel or copy: the hardware decoder's engine writes its YCbCr planes where initcheck
# does not see it, and initcheck then reported every read of them by nvJPEG's own colour conversion
# (nvjpeg::ycbcr_to_format_kernel_roi, 2026-12-07), thousands a batch, and ran past 250 s.
TOOL_ENV = {"initcheck": {"ODL_NVJPEG_BACKEND": "gpu-hybrid"}}
SKIP_RC = 77
KILLED_RC = 128 + signal.SIGKILL  # the shell's status for a child killed by SIGKILL


def find_sanitizer(given):
    for c in ([given] if given else []) + [shutil.which("compute-sanitizer")] + [
            os.path.join(d, "bin", "compute-sanitizer") for d in
            (os.environ.get("CUDA_HOME", ""), "/usr/local/cuda", "/usr/local/cuda-13.0", "/opt/nvidia/cuda")]:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None


def ctest_tests(build, regex, exclude):
    cmd = ["ctest", "--test-dir", build, "-L", "gpu", "--show-only=json-v1"]
    if regex:
        cmd += ["-R", regex]
    if exclude:
        cmd += ["-E", exclude]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    tests = []
    for t in json.loads(out)["tests"]:
        props = {p["name"]: p["value"] for p in t.get("properties", [])}
        tests.append({
            "name": t["name"],
            "command": t.get("command", []),
            "cwd": props.get("WORKING_DIRECTORY", build),
            "env": props.get("ENVIRONMENT", []),
            "labels": props.get("LABELS", []),
            "setup": props.get("FIXTURES_SETUP", []),
            "required": props.get("FIXTURES_REQUIRED", []),
            "skip_rc": int(props.get("SKIP_RETURN_CODE", SKIP_RC)),
        })
    return tests


# the YOLOv5 tests that compare with the official outputs in the data folder's yolov5/reference (the forward,
# layers and detect programs, in every precision: tests/yolov5.cmake)
REFERENCE_TESTS = re.compile(r"^yolov5_(half_|tf32_)?(forward|layers|detect)_")


def reference_tests(tests):
    return [t for t in tests if REFERENCE_TESTS.match(t["name"])]


def test_data_dir(tests):
    """The data folder the reference tests among `tests` read (tests/test_util.h odl_test_data_dir:
    $ODL_TEST_DATA, else the build's default from the test's environment, relative to the test's folder);
    None when none of them is one."""
    for t in reference_tests(tests):
        env = env_of(t)
        d = env.get("ODL_TEST_DATA") or env.get("ODL_TEST_DATA_DEFAULT") or "../shared/data"
        return os.path.join(t["cwd"], d)
    return None


def env_of(test):
    env = dict(os.environ)
    for kv in test["env"]:
        k, _, v = kv.partition("=")
        env[k] = v
    return env


def build_commit(build):
    """The commit the build was configured at (cmake/OdlBuildInfo.cmake), "unknown" without one."""
    try:
        m = re.search(r'ODL_BUILD_COMMIT "([^"]*)"', open(os.path.join(build, "odl_build_info.h")).read())
        return m.group(1) if m else "unknown"
    except OSError:
        return "unknown"


def launch_limit(tool, racecheck_launches):
    """The launches of each process a run of this tool checks (0: all): --racecheck-launches is racecheck's."""
    return racecheck_launches if tool == "racecheck" else 0


def covers(earlier_limit, limit):
    """Whether a run that checked the first earlier_limit launches of each process (0: all) checked what one
    of limit would."""
    return earlier_limit == 0 or (limit != 0 and earlier_limit >= limit)


def done_before(paths, commit, quick, racecheck_launches=0):
    """{(tool, test): result} of the runs that ended "ok" with 0 errors in earlier results.json files of this commit
    and the same ODL_TEST_QUICK (a racecheck run also checking at least the launches this one would); raises
    ValueError for a file of another build or size (its runs say nothing about this one)."""
    done = {}
    for path in paths:
        d = json.load(open(path))
        if commit == "unknown" or commit.endswith("-dirty") or d.get("commit") != commit:
            raise ValueError("%s: its build commit is %s, this build's %s (only a clean build's own earlier runs "
                             "count)" % (path, d.get("commit", "not recorded"), commit))
        # files written before the field was (2026-12-07) ran with the default, 1
        if d.get("test_quick", "1") != quick:
            raise ValueError("%s: ODL_TEST_QUICK=%s there, %s here" % (path, d.get("test_quick", "1"), quick))
        for r in d["results"]:
            limit = launch_limit(r["tool"], racecheck_launches)
            if r["status"] == "ok" and r["errors"] == 0 and covers(r.get("launch_count", 0), limit):
                done[(r["tool"], r["test"])] = dict(r, earlier=r.get("earlier", path))
    return done


def tool_args(tool, racecheck_launches):
    """The options of one tool's runs, and the launch count they check (0: all)."""
    n = launch_limit(tool, racecheck_launches)
    return TOOL_ARGS[tool] + (["--launch-count", str(n)] if n else []), n


def run_one(san, tool, test, logdir, timeout, deadline, racecheck_launches=0):
    """One (tool, test) run; deadline (time.monotonic() value, or None): a run not started by then is
    "not run", and none outlasts it."""
    cut_by_deadline = False  # its time-out is the deadline's, not --timeout: ended there, it did not time out
    if deadline is not None:
        left = deadline - time.monotonic()
        if left <= 0:
            return {"tool": tool, "test": test["name"], "errors": 0, "warnings": 0, "leaks": 0,
                    "status": "not run (deadline)", "rc": None, "wall_s": 0.0, "log": "", "launch_count": 0}
        cut_by_deadline = left < timeout
        timeout = min(timeout, left)
    log = os.path.join(logdir, tool, test["name"] + ".log")
    os.makedirs(os.path.dirname(log), exist_ok=True)
    # the test's own exit status, written by a shell around it: compute-sanitizer loses it for a process
    # that ends before any CUDA call ("couldn't find exit code", exit 0), as a GPU test that skips does
    rc_file = log + ".rc"
    if os.path.exists(rc_file):
        os.unlink(rc_file)
    keep_rc = ["/bin/sh", "-c", 'st=0; "$@" || st=$?; echo "$st" > "$0"; exit "$st"', rc_file]
    args, launch_count = tool_args(tool, racecheck_launches)
    cmd = [san, "--tool", tool, "--target-processes", "all", "--require-cuda-init", "no",
           "--print-limit", "1000"] + args + keep_rc + test["command"]
    t0 = time.monotonic()
    env = env_of(test)
    set_env = {k: v for k, v in TOOL_ENV.get(tool, {}).items() if k not in env}
    env.update(set_env)
    with open(log, "w") as f:
        f.write("# " + " ".join(cmd) + "\n# cwd " + test["cwd"] + "\n")
        if set_env:
            f.write("# env " + " ".join("%s=%s" % kv for kv in sorted(set_env.items())) + "\n")
        f.flush()
        # its own session, so that a time-out ends the sanitizer and everything the test started
        p = subprocess.Popen(cmd, cwd=test["cwd"], env=env, stdout=f, stderr=subprocess.STDOUT,
                             start_new_session=True)
        try:
            rc = p.wait(timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            rc = p.wait()
            timed_out = True
    wall = time.monotonic() - t0
    if not timed_out:
        try:
            with open(rc_file) as f:
                rc = int(f.read().strip())
        except (OSError, ValueError):
            pass  # the shell never ran: the sanitizer's own status stands
    text = open(log, errors="replace").read()
    errors = sum(int(m) for m in re.findall(r"^=+ ERROR SUMMARY: (\d+) errors?", text, re.M))
    summaries = len(re.findall(r"^=+ ERROR SUMMARY:", text, re.M))
    race = re.findall(r"RACECHECK SUMMARY: \d+ hazards? displayed \((\d+) errors?, (\d+) warnings?\)", text)
    warnings = sum(int(w) for _, w in race)
    if tool == "racecheck" and not summaries:
        # racecheck of compute-sanitizer 2025 and later (the H200's) ends a process with its RACECHECK
        # SUMMARY line alone: a run of 0 hazards is clean, not "no summary"
        errors = sum(int(e) for e, _ in race)
        summaries = len(race)
    # memcheck's leak check: device memory still allocated when a process ended (counted in its errors)
    leaks = len(re.findall(r"^=+ Leaked \d+ bytes", text, re.M))
    if timed_out:
        status = "ended at the deadline" if cut_by_deadline else "timed out"
    elif rc == test["skip_rc"]:
        status = "skipped"
    elif rc in (KILLED_RC, -signal.SIGKILL):  # the test under the shell, or the sanitizer itself
        status = "killed (SIGKILL: out of host memory?)"
    elif rc != 0:
        # the dynamic loader's words, where the test could not start (a build unpacked elsewhere whose library
        # folder is not on LD_LIBRARY_PATH: 2026-12-07, every test of a run)
        m = re.search(r"error while loading shared libraries: (\S+?):", text)
        status = "failed (exit %d%s)" % (rc, ": cannot load " + m.group(1) if m else "")
    elif summaries == 0:
        status = "no summary (the sanitizer checked no CUDA process)"
    else:
        status = "ok"
    return {"tool": tool, "test": test["name"], "errors": errors, "warnings": warnings, "leaks": leaks, "status": status,
            "rc": rc, "wall_s": round(wall, 1), "log": log, "launch_count": launch_count}


def print_run(r):
    print("%-9s %-36s %4d error%s%s%s  %7.1f s  %s" % (
        r["tool"], r["test"], r["errors"], "" if r["errors"] == 1 else "s",
        ", %d warnings" % r["warnings"] if r["warnings"] else "",
        " (%d leaks)" % r["leaks"] if r["leaks"] else "", r["wall_s"], r["status"]), flush=True)


def missing_options(san, tools, racecheck_launches):
    """The options of this sweep that this compute-sanitizer's --help does not name (an older one): []
    when it has them all."""
    want = []
    if "racecheck" in tools:
        want.append("--kernel-name-exclude")
        if racecheck_launches:
            want.append("--launch-count")
    if not want:
        return []
    r = subprocess.run([san, "--help"], capture_output=True, text=True)
    return [o for o in want if o not in r.stdout + r.stderr]


def main():
    ap = argparse.ArgumentParser(prog="bench/sanitize_gpu.sh", description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir", nargs="?", default="sanitize_gpu.out", help="results and logs (default ./sanitize_gpu.out)")
    ap.add_argument("--build", default=os.environ.get("ODL_BUILD", "build"), help="build folder (default $ODL_BUILD or build)")
    ap.add_argument("--tools", default=",".join(TOOLS), help="comma-separated subset of " + ",".join(TOOLS))
    ap.add_argument("-R", dest="regex", help="only tests matching this ctest regex")
    ap.add_argument("-E", dest="exclude", help="leave out tests matching this ctest regex")
    ap.add_argument("-j", dest="jobs", type=int, default=1,
                    help="runs at once on the GPU (default 1: some tests take half the GPU's memory for their pool)")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per run (default 1800)")
    ap.add_argument("--deadline", type=float,
                    help="seconds for the whole script: later runs are not started, runs in flight are ended, and "
                         "the summary is still written (for a lent GPU's call limit)")
    ap.add_argument("--sanitizer", default=os.environ.get("COMPUTE_SANITIZER"), help="compute-sanitizer to use")
    ap.add_argument("--longest-first", metavar="RESULTS_JSON", action="extend", nargs="+", default=[],
                    help="start the runs that took longest in these earlier results.json files (one or more; repeatable) first (with -j and a "
                         "deadline, the long ones then overlap the short); runs they do not have come first of all")
    ap.add_argument("--skip-done", metavar="RESULTS_JSON", action="extend", nargs="+", default=[],
                    help="take the runs that ended ok with 0 errors in these earlier results.json files of the same "
                         "build commit and ODL_TEST_QUICK instead of running them again (a sweep in parts)")
    ap.add_argument("--racecheck-launches", metavar="N", type=int, default=0,
                    help="racecheck checks only the first N kernel launches of each process (default 0: all; the "
                         "other tools check every launch)")
    ap.add_argument("--no-fixtures", action="store_true",
                    help="do not set up the fixtures first (they are there already; the script's own test)")
    a = ap.parse_args()
    # the tests run in their own folders (build/tests): a folder the caller named relative to where they
    # stand would be read from there (a log's exit-status file lost, the test data not found)
    a.out_dir = os.path.abspath(a.out_dir)
    for var in ("ODL_TEST_DATA", "ODL_FMNIST_DIR"):
        if os.environ.get(var) and not os.path.isabs(os.environ[var]):
            os.environ[var] = os.path.abspath(os.environ[var])
    tools = [t for t in a.tools.split(",") if t]
    bad = [t for t in tools if t not in TOOLS]
    if bad:
        print("sanitize_gpu: error: unknown tool %s (known: %s)" % (",".join(bad), ",".join(TOOLS)), file=sys.stderr)
        return 2
    san = find_sanitizer(a.sanitizer)
    if not san:
        print("sanitize_gpu: nothing to run: no compute-sanitizer (it comes with the CUDA toolkit; set COMPUTE_SANITIZER)")
        return 3
    if a.racecheck_launches < 0:
        print("sanitize_gpu: error: --racecheck-launches %d: a count of launches, 0 for all" % a.racecheck_launches,
              file=sys.stderr)
        return 2
    missing = missing_options(san, tools, a.racecheck_launches)
    if missing:
        print("sanitize_gpu: error: %s has no %s (its --help does not name it): a newer CUDA toolkit's has"
              % (san, " or ".join(missing)), file=sys.stderr)
        return 2
    if not os.path.isfile(os.path.join(a.build, "CTestTestfile.cmake")):
        print("sanitize_gpu: error: %s is no build folder (configure and build first; --build DIR)" % a.build,
              file=sys.stderr)
        return 2
    all_tests = ctest_tests(a.build, a.regex, a.exclude)
    setups = sorted({t["name"] for t in all_tests if t["setup"]})
    tests = [t for t in all_tests if t["name"] not in setups and "gpu" in t["labels"]]
    if not tests:
        print("sanitize_gpu: nothing to run: no gpu test matches")
        return 3
    data = test_data_dir(tests)
    if data and not os.path.isdir(os.path.join(data, "yolov5", "reference")):
        # they would only skip, and a sweep's device time be spent for nothing (2026-12-07: a call that
        # did not carry the data)
        print("sanitize_gpu: error: no YOLOv5 reference data in %s, which %d of the tests read (set ODL_TEST_DATA "
              "to the test data folder; README, \"Test data\")" % (data, len(reference_tests(tests))),
              file=sys.stderr)
        return 2
    commit = build_commit(a.build)
    # the tests' smaller sizes (tests/test_util.h odl_test_quick: every kind of case, fewer or smaller of
    # each), unless the caller set ODL_TEST_QUICK (0: the full sizes); set for the tests after the fixtures
    quick = os.environ.get("ODL_TEST_QUICK", "1")
    try:
        done = done_before(a.skip_done, commit, quick, a.racecheck_launches)
    except (OSError, ValueError, KeyError) as e:
        print("sanitize_gpu: error: --skip-done: %s" % e, file=sys.stderr)
        return 2
    os.makedirs(a.out_dir, exist_ok=True)
    logdir = os.path.join(a.out_dir, "logs")
    if setups and not a.no_fixtures:  # the fixtures, as ctest runs them (no sanitizer)
        print("sanitize_gpu: fixtures first: " + ", ".join(setups), flush=True)
        r = subprocess.run(["ctest", "--test-dir", a.build, "-R", "^(" + "|".join(map(re.escape, setups)) + ")$",
                            "--output-on-failure"], capture_output=True, text=True)
        if r.returncode != 0:
            print(r.stdout[-4000:])
            print("sanitize_gpu: a fixture failed; the tests that need it will skip or fail")
    os.environ["ODL_TEST_QUICK"] = quick
    if a.jobs > 1 and "ODL_CUDA_POOL_PERCENT_MAX" not in os.environ:
        # each test's pool would take half of the GPU's free memory: the later of several at once would get
        # too little; a share each leaves room for all and for what else runs on the GPU
        os.environ["ODL_CUDA_POOL_PERCENT_MAX"] = str(max(1, 60 // a.jobs))
    cap = os.environ.get("ODL_CUDA_POOL_PERCENT_MAX")
    print("sanitize_gpu: %s, %d tests x %s, %s%s%s%s" % (san, len(tests), ",".join(tools), a.build,
          ", pools at most %s%% of free memory each" % cap if cap else "",
          ", ODL_TEST_QUICK=%s" % quick,
          ", racecheck of the first %d launches of each process" % a.racecheck_launches
          if a.racecheck_launches and "racecheck" in tools else ""), flush=True)
    deadline = time.monotonic() + a.deadline if a.deadline else None
    jobs = [(tool, t) for tool in tools for t in tests if (tool, t["name"]) not in done]
    earlier = [done[(tool, t["name"])] for tool in tools for t in tests if (tool, t["name"]) in done]
    if earlier:
        print("sanitize_gpu: %d runs ended ok in earlier results of this build (%s): not run again"
              % (len(earlier), commit), flush=True)
    if a.longest_first:
        took = {}
        for path in a.longest_first:
            try:
                for r in json.load(open(path))["results"]:
                    if not r["status"].startswith("not run"):  # a run in flight at a deadline took at least that
                        took[(r["tool"], r["test"])] = max(took.get((r["tool"], r["test"]), 0.0), r["wall_s"])
            except (OSError, ValueError, KeyError) as e:
                print("sanitize_gpu: error: --longest-first %s: %s" % (path, e), file=sys.stderr)
                return 2
        jobs.sort(key=lambda j: -took.get((j[0], j[1]["name"]), float("inf")))  # stable: ties keep their order
    results = list(earlier)
    by_name = {t["name"]: t for t in tests}
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, a.jobs)) as ex:
        futs = [ex.submit(run_one, san, tool, t, logdir, a.timeout, deadline, a.racecheck_launches)
                for tool, t in jobs]
        for f in concurrent.futures.as_completed(futs):
            results.append(f.result())
            print_run(results[-1])
    # killed beside others (the host's memory): once more, alone
    for i, r in enumerate(results):
        if r["status"].startswith("killed"):
            print("sanitize_gpu: %s %s was killed beside other runs: once more, alone (the first log kept as %s.killed)"
                  % (r["tool"], r["test"], r["log"]), flush=True)
            os.replace(r["log"], r["log"] + ".killed")
            results[i] = dict(run_one(san, r["tool"], by_name[r["test"]], logdir, a.timeout, deadline,
                                      a.racecheck_launches), killed_before=True)
            print_run(results[i])
    lines = []
    total = 0
    broken = []
    for tool in tools:
        rs = [r for r in results if r["tool"] == tool]
        n_err = sum(r["errors"] for r in rs)
        n_warn = sum(r["warnings"] for r in rs)
        n_leak = sum(r["leaks"] for r in rs)
        ran = sum(r["status"] == "ok" for r in rs)
        skipped = sum(r["status"] == "skipped" for r in rs)
        timed = sum(r["status"] == "timed out" for r in rs)
        not_run = sum(r["status"].startswith("not run") for r in rs)
        cut = sum(r["status"] == "ended at the deadline" for r in rs)
        failed = len(rs) - ran - skipped - timed - not_run - cut
        total += n_err
        limits = sorted({r.get("launch_count", 0) for r in rs if r["status"] == "ok"})
        lines.append("sanitize_gpu: %s: %d error%s%s%s (%d tests: %d ran, %d skipped, %d failed, %d timed out%s%s)%s" % (
            tool, n_err, "" if n_err == 1 else "s", ", %d warnings" % n_warn if n_warn else "",
            " of which %d device-memory leaks" % n_leak if n_leak else "", len(rs), ran, skipped, failed, timed,
            ", %d ended at the deadline" % cut if cut else "", ", %d not run: deadline" % not_run if not_run else "",
            "; launches checked per process: %s" % ", ".join("all" if n == 0 else "first %d" % n for n in limits)
            if limits != [0] and limits else ""))
        broken += ["%s %s: %d errors" % (tool, r["test"], r["errors"]) for r in rs if r["errors"]]
        broken += ["%s %s: %s" % (tool, r["test"], r["status"]) for r in rs
                   if r["status"] not in ("ok", "skipped", "ended at the deadline") and not r["status"].startswith("not run")]
        if cut:
            broken.append("%s: %d runs ended at the deadline" % (tool, cut))
        if not_run:
            broken.append("%s: %d runs not started before the deadline" % (tool, not_run))
    nothing = all(r["status"] == "skipped" for r in results)
    if nothing:
        lines.append("sanitize_gpu: nothing ran (every test skipped: no GPU, or no reference data?)")
    else:
        lines.append("sanitize_gpu: %d errors" % total if not broken else
                     "sanitize_gpu: %d errors; %s" % (total, "; ".join(broken)))
    print("\n".join(lines))
    with open(os.path.join(a.out_dir, "summary.txt"), "w") as f:
        f.write("\n".join("%-9s %-36s %4d errors %4d warnings %8.1f s  %s" % (
            r["tool"], r["test"], r["errors"], r["warnings"], r["wall_s"], r["status"])
            for r in sorted(results, key=lambda r: (r["tool"], r["test"]))) + "\n" + "\n".join(lines) + "\n")
    with open(os.path.join(a.out_dir, "results.json"), "w") as f:
        json.dump({"sanitizer": san, "build": a.build, "commit": commit, "test_quick": quick,
                   "racecheck_launches": a.racecheck_launches, "tools": tools, "results": results}, f, indent=1)
    return 3 if nothing else 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
