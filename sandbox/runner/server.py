"""The runner's main process: a warm interpreter that forks one supervisor per connection.

It never reads a job itself, so every process forked from it (and from the spawners it
forks) starts from a state that holds no test data.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import selectors
import signal
import socket
import sys

from . import framing, limits

# Modules candidates commonly import: loaded once here so a job pays a fork, not an import.
# Not random (nor statistics, which imports it): its at-fork handler reseeds in every forked
# candidate, ~40 page copies and ~0.15 ms per job, more than the import costs the few
# programs that use it. Nothing here may import threading either (its at-fork handler costs
# ~0.7 ms per fork); a test checks both.
PRELOAD = (
    "math", "re", "collections", "itertools", "functools", "heapq", "bisect", "string", "json",
    "fractions", "decimal", "operator", "copy", "typing", "datetime",
    "dataclasses", "enum", "array", "cmath", "traceback", "hashlib", "textwrap", "unicodedata",
)


def preload() -> None:
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - a missing optional module is fine
            pass
    from . import candidate, supervisor, verdict  # noqa: F401

    # Everything loaded so far lives in every forked process: keep the collector off it, so
    # a child's collections do not touch (and copy) the whole inherited heap.
    gc.collect()
    gc.freeze()


def serve(socket_path: str, *, slots: int, uid_base: int, scratch_base: str, hide_prefix: str = "\0") -> None:
    limits.set_process_name("vr-runner")
    limits.allowed_cpus()  # before any job pins a process: what "unpinned" means for all of them
    preload()
    sys.dont_write_bytecode = True
    os.makedirs(scratch_base, mode=0o711, exist_ok=True)
    os.chmod(scratch_base, 0o711)
    try:
        os.unlink(socket_path)
    except FileNotFoundError:
        pass
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o077)
    srv.bind(socket_path)
    os.umask(old)
    srv.listen(256)
    cfg = {"uid_base": uid_base, "scratch_base": scratch_base, "hide_prefix": hide_prefix}
    free = list(range(slots))
    children: dict[int, int] = {}

    rfd, wfd = os.pipe()
    os.set_blocking(rfd, False)
    os.set_blocking(wfd, False)
    signal.set_wakeup_fd(wfd)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    sel = selectors.DefaultSelector()
    sel.register(srv, selectors.EVENT_READ, "accept")
    sel.register(rfd, selectors.EVENT_READ, "chld")
    print(f"runner ready on {socket_path} slots={slots} uid_switch={limits.can_switch_uid()}", flush=True)
    try:
        while True:
            for key, _ in sel.select(1.0):
                if key.data == "chld":
                    try:
                        os.read(rfd, 4096)
                    except BlockingIOError:
                        pass
                    continue
                try:
                    conn, _ = srv.accept()
                except (BlockingIOError, InterruptedError):
                    continue
                _reap(children, free)
                if not free:
                    framing.send_frame(conn, {"event": "infra_error", "message": "runner has no free slot"})
                    conn.close()
                    continue
                slot = free.pop(0)
                pid = os.fork()
                if pid == 0:
                    _child(conn, srv, sel, rfd, wfd, slot, cfg)
                conn.close()
                children[pid] = slot
            _reap(children, free)
    finally:
        for pid in children:
            limits.kill_group(pid)


def _child(conn, srv, sel, rfd, wfd, slot: int, cfg: dict) -> None:
    code = 0
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        sel.close()
        srv.close()
        os.close(rfd)
        os.close(wfd)
        os.setpgid(0, 0)
        limits.set_process_name(f"vr-super-{slot}")
        from .supervisor import Supervisor

        Supervisor(conn, slot, cfg).serve()
    except BaseException:  # noqa: BLE001
        import traceback

        traceback.print_exc()
        code = 1
    os._exit(code)


def _reap(children: dict[int, int], free: list[int]) -> None:
    for pid, _status in limits.exited_children():
        slot = children.pop(pid, None)
        if slot is not None:
            free.append(slot)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m sandbox.runner", description=__doc__)
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--socket", help="unix socket path to listen on")
    where.add_argument("--socket-dir", help="listen on DIR/<hostname>.sock (replicas sharing one volume)")
    p.add_argument("--slots", type=int, default=8, help="connections (jobs) served at once")
    p.add_argument("--uid-base", default="20000",
                   help="first uid for job processes (2 per slot), or 'auto': lease a block no other runner on "
                        "the machine uses (sandbox.runner.uidlease; replicas must share its lease directory)")
    p.add_argument("--scratch", default="/tmp/sbx", help="directory for per-job scratch directories")
    p.add_argument("--hide-prefix", default="\0", help="sys.path entries to drop in candidates")
    a = p.parse_args(argv)
    path = a.socket or os.path.join(a.socket_dir, f"{socket.gethostname()}.sock")
    lease = None
    if a.uid_base == "auto":
        from . import uidlease

        lease = uidlease.lease(a.slots)  # held (the lock open) for as long as we serve
    uid_base = lease.base if lease else int(a.uid_base)
    serve(path, slots=a.slots, uid_base=uid_base, scratch_base=a.scratch, hide_prefix=a.hide_prefix)
