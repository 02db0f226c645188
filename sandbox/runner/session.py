"""A session run: one candidate process kept alive across calls, on a session slot's connection.

The candidate is forked from the slot's spawner as any job's is (the slot's uid, scratch with
quotas, /dev/shm, memory cgroup, seccomp, Landlock, rlimits: RLIMIT_CPU is the session's CPU
budget) and runs `repl.serve`. Per execute the supervisor resumes it (SIGCONT), sends the cell,
and watches it under a TestClock of the call's limit (wall clock and CPU alike); at the limit, or
past the output cap, it sends SIGINT once and waits GRACE_S for the answer. One that does not
come (the code caught the interrupt, or loops in C) costs the process: the session is lost.
After each call the session's other processes are killed (only the interpreter outlives a
call) and the interpreter is stopped (SIGSTOP): an idle session holds memory, never CPU.

What the candidate says (the result, the exception) is its own word, passed on to its client;
the status, times and output are what the supervisor observed. Nothing here is used to grade.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable

from . import cleanup, files, limits
from .children import READ_BYTES, Candidate, Children, InfraFailure, OutputMeter, close_fd, exit_reason
from .cpuclock import TestClock, tree_cpu_s

GRACE_S = 2.0  # for an interrupted cell to answer before its process is killed (a loaded machine's turn included)
OUTPUT_LIMIT = 8 << 20  # bytes one call may write (stdout + stderr) before it is interrupted
KEEP_BYTES = 1 << 20  # kept per stream and call
START_S = 10.0  # for a fresh interpreter to say it is ready
REAP_WAIT_S = 0.5  # for a call's killed processes to be gone
NOFILE = 64
FSIZE_MB = 16


class SessionRun:
    """One session: opened once (`open`), then `execute` per call until the connection ends or
    the session is lost; `stop` kills its processes (idempotent)."""

    def __init__(self, ch: Children, msg: dict, scratch: str, emit: Callable[[dict], None]) -> None:
        self.ch = ch
        self.msg = msg
        self.scratch = scratch
        self.emit = emit
        self.c: Candidate | None = None
        self.meter = OutputMeter(OUTPUT_LIMIT, KEEP_BYTES)
        self.lost = ""  # why the session is gone ("" while it lives)
        self.settle = False  # a call has answered: its processes are to be killed, the interpreter stopped
        self.cpu_total = 0.0
        self.uid = ch.c_uid if limits.can_switch_uid() else None

    # ------------------------------------------------------------------ life cycle
    def open(self) -> dict:
        """Files in place, the interpreter forked and ready: the answer to the open message."""
        msg, ch = self.msg, self.ch
        error = files.write_all(self.scratch, msg.get("files", []), self.uid)
        if error:
            return {"event": "session_error", "message": error}
        rl = limits.Rlimits(memory_mb=int(msg["memory_mb"]), nproc=int(msg["nproc"]), fsize_mb=FSIZE_MB,
                            nofile=NOFILE, cpu_s=max(1, int(float(msg["cpu_budget_s"]))) + 1, cpu_grace_s=1)
        c = self.c = ch.take_candidate("session", self.meter)
        if not ch.send_candidate(c, ch.load_message(c, "session", "", self.scratch, rl)):
            raise InfraFailure("session interpreter did not start")
        deadline = time.monotonic() + START_S
        while c.channel.state == "ready" and not (c.eof or c.killed or c.pid in ch.exits):
            if time.monotonic() >= deadline:
                break
            ch.pump(deadline - time.monotonic())
        if c.channel.state != "reply":
            self.stop()
            raise InfraFailure("session interpreter did not say it was ready")
        close_fd(c, "stdin_w")  # its fd 0 reads EOF, as a kernel's without a terminal: each call's stdin is sys.stdin
        self.idle()
        return {"event": "session_ready", "pid": c.pid}

    def stop(self) -> None:
        if self.c is not None and not self.c.killed:
            self.ch.kill_candidate(self.c)

    def idle(self) -> None:
        """Between calls: only the interpreter lives, and it is stopped (after each call's answer
        is out, before the next call is read)."""
        c = self.c
        assert c is not None
        self.settle = False
        if cleanup.kill_uids({self.ch.c_uid}, spare={c.pid}):
            # dead before the next call: the interpreter reaps them then, so they never hold its nproc
            deadline = time.monotonic() + REAP_WAIT_S
            while any(pid != c.pid for pid, _ in cleanup.processes_of({self.ch.c_uid})):
                if time.monotonic() >= deadline:
                    break
                time.sleep(0.001)
        try:
            os.kill(c.pid, signal.SIGSTOP)
        except OSError:
            pass

    # ------------------------------------------------------------------ one call
    def execute(self, req: dict) -> dict:
        """One cell: the answer frame (status ok | error | timeout | session_lost)."""
        if self.lost or self.c is None:
            return self._answer("session_lost", message=self.lost or "the session is gone")
        c, ch = self.c, self.ch
        meter = self.meter = c.meter = OutputMeter(OUTPUT_LIMIT, KEEP_BYTES)
        meter.start_unit()
        timeout = float(req["timeout_s"])
        t0 = time.monotonic()
        cpu0 = tree_cpu_s(c.pid, None)  # between calls only the interpreter lives: no scan for others
        clock = TestClock(timeout, 1.0, t0, cpu0)  # wall_factor 1: the call's limit is wall clock and CPU alike
        c.channel.load.replies.clear()
        try:
            os.kill(c.pid, signal.SIGCONT)
        except OSError:
            pass
        sent = ch.send_candidate(c, {"code": req["code"], "stdin": req.get("stdin", "")})
        over, wake = "", clock.first_check
        interrupted_at = None
        while sent and not c.channel.load.replies and not (c.killed or c.eof or c.pid in ch.exits):
            now = time.monotonic()
            if interrupted_at is None:
                if meter.over_limit:
                    over = "output"
                elif now >= wake:
                    over, wake = clock.check(now, tree_cpu_s(c.pid, self.uid))
                if over:
                    interrupted_at = now
                    try:
                        os.kill(c.pid, signal.SIGINT)
                    except OSError:
                        pass
                    continue
                ch.pump(max(0.0, wake - now))
            else:
                if now >= interrupted_at + GRACE_S:
                    break
                ch.pump(interrupted_at + GRACE_S - now)
        cpu_end = tree_cpu_s(c.pid, self.uid)
        cpu_s = max(0.0, cpu_end - cpu0) if cpu_end is not None and cpu0 is not None else 0.0
        self.cpu_total += cpu_s
        time_s = time.monotonic() - t0
        reply = c.channel.load.replies.pop(0) if c.channel.load.replies else None
        if reply is None or c.killed or c.pid in ch.exits:
            self._drain(c)
            return self._lose(c, over, clock, time_s, cpu_s)
        self._drain(c)
        self.settle = True  # the supervisor calls idle() once the answer is out
        status = {"ok": "ok", "error": "error", "interrupted": "timeout"}[reply["status"]]
        message = ""
        if over == "output":
            status, message = "error", _limit_message(over, timeout)
        elif over and status == "ok":  # it completed as the interrupt was sent: an answer all the same
            message = _limit_message(over, timeout).replace(" and was interrupted", "")
        elif over:
            status, message = "timeout", _limit_message(over, timeout)
        elif status == "timeout":  # interrupted by itself (os.kill(os.getpid(), SIGINT)): its own error
            status = "error"
        return self._answer(status, result=reply["result"], error=reply["error"], time_s=time_s, cpu_s=cpu_s,
                            message=message)

    def _lose(self, c: Candidate, over: str, clock: TestClock, time_s: float, cpu_s: float) -> dict:
        """The interpreter is gone or did not answer: it is killed, and the session with it."""
        ch = self.ch
        if c.violation is None and not c.killed:
            ch.wait_exit(c.pid, 0.2)  # a process that closed its channel is usually ending
        if c.violation is not None:
            why = f"the session broke the runner protocol: {c.violation.why}"
        elif c.pid in ch.exits:
            status, why = exit_reason(ch.exits[c.pid])
            # SIGKILL with no CPU figure left (the process is gone): the budget, where the session's
            # CPU before the call plus the call's wall time reaches it (one thread spends no more)
            budget = float(self.msg["cpu_budget_s"])
            if status == "timeout" or (status == "memory" and self.cpu_total - cpu_s + time_s >= budget):
                why = "the session's CPU budget is spent"
            why = f"the session's interpreter ended: {why}"
        elif over:
            why = f"{_limit_message(over, clock.limit_s)}; the interrupt did not land"
        else:
            why = "the session's interpreter stopped answering"
        self.stop()
        cleanup.kill_uids({ch.c_uid})
        self.lost = why[:500]
        return self._answer("session_lost", time_s=time_s, cpu_s=cpu_s, message=self.lost)

    def _drain(self, c: Candidate) -> None:
        """What the cell wrote before it answered is in its pipes already: read it all."""
        for fd in (c.stdout_r, c.stderr_r):
            if fd < 0:
                continue
            stream = "stdout" if fd == c.stdout_r else "stderr"
            for _ in range(64):
                try:
                    data = os.read(fd, READ_BYTES)
                except (BlockingIOError, InterruptedError, OSError):
                    break
                if not data:
                    break
                c.meter.charge(stream, data, None)

    def _answer(self, status: str, *, result: str | None = None, error: dict | None = None, time_s: float = 0.0,
                cpu_s: float = 0.0, message: str = "") -> dict:
        meter = self.meter
        return {"event": "session_done", "status": status, "result": result, "error": error,
                "stdout": meter.kept["stdout"].decode("utf-8", "replace"),
                "stderr": meter.kept["stderr"].decode("utf-8", "replace"),
                "output_truncated": meter.truncated, "time_s": round(time_s, 6), "cpu_s": round(cpu_s, 6),
                "cpu_total_s": round(self.cpu_total, 6), "message": message}


def _limit_message(over: str, timeout_s: float) -> str:
    """Which limit interrupted a call (TestClock's word: cpu, wall, hard; or the output cap)."""
    if over == "output":
        return f"output exceeded {OUTPUT_LIMIT} bytes: the call was interrupted"
    what = "CPU time" if over == "cpu" else "wall-clock time"
    return f"the call reached its limit of {timeout_s:g} s of {what} and was interrupted"
