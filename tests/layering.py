#!/usr/bin/env python3
"""test_layering: the layers of libodl (docs/DESIGN.md, "Layers of the library") hold.

1. Includes: every source file of a layer folder includes only headers of its own layer or of layers
   below it. A public header (include/odl/X.h) belongs to the folder whose objects define its functions
   (found with nm); a header that declares no function (types, inline code) is core's.
2. Calls: every function an object file of libodl calls that another object of libodl defines lives in
   the caller's layer or below (nm -u of each object against nm --defined-only of all of them). Models
   call ops, never a backend's functions (only kernels/ops.c and kernels/backend.c's table lookup, no
   odl_cuda_* or odl_cpu_* kernel); HDF5 (H5*) and zlib's crc32 are called from core/h5io.c only.
3. Exports: nm -D of the installed libodl.so lists only odl_* functions declared with ODL_API in a header
   of include/odl.
4. The control plane: the objects of odl_control (CMakeLists.txt's ODL_CONTROL_SOURCES, built as
   odl_control_objects), which odl_coordinator and odl_health link instead of libodl, call no function of
   libodl's other objects and nothing of CUDA, NCCL, MPI or HDF5.
5. Programs: inside each program folder given with --program FOLDER=OBJDIR (worker/, coordinator/), no
   files call each other in a circle (nm of the program's objects): each file is a layer of its own
   program, and a callback, not a call, goes the other way.

The layer order and each layer's folders are read from DESIGN.md's numbered list ("1. **core**
(`core/`)..."), so the document and this check cannot drift apart. A folder the list names that has no
sources (proto/: generated code) is allowed for. `health/` sits at the comm level and may use core only
(its row in DESIGN.md says so; ONLY_CORE below).

usage: layering.py SOURCE_DIR BUILD_DIR [--objects DIR] [--lib PATH] [--program FOLDER=OBJDIR ...]
Exit 0 when every rule holds, 1 with one line per violation otherwise.
"""
import os
import re
import subprocess
import sys
import tempfile

ONLY_CORE = {"health"}  # folders that may use core only, whatever their level
SOURCE_EXT = (".c", ".h", ".cu", ".cuh")


def layers_from_design(src):
    """{folder: level} from DESIGN.md's list '1. **name** (`a/`, `b/`): ...'."""
    text = open(os.path.join(src, "docs", "DESIGN.md"), encoding="utf-8").read()
    sec = text.split("## Layers of the library", 1)[1].split("\n## ", 1)[0]
    level = {}
    for m in re.finditer(r"^(\d+)\. \*\*[^*]+\*\* \(([^)]*)\)", sec, re.M):
        for folder in re.findall(r"`([a-z_]+)/`", m.group(2)):
            level[folder] = int(m.group(1))
    if not level:
        sys.exit("layering.py: no layer list found in docs/DESIGN.md")
    return level


def nm(args, path):
    out = subprocess.run(["nm"] + args + [path], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit("layering.py: nm %s %s failed: %s" % (" ".join(args), path, out.stderr.strip()))
    return out.stdout.splitlines()


def objects(objdir, src):
    """[(folder, relative source path, object path)] of libodl's objects."""
    res = []
    for root, _, files in os.walk(objdir):
        for f in files:
            if f.endswith(".o"):
                rel = os.path.relpath(os.path.join(root, f[:-2]), objdir)
                if not os.path.exists(os.path.join(src, rel)):
                    continue  # left over from a source that was moved or removed
                res.append((rel.split(os.sep)[0], rel, os.path.join(root, f)))
    return sorted(res)


def defined_undefined(obj):
    d, u = set(), set()
    for line in nm(["-P"], obj):
        parts = line.split()
        if len(parts) < 2:
            continue
        name, kind = parts[0], parts[1]
        if kind == "U":
            u.add(name)
        elif kind in "TtDdBbRrVvWw" and kind.isupper():
            d.add(name)
    return d, u


def circles(folder, objdir, src):
    """One message per set of files of `folder` that call each other in a circle (nm of objdir)."""
    if not os.path.isdir(objdir):
        return ["%s: no objects under %s (build the program first)" % (folder, objdir)]
    files = {}
    for root, _, names in os.walk(objdir):
        for f in names:
            if f.endswith(".c.o") and os.path.exists(os.path.join(src, folder, f[:-2])):
                files[f[:-2]] = defined_undefined(os.path.join(root, f))
    owner = {sym: f for f, (d, _) in files.items() for sym in d}
    calls = {f: {} for f in files}  # caller -> {callee: a symbol}
    for f, (_, u) in files.items():
        for sym in sorted(u):
            if sym in owner and owner[sym] != f:
                calls[f].setdefault(owner[sym], sym)
    # Tarjan's strongly connected components: a component of two or more files is a circle.
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(calls[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comp = sorted(comp)
                edges = ["%s -> %s (%s)" % (a, b, calls[a][b]) for a in comp for b in sorted(calls[a]) if b in comp]
                out.append("%s/: %s call each other in a circle: %s" % (folder, ", ".join(comp), "; ".join(edges)))

    for v in sorted(files):
        if v not in index:
            visit(v)
    return out


def header_functions(path):
    text = open(path, encoding="utf-8", errors="replace").read()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return set(re.findall(r"\bODL_API\b[^;{]*?\b(odl_[a-z0-9_]+)\s*\(", text))


def main():
    args = sys.argv[1:]
    if len(args) < 2:
        sys.exit(__doc__)
    src, build = args[0], args[1]
    objdirs = [os.path.join(build, "CMakeFiles", d) for d in ("odl_control_objects.dir", "odl_objects.dir")]
    control_dir = objdirs[0]
    lib = None
    if "--objects" in args:
        objdirs = [args[args.index("--objects") + 1]]
    if "--lib" in args:
        lib = args[args.index("--lib") + 1]
    programs = [args[i + 1].split("=", 1) for i, a in enumerate(args) if a == "--program"]
    level = layers_from_design(src)
    errors = []

    # Who defines what.
    objs, seen = [], set()
    for d in objdirs:  # a source moved into the control plane may leave a stale object in odl_objects.dir
        for o in objects(d, src) if os.path.isdir(d) else []:
            if o[1] not in seen:
                seen.add(o[1])
                objs.append(o)
    if not objs:
        sys.exit("layering.py: no object files under %s (build the odl target first)" % " or ".join(objdirs))
    control = {rel for _, rel, path in objs if path.startswith(control_dir + os.sep)}
    owner = {}  # symbol -> (folder, source)
    undef = {}
    for folder, rel, path in objs:
        d, u = defined_undefined(path)
        for s in d:
            owner[s] = (folder, rel)
        undef[rel] = (folder, u)

    # Public headers: layer of the folder that defines their functions.
    inc = os.path.join(src, "include", "odl")
    header_folder = {}
    api = set()
    for h in sorted(os.listdir(inc)):
        if not h.endswith(".h"):
            continue
        fns = header_functions(os.path.join(inc, h))
        api |= fns
        folders = {owner[f][0] for f in fns if f in owner}
        if len(folders) > 1:
            lo = min(folders, key=lambda f: level.get(f, 99))
            errors.append("include/odl/%s: its functions are defined in several layers (%s); one header per layer"
                          % (h, ", ".join(sorted(folders))))
            folders = {lo}
        header_folder[h] = folders.pop() if folders else "core"

    def allowed(frm, to):
        if frm == to:
            return True
        if frm in ONLY_CORE:
            return to == "core"
        return level.get(to, 99) <= level.get(frm, 0)

    # 1. includes
    for folder in sorted(level):
        top = os.path.join(src, folder)
        if not os.path.isdir(top):
            continue
        for root, _, files in os.walk(top):
            for f in sorted(files):
                if not f.endswith(SOURCE_EXT):
                    continue
                path = os.path.join(root, f)
                rel = os.path.relpath(path, src)
                for n, line in enumerate(open(path, encoding="utf-8", errors="replace"), 1):
                    m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                    if not m:
                        continue
                    target = m.group(1)
                    if target.startswith("odl/"):
                        to = header_folder.get(target[4:])
                        if to is None:
                            errors.append("%s:%d: includes %s, which is not in include/odl" % (rel, n, target))
                            continue
                    elif "/" in target:
                        to = target.split("/")[0]
                    else:
                        to = folder  # a header beside the file
                    if to not in level and to != folder:
                        errors.append("%s:%d: includes %s from %s/, which is no layer of DESIGN.md" % (rel, n, target, to))
                    elif not allowed(folder, to):
                        errors.append("%s:%d: %s/ (layer %d) includes %s of %s/ (layer %d)" %
                                      (rel, n, folder, level[folder], target, to, level.get(to, 0)))

    # 2. calls
    for rel, (folder, u) in sorted(undef.items()):
        h5 = sorted(s for s in u if s.startswith("H5") or s == "crc32")
        if h5 and rel != "core/h5io.c":
            errors.append("%s: calls %s: HDF5 and its checksums belong to core/h5io.c" % (rel, ", ".join(h5[:6]) +
                                                                                     (", ..." if len(h5) > 6 else "")))
        for s in sorted(u):
            if s.startswith("H5") or s == "crc32":
                continue
            if s not in owner:
                continue
            to, trel = owner[s]
            if not allowed(folder, to):
                errors.append("%s: %s/ (layer %d) calls %s of %s (layer %d)" %
                              (rel, folder, level.get(folder, 0), s, trel, level.get(to, 0)))
            elif folder in ("models", "nn") and to == "kernels" and \
                    os.path.basename(trel) not in ("ops.c", "backend.c", "f16_check.c"):
                errors.append("%s: calls %s of %s: models and nn call ops (odl/ops.h), never a backend's functions"
                              % (rel, s, trel))
            elif folder in ("models", "nn") and to == "kernels" and s.startswith(("odl_cuda_", "odl_cpu_")):
                errors.append("%s: calls the backend function %s" % (rel, s))

    # 4. the control plane is closed
    foreign = re.compile(r"^(H5|cuda|cu[A-Z]|nccl|MPI_|ompi_)")
    for rel in sorted(control):
        _, u = undef[rel]
        for sym in sorted(u):
            if sym in owner and owner[sym][1] not in control:
                errors.append("%s: the control plane (odl_control) calls %s of %s, which is not in it" %
                              (rel, sym, owner[sym][1]))
            elif foreign.match(sym):
                errors.append("%s: the control plane (odl_control) calls %s: no CUDA, NCCL, MPI or HDF5 there" %
                              (rel, sym))

    # 5. no circles among a program's files
    for folder, pdir in programs:
        errors.extend(circles(folder, pdir, src))

    # 3. exports of the installed library
    tmp = None
    if lib is None:
        tmp = tempfile.mkdtemp(prefix="odl_layering_")
        r = subprocess.run(["cmake", "--install", build, "--prefix", tmp, "--component", "Unspecified"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            r = subprocess.run(["cmake", "--install", build, "--prefix", tmp], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit("layering.py: cmake --install failed: %s" % r.stderr.strip())
        for root, _, files in os.walk(tmp):
            for f in files:
                if re.match(r"libodl\.so\.\d+\.\d+\.\d+$", f):
                    lib = os.path.join(root, f)
        if lib is None:
            sys.exit("layering.py: no libodl.so under the install prefix %s" % tmp)
    exported = []
    for line in nm(["-D", "--defined-only", "-P"], lib):
        parts = line.split()
        if len(parts) >= 2 and parts[1] in "TDBRVW" and parts[0] not in ("_init", "_fini"):
            exported.append(parts[0])
    for s in sorted(exported):
        if not s.startswith("odl_"):
            errors.append("%s exports %s: not an odl_ name (give it hidden visibility or ODL_API in include/odl)"
                          % (os.path.basename(lib), s))
        elif s not in api:
            errors.append("%s exports %s, which no header of include/odl declares with ODL_API"
                          % (os.path.basename(lib), s))
    if tmp:
        subprocess.run(["rm", "-rf", tmp])

    for e in errors:
        print("FAIL " + e)
    print("test_layering: %d folders, %d objects (%d of the control plane), %d public headers, %d exported functions, "
          "%d programs, %d violations" % (len(level), len(objs), len(control), len(header_folder), len(exported),
                                          len(programs), len(errors)))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
