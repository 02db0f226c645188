"""JobRunner: the one interface the server holds of the sandbox, and the errors and figures it
answers with. The single pool (`sandbox.pool.SandboxPool`) and the per-runtime router
(`sandbox.router.RuntimePools`) both implement it, so the server never asks which one it got."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, Protocol, TypedDict, runtime_checkable

from pydantic import BaseModel

from sandbox.hosts.base import RunnerHandle
from sandbox.jobs import ExecRequest, ExecResult, Job, JobResult
from sandbox.sessions import SessionExec, SessionExecResult, SessionSpec, SessionStats


class InfraError(RuntimeError):
    """The sandbox could not run a job (runner lost twice, none alive): not the candidate's fault."""


class TaskError(ValueError):
    """The runner refused a job's tests (they do not compile or plan on its verdict side): the
    task's fault, neither the candidate's nor the sandbox's."""


class SessionsFull(InfraError):
    """Every session slot is taken: the caller answers 429 (try again later), not a failure."""


class UnknownSession(KeyError):
    """No open session has this key (never opened, or closed)."""


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
class SessionRunner(Protocol):
    """Something that keeps sessions: sandboxed interpreters alive between calls, in slots of
    their own (`session_capacity` of them, apart from the job slots). Keys are the sandbox's own
    (opaque, unguessable); the server maps its session ids onto them."""

    @property
    def session_capacity(self) -> int:
        """Sessions it holds at once (0: it offers none)."""
        ...

    async def open_session(self, spec: SessionSpec) -> str:
        """A new session's key, once its interpreter is ready (SessionsFull: no slot free;
        InfraError: the sandbox failed; ValueError: a runtime it does not offer)."""
        ...

    async def session_execute(self, key: str, req: SessionExec) -> SessionExecResult:
        """Run code in the session (UnknownSession: not open). A lost session keeps answering
        status session_lost until it is closed."""
        ...

    async def close_session(self, key: str) -> None:
        """End the session: no process of it is left when this returns. Idempotent (an unknown
        key is no error)."""
        ...

    def session_program(self, key: str) -> str:
        """The program the session's history amounts to (its files, then the code of each
        execute that completed without error, in order), for grading in a fresh job: nothing the
        session's process did reaches it (UnknownSession: not open)."""
        ...

    def session_stats(self) -> SessionStats:
        """Its session figures."""
        ...


@runtime_checkable
class JobRunner(SessionRunner, Protocol):
    """Something that runs jobs: started once, asked to run and execute, asked how it is (and,
    as a SessionRunner, keeps sessions)."""

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
