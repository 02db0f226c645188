"""Trust crossings of sessions, tried from inside a session on both hosts: session -> session
(names, files, /dev/shm, sockets, /proc, signals), session -> root and jobs (a running job's test
data, the verdict process, the runner), session -> its own grade (the score is a replay of its
history in a fresh job: nothing its process did reaches the verdict), and the bombs a session
can set off, which end as that session's error and harm nobody else."""

from __future__ import annotations

import asyncio
import os

import pytest
import pytest_asyncio

from sandbox import Job, Limits, make_pool
from sandbox.sessions import SessionExec, SessionSpec
from tests.conftest import kind_params
from tests.sandbox.conftest import assert_still_serves
from tests.sandbox.test_sessions import ex, gone, session, uid_processes


@pytest_asyncio.fixture(scope="module", params=kind_params())
async def one_runner(request):
    """One runner: every session and job here shares it (the strongest neighbours)."""
    p = make_pool(request.param, size=1, per_runner=2, max_sessions=3)
    await p.start()
    yield p
    await p.close()


# A scan a session runs of everything outside itself it might read: other slots' scratch
# directories, /dev/shm, /tmp, every process's cmdline, environ and status. It returns what it
# read, and which processes it could signal (it tries SIGKILL on each, then kill(-1)).
SCAN = r"""
import os, signal
seen, killed = [], []
def grab(path):
    try:
        with open(path, 'rb') as f:
            seen.append(path + ' ' + f.read(1 << 16).decode('latin-1'))
    except OSError as e:
        seen.append(path + ' !' + str(e.errno))
base = os.path.dirname(os.getcwd())
try:
    names = os.listdir(base)
except OSError as e:
    names = []
    seen.append('base !' + str(e.errno))
for n in names:
    d = os.path.join(base, n)
    if d == os.getcwd():
        continue
    try:
        for m in os.listdir(d):
            grab(os.path.join(d, m))
    except OSError as e:
        seen.append(d + ' !' + str(e.errno))
for d in ('/dev/shm', '/tmp', '/run'):
    try:
        for m in os.listdir(d):
            grab(os.path.join(d, m))
    except OSError as e:
        seen.append(d + ' !' + str(e.errno))
me = os.getpid()
for p in [p for p in os.listdir('/proc') if p.isdigit()]:
    for leaf in ('cmdline', 'environ', 'status'):
        grab(f'/proc/{p}/{leaf}')
    if int(p) != me:
        try:
            os.kill(int(p), signal.SIGKILL)
            killed.append(p)
        except OSError:
            pass
try:
    os.kill(-1, signal.SIGKILL)
except OSError:
    pass
len(seen), killed, '\n'.join(seen)
"""


async def test_two_sessions_see_nothing_of_each_other(one_runner):
    pool = one_runner
    secret = os.urandom(8).hex()
    async with session(pool) as a, session(pool) as b:
        assert pool.sessions[a].runner is pool.sessions[b].runner  # neighbours on one runner
        r = await ex(pool, a, f"import os, socket\nSECRET = {secret!r}\n"
                              "open('a_file.txt', 'w').write(SECRET)\n"
                              "open('/dev/shm/a_shm', 'w').write(SECRET)\n"
                              "srv = socket.socket(socket.AF_UNIX)\nsrv.bind('\\0vr-session-a')\nsrv.listen()\n"
                              "os.getuid()")
        assert r.status == "ok", r
        a_uid = int(r.result)
        r = await ex(pool, b, "'SECRET' in globals(), sorted(os.listdir('.')) if (os := __import__('os')) else 0")
        assert r.result == "(False, [])", r
        r = await ex(pool, b, "import socket\nc = socket.socket(socket.AF_UNIX)\n"
                              "try:\n    c.connect('\\0vr-session-a')\n    said = 'connected'\n"
                              "except OSError as e:\n    said = e.errno\nsaid")
        assert r.status == "ok" and r.result != "'connected'", r
        r = await ex(pool, b, SCAN, timeout_s=20)
        assert r.status == "ok", r
        assert secret not in (r.result or "") + r.stdout + r.stderr, "session B read session A's data"
        assert "[]" in r.result.split(",", 2)[1], f"session B could signal: {r.result[:300]}"
        r = await ex(pool, a, "SECRET, open('a_file.txt').read(), open('/dev/shm/a_shm').read()")
        assert r.result == repr((secret, secret, secret)), r  # A lived through it, untouched
        assert len(uid_processes(a_uid)) == 1


async def test_a_slot_keeps_nothing_for_its_next_session(one_runner):
    pool = one_runner
    secret = os.urandom(8).hex()
    async with session(pool) as a:
        r = await ex(pool, a, f"import os\nS = {secret!r}\nopen('left.txt', 'w').write(S)\n"
                              "open('/dev/shm/left', 'w').write(S)\nos.mkdir('d')\nos.chmod('.', 0o777)\n"
                              "os.getuid()")
        assert r.status == "ok", r
    for _ in range(2):  # every slot of the runner, the one A had among them
        keys = [await pool.open_session(SessionSpec()) for _ in range(pool.session_capacity)]
        try:
            for k in keys:
                r = await ex(pool, k, "import os\nsorted(os.listdir('.')), os.path.exists('/dev/shm/left'), "
                                      "oct(os.stat('.').st_mode & 0o777), 'S' in globals()")
                assert r.result == "([], False, '0o700', False)", r
        finally:
            for k in keys:
                await pool.close_session(k)


async def test_stdin_is_the_calls_own(one_runner):
    pool = one_runner
    async with session(pool) as s:
        r = await ex(pool, s, "import os\nos.read(0, 10)", timeout_s=2)
        assert (r.status, r.result) == ("ok", "b''"), r  # fd 0 is at its end, never a pipe of ours to wait on
        r = await ex(pool, s, "import sys\nsys.stdin.read()", stdin="only this call's")
        assert r.result == repr("only this call's"), r


async def test_a_session_cannot_read_or_stop_a_running_job(one_runner):
    pool = one_runner
    secret = os.urandom(8).hex()
    job = Job(program="import time\ndef f(x):\n    time.sleep(2.5)\n    return x + 1\n",
              tests={"kind": "assert", "asserts": [f"assert f(1) == 2, 'job-{secret}'"],
                     "helpers": f"HIDDEN = 'job-{secret}'\n"},
              limits=Limits(timeout_s=5, wall_factor=3))
    async with session(pool) as s:
        running = asyncio.create_task(pool.run(job))
        await asyncio.sleep(0.8)  # the job's candidate sleeps, its verdict process waits
        r = await ex(pool, s, SCAN, timeout_s=20)
        result = await running
    assert r.status == "ok", r
    assert secret not in (r.result or "") + r.stdout + r.stderr, "a session read a running job's tests"
    assert "[]" in r.result.split(",", 2)[1], f"a session could signal: {r.result[:300]}"
    assert (result.passed, result.total) == (1, 1), result  # the job was neither read nor stopped
    await assert_still_serves(pool)


async def test_a_session_cannot_fake_its_score(one_runner):
    """Its grade is its history replayed in a fresh job: the /v1/score attacks, from a session."""
    pool = one_runner
    tests = {"kind": "call", "fn_name": "solve", "cases": [{"args": [1], "expected": 2}, {"args": [2], "expected": 4}]}
    async with session(pool) as s:
        for code in ("class AlwaysEq:\n    def __eq__(self, other):\n        return True\n"
                     "    def __ne__(self, other):\n        return False\n    __hash__ = None\n",
                     "class Two(int):\n    def __eq__(self, other):\n        return True\n",
                     "def solve(x):\n    return AlwaysEq() if x == 1 else Two(0)\n",
                     "print('2 passed, 0 failed')\nsolve(1) == 2",
                     "import atexit, os\natexit.register(lambda: os._exit(0))\n",
                     "import builtins\nbuiltins.isinstance = lambda *a: True\n"):
            r = await ex(pool, s, code)
            assert r.status == "ok", (code, r)
        assert r.status == "ok"
        r = await ex(pool, s, "raise SystemExit(0)")  # an error: no part of the history
        assert r.status == "error", r
        program = pool.session_program(s)
    graded = await pool.run(Job(program=program, tests=tests))
    assert (graded.passed, graded.total) == (0, 2), graded
    # a session whose process ended itself: the exit is no part of its history either
    async with session(pool) as s:
        await ex(pool, s, "def solve(x):\n    return 2 * x\n")
        r = await ex(pool, s, "import os\nos._exit(0)")
        assert r.status == "session_lost", r
        program = pool.session_program(s)
    assert "_exit" not in program, program
    graded = await pool.run(Job(program=program, tests=tests))
    assert (graded.passed, graded.total) == (2, 2), graded


BOMBS = {
    "fork": ("import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n", 2.0),
    "memory": ("hoard = []\nwhile True:\n    hoard.append(bytearray(1 << 24))\n", 10.0),
    "output": ("while True:\n    print('y' * 65536)\n", 20.0),
    "loop": ("while True:\n    pass\n", 1.0),
    "c-loop": ("import signal, re\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nre.match('(a*)*b', 'a' * 40)\n", 1.0),
}


@pytest.mark.parametrize("bomb", list(BOMBS))
async def test_bombs_end_as_that_sessions_error(one_runner, bomb):
    pool = one_runner
    code, timeout_s = BOMBS[bomb]
    before = (sorted(h.ident for h in pool.handles()), pool.restarts, pool.infra_errors)
    async with session(pool, memory_mb=256) as s, session(pool) as neighbour:
        await ex(pool, neighbour, "kept = 'neighbour'")
        uid = int((await ex(pool, s, "import os\nos.getuid()")).result)
        r = await ex(pool, s, code, timeout_s=timeout_s)
        # a fork bomb's spinning children compete with the interrupted interpreter for the CPU: on a
        # loaded machine its answer may miss the grace, and the session is lost: its own error either way
        expect = {"fork": {"timeout", "session_lost"}, "memory": {"error"}, "output": {"error"}, "loop": {"timeout"},
                  "c-loop": {"session_lost"}}[bomb]
        assert r.status in expect, r
        if bomb == "memory":
            assert r.error.type == "MemoryError", r
        if bomb == "output":
            assert r.output_truncated and "output" in r.message and len(r.stdout) <= (1 << 20), r.message
        left = await gone(uid, 2.0, leave=0 if r.status == "session_lost" else 1)
        assert len(left) == (0 if r.status == "session_lost" else 1), left  # the bomb's processes are gone
        if r.status != "session_lost":
            r = await ex(pool, s, "'alive'")
            assert r.result == "'alive'", r
        r = await ex(pool, neighbour, "kept")
        assert r.result == "'neighbour'", r
    await assert_still_serves(pool)
    after = (sorted(h.ident for h in pool.handles()), pool.restarts, pool.infra_errors)
    assert after == before, (before, after)


async def test_a_session_cannot_outlive_its_close_even_mid_call(one_runner):
    pool = one_runner
    key = await pool.open_session(SessionSpec())
    uid = int((await pool.session_execute(key, SessionExec(code="import os\nos.getuid()"))).result)
    call = asyncio.create_task(pool.session_execute(key, SessionExec(
        code="import os, time\nif os.fork() == 0:\n    time.sleep(60)\nwhile True:\n    pass\n", timeout_s=60)))
    await asyncio.sleep(0.5)
    await pool.close_session(key)  # mid-call: hangs up, the runner kills the session at once
    r = await call
    assert r.status == "session_lost", r
    assert await gone(uid, 3.0) == [], "a session closed mid-call left processes"
