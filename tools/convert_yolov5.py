#!/usr/bin/env python3
"""Convert an official YOLOv5 checkpoint (.pt) into OriginDL's HDF5 weights format.

    python3 tools/convert_yolov5.py IN.pt OUT.h5

Needs only Python's standard library, NumPy and h5py (Debian: python3-numpy, python3-h5py). It does
not import PyTorch or the YOLOv5 source tree: a PyTorch checkpoint (format of torch.save since 1.6) is
a zip archive holding `<root>/data.pkl`, a pickle whose tensors are persistent ids
('storage', <Storage class>, key, location, numel) that name the raw little-endian bytes of
`<root>/data/<key>`; tensors are rebuilt by `torch._utils._rebuild_tensor_v2(storage, offset, size,
stride, ...)`. The unpickler below resolves every class the pickle names to an inert stand-in (it
never imports anything), so a module object is just its pickled `__dict__`: `_parameters`,
`_buffers`, `_modules` (OrderedDicts) and plain attributes such as `yaml`, `names`, `stride`, `eps`.

Accepted: YOLOv5 v6.x/v7.0 detection models (`models.yolo.Model` / `DetectionModel`) built from the
modules Conv (Conv2d + BatchNorm2d + SiLU), C3, Bottleneck, SPPF, nn.Upsample, Concat and Detect; any
depth/width multiple (n, s, m, l, x), any class count, any number of detection levels.

Output layout (HDF5; every float tensor stored as float32, in PyTorch's layout):
  /                      attrs: odl_format = "odl-weights", odl_format_version = 1, model = "yolov5",
                                source = input file name, converter = "tools/convert_yolov5.py"
  /model/<path>          one dataset per state-dict entry, the path being the YOLOv5 state-dict key
                         without its leading "model." and with "." replaced by "/", e.g.
                         model.0.conv.weight -> /model/0/conv/weight, model.24.m.0.bias -> /model/24/m/0/bias.
                         BatchNorm buffers (running_mean, running_var) are kept unfused; the int64
                         num_batches_tracked counters are dropped. Each dataset carries the uint32
                         attribute crc32 of docs/checkpoint_format.md (zlib crc32 of its bytes).
  /yolov5                attrs: nc, depth_multiple, width_multiple, bn_eps, num_layers, yaml (the model
                         description as JSON text, verbatim), checkpoint_entry ("ema" or "model")
  /yolov5/names          [nc] variable-length UTF-8 strings, the class names
  /yolov5/strides        [nl] float32, stride of each detection level in input pixels
  /yolov5/anchors        [nl, na, 2] float32, anchor (width, height) in input pixels
  /yolov5/layers/NN      one group per layer (NN = 00, 01, ...) with attrs:
                           type    "Conv", "C3", "SPPF", "Upsample", "Concat" or "Detect"
                           from    int32 array, input layers (-1 = previous), as in the yaml
                           n       int32, repeats as written in the yaml (before depth_multiple)
                           and per type, as written in the yaml (before width_multiple):
                           Conv:     c2, k, s, p (-1 = automatic "same" padding k // 2)
                           C3:       c2, shortcut (0/1)
                           SPPF:     c2, k
                           Upsample: scale (int), mode ("nearest")
                           Concat:   dim
                           Detect:   nc
Exit status: 0 on success; 1 with one line "convert_yolov5: error: ..." naming the file otherwise.
"""

import argparse
import collections
import json
import math
import os
import pickle
import sys
import zipfile
import zlib

try:
    import numpy as np
except ImportError:  # pragma: no cover
    sys.stderr.write("convert_yolov5: error: NumPy is required (Debian: apt-get install python3-numpy)\n")
    sys.exit(1)
try:
    import h5py
except ImportError:  # pragma: no cover
    sys.stderr.write("convert_yolov5: error: h5py is required (Debian: apt-get install python3-h5py; "
                     "run with /usr/bin/python3)\n")
    sys.exit(1)


class ConvertError(Exception):
    pass


# ---------------------------------------------------------------------------------------------
# Pickle stand-ins
# ---------------------------------------------------------------------------------------------

class Stub:
    """Inert stand-in for any class named by the pickle (YOLOv5 and torch.nn modules, ...).

    NEWOBJ creates it with cls.__new__, BUILD calls __setstate__ with the pickled state (the
    object's __dict__ for nn.Module), REDUCE calls it with arguments, which are kept."""
    _module = "?"
    _name = "?"

    def __init__(self, *args, **kwargs):
        self._args = args
        self._kwargs = kwargs

    def __setstate__(self, state):
        if isinstance(state, tuple) and len(state) == 2 and (state[0] is None or isinstance(state[0], dict)):
            state, slots = state
            if slots:
                self.__dict__.update(slots)
        if isinstance(state, dict):
            self.__dict__.update(state)
        else:
            self.__dict__["_state"] = state

    @classmethod
    def qualname(cls):
        return cls._module + "." + cls._name


_stub_classes = {}


def stub_class(module, name):
    key = (module, name)
    if key not in _stub_classes:
        _stub_classes[key] = type(name, (Stub,), {"_module": module, "_name": name})
    return _stub_classes[key]


class StorageType:
    """torch.<X>Storage: only its element type matters."""

    def __init__(self, name, dtype):
        self.name = name
        self.dtype = dtype


STORAGE_DTYPES = {
    "HalfStorage": np.float16,
    "FloatStorage": np.float32,
    "DoubleStorage": np.float64,
    "BFloat16Storage": None,  # no NumPy type; converted by hand below
    "LongStorage": np.int64,
    "IntStorage": np.int32,
    "ShortStorage": np.int16,
    "CharStorage": np.int8,
    "ByteStorage": np.uint8,
    "BoolStorage": np.bool_,
}


def rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad=False, backward_hooks=None,
                      metadata=None):
    """torch._utils._rebuild_tensor_v2: a strided view of a storage, returned as a NumPy copy."""
    size = tuple(int(s) for s in size)
    stride = tuple(int(s) for s in stride)
    if len(size) == 0:
        return np.array(storage[storage_offset])
    need = storage_offset + 1 + sum((s - 1) * st for s, st in zip(size, stride) if s > 0)
    if any(s == 0 for s in size):
        return np.zeros(size, dtype=storage.dtype)
    if need > storage.size:
        raise ConvertError("tensor of shape %s at offset %d runs past its storage of %d elements"
                           % (list(size), storage_offset, storage.size))
    item = storage.itemsize
    view = np.lib.stride_tricks.as_strided(storage[storage_offset:], shape=size,
                                           strides=tuple(st * item for st in stride))
    return np.ascontiguousarray(view)


def rebuild_parameter(data, requires_grad=False, backward_hooks=None, *rest):
    """torch._utils._rebuild_parameter: a Parameter is its tensor."""
    return data


def rebuild_parameter_with_state(data, requires_grad, backward_hooks, state):
    return data


class CheckpointUnpickler(pickle.Unpickler):
    def __init__(self, fileobj, zf, root, path):
        super().__init__(fileobj)
        self.zf = zf
        self.root = root
        self.path = path
        self.storages = {}
        self.byteorder = "little"
        bo = root + "/byteorder"
        if bo in zf.namelist():
            self.byteorder = zf.read(bo).decode("ascii").strip()

    def find_class(self, module, name):
        if module == "collections" and name == "OrderedDict":
            return collections.OrderedDict
        if module in ("__builtin__", "builtins") and name in ("set", "frozenset", "list", "dict", "tuple",
                                                              "slice", "getattr"):
            if name == "getattr":
                return lambda obj, attr, *d: getattr(obj, attr, *d)
            return {"set": set, "frozenset": frozenset, "list": list, "dict": dict, "tuple": tuple,
                    "slice": slice}[name]
        if module == "torch._utils" and name == "_rebuild_tensor_v2":
            return rebuild_tensor_v2
        if module == "torch._utils" and name == "_rebuild_parameter":
            return rebuild_parameter
        if module == "torch._utils" and name == "_rebuild_parameter_with_state":
            return rebuild_parameter_with_state
        if module == "torch" and name.endswith("Storage"):
            if name not in STORAGE_DTYPES:
                raise ConvertError("%s: unsupported tensor storage type torch.%s" % (self.path, name))
            return StorageType(name, STORAGE_DTYPES[name])
        if module in ("numpy.core.multiarray", "numpy._core.multiarray") and name in ("_reconstruct", "scalar"):
            # numpy scalars (e.g. best_fitness in some checkpoints): rebuilt by NumPy itself.
            return getattr(np.core.multiarray, name)
        if module == "_codecs" and name == "encode":  # bytes inside protocol-2 pickles of NumPy values
            import codecs
            return codecs.encode
        if module == "numpy" and name in ("dtype", "ndarray"):
            return getattr(np, name)
        # Everything else (models.*, torch.nn.*, utils.*, torch.device, ...) is an inert stand-in.
        return stub_class(module, name)

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) >= 5 and pid[0] == "storage"):
            raise ConvertError("%s: unexpected persistent id %r in the pickle" % (self.path, pid[:2] if
                                                                               isinstance(pid, tuple) else pid))
        stype, key, _location, numel = pid[1], str(pid[2]), pid[3], int(pid[4])
        if not isinstance(stype, StorageType):
            raise ConvertError("%s: storage %s has an unsupported type %r" % (self.path, key, stype))
        if key in self.storages:
            return self.storages[key]
        member = self.root + "/data/" + key
        try:
            raw = self.zf.read(member)
        except KeyError:
            raise ConvertError("%s: the archive has no %s (truncated checkpoint?)" % (self.path, member))
        if stype.dtype is None:  # bfloat16 -> float32
            u16 = np.frombuffer(raw, dtype="<u2" if self.byteorder == "little" else ">u2")
            arr = (u16.astype(np.uint32) << 16).view(np.float32)
        else:
            dt = np.dtype(stype.dtype).newbyteorder("<" if self.byteorder == "little" else ">")
            if len(raw) < numel * dt.itemsize:
                raise ConvertError("%s: %s holds %d bytes, %d %s elements expected"
                                   % (self.path, member, len(raw), numel, stype.name))
            arr = np.frombuffer(raw, dtype=dt, count=numel).astype(dt.newbyteorder("="))
        self.storages[key] = arr
        return arr


def load_checkpoint(path):
    """Return the unpickled top-level object of a torch.save zip checkpoint."""
    if not os.path.exists(path):
        raise ConvertError("%s: no such file" % path)
    if not zipfile.is_zipfile(path):
        raise ConvertError("%s is not a PyTorch checkpoint: not a zip archive, or a truncated one (a YOLOv5 .pt saved by "
                           "torch.save with PyTorch >= 1.6 is expected)" % path)
    try:
        zf = zipfile.ZipFile(path)
        pkls = [n for n in zf.namelist() if n.endswith("/data.pkl") and n.count("/") == 1]
    except (zipfile.BadZipFile, OSError) as e:
        raise ConvertError("%s: unreadable zip archive: %s" % (path, e))
    if len(pkls) != 1:
        raise ConvertError("%s is not a PyTorch checkpoint: no <root>/data.pkl in the zip archive" % path)
    root = pkls[0][: -len("/data.pkl")]
    try:
        data = zf.read(pkls[0])
    except (zipfile.BadZipFile, OSError, EOFError) as e:
        raise ConvertError("%s: cannot read %s: %s" % (path, pkls[0], e))
    import io
    try:
        return CheckpointUnpickler(io.BytesIO(data), zf, root, path).load()
    except ConvertError:
        raise
    except (zipfile.BadZipFile, OSError, EOFError) as e:
        raise ConvertError("%s: damaged checkpoint: %s" % (path, e))
    except (pickle.UnpicklingError, AttributeError, TypeError, ValueError, IndexError, KeyError) as e:
        raise ConvertError("%s: the checkpoint's pickle could not be read: %s: %s" % (path, type(e).__name__, e))


# ---------------------------------------------------------------------------------------------
# Walking the module tree
# ---------------------------------------------------------------------------------------------

def is_module(obj, qualname=None, name=None):
    if not isinstance(obj, Stub):
        return False
    if qualname is not None:
        return type(obj).qualname() == qualname
    if name is not None:
        return type(obj)._name == name
    return True


def children(mod):
    m = mod.__dict__.get("_modules")
    return m if isinstance(m, dict) else {}


def state_dict(mod, prefix=""):
    """nn.Module.state_dict(): parameters, then persistent buffers, then children, in order."""
    out = collections.OrderedDict()
    params = mod.__dict__.get("_parameters") or {}
    buffers = mod.__dict__.get("_buffers") or {}
    nonpersistent = mod.__dict__.get("_non_persistent_buffers_set") or set()
    for k, v in params.items():
        if v is not None:
            out[prefix + k] = v
    for k, v in buffers.items():
        if v is not None and k not in nonpersistent:
            out[prefix + k] = v
    for k, child in children(mod).items():
        if child is not None:
            out.update(state_dict(child, prefix + k + "."))
    return out


SUPPORTED = {"Conv", "C3", "SPPF", "nn.Upsample", "Concat", "Detect"}


def yaml_value(v, yaml):
    """A yaml arg that names another yaml key ('nc', 'anchors') or is a Python literal string."""
    if isinstance(v, str) and v in yaml:
        return yaml[v]
    return v


def describe_layers(yaml, path):
    layers = list(yaml.get("backbone", [])) + list(yaml.get("head", []))
    if not layers:
        raise ConvertError("%s: the model description has no backbone/head layer list" % path)
    out = []
    for i, entry in enumerate(layers):
        if not (isinstance(entry, (list, tuple)) and len(entry) == 4):
            raise ConvertError("%s: layer %d of the description is malformed: %r" % (path, i, entry))
        f, n, mname, args = entry
        frm = [int(x) for x in (f if isinstance(f, (list, tuple)) else [f])]
        if mname not in SUPPORTED:
            raise ConvertError("%s: layer %d is a %s, which this converter does not support (YOLOv5 v6/v7 "
                               "P5 detection models use Conv, C3, SPPF, nn.Upsample, Concat, Detect)"
                               % (path, i, mname))
        args = [yaml_value(a, yaml) for a in args]
        d = {"type": mname.replace("nn.", ""), "from": frm, "n": int(n)}
        if mname == "Conv":
            d["c2"] = int(args[0])
            d["k"] = int(args[1]) if len(args) > 1 else 1
            d["s"] = int(args[2]) if len(args) > 2 else 1
            d["p"] = int(args[3]) if len(args) > 3 and args[3] is not None and args[3] != "None" else -1
            if len(args) > 4 and args[4] not in (1, None):
                raise ConvertError("%s: layer %d: grouped Conv (g=%r) is not supported" % (path, i, args[4]))
        elif mname == "C3":
            d["c2"] = int(args[0])
            d["shortcut"] = int(bool(args[1])) if len(args) > 1 else 1
        elif mname == "SPPF":
            d["c2"] = int(args[0])
            d["k"] = int(args[1]) if len(args) > 1 else 5
        elif mname == "nn.Upsample":
            scale = args[1] if len(args) > 1 else None
            mode = args[2] if len(args) > 2 else "nearest"
            if scale is None or float(scale) != 2 or mode != "nearest":
                raise ConvertError("%s: layer %d: only nearest x2 upsampling is supported, got %r"
                                   % (path, i, args))
            d["scale"] = 2
            d["mode"] = "nearest"
        elif mname == "Concat":
            d["dim"] = int(args[0]) if args else 1
            if d["dim"] != 1:
                raise ConvertError("%s: layer %d: Concat along dimension %d is not supported" % (path, i, d["dim"]))
        elif mname == "Detect":
            d["nc"] = int(args[0])
            if i != len(layers) - 1:
                raise ConvertError("%s: Detect must be the last layer (it is layer %d of %d)" % (path, i, len(layers)))
        out.append(d)
    if out[-1]["type"] != "Detect":
        raise ConvertError("%s: the last layer is %s, a Detect layer is expected (not a detection model?)"
                           % (path, out[-1]["type"]))
    return out


def to_float32(a, name, path):
    a = np.asarray(a)
    if a.dtype.kind != "f":
        raise ConvertError("%s: tensor %s has dtype %s, floating point expected" % (path, name, a.dtype))
    out = a.astype(np.float32)
    if not np.all(np.isfinite(out)):
        raise ConvertError("%s: tensor %s holds non-finite values" % (path, name))
    return out


def convert(src, dst):
    ckpt = load_checkpoint(src)
    if not isinstance(ckpt, dict) or ("model" not in ckpt and "ema" not in ckpt):
        raise ConvertError("%s is not a YOLOv5 checkpoint: its top-level object is a %s without 'model'"
                           % (src, type(ckpt).__name__))
    entry = "ema" if ckpt.get("ema") is not None else "model"
    model = ckpt[entry]
    if not is_module(model):
        raise ConvertError("%s is not a YOLOv5 checkpoint: '%s' is a %s, not a pickled model"
                           % (src, entry, type(model).__name__))
    qn = type(model).qualname()
    if qn not in ("models.yolo.Model", "models.yolo.DetectionModel"):
        raise ConvertError("%s: '%s' is a %s; a YOLOv5 detection model (models.yolo.Model or DetectionModel) "
                           "is expected" % (src, entry, qn))
    yaml = model.__dict__.get("yaml")
    if not isinstance(yaml, dict):
        raise ConvertError("%s: the model has no 'yaml' description (not a YOLOv5 v6/v7 model?)" % src)
    for k in ("depth_multiple", "width_multiple", "anchors", "nc"):
        if k not in yaml:
            raise ConvertError("%s: the model description lacks '%s'" % (src, k))
    layers = describe_layers(yaml, src)

    seq = children(model).get("model")
    if seq is None:
        raise ConvertError("%s: the model has no 'model' Sequential of layers" % src)
    mods = children(seq)
    if len(mods) != len(layers):
        raise ConvertError("%s: the description lists %d layers but the model holds %d"
                           % (src, len(layers), len(mods)))

    detect = mods[str(len(layers) - 1)]
    if not is_module(detect, name="Detect"):
        raise ConvertError("%s: the last module is %s, not Detect" % (src, type(detect).qualname()))
    nc = int(detect.__dict__.get("nc", layers[-1]["nc"]))
    if nc != layers[-1]["nc"] or nc != int(yaml["nc"]):
        raise ConvertError("%s: class counts disagree (Detect.nc=%d, yaml nc=%s)" % (src, nc, yaml["nc"]))

    sd = state_dict(seq)
    if not sd:
        raise ConvertError("%s: the model holds no tensors" % src)

    # BatchNorm eps and activation of every Conv.
    eps_values = set()
    for name, mod in walk(seq, ""):
        if is_module(mod, name="BatchNorm2d"):
            eps_values.add(float(mod.__dict__.get("eps", 1e-5)))
        if is_module(mod, name="Conv") and type(mod)._module.startswith("models."):
            act = children(mod).get("act")
            if act is None or not is_module(act, name="SiLU"):
                raise ConvertError("%s: %s uses activation %s; only SiLU (YOLOv5 v6/v7) is supported"
                                   % (src, name or "Conv", type(act).qualname() if isinstance(act, Stub) else act))
    if len(eps_values) != 1:
        raise ConvertError("%s: BatchNorm eps values %s; one common value expected" % (src, sorted(eps_values)))
    bn_eps = eps_values.pop()

    # Strides and anchors (Detect.anchors is in grid units: pixels / stride).
    stride = detect.__dict__.get("stride")
    if stride is None:
        stride = model.__dict__.get("stride")
    if stride is None:
        raise ConvertError("%s: the model has no strides" % src)
    stride = np.asarray(stride, dtype=np.float64).reshape(-1)
    anchors = sd.get(str(len(layers) - 1) + ".anchors")
    if anchors is None:
        raise ConvertError("%s: Detect has no 'anchors' buffer" % src)
    anchors = np.asarray(anchors, dtype=np.float64)
    nl = len(yaml["anchors"]) if isinstance(yaml["anchors"], (list, tuple)) else int(anchors.shape[0])
    if anchors.ndim != 3 or anchors.shape[0] != nl or anchors.shape[2] != 2 or stride.size != nl:
        raise ConvertError("%s: Detect anchors of shape %s and %d strides do not describe %d levels"
                           % (src, list(anchors.shape), stride.size, nl))
    if len(layers[-1]["from"]) != nl:
        raise ConvertError("%s: Detect reads %d layers but has %d anchor levels" % (src, len(layers[-1]["from"]), nl))
    anchors_px = anchors * stride.reshape(nl, 1, 1)

    names = model.__dict__.get("names")
    if isinstance(names, dict):
        names = [names[k] for k in sorted(names, key=lambda x: int(x))]
    if not isinstance(names, (list, tuple)) or len(names) != nc:
        names = ["class%d" % i for i in range(nc)] if names is None else list(names)
        if len(names) != nc:
            raise ConvertError("%s: %d class names for %d classes" % (src, len(names), nc))
    names = [str(x) for x in names]

    tmp = dst + ".tmp%d" % os.getpid()
    try:
        with h5py.File(tmp, "w") as f:
            f.attrs["odl_format"] = "odl-weights"
            f.attrs["odl_format_version"] = np.int32(1)
            f.attrs["model"] = "yolov5"
            f.attrs["source"] = os.path.basename(src)
            f.attrs["converter"] = "tools/convert_yolov5.py"
            g = f.create_group("model")
            n_tensors = 0
            for k, v in sd.items():
                if k.endswith("num_batches_tracked"):
                    continue
                arr = to_float32(v, "model." + k, src)
                ds = g.create_dataset(k.replace(".", "/"), data=arr)
                # docs/checkpoint_format.md: zlib crc32 of the little-endian bytes, C order
                ds.attrs["crc32"] = np.uint32(zlib.crc32(np.ascontiguousarray(arr, dtype="<f4").tobytes()))
                n_tensors += 1
            y = f.create_group("yolov5")
            y.attrs["nc"] = np.int32(nc)
            y.attrs["depth_multiple"] = float(yaml["depth_multiple"])
            y.attrs["width_multiple"] = float(yaml["width_multiple"])
            y.attrs["bn_eps"] = float(bn_eps)
            y.attrs["num_layers"] = np.int32(len(layers))
            y.attrs["num_tensors"] = np.int32(n_tensors)
            y.attrs["checkpoint_entry"] = entry
            y.attrs["yaml"] = json.dumps(yaml, default=str)
            y.create_dataset("names", data=np.array(names, dtype=object), dtype=h5py.string_dtype("utf-8"))
            y.create_dataset("strides", data=stride.astype(np.float32))
            y.create_dataset("anchors", data=anchors_px.astype(np.float32))
            lg = y.create_group("layers")
            for i, d in enumerate(layers):
                li = lg.create_group("%02d" % i)
                for k, v in d.items():
                    if isinstance(v, str):
                        li.attrs[k] = v
                    elif isinstance(v, list):
                        li.attrs[k] = np.array(v, dtype=np.int32)
                    else:
                        li.attrs[k] = np.int32(v)
        os.replace(tmp, dst)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise ConvertError("%s: cannot write: %s" % (dst, e))
    return {"layers": len(layers), "tensors": n_tensors, "nc": nc, "entry": entry,
            "params": int(sum(np.asarray(v).size for k, v in sd.items() if not k.endswith("num_batches_tracked")))}


def walk(mod, prefix):
    yield prefix, mod
    for k, c in children(mod).items():
        if isinstance(c, Stub):
            yield from walk(c, prefix + "." + k if prefix else k)


def main(argv=None):
    ap = argparse.ArgumentParser(description="Convert an official YOLOv5 v6/v7 checkpoint (.pt) to OriginDL HDF5 "
                                             "weights, without PyTorch.")
    ap.add_argument("input", help="YOLOv5 checkpoint, e.g. yolov5n.pt")
    ap.add_argument("output", help="HDF5 file to write, e.g. yolov5n.h5")
    a = ap.parse_args(argv)
    try:
        info = convert(a.input, a.output)
    except ConvertError as e:
        sys.stderr.write("convert_yolov5: error: %s\n" % e)
        return 1
    print("convert_yolov5: wrote %s: %d layers, %d tensors, %d parameters and buffers, %d classes (from '%s')"
          % (a.output, info["layers"], info["tensors"], info["params"], info["nc"], info["entry"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
