"""The spawner: a pristine process, forked before any job is read, that forks candidates.

Because it has never held a job, a candidate forked from it cannot find tests or expected
values anywhere in its own memory. It also reaps its children and reports how each ended
(exit code or signal), which the supervisor cannot see for processes that are not its own.
"""

from __future__ import annotations

import array
import fcntl
import gc
import json
import os
import selectors
import signal
import socket

from . import candidate, limits

F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)
PIPE_BYTES = 4096


def fork_spawner() -> tuple[int, socket.socket]:
    """Fork the spawner; returns (pid, the supervisor's end of a SEQPACKET socket)."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    pid = os.fork()
    if pid == 0:
        ours.close()
        code = 0
        try:
            limits.set_process_name("vr-spawner")
            _serve(theirs)
        except BaseException:  # noqa: BLE001
            code = 1
        os._exit(code)
    theirs.close()
    return pid, ours


def _serve(sock: socket.socket) -> None:
    candidate.prepare_template()
    gc.collect()
    gc.freeze()
    rfd, wfd = os.pipe()
    os.set_blocking(wfd, False)
    os.set_blocking(rfd, False)
    signal.set_wakeup_fd(wfd)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    sel = selectors.DefaultSelector()
    sel.register(sock, selectors.EVENT_READ, "req")
    sel.register(rfd, selectors.EVENT_READ, "chld")
    while True:
        for key, _ in sel.select():
            if key.data == "chld":
                try:
                    os.read(rfd, 4096)
                except BlockingIOError:
                    pass
                _reap(sock)
                continue
            data = sock.recv(4096)
            if not data:
                return
            req = json.loads(data)
            if req.get("op") == "spawn":
                _spawn(sock, sel, rfd, wfd)
        _reap(sock)


def _reap(sock: socket.socket) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        note = {"exited": pid}
        if os.WIFSIGNALED(status):
            note["signal"] = os.WTERMSIG(status)
        else:
            note["code"] = os.WEXITSTATUS(status)
        sock.send(json.dumps(note).encode())


def _spawn(sock: socket.socket, sel: selectors.BaseSelector, rfd: int, wfd: int) -> None:
    ctrl_parent, ctrl_child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    for fd in (out_w, err_w):
        # output is charged to the test running when the supervisor reads it; a small pipe
        # keeps what a test can leave unread, to be charged to the next test, small
        try:
            fcntl.fcntl(fd, F_SETPIPE_SZ, PIPE_BYTES)
        except OSError:
            pass
    pid = os.fork()
    if pid == 0:
        # as little Python as possible here: every object touched is a page copied from the
        # spawner; candidate.main closes every other descriptor in one call
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        limits.set_process_name("vr-candidate")
        candidate.main(ctrl_child, in_r, out_w, err_w)
        os._exit(0)  # pragma: no cover
    ctrl_child.close()
    for fd in (in_r, out_w, err_w):
        os.close(fd)
    fds = [ctrl_parent.fileno(), in_w, out_r, err_r]
    sock.sendmsg(
        [json.dumps({"spawned": pid}).encode()],
        [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))],
    )
    ctrl_parent.close()
    for fd in (in_w, out_r, err_r):
        os.close(fd)
