"""Interactive problems: the program talks to the task's interactor, the supervisor relaying the bytes.

testlib's protocol: `interactor <input> <output>`. The test's input goes to the interactor only: it
lies in the job's InteractorDir, beside the scratch in root's parent directory, owned by the slot's
task uid (`taskprog.task_uid`, never the program's `ch.c_uid`), 0700; the interactor runs as that
uid, in its own jail, from a launcher of its own, and no command line names a file of it, so the
program can neither signal nor trace it, nor read its /proc entries, files, program or memory.
The interactor's stdout is the program's stdin and the reverse; each side has its own pipes and
the supervisor moves the bytes between them (Exchange), so it counts what the program writes
against the output limit (a flood is an output-limit verdict), holds at most RELAY_HOLD bytes for
a side that does not read (the writer then blocks), and sees when neither side moves (a deadlock,
ended at the time limit as a time-limit verdict). Each side has its own limits and its own CPU
clock; the program's time is its own uid's CPU only.

The verdict, in order (testlib's, as Codeforces judges): a limit the program hit (time, a deadlock,
memory, output); an interactor that broke (a crash, FAIL, an exit code testlib does not use, its own
limits) fails the test, flagged `interactor_failed`; the program's crash or non-zero exit where it
ended before the interactor did; the interactor's exit code (1 wrong answer, 2 presentation error, 7
points); with the interactor's OK, the program's own exit status, then the task's checker (if any) on
the interactor's output file. A program killed by a broken pipe after the interactor said WA is WA.
"""
from __future__ import annotations

import contextlib
import os
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass

from . import checker, cleanup, flags, limits, procfs, taskprog
from .children import READ, WRITE, Candidate, Children, InfraFailure, close_fd, exit_reason
from .compile_cache import remove_entry_at
from .compiled import CompiledRun, job_env
from .cpuclock import TestClock, process_cpu_s, tree_cpu_s, wall_factor_of
from .launcher import LAUNCHER_MIN_DATA_MB, LOST, Launcher, Limits
from .procfs import run_delay_s
from .script import ScriptEnd, StdioRun, _times, judge_exit, reset_scratch

RELAY_CHUNK = 1 << 16
RELAY_HOLD = 1 << 20  # bytes held for a side that does not read; past this its writer waits
INTERACTOR_OUTPUT_BYTES = 64 << 20  # what an interactor may write to the program in one test
TOUT_BYTES = 16 << 20  # the interactor's output file, as read back for a checker
POLL_S = 0.05  # how often a running exchange is looked at for a deadlock
ENDED_WAIT_S = 0.25  # for the exit note of a program whose output ended first
PYTHON_FAILURES = (b"Traceback (most recent call last)", b"can't open file")  # python's own exits 1 and 2
INPUT, TOUT = "input.txt", "tout.txt"  # in the job's InteractorDir, the interactor's cwd


def read_tout(tdir: InteractorDir, most: int = TOUT_BYTES) -> bytes:
    """The interactor's output file (testlib's tout), read from its directory's descriptor: a
    regular file only, never followed."""
    try:
        fd = os.open(TOUT, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=tdir.fd)
    except OSError:
        return b""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return b""
        return os.read(fd, most)
    finally:
        os.close(fd)


class InteractorDir(taskprog.TaskDir):
    """The job's directory for its interactor: its installed build, each test's input and its
    output file. Beside the scratch (`<scratch>.task`), not in it: the program's processes run while
    the interactor does, and the scratch is theirs (they could rename an entry there, and its 0700
    keeps the task uid from searching it by path, which an interpreter that makes its script's path
    absolute does). The directory above is root's: no process of the job can add or move an entry
    there. Made by root where nothing of the job's is (what was left at the name removed, never
    followed), owned by the task uid, 0700; written from its descriptor."""

    def __init__(self, ch: Children, scratch: str) -> None:
        self.uid = taskprog.task_uid(ch)
        self.parent, self.name = os.path.split(scratch.rstrip("/"))
        self.name += ".task"
        self.path = os.path.join(self.parent, self.name)
        pfd = os.open(self.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            remove_entry_at(pfd, self.name)
            os.mkdir(self.name, 0o700, dir_fd=pfd)
            self.fd = os.open(self.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=pfd)
        finally:
            os.close(pfd)
        if self.uid is not None:
            os.fchown(self.fd, self.uid, self.uid)
        os.fchmod(self.fd, 0o700)
        self.installed = ""

    def unlink(self, name: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=self.fd)

    def remove(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        with contextlib.suppress(OSError):
            pfd = os.open(self.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
            try:
                remove_entry_at(pfd, self.name)
            finally:
                os.close(pfd)


def read_build(art: str) -> dict[str, bytes]:
    """A cached build's regular files (root's, one level: compiled._keep), read by descriptor;
    ValueError where they are too large to install per job (the task's), OSError (ours)."""
    out: dict[str, bytes] = {}
    dfd = os.open(art, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        for fname in os.listdir(dfd):
            fd = os.open(fname, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dfd)
            with os.fdopen(fd, "rb") as f:
                if stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                    out[fname] = f.read(taskprog.INSTALL_BYTES + 1)
            if sum(map(len, out.values())) > taskprog.INSTALL_BYTES:
                raise ValueError(f"its build is larger than {taskprog.INSTALL_BYTES >> 20} MiB")
    finally:
        os.close(dfd)
    return out


class Exchange:
    """One test's conversation: the program's stdout to the interactor's stdin and the reverse,
    through buffers of ours. The interactor's side is attached as soon as its process exists
    (before any byte of it can be read), the program's once it is taken; the interactor's stderr
    goes to its own meter (testlib's comment)."""

    def __init__(self, ch: Children) -> None:
        self.ch = ch
        self.p: Candidate | None = None
        self.i: Candidate | None = None
        self.to_i, self.to_p = bytearray(), bytearray()
        self.moved = 0  # bytes read from either side (progress, for the deadlock watch)
        self.i_out = 0
        self.i_over = False
        self.p_eof = self.i_eof = False  # the stdout of each: ended (or no longer read)
        self.eofs: list[str] = []  # whose stdout ended ("p", "i"), in the order this loop read the ends
        self.paused: set[int] = set()

    def attach_interactor(self, i: Candidate) -> None:
        self.i = i
        self.ch.exits.pop(i.pid, None)  # a note of an earlier holder of the pid is not this one's
        self.ch.sel.unregister(i.stdout_r)
        self.ch.sel.register(i.stdout_r, READ, ("call", self._from_itr))

    def attach_program(self, p: Candidate) -> None:
        self.p = p
        self.ch.sel.unregister(p.stdout_r)
        self.ch.sel.register(p.stdout_r, READ, ("call", self._from_prog))
        if self.to_p:  # what the interactor said before the program existed
            self._want_write(p.stdin_w, self._to_prog)
        elif self.i_eof:
            self._close(p, "stdin_w")

    # --------------------------------------------------------------- the relay
    def _read(self, fd: int) -> bytes | None:
        try:
            return os.read(fd, RELAY_CHUNK)
        except (BlockingIOError, InterruptedError):
            return None
        except OSError:
            return b""

    def _close(self, c: Candidate | None, attr: str) -> None:
        fd = -1 if c is None else getattr(c, attr)
        if fd >= 0:
            self.ch.sel.unregister(fd)
            self.paused.discard(fd)
            close_fd(c, attr)
            if attr == "stdout_r":
                c.open_pipes -= 1

    def _from_prog(self) -> None:
        p, i = self.p, self.i
        data = self._read(p.stdout_r)
        if data is None:
            return
        if not data:
            self.p_eof = True
            self.eofs.append("p")
            self._close(p, "stdout_r")
            if not self.to_i:
                self._close(i, "stdin_w")  # the interactor reads the end of the program's output
            return
        self.moved += len(data)
        p.meter.charge("stdout", data, None)  # its output limit; the report keeps a prefix
        if p.meter.over_limit or i.stdin_w < 0:
            return
        self.to_i += data
        self._want_write(i.stdin_w, self._to_itr)
        if len(self.to_i) >= RELAY_HOLD:
            self._pause(p.stdout_r)

    def _to_itr(self) -> None:
        p, i = self.p, self.i
        try:
            n = os.write(i.stdin_w, self.to_i[:RELAY_CHUNK])
        except (BlockingIOError, InterruptedError):
            return
        except OSError:  # the interactor closed its input (or ended): the program's next write breaks
            self.to_i.clear()
            self._close(i, "stdin_w")
            self.p_eof = True
            self._close(p, "stdout_r")
            return
        del self.to_i[:n]
        if len(self.to_i) < RELAY_HOLD and p.stdout_r in self.paused:
            self._resume(p.stdout_r, self._from_prog)
        if not self.to_i:
            self.ch.sel.unregister(i.stdin_w)
            if self.p_eof:
                self._close(i, "stdin_w")

    def _from_itr(self) -> None:
        p, i = self.p, self.i
        data = self._read(i.stdout_r)
        if data is None:
            return
        if not data:
            self.i_eof = True
            self.eofs.append("i")
            self._close(i, "stdout_r")
            if not self.to_p:
                self._close(p, "stdin_w")  # the program reads the end of its input
            return
        self.moved += len(data)
        self.i_out += len(data)
        if self.i_out > INTERACTOR_OUTPUT_BYTES:
            self.i_over = True
            return
        if p is not None and p.stdin_w < 0:
            return
        self.to_p += data
        if p is not None:
            self._want_write(p.stdin_w, self._to_prog)
        if len(self.to_p) >= RELAY_HOLD:
            self._pause(i.stdout_r)

    def _to_prog(self) -> None:
        p, i = self.p, self.i
        try:
            n = os.write(p.stdin_w, self.to_p[:RELAY_CHUNK])
        except (BlockingIOError, InterruptedError):
            return
        except OSError:  # the program closed its input (or ended): the interactor's next write breaks
            self.to_p.clear()
            self._close(p, "stdin_w")
            self.i_eof = True
            self._close(i, "stdout_r")
            return
        del self.to_p[:n]
        if len(self.to_p) < RELAY_HOLD and i.stdout_r in self.paused:
            self._resume(i.stdout_r, self._from_itr)
        if not self.to_p:
            self.ch.sel.unregister(p.stdin_w)
            if self.i_eof:
                self._close(p, "stdin_w")

    def _want_write(self, fd: int, fn: Callable[[], None]) -> None:
        if fd >= 0 and fd not in self.ch.sel.data:
            self.ch.sel.register(fd, WRITE, ("call", fn))

    def _pause(self, fd: int) -> None:
        if fd >= 0 and fd not in self.paused:
            self.ch.sel.unregister(fd)
            self.paused.add(fd)

    def _resume(self, fd: int, fn: Callable[[], None]) -> None:
        self.paused.discard(fd)
        self.ch.sel.register(fd, READ, ("call", fn))

    def close(self) -> None:
        for c, attr in ((self.p, "stdout_r"), (self.p, "stdin_w"), (self.i, "stdin_w"), (self.i, "stdout_r")):
            self._close(c, attr)


@dataclass
class Ending:
    """How one test's exchange ended, as the supervisor saw it."""

    prog_limit: str = ""  # cpu | hard (its clock) | deadlock | output | protocol
    itr_limit: str = ""  # cpu | hard (its clock) | output | idle
    prog_note: dict | None = None  # the kernel's word on how each ended
    itr_note: dict | None = None
    prog_first: bool = False  # the program ended before the interactor did


def converse(ch: Children, x: Exchange, clock: TestClock, iclock: TestClock, idle_s: float) -> Ending:
    """Until both sides ended (or the interactor ended with anything but OK: its word decides, the
    program is not waited for), or a limit hit; then both are killed and their ends read.

    Each side's limit is its CPU; no side's wall clock runs out while the other works (a program
    waiting for a slow interactor is not slow): instead a test in which no byte moved and neither
    side used CPU for `idle_s` ends (a deadlock, or a side that sleeps), and the hard cap bounds it."""
    p, i = x.p, x.i
    for c in (clock, iclock):
        c.wall_s = c.hard_s  # the backstop is the idle watch below
    p_uid = ch.c_uid if limits.can_switch_uid() else None
    end = Ending()
    order: list[int] = []
    wake = time.monotonic() + POLL_S
    last = (-1, -1.0)
    progress_at = clock.started
    while True:
        _note_order(ch, (p.pid, i.pid), order)
        p_gone, i_gone = p.pid in ch.exits, i.pid in ch.exits
        if p.violation is not None:
            end.prog_limit = "protocol"
            break
        if p.meter.over_limit:
            end.prog_limit = "output"
            break
        if x.i_over:
            end.itr_limit = "output"
            break
        if i_gone and ch.exits[i.pid] != {"code": checker.OK, "signal": 0}:
            break
        if p_gone and p.open_pipes <= 0 and i_gone and i.open_pipes <= 0:
            break
        now = time.monotonic()
        if now < wake:
            ch.pump(wake - now)
            continue
        p_cpu = None if p_gone else tree_cpu_s(p.pid, p_uid)
        i_cpu = None if i_gone else tree_cpu_s(i.pid, None)
        if not p_gone and (over := clock.check(now, p_cpu, run_delay_s(p.pid))[0]):
            end.prog_limit = over
            break
        if not i_gone and (over := iclock.check(now, i_cpu, run_delay_s(i.pid))[0]):
            end.itr_limit = over
            break
        if p_gone and p.open_pipes > 0 and now >= clock.started + clock.hard_s:
            end.prog_limit = "hard"  # ended, but a process it left holds its output open
            break
        mark = (x.moved, (p_cpu or 0.0) + (i_cpu or 0.0))
        if mark[0] != last[0] or mark[1] > last[1] + 1e-3 or _runnable(p.pid) or _runnable(i.pid):
            last, progress_at = mark, now  # a side waiting for a CPU (a loaded host) is not idle
        elif now - progress_at >= idle_s:  # neither moved a byte nor used CPU for the time limit
            if p_gone:
                end.itr_limit = "idle"  # it waits for nothing: the program has ended
            else:
                end.prog_limit = "deadlock"
            break
        wake = now + POLL_S
    if x.eofs[:1] == ["p"]:  # its output ended first: did it end, or only close its stdout? (a moment to say)
        ch.wait_exit(p.pid, ENDED_WAIT_S)
    ended_itself = p.pid in ch.exits  # before we kill it
    ch.kill_candidate(p)
    ch.kill_candidate(i)
    x.close()
    deadline = time.monotonic() + 0.5  # how each ended: the kernel's word, usually here already
    while (p.pid not in ch.exits or i.pid not in ch.exits) and time.monotonic() < deadline:
        ch.pump(deadline - time.monotonic())
    _note_order(ch, (p.pid, i.pid), order)
    end.prog_note, end.itr_note = ch.exits.get(p.pid), ch.exits.get(i.pid)
    # who ended first: the end of whose output the relay read first (causal: the other side's end
    # of input comes only after that), else the order of the kernel's exit notes
    end.prog_first = ended_itself and (x.eofs[0] == "p" if x.eofs else bool(order) and order[0] == p.pid)
    return end


def _runnable(pid: int) -> bool:
    """Whether `pid` runs or waits for a CPU (not blocked on a read, a sleep, or gone)."""
    st = procfs.stat(pid)
    return st is not None and st.state == "R"


def _note_order(ch: Children, pids: tuple[int, int], order: list[int]) -> None:
    """Append to `order` the pids whose exit notes came, in the order the spawner sent them (the
    notes' dict keeps it; a stale note of a pid's earlier holder was dropped when it was taken)."""
    if len(order) < 2:
        order.extend(k for k in ch.exits if k in pids and k not in order)


def interactor_verdict(end: Ending, python: bool, err: bytes, limit_s: float) -> checker.Verdict:
    """The interactor's verdict (testlib's exit codes, checker.read_verdict), or `broken` with why:
    a limit of its own, a signal, FAIL, a code testlib does not use, a Python traceback."""
    if end.itr_limit == "output":
        return checker.Verdict("broken", message=f"it wrote more than {INTERACTOR_OUTPUT_BYTES} bytes to the program")
    if end.itr_limit == "idle":
        return checker.Verdict("broken", message="it neither ended nor used CPU after the program ended")
    if end.itr_limit:
        return checker.Verdict("broken", message=f"it ran past its limit ({limit_s:g} s of CPU)")
    if end.itr_note is None:
        return checker.Verdict("broken", message="it did not end")
    if end.itr_note is LOST:
        return checker.Verdict("broken", message="its launcher ended before it did")
    out = ScriptEnd(stderr=err)
    judge_exit(end.itr_note, out)
    if out.exit is not None and out.exit < 0:
        return checker.Verdict("broken", message=out.message)
    if python and out.exit in (1, 2) and any(m in err for m in PYTHON_FAILURES):  # 1, 2: WA, PE for testlib
        return checker.Verdict("broken", message="python: " + _last_line(err))
    v = checker.read_verdict(out)
    if v.kind == "broken":
        v.message = f"exit code {out.exit}" + (f": {_last_line(err)}" if err.strip() else "")
        if out.exit == checker.FAIL:
            v.message = "it said FAIL" + (f": {_last_line(err)}" if err.strip() else "")
    return v


def _last_line(err: bytes) -> str:
    lines = [ln for ln in err.decode("utf-8", "replace").splitlines() if ln.strip()]
    return lines[-1].strip()[:200] if lines else ""


class InteractiveRun(StdioRun):
    """stdio tests with an interactor: per test the interactor and the program, each its own
    process, talking through the supervisor (Exchange); the verdict as the module says, then the
    task's checker (if any) on the interactor's output file."""

    def __init__(self, ch: Children, msg: dict, scratch: str, emit: Callable[[dict], None]) -> None:
        super().__init__(ch, msg, scratch, emit)
        self.spec = msg["tests"]["interactor"]
        self.job_msg = msg
        self.task_error = ""
        self.itr: taskprog.TaskProgram | None = None
        self.itr_meter = taskprog.task_meter()  # its stderr (testlib's comment); never the program's meter
        self.tdir: InteractorDir | None = None
        self.native = False
        self.ilauncher: Launcher | None = None

    def prepare(self) -> None:
        self.prepare_interactor()

    def prepare_interactor(self) -> None:
        """Build the interactor before any process of the program runs; a build that fails is the task's error."""
        testlib_h = self.job_msg.get("testlib_h")
        self.itr = taskprog.build_program(self.ch, self.spec if isinstance(self.spec, dict) else {}, self.scratch,
                                          self.job_msg, testlib_h if isinstance(testlib_h, str) else None)
        if self.itr.ok and self.itr.lang is taskprog.PYTHON_TASK:
            try:  # its source is its artifact: compiled here (never run), so a syntax error is the task's
                compile(self.itr.source, "interactor.py", "exec", dont_inherit=True)
            except (SyntaxError, ValueError, OverflowError, MemoryError, RecursionError) as exc:
                self.itr.error = f"it does not compile: {type(exc).__name__}: {exc}"
        if not self.itr.ok:
            self.task_error = f"the interactor cannot run: {self.itr.error}"[:1000]
        else:
            # it runs beside the program, whose uid reads any process's command line: no path there
            # names its build. A built executable runs from the cache (the one place a host lets
            # programs be exec'ed) under the name "interactor"; a program an interpreter or a VM
            # reads (Python, Java, node) from the job's InteractorDir (0700, the task uid's)
            self.native = self.itr.lang.run[0].startswith("{art}")
            try:
                if not self.native and not self.itr.files:
                    self.itr.files = read_build(self.itr.built.art)
                self.tdir = InteractorDir(self.ch, self.scratch)
            except ValueError as exc:
                self.task_error = f"the interactor cannot run: {exc}"
            except OSError as exc:
                raise InfraFailure(f"cannot place the interactor: {exc}") from None

    def run(self) -> None:
        if self.task_error:
            return
        if self.judge is not None and not self.judge.prepare():
            return  # the checker does not build: the task's error (StdioRun.answer)
        n, kept = len(self.cases), self.meter.kept
        scratch_times = _times(self.scratch)
        for idx, case in enumerate(self.cases):
            reset_scratch(self.scratch, self.ch.c_uid, scratch_times, self.keep)
            mark = len(kept["stdout"])
            r, syntax = self.run_interactive(idx, case)
            if syntax is not None:  # the program does not compile: every test says so
                self.syntax_ok = False
                self.emit({"event": "load", "syntax_ok": False, "runs": False, "message": syntax, "total": n})
                for j in range(n):
                    res = {"status": "error", "time_s": 0.0, "message": "program has a syntax error: " + syntax}
                    self.results.append(res)
                    self.emit({"event": "test", "index": j, **res})
                return
            if r is None:  # the checker rejected the case's own answer: the task's error
                return
            if idx == 0:
                self.emit({"event": "load", "syntax_ok": True, "runs": True, "message": "", "total": n})
            first = bytes(kept["stdout"][mark:mark + KEEP_STDOUT])
            del kept["stdout"][mark:]  # as StdioRun: only the first case's output is reported
            if idx == 0:
                kept["stdout"] += first
            self.results.append(r)
            self.emit({"event": "test", "index": idx, **r})
            if r["status"] == "timeout" and self.stop_on_timeout:
                self._skip_from(idx + 1)
                return

    # -------------------------------------------------------------- one test
    def start_program(self, c: Candidate) -> str:
        """Send the program its start message; "" where it starts, else why not."""
        msg = self.ch.load_message(c, "main", self.program, self.scratch, limits.Rlimits.of_job(self.lim, 1))
        return "" if self.ch.send_candidate(c, msg) else "the program did not start"

    def settle_program(self, c: Candidate, deadline: float) -> str | None:
        """Wait for a Python program's syntax check: the message of a syntax error, else None."""
        if self.ch.wait_settled(c, deadline) and c.channel.load.syntax_ok is False:
            return c.channel.load.message or "syntax error"
        return None

    def run_interactive(self, idx: int, case: dict) -> tuple[dict | None, str | None]:
        """One test: (its result, None), or (None, None) where the checker refused the case's
        answer, or ({}, message) where the program has a syntax error."""
        ch, itr = self.ch, self.itr
        timeout = float(self.lim["timeout_s"])
        t0 = time.monotonic()
        tdir = self.tdir
        tdir.write(INPUT, case.get("stdin", "").encode("utf-8", "surrogateescape"))
        tdir.unlink(TOUT)
        x = Exchange(ch)
        ilim = self.interactor_limits()
        err_mark = len(self.itr_meter.kept["stderr"])
        # the interactor first, its pipes the relay's before any byte of it is read
        i, iclock, why = self.begin_interactor(x, ilim)
        if i is None:
            self.flags.add(flags.INTERACTOR_FAILED)
            return self._result("failed", f"the interactor failed: {why}", t0), None
        self.meter.start_unit()
        p, clock, why, syntax = self.begin_program(x, timeout)
        if p is None or why or syntax is not None:
            x.close()
            if p is not None:
                ch.kill_candidate(p)
            self._finish_interactor(i)
            self._end_test()
            return ({}, syntax) if syntax is not None else (self._result("error", why, t0), None)
        end = converse(ch, x, clock, iclock, idle_s=timeout)
        self._finish_interactor(i)
        self._end_test()
        if end.prog_note == {"code": 0, "signal": 0}:
            self.runs = True
        err = bytes(self.itr_meter.kept["stderr"][err_mark:])
        del self.itr_meter.kept["stderr"][err_mark:]
        r = self.verdict(end, clock, interactor_verdict(end, itr.lang is taskprog.PYTHON_TASK, err, ilim.timeout_s))
        tout = read_tout(tdir) if r is None and self.judge is not None else b""
        if r is None:  # the interactor said OK and the program ended cleanly
            r = self.check(idx, case, tout)
            if r is None:
                return None, None
        r["time_s"] = round(time.monotonic() - t0, 6)
        return r, None

    def begin_interactor(self, x: Exchange, ilim: Limits) -> tuple[Candidate | None, TestClock, str]:
        """The test's interactor, started and attached to the exchange (its clock), or why not.
        Started by a launcher of the task uid kept for the job (one jail, a posix_spawn per test;
        jailed before the program's launcher, so the slot's memory cgroup keeps the program's
        limit, which the last process to join sets); a fresh process where none comes up."""
        ch, itr, tdir = self.ch, self.itr, self.tdir
        argv = itr.argv(tdir, INPUT, TOUT, memory_mb=ilim.data_mb - itr.lang.run_overhead_mb)
        path = ""
        if self.native:  # exec'ed from the cache by path; its command line names no file
            path, argv[0] = argv[0], "interactor"
        lz = self.ilauncher
        if lz is not None and not lz.usable():
            lz.close()
            lz = self.ilauncher = None
        if lz is None and ilim.data_mb >= LAUNCHER_MIN_DATA_MB:
            lz = self.ilauncher = Launcher.start(ch, self.itr_meter, argv, taskprog.task_env(itr.lang, tdir.path),
                                                 tdir.path, ilim, uid=taskprog.task_uid(ch), path=path)
            self.close_program_launcher()  # the program's, jailed after it again (the cgroup's limit)
        if lz is None:
            i, iclock, iend = taskprog.start(ch, self.itr_meter, argv, tdir.path, ilim, on_take=x.attach_interactor,
                                             path=path)
            return i, iclock, iend.message
        got = lz.launch()
        if isinstance(got, str):
            return None, TestClock(ilim.timeout_s, 1.0, time.monotonic(), None), got
        x.attach_interactor(got)
        return got, TestClock(ilim.timeout_s, ilim.wall_factor, time.monotonic(), _cpu_from_exec(got.pid, None)), ""

    def begin_program(self, x: Exchange, timeout: float) -> tuple[Candidate | None, TestClock, str, str | None]:
        """The program started and attached to the exchange, with its clock; `why` it did not
        start, or the message of its syntax error (a Python program: checked before it runs)."""
        ch = self.ch
        p = ch.take_candidate("script", self.meter)
        ch.exits.pop(p.pid, None)  # a note of an earlier holder of the pid is not this one's
        x.attach_program(p)
        clock = TestClock(timeout, wall_factor_of(self.lim), time.monotonic(), tree_cpu_s(p.pid, _c_uid(ch)))
        why = self.start_program(p)
        syntax = None if why else self.settle_program(p, clock.started + clock.hard_s)
        return p, clock, why, syntax

    def close_program_launcher(self) -> None:
        pass  # a Python program is a fresh process each test

    def spare(self) -> set[int]:
        """Processes of the job that outlive a test: its launchers (the interactor's, the checker's)."""
        runner = getattr(self.judge, "runner", None)
        found = (self.ilauncher, getattr(runner, "launcher", None))
        return {lz.c.pid for lz in found if lz is not None and not lz.lost}

    def _finish_interactor(self, i: Candidate) -> None:
        """The test's interactor and every other process of the task uid end (its launcher, the
        verdict process spared)."""
        self.ch.kill_candidate(i)
        uid = taskprog.task_uid(self.ch)
        if uid is not None:
            keep = self.spare() | ({self.ch.v.pid} if self.ch.v is not None else set())
            cleanup.kill_uids({uid}, spare=keep)

    def _end_test(self) -> None:
        """The program's processes end (every process of its uid but the job's launcher)."""
        cleanup.kill_uids({self.ch.c_uid}, spare=self.spare())

    def interactor_limits(self) -> Limits:
        """taskprog's limits for a task program, its CPU the program's limit twice and a second (it
        answers every query the program makes), its files at most TOUT_BYTES."""
        lim = taskprog.task_limits(self.itr.lang, self.lim)
        lim.timeout_s = 2 * float(self.lim["timeout_s"]) + 1
        # its directory is on the file system every slot's shares (beside the scratches): its output
        # file at most what is read back of it, so no job's interactor fills it for another's
        lim.fsize_mb = TOUT_BYTES >> 20
        lim.wall_factor = wall_factor_of(self.lim)
        return lim

    def verdict(self, end: Ending, clock: TestClock, v: checker.Verdict) -> dict | None:
        """The test's result from how both sides ended; None: the interactor said OK and the
        program ended cleanly (the checker's turn, if any)."""
        if end.prog_limit == "output":
            return {"status": "output_limit", "message": f"output exceeded {self.meter.limit} bytes"}
        if end.prog_limit == "deadlock":
            return {"status": "timeout", "message": f"time limit exceeded: the program and the interactor waited "
                                                    f"{clock.limit_s:g} s for each other (a deadlock)"}
        if end.prog_limit == "protocol":
            return {"status": "error", "message": "the program broke the runner protocol"}
        if end.prog_limit:
            return {"status": "timeout", "message": clock.message(end.prog_limit)}
        if v.kind == "broken":  # flagged, whoever ended first: an operator sees interactors that break
            self.flags.add(flags.INTERACTOR_FAILED)
            return {"status": "failed", "message": f"the interactor failed: {v.message}"[:300]}
        pnote = end.prog_note
        p_bad = pnote is None or bool(pnote.get("signal")) or int(pnote.get("code", 1)) != 0
        if p_bad and end.prog_first and pnote is not None:
            return _program_failure(pnote)  # it failed by itself before the interactor judged it
        if v.kind in ("wa", "pe"):
            what = "wrong answer" if v.kind == "wa" else "presentation error"
            return {"status": "failed", "message": f"{what} (interactor: {v.message or 'no comment'})"[:300]}
        if v.kind == "points" and v.score < 1.0:
            return {"status": "failed", "score": v.score, "message": f"interactor: partial credit {v.score:g}: "
                                                                     f"{v.message}"[:300]}
        if p_bad:  # the interactor said OK; the program did not end well by itself
            return _program_failure(pnote) if pnote is not None else {"status": "timeout",
                                                                      "message": clock.message("wall")}
        return None

    def check(self, idx: int, case: dict, tout: bytes) -> dict | None:
        """After the interactor's OK: passed, or the task's checker on (input, the interactor's
        output file, the case's answer), testlib's and Codeforces' convention."""
        if self.judge is None:
            return {"status": "passed", "message": ""}
        sink = self.judge.capture()
        sink(tout)
        return self.judge.check(idx, case)

    def _result(self, status: str, message: str, t0: float) -> dict:
        return {"status": status, "message": message[:300], "time_s": round(time.monotonic() - t0, 6)}

    def answer(self) -> dict:
        if self.task_error:
            return {"event": "done", "error": self.task_error, "syntax_ok": False, "runs": False, "passed": 0,
                    "total": 0, "tests": [], "flags": []}
        return super().answer()

    def stop(self) -> None:
        super().stop()
        if self.itr is not None:
            self.itr.release()
            self.itr = None
        if self.ilauncher is not None:
            self.ilauncher.close()
            self.ilauncher = None
        if self.tdir is not None:
            taskprog.finish(self.ch, None)  # no process of the task uid holds it open
            self.tdir.remove()
            self.tdir = None


def _c_uid(ch: Children) -> int | None:
    return ch.c_uid if limits.can_switch_uid() else None


def _cpu_from_exec(pid: int, uid: int | None) -> float | None:
    """A launched process's CPU clock start: it has run a moment since its exec, which counts."""
    start = tree_cpu_s(pid, uid)
    return None if start is None else start - (process_cpu_s(pid) or 0.0)


KEEP_STDOUT = 4096  # of the first test's output, kept for the report (the program's queries)


def _program_failure(note: dict) -> dict:
    if note.get("signal"):
        status, message = exit_reason(note)
        return {"status": status, "message": message}
    return {"status": "error", "message": f"exit code {note.get('code')}"}


class CompiledInteractiveRun(CompiledRun, InteractiveRun):
    """An interactive problem's program in a compiled language: built as CompiledRun builds it
    (after the interactor), each test a fresh process that execs it (no shared harness or
    launcher: its pipes are the exchange's)."""

    def prepare(self) -> None:
        self.prepare_interactor()
        if not self.task_error:
            CompiledRun.prepare(self)

    def _shared_process(self) -> None:
        return None

    def run(self) -> None:
        if not self.task_error:
            CompiledRun.run(self)

    def begin_program(self, x: Exchange, timeout: float) -> tuple[Candidate | None, TestClock, str, str | None]:
        """As CompiledRun runs a test's program: from the job's launcher (one jail, a posix_spawn
        per test) where one comes up, else a fresh process that execs it."""
        lz = self.launcher
        if lz is not None and not lz.usable():
            self.close_program_launcher()
            lz = None
        if lz is None and self.plim.data_mb >= LAUNCHER_MIN_DATA_MB:
            lz = self.launcher = Launcher.start(self.ch, self.meter, self.argv, self.env, self.scratch, self.plim)
        if lz is None:
            return super().begin_program(x, timeout)
        got = lz.launch()
        if isinstance(got, str):
            return None, TestClock(timeout, 1.0, time.monotonic(), None), got, None
        x.attach_program(got)
        return got, TestClock(timeout, wall_factor_of(self.lim), time.monotonic(),
                              _cpu_from_exec(got.pid, _c_uid(self.ch))), "", None

    def close_program_launcher(self) -> None:
        if self.launcher is not None:
            self.launcher.close()
            self.launcher = None

    def spare(self) -> set[int]:
        lz = self.launcher
        return super().spare() | ({lz.c.pid} if lz is not None and not lz.lost else set())

    def start_program(self, c: Candidate) -> str:
        rl = self.plim.rlimits(self.plim.timeout_s + 1, cpu_grace_s=1)
        msg = self.ch.load_message(c, "execve", "", self.scratch, rl)
        msg.update(argv=self.argv, env=job_env(self.lang, self.scratch), compile_view=False)
        return "" if self.ch.send_candidate(c, msg) else "the program did not start"

    def settle_program(self, c: Candidate, deadline: float) -> str | None:
        return None  # built already: its compile said whether it compiles
