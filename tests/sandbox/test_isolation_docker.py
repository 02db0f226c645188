"""Finding 14: a docker-host server must never take another live server's runners for orphans.

Orphan clean-up used to compare the owner's PID (a label) with /proc: a server started in
another PID namespace (a container, `unshare -p`) saw no such process and force-removed every
other server's live runners. Runners now belong to a random pool token whose owner holds an
flock; these tests start a second server in a fresh PID namespace next to a live pool, and
check that a pool that really died still has its runners removed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from sandbox import make_pool
from tests.sandbox.conftest import assert_still_serves

pytestmark = pytest.mark.docker

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _python(code: str, *, new_pid_ns: bool = False) -> str:
    cmd = [sys.executable, "-c", code]
    if new_pid_ns:
        if shutil.which("unshare") is None or os.geteuid() != 0:
            pytest.fail("needs root and util-linux unshare to make a PID namespace")
        cmd = ["unshare", "--pid", "--fork", "--mount-proc", *cmd]
    env = dict(os.environ, PYTHONPATH=ROOT)
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _running(container_id: str) -> bool:
    import docker

    client = docker.from_env(timeout=30)
    try:
        return client.containers.get(container_id).status == "running"
    except docker.errors.NotFound:
        return False
    finally:
        client.close()


async def test_a_server_in_another_pid_namespace_leaves_live_runners_alone():
    async with make_pool("docker", size=1, per_runner=1) as pool:
        ids = [c.id for c in pool.host.containers.values()]
        assert ids
        # what a second server does when it starts: construct its host (orphan clean-up)
        _python("from sandbox.hosts.docker import DockerHost\nh = DockerHost()\nimport asyncio\n"
                "asyncio.run(h.close())\nprint('second server up')", new_pid_ns=True)
        assert all(_running(i) for i in ids), "another server removed this pool's live runners"
        await assert_still_serves(pool)
        assert pool.stats().restarts == 0


async def test_runners_of_a_dead_server_are_removed():
    out = _python(
        "import asyncio, os\nfrom sandbox.hosts.docker import DockerHost\n"
        "async def main():\n    h = DockerHost(slots=2)\n    r = await h.start_runner(0)\n"
        "    print(r.extra['id'], flush=True)\n    os._exit(0)  # dies without cleaning up: its lock goes with it\n"
        "asyncio.run(main())\n")
    orphan = out.split()[-1]
    assert _running(orphan)
    _python("from sandbox.hosts.docker import DockerHost\nimport asyncio\nasyncio.run(DockerHost().close())",
            new_pid_ns=True)
    assert not _running(orphan), "a dead server's runner was left running"
