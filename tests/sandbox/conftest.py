from __future__ import annotations

import pytest_asyncio

from sandbox import Job, Limits, make_pool
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
