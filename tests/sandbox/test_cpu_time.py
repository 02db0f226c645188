"""Time limits are the candidate's CPU time; the wall clock is a backstop (sandbox/runner/cpuclock.py).

Through a real pool on each host. Programs measure their own CPU with time.process_time, so
each test says exactly how much CPU a program used whatever the machine's speed or load.
"""

from __future__ import annotations

import asyncio
import os
import time

import pytest

from sandbox import ExecRequest, Limits
from sandbox.runner.cpuclock import TestClock, process_cpu_s, tree_cpu_s
from sandbox.runner.uidlease import BLOCK
from tests.sandbox.conftest import job, no_runner_lost

BURN = "import time\ndef burn(s):\n    t = time.process_time()\n    while time.process_time() - t < s:\n        pass\n"
LOOP = "def f(x):\n    while True:\n        pass\n"
SLEEP = "import time\ndef f(x):\n    time.sleep(60)\n"
ASSERTS8 = {"kind": "assert", "asserts": [f"assert f({i}) == {i}" for i in range(8)]}


async def test_cpu_of_earlier_tests_is_not_charged_to_later_ones(pool):
    # one candidate serves every test: 4 x 0.6 s is 2.4 s in all, each test well within 1 s
    program = BURN + "def f(x):\n    burn(0.6)\n    return x\n"
    tests = {"kind": "assert", "asserts": [f"assert f({i}) == {i}" for i in range(4)]}
    r = await pool.run(job(program, tests, timeout_s=1.0))
    assert [t.status for t in r.tests] == ["passed"] * 4, r


async def test_a_loop_is_stopped_by_its_cpu_time_and_the_rest_are_skipped(pool):
    async with no_runner_lost(pool):
        t0 = time.monotonic()
        r = await pool.run(job(LOOP, ASSERTS8, timeout_s=1.0))
        took = time.monotonic() - t0
    assert [t.status for t in r.tests] == ["timeout"] + ["skipped"] * 7, r
    # CPU time, or (on a machine so busy it got under a third of a core) the wall backstop
    assert r.tests[0].message.startswith(("CPU time limit exceeded (1 s)", "wall-clock limit exceeded (3 s")), r
    assert "earlier test timed out" in r.tests[1].message
    assert r.passed == 0 and r.runs  # the module itself ran
    assert took < 3 * 1.0 + 5, took  # one timeout (at most its wall backstop), not eight


async def test_stop_on_timeout_off_runs_every_test(pool):
    program = "def f(x):\n    while x % 2:\n        pass\n    return x\n"
    tests = {"kind": "assert", "asserts": [f"assert f({i}) == {i}" for i in range(4)]}
    r = await pool.run(job(program, tests, timeout_s=0.5, stop_on_timeout=False))
    assert [t.status for t in r.tests] == ["passed", "timeout", "passed", "timeout"], r


async def test_a_sleeper_meets_the_wall_clock_backstop(pool):
    t0 = time.monotonic()
    r = await pool.run(job(SLEEP, {"kind": "assert", "asserts": ["assert f(1) == 1", "assert f(2) == 2"]},
                           timeout_s=0.5, wall_factor=2.0))
    took = time.monotonic() - t0
    assert [t.status for t in r.tests] == ["timeout", "skipped"], r
    assert r.tests[0].message.startswith("wall-clock limit exceeded (1 s, the backstop of a 0.5 s CPU limit: it used "
                                         "0.0"), r
    assert took >= 1.0, took  # it slept: its CPU never reached the limit, the wall clock ended it


async def test_stdio_loop_and_sleep(pool):
    cases = {"kind": "stdio", "cases": [{"stdin": "", "stdout": "1"}] * 3}
    r = await pool.run(job("while True:\n    pass\n", cases, timeout_s=0.5))
    assert [t.status for t in r.tests] == ["timeout", "skipped", "skipped"], r
    assert r.tests[0].message.startswith(("CPU time limit exceeded", "wall-clock limit exceeded (1.5 s")), r
    r = await pool.run(job("import time\ntime.sleep(60)\n", cases, timeout_s=0.5, wall_factor=2.0))
    assert [t.status for t in r.tests] == ["timeout", "skipped", "skipped"], r
    assert r.tests[0].message.startswith("wall-clock limit exceeded"), r
    r = await pool.run(job(BURN + "burn(0.3)\nprint(1)\n", cases, timeout_s=1.0))
    assert r.passed == 3, r


async def test_a_childs_cpu_counts_in_a_script_run(pool):
    # the program waits (no CPU of its own) while its child burns: the child's CPU is charged
    program = "import subprocess, sys\nsubprocess.run([sys.executable, '-c', 'while True: pass'])\n"
    r = await pool.execute(ExecRequest(program=program, limits=Limits(timeout_s=0.5, wall_factor=10, memory_mb=256)))
    assert r.status == "timeout" and r.time_s < 4.0, r


async def test_a_looping_top_level_meets_the_cpu_limit(pool):
    r = await pool.run(job("while True:\n    pass\ndef f(x):\n    return x\n", ASSERTS8, timeout_s=0.5))
    assert not r.runs and "CPU time limit exceeded" in r.load_message, r


def _running_candidates(pool) -> list[int]:
    """Running processes of this pool's jobs: uids in its runners' leased blocks
    (sandbox/runner/uidlease.py; containers map uids one to one, so both hosts show them here)."""
    blocks = [h.extra["uid_base"] for h in pool.handles() if "uid_base" in h.extra]
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            uid = os.stat(f"/proc/{name}").st_uid
            with open(f"/proc/{name}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state == "R" and any(base <= uid < base + BLOCK for base in blocks):
            found.append(int(name))
    return found


async def test_a_cancelled_job_stops_on_the_runner(pool):
    """The client gives up on a running job (its HTTP client went away): the runner stops it
    (the candidate dies, its uid is cleaned) instead of running it to the end."""
    loaded = asyncio.Event()
    task = asyncio.ensure_future(pool.run(job(LOOP, ASSERTS8, timeout_s=20.0, stop_on_timeout=False),
                                          on_event=lambda ev: ev.get("event") == "load" and loaded.set()))
    await asyncio.wait_for(loaded.wait(), 30)
    deadline = time.monotonic() + 20
    while not _running_candidates(pool) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    assert _running_candidates(pool), "the looping candidate never started"
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    deadline = time.monotonic() + 5
    while _running_candidates(pool) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    assert _running_candidates(pool) == [], "the cancelled job's candidate still runs"
    async with no_runner_lost(pool):
        pass


def test_clock_decisions():
    c = TestClock(1.0, 3.0, started=100.0, cpu_at_start=5.0)
    assert c.check(100.5, None) == ("", 101.0)  # before the limit nothing is read
    assert c.check(101.0, 6.0)[0] == "cpu"
    which, again = c.check(101.0, 5.4, 7.0)  # starved: 0.4 s of CPU in 1 s
    assert which == "" and again == pytest.approx(101.6)
    # it waited 2 s for a CPU since: not a sleeper, the backstop moves on by that much
    assert c.check(103.0, 5.9, 9.0)[0] == "" and c.check(105.0, 5.95, 9.0)[0] == "wall"
    assert "not counting 2.0 s waiting for a CPU" in c.message("wall")
    assert c.check(112.0, 5.95, 20.0)[0] == "hard"  # 4 backstops in all, whatever the waits
    s = TestClock(1.0, 3.0, started=100.0, cpu_at_start=5.0)
    assert s.check(101.5, None) == ("", 103.0)  # the process is gone: only the wall clock
    assert s.check(103.0, 5.0, 1.0)[0] == "wall" and "slept or waited" in s.message("wall")
    w = TestClock(1.0, 1.0, started=100.0, cpu_at_start=5.0)  # a plain wall-clock limit
    assert w.check(101.0, 5.1, 0.0)[0] == "wall" and w.check(100.99, 5.1, 0.0)[0] == ""
    assert process_cpu_s(-1) is None and tree_cpu_s(10**9, None) is None


async def test_a_cancelled_job_waiting_for_a_slot_never_reaches_a_runner(pool):
    busy = [asyncio.ensure_future(pool.run(job(SLEEP, {"kind": "assert", "asserts": ["assert f(1) == 1"]},
                                               timeout_s=0.5, wall_factor=4.0)))
            for _ in range(pool.capacity)]
    await asyncio.sleep(0.5)
    seen: list[dict] = []
    queued = asyncio.ensure_future(pool.run(job("def f(x):\n    return x\n", ASSERTS8), on_event=seen.append))
    await asyncio.sleep(0.2)
    assert pool.stats().in_flight == pool.capacity  # every slot held: the new job waits
    queued.cancel()
    with pytest.raises(asyncio.CancelledError):
        await queued
    results = await asyncio.gather(*busy)
    await asyncio.sleep(0.5)
    assert all(r.tests[0].status == "timeout" for r in results)
    assert seen == [], seen  # no runner ever loaded it
    async with no_runner_lost(pool):
        pass
