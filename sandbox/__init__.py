"""Isolated execution of untrusted programs.

`sandbox.runner` is a standard-library-only program that runs inside a container or
bubblewrap; everything else here (job models, the async pool, the hosts) runs in the
server's process. Imports are lazy so that `python -m sandbox.runner` never pulls in
pydantic or docker.
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
    "Limits",
    "PoolStats",
    "SandboxPool",
    "StdioTests",
    "TestResult",
    "make_pool",
]

_LAZY = {
    "SandboxPool": "sandbox.pool",
    "InfraError": "sandbox.pool",
    "PoolStats": "sandbox.pool",
    "make_pool": "sandbox.pool",
}

if TYPE_CHECKING:  # pragma: no cover
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
    from sandbox.pool import InfraError, PoolStats, SandboxPool, make_pool  # noqa: F401


def __getattr__(name: str) -> Any:
    import importlib

    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    if name in __all__:
        return getattr(importlib.import_module("sandbox.jobs"), name)
    raise AttributeError(name)
