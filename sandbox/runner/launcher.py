"""Starting a built program as a jailed process: its limits (one record, as RLIMITs), a fresh
candidate that execs it (`run_process`, a compiler's run too), and the launcher, one jail that
starts the program once per test (`Launcher`); each run ends through the one run tail
(script.RunSlice)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import time
from dataclasses import dataclass

from . import limits, procfs, spawner
from .children import READ, WRITE, Candidate, Children, OutputMeter, close_fd
from .cpuclock import TestClock, process_cpu_s, tree_cpu_s
from .script import RunSlice, ScriptEnd, _await_end, encode_stdin, feed_stdin

BLOCKED = "the compiler used no CPU"  # how such a cut's message starts


@dataclass
class Limits:
    """One process's limits, as RLIMITs."""

    timeout_s: float
    data_mb: int
    as_mb: int
    nproc: int
    fsize_mb: int
    nofile: int
    stack_mb: int = 0
    wall_factor: float = 1.0  # the wall-clock backstop, as a multiple of timeout_s (CPU time)
    wall_margin_s: float | None = None  # instead: a wall-clock limit of timeout_s + this (a compile's)
    idle_s: float = 0.0  # cut the process after this long without CPU (0: never; a compile's)
    compile_view: bool = False  # a compiler: reads only the files it needs, /dev only null, zero, urandom

    def rlimits(self, timeout_s: float, n_units: int = 0, extra_nproc: int = 0,
                cpu_grace_s: int = 0) -> limits.Rlimits:
        """The rlimits of a process of these limits (the jail's, RLIMIT_DATA and the stack), its
        RLIMIT_CPU sized for `n_units` tests of `timeout_s`."""
        return limits.Rlimits.for_tests(timeout_s, n_units, memory_mb=self.as_mb, nproc=self.nproc + extra_nproc,
                                        fsize_mb=self.fsize_mb, nofile=self.nofile, data_mb=self.data_mb,
                                        stack_mb=self.stack_mb, cpu_grace_s=cpu_grace_s)


class CompileClock(TestClock):
    """A compile's limits: `limit_s` of CPU, a wall clock of `limit_s + margin_s` (a compiler
    that waits is not a program that sleeps: no 3x backstop), and where `idle_s` is set, a cut
    once the compile's processes have used no CPU for that long (a read of a pipe or a device
    that never answers)."""

    POLL_S = 0.25

    def __init__(self, limit_s: float, margin_s: float, idle_s: float, started: float,
                 cpu_at_start: float | None) -> None:
        super().__init__(limit_s, 1.0, started, cpu_at_start)
        self.wall_s = self.hard_s = limit_s + margin_s
        self.idle_s = idle_s
        self.last_cpu = cpu_at_start
        self.last_progress = started
        self.idle = False

    @property
    def first_check(self) -> float:
        return self.started + self.POLL_S

    def check(self, now: float, cpu_now: float | None, delay_now: float | None = None) -> tuple[str, float]:
        if cpu_now is not None and self.cpu_at_start is not None:
            self.used = cpu_now - self.cpu_at_start
            if self.used >= self.limit_s:
                return "cpu", now
            if self.last_cpu is None or cpu_now > self.last_cpu:
                self.last_cpu, self.last_progress = cpu_now, now
            elif self.idle_s and now - self.last_progress >= self.idle_s:
                self.idle = True
                return "wall", now
        if now >= self.started + self.wall_s:
            return "wall", now
        return "", min(self.started + self.wall_s, now + self.POLL_S)

    def message(self, which: str) -> str:
        if self.idle:
            return f"{BLOCKED} for {self.idle_s:g} s (it waits on a read that never ends)"
        return super().message(which)


def make_clock(lim: Limits, started: float, cpu_at_start: float | None) -> TestClock:
    if lim.wall_margin_s is None:
        return TestClock(lim.timeout_s, lim.wall_factor, started, cpu_at_start)
    return CompileClock(lim.timeout_s, lim.wall_margin_s, lim.idle_s, started, cpu_at_start)


def run_process(ch: Children, meter: OutputMeter, argv: list[str], env: dict[str, str], stdin: str, scratch: str,
                lim: Limits) -> ScriptEnd:
    """Start `argv` as a fresh candidate (it execs it once jailed), its output charged to
    `meter`, and wait for its end."""
    c = ch.take_candidate("script", meter)
    run = RunSlice(meter)
    # as for Python scripts: the limit is the CPU its processes use, the wall clock a backstop
    uid = ch.c_uid if limits.can_switch_uid() else None
    clock = make_clock(lim, run.t0, tree_cpu_s(c.pid, uid))
    out = ScriptEnd()
    c.pending_stdin = encode_stdin(stdin)
    # RLIMIT_CPU: the timeout (rounded) + 1 s soft, + 1 s hard (before it joins its memory
    # cgroup, cgroup.cap_job_memory, which reads RLIMIT_DATA)
    msg = ch.load_message(c, "execve", "", scratch, lim.rlimits(lim.timeout_s + 1, cpu_grace_s=1))
    msg.update(argv=argv, env=env, compile_view=lim.compile_view)
    if not ch.send_candidate(c, msg):
        out.status, out.message = "error", "candidate did not start"
    else:
        feed_stdin(ch, c)
        ch.wait_settled(c, clock.started + clock.hard_s)
        _await_end(ch, c, clock, uid, out)
    return run.end(ch, c, out)


LAUNCHER_TESTS = 256  # tests one launcher starts before a fresh one (its own CPU stays far below RLIMIT_CPU)
LAUNCHER_MIN_DATA_MB = 64  # below this a launcher's interpreter would not fit under RLIMIT_DATA: fork per test
LOST = {"code": 1, "signal": 0}  # the launcher went away before it said how a run ended (compared by identity)


class Launcher:
    """A jailed candidate that starts the job's program once per test (candidate._launch).

    Every jail step is the candidate's own, made once per job instead of once per test: the
    job's uid, its rlimits (RLIMIT_DATA and the stack among them, set here with prlimit, as for
    any candidate), the slot's memory cgroup, the Landlock domain and the seccomp filter, the scratch as
    cwd. Each program is its child by posix_spawn and inherits all of it; so a test costs an
    exec, not a fork of a Python process plus its copied pages (issue 17: 2.6 -> ~1 ms).
    The launcher runs as the job's uid, so a program may kill it (its own test then fails and
    the next test gets a fresh launcher), but not forge what it says: ptrace and
    process_vm_* are refused by the filter and a process that changed its uid is not
    dumpable, so nothing of the job can write into it; its pids are checked to be its children."""

    def __init__(self, ch: Children, c: Candidate, meter: OutputMeter) -> None:
        self.ch = ch
        self.c = c
        self.meter = meter  # its job's: each program's output is charged there
        self.buf = b""
        self.pid = 0  # the program it started for the test that runs now
        self.error = 0  # errno of a spawn that failed
        self.lost = False
        self.started = 0
        self.uid = ch.c_uid  # its programs' (their pipes are given to it)

    @classmethod
    def start(cls, ch: Children, meter: OutputMeter, argv: list[str], env: dict[str, str], scratch: str,
              lim: Limits, uid: int | None = None, path: str = "") -> Launcher | None:
        """A launcher for `argv`, jailed with the per-test limits `lim`; None where none came up.
        `uid`: another than the job's (a task program's); `path`: the file to run where argv[0]
        is only a name."""
        c = ch.take_candidate("script", meter)
        # the launcher is one of the uid's processes: one more, so the program keeps its nproc
        # RLIMIT_CPU: each program's, as run_process's
        rl = lim.rlimits(lim.timeout_s + 1, extra_nproc=1, cpu_grace_s=1)
        msg = ch.load_message(c, "launch", "", scratch, rl)
        msg.update(argv=argv, env=env)
        if uid is not None:
            msg["uid"] = uid
        if path:
            msg["path"] = path
        if not (ch.send_candidate(c, msg) and ch.wait_settled(c, time.monotonic() + 10)
                and c.channel.load.syntax_ok is True):
            ch.kill_candidate(c)
            return None
        # from here on its channel carries the launcher's short lines, read by us, not the loader's frame
        ch.sel.unregister(c.ctrl)
        for attr in ("stdin_w", "stdout_r", "stderr_r"):  # its own pipes: nobody reads them
            ch.sel.unregister(getattr(c, attr))
            close_fd(c, attr)
        launcher = cls(ch, c, meter)
        launcher.uid = msg["uid"]
        ch.sel.register(c.ctrl, READ, ("call", launcher.readable))
        return launcher

    def usable(self) -> bool:
        return not self.lost and not self.c.killed and self.c.pid not in self.ch.exits and self.started < LAUNCHER_TESTS

    def readable(self) -> None:
        try:
            data = self.c.ctrl.recv(4096)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        self.buf += data
        while data and b"\n" in self.buf:
            line, self.buf = self.buf.split(b"\n", 1)
            if not self._note(line):
                data = b""
        if not data or len(self.buf) > 64:
            self._lose()

    def _note(self, line: bytes) -> bool:
        """One line of the launcher's; False where it is not one it may say now."""
        kind, rest = line[:1], line[1:]
        try:
            if kind == b"P" and not self.pid and not self.error:
                pid = int(rest)
                if _parent_of(pid) not in (self.c.pid, 0, None):  # 0, None: it ended (is being or was reaped)
                    return False
                self.pid = pid
            elif kind == b"E" and not self.pid and not self.error:
                self.error = int(rest) or -1
            elif kind == b"X" and self.pid:
                pid, code, sig = (int(x) for x in rest.split())
                if pid != self.pid or self.pid in self.ch.exits:
                    return False
                self.ch.exits[pid] = {"code": code, "signal": sig}
            else:
                return False
        except ValueError:
            return False
        return True

    def _lose(self) -> None:
        if not self.lost:
            self.lost = True
            self.ch.sel.unregister(self.c.ctrl)
            if self.pid and self.pid not in self.ch.exits:
                self.ch.exits[self.pid] = LOST

    def launch(self) -> Candidate | str:
        """The program started once on fresh pipes: its Candidate (stdout and stderr watched and
        charged to the launcher's meter, stdin ours to write), or why it did not start."""
        ch = self.ch
        self.pid, self.error, self.started = 0, 0, self.started + 1
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        for fd in (out_w, err_w):  # as the spawner makes a candidate's (spawner.py)
            with contextlib.suppress(OSError):
                fcntl.fcntl(fd, spawner.F_SETPIPE_SZ, spawner.PIPE_BYTES)
        limits.give_pipes(self.uid, (in_r, out_w, err_w))  # /dev/stdin opens by name, as in _enter_jail
        try:
            socket.send_fds(self.c.ctrl, [b"R"], [in_r, out_w, err_w])
        except OSError:
            self._lose()
        finally:
            for fd in (in_r, out_w, err_w):
                os.close(fd)
        deadline = time.monotonic() + 10
        while not (self.pid or self.error or self.lost) and time.monotonic() < deadline:
            ch.pump(deadline - time.monotonic())
        if not self.pid:
            for fd in (in_w, out_r, err_r):
                os.close(fd)
            if not self.error:
                self._lose()
            why = os.strerror(self.error) if self.error > 0 else "the launcher did not answer"
            return f"cannot run the program: {why}"
        c = Candidate(self.pid, None, in_w, out_r, err_r, "script", self.meter)
        for fd in (in_w, out_r, err_r):
            os.set_blocking(fd, False)
        ch.sel.register(out_r, READ, ("cout", c))
        ch.sel.register(err_r, READ, ("cerr", c))
        return c

    def run(self, stdin: str, lim: Limits) -> ScriptEnd:
        """One test: the program started by the launcher on fresh pipes, judged as run_process does."""
        ch, out = self.ch, ScriptEnd()
        run = RunSlice(self.meter)
        c = self.launch()
        if isinstance(c, str):
            out.status, out.message, out.exit = "error", c, None
            return run.end(ch, None, out, spare={self.c.pid})  # a program that killed its launcher at once
        uid = ch.c_uid if limits.can_switch_uid() else None
        # the program's CPU counts from its exec (it has run a moment already); the launcher's is in the rest
        own = process_cpu_s(c.pid) or 0.0
        start = tree_cpu_s(c.pid, uid)
        clock = TestClock(lim.timeout_s, lim.wall_factor, run.t0, None if start is None else start - own)
        c.pending_stdin = encode_stdin(stdin)
        try:
            if c.pending_stdin:
                ch.sel.register(c.stdin_w, WRITE, ("cin", c))
            else:
                close_fd(c, "stdin_w")
            _await_end(ch, c, clock, uid, out)
        finally:  # the client hung up (ClientGone) or we broke: its descriptors are not left behind
            ch.kill_candidate(c)
        note = ch.exits.get(c.pid)
        if note is None or note is LOST:  # it never said how the run ended (stopped, killed): not used again
            self._lose()
        if note is LOST:
            out.status, out.exit = "error", None
            out.message = "the program's launcher ended before the program did (the program killed it)"
        return run.end(ch, c, out, spare=set() if self.lost else {self.c.pid})

    def close(self) -> None:
        self._lose()
        self.ch.kill_candidate(self.c)


def _parent_of(pid: int) -> int | None:
    """The parent of a living (or not yet reaped) process; 0 while it is reaped, None where there
    is no such process (one reaped while its file is read reads as empty)."""
    st = procfs.stat(pid)
    return None if st is None else st.ppid
