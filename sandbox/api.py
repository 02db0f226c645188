"""JobRunner: the one interface the server holds of the sandbox, and the errors and figures it
answers with. The single pool (`sandbox.pool.SandboxPool`) and the per-runtime router
(`sandbox.router.RuntimePools`) both implement it, so the server never asks which one it got."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, Protocol, TypedDict, runtime_checkable

from pydantic import BaseModel

from sandbox.hosts.base import RunnerHandle
from sandbox.jobs import ExecRequest, ExecResult, Job, JobResult


class InfraError(RuntimeError):
    """The sandbox could not run a job (runner lost twice, none alive): not the candidate's fault."""


class TaskError(ValueError):
    """The runner refused a job's tests (they do not compile or plan on its verdict side): the
    task's fault, neither the candidate's nor the sandbox's."""


class PoolStats(BaseModel):
    kind: str
    size: int
    live: int
    in_flight: int
    capacity: int
    restarts: int
    jobs_total: int
    infra_errors: int


class RuntimeStatus(TypedDict, total=False):
    """/readyz's entry of one runtime."""

    default: bool
    state: Literal["ready", "idle", "starting", "down", "unavailable", "not offered"]
    reason: str  # why it is unavailable
    start_s: float  # seconds its pool took to start


@runtime_checkable
class JobRunner(Protocol):
    """Something that runs jobs: started once, asked to run and execute, asked how it is."""

    @property
    def kind(self) -> str:
        """The host kind its runners are on (docker, bwrap, socketdir)."""
        ...

    @property
    def default_runtime(self) -> str:
        """The runtime of a job that names none."""
        ...

    @property
    def ready(self) -> bool:
        """Whether the default runtime has a live runner."""
        ...

    @property
    def capacity(self) -> int:
        """Jobs it runs at once: what the server admits."""
        ...

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def run(self, job: Job, on_event: Callable[[dict], None] | None = None) -> JobResult:
        """A job's tests (InfraError: the sandbox failed; TaskError: the tests are the task's fault)."""
        ...

    async def execute(self, req: ExecRequest) -> ExecResult:
        """One program run once on its stdin (`/run_code`)."""
        ...

    def refusal(self, runtime: str) -> str | None:
        """Why a job naming `runtime` is refused (None: it is accepted)."""
        ...

    def stats(self) -> PoolStats:
        """Its figures (every pool's added up)."""
        ...

    def languages(self) -> list[str]:
        """The languages its runners say they run."""
        ...

    def status(self) -> dict[str, RuntimeStatus]:
        """Each known runtime's state, for /readyz."""
        ...

    def toolchain_status(self) -> dict[str, Any] | None:
        """The toolchain pool's state, for /readyz (None: this runner does not route by language)."""
        ...

    def handles(self) -> list[RunnerHandle]:
        """The live runners (tests and benches kill them to check recovery)."""
        ...
