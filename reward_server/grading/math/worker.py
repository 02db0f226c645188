"""The math worker process: ``python -m reward_server.grading.math.worker``.

Speaks length-prefixed JSON over stdin/stdout: a request is
``{"completion": str, "answer": str, "options": {...}}``, the reply is the `MathGrade` that
``grade.grade`` returns, as a dict. SymPy is imported once, before the first request. Each request
runs under a soft timer (SIGALRM, the worker's own main thread) and an address-space cap
(RLIMIT_AS); the parent kills the whole process if the hard limit passes anyway.
"""

from __future__ import annotations

import os
import resource
import signal
import sys

from sandbox.runner import framing

from .options import MathGrade, MathOptions

MAX_MSG = 64 * 1024 * 1024


class _SoftTimeout(BaseException):
    pass


def _read_exact(fd: int, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        chunk = os.read(fd, n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _vm_bytes() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0


def _send(fd: int, grade: MathGrade) -> None:
    _write_all(fd, framing.encode_frame(grade.model_dump()))


def _read_request(fd: int) -> dict | None:
    """The next request, or None when the parent closed the pipe (or sent an oversized frame)."""
    hdr = _read_exact(fd, framing.HEADER.size)
    if hdr is None:
        return None
    try:
        n = framing.body_size(hdr, MAX_MSG)
        raw = _read_exact(fd, n)
        return None if raw is None else framing.decode_body(raw)
    except framing.FrameError:
        return None


def _set_memory_cap(limit: int) -> None:
    try:
        resource.setrlimit(resource.RLIMIT_AS, (limit, resource.RLIM_INFINITY))
    except (ValueError, OSError):
        pass


def _serve_one(req: dict, baseline: int) -> MathGrade:
    """One check under the request's memory cap and a soft timer at 85% of its time limit."""
    from .grade import grade

    try:
        options = MathOptions.model_validate(req.get("options") or {})  # the worker side of the boundary
    except ValueError:
        return MathGrade.failed("parse_error", "invalid options")
    _set_memory_cap(max(options.memory_mb * 1024 * 1024, baseline + 256 * 1024 * 1024))
    try:
        signal.setitimer(signal.ITIMER_REAL, max(0.05, options.timeout_s * 0.85))
        try:
            return grade(req.get("completion", ""), req.get("answer", ""), options)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    except _SoftTimeout:
        return MathGrade.failed("timeout", "soft time limit", options.timeout_s)
    finally:
        _set_memory_cap(resource.RLIM_INFINITY)


def _on_alarm(signum, frame) -> None:
    raise _SoftTimeout()


def main() -> None:
    """Serve checks until the parent closes the pipe. Stray prints go to stderr, never into the protocol."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    proto_in = os.dup(0)
    proto_out = os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(2, 1)

    from .grade import check

    check("1", "1", {})  # warm caches (SymPy's first calls are slow)
    check("\\boxed{\\frac{1}{2}}", "0.5", {})
    baseline = _vm_bytes()
    signal.signal(signal.SIGALRM, _on_alarm)
    _write_all(proto_out, framing.encode_frame("r"))
    while (req := _read_request(proto_in)) is not None:
        _send(proto_out, _serve_one(req, baseline))


if __name__ == "__main__":
    sys.setrecursionlimit(5000)
    main()
