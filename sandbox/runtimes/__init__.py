"""Runtimes: which Python a job's program runs on. `python` is the standard library alone;
`sci` adds a scientific stack (sci.txt) mounted read-only into the sandbox: for bwrap a host
directory made by `sandbox/build_runtime.sh sci`, for docker an image variant built from the
same wheelhouse without a registry (sandbox/Dockerfile.sci). The runner finds a runtime's
packages by VERIREWARD_RUNTIME_SITE and warm-imports VERIREWARD_RUNTIME_WARM in its spawners.

`RuntimePools` routes each job to a pool of its runtime's runners; a runtime this host has not
built is listed unavailable (`status()`) and refused, never a crash. It also routes by language
(`toolchains.py`): Python jobs to runners that see the interpreter only, the others to a pool
whose runners see the toolchains (bwrap: the host's packages; docker: the toolchain image),
started on the first such job.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sandbox.runtimes import toolchains

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
CACHE = Path(os.environ.get("VERIREWARD_RUNTIME_CACHE", REPO / ".cache" / "runtimes"))
SITE_IN_SANDBOX = "/opt/runtime/site"  # where a runtime's packages appear inside the sandbox
DEFAULT = "python"

log = logging.getLogger("sandbox.runtimes")


@dataclass(frozen=True)
class Runtime:
    name: str
    requirements: str  # a file beside this one ("" for the standard library alone)
    warm: tuple[str, ...] = ()  # imported by each spawner before it forks: a candidate's import is then free
    default_image: str = "verireward-sandbox:latest"

    @property
    def site_dir(self) -> Path | None:
        """The host directory bwrap binds (None: nothing to bind)."""
        return CACHE / self.name if self.requirements else None

    def image(self) -> str:
        """The docker image of this runtime (VERIREWARD_SANDBOX_IMAGE[_NAME] overrides)."""
        if not self.requirements:
            return os.environ.get("VERIREWARD_SANDBOX_IMAGE", self.default_image)
        return os.environ.get(f"VERIREWARD_SANDBOX_IMAGE_{self.name.upper()}", self.default_image)

    def warm_modules(self) -> tuple[str, ...]:
        """What each spawner imports before it forks: `warm`, or VERIREWARD_RUNTIME_WARM_<NAME>
        (comma-separated; e.g. numpy,sympy where the programs import sympy: see docs/RUNTIMES.md
        for what each costs a candidate's address space, which its memory_mb counts)."""
        env = os.environ.get(f"VERIREWARD_RUNTIME_WARM_{self.name.upper()}")
        return self.warm if env is None else tuple(m.strip() for m in env.split(",") if m.strip())

    def runner_env(self) -> dict[str, str]:
        """What the runner's environment says of this runtime (read by candidate.prepare_template)."""
        if not self.requirements:
            return {}
        return {"VERIREWARD_RUNTIME_SITE": SITE_IN_SANDBOX, "VERIREWARD_RUNTIME_WARM": ",".join(self.warm_modules())}


RUNTIMES: dict[str, Runtime] = {
    "python": Runtime("python", ""),
    "sci": Runtime("sci", "sci.txt", warm=("numpy",), default_image="verireward-sandbox:sci"),
}


def get(name: str) -> Runtime:
    try:
        return RUNTIMES[name]
    except KeyError:
        raise ValueError(f"unknown runtime {name!r} (known: {', '.join(RUNTIMES)})") from None


def bwrap_ready(name: str) -> bool:
    site = get(name).site_dir
    return site is None or (site / ".complete").exists()


def docker_ready(name: str) -> bool:
    from sandbox.hosts.docker import DockerHost

    return DockerHost.image_present(get(name).image())


def unavailable_reason(name: str, kind: str, image: str | None = None) -> str | None:
    """Why this host kind cannot run runtime `name` now (None: it can). `image` overrides the
    runtime's docker image (the lean runtime's `image` host option)."""
    rt = get(name)
    if kind == "docker":
        from sandbox.hosts.docker import DockerHost

        image = image or rt.image()
        if not DockerHost.image_present(image):
            return f"docker image {image} is missing: DOCKER=1 bash sandbox/build_runtime.sh {name}" if rt.requirements \
                else f"docker image {image} is missing: bash sandbox/build_images.sh"
    elif kind == "bwrap":
        if not bwrap_ready(name):
            return f"not built on this host: bash sandbox/build_runtime.sh {name}"
    elif name != DEFAULT:  # socketdir: the runners someone else started decide what they run
        return f"a {kind} host runs the runners someone else started: {DEFAULT!r} only"
    return None


def available_runtimes(kind: str) -> dict[str, bool]:
    """Each runtime and whether this host kind can run it now (built and present)."""
    return {name: unavailable_reason(name, kind) is None for name in RUNTIMES}


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
    Everything else (ready, handles...) is the default runtime's pool.

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
        self.pools: dict[str, Any] = {}
        self.reasons: dict[str, str] = {}  # runtime -> why it is unavailable
        self.start_s: dict[str, float] = {}  # runtime -> seconds its pool took to start
        self._locks: dict[str, asyncio.Lock] = {}  # per pool: one lazy start each, never one for another
        self._started = False
        self._closed = False

    # ------------------------------------------------------------ what is offered
    @property
    def offered(self) -> tuple[str, ...]:
        """The runtimes jobs may name: the default, then the others asked for (or, asked for
        none, every known one) that this host can run."""
        names = self.requested if self.requested is not None else tuple(dict.fromkeys((self.default, *RUNTIMES)))
        return tuple(n for n in names if n not in self.reasons)

    def status(self) -> dict[str, dict[str, Any]]:
        """For /readyz: every known runtime: `ready` (its pool has a live runner), `idle`
        (offered, starts on first use), `down` (started, no live runner now), `unavailable`
        (with `reason`) or `not offered` (the operator left it out)."""
        out: dict[str, dict[str, Any]] = {}
        for name in RUNTIMES:
            entry: dict[str, Any] = {"default": name == self.default}
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

    def _make(self, name: str) -> Any:
        from sandbox.pool import make_pool

        options = {**self.pool_options,
                   **toolchains.host_options(self.kind, self.languages_mode, name, self.pool_options)}
        if name != toolchains.POOL and get(name).requirements:
            options.pop("image", None)  # the lean runtime's image; a runtime with packages has its own
            options["runtime"] = name
        p = make_pool(self.kind, **options)
        first = self.pools.get(self.default)
        if first is not None:
            p.cpus = first.cpus  # one plan for every pool: pinned jobs never share a CPU
        return p

    async def _start_one(self, name: str) -> Any:
        t0 = time.monotonic()
        p = await asyncio.to_thread(self._make, name)  # a toolchain host finds (or builds, once) C++'s PCH
        await p.start()
        if self._closed:  # closed while it started (a lazy start during shutdown): no runner left behind
            await p.close()
            from sandbox.pool import InfraError

            raise InfraError("the sandbox pools are closed")
        self.start_s[name] = time.monotonic() - t0
        self.pools[name] = p
        return p

    async def start(self) -> None:
        why = unavailable_reason(self.default, self.kind, self._image(self.default)) if self.kind != "auto" else None
        if why is not None:  # a server without its default serves nothing: refuse, saying how to build it
            from sandbox.hosts.base import RunnerStartError

            raise RunnerStartError(f"default runtime {self.default!r}: {why}")
        self._closed = False
        if self.kind == "auto":  # resolved first: which options each pool gets depends on it
            from sandbox.pool import resolve_kind

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

    async def _try_start(self, name: str) -> Any:
        try:
            return await self._start_one(name)
        except Exception as exc:  # noqa: BLE001 - a runtime that does not start is unavailable, not fatal
            log.error("runtime %s did not start: %s", name, exc)
            self.reasons[name] = f"did not start: {exc}"
            return None

    async def pool(self, name: str) -> Any:
        p = self.pools.get(name)
        if p is not None:
            return p
        why = self.refusal(name) if name != toolchains.POOL else self.reasons.get(name)
        if why is not None:
            if name in self.reasons:  # offered, then its start failed: the sandbox's fault, not the job's
                from sandbox.pool import InfraError

                raise InfraError(why)
            raise ValueError(why)
        async with self._locks.setdefault(name, asyncio.Lock()):
            if name not in self.pools and await self._try_start(name) is None:
                from sandbox.pool import InfraError

                raise InfraError(self.reasons[name])
        return self.pools[name]

    async def _route(self, job: Any) -> tuple[Any, Any]:
        name = self.pool_for(job.language, job.runtime)
        if name == toolchains.POOL and job.runtime != DEFAULT:  # a runtime is Python's packages: not this job's
            job = job.model_copy(update={"runtime": DEFAULT})
        return await self.pool(name), job

    async def run(self, job: Any, *args: Any, **kw: Any) -> Any:
        p, job = await self._route(job)
        return await p.run(job, *args, **kw)

    async def execute(self, req: Any, *args: Any, **kw: Any) -> Any:
        p, req = await self._route(req)
        return await p.execute(req, *args, **kw)

    async def close(self) -> None:
        self._closed = True
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

    def stats(self) -> Any:
        """Every pool's figures added up (capacity: the runners' slots, all pools)."""
        from sandbox.pool import PoolStats

        all_stats = [p.stats() for p in self.pools.values()]
        sums = {f: sum(getattr(s, f) for s in all_stats) for f in
                ("size", "live", "in_flight", "capacity", "restarts", "jobs_total", "infra_errors")}
        return PoolStats(kind=self.kind, **sums)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or "pools" not in self.__dict__ or self.__dict__["default"] not in self.pools:
            raise AttributeError(name)
        return getattr(self.pools[self.default], name)
