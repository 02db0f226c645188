"""Runtimes: which Python a job's program runs on (the records: `table.py`; sci.txt beside it).

A face only: `from sandbox import runtimes; runtimes.get("sci")` reads the table. Which host
kind can run a runtime now is `sandbox.hosts.unavailable_reason`; sending each job to a pool of
its runtime is `sandbox.router.RuntimePools`.
"""

from sandbox.runtimes.table import CACHE, DEFAULT, RUNTIMES, SITE_IN_SANDBOX, Runtime, bwrap_ready, get

__all__ = ["CACHE", "DEFAULT", "RUNTIMES", "SITE_IN_SANDBOX", "Runtime", "bwrap_ready", "get"]
