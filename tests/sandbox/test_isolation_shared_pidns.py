"""Finding 11 where runners share a PID namespace (plain runner processes, as compose
replicas sharing `pid:` or runners started by hand): with one --uid-base for all (the
default before leases), slot k of every runner was one uid, so one runner's clean-up of its
slot (kill_uids) and a job's kill(-1) reached another runner's job. `--uid-base auto` leases
each runner a block of its own (and the Landlock signal scope refuses kill(-1) beyond the
job's own processes as well)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time

from sandbox import ExecRequest, Limits
from sandbox.hosts.socketdir import SocketDirHost
from sandbox.pool import SandboxPool

VICTIM = "import time\ntime.sleep(4)\nprint('victim alive')\n"
KILLER = """
import os, signal
try:
    os.kill(-1, signal.SIGKILL)
    print("sent")
except OSError as e:
    print("refused", e.errno)
"""
UID = "import os, time\ntime.sleep(0.5)\nprint(os.getuid())\n"


def _runner(sock: str, scratch: str, uid_base: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "sandbox.runner", "--socket", sock, "--slots", "2", "--uid-base", uid_base,
         "--scratch", scratch],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )


async def _pool(sock_dir: str) -> SandboxPool:
    pool = SandboxPool(SocketDirHost(socket_dir=sock_dir, start_timeout=20), size=1, per_runner=1,
                       health_interval=0.2, no_runner_timeout=20)
    await pool.start()
    return pool


async def _two_pools(tmp_path, uid_base: str):
    procs, pools = [], []
    for name in ("a", "b"):
        d = tmp_path / name
        d.mkdir(mode=0o700)
        procs.append(_runner(str(d / f"{name}.sock"), str(tmp_path / f"scratch-{name}"), uid_base))
        pools.append(await _pool(str(d)))
    return procs, pools


async def _close(procs, pools) -> None:
    for p in pools:
        await p.close()
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def req(program: str) -> ExecRequest:
    # plain runners here run the venv interpreter with site-packages: a larger address space
    return ExecRequest(program=program, limits=Limits(timeout_s=8, memory_mb=4096))


async def test_kill_minus_one_and_cleanups_stop_at_the_job(tmp_path):
    procs, (a, b) = await _two_pools(tmp_path, "auto")

    async def late():
        await asyncio.sleep(1.5)
        return await b.execute(req(KILLER))

    try:
        victim, killer = await asyncio.gather(a.execute(req(VICTIM)), late())
        assert victim.stdout.strip() == "victim alive", (victim, killer.stdout)
    finally:
        await _close(procs, [a, b])


async def test_uid_base_auto_gives_each_runner_its_own_block(tmp_path):
    procs, (a, b) = await _two_pools(tmp_path, "auto")
    try:
        t0 = time.monotonic()
        ua, ub = await asyncio.gather(a.execute(req(UID)), b.execute(req(UID)))
        assert time.monotonic() - t0 < 8
        assert int(ua.stdout) != int(ub.stdout) and min(int(ua.stdout), int(ub.stdout)) >= 1 << 20, (ua, ub)
    finally:
        await _close(procs, [a, b])
