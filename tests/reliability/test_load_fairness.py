"""Verdicts that do not depend on load, through HTTP on each host (issue 16, item 4).

A server with default pool sizing (more jobs at once than cores: limits are CPU time). Busy
programs beside it take CPU from the candidates but not their verdicts; a looping item costs
one timeout, not one per test. Each test is bounded in time (pytest-timeout).
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time

import httpx
import pytest

from tests.conftest import kind_params

BURN = ("import time\ndef burn(s):\n    t = time.process_time()\n    while time.process_time() - t < s:\n"
        "        pass\n    return 1\n")


@pytest.fixture(scope="module", params=kind_params())
def server(request, shared_servers):
    """The default server (default sizing: pool_slots from cores and memory), shared with the
    other modules that start it (tests/shared.py); the tests leave it idle."""
    return shared_servers.get(sandbox=request.param)


@contextlib.contextmanager
def cpu_hogs(n: int):
    """n plain busy-loop processes beside the server, for as long as the block runs."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True:\n    pass\n"]) for _ in range(n)]
    try:
        time.sleep(0.2)
        yield procs
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()


def code_item(ident: str, program: str, asserts: list[str], timeout_s: float) -> dict:
    task = {"type": "code", "tests": {"kind": "assert", "asserts": asserts}, "timeout_s": timeout_s}
    return {"id": ident, "completion": f"```python\n{program}```", "task": task}


def score(url: str, items: list[dict], timeout: float = 120) -> list[dict]:
    r = httpx.post(url + "/v1/score", json={"items": items}, timeout=timeout)
    assert r.status_code == 200, r.text
    return r.json()["results"]


@pytest.mark.timeout(120)
def test_cpu_bound_programs_pass_beside_six_cpu_hogs(server):
    # each program needs exactly 0.5 s of CPU (it measures its own), the limit is 2.5 s; six
    # hogs and eight candidates on this machine's cores leave each far less than a core
    program = BURN + "def f(x):\n    burn(0.5)\n    return x\n"
    items = [code_item(f"burn{i}", program, [f"assert f({i}) == {i}"], 2.5) for i in range(8)]
    with cpu_hogs(6):
        t0 = time.monotonic()
        results = score(server.url, items)
        took = time.monotonic() - t0
    print(f"8 CPU-bound programs beside 6 hogs: {took:.1f} s")
    bad = [(r["id"], r["detail"].get("tests")) for r in results if r["reward"] != 1.0]
    assert not bad, bad


@pytest.mark.timeout(120)
def test_four_looping_items_cost_one_timeout_each_beside_twelve_fast_ones(server):
    loop = "def f(x):\n    while True:\n        pass\n"
    asserts = [f"assert f({i}) == {i}" for i in range(8)]
    items = [code_item(f"loop{i}", loop, asserts, 2.0) for i in range(4)]
    items += [code_item(f"fast{i}", "def f(x):\n    return x\n", asserts, 2.0) for i in range(12)]
    score(server.url, items[4:6])  # warm: every runner connection made
    t0 = time.monotonic()
    results = score(server.url, items)
    took = time.monotonic() - t0
    print(f"4 looping x 8 tests + 12 fast: {took:.1f} s")
    for r in results[:4]:
        statuses = [t["status"] for t in r["detail"]["tests"]]
        assert statuses == ["timeout"] + ["skipped"] * 7, (r["id"], r["detail"]["tests"][:2])
        assert r["reward"] == pytest.approx(0.2)  # syntax + runs, no test
    assert all(r["reward"] == 1.0 for r in results[4:]), results[4:]
    # one timeout per looping item is 4 x 2 s of CPU (~4 s of wall on 2 cores); one per test
    # would be 4 x 8 x 2 s (>= 32 s of wall): a bound between them that a loaded machine keeps
    assert took < 16.0, took


@pytest.mark.timeout(60)
def test_stop_on_timeout_is_per_request(server):
    program = "def f(x):\n    while x == 1:\n        pass\n    return x\n"
    item = code_item("x", program, [f"assert f({i}) == {i}" for i in range(3)], 0.5)
    item["task"]["stop_on_timeout"] = False
    (res,) = score(server.url, [item])
    assert [t["status"] for t in res["detail"]["tests"]] == ["passed", "timeout", "passed"], res
    item["task"]["stop_on_timeout"] = True
    (res,) = score(server.url, [item])
    assert [t["status"] for t in res["detail"]["tests"]] == ["passed", "timeout", "skipped"], res
    item["task"]["stop_on_timeout"], item["task"]["wall_factor"] = False, 2.0
    sleeper = code_item("s", "import time\ndef f(x):\n    time.sleep(60)\n", ["assert f(1) == 1"], 0.5)
    sleeper["task"]["wall_factor"] = 2.0
    (res,) = score(server.url, [sleeper])
    assert res["detail"]["tests"][0]["message"].startswith("wall-clock limit exceeded (1 s"), res
    item["task"]["stop_on_timeout"] = "maybe"
    r = httpx.post(server.url + "/v1/score", json={"items": [item]}, timeout=30)
    assert r.status_code == 422 and "stop_on_timeout" in r.text, r.text


def test_default_pool_admits_more_jobs_than_cores(server):
    import os

    from sandbox.pool import default_slots

    stats = server.app.state.server.runner.stats()
    cores = len(os.sched_getaffinity(0))
    assert stats.capacity >= default_slots() and (stats.capacity > cores or cores == 1), stats
    assert server.app.state.server.admission.max_inflight == stats.capacity


@pytest.mark.timeout(60)
def test_run_code_keeps_sandbox_fusions_wall_clock_run_timeout(server):
    # verl sizes its read timeout on run_timeout: a sleeper ends at run_timeout, not a backstop
    body = {"code": "import time\ntime.sleep(30)\n", "language": "python", "run_timeout": 1}
    t0 = time.monotonic()
    r = httpx.post(server.url + "/run_code", json=body, timeout=30)
    took = time.monotonic() - t0
    assert r.status_code == 200, r.text
    assert r.json()["run_result"]["status"] == "TimeLimitExceeded", r.json()
    assert took < 2.5, took
