"""ASGI middleware in front of every route: request id, bearer auth, the body-size cap, the
access log, request metrics, and the last word on a bug (a 500 that carries the request id,
in its body and its `X-Request-ID` header)."""

from __future__ import annotations

import asyncio
import hmac
import logging
import time
import uuid

from starlette.responses import Response

from reward_server.admission import ClientGone, client_gone
from reward_server.errors import internal_error, json_error
from reward_server.logs import request_id
from reward_server.metrics import Metrics
from reward_server.settings import Settings
from reward_server.state import ServerState

log = logging.getLogger("reward_server")
access_log = logging.getLogger("reward_server.access")

ROUTES = {"/v1/score", "/run_code", "/get_reward", "/submit", "/v1/ping", "/healthz", "/readyz", "/metrics",
          "/docs", "/openapi.json", "/v1/sessions", "/execute", "/sessions", "/health"}
OPEN_ROUTES = {"/healthz", "/readyz", "/v1/ping", "/health"}
_QUIET = {"/healthz", "/readyz", "/metrics", "/v1/ping", "/health"}


class GatewayMiddleware:
    def __init__(self, app, settings: Settings, state: ServerState):
        self.app = app
        self.max_body = settings.max_body_bytes
        token = settings.auth_token.get_secret_value() if settings.auth_token is not None else None
        self.token = token.encode() if token is not None else None
        self.state = state

    def _metrics(self) -> Metrics:
        return self.state.metrics

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        t0 = time.perf_counter()
        path = scope.get("path", "")
        route = path if path in ROUTES else ("/v1/sessions" if path.startswith("/v1/sessions/") else "other")
        headers = dict(scope.get("headers") or [])
        rid = headers.get(b"x-request-id", b"").decode("latin-1")[:128] or uuid.uuid4().hex
        token = request_id.set(rid)
        sent = {"code": 500, "started": False}

        async def send_wrapped(message):
            if message["type"] == "http.response.start":
                sent["code"], sent["started"] = message["status"], True
                message["headers"] = [*message.get("headers", []), (b"x-request-id", rid.encode("latin-1"))]
            await send(message)

        watcher: asyncio.Task | None = None
        gone_token = None
        try:
            resp = self._precheck(path, headers)
            if resp is None and scope.get("method") in ("POST", "PUT", "PATCH"):
                body, resp = await self._read_body(headers, receive)
                if resp is None:
                    gone = asyncio.Event()
                    gone_token = client_gone.set(gone)
                    watcher = asyncio.ensure_future(_watch_disconnect(receive, gone))
                    receive = _replay(body)
            if resp is not None:
                await resp(scope, receive, send_wrapped)
            else:
                await self.app(scope, receive, send_wrapped)
        except ClientGone:  # its client left while its jobs queued: nobody to answer
            sent["code"] = 499
        except asyncio.CancelledError:
            # uvicorn cancels what is still running when shutdown outlasts its grace: say so
            # (503, retry elsewhere) instead of the bare 500 uvicorn would send.
            if not sent["started"]:
                await json_error(503, "server shut down before this request finished; retry",
                                 {"Retry-After": "1"})(scope, receive, send_wrapped)
        except Exception as exc:  # a bug: answer 500 with the request id, never a bare reset
            log.error("unhandled error on %s", path, exc_info=exc)
            if not sent["started"]:
                await internal_error()(scope, receive, send_wrapped)
        finally:
            if watcher is not None:
                watcher.cancel()
            if gone_token is not None:
                client_gone.reset(gone_token)
            dt = time.perf_counter() - t0
            m = self._metrics()
            if m is not None:
                m.requests.labels(route, str(sent["code"])).inc()
                m.latency.labels(route).observe(dt)
            if route not in _QUIET:
                access_log.info(
                    "%s %s %s", scope.get("method"), path, sent["code"],
                    extra={"method": scope.get("method"), "path": path, "status": sent["code"],
                           "duration_ms": round(dt * 1000, 2), **self.state.request_log.pop(rid, {})},
                )
            request_id.reset(token)

    def _precheck(self, path: str, headers: dict[bytes, bytes]) -> Response | None:
        if self.token is not None and path not in OPEN_ROUTES:
            auth = headers.get(b"authorization", b"")
            scheme, _, cred = auth.partition(b" ")
            if scheme.lower() != b"bearer" or not hmac.compare_digest(cred.strip(), self.token):
                m = self._metrics()
                if m is not None:
                    m.rejected.labels("auth").inc()
                return json_error(401, "missing or wrong bearer token", {"WWW-Authenticate": "Bearer"})
        return None

    async def _read_body(self, headers: dict[bytes, bytes], receive) -> tuple[bytes, Response | None]:
        cl = headers.get(b"content-length")
        if cl is not None:
            try:
                n = int(cl)
            except ValueError:
                return b"", json_error(400, "bad Content-Length")
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
        m = self._metrics()
        if m is not None:
            m.rejected.labels("body_too_large").inc()
        return json_error(413, f"request body larger than {self.max_body} bytes")


async def _watch_disconnect(receive, gone: asyncio.Event) -> None:
    """After the body, the server's next message is the client leaving (or nothing)."""
    while True:
        msg = await receive()
        if msg["type"] == "http.disconnect":
            gone.set()
            return


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
