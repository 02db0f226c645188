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
from dataclasses import dataclass
from typing import Any, Protocol

from reward_server.client import AsyncRewardClient, ScoreResult


class Scorer(Protocol):
    """Grades a batch of ``{id, completion, task}`` items: a future of one ``ScoreResult`` each."""

    def submit(self, items: list[dict[str, Any]]) -> cf.Future: ...

    def close(self) -> None: ...


def _result(r: ScoreResult | dict[str, Any]) -> ScoreResult:
    """A local function's answer as the client's result (the HTTP path gets one already)."""
    return r if isinstance(r, ScoreResult) else ScoreResult.model_validate(r)


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
        self._weights = weights
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="reward-client", daemon=True)
        self._thread.start()
        urls = base_urls if len(base_urls) > 1 else base_urls[0]

        async def _make() -> AsyncRewardClient:  # made on the loop that will use it
            return AsyncRewardClient(urls, token=token, timeout=timeout, max_batch=max_batch)

        self._client = asyncio.run_coroutine_threadsafe(_make(), self._loop).result(timeout=60)

    def submit(self, items: list[dict[str, Any]]) -> cf.Future:
        return asyncio.run_coroutine_threadsafe(self._client.score(items, weights=self._weights), self._loop)

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
    so it overlaps generation exactly like the HTTP path. ``fn(items) -> list[ScoreResult | dict]`` (a dict
    is a result as JSON)."""

    def __init__(self, fn: Callable[[list[dict[str, Any]]], list[Any]], delay_s: float = 0.0):
        self._fn = fn
        self._delay = delay_s
        self._pool = cf.ThreadPoolExecutor(max_workers=1, thread_name_prefix="reward-fn")

    def submit(self, items: list[dict[str, Any]]) -> cf.Future:
        def _go():
            if self._delay:
                time.sleep(self._delay)
            return [_result(r) for r in self._fn(items)]

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
    when the server source had an infra error (the completion then leaves its group); ``server``
    is the server source's result as the client gave it (None without one)."""

    reward: float | None
    sources: dict[str, float | None]
    flags: list[str]
    ok: bool
    server: ScoreResult | None = None


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

    def combine(self, server: list[ScoreResult] | None, local: dict[str, list[float | None]], n: int) -> list[Scored]:
        out: list[Scored] = []
        for i in range(n):
            values: dict[str, float | None] = {}
            ok = True
            flags: list[str] = []
            result: ScoreResult | None = None
            total = 0.0
            for s in self.sources:
                if s.kind == "server":
                    result = server[i]  # type: ignore[index]
                    flags = result.flags
                    if not result.ok:
                        ok = False
                        values[s.name] = None
                        continue
                    v: float | None = float(result.reward)  # type: ignore[arg-type]
                else:
                    v = local[s.name][i]
                values[s.name] = v
                if v is not None:
                    total += s.weight * v
            out.append(Scored(total if ok else None, values, flags, ok, result))
        return out
