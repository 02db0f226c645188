"""An exec job's files: written into the scratch directory before the run, fetched after it.

Both directions take what the client sent as untrusted too (the server validates it as
well; the runner must be safe on its own): a malformed entry is the job's error, named by its
index, never an exception in the supervisor. Fetched files are read once per normalised
path, refusing links, and within one total size cap.

Root works in a tree the job owns here, so every path is walked from the scratch directory's
fd one component at a time, each directory opened O_NOFOLLOW | O_DIRECTORY and each file
O_NOFOLLOW: a link the job made anywhere on the path is refused, never followed.
"""

from __future__ import annotations

import base64
import binascii
import errno
import os
import stat

NAME_BYTES = 255  # one path component (the kernel's NAME_MAX)
PATH_BYTES = 1024  # a whole relative path


class FileError(Exception):
    """A `files` entry that cannot be written; the message names it."""


def _relative(scratch: str, rel: object) -> str:
    """The absolute normalised path of `rel` inside scratch; FileError why not."""
    if type(rel) is not str or not rel:
        raise FileError("path is not a non-empty string")
    try:
        raw = rel.encode("utf-8")
    except UnicodeEncodeError:
        raise FileError("path is not valid UTF-8 (a lone surrogate)") from None
    if b"\0" in raw:
        raise FileError("path contains a NUL byte")
    if len(raw) > PATH_BYTES or any(len(part) > NAME_BYTES for part in raw.split(b"/")):
        raise FileError(f"path longer than {PATH_BYTES} bytes or a name longer than {NAME_BYTES}")
    path = os.path.normpath(os.path.join(scratch, rel))
    if not path.startswith(scratch.rstrip("/") + "/"):
        raise FileError("path leaves the scratch directory")
    return path


def _decode(content: object) -> bytes:
    if type(content) is not str:
        raise FileError("content_b64 is not a string")
    try:
        return base64.b64decode(content, validate=True)
    except (UnicodeEncodeError, binascii.Error, ValueError):
        raise FileError("content_b64 is not base64") from None


def write_all(scratch: str, files: object, uid: int | None) -> str:
    """Write every entry; "" when all were written, else the first failure, named."""
    if not isinstance(files, list):
        return "files: not a list"
    for i, f in enumerate(files):
        try:
            if not isinstance(f, dict):
                raise FileError("entry is not an object")
            path = _relative(scratch, f.get("path"))
            _write(scratch, path, _decode(f.get("content_b64")), uid)
        except FileError as exc:
            return f"files[{i}]: {exc}"
        except OSError as exc:
            what = "no space left in the scratch directory" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else (
                exc.strerror or type(exc).__name__)
            return f"files[{i}]: cannot write {f.get('path')!r}: {what}"[:300]
    return ""


DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _walk(scratch: str, path: str, make: bool) -> tuple[int, str]:
    """The fd of `path`'s directory (walked from `scratch` without following a link, made
    where `make` and missing) and its last component; the caller closes the fd."""
    parts = os.path.relpath(path, scratch).split("/")
    fd = os.open(scratch, DIR_FLAGS)
    try:
        for part in parts[:-1]:
            if make:
                try:
                    os.mkdir(part, 0o755, dir_fd=fd)
                except FileExistsError:
                    pass
            nxt = os.open(part, DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd, parts[-1]


def _write(scratch: str, path: str, data: bytes, uid: int | None) -> None:
    dir_fd, name = _walk(scratch, path, make=True)
    try:
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        if uid is not None:
            os.fchown(f.fileno(), uid, uid)


def fetch_all(scratch: str, rels: object, cap: int) -> tuple[dict[str, bytes], list[str]]:
    """The files the candidate left, by normalised relative path, each read once, all of
    them within `cap` bytes; and a note for each one left out."""
    out: dict[str, bytes] = {}
    notes: list[str] = []
    if not isinstance(rels, list):
        return out, ["fetch_files: not a list"]
    seen: set[str] = set()
    left = cap
    for i, rel in enumerate(rels):
        try:
            path = _relative(scratch, rel)
        except FileError as exc:
            notes.append(f"fetch_files[{i}]: {exc}")
            continue
        if path in seen:
            continue
        seen.add(path)
        key = os.path.relpath(path, scratch)
        data, why = _read(scratch, path, left)
        if data is None:
            if why:
                notes.append(f"fetch_files[{i}]: {key!r} {why}")
            continue
        out[key] = data
        left -= len(data)
    return out, notes


def _read(scratch: str, path: str, most: int) -> tuple[bytes | None, str]:
    """A regular file's bytes, refusing a link anywhere on its path (and anything that is not
    a regular file); None and why when it is not fetched."""
    try:
        dir_fd, name = _walk(scratch, path, make=False)
    except OSError as exc:
        return None, ("is reached through a link" if exc.errno == errno.ELOOP else "")
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError as exc:
        return None, ("is reached through a link" if exc.errno == errno.ELOOP else "")  # not there: nothing to say
    finally:
        os.close(dir_fd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None, "is not a regular file"
        if st.st_size > most:
            return None, f"left out: the fetched files' total cap is reached ({st.st_size} bytes, {most} left)"
        chunks, got = [], 0
        while got <= most:
            chunk = os.read(fd, min(1 << 20, most + 1 - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        if got > most:  # it grew since: the candidate may still be writing it
            return None, "left out: the fetched files' total cap is reached"
        return b"".join(chunks), ""
    finally:
        os.close(fd)
