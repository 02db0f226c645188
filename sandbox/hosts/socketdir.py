"""Runners started by someone else, found as sockets in a shared directory.

Compose (`compose.yaml`) or a Kubernetes pod runs the runner containers itself
(`python -m sandbox.runner --socket-dir DIR`, one `DIR/<hostname>.sock` per replica) and
shares DIR with the server as a volume, so the server needs no Docker socket and no
privilege. This host only watches DIR: the pool asks `discover()` on every health tick and
adds each socket that answers a ping; a socket that refuses or vanishes (container killed,
scaled down) is dropped by the pool's health check, and the same path comes back when a
restarted container binds it again. Runners are not this host's to start or stop.
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import logging
import os

from sandbox.runner import framing

from .base import Host, RunnerHandle, RunnerStartError

log = logging.getLogger("sandbox.hosts.socketdir")

DEFAULT_SOCKET_DIR = "/run/sandbox"
ENV_SOCKET_DIR = "REWARD_SERVER_SOCKET_DIR"


class SocketDirHost(Host):
    kind = "socketdir"

    def __init__(self, *, socket_dir: str | None = None, start_timeout: float = 60.0,
                 probe_timeout: float = 2.0) -> None:
        self.socket_dir = socket_dir or os.environ.get(ENV_SOCKET_DIR) or DEFAULT_SOCKET_DIR
        self.start_timeout = start_timeout
        self.probe_timeout = probe_timeout
        self._next_index = 0

    # the pool's view -------------------------------------------------------------
    @property
    def replaceable(self) -> bool:
        return False  # compose / the orchestrator restarts runners, not us

    dynamic = True

    def where(self) -> str:
        return self.socket_dir

    def sockets(self) -> list[str]:
        return sorted(glob.glob(os.path.join(glob.escape(self.socket_dir), "*.sock")))

    async def discover(self, known: set[str]) -> list[RunnerHandle]:
        """Handles for sockets not in `known` (paths) whose runner answers a ping now."""
        fresh = [p for p in self.sockets() if p not in known]
        if not fresh:
            return []
        answers = await asyncio.gather(*(self._ping(p) for p in fresh))
        out = []
        for path, ok in zip(fresh, answers):
            if ok:
                out.append(RunnerHandle(index=self._next_index, socket_path=path,
                                        ident=os.path.basename(path)[: -len(".sock")]))
                self._next_index += 1
        return out

    async def start_runner(self, index: int) -> RunnerHandle:
        raise RunnerStartError(f"socketdir runners are started by the orchestrator (watching {self.socket_dir})")

    async def stop_runner(self, handle: RunnerHandle) -> None:
        return None

    async def is_alive(self, handle: RunnerHandle) -> bool:
        """The socket accepts a connection (a stale file from a dead container refuses)."""
        try:
            _, writer = await asyncio.wait_for(asyncio.open_unix_connection(handle.socket_path), self.probe_timeout)
        except (OSError, asyncio.TimeoutError):
            return False
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()
        return True

    async def _ping(self, path: str) -> bool:
        try:
            ev = await framing.ping_path(path, self.probe_timeout)
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, framing.FrameError):
            return False
        return isinstance(ev, dict) and ev.get("event") == "pong"
