"""The job memory cgroups, both sides: the bwrap host makes one per runner with a child per
slot (and removes them, and those of crashed servers), bound at JOB_CGROUP_DIR; in the
runner the slot's spawner joins its own, each fresh candidate sets its job's limit there,
and the OOM killer is pointed at candidates before the spawner."""

from __future__ import annotations

import contextlib
import os
import resource
import time

JOB_CGROUP_DIR = "/run/vr-memcg"  # where the bwrap host binds this runner's memory cgroup
MEMCG_ROOTS = ("/sys/fs/cgroup/memory", "/sys/fs/cgroup")  # v1 memory controller, else v2
MEMCG_PARENT = "verireward"


_job_cgroup: str | None = None


def join_job_cgroup(scratch: str | None) -> bool:
    """Move this process (the slot's spawner, so every candidate it forks) into the slot's
    memory cgroup the host made (JOB_CGROUP_DIR/s<slot>, named as the slot's scratch), where
    there is one. The aggregate memory cap per job is then set by `cap_job_memory`."""
    global _job_cgroup
    if scratch is None:
        return False
    path = os.path.join(JOB_CGROUP_DIR, os.path.basename(scratch))
    if not write_control(os.path.join(path, "cgroup.procs"), str(os.getpid())):
        return False
    _job_cgroup = path
    return True


OOM_SCORE_ADJ = "/proc/self/oom_score_adj"


def oom_kill_me_first() -> None:
    """A fresh candidate: the OOM killer's first choice (+1000; raising needs no privilege).
    Its Landlock domain keeps it from writing the file again (seccomp.make_ruleset), so a job
    that re-execs a small process and fills memory with pages in nobody's RSS (tmpfs, pipes)
    cannot make the spawner, the largest process of the cgroup or container, the one killed."""
    write_control(OOM_SCORE_ADJ, "1000")


def cap_job_memory() -> None:
    """In a fresh candidate (still root): the slot's cgroup limit becomes this job's memory
    limit (its RLIMIT_AS, set on it by the supervisor), for all its processes together."""
    if _job_cgroup is None:
        return
    # a compiled language's run has RLIMIT_DATA = its memory limit and a looser RLIMIT_AS
    # (sandbox/runner/compiled.py): the smaller of the two is the job's memory
    finite = [v for v in (resource.getrlimit(resource.RLIMIT_AS)[0], resource.getrlimit(resource.RLIMIT_DATA)[0])
              if v != resource.RLIM_INFINITY]
    if not finite:
        return
    want = min(finite)
    mem = os.path.join(_job_cgroup, "memory.limit_in_bytes")
    if write_control(mem, str(want)):
        write_control(os.path.join(_job_cgroup, "memory.memsw.limit_in_bytes"), str(want))
    elif write_control(os.path.join(_job_cgroup, "memory.memsw.limit_in_bytes"), str(want)):
        write_control(mem, str(want))  # it was above the old memsw limit: memsw had to grow first
    elif write_control(os.path.join(_job_cgroup, "memory.max"), str(want)):  # cgroup v2
        write_control(os.path.join(_job_cgroup, "memory.swap.max"), "0")


def write_control(path: str, text: str) -> bool:
    """Write a short value to a kernel control file (cgroup, /proc); False if it refused."""
    try:
        fd = os.open(path, os.O_WRONLY)
    except OSError:
        return False
    try:
        os.write(fd, text.encode())
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


# ---------------------------------------------------------------- the host's side (bwrap)
def memcg_root() -> str | None:
    """Where this host may make memory cgroups (cgroup v1's memory controller, or a v2
    hierarchy with the memory controller), or None."""
    for root in MEMCG_ROOTS:
        if os.path.exists(os.path.join(root, "memory.limit_in_bytes")) or (
            root == "/sys/fs/cgroup" and os.path.exists(os.path.join(root, "cgroup.subtree_control"))
        ):
            if os.access(root, os.W_OK):
                return root
    return None


def make_memcg(base: int, slots: int) -> str | None:
    """The runner's memory cgroup (named after its uid block) with one child per slot."""
    root = memcg_root()
    if root is None or os.geteuid() != 0:
        return None
    parent = os.path.join(root, MEMCG_PARENT)
    path = os.path.join(parent, f"uid-{base}")
    try:
        os.makedirs(path, exist_ok=True)
        if not os.path.exists(os.path.join(root, "memory.limit_in_bytes")):  # v2: delegate memory
            for d in (root, parent, path):
                write_control(os.path.join(d, "cgroup.subtree_control"), "+memory")
        for k in range(slots):
            os.makedirs(os.path.join(path, f"s{k}"), exist_ok=True)
    except OSError:
        remove_memcg(path)
        return None
    return path


def remove_memcg(path: str | None, wait_s: float = 0.0) -> None:
    """Remove a runner's cgroups (children first); waits up to `wait_s` for its last processes."""
    if not path:
        return
    deadline = time.monotonic() + wait_s
    while True:
        with contextlib.suppress(OSError):
            for child in os.listdir(path):
                if os.path.isdir(os.path.join(path, child)):
                    with contextlib.suppress(OSError):
                        os.rmdir(os.path.join(path, child))
        with contextlib.suppress(OSError):
            os.rmdir(path)
        if not os.path.exists(path) or time.monotonic() >= deadline:
            return
        time.sleep(0.05)


def remove_orphan_memcgs() -> None:
    """Cgroups of runners whose uid lease nobody holds any more (a crashed server's)."""
    from . import uidlease  # noqa: PLC0415 - host side only: the runner's warm interpreter never loads random

    root = memcg_root()
    if root is None:
        return
    parent = os.path.join(root, MEMCG_PARENT)
    with contextlib.suppress(OSError):  # no lease directory either: nothing of ours to judge
        for name in os.listdir(parent):
            if name.startswith("uid-") and name[4:].isdigit() and not uidlease.held(int(name[4:])):
                remove_memcg(os.path.join(parent, name))
