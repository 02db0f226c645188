"""The math worker process: ``python -m reward_server.grading.math.worker``.

Speaks length-prefixed JSON over stdin/stdout: a request is
``{"completion": str, "answer": str, "options": {...}}``, the reply is the dict that
``compare.check`` returns. SymPy is imported once, before the first request. Each request
runs under a soft timer (SIGALRM, the worker's own main thread) and an address-space cap
(RLIMIT_AS); the parent kills the whole process if the hard limit passes anyway.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import struct
import sys

_HDR = struct.Struct("!I")
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


def _write(fd: int, obj) -> None:
    data = json.dumps(obj).encode()
    os.write(fd, _HDR.pack(len(data)) + data) if len(data) < 65536 else _write_all(fd, _HDR.pack(len(data)) + data)


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


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    proto_in = os.dup(0)
    proto_out = os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(2, 1)  # stray prints go to stderr, never into the protocol

    from .compare import check

    check("1", "1", {})  # warm caches (SymPy's first calls are slow)
    check("\\boxed{\\frac{1}{2}}", "0.5", {})
    baseline = _vm_bytes()

    def on_alarm(signum, frame):
        raise _SoftTimeout()

    signal.signal(signal.SIGALRM, on_alarm)
    _write_all(proto_out, _HDR.pack(3) + b'"r"')
    while True:
        hdr = _read_exact(proto_in, _HDR.size)
        if hdr is None:
            return
        (n,) = _HDR.unpack(hdr)
        if n > MAX_MSG:
            return
        raw = _read_exact(proto_in, n)
        if raw is None:
            return
        req = json.loads(raw)
        opts = req.get("options") or {}
        timeout = float(opts.get("timeout_s", 2.0))
        mem = int(opts.get("memory_mb", 512)) * 1024 * 1024
        try:
            resource.setrlimit(resource.RLIMIT_AS, (max(mem, baseline + 256 * 1024 * 1024), resource.RLIM_INFINITY))
        except (ValueError, OSError):
            pass
        try:
            signal.setitimer(signal.ITIMER_REAL, max(0.05, timeout * 0.85))
            try:
                res = check(req.get("completion", ""), req.get("answer", ""), opts)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
        except _SoftTimeout:
            res = {"reward": 0.0, "status": "timeout", "reason": "soft time limit", "extracted": None,
                   "parsed_pred": None, "parsed_ref": None, "time_s": timeout}
        except MemoryError:
            res = {"reward": 0.0, "status": "too_large", "reason": "memory cap", "extracted": None,
                   "parsed_pred": None, "parsed_ref": None, "time_s": 0.0}
        except RecursionError:
            res = {"reward": 0.0, "status": "too_large", "reason": "recursion limit", "extracted": None,
                   "parsed_pred": None, "parsed_ref": None, "time_s": 0.0}
        except Exception as e:  # noqa: BLE001
            res = {"reward": 0.0, "status": "parse_error", "reason": f"{type(e).__name__}"[:100],
                   "extracted": None, "parsed_pred": None, "parsed_ref": None, "time_s": 0.0}
        try:
            resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        except (ValueError, OSError):
            pass
        _write_all(proto_out, _HDR.pack(len(data := json.dumps(res).encode())) + data)


if __name__ == "__main__":
    sys.setrecursionlimit(5000)
    main()
