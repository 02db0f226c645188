"""Blocks of uids leased machine-wide, so no two jobs anywhere share a uid at one time.

The kernel counts RLIMIT_NPROC per uid across the whole machine (containers included, as
long as they map uids one to one, as ours do), and a uid is what kill(-1) and killpg reach:
a job's uid must be its own among every runner of every server on the machine. Each runner
gets a block of BLOCK uids (slot k of the runner uses base + 2k and base + 2k + 1) picked at
random in [UID_LO, UID_HI) (~4 M blocks), and the block is held with an flock on
LEASE_DIR/<base>.lock for as long as the runner may run: the kernel drops the lock when the
holder dies, so a crashed server's blocks come free by themselves.

What holds where: processes that see the same LEASE_DIR (one machine's /run, or a volume
shared by the containers of a compose project) never share a block. Servers that cannot
see each other's LEASE_DIR (two containers without a shared volume) still draw at random
from ~4 M blocks, so a clash needs the same draw (about n^2 / 8 M for n live runners).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets

UID_LO = 1 << 20
UID_HI = 1 << 30
BLOCK = 256  # uids per runner: 128 slots
ENV_LEASE_DIR = "VERIREWARD_UID_LEASE_DIR"
DEFAULT_LEASE_DIRS = ("/run/verireward/uid-leases", "/tmp/verireward-uid-leases")


class UidLease:
    """A held block: `base` is the runner's --uid-base. Keep the object alive while the
    runner may run; `release` (or garbage collection) frees it."""

    def __init__(self, base: int, fd: int, path: str) -> None:
        self.base = base
        self.fd = fd
        self.path = path

    def release(self) -> None:
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.unlink(self.path)  # still ours: we hold the lock while unlinking
            os.close(self.fd)
            self.fd = -1

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.release()


def lease_dir() -> str:
    """The first lease directory we can use (made if missing, root-only)."""
    env = os.environ.get(ENV_LEASE_DIR)
    for d in (env,) if env else DEFAULT_LEASE_DIRS:
        try:
            os.makedirs(d, mode=0o700, exist_ok=True)
            if os.access(d, os.W_OK):
                return d
        except OSError:
            continue
    raise OSError(f"no writable uid lease directory (set {ENV_LEASE_DIR})")


def lease(slots: int, *, taken: set[int] = frozenset(), tries: int = 64) -> UidLease:
    """Lease a free block for a runner of `slots` slots, skipping bases in `taken` (blocks
    the caller knows to be in use elsewhere, e.g. labels of live containers)."""
    if 2 * slots > BLOCK:
        raise ValueError(f"at most {BLOCK // 2} slots per runner")
    d = lease_dir()
    for _ in range(tries):
        base = (UID_LO // BLOCK + secrets.randbelow((UID_HI - UID_LO) // BLOCK)) * BLOCK
        if base in taken:
            continue
        path = os.path.join(d, f"{base}.lock")
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        if os.fstat(fd).st_nlink == 0:  # unlinked by a releasing holder since we opened it
            os.close(fd)
            continue
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        return UidLease(base, fd, path)
    raise OSError("no free uid block after many tries")


def sweep() -> int:
    """Remove lease files nobody holds (left by holders that were killed), taking each lock
    before unlinking as `release` does, so a concurrent `lease` never ends up holding an
    unlinked file. Returns how many were removed; called when a host starts."""
    removed = 0
    try:
        d = lease_dir()
        names = os.listdir(d)
    except OSError:
        return 0
    for name in names:
        if not (name.endswith(".lock") and name[:-5].isdigit()):
            continue
        try:
            fd = os.open(os.path.join(d, name), os.O_RDWR | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.unlink(os.path.join(d, name))
            removed += 1
        except OSError:  # held (BlockingIOError), or already gone
            pass
        finally:
            os.close(fd)
    return removed


def held(base: int) -> bool:
    """Whether someone holds the lease of `base` now (for clean-up of what a dead holder left)."""
    return locked(os.path.join(lease_dir(), f"{base}.lock"))


def locked(path: str) -> bool:
    """Whether someone holds an flock on `path` now (False when it is gone)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def block_of(uid: int) -> int | None:
    """The base of the block `uid` belongs to, or None outside the leased range."""
    if UID_LO <= uid < UID_HI:
        return uid - uid % BLOCK
    return None
