"""Sessions through the sandbox's API (SessionRunner) on both hosts: state kept between calls,
what a call answers (trailing repr, tracebacks of the cell's own frames), interrupts at the
call's limit, a lost session, processes that do not outlive a call, a close or a pool's stop."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import time

import pytest

from sandbox import Job, Limits, make_pool
from sandbox.api import SessionsFull, UnknownSession
from sandbox.sessions import SessionExec, SessionExecResult, SessionSpec
from tests.conftest import kind_params


@contextlib.asynccontextmanager
async def session(pool, **spec):
    key = await pool.open_session(SessionSpec(**spec))
    try:
        yield key
    finally:
        await pool.close_session(key)


async def ex(pool, key: str, code: str, timeout_s: float = 5.0, stdin: str = "") -> SessionExecResult:
    return await pool.session_execute(key, SessionExec(code=code, timeout_s=timeout_s, stdin=stdin))


def uid_processes(uid: int) -> list[int]:
    """Live processes of `uid` on this machine (containers and bwrap share the host's uids)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            if os.stat(f"/proc/{name}").st_uid != uid:
                continue
            with open(f"/proc/{name}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state not in ("Z", "X"):
            found.append(int(name))
    return found


async def gone(uid: int, wait_s: float = 2.0, leave: int = 0) -> list[int]:
    """The processes of `uid` left once at most `leave` remain, or after `wait_s` (a killed
    process takes a moment to exit)."""
    deadline = time.monotonic() + wait_s
    while len(left := uid_processes(uid)) > leave and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    return left


async def test_state_results_and_errors(pool):
    files = [{"path": "data/in.txt", "content_b64": base64.b64encode(b"seven\n").decode()}]
    async with session(pool, files=files) as key:
        r = await ex(pool, key, "import math\nx = 41\ndef f(n):\n    return n * 2\n")
        assert (r.status, r.result, r.error) == ("ok", None, None), r
        r = await ex(pool, key, "print('hi')\nx + 1")
        assert (r.status, r.stdout, r.result) == ("ok", "hi\n", "42"), r
        r = await ex(pool, key, "f(math.isqrt(16)), open('data/in.txt').read()")
        assert r.result == "(8, 'seven\\n')", r
        r = await ex(pool, key, "open('made.txt', 'w').write('kept'); None")
        assert (r.status, r.result) == ("ok", None), r
        r = await ex(pool, key, "open('made.txt').read()")
        assert r.result == "'kept'", r
        r = await ex(pool, key, "input() + '|' + input()", stdin="a\nb\n")
        assert r.result == "'a|b'", r
        r = await ex(pool, key, "import sys\nprint('to err', file=sys.stderr)\n1")
        assert (r.stderr, r.result) == ("to err\n", "1"), r

        # an error: the cell's frames only, the earlier cell's function included
        r = await ex(pool, key, "def g():\n    return f(None) + 1\ng()")
        assert r.status == "error" and r.error is not None, r
        assert r.error.type == "TypeError", r.error
        tb = r.error.traceback
        assert "<cell 8>" in tb and "<cell 1>" in tb and "return n * 2" in tb, tb
        for ours in ("repl.py", "sandbox", "candidate", "runner"):
            assert ours not in tb, tb
        r = await ex(pool, key, "def broken(:\n")
        assert r.status == "error" and r.error.type == "SyntaxError", r
        assert "sandbox" not in r.error.traceback and "<cell 9>" in r.error.traceback, r.error
        r = await ex(pool, key, "raise SystemExit(3)")
        assert r.status == "error" and r.error.type == "SystemExit", r
        r = await ex(pool, key, "class E(Exception):\n    pass\nraise E('mine')")
        assert (r.status, r.error.type, r.error.message) == ("error", "E", "mine"), r
        r = await ex(pool, key, "x")  # the session lives on after every error
        assert (r.status, r.result) == ("ok", "41"), r
        assert r.cpu_total_s >= r.cpu_s >= 0 and r.time_s > 0, r


async def test_a_timeout_interrupts_and_the_session_lives_on(pool):
    async with session(pool) as key:
        await ex(pool, key, "n = 0")
        t0 = time.monotonic()
        r = await ex(pool, key, "while True:\n    n += 1", timeout_s=0.5)
        assert r.status == "timeout" and r.error.type == "KeyboardInterrupt", r
        assert "limit of 0.5 s" in r.message and "<cell 2>" in r.error.traceback, r
        assert time.monotonic() - t0 < 5, r
        r = await ex(pool, key, "import time\ntime.sleep(30)", timeout_s=0.5)  # a sleeper: the wall clock
        assert r.status == "timeout" and "wall-clock" in r.message, r
        r = await ex(pool, key, "n > 0")
        assert (r.status, r.result) == ("ok", "True"), r


async def test_an_interrupt_that_does_not_land_loses_the_session(pool):
    async with session(pool) as key:
        r = await ex(pool, key, "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass",
                     timeout_s=0.5)
        assert r.status == "session_lost" and "did not land" in r.message, r
        r = await ex(pool, key, "1")
        assert r.status == "session_lost", r
        assert pool.session_program(key) == ""  # the lost cell is no part of its history
    with pytest.raises(UnknownSession):
        await ex(pool, key, "1")
    with pytest.raises(UnknownSession):
        pool.session_program(key)
    await pool.close_session(key)  # idempotent
    await pool.close_session("no-such-session")


async def test_os_exit_and_the_cpu_budget_lose_the_session(pool):
    async with session(pool) as key:
        r = await ex(pool, key, "import os\nos._exit(0)")
        assert r.status == "session_lost" and "ended" in r.message, r
    async with session(pool, cpu_budget_s=1) as key:
        r = await ex(pool, key, "while True:\n    pass", timeout_s=120)  # the budget ends it first
        assert r.status == "session_lost" and "CPU budget" in r.message, r
    async with session(pool, cpu_budget_s=1) as key:  # SIGXCPU ignored: the hard limit's SIGKILL
        r = await ex(pool, key, "import signal\nsignal.signal(signal.SIGXCPU, signal.SIG_IGN)\nwhile True:\n    pass",
                     timeout_s=120)
        assert r.status == "session_lost" and "CPU budget" in r.message, r


async def test_children_do_not_outlive_a_call_nor_a_close(pool):
    async with session(pool) as key:
        uid = int((await ex(pool, key, "import os\nos.getuid()")).result)
        assert len(uid_processes(uid)) == 1  # the interpreter, stopped between calls
        code = ("import os, time\n"
                "for _ in range(3):\n"
                "    if os.fork() == 0:\n"
                "        os.setsid()\n"
                "        time.sleep(60)\n"
                "        os._exit(0)\n"
                "time.sleep(1.5)\n")
        call = asyncio.create_task(ex(pool, key, code))
        await asyncio.sleep(0.8)
        during = len(uid_processes(uid))
        r = await call
        assert r.status == "ok", r
        assert during == 4, during  # the interpreter and its three children
        assert len(await gone(uid, 1.0, leave=1)) == 1  # only the interpreter outlives the call
        r = await ex(pool, key, "1 + 1")
        assert r.result == "2", r
        for _ in range(3):  # the killed children are reaped: they never count against its nproc
            r = await ex(pool, key, "import os, time\nfor _ in range(12):\n    if os.fork() == 0:\n        time.sleep(60)\n        os._exit(0)\n")
            assert r.status == "ok", r
    assert await gone(uid) == [], "a closed session left processes"


async def test_an_idle_session_uses_no_cpu(pool):
    async with session(pool) as key:
        r = await ex(pool, key, "import threading, time\n"
                                "def spin():\n"
                                "    while True:\n"
                                "        pass\n"
                                "threading.Thread(target=spin, daemon=True).start()\n"
                                "t0 = time.process_time()\n")
        assert r.status == "ok", r
        await asyncio.sleep(1.0)
        r = await ex(pool, key, "round(time.process_time() - t0, 2)")
        assert r.status == "ok" and float(r.result) < 0.3, r  # it ran ~0 s of the idle second


async def test_sessions_are_separate_from_job_slots_and_bounded(pool):
    keys = []
    try:
        for _ in range(pool.session_capacity):
            keys.append(await pool.open_session(SessionSpec()))
        with pytest.raises(SessionsFull):
            await pool.open_session(SessionSpec())
        assert pool.session_stats().live == pool.session_capacity
        # every session slot taken: jobs still run, as many at once as before
        jobs = [Job(program="def f(x):\n    return x\n", tests={"kind": "assert", "asserts": ["assert f(1) == 1"]},
                    limits=Limits(timeout_s=2)) for _ in range(pool.capacity)]
        results = await asyncio.gather(*(pool.run(j) for j in jobs))
        assert all(r.passed == 1 for r in results), results
    finally:
        for k in keys:
            await pool.close_session(k)
    key = await pool.open_session(SessionSpec())  # a closed session's slot serves again at once
    await pool.close_session(key)


async def test_calls_take_a_job_share_while_they_run(pool):
    """A running call holds one of its runner's job shares, as a job does: with every share held
    by sleeping calls, a job waits for one (idle sessions hold none: the job before ran at once)."""
    keys = [await pool.open_session(SessionSpec()) for _ in range(pool.capacity)]
    job = Job(program="def f(x):\n    return x\n", tests={"kind": "assert", "asserts": ["assert f(1) == 1"]})
    try:
        t0 = time.monotonic()
        assert (await pool.run(job)).passed == 1
        idle_s = time.monotonic() - t0
        calls = [asyncio.create_task(ex(pool, k, "import time\ntime.sleep(2.0)")) for k in keys]
        await asyncio.sleep(0.5)
        t0 = time.monotonic()
        assert (await pool.run(job)).passed == 1
        waited_s = time.monotonic() - t0
        assert all(r.status == "ok" for r in await asyncio.gather(*calls))
        assert waited_s > 0.9 and waited_s > idle_s, (idle_s, waited_s)
    finally:
        for k in keys:
            await pool.close_session(k)


async def test_session_program_replays_what_completed(pool):
    files = [{"path": "k.txt", "content_b64": base64.b64encode(b"3").decode()}]
    async with session(pool, files=files) as key:
        for code, status in (("K = int(open('k.txt').read())", "ok"), ("def add(a, b):\n    return a + b + K - K", "ok"),
                             ("add(1, 2)", "ok"), ("K = 100\n1 / 0", "error"), ("while True:\n    pass", "timeout")):
            r = await ex(pool, key, code, timeout_s=0.5)
            assert r.status == status, (code, r)
        program = pool.session_program(key)
    assert "1 / 0" not in program and "while True" not in program and "add(1, 2)" in program, program
    job = Job(program=program, tests={"kind": "call", "fn_name": "add",
                                      "cases": [{"args": [1, 2], "expected": 3}, {"args": [5, 5], "expected": 10}]})
    r = await pool.run(job)
    assert (r.syntax_ok, r.runs, r.passed, r.total) == (True, True, 2, 2), r


@pytest.mark.parametrize("kind", kind_params())
async def test_a_pool_stop_ends_every_session(kind):
    p = make_pool(kind, size=1, per_runner=1, max_sessions=2)
    await p.start()
    uids = []
    try:
        for _ in range(2):
            key = await p.open_session(SessionSpec())
            uids.append(int((await p.session_execute(key, SessionExec(code="import os\nos.getuid()"))).result))
        assert all(len(uid_processes(u)) == 1 for u in uids)
    finally:
        await p.close()
    for u in uids:
        assert await gone(u, 5) == [], u


@pytest.mark.parametrize("kind", kind_params())
async def test_a_dead_runner_loses_its_sessions_and_is_replaced(kind):
    p = make_pool(kind, size=1, per_runner=1, max_sessions=2)
    await p.start()
    try:
        key = await p.open_session(SessionSpec())
        assert (await p.session_execute(key, SessionExec(code="1"))).result == "1"
        await p.host.stop_runner(p.handles()[0])
        r = await p.session_execute(key, SessionExec(code="1"))
        assert r.status == "session_lost" and "runner" in r.message, r  # the client replays or restarts
        assert (await p.session_execute(key, SessionExec(code="1"))).status == "session_lost"
        await p.close_session(key)
        deadline = time.monotonic() + 60
        while True:
            try:
                key = await p.open_session(SessionSpec())
                break
            except Exception:  # noqa: BLE001 - InfraError or SessionsFull until the replacement answers
                assert time.monotonic() < deadline, "no runner replaced the dead one"
                await asyncio.sleep(0.2)
        assert (await p.session_execute(key, SessionExec(code="2 + 2"))).result == "4"
        assert p.session_stats().lost_total == 1
    finally:
        await p.close()
