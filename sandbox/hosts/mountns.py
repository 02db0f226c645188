"""Run a command in a private mount namespace with tmpfs mounts bubblewrap cannot make.

bwrap's --tmpfs takes a size but no inode count, and a tmpfs without one lets a job make
millions of empty files (no byte quota sees them; the clean-up then outlasts everything).
So the bwrap host starts the runner through this script (as root): it makes a mount
namespace of its own, mounts each tmpfs with `size`, `nr_inodes` and `mode`, and execs
bwrap, which binds them into the sandbox. The mounts are never seen by the host and vanish
with the namespace, so a crash leaves nothing mounted. Stdlib only, run as a script:

    python3 -I -S mountns.py --tmpfs DIR BYTES INODES MODE [--tmpfs ...] [--usr-view SPEC DIR] -- CMD ...

--usr-view builds a view of /usr in DIR (a small tmpfs, read-only once built): each line of
SPEC is "b<TAB>SRC<TAB>DST" (bind SRC read-only at DIR/DST minus /usr) or "l<TAB>PATH<TAB>TARGET"
(a symlink); bwrap then binds DIR at /usr in one mount, where a thousand binds of its own
would take seconds (it reads the mount table once per bind).
"""

from __future__ import annotations

import ctypes
import os
import sys

CLONE_NEWNS = 0x00020000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 0x1, 0x2, 0x4, 0x20, 0x1000, 0x4000, 0x40000


def _usr_view(libc: ctypes.CDLL, spec: str, stage: str) -> None:
    """Build the /usr view of `spec` in `stage` (see the module's doc)."""
    os.makedirs(stage, exist_ok=True)
    _check(libc.mount(b"tmpfs", stage.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, b"size=16m,nr_inodes=65536,mode=755"),
           f"mount tmpfs {stage}")
    with open(spec, encoding="utf-8") as f:
        lines = [line.rstrip("\n").split("\t") for line in f if line.strip()]
    for kind, a, b in lines:
        if kind == "l":
            where = stage + a[len("/usr"):]
            os.makedirs(os.path.dirname(where), mode=0o755, exist_ok=True)
            os.symlink(b, where)
            continue
        where = stage + b[len("/usr"):]
        os.makedirs(os.path.dirname(where), mode=0o755, exist_ok=True)
        if os.path.isdir(a):
            os.makedirs(where, mode=0o755, exist_ok=True)
        else:
            open(where, "a").close()
        _check(libc.mount(a.encode(), where.encode(), None, MS_BIND | MS_REC, None), f"bind {a}")
        _check(libc.mount(None, where.encode(), None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, None),
               f"read-only {where}")
    _check(libc.mount(None, stage.encode(), None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, None),
           f"read-only {stage}")


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def main(argv: list[str]) -> None:
    sep = argv.index("--")
    spec, cmd = argv[:sep], argv[sep + 1 :]
    libc = ctypes.CDLL(None, use_errno=True)
    _check(libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    _check(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "make / private")
    i = 0
    while i < len(spec):
        if spec[i] == "--usr-view":
            _usr_view(libc, spec[i + 1], spec[i + 2])
            i += 3
            continue
        if spec[i] != "--tmpfs":
            raise SystemExit(f"mountns: unexpected argument {spec[i]!r}")
        path, size, inodes, mode = spec[i + 1 : i + 5]
        os.makedirs(path, exist_ok=True)
        data = f"size={int(size)},nr_inodes={int(inodes)},mode={int(mode, 8):o}".encode()
        _check(libc.mount(b"tmpfs", path.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, data), f"mount tmpfs {path}")
        i += 5
    os.execv(cmd[0], cmd)


if __name__ == "__main__":
    main(sys.argv[1:])
