"""Real servers for the HTTP tests: uvicorn on 127.0.0.1 with a free port and the real
sandbox pool (no mocks). `SANDBOX_KINDS` (default "bwrap"; CI: "bwrap,docker") picks the
hosts; docker-hosted servers carry the `docker` mark."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import uvicorn

from reward_server.app import create_app
from reward_server.settings import Settings


def sandbox_kinds() -> list[str]:
    return [k.strip() for k in os.environ.get("SANDBOX_KINDS", "bwrap").split(",") if k.strip()]


def kind_params() -> list[Any]:
    return [pytest.param(k, id=k, marks=[pytest.mark.docker] if k == "docker" else []) for k in sandbox_kinds()]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class LiveServer:
    url: str
    app: Any
    server: uvicorn.Server
    thread: threading.Thread
    settings: Settings

    @property
    def pool(self):
        return self.app.state.pool

    def stop(self, timeout: float = 60) -> None:
        self.server.should_exit = True
        self.thread.join(timeout)


def start_server(start_timeout: float = 120, pool: Any = None, graceful_s: float | None = None,
                 **overrides: Any) -> LiveServer:
    """An in-process uvicorn (own thread and event loop) around create_app(settings, pool)."""
    port = free_port()
    overrides.setdefault("pool_size", 2)
    settings = Settings(host="127.0.0.1", port=port, log_level="warning", **overrides)
    app = create_app(settings, pool=pool)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, access_log=False,
                                           timeout_graceful_shutdown=graceful_s))
    errors: list[BaseException] = []

    def run() -> None:
        try:
            server.run()
        except BaseException as e:  # surfaced below
            errors.append(e)

    th = threading.Thread(target=run, name=f"reward-server-{port}", daemon=True)
    th.start()
    deadline = time.monotonic() + start_timeout
    while not server.started:
        if errors or not th.is_alive():
            raise RuntimeError(f"server failed to start: {errors}")
        if time.monotonic() > deadline:
            server.should_exit = True
            raise TimeoutError("server did not start")
        time.sleep(0.05)
    url = f"http://127.0.0.1:{port}"
    wait_ready(url, deadline - time.monotonic())
    return LiveServer(url, app, server, th, settings)


def start_server_with_pool(pool: Any, **overrides: Any) -> LiveServer:
    """A server around a pool the caller made (and owns)."""
    return start_server(pool=pool, **overrides)


def wait_ready(url: str, timeout: float, headers: dict | None = None) -> None:
    deadline = time.monotonic() + max(1.0, timeout)
    while True:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url + "/readyz", timeout=5, headers=headers).status_code == 200:
                return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{url} not ready")
        time.sleep(0.1)


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
    proc: subprocess.Popen
    token: str


@pytest.fixture(scope="module", params=kind_params())
def cli_server(request, tmp_path_factory) -> CliServer:
    """`reward-server serve` in a subprocess: tiny admission limits and a bearer token."""
    port = free_port()
    token = "s3cret-token"
    log = tmp_path_factory.mktemp("cli") / "server.log"
    cmd = [
        sys.executable, "-m", "reward_server.cli", "serve", "--host", "127.0.0.1", "--port", str(port),
        "--sandbox", request.param, "--pool", "1", "--max-inflight", "1", "--max-queued", "2",
        "--auth-token", token, "--log-level", "info",
    ]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")])}
    with open(log, "wb") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, 120)
    except TimeoutError:
        proc.kill()
        raise RuntimeError(f"CLI server did not come up:\n{log.read_text()[-4000:]}") from None
    yield CliServer(url, proc, token)
    proc.terminate()
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()


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
