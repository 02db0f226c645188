"""Servers and pools shared by test modules: one per host and option set, started on the first
module that asks for it and closed at the end of the session (fixtures `shared_servers` and
`shared_pools` in tests/conftest.py).

Why: many modules started a server or pool with exactly the options another module had
already started (a live server is ~2-4 s to start on a loaded machine, a pool 1-2 s, per host).
Only modules whose tests leave the server or pool as they found it may share one: a test that
kills runners, fills state before start-up or needs a fresh start keeps its own."""

from __future__ import annotations

import json
from typing import Any

# a server that holds enough sessions for the session suites (/v1/sessions): ask
# `shared_servers.get(sandbox=kind, **SESSION_SERVER)` to share it
SESSION_SERVER: dict[str, Any] = {"max_sessions": 24}


def key(**options: Any) -> str:
    """One string per option set (nested dicts such as sandbox_options included)."""
    return json.dumps(options, sort_keys=True, default=str)


class SharedServers:
    """Live in-process servers (reward_server.local.InProcessServer) keyed by their options."""

    def __init__(self) -> None:
        self._servers: dict[str, Any] = {}

    def get(self, **options: Any) -> Any:
        from reward_server.local import InProcessServer

        options.setdefault("pool_size", 2)  # InProcessServer's default, so that both spellings share
        k = key(**options)
        s = self._servers.get(k)
        if s is None or not s.thread.is_alive():
            s = self._servers[k] = InProcessServer.start(**options)
        return s

    def close(self) -> None:
        for s in self._servers.values():
            s.stop()
        self._servers.clear()


class SharedPools:
    """Started sandbox pools (sandbox.make_pool) keyed by host kind and options; they live on
    the session's event loop (asyncio_default_fixture_loop_scope = session)."""

    def __init__(self) -> None:
        self._pools: dict[str, Any] = {}

    async def get(self, kind: str, **options: Any) -> Any:
        from sandbox import make_pool

        k = key(kind=kind, **options)
        p = self._pools.get(k)
        if p is None:
            p = make_pool(kind, **options)
            await p.start()
            self._pools[k] = p
        return p

    async def close(self) -> None:
        for p in self._pools.values():
            await p.close()
        self._pools.clear()
