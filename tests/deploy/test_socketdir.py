"""The socketdir host: runners started by someone else join, leave and rejoin the pool.

Runs plain runner processes (no container) on sockets in a temp directory, as compose does
with replicas sharing a volume; a runner's death is a SIGKILL, its restart a new process
binding the same path.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time

import pytest

from sandbox import Job, Limits, make_pool
from sandbox.hosts.socketdir import SocketDirHost
from sandbox.pool import SandboxPool

PROGRAM = "def inc(x):\n    return x + 1\n"
JOB = Job(program=PROGRAM, tests={"kind": "assert", "asserts": ["assert inc(1) == 2", "assert inc(5) == 6"]},
          limits=Limits(timeout_s=5.0, memory_mb=256))


def start_runner(sock_dir: str, name: str, scratch: str) -> subprocess.Popen:
    # no pid namespace between them here (containers have one each): keep their job uids apart,
    # or one runner's clean-up of a slot's uid would kill the other's jobs
    uid_base = 21000 + 100 * (ord(name) - ord("a"))
    return subprocess.Popen(
        [sys.executable, "-m", "sandbox.runner", "--socket", os.path.join(sock_dir, f"{name}.sock"),
         "--slots", "4", "--uid-base", str(uid_base), "--scratch", os.path.join(scratch, name)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )


async def until(cond, timeout: float = 20.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.1)


def kill(p: subprocess.Popen) -> None:
    if p.poll() is None:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()


async def test_runners_join_leave_and_rejoin(tmp_path):
    sock_dir = tmp_path / "run"
    sock_dir.mkdir(mode=0o700)
    scratch = tmp_path / "scratch"
    procs = {"a": start_runner(str(sock_dir), "a", str(scratch))}
    pool = SandboxPool(SocketDirHost(socket_dir=str(sock_dir), start_timeout=20), size=1, per_runner=2,
                       health_interval=0.2, no_runner_timeout=20)
    try:
        await pool.start()
        assert pool.kind == "socketdir" and pool.stats().live == 1 and pool.capacity == 2
        r = await pool.run(JOB)
        assert (r.passed, r.total, r.runner) == (2, 2, "a")

        # scale up: a new socket joins with no call of ours
        procs["b"] = start_runner(str(sock_dir), "b", str(scratch))
        await until(lambda: pool.stats().live == 2, what="runner b to join")
        assert pool.capacity == 4

        # a dead runner leaves a stale socket file: it must leave the pool, not take jobs
        kill(procs["a"])
        assert os.path.exists(sock_dir / "a.sock")
        results = await asyncio.gather(*(pool.run(JOB) for _ in range(6)))
        assert all(x.passed == 2 for x in results), [(x.runner, x.passed, x.load_message, x.stderr[-300:], [t.message for t in x.tests]) for x in results if x.passed != 2]
        await until(lambda: pool.stats().live == 1, what="runner a to leave")
        assert {h.ident for h in pool.handles()} == {"b"}
        assert pool.stats().infra_errors == 0

        # the restarted runner binds the same path and rejoins
        procs["a"] = start_runner(str(sock_dir), "a", str(scratch))
        await until(lambda: pool.stats().live == 2, what="runner a to rejoin")
        results = await asyncio.gather(*(pool.run(JOB) for _ in range(6)))
        assert all(x.passed == 2 for x in results), [(x.runner, x.passed, x.load_message, x.stderr[-300:], [t.message for t in x.tests]) for x in results if x.passed != 2]
        assert {x.runner for x in results} == {"a", "b"}
    finally:
        await pool.close()
        for p in procs.values():
            kill(p)


async def test_no_runner_fails_start(tmp_path):
    pool = make_pool("socketdir", socket_dir=str(tmp_path), start_timeout=0.5)
    assert pool.per_runner == 4
    with pytest.raises(Exception, match="no socketdir runner answered"):
        await pool.start()


def test_socket_dir_from_env(monkeypatch):
    monkeypatch.setenv("REWARD_SERVER_SOCKET_DIR", "/somewhere")
    assert SocketDirHost().socket_dir == "/somewhere"
    monkeypatch.delenv("REWARD_SERVER_SOCKET_DIR")
    assert SocketDirHost().socket_dir == "/run/sandbox"
