"""Reward scoring over HTTP, running beside generation.

The trainer is synchronous PyTorch code; the reward client is asyncio. :class:`HttpScorer` runs
one event loop in a background thread that owns an ``AsyncRewardClient``; ``submit`` hands a
batch to that loop and returns a ``concurrent.futures.Future`` at once, so the trainer keeps
generating (or computing log-probs) while the server grades, and blocks only when it needs
the rewards. The time spent blocked is what the step reports as reward-wait share.
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass
class Score:
    id: str
    reward: float | None
    status: str  # "ok" | "infra_error"
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == "ok" and self.reward is not None


class Scorer(Protocol):
    def submit(self, items: list[dict[str, Any]]) -> cf.Future: ...

    def close(self) -> None: ...


def _to_score(r: Any) -> Score:
    if isinstance(r, Score):
        return r
    if isinstance(r, dict):
        return Score(str(r.get("id")), r.get("reward"), r.get("status", "ok"), dict(r.get("detail") or {}))
    return Score(str(r.id), r.reward, r.status, dict(getattr(r, "detail", None) or {}))


class HttpScorer:
    """Scores through ``reward_server.client.AsyncRewardClient`` (the only path to the server)."""

    def __init__(
        self,
        base_urls: list[str],
        token: str | None = None,
        timeout: float = 120.0,
        max_batch: int = 256,
        weights: dict[str, float] | None = None,
    ):
        try:
            from reward_server.client import AsyncRewardClient
        except ImportError as e:  # pragma: no cover - depends on the sibling package
            raise RuntimeError(f"reward_server.client is not available ({e}); the trainer scores over HTTP") from e
        self._weights = weights
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="reward-client", daemon=True)
        self._thread.start()
        urls = base_urls if len(base_urls) > 1 else base_urls[0]

        async def _make():
            client = AsyncRewardClient(urls, token=token, timeout=timeout, max_batch=max_batch)
            enter = getattr(client, "__aenter__", None)
            if enter is not None:
                client = (await enter()) or client
            return client

        self._client = asyncio.run_coroutine_threadsafe(_make(), self._loop).result(timeout=60)

    def submit(self, items: list[dict[str, Any]]) -> cf.Future:
        async def _go():
            res = await self._client.score(items, weights=self._weights)
            return [_to_score(r) for r in res]

        return asyncio.run_coroutine_threadsafe(_go(), self._loop)

    def close(self) -> None:
        if self._loop.is_closed():
            return
        try:
            asyncio.run_coroutine_threadsafe(self._client.aclose(), self._loop).result(timeout=30)
        except Exception:  # noqa: BLE001 - closing is best effort
            pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()


class CallableScorer:
    """A local Python function as scorer (tests and offline experiments); runs in a worker thread
    so it overlaps generation exactly like the HTTP path. ``fn(items) -> list[Score | dict]``."""

    def __init__(self, fn: Callable[[list[dict[str, Any]]], list[Any]], delay_s: float = 0.0):
        self._fn = fn
        self._delay = delay_s
        self._pool = cf.ThreadPoolExecutor(max_workers=1, thread_name_prefix="reward-fn")

    def submit(self, items: list[dict[str, Any]]) -> cf.Future:
        def _go():
            if self._delay:
                time.sleep(self._delay)
            return [_to_score(r) for r in self._fn(items)]

        return self._pool.submit(_go)

    def close(self) -> None:
        self._pool.shutdown(wait=True)


class WaitClock:
    """Accumulates the time the trainer spends blocked on reward futures."""

    def __init__(self) -> None:
        self.waited = 0.0

    def result(self, fut: cf.Future, timeout: float | None = None) -> Any:
        t0 = time.perf_counter()
        try:
            return fut.result(timeout=timeout)
        finally:
            self.waited += time.perf_counter() - t0
