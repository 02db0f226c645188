"""A connection's processes and their plumbing: spawner, candidates, verdict process, output meter.

One `Children` per supervisor: it owns the epoll, the spawner's notes (the kernel's exit
status of each candidate, the only one the supervisor believes), the verdict process, and the
candidates of the job that runs now. It reads every descriptor a candidate holds: output is
charged to the job's `OutputMeter` (kept only up to the job's caps), control-channel bytes go
through the candidate's `protocol.ControlChannel` (kept only up to one allowed frame). Jobs
(relay.py, script.py) drive it; per-job state lives on the job, not here.
"""

from __future__ import annotations

import collections
import gc
import os
import select
import signal
import socket
import time
from collections.abc import Callable
from typing import Any

from . import cleanup, cpus, flags, framing, limits, spawner, verdict
from .progress import Progress
from .protocol import ControlChannel, Violation

READ, WRITE = select.EPOLLIN, select.EPOLLOUT
GRACE_S = 1.0
READ_BYTES = 1 << 16
VERDICT_JOBS = 1000  # jobs one verdict process serves before a fresh one replaces it
VERDICT_MIN_MB = 2048
KEEP_BYTES = 4096  # output kept per stream of a function run (the tests' messages say the rest)
PEEK_NOW = int(socket.MSG_PEEK | socket.MSG_DONTWAIT)  # a plain int: OR-ing the flag enums costs ~1.3 us a call
KEEP_MAX = 16 << 20  # output kept per stream and job, whatever the caps (script.fit_frame keeps the answer one frame)


class InfraFailure(Exception):
    """Something of ours broke (spawner gone, fork failed): not the candidate's fault."""


class ClientGone(Exception):
    """The client hung up during a job (its request was cancelled): nobody reads the verdict."""


class Candidate:
    """One candidate process and the descriptors we hold to it."""

    def __init__(self, pid: int, ctrl: socket.socket | None, stdin_w: int, stdout_r: int, stderr_r: int,
                 mode: str, meter: OutputMeter) -> None:
        self.pid = pid
        self.meter = meter  # its job's: what it writes is charged there
        self.ctrl = ctrl
        self.stdin_w = stdin_w
        self.stdout_r = stdout_r
        self.stderr_r = stderr_r
        self.channel = ControlChannel(mode)
        self.violation: Violation | None = None
        self.eof = False  # its control channel: closed, broken, or no longer ours to read
        self.open_pipes = 2
        self.pending_stdin = b""
        self.killed = False


class VerdictProc:
    """The connection's verdict process (trusted: it runs only test code)."""

    def __init__(self, pid: int, sock: socket.socket, memory_mb: int) -> None:
        self.pid = pid
        self.sock = sock
        self.memory_mb = memory_mb
        self.jobs = 0
        self.busy = False
        self.reader = framing.FrameReader()
        self.frames: collections.deque = collections.deque()
        self.eof = False


class OutputMeter:
    """A job's stdout and stderr: counted per test against the output cap, kept up to the
    keep cap, and stdout passed as it arrives to `sink` where a job compares it as a stream
    (stdio tests: the supervisor never holds more of it than the comparison needs). Made per
    job; the pipes' reader charges it."""

    def __init__(self, limit: int, keep: int) -> None:
        self.limit = limit
        self.keep = min(keep, KEEP_MAX)
        self.kept = {"stdout": bytearray(), "stderr": bytearray()}
        self.sink: Callable[[bytes], None] | None = None
        self.truncated = False
        self.over_limit = False
        self.unit_out = 0
        self.unit_index = -1  # the test the output is charged to

    def start_unit(self, index: int = -1) -> None:
        self.unit_out = 0
        self.unit_index = index
        self.over_limit = False

    def charge(self, stream: str, data: bytes, index: int | None) -> None:
        if index is not None and index >= 0 and index != self.unit_index:
            self.unit_index, self.unit_out = index, 0  # the cap is per test: a new test counts afresh
        self.unit_out += len(data)
        if self.sink is not None and stream == "stdout" and not self.over_limit:
            self.sink(data[: max(0, self.limit - self.unit_out + len(data))])  # only what is within the cap
        kept = self.kept[stream]
        room = self.keep - len(kept)
        if room > 0:
            kept += data[:room]
        if len(data) > max(room, 0):
            self.truncated = True
        if self.unit_out > self.limit:
            self.over_limit = True


class _Watch:
    """The descriptors we wait on, each with what it is. A thin epoll: selectors formats an
    error message (repr of the socket) for every unregister of something not registered,
    which cleanup does for several descriptors per job."""

    def __init__(self) -> None:
        self.ep = select.epoll()
        self.data: dict[int, tuple[str, Any]] = {}

    def register(self, f: Any, events: int, data: tuple[str, Any]) -> None:
        fd = f if isinstance(f, int) else f.fileno()
        self.ep.register(fd, events)
        self.data[fd] = data

    def unregister(self, f: Any) -> None:
        fd = f if isinstance(f, int) else f.fileno()
        if self.data.pop(fd, None) is not None:
            try:
                self.ep.unregister(fd)
            except OSError:  # closed since: the kernel dropped it already
                pass

    def select(self, timeout: float) -> list[tuple[int, str, Any]]:
        out = []
        for fd, _events in self.ep.poll(timeout):
            data = self.data.get(fd)
            if data is not None:
                out.append((fd, data[0], data[1]))
        return out


def _nonblocking(sock: socket.socket) -> None:
    """Back to what the event loop needs, without the ioctl when it is so already."""
    if sock.gettimeout() != 0.0:
        sock.setblocking(False)


def exit_reason(note: dict) -> tuple[str, str]:
    """(status, message) for how a candidate process ended, from the spawner's exit note."""
    sig = note.get("signal")
    if sig == signal.SIGXCPU:
        return "timeout", "CPU time limit exceeded"
    if sig == signal.SIGKILL:
        return "memory", "killed by SIGKILL (most likely out of memory)"
    if sig:
        return "error", f"killed by signal {signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else sig}"
    return "error", f"process exited with code {note.get('code')}"


# signals a limit or a real crash sends; any other one (or an exit code) during a call is the
# candidate ending itself
_CRASH_SIGNALS = frozenset({signal.SIGKILL, signal.SIGXCPU, signal.SIGXFSZ, signal.SIGSEGV, signal.SIGBUS,
                            signal.SIGABRT, signal.SIGFPE, signal.SIGILL})


def ended_itself(note: dict | None) -> bool:
    return note is not None and note.get("signal") not in _CRASH_SIGNALS


class Children:
    def __init__(self, cfg: dict, slot: int) -> None:
        self.cfg = cfg
        self.slot = slot
        self.c_uid = cfg["uid_base"] + 2 * slot
        self.v_uid = self.c_uid + 1
        self.sel = _Watch()
        # one scratch path per slot, made afresh for each job: the spawner sets HOME, TMPDIR
        # and sys.path to it once, instead of every candidate doing it
        self.scratch = os.path.join(cfg["scratch_base"], f"s{slot}")
        # a session slot's spawner forks one candidate per connection: no warm-up of the call path
        session = slot >= int(cfg.get("job_slots", 1 << 30))
        self.spawner_pid, self.p_sock = spawner.fork_spawner(self.scratch, cfg.get("hide_prefix", "\0"),
                                                             warm=not session)
        self.p_sock.setblocking(False)
        self.sel.register(self.p_sock, READ, ("p", None))
        self.exits: dict[int, dict] = {}  # pid -> the kernel's word on how it ended
        self.dying: list[int] = []  # this job's candidates, killed, not yet reported reaped
        self._spawned: list = []
        self.spawn_pending = False
        self.v: VerdictProc | None = None
        # made after the spawner was forked, so no candidate process ever maps this page
        self.progress = Progress()
        self.cpu: int | None = None  # the CPU this job's processes keep to, if the client gave one
        self._client: socket.socket | None = None
        self.pinned_ever = False

    # ------------------------------------------------------------------ events
    def pump(self, timeout: float) -> None:
        for fd, kind, obj in self.sel.select(max(0.0, timeout)):
            if kind == "p":
                self._read_spawner()
            elif kind == "cctrl":
                self._read_control(obj)
            elif kind in ("cout", "cerr"):
                self._read_output(obj, fd, "stdout" if kind == "cout" else "stderr")
            elif kind == "cin":
                self._write_stdin(obj)
            elif kind == "v":
                self._read_verdict(obj)
            elif kind == "client":
                self._client_readable(obj)
            elif kind == "call":  # a descriptor a job reads itself (launcher.Launcher)
                obj()

    def watch_client(self, conn: socket.socket | None) -> None:
        """While a job runs, notice its client hanging up (it sends nothing until the answer);
        None stops watching (between jobs the supervisor reads the connection itself)."""
        if conn is None:
            if self._client is not None:
                self.sel.unregister(self._client)
                self._client = None
            return
        self._client = conn
        self.sel.register(conn, READ, ("client", conn))

    def _client_readable(self, conn: socket.socket) -> None:
        try:
            gone = not conn.recv(1, PEEK_NOW)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            gone = True
        self.watch_client(None)  # a frame it sent early is read after the job; stop polling it
        if gone:
            raise ClientGone("client hung up")

    def _read_spawner(self) -> None:
        while True:
            try:
                data, fds, _flags, _addr = socket.recv_fds(self.p_sock, 4096, 8)
            except (BlockingIOError, InterruptedError):
                return
            if not data:
                raise InfraFailure("spawner exited")
            try:
                kind, pid, code, sig = spawner.parse_note(data)
            except ValueError:
                kind, pid, code, sig = "", 0, 0, 0
            if kind == "exited":
                self.exits[pid] = {"code": code, "signal": sig}
            elif kind == "spawned":
                self._spawned.append((pid, fds))
            else:
                for fd in fds:
                    os.close(fd)

    def _read_control(self, c: Candidate) -> None:
        try:
            data = c.ctrl.recv(READ_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            c.eof = True
            self.sel.unregister(c.ctrl)
            return
        try:
            c.channel.feed(data)
        except Violation as v:
            self.violated(c, v)

    def violated(self, c: Candidate, v: Violation) -> None:
        """The candidate broke the protocol: it ends now; its job reads `c.violation`."""
        if c.violation is None:
            c.violation = v
        self.kill_candidate(c)

    def _read_verdict(self, v: VerdictProc) -> None:
        try:
            data = v.sock.recv(READ_BYTES)  # a 1 MiB request costs a 1 MiB allocation per read
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            v.eof = True
            self.sel.unregister(v.sock)
            return
        try:
            v.frames.extend(v.reader.feed(data))
        except framing.FrameError:
            v.eof = True
            self.sel.unregister(v.sock)

    def _read_output(self, c: Candidate, fd: int, stream: str) -> None:
        try:
            data = os.read(fd, READ_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self.sel.unregister(fd)
            c.open_pipes -= 1
            return
        # the output limit is per test: charge this output to the test running now
        index = self.progress.current()[0] if self.v is not None and self.v.busy else None
        c.meter.charge(stream, data, index)

    def _write_stdin(self, c: Candidate) -> None:
        try:
            n = os.write(c.stdin_w, c.pending_stdin[: 1 << 16])
            c.pending_stdin = c.pending_stdin[n:]
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            c.pending_stdin = b""
        if not c.pending_stdin:
            self.sel.unregister(c.stdin_w)
            close_fd(c, "stdin_w")

    # -------------------------------------------------------------- candidates
    def request_spawn(self) -> None:
        """Ask the spawner for a candidate process without waiting for it."""
        if self.spawn_pending:
            return
        try:
            self.p_sock.send(spawner.SPAWN)
        except OSError as exc:
            raise InfraFailure(f"spawner unreachable: {exc}") from None
        self.spawn_pending = True

    def take_candidate(self, mode: str, meter: OutputMeter) -> Candidate:
        """A fresh candidate (usually forked already, while the previous answer was read),
        its descriptors watched, its output charged to `meter` (its job's)."""
        self.request_spawn()
        deadline = time.monotonic() + 10
        while not self._spawned:
            if time.monotonic() > deadline:
                raise InfraFailure("spawner did not answer")
            self.pump(0.05)
        self.spawn_pending = False
        pid, fds = self._spawned.pop()
        if len(fds) != 4:
            raise InfraFailure("spawner sent a bad reply")
        ctrl = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, 0, fileno=fds[0])  # no probing syscalls
        ctrl.setblocking(False)
        c = Candidate(pid, ctrl, fds[1], fds[2], fds[3], mode, meter)
        for fd in fds[1:]:
            os.set_blocking(fd, False)
        self.sel.register(c.ctrl, READ, ("cctrl", c))
        self.sel.register(c.stdout_r, READ, ("cout", c))
        self.sel.register(c.stderr_r, READ, ("cerr", c))
        return c

    def kill_candidate(self, c: Candidate) -> None:
        if not c.killed:
            c.killed = True
            cleanup.kill_group(c.pid)
            if c.ctrl is not None:  # the spawner's child (a launched program: its launcher's, launcher.py)
                self.dying.append(c.pid)
        if c.ctrl is not None:
            self.sel.unregister(c.ctrl)
            try:
                c.ctrl.close()
            except OSError:
                pass
        for attr in ("stdin_w", "stdout_r", "stderr_r"):
            fd = getattr(c, attr)
            if fd >= 0:
                self.sel.unregister(fd)
                close_fd(c, attr)

    def send_candidate(self, c: Candidate, obj: dict) -> bool:
        try:
            framing.send_frame(c.ctrl, obj, timeout=GRACE_S)
            return True
        except (OSError, TimeoutError):
            return False
        finally:
            _nonblocking(c.ctrl)

    def wait_settled(self, c: Candidate, deadline: float) -> bool:
        """Until the candidate's loader said all it may (True), or it died, hung, broke the
        protocol or a limit (False)."""
        while not c.channel.settled:
            if c.eof or c.killed or c.meter.over_limit or time.monotonic() >= deadline:
                return False
            self.pump(deadline - time.monotonic())
        return True

    def unasked_bytes(self, c: Candidate) -> bool:
        """Whether the candidate wrote to its channel what nobody asked for (a peek, so the
        bytes stay where a reader would find them)."""
        if c.killed:
            return False
        try:
            return bool(c.ctrl.recv(1, PEEK_NOW))
        except (BlockingIOError, InterruptedError):
            return False
        except OSError:
            return False

    def death_status(self, c: Candidate, timed_out: bool) -> tuple[str, str]:
        """Why a candidate stopped answering, from what we did and what the kernel said."""
        if c.meter.over_limit:
            return "output_limit", f"output exceeded {c.meter.limit} bytes"
        if timed_out:
            return "timeout", "wall-clock limit exceeded"
        if c.violation is not None:
            return "protocol_error", f"candidate broke the runner protocol: {c.violation.why}"[:300]
        note = self.wait_exit(c.pid, 0.2)
        if note is None:
            return "error", "candidate process stopped answering"
        return exit_reason(note)

    def await_reaped(self, wait_s: float) -> None:
        """Wait (briefly) until the spawner reaped this job's killed candidates, so the uid
        scan that follows usually finds nothing and needs no second look."""
        deadline = time.monotonic() + wait_s
        for pid in self.dying:
            self.wait_exit(pid, deadline - time.monotonic())
        self.dying.clear()

    def wait_exit(self, pid: int, wait_s: float) -> dict | None:
        deadline = time.monotonic() + wait_s
        while pid not in self.exits and time.monotonic() < deadline:
            self.pump(deadline - time.monotonic())
        return self.exits.get(pid)  # kept: the cleanup waits on the same notes

    def load_message(self, c: Candidate, op: str, program: str, scratch: str, rl: limits.Rlimits) -> dict:
        """The candidate's first frame. Its resource limits are set from here (prlimit on a
        process that is still ours): every object a fresh candidate touches is a page it
        copies, so it does as little as it can itself. Sent along only where that failed."""
        msg = {"op": op, "program": program, "scratch": scratch, "uid": self.c_uid,
               "hide_prefix": self.cfg.get("hide_prefix", "\0")}
        try:
            rl.apply(pid=c.pid)
        except (OSError, ValueError):
            msg["limits"] = rl.to_message()
        if self.pinned_ever:  # it may have been forked while the spawner kept to another CPU
            cpus.pin_cpu(self.cpu, pid=c.pid)  # still ours: it drops its uid on this message
        return msg

    # ----------------------------------------------------------------- verdict
    def ensure_verdict(self, lim: dict) -> VerdictProc:
        """The connection's verdict process, forked on first use and kept across jobs;
        replaced after it died, after VERDICT_JOBS jobs, or when a job needs more memory."""
        want_mb = max(VERDICT_MIN_MB, 2 * int(lim["memory_mb"]))
        v = self.v
        # without uids of our own, candidates run as the verdict's uid and could tamper with
        # a long-lived one: then every job gets a fresh verdict process
        most = VERDICT_JOBS if limits.can_switch_uid() else 1
        if v and (v.eof or v.jobs >= most or v.memory_mb < want_mb):
            self.kill_verdict()
            v = None
        if v is None:
            v = self.v = self._fork_verdict(want_mb)
        v.jobs += 1
        return v

    def _fork_verdict(self, memory_mb: int) -> VerdictProc:
        ours, theirs = socket.socketpair()
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                gc.freeze()
                limits.set_process_name("vr-verdict")
                keep = theirs.fileno()
                os.closerange(3, keep)
                os.closerange(keep + 1, 65536)
                os.setsid()
                os.chdir("/")
                limits.Rlimits(memory_mb=memory_mb, nproc=4, fsize_mb=0, nofile=64, cpu_s=1 << 30).apply()
                limits.drop_privileges(self.v_uid)
                verdict.serve(theirs, self.progress)
            except BaseException:  # noqa: BLE001
                code = 1
            os._exit(code)
        theirs.close()
        ours.setblocking(False)
        v = VerdictProc(pid, ours, memory_mb)
        self.sel.register(ours, READ, ("v", v))
        return v

    def kill_verdict(self) -> None:
        v, self.v = self.v, None
        if not v:
            return
        cleanup.kill_group(v.pid)
        self.sel.unregister(v.sock)
        v.sock.close()
        try:
            os.waitpid(v.pid, 0)
        except ChildProcessError:
            pass

    def give_candidate(self, c: Candidate | None) -> None:
        """Pass a candidate's channel to the verdict process (SCM_RIGHTS) behind a marker
        byte, or the marker that says there is none. From then on the verdict process talks
        to the candidate; we only watch it."""
        if c is not None:
            self.sel.unregister(c.ctrl)
        self.progress.set_candidate(c.pid if c is not None else 0)  # whose CPU each test's clock reads
        v = self.v
        if not v or v.eof:
            return

        def send() -> int:
            if c is not None:
                return socket.send_fds(v.sock, [b"C"], [c.ctrl.fileno()])
            return v.sock.send(b"N")

        try:
            sent = 0
            if v.sock.gettimeout() == 0.0:  # one byte nearly always fits: no poll, no mode switch
                try:
                    sent = send()
                except BlockingIOError:
                    pass
            if not sent:
                v.sock.settimeout(GRACE_S)
                send()
        except OSError:
            v.eof = True
        finally:
            _nonblocking(v.sock)

    def send_verdict(self, obj: dict) -> None:
        v = self.v
        if not v or v.eof:
            return
        try:
            framing.send_frame(v.sock, obj, timeout=GRACE_S * 5)
        except (OSError, TimeoutError):
            v.eof = True
        finally:
            _nonblocking(v.sock)

    def skip_job(self) -> None:
        v = self.v
        if v and not v.eof:
            try:
                v.sock.send(b"S")
                v.busy = False
            except OSError:
                v.eof = True

    # ------------------------------------------------------------------- connection
    def keep_to(self, cpu: object) -> None:
        """Keep this connection's processes (us, the spawner, the verdict process, the job's
        candidates) on the CPU the client chose for this job, or let them all float."""
        want = cpu if type(cpu) is int and cpu in cpus.allowed_cpus() else None
        if want == self.cpu:
            return
        self.cpu = want
        self.pinned_ever = True
        cpus.pin_cpu(want)
        cpus.pin_cpu(want, pid=self.spawner_pid)

    def shutdown(self) -> None:
        for pid, fds in self._spawned:
            cleanup.kill_group(pid)
            for fd in fds:
                os.close(fd)
        self.kill_verdict()
        cleanup.kill_group(self.spawner_pid)
        cleanup.kill_uids({self.c_uid, self.v_uid})


def close_fd(c: Candidate, attr: str) -> None:
    fd = getattr(c, attr)
    if fd >= 0:
        try:
            os.close(fd)
        except OSError:
            pass
        setattr(c, attr, -1)


FLAG_OF_LOSS = {"oversize": flags.OVERSIZE_FRAME, "malformed": flags.MALFORMED_FRAME, "protocol": flags.CONTROL_CHANNEL}
"""The verdict process's word for why it lost a candidate mid-call -> the flag it earns."""
