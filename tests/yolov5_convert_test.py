#!/usr/bin/env python3
"""Tests of tools/convert_yolov5.py (run with a python3 that has NumPy and h5py, e.g. Debian's).

  yolov5_convert_test.py convert OUT.h5   convert the real yolov5n.pt to OUT.h5 and check every tensor
                                          against the reference state_dict and the description against
                                          yolov5n_meta.json (the ctest fixture that the C tests use)
  yolov5_convert_test.py reject WORKDIR   files that are not YOLOv5 checkpoints get exit status 1 and one
                                          "convert_yolov5: error:" line naming the file

The data folder is $ODL_TEST_DATA, else $ODL_TEST_DATA_DEFAULT, else ../shared/data. Prints
'N passed, N failed' and exits non-zero on any failure."""
import io
import json
import os
import pickle
import subprocess
import sys
import zipfile

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "..", "tools", "convert_yolov5.py")
DATA = os.environ.get("ODL_TEST_DATA") or os.environ.get("ODL_TEST_DATA_DEFAULT") or "../shared/data"
PT = os.path.join(DATA, "yolov5", "yolov5n.pt")
REF = os.path.join(DATA, "yolov5", "reference", "yolov5n_reference.h5")
META = os.path.join(DATA, "yolov5", "reference", "yolov5n_meta.json")

passed = failed = 0


def check(cond, what):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("FAIL:", what)


def run(src, dst):
    p = subprocess.run([sys.executable, TOOL, src, dst], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def convert(out):
    if not os.path.exists(PT):
        print("SKIP: %s not found (set ODL_TEST_DATA)" % PT)
        sys.exit(77)
    rc, so, se = run(PT, out)
    print(so.strip(), se.strip())
    check(rc == 0, "conversion exit status %d" % rc)
    if rc:
        return
    meta = json.load(open(META))
    with h5py.File(out, "r") as f, h5py.File(REF, "r") as r:
        check(f.attrs["model"] == "yolov5" and f.attrs["odl_format"] == "odl-weights", "root attributes")
        y = f["yolov5"]
        check(int(y.attrs["nc"]) == 80, "nc")
        check(abs(y.attrs["depth_multiple"] - meta["yaml"]["depth_multiple"]) < 1e-12, "depth_multiple")
        check(abs(y.attrs["width_multiple"] - meta["yaml"]["width_multiple"]) < 1e-12, "width_multiple")
        check(abs(y.attrs["bn_eps"] - meta["bn_eps"][0]) < 1e-12, "bn_eps")
        check(json.loads(y.attrs["yaml"]) == meta["yaml"], "yaml text round trip")
        names = [n.decode() if isinstance(n, bytes) else n for n in y["names"][()]]
        check(names == meta["names"], "class names")
        check(np.allclose(y["strides"][()], meta["stride"]), "strides")
        check(np.allclose(y["anchors"][()], np.array(meta["anchors_pixels"])), "anchors in pixels")
        layers = meta["yaml"]["backbone"] + meta["yaml"]["head"]
        check(len(y["layers"]) == len(layers) == int(y.attrs["num_layers"]), "layer count")
        for i, (frm, n, mod, args) in enumerate(layers):
            g = y["layers"]["%02d" % i]
            check(g.attrs["type"] == mod.replace("nn.", ""), "layer %d type" % i)
            frm = frm if isinstance(frm, list) else [frm]
            check(list(g.attrs["from"]) == frm and int(g.attrs["n"]) == n, "layer %d from/n" % i)
            if mod in ("Conv", "C3", "SPPF"):
                check(int(g.attrs["c2"]) == args[0], "layer %d c2" % i)
        # Every tensor equals the checkpoint's (the reference state_dict holds the same float16 values).
        n = 0
        sd = r["state_dict"]
        for k in sd:
            if k.endswith("num_batches_tracked"):
                continue
            name = "model/" + k[len("model."):].replace(".", "/")
            ok = name in f and f[name].dtype == np.float32 and f[name].shape == sd[k].shape and \
                np.array_equal(f[name][()], sd[k][()].astype(np.float32))
            check(ok, "tensor %s" % k)
            n += 1
        check(n == int(y.attrs["num_tensors"]) == 292, "tensor count %d" % n)
        params = sum(sd[k].size for k in sd)
        check(params == meta["n_params"], "parameter count")
    print("converted %s: %d tensors checked" % (out, n))


def reject(work):
    os.makedirs(work, exist_ok=True)
    cases = {}
    p = os.path.join(work, "text.pt")
    open(p, "w").write("not a checkpoint\n")
    cases[p] = "not a zip archive"
    p = os.path.join(work, "empty.pt")
    open(p, "w").close()
    cases[p] = "not a zip archive"
    p = os.path.join(work, "nopickle.pt")
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("archive/readme.txt", "hello")
    cases[p] = "no <root>/data.pkl"
    p = os.path.join(work, "plaindict.pt")
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("archive/data.pkl", pickle.dumps({"epoch": 3, "state": [1, 2]}, protocol=2))
    cases[p] = "is not a YOLOv5 checkpoint"
    p = os.path.join(work, "badpickle.pt")
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("archive/data.pkl", b"\x80\x02garbage")
    cases[p] = "pickle could not be read"
    if os.path.exists(PT):
        raw = open(PT, "rb").read()
        p = os.path.join(work, "truncated.pt")
        open(p, "wb").write(raw[: len(raw) // 2])
        cases[p] = "not a zip archive"
        # A zip whose tensor data is missing (a storage file removed).
        p = os.path.join(work, "nostorage.pt")
        with zipfile.ZipFile(PT) as zi, zipfile.ZipFile(p, "w") as zo:
            for it in zi.infolist():
                if it.filename.endswith("/data/0"):
                    continue
                zo.writestr(it, zi.read(it.filename))
        cases[p] = "has no"
    p = os.path.join(work, "missing.pt")
    cases[p] = "no such file"
    for path, expect in cases.items():
        out = path + ".h5"
        rc, so, se = run(path, out)
        line = se.strip()
        check(rc == 1, "%s: exit status %d, expected 1" % (path, rc))
        check(line.startswith("convert_yolov5: error:") and os.path.basename(path) in line and expect in line,
              "%s: message %r should name the file and say %r" % (path, line, expect))
        check(not os.path.exists(out), "%s: no output written" % path)
        print("%-14s -> %s" % (os.path.basename(path), line))


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("convert", "reject"):
        print(__doc__)
        return 2
    if sys.argv[1] == "convert":
        convert(sys.argv[2])
    else:
        reject(sys.argv[2])
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
