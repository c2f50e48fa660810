#!/usr/bin/env python3
"""Gives a fresh clone's unchanged files the modification times of the last build.

Cargo decides what to rebuild by comparing source files' modification times with
its last build's. A fresh clone gives every file a new time, so the workspace
crates would all rebuild, although the cache under ~/.cache/toolshed holds them
built from the very same contents.

  scripts/mtimes.py record TARGET_DIR...   after a build: remember each committed,
                                           unmodified file's git blob id and time
  scripts/mtimes.py restore TARGET_DIR...  before a build: files whose blob id
                                           matches get the recorded time back

Safe because a restored time is only ever the time a file with the very same
contents had when the cache was last built: a changed file keeps its new time
and is rebuilt. Folders of committed files are kept the same way, by the names
they hold (all a folder's own time tells: an entry added, removed or renamed),
for a build script watching a folder (`server/domain/build.rs`, `migrations/`). If anything built into the target dirs after the record (their
fingerprints are newer), the record no longer describes them and is not used.
"""

import glob
import hashlib
import os
import subprocess
import sys


def git(*args):
    return subprocess.run(["git", *args], capture_output=True, check=True).stdout.decode()


def clean_files():
    """(path, blob id) of tracked files whose working copy matches the index."""
    changed = {e[3:] for e in git("status", "--porcelain", "-z", "--untracked-files=no").split("\0") if e}
    for entry in git("ls-files", "-s", "-z").split("\0"):
        if entry:
            meta, path = entry.split("\t", 1)
            if path not in changed and os.path.isfile(path):
                yield path, meta.split()[1]


def folders(paths):
    """(folder, key) of the folders holding `paths`, keyed by the names in them."""
    found = set()
    for path in paths:
        folder = os.path.dirname(path)
        while folder and folder not in found:
            found.add(folder)
            folder = os.path.dirname(folder)
    for folder in sorted(found):
        yield folder, "folder:" + hashlib.sha1("\0".join(sorted(os.listdir(folder))).encode()).hexdigest()


def tracked():
    """(path, key) of every clean committed file and of the folders holding them."""
    files = list(clean_files())
    return files + list(folders(path for path, _ in files))


def newest_build(target_dirs):
    """The newest modification time (ns) of any file cargo keeps about its builds
    (`PROFILE/.fingerprint/UNIT/*`, or `TARGET/PROFILE/.fingerprint/UNIT/*`)."""
    files = []
    for target in target_dirs:
        for pattern in ("*/.fingerprint/*/*", "*/*/.fingerprint/*/*"):
            files += glob.glob(os.path.join(glob.escape(target), pattern))
    return max((os.stat(f).st_mtime_ns for f in files), default=0)


def main():
    mode, record, targets = sys.argv[1], os.path.join(os.environ["TOOLSHED_CACHE"], "mtimes"), sys.argv[2:]
    if mode == "record":
        lines = [f"{blob}\t{os.stat(path).st_mtime_ns}\t{path}\n" for path, blob in tracked()]
        with open(record + ".tmp", "w") as f:
            f.writelines(lines)
        os.replace(record + ".tmp", record)
    elif mode == "restore":
        if not os.path.exists(record):
            return
        if newest_build(targets) > os.stat(record).st_mtime_ns:
            print("build: the cache was built from other sources since; full rebuild of the workspace", file=sys.stderr)
            os.remove(record)
            return
        known = {}
        with open(record) as f:
            for line in f:
                blob, mtime, path = line.rstrip("\n").split("\t", 2)
                known[path] = (blob, int(mtime))
        restored = 0
        for path, blob in tracked():
            if known.get(path, ("",))[0] == blob:
                os.utime(path, ns=(known[path][1], known[path][1]))
                restored += 1
        print(f"build: {restored} unchanged files and folders keep the times of the cached build", file=sys.stderr)
    else:
        sys.exit("usage: scripts/mtimes.py record|restore TARGET_DIR...")


if __name__ == "__main__":
    main()
