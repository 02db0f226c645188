"""Hosts start runner processes somewhere isolated and hand their sockets to the pool:
`make_host` chooses and makes one (`kinds.py`); docker, bwrap and socketdir are the kinds."""

from .base import Host, RunnerHandle, RunnerStartError
from .kinds import (
    HostKind,
    available_runtimes,
    docker_available,
    docker_ready,
    make_host,
    resolve_kind,
    unavailable_reason,
)

__all__ = ["Host", "HostKind", "RunnerHandle", "RunnerStartError", "available_runtimes",
           "docker_available", "docker_ready", "make_host", "resolve_kind", "unavailable_reason"]
