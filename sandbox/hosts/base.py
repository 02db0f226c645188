"""What every host provides to the pool."""

from __future__ import annotations

import abc
import asyncio
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

RUNNER_SOCKET = "runner.sock"
PACKAGE_DIR = Path(__file__).resolve().parent.parent  # the `sandbox` package


class RunnerStartError(RuntimeError):
    """A runner could not be started or did not become ready."""


@dataclass
class RunnerHandle:
    index: int
    socket_path: str
    ident: str  # container id, pid, or socket name: what logs and metrics show
    pid: int | None = None  # host pid of the runner's main process, where known
    extra: dict = field(default_factory=dict)


class Host(abc.ABC):
    """Starts and stops runners for one pool. `runtime` is what its runners run (a name of
    `sandbox.runtimes`); a `dynamic` host's runners come and go on their own (the pool asks
    `discover()` on each health tick instead of starting and replacing them)."""

    kind: str = "?"
    runtime: str = "python"
    dynamic: bool = False
    start_timeout: float = 60.0
    session_slots: int = 0  # sessions each runner holds, beside its job slots (runner --session-slots)

    @abc.abstractmethod
    async def start_runner(self, index: int) -> RunnerHandle: ...

    @abc.abstractmethod
    async def stop_runner(self, handle: RunnerHandle) -> None: ...

    @abc.abstractmethod
    async def is_alive(self, handle: RunnerHandle) -> bool: ...

    async def close(self) -> None:
        return None

    @property
    def replaceable(self) -> bool:
        """Whether the pool may start a new runner in place of a dead one."""
        return True

    async def discover(self, known: set[str]) -> list[RunnerHandle]:
        """A dynamic host's runners that answer now and are not in `known` (socket paths)."""
        return []

    def languages(self) -> list[str] | None:
        """The languages this host's runners can run, where the host knows (None: ask them)."""
        return None

    def where(self) -> str:
        """Where its runners are, for messages."""
        return self.kind


async def wait_for_socket(path: str, timeout: float, alive=None) -> None:
    """Wait until a runner answers a ping on `path`."""
    from sandbox.runner import framing

    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        if alive is not None and not await alive():
            raise RunnerStartError("runner exited during start-up")
        if os.path.exists(path):
            try:
                await framing.ping_path(path, 5)  # any answer: it is up
                return
            except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, framing.FrameError) as exc:
                last = exc
        await asyncio.sleep(0.05)
    raise RunnerStartError(f"runner socket {path} not ready after {timeout}s: {last}")
