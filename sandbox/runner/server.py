"""The runner's main process: a warm interpreter that hands each connection to a supervisor.

Each slot has a keeper forked at start-up (`sandbox.runner.slotns`: a /dev/shm of the slot's
own), which forks one supervisor per connection the main process passes it.

It never reads a job itself, so every process forked from it (and from the spawners it
forks) starts from a state that holds no test data.
"""

from __future__ import annotations

import argparse
import functools
import gc
import importlib
import os
import selectors
import signal
import socket
import sys

from . import cleanup, cpus, framing, limits, slotns

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


def session_socket(socket_path: str) -> str:
    """Where a runner serving sessions listens for them: beside its job socket. A connection
    there gets a session slot (its own uid, scratch, /dev/shm), never a job slot."""
    return socket_path + ".sessions"


def _listen(path: str) -> socket.socket:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o077)
    srv.bind(path)
    os.umask(old)
    srv.listen(256)
    return srv


def serve(socket_path: str, *, slots: int, uid_base: int, scratch_base: str, hide_prefix: str = "\0",
          slot_shm: slotns.ShmSpec | None = None, session_slots: int = 0) -> None:
    limits.set_process_name("vr-runner")
    cpus.allowed_cpus()  # before any job pins a process: what "unpinned" means for all of them
    preload()
    sys.dont_write_bytecode = True
    os.makedirs(scratch_base, mode=0o711, exist_ok=True)
    os.chmod(scratch_base, 0o711)
    cfg = {"uid_base": uid_base, "scratch_base": scratch_base, "hide_prefix": hide_prefix, "job_slots": slots}
    # one keeper per slot (a /dev/shm of the slot's own when `slot_shm` is given), forked
    # before the socket exists; the supervisors are forked from them. Session slots come after
    # the job slots (slot k: uids uid_base + 2k, scratch s<k>), served on a socket of their own.
    keepers = slotns.start_keepers(slots + session_slots, slot_shm, functools.partial(_child, cfg=cfg))
    slotns.drop_sys_admin()  # only the keepers needed it, once: no runner process keeps it
    srv = _listen(socket_path)
    free = list(range(slots))
    ssrv = _listen(session_socket(socket_path)) if session_slots else None
    free_sessions = list(range(slots, slots + session_slots))

    rfd, wfd = os.pipe()
    os.set_blocking(rfd, False)
    os.set_blocking(wfd, False)
    signal.set_wakeup_fd(wfd)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    sel = selectors.DefaultSelector()
    sel.register(srv, selectors.EVENT_READ, "accept")
    if ssrv is not None:
        sel.register(ssrv, selectors.EVENT_READ, "session")
    sel.register(rfd, selectors.EVENT_READ, "chld")
    for k in keepers:
        sel.register(k.sock, selectors.EVENT_READ, k)
    print(f"runner ready on {socket_path} slots={slots} session_slots={session_slots} uid_switch={limits.can_switch_uid()} "
          f"slot_shm={slot_shm.arg() if slot_shm else 'shared'}", flush=True)
    try:
        while True:
            for key, _ in sel.select(1.0):
                if key.data == "chld":
                    try:
                        os.read(rfd, 4096)
                    except BlockingIOError:
                        pass
                    # as pid 1 (a container) orphans are ours to reap too
                    if {pid for pid, _status in cleanup.exited_children()} & {k.pid for k in keepers}:
                        raise SystemExit("runner: a slot keeper died")
                    continue
                if isinstance(key.data, slotns.Keeper):
                    note = key.data.sock.recv(16)
                    if not note:
                        raise SystemExit(f"runner: the keeper of slot {key.data.slot} died")
                    if note == b"F":
                        (free if key.data.slot < slots else free_sessions).append(key.data.slot)
                    continue
                pool = free_sessions if key.data == "session" else free
                try:
                    conn, _ = (ssrv if key.data == "session" else srv).accept()
                except (BlockingIOError, InterruptedError):
                    continue
                if not pool:
                    framing.send_frame(conn, {"event": "infra_error", "message": "runner has no free slot"})
                    conn.close()
                    continue
                slot = pool.pop(0)
                keepers[slot].hand(conn)
                conn.close()
    finally:
        for k in keepers:
            k.sock.close()  # each keeper then kills its supervisor's group and ends


def _child(conn: socket.socket, slot: int, cfg: dict) -> None:
    """A connection's supervisor, in a fresh child of the slot's keeper."""
    code = 0
    try:
        os.setpgid(0, 0)
        limits.set_process_name(f"vr-super-{slot}")
        from .supervisor import Supervisor

        Supervisor(conn, slot, cfg).serve()
    except BaseException:  # noqa: BLE001
        import traceback

        traceback.print_exc()
        code = 1
    os._exit(code)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m sandbox.runner", description=__doc__)
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--socket", help="unix socket path to listen on")
    where.add_argument("--socket-dir", help="listen on DIR/<hostname>.sock (replicas sharing one volume)")
    p.add_argument("--slots", type=int, default=8, help="connections (jobs) served at once")
    p.add_argument("--session-slots", type=int, default=0,
                   help="sessions served at once, on SOCKET.sessions, each in a slot of its own after the job slots")
    p.add_argument("--uid-base", default="20000",
                   help="first uid for job processes (2 per slot), or 'auto': lease a block no other runner on "
                        "the machine uses (sandbox.runner.uidlease; replicas must share its lease directory)")
    p.add_argument("--scratch", default="/tmp/sbx", help="directory for per-job scratch directories")
    p.add_argument("--hide-prefix", default="\0", help="sys.path entries to drop in candidates")
    p.add_argument("--slot-shm", metavar="MB,INODES", type=slotns.ShmSpec.parse, default=None,
                   help="give each slot a /dev/shm of its own with these bounds (needs CAP_SYS_ADMIN at start-up, "
                        "dropped before the socket exists; sandbox.runner.slotns); default: one shared /dev/shm")
    a = p.parse_args(argv)
    path = a.socket or os.path.join(a.socket_dir, f"{socket.gethostname()}.sock")
    lease = None
    if a.uid_base == "auto":
        from . import uidlease

        lease = uidlease.lease(a.slots + a.session_slots)  # held (the lock open) for as long as we serve
    uid_base = lease.base if lease else int(a.uid_base)
    serve(path, slots=a.slots, uid_base=uid_base, scratch_base=a.scratch, hide_prefix=a.hide_prefix,
          slot_shm=a.slot_shm, session_slots=a.session_slots)
