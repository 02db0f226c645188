"""The spawner: a pristine process, forked before any job is read, that forks candidates.

Because it has never held a job, a candidate forked from it cannot find tests or expected
values anywhere in its own memory. It also reaps its children and reports how each ended
(exit code or signal), which the supervisor cannot see for processes that are not its own.

Each candidate is forked while the previous one may still be alive, so every page the
spawner writes between forks is copied, and every object a new candidate touches before it
runs the program is a page copied too. Hence the small loop: a raw epoll, one pidfd per child
instead of a SIGCHLD handler (the child then has no signal state to undo), and messages of a
few bytes instead of JSON.

Messages to the supervisor (SEQPACKET): b"S<pid>" with four descriptors (control socket,
stdin, stdout, stderr) for a new candidate; b"X<pid> <code> <signal>" when a child ended.
"""

from __future__ import annotations

import array
import fcntl
import gc
import os
import select
import signal
import socket

from . import candidate, cgroup, cleanup, limits, seccomp

F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)
PIPE_BYTES = 4096
SPAWN = b"spawn"


def fork_spawner(scratch: str | None = None, hide_prefix: str = "\0", warm: bool = True) -> tuple[int, socket.socket]:
    """Fork the spawner; returns (pid, the supervisor's end of a SEQPACKET socket). Its
    candidates start with HOME, TMPDIR and sys.path set to `scratch`, the one scratch path
    their jobs will use. `warm`: run the function-call path once first (candidate.warm_up), for
    spawners that fork many candidates; a session slot's forks one."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    pid = os.fork()
    if pid == 0:
        ours.close()
        code = 0
        try:
            limits.set_process_name("vr-spawner")
            _Spawner(theirs, scratch, hide_prefix, warm).serve()
        except BaseException:  # noqa: BLE001
            code = 1
        os._exit(code)
    theirs.close()
    return pid, ours


def parse_note(data: bytes) -> tuple[str, int, int, int]:
    """("spawned", pid, 0, 0) or ("exited", pid, exit code, signal); ValueError otherwise."""
    kind, rest = data[:1], data[1:]
    if kind == b"S":
        return "spawned", int(rest), 0, 0
    if kind == b"X":
        pid, code, sig = (int(x) for x in rest.split())
        return "exited", pid, code, sig
    raise ValueError(f"unknown spawner note {data[:20]!r}")


def _pidfd_open(pid: int) -> int:
    """A descriptor that becomes readable when `pid` exits; -1 where the kernel (or a
    seccomp profile) has no pidfd_open."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return -1


class _Spawner:
    def __init__(self, sock: socket.socket, scratch: str | None, hide_prefix: str, warm: bool = True) -> None:
        self.sock = sock
        self.warm = warm
        self.scratch = scratch
        self.hide_prefix = hide_prefix
        self.fd = sock.fileno()
        self.ep = select.epoll()
        self.ep.register(self.fd, select.EPOLLIN)
        self.by_pidfd: dict[int, int] = {}
        self.wake_r = -1

    def serve(self) -> None:
        candidate.prepare_template(self.scratch, self.hide_prefix)
        if limits.can_switch_uid():
            seccomp.drop_bounding_set()  # no candidate can regain a capability, whatever it runs
            cgroup.join_job_cgroup(self.scratch)
        # Locked here, once, not in each candidate (compiling the filter costs a fork's worth):
        # every candidate inherits the filter, which cannot be undone, and the spawner needs
        # none of what it refuses. Each candidate enters a Landlock domain of its own at fork.
        seccomp.enter()
        writable = [os.path.dirname(self.scratch)] if self.scratch else ["/"]
        seccomp.make_ruleset([*writable, "/dev", cgroup.JOB_CGROUP_DIR])
        if self.warm:
            candidate.warm_up()  # every candidate inherits the call path's code warm (candidate.warm_up)
        gc.collect()
        gc.freeze()
        probe = _pidfd_open(os.getpid())
        if probe >= 0:
            os.close(probe)
        else:
            self._use_sigchld()
        recv, poll, spawn, fd = self.sock.recv, self.ep.poll, self.spawn, self.fd
        while True:
            for ready, _ in poll():
                if ready == fd:
                    data = recv(64)
                    if not data:
                        return
                    if data == SPAWN:
                        spawn()
                elif ready == self.wake_r:
                    try:
                        os.read(ready, 4096)
                    except BlockingIOError:
                        pass
                    self.reap_all()
                else:
                    self.reap(ready)

    def _use_sigchld(self) -> None:
        """Fallback without pidfds: a SIGCHLD handler that only wakes the loop."""
        self.wake_r, wfd = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(wfd, False)
        signal.set_wakeup_fd(wfd)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        self.ep.register(self.wake_r, select.EPOLLIN)

    def note_exit(self, pid: int, status: int) -> None:
        if os.WIFSIGNALED(status):
            msg = b"X%d 0 %d" % (pid, os.WTERMSIG(status))
        else:
            msg = b"X%d %d 0" % (pid, os.WEXITSTATUS(status))
        self.sock.send(msg)

    def reap(self, pidfd: int) -> None:
        pid = self.by_pidfd.pop(pidfd)
        self.ep.unregister(pidfd)
        os.close(pidfd)
        try:
            _, status = os.waitpid(pid, 0)
        except ChildProcessError:
            return
        self.note_exit(pid, status)

    def reap_all(self) -> None:
        for pid, status in cleanup.exited_children():
            self.note_exit(pid, status)

    def spawn(self) -> None:
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
            # as little Python as possible: every object touched here is a page copied
            if self.wake_r >= 0:
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            limits.set_process_name("vr-candidate")
            cgroup.oom_kill_me_first()  # before the Landlock domain, which keeps it from undoing it
            seccomp.restrict()
            candidate.main(ctrl_child, in_r, out_w, err_w)  # closes every other descriptor
            os._exit(0)  # pragma: no cover
        if self.wake_r < 0:
            pidfd = _pidfd_open(pid)
            if pidfd >= 0:
                self.by_pidfd[pidfd] = pid
                self.ep.register(pidfd, select.EPOLLIN)
            else:  # out of descriptors: fall back to the signal for good
                self._use_sigchld()
        ctrl_child.close()
        os.close(in_r)
        os.close(out_w)
        os.close(err_w)
        self.sock.sendmsg(
            [b"S%d" % pid],
            [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", (ctrl_parent.fileno(), in_w, out_r, err_r)))],
        )
        ctrl_parent.close()
        os.close(in_w)
        os.close(out_r)
        os.close(err_r)
