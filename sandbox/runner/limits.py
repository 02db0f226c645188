"""Resource limits, privilege drop, and leaving nothing of a job behind."""

from __future__ import annotations

import functools
import os
import resource
import shutil
import signal
import stat
import time
from collections.abc import Iterator

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


def apply_rlimits(*, memory_mb: int, nproc: int, fsize_mb: int, nofile: int, cpu_s: int, pid: int = 0) -> None:
    """Set soft and hard limits on this process, or on `pid` (prlimit: our own child that
    has not dropped its uid yet). Limits above a hard limit we cannot raise are capped."""

    def setlim(kind: int, value: int) -> None:
        try:
            resource.prlimit(pid, kind, (value, value))
        except (ValueError, PermissionError):  # above a hard limit we may not raise
            hard = resource.prlimit(pid, kind)[1]
            if hard == resource.RLIM_INFINITY or value <= hard:
                raise
            resource.prlimit(pid, kind, (hard, hard))

    for kind, value in (
        (resource.RLIMIT_AS, memory_mb * MB),
        (resource.RLIMIT_NPROC, nproc),
        (resource.RLIMIT_FSIZE, fsize_mb * MB),
        (resource.RLIMIT_NOFILE, nofile),
        (resource.RLIMIT_CPU, max(1, cpu_s)),
        (resource.RLIMIT_CORE, 0),
    ):
        try:
            setlim(kind, value)
        except (ValueError, OSError):
            if pid:
                raise  # the caller falls back to having the process set them itself


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


def processes_of(uids: set[int]) -> list[tuple[int, int]]:
    """Living processes (zombies excluded) running as any of `uids`, in our pid namespace,
    as (pid, start time): a pid alone may be reused."""
    found = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    me = os.getpid()
    for name in names:
        if not name.isdigit() or int(name) == me:
            continue
        try:
            if os.stat(f"/proc/{name}").st_uid not in uids:
                continue
        except OSError:
            continue
        state, started = _state(int(name))
        if state not in ("Z", "X", ""):
            found.append((int(name), started))
    return found


def kill_uids(uids: set[int], rounds: int = 50, spare: set[int] = frozenset()) -> int:
    """SIGKILL every process running as one of `uids` (but the `spare` pids), fork bombs
    included. Returns how many were killed. Done when a scan finds none that was not sent
    SIGKILL already: those may take a moment to exit but run no more code (a fork in
    progress fails once the signal is pending). Only meaningful because every job gets
    uids of its own, which the server arranges."""
    if not can_switch_uid():
        return 0
    sent: set[tuple[int, int]] = set()
    for i in range(rounds):
        todo = [p for p in processes_of(uids) if p[0] not in spare and p not in sent]
        if not todo:
            break
        for pid, started in todo:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
            sent.add((pid, started))
        if i:
            time.sleep(0.0005 * i)  # still finding new ones: a bomb is forking, let the scan catch up
    return len(sent)


def read_proc(path: str, size: int = 4096) -> bytes:
    """A small /proc file in one read (OSError when the process is gone)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.read(fd, size)
    finally:
        os.close(fd)


def _state(pid: int) -> tuple[str, int]:
    """(state letter, start time in clock ticks) from /proc/<pid>/stat; ("", 0) if gone."""
    try:
        data = read_proc(f"/proc/{pid}/stat")
        fields = data[data.rindex(b")") + 2 :].split()
        return fields[0].decode(), int(fields[19])
    except (OSError, ValueError, IndexError):
        return "", 0


def exited_children() -> Iterator[tuple[int, int]]:
    """(pid, wait status) of each child that has ended, reaping it; stops when none has."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        yield pid, status


def kill_group(pid: int) -> None:
    for target in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        try:
            target()
        except OSError:
            pass


SHARED_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "/dev/mqueue")
_world_writable: tuple[str, ...] | None = None


def world_writable_dirs() -> tuple[str, ...]:
    """The shared directories a job's uid could write to at all (checked once: our hosts
    mount them read-only or mode 755, so usually none)."""
    global _world_writable
    if _world_writable is None:
        found = []
        for d in SHARED_DIRS:
            try:
                st = os.stat(d)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode) and st.st_mode & 0o002 and not _read_only(d):
                found.append(d)
        _world_writable = tuple(found)
    return _world_writable


def _read_only(path: str) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return True


_private_shm: str | None = None  # this slot's own /dev/shm (sandbox.runner.slotns), if it has one


def set_private_shm(path: str) -> None:
    """Record that `path` (/dev/shm) is a tmpfs of this slot's alone (made by its keeper,
    `sandbox.runner.slotns`): it is then emptied whole after each job, whoever owns what."""
    global _private_shm
    _private_shm = path


def empty_private_shm() -> None:
    """Remove everything in the slot's own /dev/shm (nothing where it has none: a shared
    /dev/shm holds other jobs' files, which only `remove_files_of` by uid may touch)."""
    if _private_shm is None or is_empty_fs(_private_shm):
        return
    try:
        entries = os.listdir(_private_shm)
    except OSError:
        return
    for entry in entries:
        remove_entry(os.path.join(_private_shm, entry))


def remove_files_of(uids: set[int], roots: tuple[str, ...] | None = None) -> None:
    """Delete entries a job's uids left at the top of shared writable directories; the
    slot's own /dev/shm, where it has one, is emptied whole."""
    for root in world_writable_dirs() if roots is None else roots:
        if root == _private_shm:
            empty_private_shm()
            continue
        try:
            entries = os.listdir(root)
        except OSError:
            continue
        for name in entries:
            path = os.path.join(root, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if st.st_uid not in uids:
                continue
            try:
                if stat.S_ISDIR(st.st_mode):
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    os.unlink(path)
            except OSError:
                pass


def make_scratch(base: str, name: str, uid: int) -> str:
    """A fresh, empty directory owned by `uid` (whatever was left at that path is removed).
    Where the host made the path a file system of its own (a tmpfs per slot with byte and
    inode quotas: one job filling it cannot give another ENOSPC), it is emptied instead."""
    path = os.path.join(base, name)
    if is_mount(path):  # the slot's own file system: emptied (usually by the last job's cleanup already)
        remove_tree(path)
        os.chmod(path, 0o700)
    else:
        try:
            os.mkdir(path, mode=0o700)
        except FileExistsError:
            remove_tree(path)
            os.mkdir(path, mode=0o700)
    if can_switch_uid():
        os.chown(path, uid, uid)
    return path


@functools.cache  # the host mounts the slots' file systems before the runner starts
def is_mount(path: str) -> bool:
    return os.path.ismount(path)


def is_empty_fs(path: str) -> bool:
    """Whether the file system mounted at `path` holds nothing but its root directory: its
    inode count says so in one statvfs (tmpfs counts every inode; an inode still held open
    counts too). False where it cannot say (no inode limit, or an error): then list it."""
    try:
        st = os.statvfs(path)
    except OSError:
        return False
    return bool(st.f_files) and st.f_files - st.f_ffree <= 1


def scratch_full(path: str) -> bool:
    """Whether the job filled its scratch (bytes or inodes): the SCRATCH_FULL flag. Two
    words from statvfs, to be asked after the job and before `remove_tree`; meaningful
    where the scratch is a file system of its own, so a scratch that is not answers False."""
    if not is_mount(path):
        return False
    try:
        st = os.statvfs(path)
    except OSError:
        return False
    if st.f_files and st.f_favail == 0:
        return True
    return bool(st.f_blocks) and st.f_bavail * st.f_frsize < max(SCRATCH_FULL_BYTES, st.f_blocks * st.f_frsize // 100)


SCRATCH_FULL_BYTES = 64 << 10  # less than this free (or 1% of the size) counts as full


def remove_tree(path: str) -> None:
    """Delete `path` and everything under it; a mount point is only emptied."""
    if is_mount(path):
        if is_empty_fs(path):  # one statvfs instead of a listing: the next job's scratch is usually so
            return
        try:
            with os.scandir(path) as it:
                entries = [(e.path, e.is_dir(follow_symlinks=False)) for e in it]
        except OSError:
            return
        for entry, is_dir in entries:
            if not is_dir:  # d_type says so: no stat (a job's usual leftover is its prog.py)
                try:
                    os.unlink(entry)
                    continue
                except OSError:
                    pass
            remove_entry(entry)
        return
    try:
        os.rmdir(path)  # most jobs leave their scratch directory empty
        return
    except FileNotFoundError:
        return
    except OSError:
        pass
    remove_entry(path)


def remove_entry(path: str) -> None:
    """Delete one entry a job made (a file, a link itself, or a directory tree, never
    following a link), whatever modes the job gave it."""
    try:
        if not os.path.isdir(path) or os.path.islink(path):
            os.unlink(path)
            return
    except OSError:
        pass
    shutil.rmtree(path, ignore_errors=True)
    if os.path.lexists(path):
        # a job can make directories even their owner may not list or empty (mode 000)
        try:
            os.chmod(path, 0o700)
        except OSError:
            pass
        for root, dirs, _files in os.walk(path):  # never enters links
            for d in dirs:
                sub = os.path.join(root, d)
                if os.path.islink(sub):
                    continue  # a link to a directory: chmod would act on its target
                try:
                    os.chmod(sub, 0o700)
                except OSError:
                    pass
        shutil.rmtree(path, ignore_errors=True)


# ---------------------------------------------------------------- job memory cgroup
JOB_CGROUP_DIR = "/run/vr-memcg"  # where the bwrap host binds this runner's memory cgroup
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
