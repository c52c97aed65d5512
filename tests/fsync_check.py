#!/usr/bin/env python3
"""Reads the log of tests/fsync_shim.c and checks that every file replaced under ROOT was made durable
the odl/file.h way:

  - a rename or link whose source is a temporary file ("*.tmp") must follow an fsync of that file by
    the same process (its data is on disk before a name points at it);
  - every rename or link under ROOT must be followed, in the same process and before its next rename
    or link, by an fsync of the target's directory (the new name is on disk: Redis's fsyncFileDir).

usage: fsync_check.py LOG ROOT [PATTERN...]
Each PATTERN (an fnmatch pattern of a target's path relative to ROOT, e.g. "job/fence.json",
"job/checkpoints/ckpt-*.h5") must match at least one checked rename or link, so that the run is known
to have exercised that writer. Exit 0 when all holds; 1 with one line per violation.
"""
import fnmatch
import os
import sys


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    log, root = sys.argv[1], os.path.realpath(sys.argv[2])
    patterns = sys.argv[3:]
    events = []
    with open(log, encoding="utf-8", errors="replace") as f:
        for line in f:
            parts = line.rstrip("\n").split(" ")
            if len(parts) >= 3:
                events.append(parts)
    errors, seen = [], set()
    checked = 0
    for i, ev in enumerate(events):
        pid, kind = ev[0], ev[1]
        if kind not in ("rename", "link") or len(ev) != 4:
            continue
        old, new = ev[2], ev[3]
        if not new.startswith(root + "/"):
            continue
        checked += 1
        rel = os.path.relpath(new, root)
        seen.add(rel)
        if old.endswith(".tmp"):
            synced = any(e[0] == pid and e[1] == "fsync-file" and e[2] == old for e in events[:i])
            if not synced:
                errors.append("%s: %s %s -> %s without an fsync of %s first (process %s)"
                              % (rel, kind, old, new, os.path.basename(old), pid))
        d = os.path.dirname(new)
        synced = False
        for e in events[i + 1:]:
            if e[0] != pid:
                continue
            if e[1] in ("rename", "link"):
                break  # the directory's fsync belongs right after the rename, before the next one
            if e[1] == "fsync-dir" and e[2] == d:
                synced = True
                break
        if not synced:
            errors.append("%s: %s %s -> %s without an fsync of its directory %s before the process's next rename "
                          "or its end (process %s)" % (rel, kind, old, new, d, pid))
    for p in patterns:
        if not any(fnmatch.fnmatch(s, p) for s in seen):
            errors.append("no file matching %s was replaced: that writer did not run (or not through rename/link)"
                          % p)
    for e in errors:
        print("FAIL " + e)
    print("fsync_check: %d renames and links under %s, %d files, %d violations" % (checked, root, len(seen), len(errors)))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
