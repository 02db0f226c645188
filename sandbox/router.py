"""The router above the pools: one pool per runtime on one host kind, and (by default) one
more whose runners see the toolchains for jobs in other languages than Python. It is a JobRunner
(`sandbox.api`) like the single pool, so the server holds either the same way.

A runtime this host has not built is listed unavailable (`status()`) and refused, never a
crash. Python jobs go to runners that see the interpreter only, the others to the toolchain
pool (bwrap: the host's packages; docker: the toolchain image), started on the first such job
(`sandbox.toolchains` says what the `languages` option means).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from sandbox import toolchains
from sandbox.api import InfraError, PoolStats, RuntimeStatus, UnknownSession
from sandbox.hosts import RunnerHandle, RunnerStartError, resolve_kind, unavailable_reason
from sandbox.jobs import ExecRequest, ExecResult, Job, JobResult
from sandbox.pool import SandboxPool, make_pool
from sandbox.runtimes.table import DEFAULT, RUNTIMES, get
from sandbox.sessions import SessionExec, SessionExecResult, SessionSpec, SessionStats

log = logging.getLogger("sandbox.router")


class RuntimePools:
    """One pool per runtime, on one host kind; `run`/`execute` take the pool of the job's
    `runtime`. The default runtime's pool starts at `start()` (its failure is the caller's:
    nothing to serve); the others offered (`runtimes`; None: every runtime this host has
    built) start there too, or on first use with `lazy`, and one that is not built or fails to
    start is listed unavailable (`status()`) and refused, never a crash. Jobs for a runtime
    not offered are refused (ValueError).

    All pools are made with the same options (each could take every job at once) and share one
    CpuPlan, so pinning never puts two pools' jobs on one CPU; bounding the jobs of all pools
    together is the caller's (the server's admission, sized by `capacity`: one pool's slots).
    `ready` is the default runtime's pool's; `stats` and `handles` cover every pool.

    Languages (`pool_options["languages"]`, see toolchains.py): with "auto" (the default) a job
    in another language than Python goes to one more pool, `toolchains` (the lean runtime; its
    runners see the toolchains: bwrap the host's packages, docker the toolchain image), made like
    the others, sharing their CpuPlan and the caller's admission bound, started on the first such
    job or at `start()` with `eager_toolchains`; the runtimes' pools keep the interpreter-only
    view. A language whose toolchain is not found here is sent to the default pool, whose runner
    answers it "not installed here" per item, as before. True: every pool sees the toolchains
    (no routing); False: no toolchain pool. A docker `image` named by the operator decides
    alone (no routing)."""

    def __init__(self, kind: str = "auto", runtimes: tuple[str, ...] | None = (DEFAULT,), *, default: str = DEFAULT,
                 lazy: bool = False, eager_toolchains: bool = False, **pool_options: Any) -> None:
        get(default)
        for name in runtimes or ():
            get(name)
        self.languages_mode = toolchains.mode(pool_options.pop("languages", "auto"))
        self.eager_toolchains = eager_toolchains
        self.toolchain_languages: list[str] = []  # found on this host at start() (routing on)
        self.kind = kind
        self.default = default
        self.lazy = lazy
        self.requested = None if runtimes is None else tuple(dict.fromkeys((default, *runtimes)))
        self.pool_options = pool_options
        self.pools: dict[str, SandboxPool] = {}
        self.reasons: dict[str, str] = {}  # runtime -> why it is unavailable
        self.start_s: dict[str, float] = {}  # runtime -> seconds its pool took to start
        self._locks: dict[str, asyncio.Lock] = {}  # per pool: one lazy start each, never one for another
        self._started = False
        self._closed = False
        self._session_pools: dict[str, SandboxPool] = {}  # open session key -> its pool

    # ------------------------------------------------------------ what is offered
    @property
    def offered(self) -> tuple[str, ...]:
        """The runtimes jobs may name: the default, then the others asked for (or, asked for
        none, every known one) that this host can run."""
        names = self.requested if self.requested is not None else tuple(dict.fromkeys((self.default, *RUNTIMES)))
        return tuple(n for n in names if n not in self.reasons)

    @property
    def default_runtime(self) -> str:
        return self.default

    def status(self) -> dict[str, RuntimeStatus]:
        """For /readyz: every known runtime: `ready` (its pool has a live runner), `idle`
        (offered, starts on first use), `down` (started, no live runner now), `unavailable`
        (with `reason`) or `not offered` (the operator left it out)."""
        out: dict[str, RuntimeStatus] = {}
        for name in RUNTIMES:
            entry: RuntimeStatus = {"default": name == self.default}
            p = self.pools.get(name)
            if name in self.reasons:
                entry.update(state="unavailable", reason=self.reasons[name])
            elif name not in self.offered:
                entry["state"] = "not offered"
            elif p is None:
                entry["state"] = "idle" if self._started else "starting"
            else:
                entry["state"] = "ready" if p.ready else "down"
            if name in self.start_s:
                entry["start_s"] = round(self.start_s[name], 2)
            out[name] = entry
        return out

    def refusal(self, name: str) -> str | None:
        """Why a job naming runtime `name` is refused (None: it is accepted)."""
        if name in self.offered:
            return None
        why = self.reasons.get(name) or ("not a runtime" if name not in RUNTIMES else "not offered by this server")
        return f"runtime {name!r}: {why} (available: {', '.join(self.offered)})"

    # ------------------------------------------------------------------ lifecycle
    def _image(self, name: str) -> str | None:
        if get(name).requirements:
            return None
        return self.pool_options.get("image") or toolchains.host_options(
            self.kind, self.languages_mode, name, self.pool_options).get("image")

    def _make(self, name: str) -> SandboxPool:
        options = {**self.pool_options,
                   **toolchains.host_options(self.kind, self.languages_mode, name, self.pool_options)}
        if name != toolchains.POOL and get(name).requirements:
            options.pop("image", None)  # the lean runtime's image; a runtime with packages has its own
            options["runtime"] = name
        if name == toolchains.POOL:
            options["max_sessions"] = 0  # sessions are Python's: they go to their runtime's pool
        p = make_pool(self.kind, **options)
        first = self.pools.get(self.default)
        if first is not None:
            p.cpus = first.cpus  # one plan for every pool: pinned jobs never share a CPU
        return p

    async def _start_one(self, name: str) -> SandboxPool:
        t0 = time.monotonic()
        p = await asyncio.to_thread(self._make, name)  # a toolchain host finds (or builds, once) C++'s PCH
        await p.start()
        if self._closed:  # closed while it started (a lazy start during shutdown): no runner left behind
            await p.close()
            raise InfraError("the sandbox pools are closed")
        self.start_s[name] = time.monotonic() - t0
        self.pools[name] = p
        return p

    async def start(self) -> None:
        why = unavailable_reason(self.default, self.kind, self._image(self.default)) if self.kind != "auto" else None
        if why is not None:  # a server without its default serves nothing: refuse, saying how to build it
            raise RunnerStartError(f"default runtime {self.default!r}: {why}")
        self._closed = False
        if self.kind == "auto":  # resolved first: which options each pool gets depends on it
            self.kind = await asyncio.to_thread(resolve_kind, "auto", self.pool_options.get("image"))
        await self._start_one(self.default)
        names = self.requested if self.requested is not None else tuple(RUNTIMES)
        for name in names:
            if name == self.default:
                continue
            why = unavailable_reason(name, self.kind, self._image(name))
            if why is not None:
                if self.requested is not None:  # asked for by name: say why it is not there
                    log.warning("runtime %s unavailable: %s", name, why)
                self.reasons[name] = why
            elif not self.lazy:
                await self._try_start(name)
        if self.routes_languages:
            self.toolchain_languages, why = await asyncio.to_thread(toolchains.found, self.kind)
            if why is not None:
                self.reasons[toolchains.POOL] = why
            elif self.eager_toolchains:
                await self._try_start(toolchains.POOL)
        self._started = True

    @property
    def routes_languages(self) -> bool:
        """Whether jobs in other languages than Python go to the toolchain pool (see the class)."""
        return toolchains.routes(self.languages_mode, self.kind, self.pool_options)

    def pool_for(self, language: str, runtime: str) -> str:
        """Which pool runs a job: the toolchain pool for a language whose toolchain this host
        has (routing on), else its runtime's."""
        if language != "python" and self.routes_languages and language in self.toolchain_languages:
            return toolchains.POOL
        return runtime

    async def _try_start(self, name: str) -> SandboxPool | None:
        try:
            return await self._start_one(name)
        except Exception as exc:  # noqa: BLE001 - a runtime that does not start is unavailable, not fatal
            log.error("runtime %s did not start: %s", name, exc)
            self.reasons[name] = f"did not start: {exc}"
            return None

    async def pool(self, name: str) -> SandboxPool:
        p = self.pools.get(name)
        if p is not None:
            return p
        why = self.refusal(name) if name != toolchains.POOL else self.reasons.get(name)
        if why is not None:
            if name in self.reasons:  # offered, then its start failed: the sandbox's fault, not the job's
                raise InfraError(why)
            raise ValueError(why)
        async with self._locks.setdefault(name, asyncio.Lock()):
            if name not in self.pools and await self._try_start(name) is None:
                raise InfraError(self.reasons[name])
        return self.pools[name]

    async def _route(self, language: str, runtime: str) -> tuple[SandboxPool, str | None]:
        """The pool of a job, and the runtime it runs on there where that is not its own."""
        name = self.pool_for(language, runtime)
        moved = DEFAULT if name == toolchains.POOL and runtime != DEFAULT else None  # a runtime is Python's packages
        return await self.pool(name), moved

    async def run(self, job: Job, on_event: Callable[[dict], None] | None = None) -> JobResult:
        p, moved = await self._route(_toolchain_language(job), job.runtime)
        if moved is not None:
            job = job.model_copy(update={"runtime": moved})
        return await p.run(job, on_event)

    async def execute(self, req: ExecRequest) -> ExecResult:
        p, moved = await self._route(req.language, req.runtime)
        if moved is not None:
            req = req.model_copy(update={"runtime": moved})
        return await p.execute(req)

    # ------------------------------------------------------------------ sessions
    async def open_session(self, spec: SessionSpec) -> str:
        """A session on its runtime's pool (keys are unique across pools: random)."""
        p = await self.pool(spec.runtime)
        key = await p.open_session(spec)
        self._session_pools[key] = p
        return key

    def _session_pool(self, key: str) -> SandboxPool:
        p = self._session_pools.get(key)
        if p is None:
            raise UnknownSession(key)
        return p

    async def session_execute(self, key: str, req: SessionExec) -> SessionExecResult:
        return await self._session_pool(key).session_execute(key, req)

    async def close_session(self, key: str) -> None:
        p = self._session_pools.pop(key, None)
        if p is not None:
            await p.close_session(key)

    def session_program(self, key: str) -> str:
        return self._session_pool(key).session_program(key)

    @property
    def session_capacity(self) -> int:
        """The sessions the started pools hold at once, all runtimes together."""
        return sum(p.session_capacity for p in self.pools.values())

    def session_stats(self) -> SessionStats:
        all_stats = [p.session_stats().model_dump() for p in self.pools.values()]
        return SessionStats(**{f: sum(s[f] for s in all_stats) for f in SessionStats.model_fields})

    async def close(self) -> None:
        self._closed = True
        self._session_pools.clear()
        pools, self.pools = self.pools, {}
        for p in pools.values():
            await p.close()

    async def __aenter__(self) -> RuntimePools:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ------------------------------------------------------------ pool-like facts
    @property
    def ready(self) -> bool:
        """The default runtime's pool has a live runner."""
        p = self.pools.get(self.default)
        return p is not None and p.ready

    @property
    def capacity(self) -> int:
        """One pool's slots: what the server admits across all runtimes at once (each pool
        could take all of it; their sum would double the memory the jobs may use)."""
        return self.pools[self.default].capacity

    def languages(self) -> list[str]:
        """For /readyz: what the runners say they run (each pool's last pong), and with routing
        the toolchains found at start-up until the toolchain pool has said it itself."""
        said = set(self.pools[self.default].languages())
        if self.routes_languages:
            tc = self.pools.get(toolchains.POOL)
            said |= set(tc.languages() if tc is not None else self.toolchain_languages)
        return sorted(said)

    def toolchain_status(self) -> dict[str, Any]:
        """For /readyz: the toolchain pool's `state` (idle: starts on the first job in another
        language; ready; down; unavailable, with `reason`; off: languages false; in every
        runner: languages true; image: a docker runner runs what its image has), `mode` and
        the `languages` it serves."""
        mode = "auto" if self.languages_mode == "auto" else str(self.languages_mode).lower()
        entry: dict[str, Any] = {"mode": mode, "eager": self.eager_toolchains}
        if not self.routes_languages:
            own_view = self.kind == "bwrap" or (self.kind == "docker" and not self.pool_options.get("image"))
            entry["state"] = {"true": "in every runner", "false": "off"}[mode] if own_view else "image"
            return entry
        p = self.pools.get(toolchains.POOL)
        if toolchains.POOL in self.reasons:
            entry.update(state="unavailable", reason=self.reasons[toolchains.POOL])
        elif p is None:
            entry["state"] = "idle" if self._started else "starting"
        else:
            entry["state"] = "ready" if p.ready else "down"
        entry["languages"] = list(p.languages() if p is not None else self.toolchain_languages)
        if toolchains.POOL in self.start_s:
            entry["start_s"] = round(self.start_s[toolchains.POOL], 2)
        return entry

    def stats(self) -> PoolStats:
        """Every pool's figures added up (capacity: the runners' slots, all pools)."""
        all_stats = [p.stats().model_dump() for p in self.pools.values()]
        sums = {f: sum(s[f] for s in all_stats) for f in
                ("size", "live", "in_flight", "capacity", "restarts", "jobs_total", "infra_errors")}
        return PoolStats(kind=self.kind, **sums)

    def handles(self) -> list[RunnerHandle]:
        """Every pool's live runners (tests kill them to check recovery)."""
        return [h for p in self.pools.values() for h in p.handles()]


def _toolchain_language(job: Job) -> str:
    """The language a job's pool must build: the program's, or, for a Python program, that of
    a task program (checker, interactor) in another language, which the toolchain pool builds
    (where the Python program runs on the lean runtime)."""
    if job.language != "python":
        return job.language
    tests = job.tests
    for prog in (getattr(tests, "checker", None), getattr(tests, "interactor", None)):
        if prog is not None and prog.language != "python":
            return prog.language
    return job.language
