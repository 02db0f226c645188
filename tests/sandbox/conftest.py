from __future__ import annotations

import os

import pytest_asyncio

from sandbox import ExecRequest, Job, Limits, make_pool
from tests.conftest import kind_params


@pytest_asyncio.fixture(scope="session", params=kind_params())
async def pool(request):
    p = make_pool(request.param, size=2, per_runner=2)
    await p.start()
    yield p
    await p.close()


def job(program: str, tests: dict, **limits) -> Job:
    lim = {"timeout_s": 2.0, "memory_mb": 256}
    lim.update(limits)
    return Job(program=program, tests=tests, limits=Limits(**lim))


CANARY = job("def inc(x):\n    return x + 1\n", {"kind": "assert", "asserts": ["assert inc(1) == 2", "assert inc(5) == 6"]})


async def assert_still_serves(pool) -> None:
    """After an attack, the pool must still grade an honest program correctly."""
    r = await pool.run(CANARY)
    assert (r.syntax_ok, r.runs, r.passed, r.total) == (True, True, 2, 2), r


# A secret in the server's environment: no job may ever see it.
SECRET_ENV = "VERIREWARD_TEST_SECRET"
os.environ.setdefault(SECRET_ENV, "env-secret-" + os.urandom(8).hex())


async def probe(pool, program: str, timeout_s: float = 5.0, **kw) -> str:
    """Run a program once and return what it printed (stdout then stderr)."""
    r = await pool.execute(ExecRequest(program=program, limits=Limits(timeout_s=timeout_s, memory_mb=256), **kw))
    return r.stdout + r.stderr


def host_job_processes(uid_lo: int = 20000, uid_hi: int = 20100) -> list[int]:
    """Processes on this machine running as a job uid (containers share the host's uids)."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                uid = os.stat(f"/proc/{name}").st_uid
                with open(f"/proc/{name}/stat") as f:
                    state = f.read().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if uid_lo <= uid < uid_hi and state not in ("Z", "X"):
                found.append(int(name))
    return found
