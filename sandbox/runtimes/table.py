"""Runtime records: which Python a job's program runs on. `python` is the standard library
alone; `sci` adds a scientific stack (sci.txt) mounted read-only into the sandbox: for bwrap a
host directory made by `sandbox/build_runtime.sh sci`, for docker an image variant built from
the same wheelhouse without a registry (sandbox/Dockerfile.sci). The runner finds a runtime's
packages by VERIREWARD_RUNTIME_SITE and warm-imports VERIREWARD_RUNTIME_WARM in its spawners.

Facts only: this module imports nothing of `sandbox`, so the hosts, the job models and the
router all read it without a circle (which host can run which runtime is `sandbox.hosts`';
routing jobs to a pool per runtime is `sandbox.router`'s).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

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
