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


# --------------------------------------------------------------------------------------------
# several weighted reward sources


@dataclass
class Scored:
    """One completion's reward from every source: ``reward = sum(weight * value)``; ``ok`` False
    when the server source had an infra error (the completion then leaves its group)."""

    reward: float | None
    sources: dict[str, float | None]
    flags: list[str]
    ok: bool
    detail: dict[str, Any] = field(default_factory=dict)


def _import_fn(spec: str) -> Callable[..., list[Any]]:
    import importlib

    mod, _, name = spec.partition(":")
    try:
        fn = getattr(importlib.import_module(mod), name)
    except (ImportError, AttributeError) as e:
        raise RuntimeError(f"reward source fn {spec!r} cannot be imported: {e}") from None
    if not callable(fn):
        raise RuntimeError(f"reward source fn {spec!r} is not callable")
    return fn


class MixedFuture:
    """The server's future (or none) plus the Python sources computed at submit time; ``result``
    combines them into :class:`Scored` values."""

    def __init__(self, mixer: RewardMixer, server_fut: cf.Future | None, local: dict[str, list[float | None]],
                 n: int):
        self._mixer, self._fut, self._local, self._n = mixer, server_fut, local, n

    def result(self, timeout: float | None = None) -> list[Scored]:
        server = self._fut.result(timeout=timeout) if self._fut is not None else None
        if server is not None and len(server) != self._n:
            raise RuntimeError(f"reward server returned {len(server)} results for {self._n} items")
        return self._mixer.combine(server, self._local, self._n)


class RewardMixer:
    """The configured reward sources over one batch of completions.

    Python sources run in the caller's thread at ``submit`` (they are meant to be cheap: format,
    length); the server source is one ``/v1/score`` call through ``server`` that overlaps
    generation as before. A Python source's value of None counts 0 and is left out of its metric.
    """

    def __init__(self, sources: list[Any], server: Scorer | None, max_completion_length: int):
        self.sources = sources
        self.server = server
        self.max_completion_length = max_completion_length
        self._fns = {s.name: _import_fn(s.fn) for s in sources if s.kind == "python"}
        if any(s.kind == "server" for s in sources) and server is None:
            raise RuntimeError("a kind=server reward source needs a scorer")

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.sources]

    def submit(self, items: list[dict[str, Any]], lengths: list[int], truncated: list[bool],
               prompts: list[str] | None = None) -> MixedFuture:
        """``items`` are the server's ``{id, completion, task}``; ``lengths`` in tokens."""
        n = len(items)
        fut = None
        if any(s.kind == "server" for s in self.sources):
            assert self.server is not None
            fut = self.server.submit(items)
        completions = [it["completion"] for it in items]
        kw = {"tasks": [it["task"] for it in items], "prompts": prompts, "completion_lengths": lengths,
              "truncated": truncated, "max_completion_length": self.max_completion_length}
        local: dict[str, list[float | None]] = {}
        for s in self.sources:
            if s.kind != "python":
                continue
            vals = list(self._fns[s.name](completions, **kw, **s.kwargs))
            if len(vals) != n:
                raise RuntimeError(f"reward source {s.name!r} returned {len(vals)} values for {n} completions")
            local[s.name] = [None if v is None else float(v) for v in vals]
        return MixedFuture(self, fut, local, n)

    def combine(self, server: list[Score] | None, local: dict[str, list[float | None]], n: int) -> list[Scored]:
        out: list[Scored] = []
        for i in range(n):
            values: dict[str, float | None] = {}
            ok = True
            flags: list[str] = []
            detail: dict[str, Any] = {}
            total = 0.0
            for s in self.sources:
                if s.kind == "server":
                    sc = server[i]  # type: ignore[index]
                    detail = sc.detail
                    raw = sc.detail.get("flags") if isinstance(sc.detail, dict) else None
                    flags = sorted({f for f in raw if isinstance(f, str)}) if isinstance(raw, list) else []
                    if not sc.ok:
                        ok = False
                        values[s.name] = None
                        continue
                    v: float | None = float(sc.reward)  # type: ignore[arg-type]
                else:
                    v = local[s.name][i]
                values[s.name] = v
                if v is not None:
                    total += s.weight * v
            out.append(Scored(total if ok else None, values, flags, ok, detail))
        return out
