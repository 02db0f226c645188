"""Hosts start runner processes somewhere isolated and hand their sockets to the pool."""

from .base import Host, RunnerHandle, RunnerStartError

__all__ = ["Host", "RunnerHandle", "RunnerStartError"]
