"""Error shapes of the HTTP API, in one place: 422 names the field, 429/503/504 say when to
come back, 500 carries the request id. Routers and the scorer raise these; `install` maps
them to responses, so no router imports the app."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from reward_server.logs import request_id

# union tags pydantic puts in an error's location; they are not fields
_TAGS = {"code", "math", "assert_check", "assert_list", "stdio", "call"}


# OpenAPI `responses` for a route that takes a body (the schema fuzzer checks every code is documented)
BODY_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {"description": "missing or wrong bearer token"},
    413: {"description": "body too large"},
    422: {"description": "malformed request; `message` and `detail[].field` name the field"},
    429: {"description": "over capacity; retry after `Retry-After` seconds"},
    503: {"description": "starting or shutting down; retry after `Retry-After` seconds"},
}


class RequestRejected(Exception):
    """A request refused before any work (429/503/504); `retry_after` in seconds."""

    def __init__(self, status: int, message: str, retry_after: int | None = None, reason: str = ""):
        super().__init__(message)
        self.status, self.message, self.retry_after, self.reason = status, message, retry_after, reason


class InvalidRequest(Exception):
    """Bad input found after parsing (a cap, a label, a field another field contradicts): 422."""

    def __init__(self, errors: list[dict[str, Any]]):
        super().__init__("; ".join(str(e.get("msg", "")) for e in errors[:3]))
        self.errors = errors


def invalid(loc: list, msg: str, typ: str = "value_error") -> InvalidRequest:
    """One 422 error at `loc` (inside the body)."""
    return InvalidRequest([error(loc, msg, typ)])


def error(loc: list, msg: str, typ: str = "value_error") -> dict[str, Any]:
    return {"loc": ["body", *loc], "msg": msg, "type": typ}


def field_path(loc: tuple | list) -> str:
    """('body', 'items', 0, 'task', 'code', 'tests', 'assert_check', 'entry_point') -> items.0.task.tests.entry_point"""
    parts: list[str] = []
    prev = None
    for p in loc:
        if p == "body" and not parts:
            prev = p
            continue
        if prev in ("task", "tests") and p in _TAGS:
            continue
        parts.append(str(p))
        prev = p
    return ".".join(parts) or "body"


def validation_response(errors: list[dict[str, Any]]) -> JSONResponse:
    clean = []
    for e in errors:
        loc = [x if isinstance(x, int) else str(x) for x in e.get("loc", ())]
        clean.append({"field": field_path(loc), "loc": loc, "msg": str(e.get("msg", "")), "type": str(e.get("type", ""))})
    head = "; ".join(f"{c['field']}: {c['msg']}" for c in clean[:5])
    if len(clean) > 5:
        head += f"; and {len(clean) - 5} more"
    content = {"message": head, "detail": clean, "request_id": request_id.get()}
    from sandbox.jobs import escape_surrogates  # noqa: PLC0415  (a message may quote the input)

    return JSONResponse(status_code=422, content=escape_surrogates(content))


def json_error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(status_code=status, content={"detail": message, "request_id": request_id.get()}, headers=headers)


def internal_error() -> JSONResponse:
    rid = request_id.get()
    return json_error(500, f"internal error; request id {rid}")


def install(app: FastAPI, count_rejected) -> None:
    """Register the handlers; `count_rejected(reason)` feeds /metrics."""

    @app.exception_handler(RequestValidationError)
    async def _on_validation(request: Request, exc: RequestValidationError):
        count_rejected("invalid")
        return validation_response(list(exc.errors()))

    @app.exception_handler(InvalidRequest)
    async def _on_invalid(request: Request, exc: InvalidRequest):
        count_rejected("invalid")
        return validation_response(exc.errors)

    @app.exception_handler(StarletteHTTPException)
    async def _on_http_error(request: Request, exc: StarletteHTTPException):
        # A body FastAPI cannot decode is malformed input like bad JSON: the same 422.
        if exc.status_code == 400 and exc.detail == "There was an error parsing the body":
            count_rejected("invalid")
            return validation_response([error([], "body is not valid JSON (UTF-8)", "json_invalid")])
        return await http_exception_handler(request, exc)

    @app.exception_handler(RequestRejected)
    async def _on_rejected(request: Request, exc: RequestRejected):
        if exc.reason:
            count_rejected(exc.reason)
        headers = {"Retry-After": str(exc.retry_after)} if exc.retry_after is not None else None
        return json_error(exc.status, exc.message, headers)
