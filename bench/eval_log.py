"""What `odl_worker --task=eval` prints about its speed, read back from its log (stderr), for
bench/eval_bench.sh and bench/decode_sweep.sh: one parser for the lines worker/eval.c writes.

    parse(text) -> dict with
      pipe     images/s of the decode -> letterbox -> forward -> NMS loop on rank 0 ("pipeline N images/s")
      wall     images/s over the whole run, weights loading included ("wall (N images/s")
      busy     percent of the loop the device was busy (CUDA events), nan where not printed
      decoded  "5120 by nvjpeg-hardware" (the "images decoded:" line), "" where absent
      per      the speed line's per-image split ("0.40 ms waiting for decode+letterbox, ... per image")
      prep     the image prep line after "image prep on rank 0, " (feeders, phases per batch, busy, counts)
      phases   {phase: ms per batch} from that line ("nvJPEG's batched decode call": 14.43, ...)
      stalls   the image prep's stall reports ("image prep: a batch of 32 images has waited 10 s ..."), in order
"""
import re

NAN = float("nan")


def _num(pattern, text):
    m = re.search(pattern, text)
    return float(m.group(1)) if m else NAN


def parse(text):
    r = {
        "pipe": _num(r"pipeline ([0-9.]+) images/s", text),
        "wall": _num(r"wall \(([0-9.]+) images/s", text),
        "busy": _num(r"device busy ([0-9.]+)%", text),
        "decoded": "",
        "per": "",
        "prep": "",
        "phases": {},
        "stalls": re.findall(r"image prep: a batch .*", text),
    }
    m = re.search(r"images decoded: (.*)", text)
    r["decoded"] = m.group(1) if m else ""
    m = re.search(r"speed on rank 0: (.*per image)", text)
    r["per"] = m.group(1) if m else ""
    m = re.search(r"image prep on rank 0, (.*)", text)
    r["prep"] = m.group(1) if m else ""
    m = re.search(r"per batch: (.*?); busy", r["prep"])
    if m:
        for part in m.group(1).split(", "):
            pm = re.match(r"([0-9.]+) ms (.*)", part)
            if pm:
                r["phases"][pm.group(2)] = float(pm.group(1))
    return r


def read(path):
    """parse() of the file at path; every figure nan and every text empty when it cannot be read."""
    try:
        with open(path) as f:
            return parse(f.read())
    except OSError:
        return parse("")
