"""A compiler's view of files: everything it may read except /dev, where only null, zero and urandom.

A compiler reads what the source names (`#include "/dev/ptmx"`, Rust's `include_str!`), so a
device that blocks a reader (a pty, a terminal, a FIFO-like device) holds the compile's slot
until its wall clock runs out. Before it execs a compiler, the candidate (already jailed: its
uid, no_new_privs, the seccomp filter) enters one more Landlock layer that handles reading
files: read access is granted beneath every top-level directory but /dev, and on /dev/null,
/dev/zero and /dev/urandom alone. A source that includes any other device then fails to
compile at once ("Permission denied"). Pipes reached through /proc/self/fd are not files
Landlock sees: a compile blocked on one is cut by its idle and wall-clock limits (compiled.py).
Where the kernel has no Landlock this does nothing and those limits are the only guard.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import struct

from . import seccomp
from .seccomp import SYS_LANDLOCK_CREATE_RULESET, SYS_LANDLOCK_RESTRICT_SELF

LANDLOCK_ACCESS_FS_READ_FILE = 1 << 2
DEVICES = ("/dev/null", "/dev/zero", "/dev/urandom")
FAILED = "cannot enter the compiler's view"  # what the candidate says (and exits FAILED_EXIT) where it could not
FAILED_EXIT = 125


def readable_roots() -> list[str]:
    """Every top-level directory but /dev (and none that leads into it), then the devices kept."""
    out = []
    for name in sorted(os.listdir("/")):
        path = "/" + name
        real = os.path.realpath(path)
        if real == "/dev" or real.startswith("/dev/") or real == "/":
            continue
        out.append(path)
    return out + list(DEVICES)


def restrict_reads() -> bool:
    """Enter the compiler's read view (see the module's doc); False where the kernel has no
    Landlock. Raises OSError where it has one and the view could not be entered: then the
    compiler must not run."""
    libc = ctypes.CDLL(None, use_errno=True)
    syscall = libc.syscall
    syscall.argtypes = [ctypes.c_long] * 5
    syscall.restype = ctypes.c_long
    attr = ctypes.create_string_buffer(struct.pack("=QQQ", LANDLOCK_ACCESS_FS_READ_FILE, 0, 0), 24)
    fd = syscall(SYS_LANDLOCK_CREATE_RULESET, ctypes.addressof(attr), 24, 0, 0)
    if fd < 0:
        err = ctypes.get_errno()
        if err in (38, 95, 1):  # ENOSYS, EOPNOTSUPP (no Landlock), EPERM (a host's filter refuses it)
            return False
        raise OSError(err, "landlock_create_ruleset")
    try:
        seccomp.add_path_rules(syscall, fd, LANDLOCK_ACCESS_FS_READ_FILE, readable_roots())
        if syscall(SYS_LANDLOCK_RESTRICT_SELF, fd, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self")
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)
    return True
