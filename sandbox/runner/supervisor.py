"""The supervisor: one per client connection, runs that connection's jobs one at a time.

It holds the job, forks the verdict process, obtains candidate processes from the
pristine spawner, relays calls between them, and enforces every limit: per-test
wall clock, output caps, and the death of anything that misbehaves. Only it reports.
"""

from __future__ import annotations

import base64
import collections
import gc
import os
import select
import signal
import socket
import time
from typing import Any

from . import framing, limits, spawner, verdict
from .compare import stdout_matches
from .progress import MAX_TESTS, Progress

READ, WRITE = select.EPOLLIN, select.EPOLLOUT
KEEP_BYTES = 4096
GRACE_S = 1.0
READ_BYTES = 1 << 16
CLEANUP_WAIT_S = 0.05  # for a killed candidate to be reaped before its uid is scanned
VERDICT_JOBS = 1000  # jobs one verdict process serves before a fresh one replaces it
VERDICT_MIN_MB = 2048


class InfraFailure(Exception):
    """Something of ours broke (spawner gone, fork failed): not the candidate's fault."""


class Candidate:
    def __init__(self, pid: int, ctrl: socket.socket, stdin_w: int, stdout_r: int, stderr_r: int) -> None:
        self.pid = pid
        self.ctrl = ctrl
        self.stdin_w = stdin_w
        self.stdout_r = stdout_r
        self.stderr_r = stderr_r
        self.reader = framing.FrameReader()
        self.frames: collections.deque = collections.deque()
        self.eof = False
        self.bad_frame = False
        self.open_pipes = 2
        self.pending_stdin = b""
        self.killed = False


class Verdict:
    def __init__(self, pid: int, sock: socket.socket, memory_mb: int) -> None:
        self.pid = pid
        self.sock = sock
        self.memory_mb = memory_mb
        self.jobs = 0
        self.busy = False
        self.reader = framing.FrameReader()
        self.frames: collections.deque = collections.deque()
        self.eof = False


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


class Supervisor:
    def __init__(self, conn: socket.socket, slot: int, cfg: dict) -> None:
        self.conn = conn
        self.slot = slot
        self.cfg = cfg
        self.c_uid = cfg["uid_base"] + 2 * slot
        self.v_uid = self.c_uid + 1
        self.sel = _Watch()
        # one scratch path per slot, made afresh for each job: the spawner sets HOME, TMPDIR
        # and sys.path to it once, instead of every candidate doing it
        self.scratch = os.path.join(cfg["scratch_base"], f"s{slot}")
        self.spawner_pid, self.p_sock = spawner.fork_spawner(self.scratch, cfg.get("hide_prefix", "\0"))
        self.p_sock.setblocking(False)
        self.sel.register(self.p_sock, READ, ("p", None))
        self.exits: dict[int, dict] = {}
        self.dying: list[int] = []  # this job's candidates, killed, not yet reported reaped
        self._spawned: list = []
        self.spawn_pending = False
        self.cand: Candidate | None = None
        self.v: Verdict | None = None
        # made after the spawner was forked, so no candidate process ever maps this page
        self.progress = Progress()
        self.out_index = -1
        self.jobs = 0
        self.unit_out = 0
        self.out_limit = 1 << 20
        self.kept = {"stdout": bytearray(), "stderr": bytearray()}
        self.truncated = False
        self.over_limit = False
        self.candidate_names: list[str] = []
        self.stream = True
        self.cpu: int | None = None  # the CPU this job's processes keep to, if the client gave one
        self.pinned_ever = False

    # ------------------------------------------------------------------ plumbing
    def serve(self) -> None:
        try:
            while True:
                try:
                    msg = framing.recv_frame(self.conn)
                except (framing.FrameError, OSError):
                    return
                if msg is None:
                    return
                op = msg.get("op") if isinstance(msg, dict) else None
                if op == "ping":
                    self.emit({"event": "pong", "slot": self.slot, "jobs": self.jobs, "pid": os.getpid()})
                elif op in ("run", "exec"):
                    self.jobs += 1
                    try:
                        self.run_job(msg)
                    except InfraFailure as exc:
                        self.emit({"event": "infra_error", "message": str(exc)[:300]})
                        return
                else:
                    self.emit({"event": "error", "message": f"unknown op {op!r}"})
        finally:
            self.shutdown()

    def emit(self, obj: dict) -> None:
        framing.send_frame(self.conn, obj)

    def shutdown(self) -> None:
        if self.cand:
            self.kill_candidate(self.cand)
        for pid, fds in self._spawned:
            limits.kill_group(pid)
            for fd in fds:
                os.close(fd)
        self.kill_verdict()
        limits.kill_group(self.spawner_pid)
        limits.kill_uids({self.c_uid, self.v_uid})

    def pump(self, timeout: float) -> None:
        for fd, kind, obj in self.sel.select(max(0.0, timeout)):
            if kind == "p":
                self._read_spawner()
            elif kind == "cctrl":
                self._read_frames(obj, obj.ctrl)
            elif kind in ("cout", "cerr"):
                self._read_output(obj, fd, "stdout" if kind == "cout" else "stderr")
            elif kind == "cin":
                self._write_stdin(obj)
            elif kind == "v":
                self._read_frames(obj, obj.sock)

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

    def _read_frames(self, obj: Candidate | Verdict, sock: socket.socket) -> None:
        try:
            data = sock.recv(READ_BYTES)  # a 1 MiB request costs a 1 MiB allocation per read
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            obj.eof = True
            self.sel.unregister(sock)
            return
        try:
            obj.frames.extend(obj.reader.feed(data))
        except framing.FrameError:
            obj.eof = True
            if isinstance(obj, Candidate):
                obj.bad_frame = True
            self.sel.unregister(sock)

    def _read_output(self, c: Candidate, fd: int, stream: str) -> None:
        try:
            data = os.read(fd, 1 << 16)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self.sel.unregister(fd)
            c.open_pipes -= 1
            return
        if self.v is not None and self.v.busy:
            # the output limit is per test: charge this output to the test running now
            idx = self.progress.current()[0]
            if idx >= 0 and idx != self.out_index:
                self.out_index = idx
                self.unit_out = 0
        self.unit_out += len(data)
        kept = self.kept[stream]
        room = self.keep_limit - len(kept)
        if room > 0:
            kept += data[:room]
        if len(data) > max(room, 0):
            self.truncated = True
        if self.unit_out > self.out_limit:
            self.over_limit = True

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
            self._close_fd(c, "stdin_w")

    def _close_fd(self, c: Candidate, attr: str) -> None:
        fd = getattr(c, attr)
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:
                pass
            setattr(c, attr, -1)

    # ------------------------------------------------------------ candidates
    def request_spawn(self) -> None:
        """Ask the spawner for a candidate process without waiting for it."""
        if self.spawn_pending:
            return
        try:
            self.p_sock.send(spawner.SPAWN)
        except OSError as exc:
            raise InfraFailure(f"spawner unreachable: {exc}") from None
        self.spawn_pending = True

    def spawn(self) -> Candidate:
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
        c = Candidate(pid, ctrl, fds[1], fds[2], fds[3])
        for fd in fds[1:]:
            os.set_blocking(fd, False)
        return c

    def activate(self, c: Candidate) -> None:
        self.sel.register(c.ctrl, READ, ("cctrl", c))
        self.sel.register(c.stdout_r, READ, ("cout", c))
        self.sel.register(c.stderr_r, READ, ("cerr", c))

    def take_candidate(self) -> Candidate:
        c = self.spawn()  # usually forked already, while the previous answer was read
        self.activate(c)
        return c

    def kill_candidate(self, c: Candidate) -> None:
        if not c.killed:
            c.killed = True
            limits.kill_group(c.pid)
            self.dying.append(c.pid)
        self.sel.unregister(c.ctrl)
        try:
            c.ctrl.close()
        except OSError:
            pass
        for attr in ("stdin_w", "stdout_r", "stderr_r"):
            fd = getattr(c, attr)
            if fd >= 0:
                self.sel.unregister(fd)
                self._close_fd(c, attr)

    def send_candidate(self, c: Candidate, obj: dict) -> bool:
        try:
            framing.send_frame(c.ctrl, obj, timeout=GRACE_S)
            return True
        except (OSError, TimeoutError):
            return False
        finally:
            _nonblocking(c.ctrl)

    def wait_frame(self, c: Candidate, deadline: float) -> dict | None:
        """Next frame from the candidate, or None when it died, hung or broke a limit."""
        while not c.frames:
            if c.eof or self.over_limit:
                return None
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self.pump(left)
        f = c.frames.popleft()
        return f if isinstance(f, dict) else None

    def death_status(self, c: Candidate, timed_out: bool) -> tuple[str, str]:
        """Why a candidate stopped answering, from what we did and what the kernel said."""
        if self.over_limit:
            return "output_limit", f"output exceeded {self.out_limit} bytes"
        if timed_out:
            return "timeout", "wall-clock limit exceeded"
        if c.bad_frame:
            return "error", "candidate broke the result protocol"
        note = self.wait_exit(c.pid, 0.2)
        if note is None:
            return "error", "candidate process stopped answering"
        return _exit_reason(note)

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

    # ---------------------------------------------------------------- verdict
    def ensure_verdict(self, lim: dict) -> Verdict:
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
            v = self.v = self.fork_verdict(want_mb)
        v.jobs += 1
        return v

    def fork_verdict(self, memory_mb: int) -> Verdict:
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
                limits.apply_rlimits(memory_mb=memory_mb, nproc=4, fsize_mb=0, nofile=64, cpu_s=1 << 30)
                limits.drop_privileges(self.v_uid)
                verdict.serve(theirs, self.progress)
            except BaseException:  # noqa: BLE001
                code = 1
            os._exit(code)
        theirs.close()
        ours.setblocking(False)
        v = Verdict(pid, ours, memory_mb)
        self.sel.register(ours, READ, ("v", v))
        return v

    def kill_verdict(self) -> None:
        v, self.v = self.v, None
        if not v:
            return
        limits.kill_group(v.pid)
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

    # ------------------------------------------------------------------- jobs
    def run_job(self, msg: dict) -> None:
        lim = msg["limits"]
        self.out_limit = int(lim["output_bytes"])
        self.keep_limit = KEEP_BYTES if msg["op"] == "run" else self.out_limit
        self.kept = {"stdout": bytearray(), "stderr": bytearray()}
        self.truncated = False
        self.exits.clear()
        self.candidate_names = []
        self.stream = bool(msg.get("stream", True))
        scratch = self.fresh_scratch()
        t0 = time.monotonic()
        self.keep_to(msg.get("cpu"))
        try:
            if msg["op"] == "exec":
                summary = self.run_exec(msg, scratch, lim)
            elif msg["tests"]["kind"] == "stdio":
                summary = self.run_stdio(msg, scratch, lim)
            else:
                summary = self.run_function(msg, scratch, lim)
            if self.cand:
                self.kill_candidate(self.cand)
                self.cand = None
            summary["wall_s"] = round(time.monotonic() - t0, 6)
            summary["stdout"] = self.kept["stdout"].decode("utf-8", "replace")
            summary["stderr"] = self.kept["stderr"].decode("utf-8", "replace")
            summary["output_truncated"] = self.truncated
            # the verdict is final once the job's processes are dead: answer first, then
            # clean up while the client works on the answer (this connection takes no new
            # job until the cleanup below is done)
            self.emit(summary)
        finally:
            if self.cand:
                self.kill_candidate(self.cand)
                self.cand = None
            if self.v and self.v.busy:
                self.kill_verdict()  # stopped mid-job: it may still be running test code
            self.await_reaped(CLEANUP_WAIT_S)
            limits.kill_uids({self.c_uid, self.v_uid}, spare={self.v.pid} if self.v else set())
            limits.remove_tree(scratch)
            limits.remove_files_of({self.c_uid, self.v_uid})
        self.request_spawn()  # the next job's candidate forks while the client reads this answer

    def keep_to(self, cpu: object) -> None:
        """Keep this connection's processes (us, the spawner, the verdict process, the job's
        candidates) on the CPU the client chose for this job, or let them all float."""
        want = cpu if type(cpu) is int and cpu in limits.allowed_cpus() else None
        if want == self.cpu:
            return
        self.cpu = want
        self.pinned_ever = True
        limits.pin_cpu(want)
        limits.pin_cpu(want, pid=self.spawner_pid)

    def fresh_scratch(self) -> str:
        """The slot's scratch path, made afresh; a unique path where what the last job left
        there could not be removed (its candidates then set HOME and TMPDIR themselves)."""
        base = self.cfg["scratch_base"]
        try:
            return limits.make_scratch(base, f"s{self.slot}", self.c_uid)
        except OSError:
            pass
        try:
            return limits.make_scratch(base, f"s{self.slot}-{self.jobs}-{os.urandom(4).hex()}", self.c_uid)
        except OSError as exc:
            raise InfraFailure(f"cannot make a scratch directory: {exc}") from None

    def load_message(self, c: Candidate, op: str, program: str, scratch: str, lim: dict, n_units: int) -> dict:
        """The candidate's first frame. Its resource limits are set from here (prlimit on a
        process that is still ours): every object a fresh candidate touches is a page it
        copies, so it does as little as it can itself. Sent along only where that failed."""
        msg = {"op": op, "program": program, "scratch": scratch, "uid": self.c_uid,
               "hide_prefix": self.cfg.get("hide_prefix", "\0")}
        rl = {
            "memory_mb": lim["memory_mb"],
            "nproc": lim["nproc"],
            "fsize_mb": lim["fsize_mb"],
            "nofile": lim["nofile"],
            "cpu_s": int(lim["timeout_s"] * (n_units + 1)) + 1,
        }
        try:
            limits.apply_rlimits(pid=c.pid, **rl)
        except (OSError, ValueError):
            msg["limits"] = rl
        if self.pinned_ever:  # it may have been forked while the spawner kept to another CPU
            limits.pin_cpu(self.cpu, pid=c.pid)  # still ours: it drops its uid on this message
        return msg

    def start_unit(self, lim: dict) -> float:
        self.unit_out = 0
        self.over_limit = False
        return time.monotonic() + float(lim["timeout_s"])

    def load_candidate(self, program: str, scratch: str, lim: dict, n_units: int) -> tuple[Candidate, dict]:
        """A fresh candidate with the program loaded; reports syntax and top-level outcome."""
        c = self.take_candidate()
        deadline = self.start_unit(lim)
        outcome = {"syntax_ok": False, "runs": False, "message": ""}
        if not self.send_candidate(c, self.load_message(c, "load", program, scratch, lim, n_units)):
            outcome["message"] = "candidate did not accept the program"
            return c, outcome
        first = self.wait_frame(c, deadline)
        if first is None:
            outcome["message"] = self.death_status(c, time.monotonic() >= deadline)[1]
            return c, outcome
        outcome["syntax_ok"] = bool(first.get("syntax_ok"))
        outcome["message"] = str(first.get("message", ""))[:500]
        if not outcome["syntax_ok"]:
            return c, outcome
        second = self.wait_frame(c, deadline)
        if second is None:
            status, why = self.death_status(c, time.monotonic() >= deadline)
            outcome["message"] = f"{status}: {why}"
            return c, outcome
        outcome["runs"] = second.get("runs") is True
        outcome["message"] = str(second.get("message", ""))[:500]
        names = second.get("names")
        if isinstance(names, list):
            self.candidate_names = [n for n in names[:2000] if isinstance(n, str) and n.isidentifier()]
        return c, outcome

    def run_function(self, msg: dict, scratch: str, lim: dict) -> dict:
        spec = msg["tests"]
        # the verdict process counts the tests (parsing them) while the candidate loads
        self.send_job(spec, lim, 0)
        self.cand, outcome = self.load_candidate(msg["program"], scratch, lim, _estimate_units(spec))
        plan = self.await_plan(time.monotonic() + 30)
        verdict_waits = plan is not None and plan["op"] == "plan"
        if plan is None:
            # it died or stalled on the tests' syntax: count them here, run them in a fresh one
            self.kill_verdict()
            plan = _count_tests_here(spec)
        if plan["op"] == "bad_tests":
            return {"event": "done", "error": f"bad tests: {plan.get('message', '')}"[:300], "syntax_ok": False,
                    "runs": False, "passed": 0, "total": 0, "tests": []}
        n = plan["n"]
        if self.stream:
            self.emit({"event": "load", **outcome, "total": n})
        results: list[dict | None] = [None] * n
        if not outcome["runs"]:
            if verdict_waits:
                self.skip_job()
            why = "program has a syntax error" if not outcome["syntax_ok"] else "program did not run"
            for i in range(n):
                results[i] = {"status": "error", "time_s": 0.0, "message": f"{why}: {outcome['message']}"[:300]}
                if self.stream:
                    self.emit({"event": "test", "index": i, **results[i]})
        else:
            self.relay(msg, scratch, lim, spec, n, results, verdict_waits)
        passed = sum(1 for r in results if r and r["status"] == "passed")
        return {"event": "done", **outcome, "passed": passed, "total": n, "tests": results}

    def send_job(self, spec: dict, lim: dict, start: int) -> None:
        self.progress.reset(MAX_TESTS)
        v = self.ensure_verdict(lim)
        v.busy = True
        self.send_verdict({"op": "job", "spec": spec, "start": start, "stream": self.stream, "cpu": self.cpu})

    def await_plan(self, deadline: float) -> dict | None:
        """The verdict process's answer to a job (how many tests, or why the tests are bad);
        None when it died or did not answer in time."""
        v = self.v
        while v and not v.frames:
            if v.eof or time.monotonic() > deadline:
                return None
            self.pump(deadline - time.monotonic())
        if not v:
            return None
        f = v.frames.popleft()
        op = f.get("op") if isinstance(f, dict) else None
        if op == "bad_tests":
            v.busy = False
            return f
        return f if op == "plan" and type(f.get("n")) is int else None

    def go(self, cand: Candidate | None) -> None:
        """Let the waiting verdict process run its job, with this candidate (or none yet)."""
        self.give_candidate(cand)
        self.send_verdict({"names": self.candidate_names})

    def skip_job(self) -> None:
        v = self.v
        if v and not v.eof:
            try:
                v.sock.send(b"S")
                v.busy = False
            except OSError:
                v.eof = True

    def relay(self, msg: dict, scratch: str, lim: dict, spec: dict, n: int, results: list, waiting: bool) -> None:
        """Drive the verdict process through the tests. It calls the candidate directly and
        writes its progress to shared memory; we wake only for its messages (a lost or
        needed candidate, the results), the candidate's output, and deadlines."""
        timeout = float(lim["timeout_s"])
        job_deadline = time.monotonic() + timeout * (n + 2) + 10
        override: dict[int, tuple[str, str]] = {}
        pending: list[tuple[str, str] | None] = [None]  # why we killed the candidate, if we did
        killed_at: dict[int, float] = {}  # test index -> when we killed its candidate for time

        def record(i: int, status: str, message: str, time_s: object = 0.0) -> None:
            if not 0 <= i < n or results[i] is not None:
                return
            time_s = time_s if isinstance(time_s, (int, float)) else 0.0
            if i in override:
                status, message = override[i]
            elif status == "aborted":
                status, message = "error", message or "candidate lost"
            results[i] = {"status": status, "time_s": round(float(time_s), 6), "message": str(message)[:300]}
            if self.stream:
                self.emit({"event": "test", "index": i, **results[i]})

        def record_reported(r: dict) -> None:
            record(_index(r), str(r.get("status", "error")), str(r.get("message", "")), r.get("time_s", 0.0))

        def drop_candidate(reason: tuple[str, str] | None) -> None:
            if not self.cand:
                return
            pending[0] = reason
            self.kill_candidate(self.cand)

        def candidate_gone(i: int) -> None:
            """The verdict process lost the candidate during test i: say why."""
            reason = pending[0]
            if reason is None and self.cand:
                reason = self.death_status(self.cand, False)
            if self.cand:
                self.kill_candidate(self.cand)
                self.cand = None
            pending[0] = None
            if 0 <= i < n and reason:
                override.setdefault(i, reason)

        def start_verdict(start: int) -> bool:
            """Run the tests from `start` on in a fresh verdict process, with the candidate."""
            while start < n and results[start] is not None:
                start += 1
            if start >= n:
                return False
            self.send_job(spec, lim, start)
            plan = self.await_plan(job_deadline)
            if plan is None or plan.get("op") != "plan":
                for i in range(start, n):
                    record(i, "error", "the test process failed to start")
                return False
            return resume()

        def resume() -> bool:
            if self.cand and self.cand.killed:
                self.cand, pending[0] = None, None  # its death was charged to the test it ended
            self.go(self.cand)
            return True

        def salvage_and_restart() -> bool:
            """The verdict process died or was stopped: keep what it recorded, go on after."""
            idx, _ = self.progress.current()
            for j in range(n):
                if results[j] is None and self.progress.status(j):
                    record(j, self.progress.status(j), "(detail lost with the test process)")
            if 0 <= idx < n and results[idx] is None:
                st, why = override.get(idx) or ("error", "test process died")
                record(idx, st, why)
            self.kill_verdict()
            return start_verdict(idx + 1 if idx >= 0 else 0)

        self.out_index = -1
        if not (resume() if waiting else start_verdict(0)):
            return
        while True:
            now = time.monotonic()
            if now > job_deadline:
                for i in range(n):
                    record(i, "timeout", "job time limit")
                return
            v = self.v
            while v and v.frames:
                f = v.frames.popleft()
                op = f.get("op") if isinstance(f, dict) else None
                if op == "lost":
                    candidate_gone(_index(f))
                    if f.get("why") == "protocol":
                        override[_index(f)] = ("error", "candidate broke the result protocol")
                elif op == "need_candidate":
                    i = _index(f)
                    if self.cand:
                        candidate_gone(i)
                    saved = (self.unit_out, self.over_limit)
                    self.cand, again = self.load_candidate(msg["program"], scratch, lim, n)
                    self.unit_out, self.over_limit = saved
                    if again["runs"]:
                        self.give_candidate(self.cand)
                    else:
                        override.setdefault(i, ("error", "program failed to reload: " + again["message"]))
                        self.give_candidate(None)
                elif op == "end":
                    record_reported(f)
                elif op == "done":
                    v.busy = False
                    for r in f.get("results", []) if isinstance(f.get("results"), list) else []:
                        if isinstance(r, dict):
                            record_reported(r)
                    for i in range(n):
                        record(i, "error", "test did not run")
                    return
                elif op == "plan_error":
                    v.busy = False
                    for i in range(n):
                        record(i, "error", "test code failed: " + str(f.get("message", "")))
                    return
            if self.over_limit and self.cand and not self.cand.killed:
                why = ("output_limit", f"output exceeded {self.out_limit} bytes")
                charged = self.out_index if self.out_index >= 0 else self.progress.current()[0]
                if charged >= 0:
                    # the test that printed it fails, even if it returned before we read it all
                    override.setdefault(charged, why)
                    why = ("error", f"candidate stopped: test {charged} exceeded the output limit")
                drop_candidate(why)
                self.over_limit = False  # handled; the next test's output is counted afresh
            if self.v is None or (self.v.eof and not self.v.frames):
                if not salvage_and_restart():
                    return
                continue
            idx, started = self.progress.current()
            wake = job_deadline
            if idx >= 0:
                if idx in killed_at:
                    if time.monotonic() > killed_at[idx] + GRACE_S:
                        # the candidate is dead and the test still runs: the test code is stuck
                        override.setdefault(idx, ("timeout", "wall-clock limit exceeded"))
                        if not salvage_and_restart():
                            return
                        continue
                    wake = min(wake, killed_at[idx] + GRACE_S)
                elif time.monotonic() > started + timeout:
                    killed_at[idx] = time.monotonic()
                    if self.cand and not self.cand.killed:
                        # most likely the candidate is computing; its death unblocks the test
                        drop_candidate(("timeout", "wall-clock limit exceeded"))
                    override.setdefault(idx, ("timeout", "wall-clock limit exceeded"))
                    continue
                else:
                    wake = min(wake, started + timeout + 0.001)
            else:
                # between tests (or building the plan): look again within one test's time
                wake = min(wake, time.monotonic() + timeout)
            self.pump(wake - time.monotonic())

    # ------------------------------------------------------------- stdio/exec
    def run_once(self, program: str, stdin: str, scratch: str, lim: dict, n_units: int) -> dict:
        """Run the program as a script once; what it printed and how it ended."""
        c = self.take_candidate()
        self.cand = c
        deadline = self.start_unit(lim)
        t0 = time.monotonic()
        before = {k: len(v) for k, v in self.kept.items()}
        out = {"syntax_ok": True, "exit": None, "status": "finished", "message": ""}
        c.pending_stdin = stdin.encode("utf-8", "surrogateescape")
        if not self.send_candidate(c, self.load_message(c, "main", program, scratch, lim, n_units)):
            out.update(status="error", message="candidate did not start")
        else:
            if c.pending_stdin:
                self.sel.register(c.stdin_w, WRITE, ("cin", c))
            else:
                self._close_fd(c, "stdin_w")
            first = self.wait_frame(c, deadline)
            if first is not None and not first.get("syntax_ok"):
                why = str(first.get("message", ""))[:500]
                out.update(syntax_ok=False, status="error", message=why, exit=1)
                self.kept["stderr"] += why.encode("utf-8", "replace") + b"\n"
            else:
                ended = self.wait_frame(c, deadline) if first is not None else None
                while (c.open_pipes > 0 or not c.eof) and not self.over_limit and time.monotonic() < deadline:
                    self.pump(deadline - time.monotonic())
                timed_out = time.monotonic() >= deadline and (c.open_pipes > 0 or not c.eof)
                if self.over_limit or timed_out:
                    st, why = self.death_status(c, timed_out)
                    out.update(status=st, message=why)
                else:
                    note = self.wait_exit(c.pid, GRACE_S)
                    if note and note.get("signal"):
                        st, why = _exit_reason(note)
                        out.update(status=st, message=why, exit=-int(note["signal"]))
                    elif note is not None:
                        out["exit"] = int(note.get("code", 1))
                    elif ended is not None:
                        out["exit"] = int(ended.get("exit", 1))
                    if out["exit"] not in (0, None) and out["status"] == "finished":
                        out["status"] = "error"
                        out["message"] = f"exit code {out['exit']}"
        self.kill_candidate(c)
        self.cand = None
        limits.kill_uids({self.c_uid})
        out["time_s"] = round(time.monotonic() - t0, 6)
        out["stdout_bytes"] = bytes(self.kept["stdout"][before["stdout"]:])
        out["stderr_bytes"] = bytes(self.kept["stderr"][before["stderr"]:])
        return out

    def run_stdio(self, msg: dict, scratch: str, lim: dict) -> dict:
        spec = msg["tests"]
        cases = spec["cases"]
        n = len(cases)
        tol = spec.get("float_tolerance")
        results = []
        syntax_ok, runs = True, False
        self.keep_limit = max(self.out_limit, KEEP_BYTES)
        for i, case in enumerate(cases):
            mark = len(self.kept["stdout"])
            out = self.run_once(msg["program"], case.get("stdin", ""), scratch, lim, 1)
            if not out["syntax_ok"]:
                syntax_ok = False
                self.emit({"event": "load", "syntax_ok": False, "runs": False, "message": out["message"], "total": n})
                for j in range(n):
                    r = {"status": "error", "time_s": 0.0, "message": "program has a syntax error: " + out["message"]}
                    results.append(r)
                    self.emit({"event": "test", "index": j, **r})
                break
            if i == 0:
                self.emit({"event": "load", "syntax_ok": True, "runs": True, "message": "", "total": n})
            if out["status"] == "finished" and out["exit"] == 0:
                runs = True
            text = out["stdout_bytes"].decode("utf-8", "replace")
            del self.kept["stdout"][mark:]  # keep per-job output small: only the first case's is reported
            if i == 0:
                self.kept["stdout"] += out["stdout_bytes"][:KEEP_BYTES]
            if out["status"] != "finished":
                r = {"status": out["status"], "message": out["message"]}
            elif stdout_matches(text, case["stdout"], tol):
                r = {"status": "passed", "message": ""}
            else:
                r = {"status": "failed", "message": "wrong output: " + _first_difference(text, case["stdout"])}
            r["time_s"] = out["time_s"]
            results.append(r)
            self.emit({"event": "test", "index": i, **r})
        self.kept["stderr"] = self.kept["stderr"][:KEEP_BYTES]
        passed = sum(1 for r in results if r["status"] == "passed")
        return {"event": "done", "syntax_ok": syntax_ok, "runs": runs, "message": "", "passed": passed,
                "total": n, "tests": results}

    def run_exec(self, msg: dict, scratch: str, lim: dict) -> dict:
        for f in msg.get("files", []):
            _write_file(scratch, f["path"], base64.b64decode(f["content_b64"]), self.c_uid)
        out = self.run_once(msg["program"], msg.get("stdin", ""), scratch, lim, 1)
        files = {}
        for rel in msg.get("fetch_files", []):
            data = _read_file(scratch, rel, self.out_limit)
            if data is not None:
                files[rel] = base64.b64encode(data).decode("ascii")
        status = out["status"] if out["syntax_ok"] else "error"
        return {
            "event": "exec_done",
            "status": status,
            "syntax_ok": out["syntax_ok"],
            "return_code": out["exit"],
            "message": out["message"],
            "time_s": out["time_s"],
            "exec_stdout": out["stdout_bytes"].decode("utf-8", "replace"),
            "exec_stderr": out["stderr_bytes"].decode("utf-8", "replace"),
            "files": files,
        }


def _count_tests_here(spec: dict) -> dict:
    """The verdict process's answer to a job, computed in the supervisor (fallback only)."""
    try:
        return {"op": "plan", "n": len(verdict.unit_labels(spec))}
    except (SyntaxError, ValueError, KeyError, TypeError, RecursionError, MemoryError) as exc:
        return {"op": "bad_tests", "message": f"{type(exc).__name__}: {exc}"}


def _exit_reason(note: dict) -> tuple[str, str]:
    """(status, message) for how a candidate process ended, from the spawner's exit note."""
    sig = note.get("signal")
    if sig == signal.SIGXCPU:
        return "timeout", "CPU time limit exceeded"
    if sig == signal.SIGKILL:
        return "memory", "killed by SIGKILL (most likely out of memory)"
    if sig:
        return "error", f"killed by signal {signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else sig}"
    return "error", f"process exited with code {note.get('code')}"


def _estimate_units(spec: dict) -> int:
    """An upper bound on the tests of a spec before it is parsed (sizes the CPU limit)."""
    if spec.get("kind") == "call":
        return max(1, len(spec.get("cases", ())))
    if "asserts" in spec:
        return max(1, len(spec["asserts"]))
    return max(1, str(spec.get("test", "")).count("assert"))


def _index(f: dict) -> int:
    i = f.get("index")
    return i if type(i) is int else -1


def _safe_path(scratch: str, rel: str) -> str | None:
    path = os.path.normpath(os.path.join(scratch, rel))
    if not path.startswith(scratch.rstrip("/") + "/"):
        return None
    return path


def _write_file(scratch: str, rel: str, data: bytes, uid: int) -> None:
    path = _safe_path(scratch, rel)
    if path is None:
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    if limits.can_switch_uid():
        os.chown(path, uid, uid)


def _read_file(scratch: str, rel: str, cap: int) -> bytes | None:
    """Read a file the candidate left, refusing links out of the scratch directory."""
    path = _safe_path(scratch, rel)
    if path is None or os.path.realpath(path) != path:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not __import__("stat").S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, cap)
    finally:
        os.close(fd)


def _first_difference(actual: str, expected: str) -> str:
    a = actual.rstrip().splitlines()
    e = expected.rstrip().splitlines()
    for i, (x, y) in enumerate(zip(a, e)):
        if x.rstrip() != y.rstrip():
            return f"line {i + 1}: expected {y[:60]!r}, got {x[:60]!r}"
    return f"expected {len(e)} lines, got {len(a)}"
