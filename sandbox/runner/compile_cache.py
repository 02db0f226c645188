"""The runner's compile cache: built programs (and compile errors), shared by its supervisors.

Root-owned: entries are made by the supervisor, never by a job's uid, so no job can plant a
binary another job runs. The directory is mode 0711 (an entry is found only by its key, a
hash of the source); an entry is 0755 so the job's uid can run what it holds. An entry is
written beside its final name and renamed into place, so a reader sees all of it or nothing.
Identical concurrent compiles are merged with an flock per key: the first compiles, the
others wait for its entry. Least recently used entries go when the cache outgrows its cap.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import shutil
import stat
import time
from collections.abc import Iterator

CACHE_BYTES = 96 << 20  # the runner's /tmp is a small tmpfs: keep the cache well inside it
ARTIFACT_BYTES = 64 << 20
ARTIFACT_FILES = 256
RESULT = "result.json"


class CompileCache:
    def __init__(self, root: str, max_bytes: int = CACHE_BYTES) -> None:
        self.root = root
        self.max_bytes = max_bytes
        os.makedirs(root, mode=0o711, exist_ok=True)
        os.chmod(root, 0o711)

    def path(self, key: str) -> str:
        return os.path.join(self.root, key)

    def get(self, key: str) -> dict | None:
        """The stored outcome of a compile ({"ok", "return_code", "stdout", "stderr", ...}), or None."""
        entry = self.path(key)
        try:
            with open(os.path.join(entry, RESULT), encoding="utf-8") as f:
                result = json.load(f)
        except (OSError, ValueError):
            return None
        with contextlib.suppress(OSError):
            os.utime(entry)  # recently used
        return result if isinstance(result, dict) else None

    @contextlib.contextmanager
    def building(self, key: str, wait_s: float) -> Iterator[bool]:
        """Hold the key's build lock (True when another build held it first: this one waited,
        and its entry may be there now). Gives up waiting after `wait_s` and builds anyway."""
        fd = os.open(os.path.join(self.root, key + ".lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
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
                os.unlink(os.path.join(self.root, key + ".lock"))
            os.close(fd)

    def put(self, key: str, result: dict, build_dir: str | None = None, files: dict[str, bytes] | None = None) -> str:
        """Store an outcome with the regular files of `build_dir` (never links, never deeper
        than one level) and/or the given `files`; "" or why it was not stored."""
        tmp = os.path.join(self.root, f".{key}.{os.getpid()}.{os.urandom(3).hex()}")
        try:
            os.mkdir(tmp, 0o755)
            why = _copy_regular(build_dir, tmp) if build_dir else ""
            if why:
                return why
            for name, data in (files or {}).items():
                with open(os.path.join(tmp, name), "wb") as f:
                    f.write(data)
                os.chmod(os.path.join(tmp, name), 0o644)
            with open(os.path.join(tmp, RESULT), "w", encoding="utf-8") as f:
                json.dump(result, f)
            os.chmod(os.path.join(tmp, RESULT), 0o644)
            try:
                os.rename(tmp, self.path(key))
            except OSError:  # another build stored it meanwhile
                return ""
            tmp = ""
            self.evict()
            return ""
        except OSError as exc:
            return f"cannot store the build: {exc.strerror}"
        finally:
            if tmp:
                shutil.rmtree(tmp, ignore_errors=True)

    def evict(self) -> None:
        """Drop least recently used entries until the cache fits its cap."""
        entries = []
        total = 0
        with os.scandir(self.root) as it:
            for e in it:
                if e.name.startswith(".") or not e.is_dir(follow_symlinks=False):
                    continue
                size = sum(f.stat(follow_symlinks=False).st_size for f in os.scandir(e.path))
                entries.append((e.stat(follow_symlinks=False).st_mtime, size, e.path))
                total += size
        for _mtime, size, path in sorted(entries):
            if total <= self.max_bytes:
                break
            shutil.rmtree(path, ignore_errors=True)
            total -= size


def _copy_regular(src: str, dst: str) -> str:
    """Copy src's regular files (a compiler's output, written by the job's uid) into dst,
    root-owned and 0755; "" or why not (a link, a directory, too many or too large)."""
    total = 0
    names = os.listdir(src)
    if len(names) > ARTIFACT_FILES:
        return f"the build made more than {ARTIFACT_FILES} files"
    for name in names:
        path = os.path.join(src, name)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                continue  # a link is no part of a build we run
            raise
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                continue  # a directory or a device is no part of a build we run
            total += st.st_size
            if total > ARTIFACT_BYTES:
                return f"the build is larger than {ARTIFACT_BYTES >> 20} MB"
            out = os.open(os.path.join(dst, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o755)
            try:
                with os.fdopen(fd, "rb", closefd=False) as r:
                    while chunk := r.read(1 << 20):
                        os.write(out, chunk)
            finally:
                os.close(out)
        finally:
            os.close(fd)
    return ""
