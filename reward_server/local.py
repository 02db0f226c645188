"""A reward server on 127.0.0.1 and a free port, started and stopped by its caller: in this process
(uvicorn on a thread of its own, for tests and benches that reach into the app or hand it a pool)
or as a `reward-server serve` subprocess (the demo, whose training must not share a process with
the server). One place for how a local server is started, awaited and stopped."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import httpx

if TYPE_CHECKING:
    import uvicorn

    from reward_server.settings import Settings
    from sandbox.api import JobRunner

HOST = "127.0.0.1"
_PACKAGE_ROOT = Path(__file__).resolve().parents[1]  # the directory holding reward_server/


def free_port() -> int:
    """A port nothing listens on now (the kernel's pick)."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def wait_ready(url: str, timeout: float, headers: dict[str, str] | None = None,
               alive: Callable[[], bool] | None = None) -> None:
    """Return once ``url``/readyz answers 200; TimeoutError after ``timeout`` s, RuntimeError as
    soon as ``alive()`` (when given) says the server is gone."""
    deadline = time.monotonic() + max(1.0, timeout)
    while True:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url + "/readyz", timeout=5, headers=headers).status_code == 200:
                return
        if alive is not None and not alive():
            raise RuntimeError(f"{url}: the server exited before it was ready")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{url} not ready")
        time.sleep(0.1)


class LocalServer:
    """A started local server: its base URL, and ``stop()`` (also on leaving a ``with`` block)."""

    url: str

    def stop(self, timeout: float = 60) -> None:
        raise NotImplementedError

    def __enter__(self) -> LocalServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass
class InProcessServer(LocalServer):
    """uvicorn around ``create_app(settings, pool)`` on a daemon thread with its own event loop."""

    url: str
    app: Any
    server: uvicorn.Server
    thread: threading.Thread
    settings: Settings

    @property
    def pool(self) -> JobRunner | None:
        """The sandbox the app runs jobs on (its JobRunner; None before the app has started it)."""
        return self.app.state.server.runner

    @classmethod
    def start(cls, start_timeout: float = 120, pool: Any = None, graceful_s: float | None = None,
              **overrides: Any) -> InProcessServer:
        """Start it and wait for /readyz; ``overrides`` are Settings fields (pool_size 2 unless given)."""
        import uvicorn  # noqa: PLC0415 - the server's dependencies only where one is started here

        from reward_server.app import create_app  # noqa: PLC0415
        from reward_server.settings import Settings  # noqa: PLC0415

        port = free_port()
        overrides.setdefault("pool_size", 2)
        settings = Settings(host=HOST, port=port, log_level="warning", **overrides)
        app = create_app(settings, pool=pool)
        server = uvicorn.Server(uvicorn.Config(app, host=HOST, port=port, log_config=None, access_log=False,
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
        url = f"http://{HOST}:{port}"
        wait_ready(url, deadline - time.monotonic())
        return cls(url, app, server, th, settings)

    def stop(self, timeout: float = 60) -> None:
        self.server.should_exit = True
        self.thread.join(timeout)


@dataclass
class SubprocessServer(LocalServer):
    """``python -m reward_server.cli serve`` in a session of its own (stopping it ends its runners too)."""

    url: str
    proc: subprocess.Popen
    log_path: Path | None = None

    @classmethod
    def start(cls, args: Sequence[str] = ("--sandbox", "bwrap"), log_path: Path | None = None,
              timeout_s: float = 120.0, env: dict[str, str] | None = None) -> SubprocessServer:
        """Start it with ``serve``'s ``args`` (host and port are chosen here) and wait for /readyz;
        its output goes to ``log_path`` (else nowhere), whose tail a failed start quotes."""
        port = free_port()
        cmd = [sys.executable, "-m", "reward_server.cli", "serve", "--host", HOST, "--port", str(port), *args]
        env = dict(os.environ if env is None else env)
        # a checkout that is not installed still finds this package in the child
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_PACKAGE_ROOT), env.get("PYTHONPATH", "")) if p)
        out: IO[bytes] | int = open(log_path, "ab") if log_path else subprocess.DEVNULL  # noqa: SIM115
        try:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        finally:
            if not isinstance(out, int):
                out.close()  # the child keeps its own descriptor
        srv = cls(f"http://{HOST}:{port}", proc, log_path)
        try:
            wait_ready(srv.url, timeout_s, alive=lambda: proc.poll() is None)
        except (TimeoutError, RuntimeError) as e:
            srv.stop()
            raise RuntimeError(f"reward server did not come up ({e}, exit {proc.returncode}):\n{srv.log_tail()}") from None
        return srv

    def log_tail(self, chars: int = 4000) -> str:
        if self.log_path is None or not self.log_path.exists():
            return "(no log)"
        return self.log_path.read_text(errors="replace")[-chars:]

    def stop(self, timeout: float = 60) -> None:
        """SIGTERM to its process group (a graceful drain), SIGKILL after ``timeout`` s."""
        if self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=timeout)
        except (subprocess.TimeoutExpired, ProcessLookupError):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=5)
