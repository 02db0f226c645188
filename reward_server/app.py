"""The FastAPI application: `/v1/score`, health, metrics and the compatibility endpoints.

`create_app(settings, pool=None)` builds the app; its lifespan starts the sandbox pool
(unless one is passed in, which the caller then owns) and the math grader, and on
shutdown stops taking work, finishes what it accepted, then closes them.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import time
import uuid
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from reward_server.admission import Admission
from reward_server.logs import configure_logging, request_id
from reward_server.metrics import Metrics
from reward_server.schemas import MathTask, ScoreRequest, ScoreResponse
from reward_server.scoring import Scorer, load_math_module
from reward_server.settings import Settings
from sandbox.runner import languages

log = logging.getLogger("reward_server")
access_log = logging.getLogger("reward_server.access")

_TAGS = {"code", "math", "assert_check", "assert_list", "stdio", "call"}
_ROUTES = {"/v1/score", "/run_code", "/get_reward", "/healthz", "/readyz", "/metrics", "/docs", "/openapi.json"}
_OPEN_ROUTES = {"/healthz", "/readyz"}


# ---------------------------------------------------------------------------------------
# errors


class RequestRejected(Exception):
    """A request refused before any work (429/503)."""

    def __init__(self, status: int, message: str, retry_after: int | None = None):
        super().__init__(message)
        self.status, self.message, self.retry_after = status, message, retry_after


def field_path(loc: tuple | list) -> str:
    """('body', 'items', 0, 'task', 'code', 'tests', 'assert_check', 'entry_point') -> items.0.task.tests.entry_point"""
    parts: list[str] = []
    prev = None
    for p in loc:
        if p == "body" and not parts:
            prev = p
            continue
        if prev in ("task", "tests") and p in _TAGS:
            continue  # union tag pydantic inserts, not a field
        parts.append(str(p))
        prev = p
    return ".".join(parts) or "body"


def validation_response(errors: list[dict[str, Any]]) -> JSONResponse:
    clean = []
    for e in errors:
        path = field_path(e.get("loc", ()))
        clean.append({"field": path, "loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")})
    head = "; ".join(f"{c['field']}: {c['msg']}" for c in clean[:5])
    if len(clean) > 5:
        head += f"; and {len(clean) - 5} more"
    return JSONResponse(status_code=422, content={"message": head, "detail": clean, "request_id": request_id.get()})


def item_error(loc: list, msg: str, typ: str = "value_error") -> RequestValidationError:
    return RequestValidationError([{"loc": ["body", *loc], "msg": msg, "type": typ}])


def _json_error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(status_code=status, content={"detail": message, "request_id": request_id.get()}, headers=headers)


# ---------------------------------------------------------------------------------------
# ASGI middleware: request id, auth, body cap, access log and request metrics


class GatewayMiddleware:
    def __init__(self, app, settings: Settings, state: dict[str, Any]):
        self.app = app
        self.max_body = settings.max_body_bytes
        token = settings.auth_token.get_secret_value() if settings.auth_token else None
        self.token = token.encode() if token else None
        self.state = state

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        t0 = time.perf_counter()
        path = scope.get("path", "")
        route = path if path in _ROUTES else "other"
        headers = dict(scope.get("headers") or [])
        rid = headers.get(b"x-request-id", b"").decode("latin-1")[:128] or uuid.uuid4().hex
        token = request_id.set(rid)
        status_holder = {"code": 500}

        async def send_wrapped(message):
            if message["type"] == "http.response.start":
                status_holder["code"] = message["status"]
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"], (b"x-request-id", rid.encode("latin-1"))]
            await send(message)

        try:
            resp = self._precheck(path, headers)
            if resp is None and scope.get("method") in ("POST", "PUT", "PATCH"):
                body, resp = await self._read_body(headers, receive)
                if resp is None:
                    receive = _replay(body)
            if resp is not None:
                await resp(scope, receive, send_wrapped)
            else:
                await self.app(scope, receive, send_wrapped)
        finally:
            dt = time.perf_counter() - t0
            metrics: Metrics | None = self.state.get("metrics")
            if metrics is not None:
                metrics.requests.labels(route, str(status_holder["code"])).inc()
                metrics.latency.labels(route).observe(dt)
            if route not in ("/healthz", "/readyz", "/metrics"):
                access_log.info(
                    "%s %s %s", scope.get("method"), path, status_holder["code"],
                    extra={"method": scope.get("method"), "path": path, "status": status_holder["code"],
                           "duration_ms": round(dt * 1000, 2), **self.state.pop(("req", rid), {})},
                )
            request_id.reset(token)

    def _precheck(self, path: str, headers: dict[bytes, bytes]) -> Response | None:
        if self.token is not None and path not in _OPEN_ROUTES:
            auth = headers.get(b"authorization", b"")
            scheme, _, cred = auth.partition(b" ")
            if scheme.lower() != b"bearer" or not hmac.compare_digest(cred.strip(), self.token):
                m = self.state.get("metrics")
                if m is not None:
                    m.rejected.labels("auth").inc()
                return _json_error(401, "missing or wrong bearer token", {"WWW-Authenticate": "Bearer"})
        return None

    async def _read_body(self, headers: dict[bytes, bytes], receive) -> tuple[bytes, Response | None]:
        cl = headers.get(b"content-length")
        if cl is not None:
            try:
                n = int(cl)
            except ValueError:
                return b"", _json_error(400, "bad Content-Length")
            if n > self.max_body:
                return b"", self._too_large()
        chunks: list[bytes] = []
        size = 0
        while True:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                break
            chunk = msg.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                return b"", self._too_large()
            chunks.append(chunk)
            if not msg.get("more_body", False):
                break
        return b"".join(chunks), None

    def _too_large(self) -> Response:
        m = self.state.get("metrics")
        if m is not None:
            m.rejected.labels("body_too_large").inc()
        return _json_error(413, f"request body larger than {self.max_body} bytes")


def _replay(body: bytes):
    sent = False

    async def receive():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # like a client that stays connected
        return {"type": "http.disconnect"}

    return receive


# ---------------------------------------------------------------------------------------
# the app


def create_app(settings: Settings | None = None, pool: Any = None) -> FastAPI:
    settings = settings or Settings()
    state: dict[str, Any] = {"settings": settings}

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        owns_pool = pool is None
        p = pool
        if owns_pool:
            from sandbox import make_pool  # noqa: PLC0415

            options = dict(settings.sandbox_options)
            pin = options.pop("pin_cpus", settings.pin_cpus)
            if pin is not None and not isinstance(pin, bool):
                raise ValueError(f"pin_cpus must be true or false, not {pin!r}")
            p = make_pool(kind=settings.sandbox, size=settings.pool_size, pin_cpus=pin, **options)
            await p.start()
        math_module = load_math_module()
        grader = None
        if math_module is not None:
            try:
                grader = math_module.MathGrader(workers=settings.math_workers)
                await grader.start()
            except Exception:
                log.exception("math grader failed to start; math items will be infra_error")
                grader = None
        max_inflight = settings.max_inflight_jobs or max(1, int(getattr(p, "capacity", 0) or 1))
        admission = Admission(max_inflight, settings.max_queued_jobs, settings.retry_after_s)
        state.update(pool=p, admission=admission, math_module=math_module)
        scorer = Scorer(settings, p, grader, math_module, admission, state["metrics"])
        state["scorer"] = scorer
        app.state.scorer = scorer
        app.state.admission = admission
        app.state.pool = p
        kind = getattr(getattr(p, "stats", lambda: None)(), "kind", "?")
        log.info("reward server ready", extra={"sandbox": kind, "max_inflight": max_inflight,
                                               "max_queued": settings.max_queued_jobs, "math": grader is not None})
        try:
            yield
        finally:
            drained = await admission.drain(settings.shutdown_grace_s)
            log.info("shutting down", extra={"drained": drained, "left": admission.admitted})
            if grader is not None:
                with contextlib.suppress(Exception):
                    await grader.close()
            if owns_pool:
                await p.close()

    app = FastAPI(
        title="verireward reward server",
        version="0.1.0",
        description=(
            "Scores model completions for GRPO: code by running its tests in a sandbox, math by "
            "checking the final answer. Compatible with SandboxFusion (`/run_code`), OpenRLHF "
            "(`/get_reward`), TRL and verl."
        ),
        lifespan=lifespan,
    )
    app.state.settings = settings
    state["metrics"] = Metrics(admission=lambda: state.get("admission"), pool=lambda: state.get("pool"))
    app.state.metrics = state["metrics"]
    app.add_middleware(GatewayMiddleware, settings=settings, state=state)

    @app.exception_handler(RequestValidationError)
    async def _on_validation(request: Request, exc: RequestValidationError):
        m = state.get("metrics")
        if m is not None:
            m.rejected.labels("invalid").inc()
        return validation_response(list(exc.errors()))

    @app.exception_handler(StarletteHTTPException)
    async def _on_http_error(request: Request, exc: StarletteHTTPException):
        # FastAPI answers a body it cannot decode (not UTF-8, say) with a bare 400; that is
        # malformed input like bad JSON, so it gets the same 422 and shape.
        if exc.status_code == 400 and exc.detail == "There was an error parsing the body":
            m = state.get("metrics")
            if m is not None:
                m.rejected.labels("invalid").inc()
            return validation_response([{"loc": ["body"], "msg": "body is not valid JSON (UTF-8)", "type": "json_invalid"}])
        return await http_exception_handler(request, exc)

    @app.exception_handler(RequestRejected)
    async def _on_rejected(request: Request, exc: RequestRejected):
        headers = {"Retry-After": str(exc.retry_after)} if exc.retry_after is not None else None
        return _json_error(exc.status, exc.message, headers)

    @app.exception_handler(Exception)
    async def _on_bug(request: Request, exc: Exception):
        log.error("unhandled error on %s", request.url.path, exc_info=exc)
        return _json_error(500, f"internal error ({type(exc).__name__}); request id {request_id.get()}")

    def admit(n: int) -> None:
        """Accept n jobs now or refuse the request with 429 (503 while shutting down)."""
        adm: Admission | None = state.get("admission")
        if adm is None:
            raise RequestRejected(503, "server is starting", retry_after=1)
        if adm.draining:
            state["metrics"].rejected.labels("shutting_down").inc()
            raise RequestRejected(503, "server is shutting down", retry_after=1)
        if not adm.try_admit(n):
            state["metrics"].rejected.labels("overloaded").inc()
            raise RequestRejected(
                429, f"over capacity: {adm.admitted} jobs accepted, limit {adm.limit}; retry later",
                retry_after=adm.retry_after(n),
            )

    state["admit"] = admit
    app.state.admit = admit

    def check_limits(req: ScoreRequest) -> None:
        s = settings
        if len(req.items) > s.max_items_per_request:
            raise item_error(["items"], f"at most {s.max_items_per_request} items per request, got {len(req.items)}", "too_long")
        errors = []
        math_module = state.get("math_module")
        for i, it in enumerate(req.items):
            c = it.completion
            if len(c) > s.max_code_bytes or (len(c) * 4 > s.max_code_bytes and len(c.encode()) > s.max_code_bytes):
                errors.append({"loc": ["body", "items", i, "completion"], "msg": f"longer than {s.max_code_bytes} bytes", "type": "too_long"})
            t = it.task
            if isinstance(t, MathTask):
                if t.model_extra and math_module is not None:
                    try:
                        math_module.MathOptions.model_validate(t.model_extra)
                    except ValidationError as e:
                        for err in e.errors():
                            errors.append({"loc": ["body", "items", i, "task", *err["loc"]], "msg": err["msg"], "type": err["type"]})
                continue
            if t.timeout_s is not None and t.timeout_s > s.max_timeout_s:
                errors.append({"loc": ["body", "items", i, "task", "timeout_s"], "msg": f"at most {s.max_timeout_s}", "type": "less_than_equal"})
            if t.memory_mb is not None and t.memory_mb > s.max_memory_mb:
                errors.append({"loc": ["body", "items", i, "task", "memory_mb"], "msg": f"at most {s.max_memory_mb}", "type": "less_than_equal"})
            if len(errors) >= 20:
                break
        if errors:
            raise RequestValidationError(errors)

    app.state.check_limits = check_limits

    @app.post(
        "/v1/score",
        response_model=ScoreResponse,
        summary="Score a batch of completions",
        responses={
            401: {"description": "missing or wrong bearer token"},
            413: {"description": "body too large"},
            422: {"description": "malformed request; `message` and `detail[].field` name the field"},
            429: {"description": "over capacity; retry after `Retry-After` seconds"},
        },
        tags=["score"],
    )
    async def score(req: ScoreRequest, request: Request):
        check_limits(req)
        admit(len(req.items))
        scorer: Scorer = state["scorer"]
        results = await scorer.score_items(req.items, req.weights, req.extract)
        state[("req", request_id.get())] = {"items": len(results)}
        body = ScoreResponse.model_construct(results=results).model_dump_json()
        return Response(content=body, media_type="application/json")

    @app.get("/healthz", tags=["ops"], summary="Liveness: the process answers")
    async def healthz():
        return {"status": "ok"}

    @app.get("/readyz", tags=["ops"], summary="Readiness: the sandbox pool has live runners",
             responses={503: {"description": "not ready: no live runner, or shutting down (same body)"}})
    async def readyz():
        p = state.get("pool")
        adm: Admission | None = state.get("admission")
        ready = bool(p is not None and getattr(p, "ready", False) and adm is not None and not adm.draining)
        body: dict[str, Any] = {"ready": ready, "languages": sorted(k for k, ok in languages.available().items() if ok)}
        if p is not None:
            with contextlib.suppress(Exception):
                body["pool"] = json.loads(p.stats().model_dump_json())
        return JSONResponse(status_code=200 if ready else 503, content=body)

    @app.get("/metrics", tags=["ops"], summary="Prometheus metrics", response_class=Response,
             responses={200: {"description": "Prometheus text exposition format",
                              "content": {CONTENT_TYPE_LATEST.split(";")[0]: {"schema": {"type": "string"}}}}})
    async def metrics():
        return Response(generate_latest(state["metrics"].registry), media_type=CONTENT_TYPE_LATEST)

    from reward_server.compat.openrlhf import router as openrlhf_router  # noqa: PLC0415
    from reward_server.compat.sandbox_fusion import router as sf_router  # noqa: PLC0415

    app.include_router(sf_router)
    app.include_router(openrlhf_router)
    return app


def app_from_env() -> FastAPI:
    """`uvicorn --factory reward_server.app:app_from_env` (settings from REWARD_SERVER_*)."""
    s = Settings()
    configure_logging(s.log_level, s.log_json)
    return create_app(s)
