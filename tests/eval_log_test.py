#!/usr/bin/env python3
"""bench/eval_log.py against what odl_worker --task=eval really prints: an evaluation of coco8 on the CPU
through the device pipeline (--backend-post) with the stand-in nvJPEG (tests/fake_nvjpeg.c), half of its
JPEGs on the CPU (ODL_NVJPEG_CPU_SHARE=50), its call stalled 1.5 s (FAKE_NVJPEG_SLEEP_MS) with a stall
report after 1 s (ODL_GPU_PREP_STALL_S). The parser must find every figure the benchmarks tabulate:
the loop's and the wall's images/s, the decoded counts (8 in all, both decoders), the per-image split,
the image prep line's six phases by the names decode_sweep.sh shortens, and the stall report.
Usage: eval_log_test.py ODL_WORKER WEIGHTS.h5 FAKE_NVJPEG_LIB   (exit 77 without the coco8 data)"""
import os
import re
import subprocess
import sys
import tempfile

src = os.environ.get("ODL_SOURCE_DIR", os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(src, "bench"))
import eval_log  # noqa: E402

worker, weights, fake = sys.argv[1:4]
data = os.environ.get("ODL_TEST_DATA") or os.environ.get("ODL_TEST_DATA_DEFAULT", "")
coco8 = os.path.join(data, "yolov5", "coco8")
if not os.path.isdir(coco8) or not os.path.isfile(weights):
    print(f"SKIP: no {coco8} or {weights}")
    sys.exit(77)

fails = 0


def check(ok, what):
    global fails
    if not ok:
        fails += 1
        print("FAIL", what)


with tempfile.TemporaryDirectory() as tmp:
    env = dict(os.environ, ODL_NVJPEG_LIBRARY=fake, ODL_NVJPEG_CPU_SHARE="50", ODL_GPU_PREP_STALL_S="1",
               FAKE_NVJPEG_SLEEP_MS="1500")
    p = subprocess.run([worker, "--task=eval", "--model=yolov5", "--weights", weights, "--data", coco8, "--square",
                        "--device", "cpu", "--backend-post", "--batch-size", "8", "--output", tmp + "/out"],
                       env=env, capture_output=True, text=True, timeout=600)
    log = p.stderr
check(p.returncode == 0, f"eval exit {p.returncode}: {log[-2000:]}")
r = eval_log.parse(log)
check(r["pipe"] > 0 and r["wall"] > 0, f"images/s: pipe {r['pipe']}, wall {r['wall']}")
check(r["busy"] != r["busy"], f"device busy on the CPU: {r['busy']} (the CPU device has no events)")
counts = {d: int(n) for n, d in re.findall(r"([0-9]+) by ([a-z-]+)", r["decoded"])}
check(sum(counts.values()) == 8 and counts.get("cpu", 0) > 0 and counts.get("nvjpeg-hardware", 0) > 0,
      f"decoded: {r['decoded']!r}")
check("waiting for decode+letterbox" in r["per"], f"per image: {r['per']!r}")
want = ["waiting for file reads+headers", "nvJPEG header checks", "slot reuse", "in nvJPEG's batched decode call",
        "waiting for CPU decodes", "uploads"]
check(list(r["phases"]) == want, f"phases: {list(r['phases'])}")
check(r["phases"].get("in nvJPEG's batched decode call", 0) >= 1400, f"the stalled call: {r['phases']}")
check(len(r["stalls"]) >= 1 and "feeder 0 in nvJPEG's batched decode call" in r["stalls"][0],
      f"stall reports: {r['stalls']}")
empty = eval_log.parse("")
check(empty["pipe"] != empty["pipe"] and empty["decoded"] == "" and empty["phases"] == {}, "empty log")
print(f"eval_log: pipe {r['pipe']} images/s, decoded {r['decoded']}, {len(r['phases'])} phases, "
      f"{len(r['stalls'])} stall report(s); {fails} failed")
sys.exit(1 if fails else 0)
