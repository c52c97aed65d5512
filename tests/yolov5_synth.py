#!/usr/bin/env python3
"""A synthetic YOLOv5 checkpoint of another size and class count, for the converter and the C model.

  yolov5_synth.py OUT_DIR [--depth 0.67] [--width 0.75] [--nc 3]

writes, without PyTorch:
  OUT_DIR/synth.pt      a torch.save-format zip (archive/data.pkl + archive/data/<key>, float16 tensors)
                        holding {'model': models.yolo.DetectionModel, 'ema': None, ...} with YOLOv5 v6/v7's
                        module tree (Conv/C3/Bottleneck/SPPF/Upsample/Concat/Detect, BatchNorm eps 0.001),
                        random weights, the YOLOv5s/m/... P5 layer list with the given multiples;
  OUT_DIR/synth.h5      its conversion by tools/convert_yolov5.py;
  OUT_DIR/synth_ref.h5  input [2, 3, 64, 96] and the Detect output [2, A, nc + 5] computed here in float64
                        by a NumPy forward of the unfused network (convolution, BatchNorm, SiLU, ...),
                        plus layerNN outputs, for tests/test_yolov5_synth.c.
The pickle is made by registering stand-in modules named models.common, models.yolo, torch,
torch._utils and torch.nn.modules.* so that pickle writes the same global names a real checkpoint
holds. Exit status 0, or 1 with a message."""
import argparse
import collections
import io
import math
import os
import pickle
import subprocess
import sys
import types
import zipfile

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "..", "tools", "convert_yolov5.py")

# ---- stand-in modules so that pickle records the real global names ----
_mods = {}


def fake_module(name):
    if name not in sys.modules:
        m = types.ModuleType(name)
        sys.modules[name] = m
        _mods[name] = m
    return sys.modules[name]


def fake_class(module, name, base=object):
    cls = type(name, (base,), {})
    cls.__module__ = module
    cls.__qualname__ = name
    setattr(fake_module(module), name, cls)
    return cls


class ModuleBase:
    def __init__(self):
        self.training = False
        self._parameters = collections.OrderedDict()
        self._buffers = collections.OrderedDict()
        self._non_persistent_buffers_set = set()
        self._modules = collections.OrderedDict()

    def __reduce_ex__(self, proto):
        # NEWOBJ + BUILD with the instance dict, as torch.nn.Module pickles
        state = {k: v for k, v in self.__dict__.items() if k not in ("np", "anchors_px", "strides_np")}
        return (copyreg_newobj, (type(self),), state)


import copyreg  # noqa: E402

copyreg_newobj = copyreg.__newobj__

torch = fake_module("torch")
fake_module("torch._utils")
fake_module("torch.nn")
fake_module("torch.nn.modules")
for sub in ("conv", "batchnorm", "activation", "container", "pooling", "upsampling"):
    fake_module("torch.nn.modules." + sub)
fake_module("models")
fake_module("models.common")
fake_module("models.yolo")

HalfStorage = fake_class("torch", "HalfStorage")


def _rebuild_tensor_v2(*a):  # never called here: only its name is pickled
    raise RuntimeError


_rebuild_tensor_v2.__module__ = "torch._utils"
_rebuild_tensor_v2.__qualname__ = "_rebuild_tensor_v2"
sys.modules["torch._utils"]._rebuild_tensor_v2 = _rebuild_tensor_v2


class Tensor:
    """Pickles like a torch tensor: _rebuild_tensor_v2(storage, 0, size, stride, False, OrderedDict())."""

    def __init__(self, arr, store):
        self.arr = np.ascontiguousarray(arr, dtype=np.float16)
        self.key = str(len(store))
        store[self.key] = self.arr

    def __reduce_ex__(self, proto):
        shape = self.arr.shape
        stride = tuple(int(s // 2) for s in self.arr.strides)
        return (_rebuild_tensor_v2, (StorageRef(self.key, self.arr.size), 0, shape, stride, False,
                                     collections.OrderedDict()))


class StorageRef:
    def __init__(self, key, numel):
        self.key, self.numel = key, numel


class Pickler(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, StorageRef):
            return ("storage", HalfStorage, obj.key, "cpu", obj.numel)
        return None


def M(module, name):
    return fake_class(module, name, ModuleBase)


Conv2d = M("torch.nn.modules.conv", "Conv2d")
BatchNorm2d = M("torch.nn.modules.batchnorm", "BatchNorm2d")
SiLU = M("torch.nn.modules.activation", "SiLU")
Sequential = M("torch.nn.modules.container", "Sequential")
ModuleList = M("torch.nn.modules.container", "ModuleList")
MaxPool2d = M("torch.nn.modules.pooling", "MaxPool2d")
Upsample = M("torch.nn.modules.upsampling", "Upsample")
ConvM = M("models.common", "Conv")
C3 = M("models.common", "C3")
Bottleneck = M("models.common", "Bottleneck")
SPPF = M("models.common", "SPPF")
Concat = M("models.common", "Concat")
Detect = M("models.yolo", "Detect")
DetectionModel = M("models.yolo", "DetectionModel")

YAML = {
    "nc": 80, "depth_multiple": 0.33, "width_multiple": 0.25,
    "anchors": [[10, 13, 16, 30, 33, 23], [30, 61, 62, 45, 59, 119], [116, 90, 156, 198, 373, 326]],
    "backbone": [[-1, 1, "Conv", [64, 6, 2, 2]], [-1, 1, "Conv", [128, 3, 2]], [-1, 3, "C3", [128]],
                 [-1, 1, "Conv", [256, 3, 2]], [-1, 6, "C3", [256]], [-1, 1, "Conv", [512, 3, 2]],
                 [-1, 9, "C3", [512]], [-1, 1, "Conv", [1024, 3, 2]], [-1, 3, "C3", [1024]],
                 [-1, 1, "SPPF", [1024, 5]]],
    "head": [[-1, 1, "Conv", [512, 1, 1]], [-1, 1, "nn.Upsample", [None, 2, "nearest"]], [[-1, 6], 1, "Concat", [1]],
             [-1, 3, "C3", [512, False]], [-1, 1, "Conv", [256, 1, 1]], [-1, 1, "nn.Upsample", [None, 2, "nearest"]],
             [[-1, 4], 1, "Concat", [1]], [-1, 3, "C3", [256, False]], [-1, 1, "Conv", [256, 3, 2]],
             [[-1, 14], 1, "Concat", [1]], [-1, 3, "C3", [512, False]], [-1, 1, "Conv", [512, 3, 2]],
             [[-1, 10], 1, "Concat", [1]], [-1, 3, "C3", [1024, False]], [[17, 20, 23], 1, "Detect", ["nc", "anchors"]]],
}

rng = np.random.default_rng(1234)


def f16(a):
    return np.asarray(a, dtype=np.float16)


def make_conv(store, c1, c2, k, s, p=None):
    m = ConvM()
    conv = Conv2d()
    w = f16(rng.normal(0, 1.0 / math.sqrt(c1 * k * k), (c2, c1, k, k)))
    conv._parameters["weight"] = Tensor(w, store)
    conv._parameters["bias"] = None
    conv.stride, conv.padding = (s, s), ((k // 2 if p is None else p),) * 2
    bn = BatchNorm2d()
    bn.eps = 0.001
    g = f16(rng.uniform(0.5, 1.5, c2))
    b = f16(rng.normal(0, 0.2, c2))
    mu = f16(rng.normal(0, 0.2, c2))
    var = f16(rng.uniform(0.5, 2.0, c2))
    bn._parameters["weight"] = Tensor(g, store)
    bn._parameters["bias"] = Tensor(b, store)
    bn._buffers["running_mean"] = Tensor(mu, store)
    bn._buffers["running_var"] = Tensor(var, store)
    bn._buffers["num_batches_tracked"] = None
    m._modules["conv"], m._modules["bn"], m._modules["act"] = conv, bn, SiLU()
    # float64 copies for the NumPy forward
    m.np = dict(w=w.astype(np.float64), g=g.astype(np.float64), b=b.astype(np.float64), mu=mu.astype(np.float64),
                var=var.astype(np.float64), s=s, p=(k // 2 if p is None else p))
    return m


def make_divisible(x, d=8):
    return math.ceil(x / d) * d


def build(store, gd, gw, nc):
    yaml = dict(YAML)
    yaml["depth_multiple"], yaml["width_multiple"], yaml["nc"] = gd, gw, nc
    na = len(yaml["anchors"][0]) // 2
    no = na * (nc + 5)
    layers, ch = [], []
    for i, (f, n, mname, args) in enumerate(yaml["backbone"] + yaml["head"]):
        n = max(round(n * gd), 1) if n > 1 else n
        c1 = 3 if i == 0 else ch[f] if isinstance(f, int) else None
        if mname == "Conv":
            c2 = make_divisible(args[0] * gw)
            p = args[3] if len(args) > 3 else None
            mod = make_conv(store, c1, c2, args[1], args[2] if len(args) > 2 else 1, p)
        elif mname == "C3":
            c2 = make_divisible(args[0] * gw)
            shortcut = args[1] if len(args) > 1 else True
            c_ = int(c2 * 0.5)
            mod = C3()
            mod._modules["cv1"] = make_conv(store, c1, c_, 1, 1)
            mod._modules["cv2"] = make_conv(store, c1, c_, 1, 1)
            mod._modules["cv3"] = make_conv(store, 2 * c_, c2, 1, 1)
            seq = Sequential()
            for j in range(n):
                bt = Bottleneck()
                bt._modules["cv1"] = make_conv(store, c_, c_, 1, 1)
                bt._modules["cv2"] = make_conv(store, c_, c_, 3, 1)
                bt.add = bool(shortcut)
                seq._modules[str(j)] = bt
            mod._modules["m"] = seq
            mod.shortcut = bool(shortcut)
        elif mname == "SPPF":
            c2 = make_divisible(args[0] * gw)
            c_ = c1 // 2
            mod = SPPF()
            mod._modules["cv1"] = make_conv(store, c1, c_, 1, 1)
            mod._modules["cv2"] = make_conv(store, c_ * 4, c2, 1, 1)
            mp = MaxPool2d()
            mp.kernel_size = args[1]
            mod._modules["m"] = mp
            mod.k = args[1]
        elif mname == "nn.Upsample":
            c2 = c1
            mod = Upsample()
            mod.scale_factor, mod.mode = 2.0, "nearest"
        elif mname == "Concat":
            c2 = sum(ch[x] for x in f)
            mod = Concat()
            mod.d = 1
        elif mname == "Detect":
            mod = Detect()
            mod.nc, mod.no, mod.nl, mod.na = nc, nc + 5, len(f), na
            ml = ModuleList()
            mod.np = []
            for l, x in enumerate(f):
                cv = Conv2d()
                w = f16(rng.normal(0, 1.0 / math.sqrt(ch[x]), (no, ch[x], 1, 1)))
                b = f16(rng.normal(-1.0, 0.5, no))
                cv._parameters["weight"] = Tensor(w, store)
                cv._parameters["bias"] = Tensor(b, store)
                ml._modules[str(l)] = cv
                mod.np.append((w.astype(np.float64), b.astype(np.float64)))
            mod._modules["m"] = ml
            stride = np.array([8.0, 16.0, 32.0])
            anchors = np.array(yaml["anchors"], dtype=np.float64).reshape(len(f), na, 2) / stride.reshape(-1, 1, 1)
            mod._buffers["anchors"] = Tensor(anchors.astype(np.float32), store)
            mod.stride = Tensor(stride.astype(np.float32), store)
            mod.anchors_px = anchors * stride.reshape(-1, 1, 1)
            mod.strides_np = stride
            c2 = no
        mod.f, mod.i, mod.type, mod.n = f, i, mname, n
        layers.append(mod)
        if i == 0:
            ch = []
        ch.append(c2)
    model = DetectionModel()
    seq = Sequential()
    for i, m in enumerate(layers):
        seq._modules[str(i)] = m
    model._modules["model"] = seq
    model.yaml = yaml
    model.names = ["cls%d" % i for i in range(nc)]
    model.stride = Tensor(np.array([8.0, 16.0, 32.0], dtype=np.float32), store)
    return model, layers


# ---- NumPy forward (float64, unfused) ----
def conv2d(x, w, s, p, b=None):
    n, c, h, wd = x.shape
    k = w.shape[2]
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)))
    ho, wo = (h + 2 * p - k) // s + 1, (wd + 2 * p - k) // s + 1
    out = np.zeros((n, w.shape[0], ho, wo))
    for i in range(k):
        for j in range(k):
            patch = xp[:, :, i:i + s * ho:s, j:j + s * wo:s]
            out += np.einsum("nchw,oc->nohw", patch, w[:, :, i, j])
    if b is not None:
        out += b.reshape(1, -1, 1, 1)
    return out


def silu(x):
    return x / (1 + np.exp(-x))


def run_conv(m, x):
    d = m.np
    y = conv2d(x, d["w"], d["s"], d["p"])
    y = (y - d["mu"].reshape(1, -1, 1, 1)) / np.sqrt(d["var"].reshape(1, -1, 1, 1) + 0.001) * \
        d["g"].reshape(1, -1, 1, 1) + d["b"].reshape(1, -1, 1, 1)
    return silu(y)


def maxpool(x, k):
    p = k // 2
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)), constant_values=-np.inf)
    h, w = x.shape[2:]
    out = np.full(x.shape, -np.inf)
    for i in range(k):
        for j in range(k):
            out = np.maximum(out, xp[:, :, i:i + h, j:j + w])
    return out


def forward(layers, x):
    outs = []
    for m in layers:
        f = m.f
        inp = x if (isinstance(f, int) and f == -1 and m.i == 0) else (outs[f] if isinstance(f, int) else None)
        t = m.type
        if t == "Conv":
            y = run_conv(m, inp)
        elif t == "C3":
            a = run_conv(m._modules["cv1"], inp)
            for bt in m._modules["m"]._modules.values():
                h = run_conv(bt._modules["cv2"], run_conv(bt._modules["cv1"], a))
                a = a + h if bt.add else h
            y = run_conv(m._modules["cv3"], np.concatenate([a, run_conv(m._modules["cv2"], inp)], 1))
        elif t == "SPPF":
            y0 = run_conv(m._modules["cv1"], inp)
            y1 = maxpool(y0, m.k)
            y2 = maxpool(y1, m.k)
            y3 = maxpool(y2, m.k)
            y = run_conv(m._modules["cv2"], np.concatenate([y0, y1, y2, y3], 1))
        elif t == "nn.Upsample":
            y = inp.repeat(2, axis=2).repeat(2, axis=3)
        elif t == "Concat":
            y = np.concatenate([outs[j] for j in f], 1)
        elif t == "Detect":
            zs = []
            for l, j in enumerate(f):
                w, b = m.np[l]
                h = conv2d(outs[j], w, 1, 0, b)
                bs, _, ny, nx = h.shape
                h = h.reshape(bs, m.na, m.no, ny, nx).transpose(0, 1, 3, 4, 2)
                sg = 1 / (1 + np.exp(-h))
                yv, xv = np.meshgrid(np.arange(ny), np.arange(nx), indexing="ij")
                grid = np.stack((xv, yv), 2).reshape(1, 1, ny, nx, 2) - 0.5
                xy = (sg[..., 0:2] * 2 + grid) * m.strides_np[l]
                wh = (sg[..., 2:4] * 2) ** 2 * m.anchors_px[l].reshape(1, m.na, 1, 1, 2)
                zs.append(np.concatenate([xy, wh, sg[..., 4:]], -1).reshape(bs, -1, m.no))
            y = np.concatenate(zs, 1)
        outs.append(y)
    return outs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--depth", type=float, default=0.67)
    ap.add_argument("--width", type=float, default=0.75)
    ap.add_argument("--nc", type=int, default=3)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    store = collections.OrderedDict()
    model, layers = build(store, a.depth, a.width, a.nc)
    ckpt = {"epoch": -1, "best_fitness": None, "model": model, "ema": None, "updates": None, "optimizer": None,
            "date": "synthetic"}
    buf = io.BytesIO()
    Pickler(buf, protocol=2).dump(ckpt)
    pt = os.path.join(a.out, "synth.pt")
    with zipfile.ZipFile(pt, "w") as z:
        z.writestr("archive/data.pkl", buf.getvalue())
        for k, arr in store.items():
            z.writestr("archive/data/" + k, arr.tobytes())
        z.writestr("archive/version", "3\n")
    h5 = os.path.join(a.out, "synth.h5")
    r = subprocess.run([sys.executable, TOOL, pt, h5], capture_output=True, text=True)
    sys.stdout.write(r.stdout)
    sys.stderr.write(r.stderr)
    if r.returncode != 0:
        print("FAIL: conversion of the synthetic checkpoint")
        return 1
    x = np.random.default_rng(7).uniform(0, 1, (2, 3, 64, 96))
    outs = forward(layers, x)
    with h5py.File(os.path.join(a.out, "synth_ref.h5"), "w") as f:
        f["input"] = x.astype(np.float32)
        f["output"] = outs[-1].astype(np.float32)
        f.attrs["nc"] = a.nc
        for i, (m, y) in enumerate(zip(layers, outs)):
            f["layer%02d" % i] = y.astype(np.float32)
    print("synthetic YOLOv5 depth %.2f width %.2f nc %d: %d layers, %d tensors, output %s"
          % (a.depth, a.width, a.nc, len(layers), len(store), outs[-1].shape))
    print("1 passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
