"""CPU pinning: which CPUs this runner may use, and keeping a process to one of them (why a
job's processes share one CPU: `sandbox.pool.CpuPlan`)."""

from __future__ import annotations

import os

_ALL_CPUS: frozenset[int] | None = None


def allowed_cpus() -> frozenset[int]:
    """The CPUs this process may use, read once (the runner reads it before any job pins a
    process; the pool when it is made)."""
    global _ALL_CPUS
    if _ALL_CPUS is None:
        try:
            _ALL_CPUS = frozenset(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            _ALL_CPUS = frozenset()
    return _ALL_CPUS


def pin_cpu(cpu: int | None, pid: int = 0) -> bool:
    """Keep `pid` (0: this process) on one CPU, or on all of ours again when `cpu` is None
    (why: `sandbox.pool.CpuPlan`). False when it could not be done (a CPU we may not use,
    or no permission: the process then runs unpinned)."""
    cpus = allowed_cpus()
    if not cpus:
        return False
    if cpu is not None and cpu not in cpus:
        return False
    try:
        os.sched_setaffinity(pid, cpus if cpu is None else (cpu,))
        return True
    except OSError:
        return False
