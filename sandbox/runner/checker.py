"""Checkers (special judges) for stdio tests: testlib's protocol, run out of the candidate's reach.

`checker <input> <output> <answer>`: exit 0 OK, 1 wrong answer, 2 presentation error, 3 FAIL
(the checker's own failure), 7 points (testlib's `quitp`: stderr starts `points <value>`; the
value, clamped to [0, 1], is the test's credit). testlib's `_dirt` and unexpected EOF exit as
presentation errors already; any other code, a signal or a limit is a checker crash.

Per test, once the candidate's run ended (every process of its uid killed by the run tail):
its stdout, captured as it arrived into a memfd of the supervisor's, goes with the test's
input and expected answer into a TaskDir (taskprog.py: root-made, the task uid's, 0700) and
the checker runs there as the task uid. Before a checker judges a candidate on a case, it must
accept that case's expected answer as the output (cached per checker and case content): a
checker that rejects its reference, or does not build, is the task's error (`error` in the
answer: task_error, reward null). After that, a FAIL, crash or timeout on a candidate's output
fails that test with the flag `checker_failed` (never a skipped sample).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections import OrderedDict
from dataclasses import dataclass

from . import flags, taskprog
from .children import Children
from .script import ScriptEnd, StdioRun, encode_stdin, reset_scratch

OK, WA, PE, FAIL, DIRT, POINTS, UNEXPECTED_EOF = 0, 1, 2, 3, 4, 7, 8
INPUT, OUTPUT, ANSWER = "input.txt", "output.txt", "answer.txt"
CHECK_DIR = ".vr-check"  # the checker's TaskDir (an interactor's is taskprog.TASK_DIR: both may live in one test)
ACCEPTED_MAX = 1 << 16  # self-checks remembered per supervisor (a key is 32 bytes)
_POINTS = re.compile(rb"\s*(?:points\s+)?([-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]{1,3})?)")
_accepted: OrderedDict[bytes, None] = OrderedDict()


@dataclass
class Verdict:
    """What a checker's run said: kind ok | wa | pe | points | broken; `score` in [0, 1]."""

    kind: str
    score: float = 0.0
    message: str = ""


def read_verdict(end: ScriptEnd) -> Verdict:
    """A checker's (or an interactor's) verdict from how its process ended."""
    text = (end.stderr or end.stdout).decode("utf-8", "replace").strip()[:300]
    # an exit code comes as status "error" with `exit` set (script.judge_exit); a signal as a negative exit
    if end.status not in ("finished", "error") or end.exit is None or end.exit < 0:
        return Verdict("broken", message=f"the checker did not finish ({end.status}: {end.message})"[:300])
    code = end.exit
    if code == OK:
        return Verdict("ok", 1.0, text)
    if code == WA:
        return Verdict("wa", message=text)
    if code in (PE, DIRT, UNEXPECTED_EOF):
        return Verdict("pe", message=text)
    if code == POINTS:
        m = _POINTS.match(end.stderr) or _POINTS.match(end.stdout)
        try:
            value = float(m.group(1)) if m else float("nan")
        except ValueError:
            value = float("nan")
        if value != value:  # NaN: no points said
            return Verdict("broken", message="the checker exited with points (7) but printed no value")
        return Verdict("points", min(1.0, max(0.0, value)), text)
    if code == FAIL:
        return Verdict("broken", message=f"the checker failed (FAIL): {text}"[:300])
    return Verdict("broken", message=f"the checker exited with code {code}: {text}"[:300])


class CheckerJudge:
    """A stdio job's checker: built once (`prepare`), then per test `capture` (the sink for the
    candidate's stdout) and `check` (the test's result). `fault` is the task's error, if any."""

    def __init__(self, ch: Children, msg: dict, scratch: str, keep: set[str]) -> None:
        self.ch = ch
        self.spec = msg["tests"]["checker"]
        self.msg = msg
        self.lim = msg["limits"]
        self.scratch = scratch
        self.keep = keep
        self.testlib_h = msg.get("testlib_h") if isinstance(msg.get("testlib_h"), str) else None
        self.prog: taskprog.TaskProgram | None = None
        self.fault = ""
        self.flags: set[str] = set()
        self.broken = 0  # candidate outputs the checker failed on (telemetry)
        self.out_fd = -1
        self.meter = taskprog.task_meter()
        self.identity = b""
        self.runner: taskprog.TaskLauncher | None = None  # the checker's launcher and TaskDir, made on first use

    def prepare(self) -> bool:
        """Build the checker (before any candidate process of the job runs); False: the task's fault."""
        self.prog = taskprog.build_program(self.ch, self.spec, self.scratch, self.msg, self.testlib_h)
        if not self.prog.ok:
            self.fault = f"the checker cannot run: {self.prog.error}"[:1000]
            return False
        h = hashlib.sha256()
        for part in (self.prog.lang.name, self.prog.source, self.testlib_h or ""):
            h.update(part.encode("utf-8", "surrogateescape") + b"\0\1")
        self.identity = h.digest()
        self.out_fd = os.memfd_create("vr-output", os.MFD_CLOEXEC)
        return True

    def capture(self):  # noqa: ANN201 - the meter's sink
        """A fresh capture of the candidate's stdout for one test: the meter's sink."""
        os.ftruncate(self.out_fd, 0)
        os.lseek(self.out_fd, 0, os.SEEK_SET)
        fd = self.out_fd

        def sink(data: bytes) -> None:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]

        return sink

    def check(self, index: int, case: dict) -> dict | None:
        """The test's result for the candidate's finished run (its output captured); None where
        the checker rejected the case's own answer (`fault` says so: the task's error)."""
        # the candidate's processes are dead: its files go (its quota back for ours), then ours come
        reset_scratch(self.scratch, self.ch.c_uid, None, self.keep)
        stdin, answer = encode_stdin(case.get("stdin", "")), encode_stdin(case["stdout"])
        key = hashlib.sha256(self.identity + hashlib.sha256(stdin).digest() + hashlib.sha256(answer).digest()).digest()
        try:
            if key not in _accepted:  # the reference as the output: it must pass
                v = read_verdict(self._run(stdin, answer, answer))
                if v.kind != "ok" and not (v.kind == "points" and v.score >= 1.0):
                    self.fault = (f"the checker does not accept test {index}'s expected answer as the output "
                                  f"({v.kind}: {v.message})")[:1000]
                    return None
                _accepted[key] = None
                while len(_accepted) > ACCEPTED_MAX:
                    _accepted.popitem(last=False)
            else:
                _accepted.move_to_end(key)
            v = read_verdict(self._run(stdin, self.out_fd, answer))
        except OSError as exc:  # its directory could not be written (the scratch full, moved): not the checker's
            v = Verdict("broken", message=f"the checker's files could not be written: {exc.strerror}")
        return self._result(v)

    def _run(self, stdin: bytes, output: bytes | int, answer: bytes) -> ScriptEnd:
        """The checker once on these files, from the job's task launcher."""
        if self.runner is None:
            lim = taskprog.task_limits(self.prog.lang, self.lim)
            self.runner = taskprog.TaskLauncher(self.ch, self.scratch, self.keep, self.prog, lim, (INPUT, OUTPUT, ANSWER),
                                                self.meter, CHECK_DIR)
        tdir = self.runner.dir()
        tdir.write(INPUT, stdin)
        tdir.write(OUTPUT, output)
        tdir.write(ANSWER, answer)
        return self.runner.run()

    def _result(self, v: Verdict) -> dict:
        if v.kind == "ok" or (v.kind == "points" and v.score >= 1.0):
            return {"status": "passed", "message": ""}
        if v.kind == "points":
            return {"status": "failed", "score": v.score, "message": f"checker: partial credit {v.score:g}: {v.message}"[:300]}
        if v.kind == "broken":
            self.broken += 1
            self.flags.add(flags.CHECKER_FAILED)
            return {"status": "failed", "message": f"checker failed on this output: {v.message}"[:300]}
        what = "wrong answer" if v.kind == "wa" else "presentation error"
        return {"status": "failed", "message": f"checker: {what}: {v.message}"[:300]}

    def release(self) -> None:
        if self.runner is not None:
            self.runner.close()
            self.runner = None
        if self.prog is not None:
            self.prog.release()
        if self.out_fd >= 0:
            os.close(self.out_fd)
            self.out_fd = -1


def attach(job: object, msg: dict) -> None:
    """Give a stdio job (script.StdioRun and its kinds) its checker judge, where its tests name
    a checker (the supervisor calls this between making the job and `prepare`)."""
    tests = msg.get("tests")
    if isinstance(job, StdioRun) and isinstance(tests, dict) and isinstance(tests.get("checker"), dict):
        job.judge = CheckerJudge(job.ch, msg, job.scratch, job.keep)
