"""Servers and shared numbers for the reliability suites (load, faults, API fuzzing).

Short form by default (CI); `RELIABILITY_LONG=1` runs the long form. Servers are the real
thing, started by `tests.server.conftest.start_server` (uvicorn on 127.0.0.1, free port, the
real sandbox pool); the load machinery is `bench/load_test.py`'s.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import load_test as lt  # noqa: E402

from tests.conftest import kind_params  # noqa: E402
from tests.server.conftest import start_server  # noqa: E402

LONG = os.environ.get("RELIABILITY_LONG", "") not in ("", "0")
DOCKER_RESTART = os.environ.get("RELIABILITY_DOCKER_RESTART", "") not in ("", "0")

POOL = 2
MAX_INFLIGHT = POOL * 2  # the pool's capacity: 2 runners x 2 jobs
MAX_QUEUED = 28
LIMIT = MAX_INFLIGHT + MAX_QUEUED  # admitted jobs before a 429
BATCH = 8
CLIENTS = LIMIT // BATCH  # 4 clients x 8 items = exactly the admission limit: never a 429

REQUESTS = 300 if LONG else 24
FAULT_REQUESTS = 300 if LONG else 12
RSS_BATCHES = 400 if LONG else 30


def make_server(kind: str):
    return start_server(sandbox=kind, pool_size=POOL, max_inflight_jobs=MAX_INFLIGHT, max_queued_jobs=MAX_QUEUED)


@pytest.fixture(scope="session", params=kind_params())
def load_server(request):
    """One server per host for the load and fault suites (solo scores computed once)."""
    s = make_server(request.param)
    s.solo = asyncio.run(lt.score_solo(s.url))  # every distinct item, alone
    yield s
    s.stop()
