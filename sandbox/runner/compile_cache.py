"""The runner's compile cache: built programs (and compile errors), shared by its supervisors.

Root-owned: entries are made by the supervisor, never by a job's uid, so no job can plant a
binary another job runs. The directory is mode 0711 (an entry is found only by its key); an
entry is 0755 so the job's uid can run what it holds. Three trust lines cross here:

- job -> root: a build is copied from the directory fd the supervisor made and kept
  (`BuildDir`), each file opened relative to it with O_NOFOLLOW and checked to be a regular
  file, so a build directory the job swapped for a link is never followed.
- job -> job: a job holds each entry it uses (a shared flock on the entry's directory fd,
  `Entry`) until its last test ends; only entries nobody holds are evicted. A store reserves
  its room first: under the cache's store lock it evicts until the entry fits both the byte cap
  and the file system, then writes, so concurrent stores never overshoot. An artifact larger
  than ARTIFACT_BYTES (well below the cap) or one there is no room for is not stored: the job
  runs it from its own scratch (compiled.py) instead of failing.
- keys: an HMAC of the compile's description under a key made once per cache directory (a
  root-only file), so no job can compute the key of another's source and files.

An entry is written beside its final name and renamed into place, so a reader sees all of it or
nothing. Identical concurrent compiles are merged with an flock per key: the first compiles, the
others wait for its entry. Least recently used entries go first.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import hmac
import json
import os
import shutil
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass

CACHE_BYTES = 96 << 20  # the runner's cache file system is small (Docker: a 128 MiB tmpfs): keep well inside it
ARTIFACT_BYTES = 16 << 20  # larger builds run from the job's own scratch (honest ones are a few MiB)
ARTIFACT_FILES = 256
FS_SPARE_BYTES = 4 << 20  # left free on the cache's file system after a store
RESULT = "result.json"
KEY_FILE = ".key"
STORE_LOCK = ".store.lock"
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
PAGE = 4096


def _rounded(size: int) -> int:
    return -(-size // PAGE) * PAGE + PAGE  # the data in pages, and an inode's worth


@dataclass
class Entry:
    """A cache entry this job holds: its path (for the job's argv), its stored outcome, and the
    directory fd whose shared flock keeps it from eviction until `release`."""

    path: str
    result: dict
    fd: int = -1

    def release(self) -> None:
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)  # closing drops the flock
            self.fd = -1


@dataclass
class BuildDir:
    """A directory the supervisor made for a build, held by fd (its identity is the inode made)."""

    parent_fd: int  # the scratch directory, opened by the supervisor
    name: str
    fd: int
    dev: int
    ino: int

    @classmethod
    def make(cls, parent_fd: int, name: str, uid: int | None) -> BuildDir:
        """A fresh directory `name` in `parent_fd` (whatever the job left there is removed first)."""
        remove_entry_at(parent_fd, name)
        os.mkdir(name, 0o700, dir_fd=parent_fd)
        fd = os.open(name, DIR_FLAGS, dir_fd=parent_fd)
        st = os.fstat(fd)
        if uid is not None:
            os.fchown(fd, uid, uid)
        return cls(parent_fd, name, fd, st.st_dev, st.st_ino)

    def intact(self) -> bool:
        """Whether `name` is still the directory made (not a link or another directory put in its place)."""
        try:
            st = os.stat(self.name, dir_fd=self.parent_fd, follow_symlinks=False)
        except OSError:
            return False
        return stat.S_ISDIR(st.st_mode) and (st.st_dev, st.st_ino) == (self.dev, self.ino)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def remove_entry_at(parent_fd: int, name: str) -> None:
    """Remove `name` in `parent_fd` whatever it is (a link itself, never its target)."""
    try:
        os.unlink(name, dir_fd=parent_fd)
    except FileNotFoundError:
        return
    except OSError as exc:
        if exc.errno not in (errno.EISDIR, errno.EPERM):
            raise
        shutil.rmtree(name, dir_fd=parent_fd)  # fd-based: never follows a link inside


def regular_files(dir_fd: int) -> tuple[list[tuple[str, int]], str]:
    """The regular files directly in `dir_fd` (opened O_NOFOLLOW; links, directories and devices
    left out) as (name, size), or why the build cannot be stored (too many or too large)."""
    names = os.listdir(dir_fd)
    if len(names) > ARTIFACT_FILES:
        return [], f"the build made more than {ARTIFACT_FILES} files"
    out, total = [], 0
    for name in names:
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode):
            continue
        total += _rounded(st.st_size)
        if total > ARTIFACT_BYTES:
            return [], f"the build is larger than the cache's {ARTIFACT_BYTES >> 20} MiB per program"
        out.append((name, st.st_size))
    return out, ""


def copy_file_at(src_dir: int, name: str, dst_dir: int, mode: int, most: int) -> int:
    """Copy one regular file by name between directory fds, never following a link; its size."""
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=src_dir)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, f"{name} is not a regular file")
        out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dst_dir)
        done = 0
        try:
            while chunk := os.read(fd, 1 << 20):
                done += len(chunk)
                if done > most:  # it grew since it was measured
                    raise OSError(errno.EFBIG, f"{name} grew while it was copied")
                os.write(out, chunk)
            os.fchmod(out, mode)
        finally:
            os.close(out)
        return done
    finally:
        os.close(fd)


class CompileCache:
    def __init__(self, root: str, max_bytes: int = CACHE_BYTES) -> None:
        self.root = root
        self.max_bytes = max_bytes
        os.makedirs(root, mode=0o711, exist_ok=True)
        self.fd = os.open(root, DIR_FLAGS)
        st = os.fstat(self.fd)
        if st.st_uid != os.geteuid():
            raise OSError(errno.EPERM, f"the compile cache {root} is not ours")
        os.fchmod(self.fd, 0o711)
        self._secret = self._load_secret()

    def _load_secret(self) -> bytes:
        """The cache's HMAC key: made once (root-only, mode 0600), read by every supervisor."""
        try:
            fd = os.open(KEY_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=self.fd)
        except FileNotFoundError:
            tmp = f".key.{os.getpid()}.{os.urandom(4).hex()}"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600, dir_fd=self.fd)
            os.write(fd, os.urandom(32))
            os.close(fd)
            with contextlib.suppress(FileExistsError):  # another supervisor made it first: theirs counts
                os.link(tmp, KEY_FILE, src_dir_fd=self.fd, dst_dir_fd=self.fd)
            os.unlink(tmp, dir_fd=self.fd)
            fd = os.open(KEY_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=self.fd)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
                raise OSError(errno.EPERM, "the compile cache's key file is not root's alone")
            secret = os.read(fd, 64)
        finally:
            os.close(fd)
        if len(secret) < 32:
            raise OSError(errno.EINVAL, "the compile cache's key file is short")
        return secret

    def key(self, material: str) -> str:
        """The entry name for a compile's description (languages.cache_key): keyed, so a job
        that knows another's source still cannot name its entry."""
        return hmac.new(self._secret, material.encode("ascii"), hashlib.sha256).hexdigest()[:40]

    def path(self, key: str) -> str:
        return os.path.join(self.root, key)

    def get(self, key: str) -> Entry | None:
        """The entry, held (a shared flock on its directory until Entry.release), or None."""
        try:
            fd = os.open(key, DIR_FLAGS, dir_fd=self.fd)
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # refused only while it is being evicted
            st, now = os.fstat(fd), os.stat(key, dir_fd=self.fd, follow_symlinks=False)
            if (st.st_dev, st.st_ino) != (now.st_dev, now.st_ino):
                raise OSError(errno.ESTALE, "evicted meanwhile")
            rfd = os.open(RESULT, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            with os.fdopen(rfd, encoding="utf-8") as f:
                result = json.load(f)
            if not isinstance(result, dict):
                raise ValueError("not an outcome")
            os.utime(fd)  # recently used
        except (OSError, ValueError):
            os.close(fd)
            return None
        return Entry(self.path(key), result, fd)

    @contextlib.contextmanager
    def building(self, key: str, wait_s: float) -> Iterator[bool]:
        """Hold the key's build lock (True when another build held it first: this one waited,
        and its entry may be there now). Gives up waiting after `wait_s` and builds anyway."""
        name = key + ".lock"
        fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=self.fd)
        waited = False
        try:
            deadline = time.monotonic() + wait_s
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    waited = True
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.005)
            yield waited
        finally:
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=self.fd)
            os.close(fd)

    def put(self, key: str, result: dict, build: BuildDir | None = None,
            files: dict[str, bytes] | None = None) -> tuple[Entry | None, str]:
        """Store an outcome with the regular files of `build` (read through its fd, one level,
        no links) and/or the given `files`; the stored entry, held, or None and why not (the
        build is too large for the cache, or there is no room that nobody holds)."""
        listed: list[tuple[str, int]] = []
        if build is not None:
            listed, why = regular_files(build.fd)
            if why:
                return None, why
        data = json.dumps(result).encode()
        need = sum(_rounded(size) for _, size in listed) + sum(_rounded(len(b)) for b in (files or {}).values())
        need += _rounded(len(data)) + PAGE
        if need > ARTIFACT_BYTES:
            return None, f"the build is larger than the cache's {ARTIFACT_BYTES >> 20} MiB per program"
        lock = os.open(STORE_LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=self.fd)
        tmp = ""
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one store at a time: the room made is this store's
            if not self._make_room(need):
                return None, "no room in the compile cache that other jobs do not hold"
            tmp = f".{key}.{os.getpid()}.{os.urandom(3).hex()}"
            os.mkdir(tmp, 0o755, dir_fd=self.fd)
            tfd = os.open(tmp, DIR_FLAGS, dir_fd=self.fd)
            try:
                os.fchmod(tfd, 0o755)
                for name, size in listed:
                    copy_file_at(build.fd, name, tfd, 0o755, size)
                for name, content in (files or {}).items():
                    _write_at(tfd, name, content, 0o644)
                _write_at(tfd, RESULT, data, 0o644)
            finally:
                os.close(tfd)
            try:
                os.rename(tmp, key, src_dir_fd=self.fd, dst_dir_fd=self.fd)
                tmp = ""
            except OSError:  # another build stored it meanwhile: that one is used
                pass
            entry = self.get(key)  # held before the store lock goes: no other store evicts it first
        except OSError as exc:
            return None, f"cannot store the build: {exc.strerror or exc}"
        finally:
            if tmp:
                with contextlib.suppress(OSError):
                    shutil.rmtree(tmp, dir_fd=self.fd)
            os.close(lock)  # drops the store lock
        return (entry, "") if entry is not None else (None, "the stored build was not found again")

    def _entries(self) -> list[tuple[float, int, str]]:
        """(last use, bytes, name) of every entry; stale half-written or evicted ones (dot
        names: only a store, under the store lock, makes them) are removed on the way."""
        out = []
        with os.scandir(self.fd) as it:
            found = [(e.name, e.is_dir(follow_symlinks=False)) for e in it]
        for name, is_dir in found:
            if not is_dir:
                continue
            if name.startswith("."):
                with contextlib.suppress(OSError):
                    shutil.rmtree(name, dir_fd=self.fd)
                continue
            try:
                fd = os.open(name, DIR_FLAGS, dir_fd=self.fd)
            except OSError:
                continue
            try:
                size = PAGE
                for f in os.scandir(fd):
                    with contextlib.suppress(OSError):
                        size += _rounded(f.stat(follow_symlinks=False).st_size)
                out.append((os.fstat(fd).st_mtime, size, name))
            finally:
                os.close(fd)
        return out

    def _make_room(self, need: int) -> bool:
        """Evict least recently used entries nobody holds until `need` more bytes fit the cap
        and the file system (called under the store lock); False where they cannot."""
        entries = sorted(self._entries())
        used = sum(size for _, size, _ in entries)
        for _mtime, size, name in entries:
            if used + need <= self.max_bytes and self._fs_free() >= need + FS_SPARE_BYTES:
                return True
            if self._evict(name):
                used -= size
        return used + need <= self.max_bytes and self._fs_free() >= need + FS_SPARE_BYTES

    def _fs_free(self) -> int:
        st = os.fstatvfs(self.fd)
        return st.f_bavail * st.f_frsize

    def _evict(self, name: str) -> bool:
        """Remove one entry unless a job holds it (its shared flock refuses ours)."""
        try:
            fd = os.open(name, DIR_FLAGS, dir_fd=self.fd)
        except OSError:
            return False
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return False  # held: in use by a job
            dead = f".dead.{name}.{os.urandom(3).hex()}"
            os.rename(name, dead, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except OSError:
            return False
        finally:
            os.close(fd)
        shutil.rmtree(dead, dir_fd=self.fd, ignore_errors=True)
        return True


def _write_at(dir_fd: int, name: str, data: bytes, mode: int) -> None:
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dir_fd)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fchmod(fd, mode)
    finally:
        os.close(fd)
