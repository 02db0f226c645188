"""A session's interpreter, in its candidate process (jailed as a job's: the session's uid,
limits, seccomp, Landlock): each cell runs in one namespace kept between cells, as a notebook's
kernel runs it, and the answer is what a notebook shows (the trailing expression's repr, or the
exception with the cell's own frames). It is the session's own word, shown to its client and
never used to grade: a session is graded by replaying its cells in a fresh job.

SIGINT is ignored except while a cell runs, where it raises KeyboardInterrupt (the supervisor's
interrupt at the call's limit); one that lands anywhere else in the turn still answers
"interrupted".
"""

from __future__ import annotations

import ast
import builtins
import io
import linecache
import os
import signal
import socket
import sys
import traceback
import types

from . import framing
from .protocol import ERROR_CAPS, RESULT_CHARS

CELL_PREFIX = "<cell "


def serve(ctrl: socket.socket) -> int:
    """The session's loop: one frame {"code", "stdin"} in, one reply frame out, until the
    supervisor hangs up."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    module = types.ModuleType("__main__")
    ns = module.__dict__
    ns["__builtins__"] = builtins
    ns["__annotations__"] = {}
    sys.modules["__main__"] = module
    sys.argv = [""]
    framing.send_frame(ctrl, {"ready": True})
    n = 0
    while True:
        try:
            req = framing.recv_frame(ctrl)
        except KeyboardInterrupt:  # a late interrupt: the turn it was meant for has answered
            continue
        except (framing.FrameError, OSError):
            return 0
        if not isinstance(req, dict):
            return 0
        n += 1
        _reap()
        try:
            reply = run_cell(ns, str(req.get("code", "")), str(req.get("stdin", "")), n)
        except KeyboardInterrupt as exc:  # landed between the cell's end and its answer
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            reply = {"status": "interrupted", "result": None, "error": describe(exc)}
        _flush()
        framing.send_frame(ctrl, reply)


def run_cell(ns: dict, code: str, stdin: str, n: int) -> dict:
    """Run `code` in `ns`; the reply frame (status ok | error | interrupted)."""
    name = f"{CELL_PREFIX}{n}>"
    linecache.cache[name] = (len(code), None, code.splitlines(True), name)  # its tracebacks show its lines
    sys.stdin = io.StringIO(stdin)
    try:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            tree = ast.parse(code, name)
            last = None
            if tree.body and isinstance(tree.body[-1], ast.Expr):
                last = ast.Expression(tree.body.pop().value)
            exec(compile(tree, name, "exec", dont_inherit=True), ns)
            value = eval(compile(last, name, "eval", dont_inherit=True), ns) if last is not None else None
            result = None if value is None else _cap(repr(value), RESULT_CHARS)
        finally:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
    except KeyboardInterrupt as exc:
        return {"status": "interrupted", "result": None, "error": describe(exc)}
    except BaseException as exc:  # noqa: BLE001 - SystemExit included: the session goes on, as in a notebook
        return {"status": "error", "result": None, "error": describe(exc)}
    return {"status": "ok", "result": result, "error": None}


def describe(exc: BaseException) -> dict:
    """{type, message, traceback}: the traceback from the first frame of a cell on (none of
    ours), as python prints it; a hostile __str__ or __repr__ costs only its own text."""
    tb = exc.__traceback__
    while tb is not None and not tb.tb_frame.f_code.co_filename.startswith(CELL_PREFIX):
        tb = tb.tb_next
    try:
        kind = type(exc).__qualname__
        mod = type(exc).__module__
        kind = kind if mod in ("builtins", "__main__") else f"{mod}.{kind}"
    except BaseException:  # noqa: BLE001
        kind = "Exception"
    try:
        message = str(exc)
    except BaseException:  # noqa: BLE001
        message = ""
    try:
        text = "".join(traceback.format_exception(type(exc), exc.with_traceback(tb), tb))
    except BaseException:  # noqa: BLE001
        text = f"{kind}: {message}\n"
    return {"type": _cap(str(kind), ERROR_CAPS["type"]), "message": _cap(str(message), ERROR_CAPS["message"]),
            "traceback": _cap(text, ERROR_CAPS["traceback"], tail=True)}


def _cap(text: str, most: int, tail: bool = False) -> str:
    if type(text) is not str:
        text = ""
    if len(text) <= most:
        return text
    return ("..." + text[-(most - 3):]) if tail else (text[: most - 3] + "...")


def _reap() -> None:
    """The last call's children were killed after it (only the interpreter outlives a call):
    their exit statuses go, so no zombie holds a process of the session's count."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except (ChildProcessError, OSError):
            return
        if pid == 0:
            return


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()
        except BaseException:  # noqa: BLE001
            pass
