#!/usr/bin/env python3
"""OpenCV's side of bench/prep_bench.sh: cv2.imread + YOLOv5's letterbox per image on one thread
(cv2.setNumThreads(1)), the same files, passes and geometry as prep_bench (detect.py: 640 with minimum
stride-32 padding; --square: 640 x 640 as val.py). Prints the mean milliseconds per image of each stage
and one JSON line.

The letterbox is YOLOv5's own (utils/augmentations.py) when its code is found (ODL_YOLOV5_CODE, default
../shared/bench/yolov5-v7.0), else the same arithmetic written out here: r = min(new / h, new / w),
unpad = round(w r), round(h r), padding split round(d - 0.1) / round(d + 0.1), cv2.resize INTER_LINEAR
when the size changes, cv2.copyMakeBorder with 114.

usage: prep_cv2.py [--reps N] [--square] [--img-size N] FILE|DIR ...
"""
import json
import os
import sys
import time

import cv2
import numpy as np


def own_letterbox(im, new_shape=640, color=(114, 114, 114), auto=True, stride=32):
    h, w = im.shape[:2]
    r = min(new_shape / h, new_shape / w)
    unpad = int(round(w * r)), int(round(h * r))
    dw, dh = new_shape - unpad[0], new_shape - unpad[1]
    if auto:
        dw, dh = np.mod(dw, stride), np.mod(dh, stride)
    dw, dh = dw / 2, dh / 2
    if (w, h) != unpad:
        im = cv2.resize(im, unpad, interpolation=cv2.INTER_LINEAR)
    top, bottom = int(round(dh - 0.1)), int(round(dh + 0.1))
    left, right = int(round(dw - 0.1)), int(round(dw + 0.1))
    return cv2.copyMakeBorder(im, top, bottom, left, right, cv2.BORDER_CONSTANT, value=color), r, (dw, dh)


def find_letterbox():
    here = os.path.dirname(os.path.abspath(__file__))
    code = os.environ.get("ODL_YOLOV5_CODE", os.path.join(here, "..", "..", "shared", "bench", "yolov5-v7.0"))
    if os.path.isfile(os.path.join(code, "utils", "augmentations.py")):
        sys.path.insert(0, code)
        try:
            from utils.augmentations import letterbox
            return letterbox, "YOLOv5's utils/augmentations.py letterbox"
        except Exception as e:  # its imports (torch, ...) may be missing here
            print(f"prep_cv2: YOLOv5's letterbox not importable ({type(e).__name__}: {e}); using the same arithmetic",
                  file=sys.stderr)
    return own_letterbox, "YOLOv5's letterbox arithmetic (prep_cv2.py)"


def main():
    reps, square, size, paths = 20, False, 640, []
    a = sys.argv[1:]
    i = 0
    while i < len(a):
        if a[i] == "--square":
            square = True
        elif a[i] in ("--reps", "--img-size"):
            v = int(a[i + 1])
            i += 1
            if a[i - 1] == "--reps":
                reps = v
            else:
                size = v
        elif os.path.isdir(a[i]):
            paths += sorted(os.path.join(a[i], f) for f in os.listdir(a[i])
                            if not f.startswith(".") and f.lower().endswith((".jpg", ".jpeg", ".png")))
        else:
            paths.append(a[i])
        i += 1
    cv2.setNumThreads(1)
    letterbox, which = find_letterbox()
    t_dec = t_lb = 0.0
    for r in range(-1, reps):  # pass -1: page cache and allocator warm, untimed
        for p in paths:
            t0 = time.perf_counter()
            im = cv2.imread(p)
            t1 = time.perf_counter()
            letterbox(im, size, stride=32, auto=not square)
            t2 = time.perf_counter()
            if r >= 0:
                t_dec += t1 - t0
                t_lb += t2 - t1
    per = 1e3 / (reps * len(paths))
    print(f"OpenCV {cv2.__version__} (cv2.imread + {which}): {len(paths)} images, {reps} passes, "
          f"{'square' if square else 'rectangular'} letterbox {size}, one thread")
    print(f"  read + decode      {t_dec * per:.3f} ms/image")
    print(f"  letterbox          {t_lb * per:.3f} ms/image")
    print(f"  decode + letterbox {(t_dec + t_lb) * per:.3f} ms/image")
    print(json.dumps({"bench": "prep", "impl": "opencv", "opencv": cv2.__version__, "images": len(paths), "reps": reps,
                      "square": square, "decode_ms": round(t_dec * per, 4), "letterbox_ms": round(t_lb * per, 4),
                      "total_ms": round((t_dec + t_lb) * per, 4)}))


if __name__ == "__main__":
    main()
