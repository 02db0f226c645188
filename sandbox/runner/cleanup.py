"""Leaving nothing of a job behind: its processes killed (by uid, fork bombs included) and
reaped, the files its uid left in shared directories removed, its scratch made fresh and
emptied after."""

from __future__ import annotations

import functools
import os
import shutil
import signal
import stat
import time
from collections.abc import Iterator

from . import procfs
from .limits import can_switch_uid


def processes_of(uids: set[int]) -> list[tuple[int, int]]:
    """Living processes (zombies excluded) running as any of `uids`, in our pid namespace,
    as (pid, start time): a pid alone may be reused."""
    found = []
    for pid in procfs.owned_by(uids, skip=os.getpid()):
        st = procfs.stat(pid)
        if st is not None and st.state not in ("Z", "X"):
            found.append((pid, st.start_ticks))
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
