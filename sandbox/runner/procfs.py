"""The /proc reader: one parser of /proc/<pid>/stat for whoever asks (cleanup finding a uid's
processes, the CPU clock summing a job's time, the launcher telling its programs' parents),
a process's run-queue wait, and the processes a uid owns.

Plain fd calls, one read per file: these run between tests, on every process of a job.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterator
from typing import NamedTuple

CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def read(path: str, size: int = 4096) -> bytes:
    """A small /proc file in one read (OSError when the process is gone)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.read(fd, size)
    finally:
        os.close(fd)


class Stat(NamedTuple):
    """The fields of /proc/<pid>/stat this runner uses."""

    state: str  # R, S, D, Z (a zombie), X (dead), ...
    ppid: int  # 0 once it is being reaped
    cpu_s: float  # its own user + system time
    children_cpu_s: float  # the user + system time of the children it reaped
    start_ticks: int  # when it started, in clock ticks since boot: (pid, start_ticks) names one process

    @property
    def start_s(self) -> float:
        return self.start_ticks / CLK_TCK


def stat(pid: int) -> Stat | None:
    """`pid`'s stat line, parsed after the command name (which may hold spaces and brackets);
    None once it is gone (a process reaped while its file is read reads as empty)."""
    try:
        data = read(f"/proc/{pid}/stat")
        f = data[data.rindex(b")") + 2 :].split()
        return Stat(f[0].decode(), int(f[1]), (int(f[11]) + int(f[12])) / CLK_TCK,
                    (int(f[13]) + int(f[14])) / CLK_TCK, int(f[19]))
    except (OSError, ValueError, IndexError):
        return None


def run_delay_s(pid: int) -> float | None:
    """Seconds `pid`'s main thread has waited on a run queue for a CPU (/proc/<pid>/schedstat)."""
    try:
        return int(read(f"/proc/{pid}/schedstat", 256).split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


def owned_by(uids: Collection[int], skip: int = -1) -> Iterator[int]:
    """The pids in our pid namespace whose /proc entry one of `uids` owns (but `skip`); gone
    ones, and those that end while we look, are passed over."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return
    for name in names:
        if not name.isdigit():
            continue
        pid = int(name)
        if pid == skip:
            continue
        try:
            if os.stat(f"/proc/{name}").st_uid not in uids:
                continue
        except OSError:
            continue
        yield pid
