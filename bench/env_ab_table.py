#!/usr/bin/env python3
"""The table of bench/env_ab.sh: env_ab_table.py OUT_DIR train|yolo VAR V1 [V2 ...]. Reads what env_ab.sh left in
OUT_DIR (gpu.txt, torch.json, train_<v>_<precision>_r<round>.jsonl or yolo_<v>_r<round>.txt) and prints one
markdown row per value (and precision), with the ratio to PyTorch's peer of the same call."""
import glob, json, os, re, sys
out, mode, var, vals = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
try:
    torch = json.load(open(os.path.join(out, "torch.json")))
except (OSError, ValueError):
    torch = {}
print("%s A/B on %s" % (var, open(os.path.join(out, "gpu.txt")).read().strip()))
if mode == "train":
    # each precision's peer: torch.compile with PyTorch's defaults (TF32 convolutions), autocast bf16, TF32 off
    sections = {"tf32": "mnist_compile", "bf16": "mnist_compile_bf16", "fp32": "mnist_compile_ieee"}
    precs = [p for p in os.environ.get("ODL_AB_PRECISIONS", "tf32 bf16").split() if p in sections]
    peers = {p: (torch.get(sections[p]) or {}).get("512", {}).get("samples_per_s") for p in precs}
    print("| %s | precision | warm samples/s (rounds) | epoch-2 test_acc | / torch.compile |" % var)
    print("|---|---|---|---|---|")
    for v in vals:
        for p in precs:
            sps, acc = [], []
            for f in sorted(glob.glob(os.path.join(out, "train_%s_%s_r*.jsonl" % (v, p)))):
                ev = []
                for l in open(f):
                    try:
                        e = json.loads(l)
                    except ValueError:
                        continue
                    if e.get("event") == "epoch":
                        ev.append(e)
                if len(ev) >= 2:
                    sps.append(ev[-1]["samples_per_s"]); acc.append(ev[-1].get("test_acc"))
            peer = peers.get(p)
            ratio = "%.3fx" % (max(sps) / peer) if sps and peer else "-"
            print("| %s | %s | %s | %s | %s |" % (v, p, ", ".join("%.0f" % x for x in sps), acc[:1], ratio))
    print("torch.compile batch 512: " + ", ".join("%s %s (%s)" % (p, peers[p], sections[p]) for p in precs) + " samples/s")
else:
    print("| %s | fp16 batch 32 images/s (rounds) | beside torch.compile | batch 1 fp16 ms |" % var)
    print("|---|---|---|---|")
    for v in vals:
        ips, rat, b1 = [], [], []
        for f in sorted(glob.glob(os.path.join(out, "yolo_%s_r*.txt" % v))):
            t = open(f).read()
            m = re.search(r"forward batch 32, 640x640, fp16 \(CUDA graph\)\s+(\d+) img/s", t)
            if m: ips.append(m.group(1))
            m = re.search(r"beside torch.compile reduce-overhead fp16\s+\d+ img/s\s+\d+ img/s\s+([\d.]+x)", t)
            if m: rat.append(m.group(1))
            m = re.search(r"forward batch 1, 640x640, fp16 \(CUDA graph\)\s+([\d.]+) ms", t)
            if m: b1.append(m.group(1))
        print("| %s | %s | %s | %s |" % (v, ", ".join(ips), ", ".join(rat), ", ".join(b1)))
