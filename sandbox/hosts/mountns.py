"""Run a command in a private mount namespace with tmpfs mounts bubblewrap cannot make.

bwrap's --tmpfs takes a size but no inode count, and a tmpfs without one lets a job make
millions of empty files (no byte quota sees them; the clean-up then outlasts everything).
So the bwrap host starts the runner through this script (as root): it makes a mount
namespace of its own, mounts each tmpfs with `size`, `nr_inodes` and `mode`, and execs
bwrap, which binds them into the sandbox. The mounts are never seen by the host and vanish
with the namespace, so a crash leaves nothing mounted. Stdlib only, run as a script:

    python3 -I -S mountns.py --tmpfs DIR BYTES INODES MODE [--tmpfs ...] -- CMD ...
"""

from __future__ import annotations

import ctypes
import os
import sys

CLONE_NEWNS = 0x00020000
MS_NOSUID, MS_NODEV, MS_REC, MS_PRIVATE = 0x2, 0x4, 0x4000, 0x40000


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
