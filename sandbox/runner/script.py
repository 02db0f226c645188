"""A script run: the program as __main__ on stdin, once per stdio case or once for an exec job.

Everything reported comes from what the supervisor observes: the kernel's exit status (the
spawner's note), its own clock, and the pipes it reads. The candidate's only frame is the
syntax check, sent before any of the program's code runs; the candidate closes its control
channel right after, so the program has nothing to forge with (protocol.py checks that
nothing more comes).
"""

from __future__ import annotations

import base64
import contextlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

from . import cleanup, compare_modes, files, framing, limits
from .children import KEEP_BYTES, WRITE, Candidate, Children, OutputMeter, close_fd, exit_reason
from .cpuclock import TestClock, tree_cpu_s, wall_factor_of
from .procfs import run_delay_s

FRAME_ROOM = framing.MAX_FRAME - (1 << 20)  # an exec answer's encoded size, with room for the rest


@dataclass
class ScriptEnd:
    """How one run of the script ended, as the supervisor saw it."""

    syntax_ok: bool = True
    status: str = "finished"
    message: str = ""
    exit: int | None = None
    time_s: float = 0.0
    stdout: bytes = b""
    stderr: bytes = b""
    flag: str = ""


def encode_stdin(text: str) -> bytes:
    """Bytes for the program's stdin; a lone surrogate (which no UTF-8 has) becomes "?"."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace")


class RunSlice:
    """One run of a process: its share of the job's output meter and its time. Opened as the
    run starts (the meter's per-test count restarts); `end` is the one tail of every such
    run (script, compiled process, launched program): kill, the uid's processes killed,
    the time, its output sliced from the meter."""

    def __init__(self, meter: OutputMeter) -> None:
        meter.start_unit()
        self.meter = meter
        self.t0 = time.monotonic()
        self.before = {k: len(v) for k, v in meter.kept.items()}

    def end(self, ch: Children, c: Candidate | None, out: ScriptEnd, spare: set[int] = frozenset()) -> ScriptEnd:
        if c is not None:
            ch.kill_candidate(c)
        cleanup.kill_uids({ch.c_uid}, spare=spare)
        out.time_s = round(time.monotonic() - self.t0, 6)
        kept, before = self.meter.kept, self.before
        out.stdout = bytes(kept["stdout"][before["stdout"]:])
        out.stderr = bytes(kept["stderr"][before["stderr"]:])
        return out


def run_script(ch: Children, meter: OutputMeter, program: str, stdin: str, scratch: str, lim: dict) -> ScriptEnd:
    """Run the program once, its output charged to `meter`; what it printed and how it ended."""
    c = ch.take_candidate("script", meter)
    run = RunSlice(meter)
    # the limit is the CPU the run's processes use, the wall clock a backstop (cpuclock.py)
    uid = ch.c_uid if limits.can_switch_uid() else None
    clock = TestClock(float(lim["timeout_s"]), wall_factor_of(lim), run.t0, tree_cpu_s(c.pid, uid))
    out = ScriptEnd()
    c.pending_stdin = encode_stdin(stdin)
    if not ch.send_candidate(c, ch.load_message(c, "main", program, scratch, limits.Rlimits.of_job(lim, 1))):
        out.status, out.message = "error", "candidate did not start"
    else:
        feed_stdin(ch, c)
        settled = ch.wait_settled(c, clock.started + clock.hard_s)
        if settled and c.channel.load.syntax_ok is False:
            why = c.channel.load.message
            out.syntax_ok, out.status, out.message, out.exit = False, "error", why, 1
            meter.kept["stderr"] += why.encode("utf-8", "replace") + b"\n"
        else:
            _await_end(ch, c, clock, uid, out)
    return run.end(ch, c, out)


def _await_end(ch: Children, c: Candidate, clock: TestClock, uid: int | None, out: ScriptEnd) -> None:
    """Until the kernel says the program ended and its pipes are drained, or a limit hits."""
    meter = c.meter
    wake, over = clock.first_check, ""
    while (c.open_pipes > 0 or c.pid not in ch.exits) and not c.killed and not meter.over_limit:
        now = time.monotonic()
        if now >= wake:
            alive = c.pid not in ch.exits
            over, wake = clock.check(now, tree_cpu_s(c.pid, uid) if alive else None,
                                     run_delay_s(c.pid) if alive else None)
            if over:
                break
            continue
        ch.pump(wake - now)
    note = ch.exits.get(c.pid)
    if c.violation is not None:
        out.flag = c.violation.flag
        out.status, out.message = "error", f"candidate broke the runner protocol: {c.violation.why}"[:300]
    elif meter.over_limit:
        out.status, out.message = "output_limit", f"output exceeded {meter.limit} bytes"
    elif over or note is None or c.open_pipes > 0:
        out.status, out.message = "timeout", clock.message(over or "wall")
    else:
        judge_exit(note, out)


class StdioRun:
    """stdio tests: the script once per case, its stdout compared here as it arrives
    (compare_modes.matcher); only a short prefix of it is kept, for the report."""

    def __init__(self, ch: Children, msg: dict, scratch: str, emit: Callable[[dict], None]) -> None:
        self.ch = ch
        self.program = msg["program"]
        self.cases = msg["tests"]["cases"]
        self.tol = msg["tests"].get("float_tolerance")
        self.compare = msg["tests"].get("compare") or "lines"  # a named mode (compare_modes.MODES)
        self.lim = msg["limits"]
        self.scratch = scratch
        self.emit = emit
        self.meter = OutputMeter(int(self.lim["output_bytes"]), KEEP_BYTES)
        self.results: list[dict] = []
        self.syntax_ok, self.runs = True, False
        self.flags: set[str] = set()
        self.stop_on_timeout = bool(self.lim.get("stop_on_timeout", True))
        self.keep: set[str] = set()  # names in the scratch that every test runs (a build not cached)
        self.judge = None  # a checker (special judge) where the tests name one: set by checker.attach before prepare

    def keep_in_scratch(self, path: str) -> None:
        """`path` (an artifact the tests run) stays in the scratch when it is reset between tests."""
        if os.path.dirname(path.rstrip("/")) == self.scratch.rstrip("/"):
            self.keep.add(os.path.basename(path.rstrip("/")))

    def prepare(self) -> None:
        pass

    def run(self) -> None:
        n, kept = len(self.cases), self.meter.kept
        if self.judge is not None and not self.judge.prepare():
            return  # the checker does not build: the task's error (answer)
        scratch_times = _times(self.scratch)
        for i, case in enumerate(self.cases):
            # each test starts from an empty scratch, as a fresh judge's would: nothing a
            # test's run wrote (a file, a planted module, a mode) reaches the next test
            reset_scratch(self.scratch, self.ch.c_uid, scratch_times, self.keep)
            mark = len(kept["stdout"])
            matcher = compare_modes.matcher(case.get("compare") or self.compare, case["stdout"], self.tol)
            self.meter.sink = matcher.feed
            if self.judge is not None:
                self.meter.sink = self.judge.capture()  # the whole output, for the checker
            try:
                out = self.run_case(case.get("stdin", ""))
            finally:
                self.meter.sink = None
            if out.flag:
                self.flags.add(out.flag)
            if not out.syntax_ok:
                self.syntax_ok = False
                self.emit({"event": "load", "syntax_ok": False, "runs": False, "message": out.message, "total": n})
                for j in range(n):
                    r = {"status": "error", "time_s": 0.0, "message": "program has a syntax error: " + out.message}
                    self.results.append(r)
                    self.emit({"event": "test", "index": j, **r})
                return
            if i == 0:
                self.emit({"event": "load", "syntax_ok": True, "runs": True, "message": "", "total": n})
            if out.status == "finished" and out.exit == 0:
                self.runs = True
            del kept["stdout"][mark:]  # keep per-job output small: only the first case's is reported
            if i == 0:
                kept["stdout"] += out.stdout[:KEEP_BYTES]
            if out.status != "finished":
                r = {"status": out.status, "message": out.message}
            elif self.judge is not None:
                r = self.judge.check(i, case)
                if r is None:  # it rejected the case's own answer: the task's error (answer)
                    return
            elif matcher.finish():
                r = {"status": "passed", "message": ""}
            else:
                r = {"status": "failed", "message": "wrong output: " + matcher.difference}
            r["time_s"] = out.time_s
            self.results.append(r)
            self.emit({"event": "test", "index": i, **r})
            if out.status == "timeout" and self.stop_on_timeout:
                self._skip_from(i + 1)
                return

    def _skip_from(self, start: int) -> None:
        """A case timed out: the rest are not run (a looping program costs one timeout)."""
        for j in range(start, len(self.cases)):
            r = {"status": "skipped", "time_s": 0.0, "message": "not run: an earlier test timed out (stop_on_timeout)"}
            self.results.append(r)
            self.emit({"event": "test", "index": j, **r})

    def run_case(self, stdin: str) -> ScriptEnd:
        """One case's run (compiled.CompiledRun starts a built program instead)."""
        return run_script(self.ch, self.meter, self.program, stdin, self.scratch, self.lim)

    def answer(self) -> dict:
        kept = self.meter.kept
        kept["stderr"] = kept["stderr"][:KEEP_BYTES]
        passed = sum(1 for r in self.results if r["status"] == "passed")
        done = {"event": "done", "syntax_ok": self.syntax_ok, "runs": self.runs, "message": "", "passed": passed,
                "total": len(self.cases), "tests": self.results, "flags": sorted(self.flags)}
        if self.judge is not None:
            done["flags"] = sorted(self.flags | self.judge.flags)
            done["checker_failures"] = self.judge.broken
            if self.judge.fault:  # the task's error (a checker that does not build or rejects its reference)
                done["error"] = self.judge.fault
        return done

    def stop(self) -> None:
        if self.judge is not None:
            self.judge.release()  # run_script ends each candidate itself


class ExecRun:
    """An exec job (SandboxFusion's run_code): files in, the script once, files out."""

    def __init__(self, ch: Children, msg: dict, scratch: str, emit: Callable[[dict], None]) -> None:
        self.ch = ch
        self.msg = msg
        self.lim = msg["limits"]
        self.scratch = scratch
        out_limit = int(self.lim["output_bytes"])
        self.meter = OutputMeter(out_limit, out_limit)
        self.error = ""  # the job's own input was bad: the program does not run
        self.out = ScriptEnd()
        self.files: dict[str, str] = {}
        self.notes: list[str] = []

    def prepare(self) -> None:
        uid = self.ch.c_uid if limits.can_switch_uid() else None
        self.error = files.write_all(self.scratch, self.msg.get("files", []), uid)

    def run(self) -> None:
        if self.error:
            self.out = ScriptEnd(syntax_ok=False, status="error", message=self.error)
            return
        stdin = self.msg.get("stdin", "")
        self.out = run_script(self.ch, self.meter, self.msg["program"], stdin if isinstance(stdin, str) else "",
                              self.scratch, self.lim)
        # the answer is one frame: what is fetched stays within the output the job may keep
        got, self.notes = files.fetch_all(self.scratch, self.msg.get("fetch_files", []), self.meter.keep)
        self.files = {k: base64.b64encode(v).decode("ascii") for k, v in got.items()}

    def answer(self) -> dict:
        out = self.out
        stderr = out.stderr.decode("utf-8", "replace")
        if self.error:  # the program did not run: its stderr is ours to use
            stderr += f"[runner] {self.error}\n"
        message = "; ".join(([out.message] if out.message else []) + self.notes)[:1000]
        meter = self.meter
        meter.kept = {"stdout": bytearray(), "stderr": bytearray()}  # said once, as exec_stdout/exec_stderr
        stdout, stderr = out.stdout.decode("utf-8", "replace"), stderr
        if len(stdout) + len(stderr) > FRAME_ROOM // 8:
            stdout, stderr, cut = fit_frame(stdout, stderr, self.files)
            meter.truncated = meter.truncated or cut
        return {
            "event": "exec_done",
            "status": out.status if out.syntax_ok else "error",
            "syntax_ok": out.syntax_ok,
            "return_code": out.exit,
            "message": message,  # with why a fetched file was left out
            "time_s": out.time_s,
            "exec_stdout": stdout,
            "exec_stderr": stderr,
            "files": self.files,
            "flags": [out.flag] if out.flag else [],
        }

    def stop(self) -> None:
        pass


def fit_frame(stdout: str, stderr: str, fetched: dict[str, str]) -> tuple[str, str, bool]:
    """Output cut (from the end) until the answer's encoded size fits one frame: JSON escapes
    can make a control byte six. Returns (stdout, stderr, whether anything was cut)."""
    rest = sum(len(k) + len(v) + 8 for k, v in fetched.items())
    cut = False
    while len(framing.encode_frame([stdout, stderr], errors="replace")) + rest > FRAME_ROOM:
        stdout, stderr, cut = stdout[: len(stdout) * 3 // 4], stderr[: len(stderr) * 3 // 4], True
    return stdout, stderr, cut


def _times(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_atime_ns, st.st_mtime_ns


def reset_scratch(scratch: str, uid: int, times: tuple[int, int] | None, keep: set[str] = frozenset()) -> None:
    """The job's scratch back to the empty directory it was made as, between a job's tests,
    once no program of the job runs (a shared harness process waits for its next input):
    entries removed (never following a link), the mode, the times and any extended attribute
    of the directory put back, and what the job's uid left in shared writable directories
    removed. The directory itself stays (the cwd of a launcher or a harness process), and so do
    the entries named in `keep` (the job's own build, where the cache did not take it)."""
    if not keep and cleanup.is_mount(scratch) and cleanup.is_empty_fs(scratch):
        pass  # one statvfs: the usual case
    else:
        try:
            with os.scandir(scratch) as it:
                entries = [e.path for e in it if e.name not in keep]
        except OSError:
            entries = []
        for entry in entries:
            cleanup.remove_entry(entry)
    with contextlib.suppress(OSError):
        os.chmod(scratch, 0o700)  # our own directory (its parent is not the job's): no link to follow
    with contextlib.suppress(OSError):
        for name in os.listxattr(scratch, follow_symlinks=False):
            with contextlib.suppress(OSError):
                os.removexattr(scratch, name, follow_symlinks=False)
    if times is not None:
        with contextlib.suppress(OSError):
            os.utime(scratch, ns=times, follow_symlinks=False)
    if cleanup.world_writable_dirs():
        cleanup.remove_files_of({uid})


def feed_stdin(ch: Children, c: Candidate) -> None:
    """After the start message: the poll loop writes the candidate's stdin, or, with none, its
    pipe is closed at once (EOF)."""
    if c.pending_stdin:
        ch.sel.register(c.stdin_w, WRITE, ("cin", c))
    else:
        ch.sel.unregister(c.stdin_w)
        close_fd(c, "stdin_w")


def judge_exit(note: dict, out: ScriptEnd) -> None:
    """The kernel's exit note of a process that ended in time: a signal, else its exit code."""
    if note.get("signal"):
        out.status, out.message = exit_reason(note)
        out.exit = -int(note["signal"])
    else:
        out.exit = int(note.get("code", 1))
        if out.exit != 0:
            out.status, out.message = "error", f"exit code {out.exit}"
