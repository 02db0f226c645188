"""A function-call run: one object per job, from loading the program to the last test's verdict.

The verdict process runs the tests and calls the candidate directly (its channel is handed
over after the load); this object only loads candidates, watches deadlines and output, and
says why a candidate was lost. What the candidate's loader reports is checked frame by frame
(protocol.py) and believed only as far as it goes: a top level that wrote to its control
channel, or a candidate that broke the protocol or ended itself during a call, did not run.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from . import flags, limits, units
from .children import FLAG_OF_LOSS, GRACE_S, KEEP_BYTES, Candidate, Children, OutputMeter, ended_itself
from .cpuclock import HARD_FACTOR, TestClock, process_cpu_s, tree_cpu_s, wall_factor_of
from .procfs import run_delay_s
from .progress import MAX_TESTS, STATUSES
from .protocol import Violation

# what makes `runs` false even where the loader said the top level ran. `runs` means the module
# alone executes without an exception or exit (shared/data's convention): a program whose function
# exits during a call still ran; one that wrote frames nobody asked for did not run honestly.
NOT_RUNNING = frozenset({flags.CONTROL_CHANNEL, flags.MALFORMED_FRAME, flags.OVERSIZE_FRAME})


class FunctionRun:
    """assert / call tests: prepare (verdict parses, candidate loads) -> run (relay) -> answer."""

    def __init__(self, ch: Children, msg: dict, scratch: str, emit: Callable[[dict], None]) -> None:
        self.ch = ch
        self.program = msg["program"]
        self.spec = msg["tests"]
        self.lim = msg["limits"]
        self.scratch = scratch
        self.emit = emit
        self.stream = bool(msg.get("stream", True))
        self.timeout = float(self.lim["timeout_s"])  # CPU seconds per test (cpuclock.py)
        self.wall_factor = wall_factor_of(self.lim)
        # a timed-out test ends the job: the rest are skipped (a looping program costs one timeout)
        self.stop_on_timeout = bool(self.lim.get("stop_on_timeout", True))
        self.stop_after: int | None = None  # the test that timed out; those after it are skipped
        self.clock: TestClock | None = None  # the running test's
        self.uid = ch.c_uid if limits.can_switch_uid() else None  # the job's own: its processes' CPU counts
        self.meter = OutputMeter(int(self.lim["output_bytes"]), KEEP_BYTES)
        self.flags: set[str] = set()
        self.cand: Candidate | None = None
        self.outcome = {"syntax_ok": False, "runs": False, "message": ""}
        self.load_broke_protocol = False
        self.names: list[str] = []
        self.error = ""  # the tests themselves are bad: the job has no verdict
        self.n = 0
        self.results: list[dict | None] = []
        self.override: dict[int, tuple[str, str]] = {}  # test -> what ended it, said by us
        self.kill_reason: tuple[str, str] | None = None  # why we killed the candidate, if we did
        self.top_level_ended = False  # a candidate died before reading a call: its top level ended
        self.killed_at: dict[int, float] = {}  # test -> when we killed its candidate for time
        self.verdict_waits = False
        self.job_deadline = 0.0
        self.over = False  # every test has its result: the relay ends

    # ------------------------------------------------------------------ life cycle
    def prepare(self) -> None:
        """The verdict process counts the tests (parsing them) while the candidate loads."""
        self.send_job(0)
        self.cand, self.outcome = self.load(units.upper_bound(self.spec))
        plan = self.await_plan(time.monotonic() + 30)
        self.verdict_waits = plan is not None and plan["op"] == "plan"
        if plan is None:
            # it died or stalled on the tests' syntax: count them here, run them in a fresh one
            self.ch.kill_verdict()
            plan = _count_tests_here(self.spec)
        if plan["op"] == "bad_tests":
            self.error = f"bad tests: {plan.get('message', '')}"[:300]
            return
        self.n = plan["n"]
        self.results = [None] * self.n
        if self.outcome["runs"] and self.cand is not None and not self.quiet(self.cand):
            self.outcome = self.broke_protocol(self.cand, self.outcome)

    def run(self) -> None:
        if self.error:
            return
        if self.stream:
            self.emit({"event": "load", **self.outcome, "total": self.n})
        if self.outcome["runs"]:
            self.relay()
            return
        if self.verdict_waits:
            self.ch.skip_job()
        why = "program has a syntax error" if not self.outcome["syntax_ok"] else "program did not run"
        status = "protocol_error" if self.load_broke_protocol else "error"
        for i in range(self.n):
            self.record(i, status, f"{why}: {self.outcome['message']}"[:300])

    def answer(self) -> dict:
        if self.error:
            return {"event": "done", "error": self.error, "syntax_ok": False, "runs": False, "passed": 0,
                    "total": 0, "tests": [], "flags": sorted(self.flags)}
        passed = sum(1 for r in self.results if r and r["status"] == "passed")
        runs = bool(self.outcome["runs"]) and not (self.flags & NOT_RUNNING) and not self.top_level_ended
        return {"event": "done", **self.outcome, "runs": runs, "passed": passed, "total": self.n,
                "tests": self.results, "flags": sorted(self.flags)}

    def stop(self) -> None:
        """Cleanup's first step: the candidate ends, whatever state the job is in."""
        if self.cand:
            self.ch.kill_candidate(self.cand)
            self.cand = None

    # -------------------------------------------------------------- candidates
    def load(self, n_units: int) -> tuple[Candidate, dict]:
        """A fresh candidate with the program loaded; reports syntax and top-level outcome."""
        ch = self.ch
        c = ch.take_candidate("function", self.meter)
        # loading the program is held to the same limits as one test: CPU, wall backstop
        clock = TestClock(self.timeout, self.wall_factor, time.monotonic(), process_cpu_s(c.pid))
        self.meter.start_unit()
        outcome = {"syntax_ok": False, "runs": False, "message": ""}
        rl = limits.Rlimits.of_job(self.lim, n_units)
        if not ch.send_candidate(c, ch.load_message(c, "load", self.program, self.scratch, rl)):
            outcome["message"] = "candidate did not accept the program"
            return c, outcome
        wake, over = clock.first_check, ""
        while not (settled := ch.wait_settled(c, wake)):
            if c.eof or c.killed or self.meter.over_limit:
                break
            over, wake = clock.check(time.monotonic(), tree_cpu_s(c.pid, self.uid), run_delay_s(c.pid))
            if over:
                break
        said = c.channel.load
        outcome["syntax_ok"] = bool(said.syntax_ok)
        if c.violation is not None:
            return c, self.broke_protocol(c, outcome)
        if not settled:
            status, why = ("timeout", clock.message(over)) if over else ch.death_status(c, False)
            outcome["message"] = f"{status}: {why}" if said.syntax_ok else why
            return c, outcome
        outcome["message"] = said.message
        outcome["runs"] = bool(said.runs)
        self.names = said.names
        return c, outcome

    def broke_protocol(self, c: Candidate, outcome: dict) -> dict:
        v = c.violation
        assert v is not None
        self.flags.add(v.flag)
        self.load_broke_protocol = True
        self.ch.kill_candidate(c)
        return {**outcome, "runs": False, "message": f"candidate broke the runner protocol: {v.why}"[:300]}

    def quiet(self, c: Candidate) -> bool:
        """Nothing may wait on a loaded candidate's channel before its first call: a frame
        there was written by its top level (our loader writes one load frame, then waits)."""
        if not self.ch.unasked_bytes(c):
            return True
        self.ch.violated(c, Violation(flags.CONTROL_CHANNEL, "wrote frames after its load frame"))
        return False

    def drop_candidate(self, reason: tuple[str, str] | None) -> None:
        if self.cand:
            self.kill_reason = reason
            self.ch.kill_candidate(self.cand)

    def candidate_gone(self, i: int, loss: str = "") -> None:
        """The verdict process lost the candidate during test i (or needs a new one): say why."""
        reason, c = self.kill_reason, self.cand
        if reason is None and c is not None:
            flag = FLAG_OF_LOSS.get(loss)
            if flag is None and loss and self.ch.unasked_bytes(c):
                flag = flags.CONTROL_CHANNEL  # it wrote what nobody asked for, then went
            if flag is not None:
                self.flags.add(flag)
                reason = ("protocol_error", f"candidate broke the runner protocol ({loss})")
            else:
                reason = self.ch.death_status(c, False)
                if loss in ("eof", "unread") and ended_itself(self.ch.exits.get(c.pid)):
                    self.flags.add(flags.EARLY_EXIT)
                    reason = (reason[0], f"{reason[1]} during a call")
                if loss == "unread":
                    self.top_level_ended = True  # it never read the call: its top level ended
        if c is not None:
            self.ch.kill_candidate(c)
            self.cand = None
        self.kill_reason = None
        if 0 <= i < self.n and reason:
            self.override.setdefault(i, reason)
            if reason[0] == "timeout":  # RLIMIT_CPU, the backstop of our own clock
                self.timed_out(i)

    def reload(self, i: int) -> None:
        """The verdict process needs a candidate for test i: a fresh one, or none."""
        if self.cand:
            self.candidate_gone(i)
        if self.stop_after is not None and i > self.stop_after:
            self.ch.give_candidate(None)  # skipped (record says so): no program loaded for it
            return
        m = self.meter
        saved = (m.unit_out, m.over_limit, m.unit_index)
        self.cand, again = self.load(self.n)
        m.unit_out, m.over_limit, m.unit_index = saved
        if again["runs"] and self.quiet(self.cand):
            self.ch.give_candidate(self.cand)
            return
        c, self.cand = self.cand, None  # charged to test i here, never again to the next one
        if c.violation is not None:
            self.flags.add(c.violation.flag)
            status, why = "protocol_error", f"candidate broke the runner protocol: {c.violation.why}"
        else:
            status, why = "error", again["message"]
        self.ch.kill_candidate(c)
        self.override.setdefault(i, (status, f"program failed to reload: {why}"[:300]))
        self.ch.give_candidate(None)

    # ----------------------------------------------------------------- verdict
    def send_job(self, start: int) -> None:
        self.ch.progress.reset(MAX_TESTS)
        v = self.ch.ensure_verdict(self.lim)
        v.busy = True
        self.ch.send_verdict({"op": "job", "spec": self.spec, "start": start, "stream": self.stream,
                              "cpu": self.ch.cpu})

    def await_plan(self, deadline: float) -> dict | None:
        """The verdict process's answer to a job (how many tests, or why the tests are bad);
        None when it died or did not answer in time."""
        v = self.ch.v
        while v and not v.frames:
            if v.eof or time.monotonic() > deadline:
                return None
            self.ch.pump(deadline - time.monotonic())
        if not v:
            return None
        f = v.frames.popleft()
        op = f.get("op") if isinstance(f, dict) else None
        if op == "bad_tests":
            v.busy = False
            return f
        return f if op == "plan" and type(f.get("n")) is int and 0 <= f["n"] <= MAX_TESTS else None

    def go(self) -> bool:
        """Let the waiting verdict process run its job, with the candidate (or none yet)."""
        if self.cand and self.cand.killed:
            self.cand, self.kill_reason = None, None  # its death was charged to the test it ended
        self.ch.give_candidate(self.cand)
        self.ch.send_verdict({"names": self.names})
        return True

    def start_verdict(self, start: int) -> bool:
        """Run the tests from `start` on in a fresh verdict process, with the candidate."""
        while start < self.n and self.results[start] is not None:
            start += 1
        if start >= self.n:
            return False
        self.send_job(start)
        plan = self.await_plan(self.job_deadline)
        if plan is None or plan.get("op") != "plan":
            for i in range(start, self.n):
                self.record(i, "error", "the test process failed to start")
            return False
        return self.go()

    def salvage_and_restart(self) -> bool:
        """The verdict process died or was stopped: keep what it recorded, go on after."""
        progress = self.ch.progress
        idx, _ = progress.current()
        for j in range(self.n):
            if self.results[j] is None and progress.status(j):
                self.record(j, progress.status(j), "(detail lost with the test process)")
        if 0 <= idx < self.n and self.results[idx] is None:
            st, why = self.override.get(idx) or ("error", "test process died")
            self.record(idx, st, why)
        self.ch.kill_verdict()
        if self.stop_after is not None:
            for j in range(self.n):
                self.record(j, "skipped", SKIPPED)
            return False
        return self.start_verdict(idx + 1 if idx >= 0 else 0)

    # ------------------------------------------------------------------ results
    def record(self, i: int, status: str, message: str, time_s: object = 0.0) -> None:
        if not 0 <= i < self.n or self.results[i] is not None:
            return
        time_s = time_s if type(time_s) in (int, float) else 0.0
        if i in self.override:
            status, message = self.override[i]
        elif status == "aborted":
            status, message = "error", message or "candidate lost"
        if self.stop_after is not None and i > self.stop_after:
            status, message, time_s = "skipped", SKIPPED, 0.0
        self.results[i] = {"status": status, "time_s": round(float(time_s), 6), "message": str(message)[:300]}
        if self.stream:
            self.emit({"event": "test", "index": i, **self.results[i]})

    def record_reported(self, r: dict) -> None:
        status = r.get("status")
        status = status if isinstance(status, str) and status in _STATUSES else "error"
        self.record(_index(r), status, str(r.get("message", "")), r.get("time_s", 0.0))

    # -------------------------------------------------------------------- relay
    def relay(self) -> None:
        """Drive the verdict process through the tests. It calls the candidate directly and
        writes its progress to shared memory; we wake only for its messages (a lost or
        needed candidate, the results), the candidate's output, and deadlines."""
        ch, n, timeout = self.ch, self.n, self.timeout
        self.job_deadline = time.monotonic() + timeout * self.wall_factor * HARD_FACTOR * (n + 2) + 10
        self.meter.unit_index = -1
        if not (self.go() if self.verdict_waits else self.start_verdict(0)):
            return
        while True:
            if time.monotonic() > self.job_deadline:
                for i in range(n):
                    self.record(i, "timeout", "job time limit")
                return
            if self.take_verdict_frames():
                return
            meter = self.meter
            if meter.over_limit and self.cand and not self.cand.killed:
                why = ("output_limit", f"output exceeded {meter.limit} bytes")
                charged = meter.unit_index if meter.unit_index >= 0 else ch.progress.current()[0]
                if charged >= 0:
                    # the test that printed it fails, even if it returned before we read it all
                    self.override.setdefault(charged, why)
                    why = ("error", f"candidate stopped: test {charged} exceeded the output limit")
                self.drop_candidate(why)
                meter.over_limit = False  # handled; the next test's output is counted afresh
            if ch.v is None or (ch.v.eof and not ch.v.frames):
                if not self.salvage_and_restart():
                    return
                continue
            wake = self.watch_time()
            if self.over:
                return
            if wake is None:
                continue
            ch.pump(wake - time.monotonic())

    def take_verdict_frames(self) -> bool:
        """Act on what the verdict process said; True when the job is over."""
        v = self.ch.v
        while v and v.frames:
            f = v.frames.popleft()
            op = f.get("op") if isinstance(f, dict) else None
            if op == "lost":
                why = f.get("why")
                self.candidate_gone(_index(f), why if isinstance(why, str) else "")
            elif op == "need_candidate":
                self.reload(_index(f))
            elif op == "end":
                self.record_reported(f)
            elif op == "done":
                v.busy = False
                for r in f.get("results", []) if isinstance(f.get("results"), list) else []:
                    if isinstance(r, dict):
                        self.record_reported(r)
                self.flags.update(flags.clean(f.get("flags")))
                for i in range(self.n):
                    self.record(i, "error", "test did not run")
                return True
            elif op == "plan_error":
                v.busy = False
                for i in range(self.n):
                    self.record(i, "error", "test code failed: " + str(f.get("message", "")))
                return True
        return False

    def timed_out(self, i: int) -> None:
        """Test i ran out of time: with stop_on_timeout the job stops there, and every later
        test is skipped (scored as failed; the candidate is not loaded again for them)."""
        if self.stop_on_timeout and self.stop_after is None and 0 <= i < self.n:
            self.stop_after = i

    def watch_time(self) -> float | None:
        """When to look again at the running test's clock; None to look again now. The limit
        is the candidate's CPU time in this test, the wall clock a backstop (cpuclock.py)."""
        idx, started, cpu_at_start = self.ch.progress.current_cpu()
        wake = self.job_deadline
        now = time.monotonic()
        if idx < 0:
            # between tests (or building the plan): look again within one test's time
            return min(wake, now + self.timeout)
        if idx in self.killed_at:
            if now > self.killed_at[idx] + GRACE_S:
                # the candidate is dead and the test still runs: the test code is stuck
                self.override.setdefault(idx, ("timeout", "wall-clock limit exceeded"))
                self.over = not self.salvage_and_restart()
                return None
            return min(wake, self.killed_at[idx] + GRACE_S)
        clock = self.clock
        if clock is None or (clock.started, clock.cpu_at_start) != (started, cpu_at_start):
            clock = self.clock = TestClock(self.timeout, self.wall_factor, started, cpu_at_start)
        if now < clock.first_check:
            return min(wake, clock.first_check + 0.001)
        c = self.cand
        alive = c is not None and not c.killed
        # the candidate's CPU since the test began, and that of the processes it started since
        cpu = tree_cpu_s(c.pid, self.uid, since=started, children_reaped=False) if alive else None
        over, again = clock.check(now, cpu, run_delay_s(c.pid) if alive else None)
        if over:
            why = ("timeout", clock.message(over))
            self.killed_at[idx] = now
            self.timed_out(idx)
            if c and not c.killed:
                # most likely the candidate is computing; its death unblocks the test
                self.drop_candidate(why)
            self.override.setdefault(idx, why)
            return None
        return min(wake, again + 0.001)


SKIPPED = "not run: an earlier test timed out (stop_on_timeout)"
_STATUSES = frozenset(STATUSES[1:])  # what a verdict process may report for a test


def _count_tests_here(spec: dict) -> dict:
    """The verdict process's answer to a job, computed in the supervisor (fallback only)."""
    try:
        return {"op": "plan", "n": len(units.labels(spec))}
    except (SyntaxError, ValueError, KeyError, TypeError, RecursionError, MemoryError) as exc:
        return {"op": "bad_tests", "message": f"{type(exc).__name__}: {exc}"}


def _index(f: dict) -> int:
    i = f.get("index")
    return i if type(i) is int else -1
