"""Python client for the reward server: `RewardClient` (sync) and `AsyncRewardClient`.

```python
async with AsyncRewardClient(["http://a:8000", "http://b:8000"], token="...") as client:
    results = await client.score([{"completion": text, "task": task}, ...])
    rewards = [r.reward for r in results]          # None where the sandbox failed
    passed = [r.code.passed for r in results if r.code]   # a code item's detail: CodeDetail
```

Large batches are split into requests of at most `max_batch` items, sent concurrently and
spread over the base URLs (least busy first). A request that gets 429 (honouring
`Retry-After`), 5xx, a timeout or a connection error is retried with exponential backoff and
jitter, on another server when there is one; other 4xx errors raise `RewardServerError` at
once (they will not get better). Within an answered batch only the items that came back
`infra_error` are sent again (`item_retries` rounds, default 1), never the whole batch.
Results come back in item order. Tasks may come as `datasets` and pandas hand them over
(numpy values, nulls for keys a row does not have). The retry decision is `_Core._decide`, written once; the
sync and async clients only do IO around it.

Sessions (`/v1/sessions`, docs/SESSIONS.md): `open_session` picks the least busy server and the
session id it answers names that server (`<server id>.<hex>`), so `execute`, `score_session`,
`session`, `close_session` go back to it from any client given the same base URLs (a server id
not seen yet is looked up on each server's /readyz). An execute or a score is never sent twice
unless the server said nothing ran (429, 503) or the connection never opened: running a cell
twice would change the session's state. `close_session` of an ended session is no error.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import httpx

from reward_server.labels import normal_task, plain
from reward_server.schemas import CodeDetail, ExtractOptions, ScoreItem, ScoreResult
from reward_server.sessions.models import (
    SessionCreated,
    SessionExecResult,
    SessionInfo,
    server_of,
    session_route,
)
from reward_server.settings import Weights

__all__ = ["AsyncRewardClient", "ClientStats", "CodeDetail", "RewardClient", "RewardServerError", "ScoreItem",
           "ScoreResult", "SessionCreated", "SessionExecResult", "SessionInfo"]

RETRY_STATUS = {408, 429, 500, 502, 503, 504}
_BUG_RETRIES = 1  # a 500 is the server's bug: tried once more (it may be a proxy's hiccup), not max_retries times


@dataclass
class ClientStats:
    """What the client sent: HTTP requests (first tries and retries) and items sent again."""

    requests: int = 0
    request_retries: int = 0
    item_retries: int = 0


@dataclass(frozen=True)
class _Decision:
    """After one attempt: `done`, or `retry` after `delay` seconds, or raise `error`."""

    action: str  # "done" | "retry" | "fail"
    delay: float = 0.0
    error: Exception | None = None


class RewardServerError(RuntimeError):
    def __init__(self, message: str, status_code: int | None = None, body: Any = None):
        super().__init__(message)
        self.status_code = status_code
        self.body = body


def _norm_url(u: str) -> str:
    u = u.strip().rstrip("/")
    for suffix in ("/v1/score", "/v1"):
        if u.endswith(suffix):
            u = u[: -len(suffix)]
    return u


def _item_json(it: Any) -> dict:
    """An item as JSON; a dict's task as `datasets` / pandas rows give it is normalised
    (`reward_server.labels.normal_task`: numpy values made plain, absent-key nulls dropped)."""
    if isinstance(it, ScoreItem):
        return it.model_dump(mode="json", exclude_none=True)
    if isinstance(it, Mapping):
        item = plain(it)
        if isinstance(item.get("task"), dict):
            item["task"] = normal_task(item["task"])
        return item
    raise TypeError(f"items must be dicts or ScoreItem, got {type(it).__name__}")


def _opt_json(x: Any) -> Any:
    if x is None or isinstance(x, dict):
        return x
    return x.model_dump(mode="json")


class _Core:
    """URL choice, backoff and response parsing shared by both clients."""

    def __init__(self, base_urls: str | Sequence[str], token: str | None, timeout: float, max_batch: int,
                 max_retries: int, backoff_base: float, backoff_max: float, max_concurrency: int,
                 item_retries: int = 1):
        urls = [base_urls] if isinstance(base_urls, str) else list(base_urls)
        urls = [_norm_url(u) for part in urls for u in part.split(",") if u.strip()]
        if not urls:
            raise ValueError("no base URL given")
        if max_batch < 1:
            raise ValueError("max_batch must be >= 1")
        self.urls = urls
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.timeout = timeout
        self.max_batch = max_batch
        self.max_retries = max_retries
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.max_concurrency = max_concurrency
        self.item_retries = item_retries
        self.stats = ClientStats()
        self._busy = dict.fromkeys(urls, 0)
        self._cool_until = dict.fromkeys(urls, 0.0)
        self._rr = 0
        self._lock = threading.Lock()
        self._session_urls: dict[str, str] = {}  # a server's session id prefix -> its base URL

    def _pick(self, avoid: str | None = None) -> tuple[str, float]:
        """(url, seconds to wait first): the least busy server not cooling down."""
        with self._lock:
            now = time.monotonic()
            n = len(self.urls)
            order = [self.urls[(self._rr + i) % n] for i in range(n)]
            self._rr = (self._rr + 1) % n
            ready = [u for u in order if self._cool_until[u] <= now and (u != avoid or n == 1)]
            if not ready:
                ready = [u for u in order if self._cool_until[u] <= now]
            if ready:
                u = min(ready, key=lambda x: self._busy[x])
                wait = 0.0
            else:
                u = min(order, key=lambda x: self._cool_until[x])
                wait = self._cool_until[u] - now
            self._busy[u] += 1
            return u, wait

    def _done(self, url: str) -> None:
        with self._lock:
            self._busy[url] -= 1

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        d = min(self.backoff_max, self.backoff_base * (2 ** attempt)) * (0.5 + random.random())
        if retry_after is not None:
            d = max(d, retry_after + random.random() * min(1.0, retry_after * 0.25 + 0.05))
        return d

    def _cool(self, url: str, seconds: float) -> None:
        with self._lock:
            self._cool_until[url] = max(self._cool_until[url], time.monotonic() + seconds)

    @staticmethod
    def _retry_after(resp: httpx.Response) -> float | None:
        v = resp.headers.get("retry-after")
        if v is None:
            return None
        try:
            return max(0.0, float(v))
        except ValueError:
            return None

    def _decide(self, attempt: int, url: str, resp: httpx.Response | None, exc: Exception | None) -> _Decision:
        """The one retry policy: transport errors and RETRY_STATUS answers are retried with
        backoff (the server cools down meanwhile) until `max_retries` (a 500 only once); any
        other answer is final."""
        with self._lock:
            self.stats.requests += 1
        if resp is not None and resp.status_code == 200:
            return _Decision("done")
        if exc is not None:
            err: Exception = RewardServerError(f"{url}: {type(exc).__name__}: {exc}")
            retry_after = None
        else:
            assert resp is not None
            err = self._error(resp)
            if resp.status_code not in RETRY_STATUS or (resp.status_code == 500 and attempt >= _BUG_RETRIES):
                return _Decision("fail", error=err)
            retry_after = self._retry_after(resp)
        if attempt >= self.max_retries:
            return _Decision("fail", error=err)
        delay = self._backoff(attempt, retry_after)
        self._cool(url, delay)
        with self._lock:
            self.stats.request_retries += 1
        return _Decision("retry", delay, err)

    def _session_decide(self, attempt: int, url: str, resp: httpx.Response | None, exc: Exception | None,
                        once: bool) -> _Decision:
        """`_decide` for session calls; with `once` (an execute, a score, a create: not safe to run
        twice) only what certainly did not run is retried: a 429 or 503 answer, a connection that
        never opened."""
        if not once:
            return self._decide(attempt, url, resp, exc)
        if resp is not None and resp.status_code in (429, 503):
            return self._decide(attempt, url, resp, exc)
        if exc is not None and isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout)):
            return self._decide(attempt, url, resp, exc)
        with self._lock:
            self.stats.requests += 1
        if resp is not None and resp.status_code == 200:
            return _Decision("done")
        err = self._error(resp) if resp is not None else RewardServerError(f"{url}: {type(exc).__name__}: {exc}")
        return _Decision("fail", error=err)

    def _remember(self, created: SessionCreated, url: str) -> None:
        with self._lock:
            self._session_urls[created.server_id] = url

    def _session_url(self, session_id: str) -> str | None:
        """The base URL of the server that holds `session_id` (None: its server id is not known yet)."""
        if len(self.urls) == 1:
            return self.urls[0]
        with self._lock:
            return self._session_urls.get(server_of(session_id))

    def _learn(self, url: str, readyz: Any) -> None:
        sid = readyz.get("sessions", {}).get("server_id") if isinstance(readyz, dict) else None
        if isinstance(sid, str):
            with self._lock:
                self._session_urls[sid] = url

    @staticmethod
    def _session_body(**fields: Any) -> dict[str, Any]:
        return {k: v for k, v in fields.items() if v is not None}

    def _failed(self, results: list[ScoreResult]) -> list[int]:
        """Indices of items worth sending again: the sandbox failed on them (infra_error). A
        `queue_timeout` is final: the caller's own deadline passed."""
        return [i for i, r in enumerate(results) if r.status == "infra_error"]

    def _merge(self, results: list[ScoreResult], pending: list[int], again: list[ScoreResult]) -> list[int]:
        """Put the retried items' results in place; returns what still failed."""
        with self._lock:
            self.stats.item_retries += len(pending)
        for i, r in zip(pending, again, strict=True):
            results[i] = r
        return [i for i, r in zip(pending, again, strict=True) if r.status == "infra_error"]

    def _chunks(self, items: list[dict]) -> list[list[dict]]:
        return [items[i:i + self.max_batch] for i in range(0, len(items), self.max_batch)]

    def _body(self, chunk: list[dict], weights: Any, extract: Any, queue_timeout_s: float | None = None) -> dict:
        body: dict[str, Any] = {"items": chunk}
        if queue_timeout_s is not None:
            body["queue_timeout_s"] = queue_timeout_s
        if weights is not None:
            body["weights"] = _opt_json(weights)
        if extract is not None:
            body["extract"] = _opt_json(extract)
        return body

    @staticmethod
    def _parse(resp: httpx.Response, n: int) -> list[ScoreResult]:
        data = resp.json()
        results = [ScoreResult.model_validate(r) for r in data["results"]]
        if len(results) != n:
            raise RewardServerError(f"server answered {len(results)} results for {n} items", resp.status_code, data)
        return results

    @staticmethod
    def _error(resp: httpx.Response) -> RewardServerError:
        try:
            body = resp.json()
            msg = body.get("message") or body.get("detail")
        except Exception:
            body, msg = resp.text, resp.text[:500]
        return RewardServerError(f"reward server answered {resp.status_code}: {msg}", resp.status_code, body)


class AsyncRewardClient(_Core):
    def __init__(
        self,
        base_urls: str | Sequence[str] = "http://127.0.0.1:8000",
        token: str | None = None,
        timeout: float = 600.0,
        max_batch: int = 512,
        max_retries: int = 8,
        backoff_base: float = 0.25,
        backoff_max: float = 30.0,
        max_concurrency: int = 8,
        transport: httpx.AsyncBaseTransport | None = None,
        item_retries: int = 1,
    ):
        super().__init__(base_urls, token, timeout, max_batch, max_retries, backoff_base, backoff_max, max_concurrency,
                         item_retries)
        limits = httpx.Limits(max_connections=max(16, max_concurrency * 2), max_keepalive_connections=max(16, max_concurrency * 2))
        self._http = httpx.AsyncClient(headers=self.headers, timeout=timeout, limits=limits, transport=transport)

    async def __aenter__(self) -> AsyncRewardClient:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def score(
        self,
        items: Iterable[dict | ScoreItem],
        weights: Weights | dict | None = None,
        extract: ExtractOptions | dict | None = None,
        queue_timeout_s: float | None = None,
    ) -> list[ScoreResult]:
        payload = [_item_json(it) for it in items]
        if not payload:
            return []
        chunks = self._chunks(payload)
        sem = asyncio.Semaphore(self.max_concurrency)

        async def one(chunk: list[dict]) -> list[ScoreResult]:
            async with sem:
                return await self._score_chunk(chunk, weights, extract, queue_timeout_s)

        parts = await asyncio.gather(*(one(c) for c in chunks))
        return [r for part in parts for r in part]

    async def post_json(self, path: str, body: dict) -> Any:
        """POST any JSON body to one of the servers with the same retry policy; returns the JSON."""
        return await self._post(path, body, None)

    async def _post(self, path: str, body: dict, n: int | None):
        avoid = None
        for attempt in range(self.max_retries + 1):
            url, wait = self._pick(avoid)
            resp = exc = None
            try:
                if wait > 0:
                    await asyncio.sleep(wait)
                try:
                    resp = await self._http.post(url + path, json=body)
                except httpx.TransportError as e:
                    exc = e
            finally:
                self._done(url)
            d = self._decide(attempt, url, resp, exc)
            if d.action == "done":
                return self._parse(resp, n) if n is not None else resp.json()
            if d.action == "fail":
                raise d.error
            avoid = url
        raise RewardServerError("retries exhausted")

    async def _score_chunk(self, chunk: list[dict], weights: Any, extract: Any,
                           queue_timeout_s: float | None = None) -> list[ScoreResult]:
        results = await self._post("/v1/score", self._body(chunk, weights, extract, queue_timeout_s), len(chunk))
        pending = self._failed(results)
        for _ in range(self.item_retries):
            if not pending:
                break
            again = await self._post("/v1/score", self._body([chunk[i] for i in pending], weights, extract, queue_timeout_s), len(pending))
            pending = self._merge(results, pending, again)
        return results


    # ------------------------------------------------------------------ sessions
    async def _session_call(self, method: str, path: str, body: dict | None, url: str | None, once: bool,
                            params: Any = None) -> httpx.Response:
        """One session request with the session retry policy; `url` None: the least busy server
        (a create). A 404 is returned, not raised (the caller knows what it means)."""
        avoid = None
        for attempt in range(self.max_retries + 1):
            target, wait = (url, 0.0) if url is not None else self._pick(avoid)
            resp = exc = None
            try:
                if wait > 0:
                    await asyncio.sleep(wait)
                try:
                    resp = await self._http.request(method, target + path, json=body, params=params,
                                                    headers=session_route(path))
                except httpx.TransportError as e:
                    exc = e
            finally:
                if url is None:
                    self._done(target)
            if resp is not None and resp.status_code == 404:
                return resp
            d = self._session_decide(attempt, target, resp, exc, once)
            if d.action == "done":
                return resp
            if d.action == "fail":
                raise d.error
            avoid = target
            if url is not None:
                await asyncio.sleep(d.delay)
        raise RewardServerError("retries exhausted")

    async def _server_of(self, session_id: str) -> str:
        url = self._session_url(session_id)
        if url is None:
            for u in self.urls:
                try:
                    self._learn(u, (await self._http.get(u + "/readyz")).json())
                except (httpx.HTTPError, ValueError):
                    continue
            url = self._session_url(session_id)
        if url is None:
            raise RewardServerError(f"no server of {self.urls} holds session {session_id!r}", 404)
        return url

    async def open_session(self, language: str = "python", *, runtime: str | None = None,
                           memory_mb: int | None = None, idle_timeout_s: float | None = None,
                           ttl_s: float | None = None, cpu_budget_s: float | None = None,
                           files: dict[str, str] | None = None, labels: dict[str, str] | None = None) -> SessionCreated:
        """A new session on the least busy server (`files`: path -> base64)."""
        body = self._session_body(language=language, runtime=runtime, memory_mb=memory_mb,
                                  idle_timeout_s=idle_timeout_s, ttl_s=ttl_s, cpu_budget_s=cpu_budget_s, files=files,
                                  labels=labels)
        resp = await self._session_call("POST", "/v1/sessions", body, None, once=True)
        if resp.status_code != 200:
            raise self._error(resp)
        created = SessionCreated.model_validate(resp.json())
        self._remember(created, str(resp.request.url).rsplit("/v1/sessions", 1)[0])
        return created

    async def execute(self, session_id: str, code: str, timeout_s: float | None = None,
                      stdin: str | None = None) -> SessionExecResult:
        """Run `code` in the session (its status says ok, error, timeout or session_lost)."""
        url = await self._server_of(session_id)
        body = self._session_body(code=code, timeout_s=timeout_s, stdin=stdin)
        resp = await self._session_call("POST", f"/v1/sessions/{session_id}/execute", body, url, once=True)
        if resp.status_code != 200:
            raise self._error(resp)
        return SessionExecResult.model_validate(resp.json())

    async def score_session(self, session_id: str, task: dict, weights: Weights | dict | None = None) -> ScoreResult:
        """Grade what the session built with a code task, as /v1/score grades a completion."""
        url = await self._server_of(session_id)
        body = self._session_body(task=normal_task(plain(task)), weights=_opt_json(weights))
        resp = await self._session_call("POST", f"/v1/sessions/{session_id}/score", body, url, once=True)
        if resp.status_code != 200:
            raise self._error(resp)
        return ScoreResult.model_validate(resp.json())

    async def session(self, session_id: str) -> SessionInfo:
        url = await self._server_of(session_id)
        resp = await self._session_call("GET", f"/v1/sessions/{session_id}", None, url, once=False)
        if resp.status_code != 200:
            raise self._error(resp)
        return SessionInfo.model_validate(resp.json())

    async def sessions(self, labels: dict[str, str] | None = None) -> list[SessionInfo]:
        """Every server's sessions that carry all of `labels` (to sweep orphans)."""
        params = [("label", f"{k}={v}") for k, v in (labels or {}).items()]
        out: list[SessionInfo] = []
        for u in self.urls:
            resp = await self._session_call("GET", "/v1/sessions", None, u, once=False, params=params)
            if resp.status_code != 200:
                raise self._error(resp)
            out.extend(SessionInfo.model_validate(x) for x in resp.json()["sessions"])
        return out

    async def close_session(self, session_id: str) -> bool:
        """End the session; False when it had already ended (or is unknown): no error."""
        try:
            url = await self._server_of(session_id)
        except RewardServerError:
            return False
        resp = await self._session_call("DELETE", f"/v1/sessions/{session_id}", None, url, once=False)
        return resp.status_code == 200 and bool(resp.json().get("deleted"))


class RewardClient(_Core):
    """The synchronous client: same behaviour, chunks sent from a small thread pool."""

    def __init__(
        self,
        base_urls: str | Sequence[str] = "http://127.0.0.1:8000",
        token: str | None = None,
        timeout: float = 600.0,
        max_batch: int = 512,
        max_retries: int = 8,
        backoff_base: float = 0.25,
        backoff_max: float = 30.0,
        max_concurrency: int = 8,
        transport: httpx.BaseTransport | None = None,
        item_retries: int = 1,
    ):
        super().__init__(base_urls, token, timeout, max_batch, max_retries, backoff_base, backoff_max, max_concurrency,
                         item_retries)
        limits = httpx.Limits(max_connections=max(16, max_concurrency * 2), max_keepalive_connections=max(16, max_concurrency * 2))
        self._http = httpx.Client(headers=self.headers, timeout=timeout, limits=limits, transport=transport)
        self._pool: ThreadPoolExecutor | None = None

    def __enter__(self) -> RewardClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        self._http.close()

    def score(
        self,
        items: Iterable[dict | ScoreItem],
        weights: Weights | dict | None = None,
        extract: ExtractOptions | dict | None = None,
        queue_timeout_s: float | None = None,
    ) -> list[ScoreResult]:
        payload = [_item_json(it) for it in items]
        if not payload:
            return []
        chunks = self._chunks(payload)
        if len(chunks) == 1:
            return self._score_chunk(chunks[0], weights, extract, queue_timeout_s)
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.max_concurrency, thread_name_prefix="reward-client")
        futs = [self._pool.submit(self._score_chunk, c, weights, extract, queue_timeout_s) for c in chunks]
        return [r for f in futs for r in f.result()]

    def post_json(self, path: str, body: dict) -> Any:
        return self._post(path, body, None)

    def _post(self, path: str, body: dict, n: int | None):
        avoid = None
        for attempt in range(self.max_retries + 1):
            url, wait = self._pick(avoid)
            resp = exc = None
            try:
                if wait > 0:
                    time.sleep(wait)
                try:
                    resp = self._http.post(url + path, json=body)
                except httpx.TransportError as e:
                    exc = e
            finally:
                self._done(url)
            d = self._decide(attempt, url, resp, exc)
            if d.action == "done":
                return self._parse(resp, n) if n is not None else resp.json()
            if d.action == "fail":
                raise d.error
            avoid = url
        raise RewardServerError("retries exhausted")

    def _score_chunk(self, chunk: list[dict], weights: Any, extract: Any,
                           queue_timeout_s: float | None = None) -> list[ScoreResult]:
        results = self._post("/v1/score", self._body(chunk, weights, extract, queue_timeout_s), len(chunk))
        pending = self._failed(results)
        for _ in range(self.item_retries):
            if not pending:
                break
            again = self._post("/v1/score", self._body([chunk[i] for i in pending], weights, extract, queue_timeout_s), len(pending))
            pending = self._merge(results, pending, again)
        return results

    # ------------------------------------------------------------------ sessions
    def _session_call(self, method: str, path: str, body: dict | None, url: str | None, once: bool,
                            params: Any = None) -> httpx.Response:
        """One session request with the session retry policy; `url` None: the least busy server
        (a create). A 404 is returned, not raised (the caller knows what it means)."""
        avoid = None
        for attempt in range(self.max_retries + 1):
            target, wait = (url, 0.0) if url is not None else self._pick(avoid)
            resp = exc = None
            try:
                if wait > 0:
                    time.sleep(wait)
                try:
                    resp = self._http.request(method, target + path, json=body, params=params,
                                              headers=session_route(path))
                except httpx.TransportError as e:
                    exc = e
            finally:
                if url is None:
                    self._done(target)
            if resp is not None and resp.status_code == 404:
                return resp
            d = self._session_decide(attempt, target, resp, exc, once)
            if d.action == "done":
                return resp
            if d.action == "fail":
                raise d.error
            avoid = target
            if url is not None:
                time.sleep(d.delay)
        raise RewardServerError("retries exhausted")

    def _server_of(self, session_id: str) -> str:
        url = self._session_url(session_id)
        if url is None:
            for u in self.urls:
                try:
                    self._learn(u, (self._http.get(u + "/readyz")).json())
                except (httpx.HTTPError, ValueError):
                    continue
            url = self._session_url(session_id)
        if url is None:
            raise RewardServerError(f"no server of {self.urls} holds session {session_id!r}", 404)
        return url

    def open_session(self, language: str = "python", *, runtime: str | None = None,
                           memory_mb: int | None = None, idle_timeout_s: float | None = None,
                           ttl_s: float | None = None, cpu_budget_s: float | None = None,
                           files: dict[str, str] | None = None, labels: dict[str, str] | None = None) -> SessionCreated:
        """A new session on the least busy server (`files`: path -> base64)."""
        body = self._session_body(language=language, runtime=runtime, memory_mb=memory_mb,
                                  idle_timeout_s=idle_timeout_s, ttl_s=ttl_s, cpu_budget_s=cpu_budget_s, files=files,
                                  labels=labels)
        resp = self._session_call("POST", "/v1/sessions", body, None, once=True)
        if resp.status_code != 200:
            raise self._error(resp)
        created = SessionCreated.model_validate(resp.json())
        self._remember(created, str(resp.request.url).rsplit("/v1/sessions", 1)[0])
        return created

    def execute(self, session_id: str, code: str, timeout_s: float | None = None,
                      stdin: str | None = None) -> SessionExecResult:
        """Run `code` in the session (its status says ok, error, timeout or session_lost)."""
        url = self._server_of(session_id)
        body = self._session_body(code=code, timeout_s=timeout_s, stdin=stdin)
        resp = self._session_call("POST", f"/v1/sessions/{session_id}/execute", body, url, once=True)
        if resp.status_code != 200:
            raise self._error(resp)
        return SessionExecResult.model_validate(resp.json())

    def score_session(self, session_id: str, task: dict, weights: Weights | dict | None = None) -> ScoreResult:
        """Grade what the session built with a code task, as /v1/score grades a completion."""
        url = self._server_of(session_id)
        body = self._session_body(task=normal_task(plain(task)), weights=_opt_json(weights))
        resp = self._session_call("POST", f"/v1/sessions/{session_id}/score", body, url, once=True)
        if resp.status_code != 200:
            raise self._error(resp)
        return ScoreResult.model_validate(resp.json())

    def session(self, session_id: str) -> SessionInfo:
        url = self._server_of(session_id)
        resp = self._session_call("GET", f"/v1/sessions/{session_id}", None, url, once=False)
        if resp.status_code != 200:
            raise self._error(resp)
        return SessionInfo.model_validate(resp.json())

    def sessions(self, labels: dict[str, str] | None = None) -> list[SessionInfo]:
        """Every server's sessions that carry all of `labels` (to sweep orphans)."""
        params = [("label", f"{k}={v}") for k, v in (labels or {}).items()]
        out: list[SessionInfo] = []
        for u in self.urls:
            resp = self._session_call("GET", "/v1/sessions", None, u, once=False, params=params)
            if resp.status_code != 200:
                raise self._error(resp)
            out.extend(SessionInfo.model_validate(x) for x in resp.json()["sessions"])
        return out

    def close_session(self, session_id: str) -> bool:
        """End the session; False when it had already ended (or is unknown): no error."""
        try:
            url = self._server_of(session_id)
        except RewardServerError:
            return False
        resp = self._session_call("DELETE", f"/v1/sessions/{session_id}", None, url, once=False)
        return resp.status_code == 200 and bool(resp.json().get("deleted"))
