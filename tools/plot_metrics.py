#!/usr/bin/env python3
"""Loss and accuracy curves of an odl_worker metrics file (--metrics-out FILE.jsonl) in one PNG.

  tools/plot_metrics.py RUN.jsonl [MORE.jsonl ...] -o curves.png

Left: train_loss and test_loss per epoch record; right: test_acc. The x axis is the global step, so
runs of different lengths and a resumed run line up; a partial epoch (a run stopped mid-epoch) is drawn
as a hollow marker. Needs matplotlib (Debian: apt-get install python3-matplotlib). Exit status 0, 1 with
one error line (unreadable file, no epoch records), 2 for a usage error."""
import argparse
import json
import os
import sys


def read_records(path):
    recs = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                r = json.loads(line)
            except ValueError as e:
                raise SystemExit("plot_metrics: error: %s:%d: not JSON: %s" % (path, n, e))
            if isinstance(r, dict) and r.get("event") == "epoch":
                recs.append(r)
    if not recs:
        raise SystemExit("plot_metrics: error: %s: no epoch records (written by odl_worker --metrics-out)" % path)
    return recs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("jsonl", nargs="+")
    ap.add_argument("-o", "--output", required=True, help="PNG file to write")
    a = ap.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot_metrics: error: matplotlib is not installed (apt-get install python3-matplotlib)", file=sys.stderr)
        return 1
    try:
        runs = [(p, read_records(p)) for p in a.jsonl]
    except OSError as e:
        print("plot_metrics: error: %s" % e, file=sys.stderr)
        return 1
    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(11, 4))
    for path, recs in runs:
        name = os.path.basename(path)
        for key, style in (("train_loss", "-"), ("test_loss", "--")):
            pts = [(r["step"], r[key]) for r in recs if r.get(key) is not None]
            if pts:
                ax_loss.plot(*zip(*pts), style, marker="o", label="%s %s" % (name, key))
        pts = [(r["step"], r["test_acc"], r.get("partial", False)) for r in recs if r.get("test_acc") is not None]
        if pts:
            line, = ax_acc.plot([p[0] for p in pts], [p[1] for p in pts], "-", label=name)
            for s, v, partial in pts:
                ax_acc.plot([s], [v], "o", color=line.get_color(), fillstyle="none" if partial else "full")
    ax_loss.set_xlabel("step")
    ax_loss.set_ylabel("loss (NLL)")
    ax_loss.set_title("loss")
    ax_loss.legend(fontsize="small")
    ax_acc.set_xlabel("step")
    ax_acc.set_ylabel("test accuracy")
    ax_acc.set_title("accuracy")
    ax_acc.legend(fontsize="small")
    for ax in (ax_loss, ax_acc):
        ax.grid(True, alpha=0.3)
    fig.tight_layout()
    try:
        fig.savefig(a.output, dpi=100)
    except OSError as e:
        print("plot_metrics: error: %s" % e, file=sys.stderr)
        return 1
    print("plot_metrics: wrote %s (%d run(s))" % (a.output, len(runs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
