"""Runtimes: which Python a job's program runs on. `python` is the standard library alone;
`sci` adds a scientific stack (sci.txt) mounted read-only into the sandbox: for bwrap a host
directory made by `sandbox/build_runtime.sh sci`, for docker an image variant built from the
same wheelhouse without a registry (sandbox/Dockerfile.sci). The runner finds a runtime's
packages by VERIREWARD_RUNTIME_SITE and warm-imports VERIREWARD_RUNTIME_WARM in its spawners.

`RuntimePools` routes each job to a pool of its runtime's runners, started on demand.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
CACHE = Path(os.environ.get("VERIREWARD_RUNTIME_CACHE", REPO / ".cache" / "runtimes"))
SITE_IN_SANDBOX = "/opt/runtime/site"  # where a runtime's packages appear inside the sandbox
DEFAULT = "python"


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

    def runner_env(self) -> dict[str, str]:
        """What the runner's environment says of this runtime (read by candidate.prepare_template)."""
        if not self.requirements:
            return {}
        return {"VERIREWARD_RUNTIME_SITE": SITE_IN_SANDBOX, "VERIREWARD_RUNTIME_WARM": ",".join(self.warm)}


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


def available_runtimes(kind: str) -> dict[str, bool]:
    """For /readyz: each runtime and whether this host kind can run it now (built and present)."""
    out = {}
    for name in RUNTIMES:
        if kind == "docker":
            out[name] = docker_ready(name)
        elif kind == "bwrap":
            out[name] = bwrap_ready(name)
        else:  # socketdir: the runners someone else started decide; say only the default
            out[name] = name == DEFAULT
    return out


class RuntimePools:
    """One pool per runtime, on one host kind: `run`/`execute` take the pool of the job's
    `runtime`, making and starting it on first use (or at `start()` for those in `runtimes`).
    Everything else (stats, handles, close...) is the default runtime's pool."""

    def __init__(self, kind: str = "auto", runtimes: tuple[str, ...] = (DEFAULT,), **pool_options: Any) -> None:
        for name in runtimes:
            get(name)
        self.kind = kind
        self.runtimes = tuple(dict.fromkeys((DEFAULT, *runtimes)))
        self.pool_options = pool_options
        self.pools: dict[str, Any] = {}
        self._lock = asyncio.Lock()

    def _make(self, name: str) -> Any:
        from sandbox.pool import make_pool

        return make_pool(self.kind, **self.pool_options, **({"runtime": name} if name != DEFAULT else {}))

    async def start(self) -> None:
        for name in self.runtimes:
            await self.pool(name)

    async def pool(self, name: str) -> Any:
        get(name)
        p = self.pools.get(name)
        if p is not None:
            return p
        async with self._lock:
            if name not in self.pools:
                p = self._make(name)
                await p.start()
                self.pools[name] = p
        return self.pools[name]

    async def run(self, job: Any, *args: Any, **kw: Any) -> Any:
        return await (await self.pool(job.runtime)).run(job, *args, **kw)

    async def execute(self, req: Any, *args: Any, **kw: Any) -> Any:
        return await (await self.pool(req.runtime)).execute(req, *args, **kw)

    async def close(self) -> None:
        pools, self.pools = self.pools, {}
        for p in pools.values():
            await p.close()

    async def __aenter__(self) -> RuntimePools:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or "pools" not in self.__dict__ or DEFAULT not in self.pools:
            raise AttributeError(name)
        return getattr(self.pools[DEFAULT], name)
