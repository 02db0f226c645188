"""Resource limits and privilege: the candidate's rlimits, environment and uid."""

from __future__ import annotations

import functools
import os
import resource
from dataclasses import dataclass

MB = 1 << 20
# glibc gives each thread that mallocs an arena of its own (up to 8 per core), and each one
# reserves 64 MiB of address space: under RLIMIT_AS = 512 MiB an honest program of 14 threads
# using ~30 MiB failed "can't start new thread" at its 9th. Two arenas are what the GIL needs.
MALLOC_ARENAS = 2
M_ARENA_MAX = -8  # mallopt's parameter (malloc.h)

CANDIDATE_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "PYTHONIOENCODING": "utf-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    "MALLOC_ARENA_MAX": str(MALLOC_ARENAS),  # for what a job execs (glibc reads it at start)
}


def cap_malloc_arenas() -> None:
    """In the warm template (its malloc already started, so the variable is too late for it):
    the same cap through mallopt, inherited by every candidate forked from it."""
    import ctypes  # loaded by the runner already (seccomp)

    try:
        ctypes.CDLL(None).mallopt(M_ARENA_MAX, MALLOC_ARENAS)
    except (OSError, AttributeError):  # not glibc: no per-thread arenas to cap
        pass


def set_process_name(name: str) -> None:
    """Name this process in ps/top/perf (runner roles are otherwise all "python3").

    Plain fd calls, not open(): a text file object in a freshly forked candidate touches
    (and so copies) ~110 inherited pages, ~0.4 ms per job."""
    try:
        fd = os.open("/proc/self/comm", os.O_WRONLY)
    except OSError:
        return
    try:
        os.write(fd, name.encode()[:15])
    except OSError:
        pass
    finally:
        os.close(fd)


@functools.cache  # asked several times per job; a process's euid does not change under us
def can_switch_uid() -> bool:
    """True when we may drop children to other uids (root, or CAP_SETUID in a container)."""
    return os.geteuid() == 0


@dataclass(frozen=True)
class Rlimits:
    """A candidate's resource limits, the one record of their keys: made from a job's or a
    build's limits, set on the fresh process by the supervisor (prlimit: it is still ours), or
    where that failed sent in its first frame and set by the process itself."""

    memory_mb: int  # RLIMIT_AS
    nproc: int
    fsize_mb: int
    nofile: int
    cpu_s: int  # a backstop: the supervisor's clock is each test's limit
    data_mb: int = 0  # RLIMIT_DATA, a compiled program's memory (0: not set)
    stack_mb: int = 0  # RLIMIT_STACK (0: the default)
    # RLIMIT_CPU's soft limit this far below the hard one (set by the supervisor only): a program
    # past it gets SIGXCPU (a time-limit verdict) where a starved supervisor has not stopped it
    # yet, not the SIGKILL of the hard limit (which reads as out of memory)
    cpu_grace_s: int = 0

    @classmethod
    def for_tests(cls, timeout_s: float, n_units: int, *, memory_mb: int, nproc: int, fsize_mb: int,
                  nofile: int, data_mb: int = 0, stack_mb: int = 0, cpu_grace_s: int = 0) -> Rlimits:
        """RLIMIT_CPU for a process that loads and then runs up to `n_units` tests of
        `timeout_s` each: timeout_s x (n_units + 1), rounded down, + 1 s."""
        return cls(memory_mb, nproc, fsize_mb, nofile, int(timeout_s * (n_units + 1)) + 1, data_mb, stack_mb,
                   cpu_grace_s)

    @classmethod
    def of_job(cls, lim: dict, n_units: int) -> Rlimits:
        """From a job message's limits."""
        return cls.for_tests(lim["timeout_s"], n_units, memory_mb=lim["memory_mb"], nproc=lim["nproc"],
                             fsize_mb=lim["fsize_mb"], nofile=lim["nofile"])

    @classmethod
    def from_message(cls, d: dict) -> Rlimits:
        """From `to_message`'s dict (data and stack absent: not set)."""
        return cls(d["memory_mb"], d["nproc"], d["fsize_mb"], d["nofile"], d["cpu_s"], d.get("data_mb", 0),
                   d.get("stack_mb", 0))

    def to_message(self) -> dict:
        """For a process that sets its own limits (prlimit failed): all but the CPU grace, which
        only the supervisor sets (such a process keeps soft = hard)."""
        return {"memory_mb": self.memory_mb, "nproc": self.nproc, "fsize_mb": self.fsize_mb, "nofile": self.nofile,
                "cpu_s": self.cpu_s, "data_mb": self.data_mb, "stack_mb": self.stack_mb}

    def apply(self, pid: int = 0) -> None:
        """Set soft and hard limits on this process, or on `pid` (prlimit: our own child that
        has not dropped its uid yet). Limits above a hard limit we cannot raise are capped."""

        def pair(kind: int, value: int) -> tuple[int, int]:
            grace = self.cpu_grace_s if kind == resource.RLIMIT_CPU else 0
            return (value - grace, value) if value > grace else (value, value)

        def setlim(kind: int, value: int) -> None:
            try:
                resource.prlimit(pid, kind, pair(kind, value))
            except (ValueError, PermissionError):  # above a hard limit we may not raise
                hard = resource.prlimit(pid, kind)[1]
                if hard == resource.RLIM_INFINITY or value <= hard:
                    raise
                resource.prlimit(pid, kind, pair(kind, hard))

        for kind, value in (
            (resource.RLIMIT_AS, self.memory_mb * MB),
            (resource.RLIMIT_NPROC, self.nproc),
            (resource.RLIMIT_FSIZE, self.fsize_mb * MB),
            (resource.RLIMIT_NOFILE, self.nofile),
            (resource.RLIMIT_CPU, max(1, self.cpu_s)),
            (resource.RLIMIT_CORE, 0),
            (resource.RLIMIT_DATA, self.data_mb * MB),
            (resource.RLIMIT_STACK, self.stack_mb * MB),
        ):
            if not value and kind in (resource.RLIMIT_DATA, resource.RLIMIT_STACK):
                continue  # not set: the inherited one
            try:
                setlim(kind, value)
            except (ValueError, OSError):
                if pid:
                    raise  # the caller falls back to having the process set them itself


def give_pipes(uid: int, fds: tuple[int, ...] = (0, 1, 2)) -> None:
    """Make the job's uid the owner of its stdio pipes (made by root, mode 0600): a program
    that opens /dev/stdin or /proc/self/fd/1 by name, as plain `python3 prog.py` may, can."""
    if not can_switch_uid():
        return
    for fd in fds:
        try:
            os.fchown(fd, uid, uid)
        except OSError:
            pass


def drop_privileges(uid: int) -> None:
    """Become `uid` for good: no supplementary groups, no saved root ids."""
    if not can_switch_uid():
        return
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    if os.getuid() == 0 or os.geteuid() == 0:  # pragma: no cover - defence in depth
        os._exit(112)


