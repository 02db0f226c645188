"""`/v1/sessions`: stateful sessions for multi-turn tool use (create, execute, look up, list by
label, delete, score). The rules (ids, TTL, idle timeout, capacity, grading) are the manager's
(`reward_server.sessions.manager`); this file only parses and answers."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from reward_server.body import parse_body, request_body
from reward_server.errors import BODY_RESPONSES, RequestRejected, invalid
from reward_server.schemas import ScoreResult
from reward_server.sessions.manager import SessionManager
from reward_server.sessions.models import (
    SessionCreate,
    SessionCreated,
    SessionDeleted,
    SessionExec,
    SessionExecResult,
    SessionInfo,
    SessionList,
    SessionScore,
    parse_label_selector,
)
from reward_server.state import ServerState

router = APIRouter(tags=["sessions"])

_NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"description": "no such session (never opened here, or ended: "
                                                     "the detail says how)"}}
_WITH_ID = {**BODY_RESPONSES, **_NOT_FOUND}
_INLINE = 16 << 10  # a create or execute body this small is parsed on the event loop (no thread hop)


def manager(request: Request) -> SessionManager:
    m = ServerState.of(request).sessions
    if m is None:
        raise RequestRejected(503, "server is starting", retry_after=1, reason="starting")
    return m


def _json(model: Any) -> Response:
    return Response(model.model_dump_json(), media_type="application/json")


@router.post("/v1/sessions", response_model=SessionCreated, summary="Open a session",
             openapi_extra=request_body(SessionCreate), responses=BODY_RESPONSES)
async def create_session(request: Request):
    """A sandboxed interpreter kept alive between executes, until DELETE, its TTL or its idle
    timeout. 429 with Retry-After when the server holds as many as it may."""
    m = manager(request)
    body = await parse_body(request, SessionCreate, inline_max=_INLINE)
    s = await m.open(body)
    return _json(SessionCreated(session_id=s.id, expires_at=round(s.expires_at, 3), server_id=m.server_id))


@router.get("/v1/sessions", response_model=SessionList, summary="List sessions, by label",
            responses={422: BODY_RESPONSES[422]})
async def list_sessions(request: Request, label: list[str] = Query(
        default_factory=list, description="k=v (repeat, or comma-separate, for several): sessions with all of them")):
    m = manager(request)
    try:
        want = parse_label_selector(label)
    except ValueError as e:
        raise invalid(["label"], str(e)) from None
    return _json(SessionList(sessions=[s.info() for s in m.find(want)]))


@router.get("/v1/sessions/{session_id}", response_model=SessionInfo, summary="A session's state",
            responses=_NOT_FOUND)
async def get_session(request: Request, session_id: str):
    return _json(manager(request).get(session_id).info())


@router.post("/v1/sessions/{session_id}/execute", response_model=SessionExecResult, summary="Run code in a session",
             openapi_extra=request_body(SessionExec), responses=_WITH_ID)
async def execute(request: Request, session_id: str):
    """Names, imports and files persist between calls. `status`: ok, error (the code raised),
    timeout (interrupted; the session lives on) or session_lost (its process is gone: open a
    new one and replay). Only executes that end `ok` are part of the program `score` grades."""
    st = ServerState.of(request)
    m = manager(request)
    m.get(session_id)  # 404 before the body is read
    req = await parse_body(request, SessionExec, inline_max=_INLINE)
    if req.timeout_s > st.settings.max_timeout_s:
        raise invalid(["timeout_s"], f"at most {st.settings.max_timeout_s}", "less_than_equal")
    return _json(await m.execute(session_id, req))


@router.delete("/v1/sessions/{session_id}", response_model=SessionDeleted, summary="End a session (idempotent)",
               responses=_NOT_FOUND)
async def delete_session(request: Request, session_id: str):
    """Returns once none of its processes is left. Deleting an ended session answers 200 with
    `deleted: false`; an id this server never gave is a 404."""
    deleted, how = await manager(request).close(session_id)
    return _json(SessionDeleted(session_id=session_id, deleted=deleted, reason=how))


@router.post("/v1/sessions/{session_id}/score", response_model=ScoreResult, summary="Grade what a session built",
             openapi_extra=request_body(SessionScore), responses=_WITH_ID)
async def score_session(request: Request, session_id: str):
    """The session's program (its files, then each execute that ended `ok`) graded with a code
    task in a fresh job, exactly as `/v1/score` grades a completion: the same reward, `status`
    and `detail` (tests, flags)."""
    m = manager(request)
    m.get(session_id)
    body = await parse_body(request, SessionScore)
    return _json(await m.score(session_id, body))
