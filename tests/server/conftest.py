"""Real servers for the HTTP tests: uvicorn on 127.0.0.1 with a free port and the real
sandbox pool (no mocks), started by reward_server.local. The hosts are tests/conftest.py's
`sandbox_kinds()` (SANDBOX_KINDS, else bwrap plus docker where it runs; CI: both); docker-hosted
servers carry the `docker` mark."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from reward_server.local import InProcessServer, SubprocessServer, free_port, wait_ready
from tests.conftest import kind_params, sandbox_kinds

__all__ = ["LiveServer", "free_port", "kind_params", "sandbox_kinds", "start_server", "start_server_with_pool",
           "wait_ready"]

LiveServer = InProcessServer


def start_server(start_timeout: float = 120, pool: Any = None, graceful_s: float | None = None,
                 **overrides: Any) -> LiveServer:
    """An in-process uvicorn (own thread and event loop) around create_app(settings, pool)."""
    return InProcessServer.start(start_timeout, pool=pool, graceful_s=graceful_s, **overrides)


def start_server_with_pool(pool: Any, **overrides: Any) -> LiveServer:
    """A server around a pool the caller made (and owns)."""
    return start_server(pool=pool, **overrides)


@pytest.fixture(scope="session", params=kind_params())
def server(request, shared_servers) -> LiveServer:
    """The main server: default limits, no auth, a pool of 2 (shared with the other suites'
    modules that start one with the same options; tests/shared.py)."""
    return shared_servers.get(sandbox=request.param)


@pytest.fixture(scope="session")
def url(server: LiveServer) -> str:
    return server.url


@dataclass
class CliServer:
    url: str
    proc: Any
    token: str


@pytest.fixture(scope="module", params=kind_params())
def cli_server(request, tmp_path_factory) -> CliServer:
    """`reward-server serve` in a subprocess: tiny admission limits and a bearer token."""
    token = "s3cret-token"
    log = tmp_path_factory.mktemp("cli") / "server.log"
    srv = SubprocessServer.start(["--sandbox", request.param, "--pool", "1", "--max-inflight", "1",
                                  "--max-queued", "2", "--auth-token", token, "--log-level", "info",
                                  "--time-scale", "1.5", "--max-sessions", "3"],
                                 log_path=log, timeout_s=120)
    yield CliServer(srv.url, srv.proc, token)
    srv.stop()


# ---- tasks used across the tests ------------------------------------------------------

ADD_TASK = {
    "type": "code",
    "language": "python",
    "tests": {"kind": "assert", "asserts": ["assert add(1, 2) == 3", "assert add(-1, 1) == 0", "assert add(2, 2) == 4", "assert add(0, 5) == 5"]},
    "timeout_s": 5,
}
GOOD_ADD = "Here it is:\n```python\ndef add(a, b):\n    return a + b\n```\n"
HALF_ADD = "```python\ndef add(a, b):\n    return a + b if a > 0 and b > 0 else 99\n```"  # passes 2 of 4
SYNTAX_ERR = "```python\ndef add(a, b)\n    return a + b\n```"

ECHO_STDIO_TASK = {
    "type": "code",
    "tests": {"kind": "stdio", "cases": [{"stdin": "1 2\n", "stdout": "3\n"}, {"stdin": "5 7\n", "stdout": "12\n"}]},
}
GOOD_STDIO = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"

HUMANEVAL_TASK = {
    "type": "code",
    "tests": {
        "kind": "assert",
        "entry_point": "sq",
        "test": "def check(candidate):\n    assert candidate(2) == 4\n    assert candidate(3) == 9\n    assert candidate(-1) == 1\n",
    },
}
CALL_TASK = {
    "type": "code",
    "tests": {"kind": "call", "fn_name": "twice", "cases": [{"args": [1], "expected": 2}, {"args": ["ab"], "expected": "abab"}]},
}
