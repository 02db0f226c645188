"""NeMo-Skills' sandbox protocol (`nemo_skills/code_execution/sandbox.py`, `LocalSandbox`, and
the server it talks to, `local_sandbox/local_sandbox_server.py`): `POST /execute`, `DELETE
/sessions/{id}`, `GET /sessions`, `GET /health`, so its client runs against this server unchanged
(`NEMO_SKILLS_SANDBOX_HOST` / `_PORT`).

`POST /execute` takes `{"generated_code", "timeout", "language", "std_input",
"max_output_characters", "traceback_verbosity"}` and answers `{"process_status": "completed" |
"error" | "timeout", "stdout", "stderr"}`, plus `new_session_created` for `ipython`:
- `ipython` is stateful: the `X-Session-ID` header (the client's own id, a uuid) names a session
  here (one of `/v1/sessions`, labelled `nemo-session-id`), opened on its first use. A trailing
  expression's repr is printed as IPython's display hook does, an exception's traceback (its
  `File` lines dropped, as the NeMo server's Plain mode does) goes to stdout with status `error`.
  A session whose process was lost answers `timeout` or `error` with `new_session_created: true`
  and is replaced on the next call; the client then replays its history, as it does against
  NeMo's own server after a restart. NeMo's server holds any number of sessions and its client
  never deletes one it did not restore: when this server is full, the least recently used idle
  session of this protocol is ended to make room (its client restores it when it comes back).
- `python`, `python3`, `pypy3` run once, statelessly (a job like `/run_code`'s); an exception is
  `completed` with the traceback on stderr, as NeMo's server answers. `lean4` and `shell` are not
  offered (422 naming `language`). Tracebacks are shaped as there (`File "<string>"` frames
  without source lines, as `python -c` prints them).
Output longer than `max_output_characters` is cut and ends in `<output cut>`, as there.
"""

from __future__ import annotations

import re
import textwrap
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from reward_server.body import parse_body, request_body
from reward_server.errors import BODY_RESPONSES, InvalidRequest, RequestRejected, error, invalid
from reward_server.routes.sessions import manager
from reward_server.sessions.manager import Session, SessionManager
from reward_server.sessions.models import SessionCreate
from reward_server.state import ServerState
from sandbox.api import InfraError
from sandbox.jobs import ExecRequest, Limits
from sandbox.sessions import SessionExec, SessionExecResult

router = APIRouter(tags=["compat: NeMo-Skills"])

LABEL = "nemo-session-id"  # the label that holds the client's X-Session-ID
_STATELESS = {"python", "python3", "pypy3"}
_CUT = "<output cut>"


class NemoExecute(BaseModel):
    """LocalSandbox._prepare_request's body."""

    model_config = ConfigDict(extra="ignore", json_schema_extra={"examples": [
        {"generated_code": "a = 1\na", "timeout": 10, "language": "ipython", "std_input": "",
         "max_output_characters": 1000, "traceback_verbosity": "Plain"},
    ]})

    generated_code: str
    timeout: int | float = Field(10, gt=0, allow_inf_nan=False)
    language: str = "ipython"
    std_input: str = ""
    max_output_characters: int = Field(1000, ge=0)
    traceback_verbosity: str = "Plain"


def _cut(text: str, n: int) -> str:
    return text[:n] + _CUT if len(text) > n else text


_CARETS = re.compile(r"^\s*[~^]+\s*$")
_SYNTAX = ("SyntaxError", "IndentationError", "TabError")
_PROG_FRAME = re.compile(r'^(\s*)File "[^"]*prog\.py", line (\d+)(.*)$')
_COMPILE_ERROR = re.compile(r"^(\w+Error): (.*) \(prog\.py, line (\d+)\)$")


def _plain_traceback(tb: str, etype: str) -> str:
    """A cell's traceback as IPython's Plain mode shows it (NeMo's server): no `File` lines, no
    3.11 position carets under a runtime error's line; a syntax error keeps its caret (at the
    line's start where the position is not known)."""
    lines = [ln for ln in tb.rstrip("\n").split("\n") if not ln.strip().startswith("File ")]
    if etype in _SYNTAX:
        if len(lines) >= 2 and not any(_CARETS.match(ln) for ln in lines):
            lines.insert(len(lines) - 1, "    ^")
    else:
        lines = [ln for ln in lines if not _CARETS.match(ln)]
    return "\n".join(lines) + "\n" if lines else ""


def _python_c_stderr(stderr: str, program: str) -> str:
    """A run's stderr as `python -c` writes it (NeMo's server runs `python` languages so): the
    program's frames are `File "<string>"` with no source line under them."""
    out: list[str] = []
    skip = False
    for ln in stderr.split("\n"):
        m = _PROG_FRAME.match(ln)
        if m:
            out.append(f'{m.group(1)}File "<string>", line {m.group(2)}{m.group(3)}')
            skip = True
            continue
        if skip and (ln.startswith("    ") or _CARETS.match(ln)):
            continue
        skip = False
        m = _COMPILE_ERROR.match(ln)
        if m:  # the build's one-line error, as python -c reports a program that does not compile
            src = program.split("\n")
            n = int(m.group(3))
            out.append(f'  File "<string>", line {n}')
            if 0 < n <= len(src):
                out.append("    " + src[n - 1].strip())
            ln = f"{m.group(1)}: {m.group(2)}"
        out.append(ln)
    return "\n".join(out)


def _answer(res: SessionExecResult, timeout: float) -> dict[str, Any]:
    """A session's execute as NeMo's `execute_ipython_session` answers it."""
    if res.status == "ok":
        out = res.stdout + (res.result + "\n" if res.result is not None else "")
        return {"process_status": "completed", "stdout": out, "stderr": res.stderr}
    if res.status == "error":
        tb = _plain_traceback(res.error.traceback, res.error.type) if res.error is not None else ""
        if res.error is not None and not tb:
            tb = f"{res.error.type}: {res.error.message}\n"
        return {"process_status": "error", "stdout": res.stdout + tb, "stderr": res.stderr}
    timed_out = f"Execution timed out after {timeout} seconds\n"
    if res.status == "timeout":
        return {"process_status": "timeout", "stdout": res.stdout, "stderr": res.stderr + timed_out}
    # session_lost: NeMo's "timeout_killed" / a dead shell; the next call gets a new session
    if "timeout" in res.message.lower() or "interrupt" in res.message.lower():
        return {"process_status": "timeout", "stdout": "", "stderr": timed_out}
    return {"process_status": "error", "stdout": res.stdout, "stderr": res.stderr + f"\n{res.message}\n"}


async def _session_for(m: SessionManager, xid: str) -> tuple[Session, bool]:
    """The live session of the client's id, opened (or replaced, when lost) here; True when new."""
    for s in m.find({LABEL: xid}):
        if not s.lost:
            return s, False
        await m.close(s.id)
    try:
        s = await m.open(SessionCreate(labels={LABEL: xid}))
    except RequestRejected as e:
        # full: NeMo's client restores a session from its own history when told it is new, so the
        # least recently used idle one of this protocol makes room (NeMo's server has no cap)
        idle = [o for o in m.find({}) if LABEL in o.labels and not o.busy]
        if e.status != 429 or not idle:
            raise
        await m.close(min(idle, key=lambda o: o.last_used).id)
        s = await m.open(SessionCreate(labels={LABEL: xid}))
    others = [o for o in m.find({LABEL: xid}) if o.id != s.id and not o.lost]
    if others:  # a concurrent first call opened one too: keep the earlier
        await m.close(s.id)
        return others[0], False
    return s, True


async def _stateless(st: ServerState, req: NemoExecute) -> dict[str, Any]:
    timeout = min(float(req.timeout), st.settings.max_timeout_s)
    ereq = ExecRequest(program=req.generated_code, stdin=req.std_input, runtime=st.scorer.default_runtime,
                       limits=Limits(timeout_s=timeout, wall_factor=1.0))
    try:
        res = await st.scorer.execute(ereq)
    except InfraError as e:
        return {"process_status": "error", "stdout": "", "stderr": f"sandbox error: {e}\n"}
    if res.status == "timeout":
        return {"process_status": "timeout", "stdout": "", "stderr": f"Execution timed out after {req.timeout} seconds\n"}
    return {"process_status": "completed", "stdout": res.stdout,
            "stderr": _python_c_stderr(res.stderr, req.generated_code)}


@router.post("/execute", summary="NeMo-Skills: run code (ipython: in the X-Session-ID's session)",
             openapi_extra=request_body(NemoExecute), responses=BODY_RESPONSES)
async def execute(request: Request):
    st = ServerState.of(request)
    req = await parse_body(request, NemoExecute)
    if req.language in _STATELESS:
        out = await _stateless(st, req)
    elif req.language == "ipython":
        xid = request.headers.get("x-session-id")
        if not xid:
            raise InvalidRequest([{"loc": ["header", "X-Session-ID"], "msg": "X-Session-ID header required for "
                                   "ipython sessions", "type": "missing"}])
        if len(xid) > 256:
            raise InvalidRequest([{"loc": ["header", "X-Session-ID"], "msg": "at most 256 characters",
                                   "type": "too_long"}])
        timeout = min(float(req.timeout), st.settings.max_timeout_s)
        m = manager(request)
        s, new = await _session_for(m, xid)
        try:
            call = SessionExec(code=textwrap.dedent(req.generated_code), timeout_s=timeout, stdin=req.std_input)
        except ValidationError as e:
            names = {"code": "generated_code", "stdin": "std_input", "timeout_s": "timeout"}
            raise InvalidRequest([error([names.get(str(x["loc"][0]), str(x["loc"][0])) if x["loc"] else "body"],
                                        x["msg"], x["type"]) for x in e.errors()]) from None
        res = await m.execute(s.id, call)
        out = _answer(res, req.timeout)
        if res.status == "session_lost":
            await m.close(s.id)
            new = True
        out["new_session_created"] = new
    else:
        raise invalid(["language"], f"{req.language!r} is not offered here: ipython (stateful) or python, "
                      "python3, pypy3 (run once)")
    n = req.max_output_characters
    out["stdout"], out["stderr"] = _cut(out["stdout"], n), _cut(out["stderr"], n)
    return out


@router.delete("/sessions/{session_id}", summary="NeMo-Skills: end the X-Session-ID's session",
               responses={404: {"description": "no session of that id"}})
async def delete_session(request: Request, session_id: str):
    m = manager(request)
    found = m.find({LABEL: session_id})
    if not found:
        return JSONResponse(status_code=404, content={"error": f"IPython session {session_id} not found"})
    for s in found:
        await m.close(s.id)
    return {"message": f"IPython session {session_id} deleted successfully"}


@router.get("/sessions", summary="NeMo-Skills: the open sessions")
async def list_sessions(request: Request):
    m = manager(request)
    return {"backend": "ipython", "sessions": {
        s.labels[LABEL]: {"backend": "ipython", "created": s.created_at, "last_used": s.last_used, "alive": not s.lost}
        for s in m.find({}) if LABEL in s.labels}}


@router.get("/health", summary="NeMo-Skills: liveness")
async def health():
    return {"status": "healthy"}
