"""Isolated execution of untrusted programs.

`sandbox.runner` is a standard-library-only program that runs inside a container or
bubblewrap; everything else here runs in the server's process, in floors that import only
downward: `runtimes/table.py` (runtime records) and `jobs.py` (the job models), `hosts/` (where
runners run, `make_host`), `api.py` (`JobRunner`, the one interface the server holds),
`sessions.py` (the session models), `pool.py` (one pool), `router.py` (a pool per runtime, above the pool). Imports are lazy so
that `python -m sandbox.runner` never pulls in pydantic or docker.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = [
    "AssertCheckTests",
    "AssertListTests",
    "CallTests",
    "ExecRequest",
    "ExecResult",
    "InfraError",
    "Job",
    "JobResult",
    "JobRunner",
    "Limits",
    "PoolStats",
    "RuntimePools",
    "SandboxPool",
    "SessionExec",
    "SessionExecResult",
    "SessionRunner",
    "SessionSpec",
    "SessionsFull",
    "StdioTests",
    "TaskError",
    "TestResult",
    "UnknownSession",
    "make_pool",
]

_LAZY = {
    "InfraError": "sandbox.api",
    "JobRunner": "sandbox.api",
    "PoolStats": "sandbox.api",
    "TaskError": "sandbox.api",
    "SessionRunner": "sandbox.api",
    "SessionsFull": "sandbox.api",
    "UnknownSession": "sandbox.api",
    "SessionExec": "sandbox.sessions",
    "SessionExecResult": "sandbox.sessions",
    "SessionSpec": "sandbox.sessions",
    "SandboxPool": "sandbox.pool",
    "make_pool": "sandbox.pool",
    "RuntimePools": "sandbox.router",
}

if TYPE_CHECKING:  # pragma: no cover
    from sandbox.api import (  # noqa: F401
        InfraError,
        JobRunner,
        PoolStats,
        SessionRunner,
        SessionsFull,
        TaskError,
        UnknownSession,
    )
    from sandbox.jobs import (  # noqa: F401
        AssertCheckTests,
        AssertListTests,
        CallTests,
        ExecRequest,
        ExecResult,
        Job,
        JobResult,
        Limits,
        StdioTests,
        TestResult,
    )
    from sandbox.pool import SandboxPool, make_pool  # noqa: F401
    from sandbox.router import RuntimePools  # noqa: F401
    from sandbox.sessions import SessionExec, SessionExecResult, SessionSpec  # noqa: F401


def __getattr__(name: str) -> Any:
    import importlib

    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    if name in __all__:
        return getattr(importlib.import_module("sandbox.jobs"), name)
    raise AttributeError(name)
