"""A /dev/shm of its own for each slot: one mount namespace per slot, made once at start-up.

multiprocessing's semaphores and shared memory (sem_open, shm_open) live at the fixed path
/dev/shm (glibc has no other), so one tmpfs there per runner is shared by the runner's
concurrent jobs: one job filling it (bytes, inodes, semaphores) makes another's `Pool()`,
`Lock()` or `SharedMemory` fail, and a name one job made can be opened by another. This
kernel has no per-uid tmpfs quota (no CONFIG_TMPFS_QUOTA), so each slot gets a tmpfs of its
own instead. Before the runner reads anything or binds its socket, it forks one keeper per
slot; each keeper makes a mount namespace of its own (unshare CLONE_NEWNS, / made private so
nothing propagates back), mounts a fresh tmpfs with byte and inode bounds over /dev/shm, and
drops CAP_SYS_ADMIN for good (bounding, permitted, effective and inheritable sets), as the
runner's main process does: after start-up no runner process holds it (checked here; the
runner refuses to serve otherwise). The slot's supervisors, and so its spawner, candidates
and verdict process, are forked from its keeper and see only that tmpfs; what a job leaves
there is removed after it (`cleanup.remove_files_of`) and again when its connection ends.
The per-job cost is nothing: the namespace is made once per slot, the connection is passed
to the keeper with one sendmsg (SCM_RIGHTS). unshare, mount and capget/capset are called
through ctypes by hand (the runner is stdlib-only; python-prctl would be the library).

Keeper protocol (SEQPACKET): the runner sends b"C" with one descriptor (a client
connection); the keeper answers b"R" once ready (or b"E<why>" when it could not make its
namespace), then b"F" each time the supervisor of a connection has ended (the slot is free).
"""

from __future__ import annotations

import array
import contextlib
import ctypes
import os
import select
import socket
from collections.abc import Callable
from dataclasses import dataclass

from . import cleanup, limits, procfs

CLONE_NEWNS = 0x00020000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_PRIVATE = 0x2, 0x4, 0x8, 0x4000, 0x40000
MNT_DETACH = 2
PR_CAPBSET_DROP = 24
CAP_SYS_ADMIN = 21
_CAP_VERSION_3 = 0x20080522
SHM_MODE = 0o1733  # write and search for all, list for nobody, sticky: a job finds only the names it made


@dataclass(frozen=True)
class ShmSpec:
    """The bounds of each slot's /dev/shm."""

    size_mb: int
    inodes: int

    @classmethod
    def parse(cls, text: str) -> ShmSpec:
        """"MB,INODES" (the runner's --slot-shm argument)."""
        mb, inodes = (int(x) for x in text.split(","))
        if mb <= 0 or inodes <= 0:
            raise ValueError(f"--slot-shm needs positive sizes, not {text!r}")
        return cls(mb, inodes)

    def arg(self) -> str:
        return f"{self.size_mb},{self.inodes}"


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def cap_sets(pid: str = "self") -> dict[str, int]:
    """CapInh/CapPrm/CapEff/CapBnd/CapAmb of a process, as integers (from /proc)."""
    out = {}
    for line in procfs.read(f"/proc/{pid}/status", 8192).decode().splitlines():
        key, _, value = line.partition(":")
        if key.startswith("Cap"):
            out[key] = int(value.strip(), 16)
    return out


def drop_sys_admin() -> None:
    """Lose CAP_SYS_ADMIN for good: out of the bounding set (needs CAP_SETPCAP, which the
    runners hold), then out of the effective, permitted and inheritable sets (capset).
    Raises OSError if any process set still holds it afterwards."""
    libc = _libc()
    bit = 1 << CAP_SYS_ADMIN
    if cap_sets()["CapBnd"] & bit:
        _check(libc.prctl(PR_CAPBSET_DROP, CAP_SYS_ADMIN, 0, 0, 0), "drop CAP_SYS_ADMIN from the bounding set")
    hdr = _CapHeader(_CAP_VERSION_3, 0)
    data = (_CapData * 2)()
    _check(libc.capget(ctypes.byref(hdr), data), "capget")
    if (data[0].effective | data[0].permitted | data[0].inheritable) & bit:
        for field in ("effective", "permitted", "inheritable"):
            setattr(data[0], field, getattr(data[0], field) & ~bit)
        _check(libc.capset(ctypes.byref(hdr), data), "capset without CAP_SYS_ADMIN")
    left = [k for k, v in cap_sets().items() if v & bit]
    if left:
        raise OSError(f"CAP_SYS_ADMIN still in {left}")


def private_shm(spec: ShmSpec) -> None:
    """Give this process a mount namespace of its own whose /dev/shm is a fresh tmpfs with
    `spec`'s bounds (needs CAP_SYS_ADMIN). The runner-wide /dev/shm is detached first, so it
    is not even reachable beneath the new one."""
    libc = _libc()
    _check(libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    _check(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "make / private")
    libc.umount2(b"/dev/shm", MNT_DETACH)  # not a mount point on every host: then nothing to detach
    os.makedirs("/dev/shm", exist_ok=True)
    data = f"size={spec.size_mb << 20},nr_inodes={spec.inodes},mode={SHM_MODE:o}".encode()
    _check(libc.mount(b"tmpfs", b"/dev/shm", b"tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, data),
           "mount a tmpfs on /dev/shm")
    cleanup.set_private_shm("/dev/shm")


@dataclass
class Keeper:
    """The runner's end of one slot's keeper."""

    slot: int
    pid: int
    sock: socket.socket

    def hand(self, conn: socket.socket) -> None:
        """Pass a client connection to the keeper, which forks its supervisor."""
        self.sock.sendmsg([b"C"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [conn.fileno()]))])


def start_keepers(slots: int, spec: ShmSpec | None, serve_connection: Callable[[socket.socket, int], None]) -> list[Keeper]:
    """Fork one keeper per slot and wait until each is ready; raises RuntimeError (naming
    the slot and why) when one could not make its namespace. `serve_connection(conn, slot)`
    runs in a fresh child of the keeper for each connection and never returns."""
    keepers: list[Keeper] = []
    for slot in range(slots):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:
            ours.close()
            for k in keepers:
                k.sock.close()
            code = 0
            try:
                _keep(theirs, slot, spec, serve_connection)
            except BaseException:  # noqa: BLE001
                import traceback

                traceback.print_exc()
                code = 1
            os._exit(code)
        theirs.close()
        keepers.append(Keeper(slot, pid, ours))
    for k in keepers:
        note = k.sock.recv(512)
        if note != b"R":
            raise RuntimeError(f"slot {k.slot}: no /dev/shm of its own: {note[1:].decode(errors='replace') or 'keeper died'}")
    return keepers


def _keep(sock: socket.socket, slot: int, spec: ShmSpec | None, serve_connection: Callable[[socket.socket, int], None]) -> None:
    limits.set_process_name(f"vr-slot-{slot}")
    try:
        if spec is not None:
            private_shm(spec)
        drop_sys_admin()
    except OSError as exc:
        sock.send(b"E" + str(exc).encode()[:400])
        return
    sock.send(b"R")
    poll = select.poll()
    poll.register(sock, select.POLLIN)
    sup_pid, pidfd = 0, -1
    while True:
        for fd, _ in poll.poll():
            if fd == pidfd:
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(sup_pid, 0)
                poll.unregister(pidfd)
                os.close(pidfd)
                sup_pid, pidfd = 0, -1
                _slot_ended(sock)
                continue
            msg, fds, _flags, _addr = socket.recv_fds(sock, 16, 4)
            if not msg:  # the runner is gone: so is this slot
                if sup_pid:
                    cleanup.kill_group(sup_pid)
                return
            for extra in fds[1:]:
                os.close(extra)
            if not fds:
                continue
            if sup_pid:  # the runner never hands a busy slot a connection
                os.close(fds[0])
                continue
            conn = socket.socket(fileno=fds[0])
            pid = os.fork()
            if pid == 0:
                sock.close()
                serve_connection(conn, slot)
                os._exit(0)  # pragma: no cover - serve_connection exits itself
            conn.close()
            try:
                pidfd = os.pidfd_open(pid)
            except OSError:  # no pidfds here: wait for it (the runner sends nothing meanwhile)
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, 0)
                _slot_ended(sock)
                continue
            sup_pid = pid
            poll.register(pidfd, select.POLLIN)


def _slot_ended(sock: socket.socket) -> None:
    """The slot's supervisor has ended: whatever its jobs left in /dev/shm goes (a
    supervisor that died without its own clean-up included), then the slot is free."""
    cleanup.empty_private_shm()
    sock.send(b"F")
