"""The supervisor: one per client connection, runs that connection's jobs one at a time.

Each job is one object of its kind (relay.FunctionRun for assert/call tests, script.StdioRun,
script.ExecRun; a compiled language adds a kind here) and `run_job` reads its life cycle:
prepare -> run -> answer -> clean. The connection's processes and their plumbing live in
children.Children; nothing of a job outlives it. Only the supervisor reports, and only what
it observed itself (the kernel's exit status, its clocks, its pipes).
"""

from __future__ import annotations

import os
import socket
import time
from typing import Protocol

from . import checker, cleanup, flags, framing, languages
from .children import Children, ClientGone, InfraFailure, OutputMeter
from .compiled import CompiledExecRun, CompiledRun
from .interactive import CompiledInteractiveRun, InteractiveRun
from .relay import FunctionRun
from .script import ExecRun, StdioRun
from .session import SessionRun

CLEANUP_WAIT_S = 0.05  # for a killed candidate to be reaped before its uid is scanned

__all__ = ["InfraFailure", "Supervisor", "job_kind"]


class JobRun(Protocol):
    """One job of one kind, made per job with (children, message, scratch, emit): everything
    of that job lives on it. prepare: inputs in place, processes started; run: to the last
    verdict; stop: its processes end (idempotent); answer: the final frame, flags included."""

    meter: OutputMeter  # the job's output: every process of the job is charged here

    def prepare(self) -> None: ...
    def run(self) -> None: ...
    def answer(self) -> dict: ...
    def stop(self) -> None: ...


def job_kind(msg: dict) -> type:
    """Which run a job message asks for; ValueError for one we cannot run."""
    if msg.get("language", "python") != "python":  # another language: compiled.py
        if msg.get("op") == "exec":
            return CompiledExecRun
        if not isinstance(msg.get("tests"), dict) or msg["tests"].get("kind") != "stdio":
            raise ValueError("a program in a language other than python takes stdio tests only")
        return CompiledInteractiveRun if msg["tests"].get("interactor") else CompiledRun
    if msg.get("op") == "exec":
        return ExecRun
    tests = msg.get("tests")
    if not isinstance(tests, dict):
        raise ValueError("job has no tests")
    if tests.get("kind") == "stdio":
        return InteractiveRun if tests.get("interactor") else StdioRun
    return FunctionRun


class Supervisor:
    def __init__(self, conn: socket.socket, slot: int, cfg: dict) -> None:
        self.conn = conn
        self.slot = slot
        self.cfg = cfg
        self.jobs = 0
        self.ch = Children(cfg, slot)

    def serve(self) -> None:
        try:
            if self.session_slot:  # the session's interpreter forks while its client sends the open
                self.ch.request_spawn()
            while True:
                try:
                    msg = framing.recv_frame(self.conn)
                except (framing.FrameError, OSError):
                    return
                if msg is None:
                    return
                op = msg.get("op") if isinstance(msg, dict) else None
                if op == "ping":
                    self.emit({"event": "pong", "slot": self.slot, "jobs": self.jobs, "pid": os.getpid(),
                               "languages": languages.runnable()})
                elif op == "session":
                    if not self.session_slot:
                        self.emit({"event": "error", "message": "sessions are served on the session socket only"})
                        continue
                    self.jobs += 1
                    try:
                        self.run_session(msg)
                    except InfraFailure as exc:
                        self.emit({"event": "infra_error", "message": str(exc)[:300]})
                    except ClientGone:
                        pass
                    return  # a session's connection ends with it
                elif op in ("run", "exec") and self.session_slot:
                    self.emit({"event": "error", "message": "a session slot runs no jobs"})
                elif op in ("run", "exec"):
                    self.jobs += 1
                    try:
                        self.run_job(msg)
                    except InfraFailure as exc:
                        self.emit({"event": "infra_error", "message": str(exc)[:300]})
                        return
                    except ClientGone:
                        return  # its job was stopped and cleaned up; the connection ends
                else:
                    self.emit({"event": "error", "message": f"unknown op {op!r}"})
        finally:
            self.ch.shutdown()

    @property
    def session_slot(self) -> bool:
        """Whether this slot is one of the runner's session slots (after its job slots)."""
        return self.slot >= int(self.cfg.get("job_slots", 1 << 30))

    def run_session(self, msg: dict) -> None:
        """A session's life: open, one execute per frame, until the client closes it (or hangs
        up) or the session is lost; then everything of it is cleaned up before the answer to a
        close, so a closed session has left no process."""
        try:
            for key in ("memory_mb", "nproc", "cpu_budget_s"):
                float(msg[key])
        except (KeyError, TypeError, ValueError) as exc:
            self.emit({"event": "session_error", "message": f"bad session: {type(exc).__name__}: {exc}"[:300]})
            return
        ch = self.ch
        ch.exits.clear()
        scratch = self.fresh_scratch()
        session = SessionRun(ch, msg, scratch, self.emit)
        closing = False
        try:
            opened = session.open()
            self.emit(opened)
            while opened["event"] == "session_ready" and not session.lost:
                req = framing.recv_frame(self.conn)
                if not isinstance(req, dict) or req.get("op") == "session_close":
                    closing = isinstance(req, dict)
                    break
                if req.get("op") != "session_exec" or not isinstance(req.get("code"), str) or \
                        not isinstance(req.get("stdin", ""), str):
                    self.emit({"event": "error", "message": "a session takes session_exec and session_close"})
                    continue
                try:
                    float(req["timeout_s"])
                except (KeyError, TypeError, ValueError):
                    self.emit({"event": "error", "message": "session_exec needs timeout_s"})
                    continue
                ch.watch_client(self.conn)  # a client that hangs up mid-call ends the session
                try:
                    self.emit(session.execute(req))
                finally:
                    ch.watch_client(None)
                    if session.settle:
                        session.idle()  # answered first; no new call is read before this
        except (framing.FrameError, OSError):
            pass
        finally:
            self.clean(session, scratch)
        if closing:
            self.emit({"event": "session_closed"})

    def emit(self, obj: dict) -> None:
        # valid UTF-8 whatever a candidate's strings hold: the server re-serialises them
        framing.send_frame(self.conn, obj, errors="backslashreplace")

    def run_job(self, msg: dict) -> None:
        ch = self.ch
        try:
            kind = job_kind(msg)
            lim = msg["limits"]
            int(lim["output_bytes"]), float(lim["timeout_s"])
        except (ValueError, KeyError, TypeError) as exc:
            self.emit(_bad_job(msg, f"bad job: {type(exc).__name__}: {exc}"[:300]))
            return
        ch.exits.clear()
        scratch = self.fresh_scratch()
        t0 = time.monotonic()
        ch.keep_to(msg.get("cpu"))
        job: JobRun | None = None
        ch.watch_client(self.conn)  # a client that hangs up stops its job (ClientGone)
        try:
            job = kind(ch, msg, scratch, self.emit)
            checker.attach(job, msg)  # a stdio job's special judge, where its tests name one
            job.prepare()
            job.run()
            job.stop()
            summary = job.answer()
            if cleanup.scratch_full(scratch):  # before the cleanup empties it
                summary["flags"] = sorted({*summary.get("flags", ()), flags.SCRATCH_FULL})
            meter = job.meter
            summary["wall_s"] = round(time.monotonic() - t0, 6)
            summary["stdout"] = meter.kept["stdout"].decode("utf-8", "replace")
            summary["stderr"] = meter.kept["stderr"].decode("utf-8", "replace")
            summary["output_truncated"] = meter.truncated
            # the verdict is final once the job's processes are dead: answer first, then
            # clean up while the client works on the answer (this connection takes no new
            # job until the cleanup below is done)
            self.emit(summary)
        finally:
            ch.watch_client(None)
            self.clean(job, scratch)
        ch.request_spawn()  # the next job's candidate forks while the client reads this answer

    def clean(self, job: JobRun | None, scratch: str) -> None:
        ch = self.ch
        if job is not None:
            job.stop()
        if ch.v and ch.v.busy:
            ch.kill_verdict()  # stopped mid-job: it may still be running test code
        ch.await_reaped(CLEANUP_WAIT_S)
        cleanup.kill_uids({ch.c_uid, ch.v_uid}, spare={ch.v.pid} if ch.v else set())
        cleanup.remove_tree(scratch)
        cleanup.remove_files_of({ch.c_uid, ch.v_uid})

    def fresh_scratch(self) -> str:
        """The slot's scratch path, made afresh; a unique path where what the last job left
        there could not be removed (its candidates then set HOME and TMPDIR themselves)."""
        base = self.cfg["scratch_base"]
        try:
            return cleanup.make_scratch(base, f"s{self.slot}", self.ch.c_uid)
        except OSError:
            pass
        try:
            return cleanup.make_scratch(base, f"s{self.slot}-{self.jobs}-{os.urandom(4).hex()}", self.ch.c_uid)
        except OSError as exc:
            raise InfraFailure(f"cannot make a scratch directory: {exc}") from None


def _bad_job(msg: dict, why: str) -> dict:
    """The answer to a job message we cannot run, in the shape its client reads."""
    if msg.get("op") == "exec":
        return {"event": "exec_done", "status": "error", "syntax_ok": False, "return_code": None, "message": why,
                "time_s": 0.0, "exec_stdout": "", "exec_stderr": why + "\n", "files": {}, "flags": []}
    return {"event": "done", "error": why, "syntax_ok": False, "runs": False, "passed": 0, "total": 0, "tests": [],
            "flags": []}
