"""The runner protocol has one owner of truth (issue 15, findings 5, 6, 9, 10).

Each test tries what a hostile program would against the real pool, asserts the truthful
outcome, and asserts that no runner was lost or replaced on the way: a candidate that breaks
the protocol fails itself, never the runner, never another job.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os

import pytest

from sandbox import ExecRequest, Limits, make_pool
from sandbox.jobs import ExecFile
from sandbox.runner import flags
from tests.conftest import kind_params
from tests.sandbox.conftest import job, no_runner_lost

# Writes `lie` (raw JSON text) as a frame to every descriptor the program may hold open: the
# control channel is among them unless the runner closed it.
FORGE = r"""
import os, struct
def forge(text):
    data = text.encode("utf-8", "surrogatepass")
    return struct.pack(">I", len(data)) + data
def spray(*lies):
    for fd in range(3, 256):
        for lie in lies:
            try:
                os.write(fd, forge(lie))
            except OSError:
                pass
"""

STDIO = {"kind": "stdio", "cases": [{"stdin": "7\n", "stdout": "7\n"}, {"stdin": "8\n", "stdout": "8\n"}]}
ASSERTS = {"kind": "assert", "asserts": ["assert f(2) == 4", "assert f(3) == 9"]}


# --------------------------------------------------------------- finding 5: forged exit / runs


async def test_forged_exit_frame_then_exit_3_fails_stdio(pool):
    """Prints the right answer, claims exit 0 on every descriptor, hides from the pipes and
    exits 3 later than the runner used to wait for the kernel's note."""
    program = FORGE + r"""
import sys, time
print(input(), flush=True)
spray('{"exit":0,"exc_type":""}')
os.closerange(1, 256)
time.sleep(1.3)
os._exit(3)
"""
    async with no_runner_lost(pool):
        r = await pool.run(job(program, STDIO, timeout_s=3.0))
    assert r.passed == 0 and not r.runs, r
    assert all(t.status == "error" and "3" in t.message for t in r.tests), r


async def test_forged_exit_frame_cannot_change_return_code_exec(pool):
    program = FORGE + r"""
import time
print("out", flush=True)
spray('{"exit":0,"exc_type":""}')
os.closerange(1, 256)
time.sleep(1.3)
os._exit(3)
"""
    async with no_runner_lost(pool):
        r = await pool.execute(ExecRequest(program=program, limits=Limits(timeout_s=3.0)))
    assert r.return_code == 3 and r.status == "error" and r.stdout == "out\n", r


async def test_crashing_top_level_does_not_claim_runs(pool):
    """A top level that claims it ran, then raises: it did not run (stdio and function mode)."""
    stdio = FORGE + "spray('{\"exit\":0,\"exc_type\":\"\"}')\nprint(input())\nraise RuntimeError('boom')\n"
    function = FORGE + ("spray('{\"runs\":true,\"message\":\"\",\"names\":[\"f\"]}')\n"
                        "def f(x):\n    return x * x\nraise RuntimeError('boom')\n")
    exits = FORGE + ("spray('{\"runs\":true,\"message\":\"\",\"names\":[\"f\"]}')\n"
                     "def f(x):\n    return x * x\nos._exit(0)\n")
    async with no_runner_lost(pool):
        a = await pool.run(job(stdio, STDIO))
        b = await pool.run(job(function, ASSERTS))
        c = await pool.run(job(exits, ASSERTS))
    assert not a.runs and a.passed == 0, a
    assert not b.runs and b.passed == 0, b
    assert flags.CONTROL_CHANNEL in b.flags, b
    assert not c.runs and c.passed == 0 and flags.EARLY_EXIT in c.flags, c


async def test_exit_status_of_an_honest_script_is_the_kernels(pool):
    """The other side: what the kernel says is what is reported, for every way a script ends."""
    async with no_runner_lost(pool):
        ok = await pool.run(job("print(input())\n", STDIO))
        code = await pool.execute(ExecRequest(program="import sys\nprint('x')\nsys.exit(5)\n"))
        raised = await pool.execute(ExecRequest(program="raise ValueError('v')\n"))
        killed = await pool.execute(ExecRequest(program="import os, signal\nos.kill(os.getpid(), signal.SIGTERM)\n"))
    assert ok.runs and ok.passed == 2 and ok.flags == [], ok
    assert (code.return_code, code.status, code.stdout) == (5, "error", "x\n"), code
    assert raised.return_code == 1 and "ValueError: v" in raised.stderr, raised
    assert killed.return_code == -15 and killed.status == "error", killed


# --------------------------------------------------- finding 6: frames that broke the supervisor


BAD_FRAMES = {
    "huge_int": '{"runs":true,"message":"","names":[' + "9" * 5000 + "]}",
    "exit_str": '{"exit":"x","exc_type":""}',
    "not_json": "{{{{",
    "wrong_types": '{"runs":"yes","message":5,"names":{"a":1}}',
    "bare_list": "[1,2,3]",
}


@pytest.mark.parametrize("lie", sorted(BAD_FRAMES))
async def test_malformed_frames_at_top_level_fail_only_the_candidate(pool, lie):
    program = FORGE + f"spray({BAD_FRAMES[lie]!r})\ndef f(x):\n    return x * x\n"
    async with no_runner_lost(pool):
        r = await pool.run(job(program, ASSERTS))
        s = await pool.run(job(program + "print(input())\n", STDIO))
    assert r.passed == 0 and not r.runs, r
    assert {t.status for t in r.tests} == {"protocol_error"}, r
    assert {flags.MALFORMED_FRAME, flags.CONTROL_CHANNEL} & set(r.flags), r
    # in a script run the control channel is closed before the program's code runs
    assert s.passed == 2 and s.runs, s


@pytest.mark.parametrize("lie", ["huge_int", "not_json", "bare_list"])
async def test_malformed_reply_during_a_call_is_that_tests_protocol_error(pool, lie):
    program = FORGE + (
        "CALLS = [0]\n"
        "def f(x):\n"
        "    CALLS[0] += 1\n"
        "    if x == 3:\n"
        f"        spray({BAD_FRAMES[lie]!r})\n"
        "        import time; time.sleep(5)\n"
        "    return x * x\n"
    )
    tests = {"kind": "assert", "asserts": ["assert f(2) == 4", "assert f(3) == 9", "assert f(4) == 16"]}
    async with no_runner_lost(pool):
        r = await pool.run(job(program, tests))
    assert [t.status for t in r.tests] == ["passed", "protocol_error", "passed"], r
    assert flags.MALFORMED_FRAME in r.flags, r


async def test_exiting_during_a_call_is_flagged_early_exit(pool):
    program = "import os\ndef f(x):\n    if x == 3:\n        os._exit(0)\n    return x * x\n"
    tests = {"kind": "assert", "asserts": ["assert f(2) == 4", "assert f(3) == 9", "assert f(4) == 16"]}
    async with no_runner_lost(pool):
        r = await pool.run(job(program, tests))
    assert [t.status for t in r.tests] == ["passed", "error", "passed"], r
    # the module alone runs: an exit inside a call fails that test, not `runs` (shared/data's convention)
    assert flags.EARLY_EXIT in r.flags and r.runs, r


async def test_a_reload_that_breaks_the_protocol_fails_only_its_test(pool):
    """First load honest, exits in its first call; every reload then writes garbage at its
    top level (it counts its loads in its scratch directory)."""
    program = FORGE + (
        "n = len([x for x in os.listdir('.') if x.startswith('load')])\n"
        "open(f'load{n}', 'w').close()\n"
        "if n >= 1:\n    spray('{{{')\n"
        "def f(x):\n    if n == 0:\n        os._exit(0)\n    return x * x\n"
    )
    tests = {"kind": "assert", "asserts": ["assert f(2) == 4", "assert f(3) == 9", "assert f(4) == 16"]}
    async with no_runner_lost(pool):
        r = await pool.run(job(program, tests))
    assert [t.status for t in r.tests] == ["error", "protocol_error", "protocol_error"], r
    assert {flags.EARLY_EXIT, flags.MALFORMED_FRAME} <= set(r.flags) and not r.runs, r


async def test_oversize_frame_is_flagged(pool):
    program = ("import os, struct\nfor fd in range(3, 64):\n    try:\n"
               "        os.write(fd, struct.pack('>I', 1 << 30) + b'{' * 4096)\n"
               "    except OSError:\n        pass\ndef f(x):\n    return x * x\n")
    async with no_runner_lost(pool):
        r = await pool.run(job(program, ASSERTS))
    assert r.passed == 0 and not r.runs and flags.OVERSIZE_FRAME in r.flags, r


# ------------------------------------------------------ finding 9: unbounded data from a candidate


def _supervisor_peak_rss_kb(pool) -> list[int]:
    """VmHWM of every supervisor process of the pool's runners (host pids, from /proc)."""
    roots = set()
    for h in pool.handles():
        if h.pid:
            roots.add(h.pid)
        else:
            c = pool.host.containers[h.ident]
            c.reload()
            roots.add(int(c.attrs["State"]["Pid"]))
    parent, comm = {}, {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    head, rest = f.read().rsplit(")", 1)
                parent[int(name)] = int(rest.split()[1])
                comm[int(name)] = head.split("(", 1)[1]
            except (OSError, IndexError, ValueError):
                continue
    out = []
    for pid, c in comm.items():
        if not c.startswith("vr-super"):
            continue
        p = pid
        while p > 1 and p not in roots:
            p = parent.get(p, 0)
        if p in roots:
            with contextlib.suppress(OSError), open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        out.append(int(line.split()[1]))
    return out


@pytest.mark.parametrize("kind", kind_params())
async def test_frame_flood_does_not_grow_the_supervisor(kind):
    """120 MB of well-formed frames to every descriptor, in a script run and at a function
    run's top level: the supervisor keeps none of it."""
    flood = FORGE + (
        "chunk = forge('[' + '1,' * 500000 + '1]')\n"
        "for fd in range(3, 64):\n"
        "    try:\n"
        "        for _ in range(120):\n"
        "            os.write(fd, chunk)\n"
        "    except OSError:\n"
        "        pass\n"
    )
    async with make_pool(kind, size=1, per_runner=1) as p:
        async with no_runner_lost(p):
            s = await p.run(job(flood + "print(input())\n", STDIO, timeout_s=20.0))
            r = await p.run(job(flood + "def f(x):\n    return x * x\n", ASSERTS, timeout_s=20.0))
        peaks = _supervisor_peak_rss_kb(p)
    assert s.passed == 2, s
    assert r.passed == 0 and not r.runs, r
    assert peaks and max(peaks) < 150 * 1024, peaks


# ---------------------------------------------------------- finding 10: files in and out of exec


def _file(path: str, data: bytes | str) -> ExecFile:
    raw = data.encode() if isinstance(data, str) else data
    return ExecFile.model_construct(path=path, content_b64=base64.b64encode(raw).decode())


MALFORMED_FILES = {
    "bad_base64": [ExecFile.model_construct(path="a.txt", content_b64="!!!not base64")],
    "nul_name": [_file("a\0b", "x")],
    "surrogate_name": [_file("a\udcffb\ud800", "x")],
    "long_name": [_file("n" * 5000, "x")],
    "long_component": [_file("d/" + "n" * 300, "x")],
    "file_and_dir": [_file("a", "x"), _file("a/b", "y")],
    "dir_and_file": [_file("a/b", "y"), _file("a", "x")],
    "not_a_string": [ExecFile.model_construct(path=5, content_b64="eA==")],
}


@pytest.mark.parametrize("case", sorted(MALFORMED_FILES))
async def test_malformed_files_are_a_clear_job_error(pool, case):
    req = ExecRequest.model_construct(program="print('ran')\n", stdin="", files=MALFORMED_FILES[case],
                                      fetch_files=[], limits=Limits(), language="python")
    async with no_runner_lost(pool):
        r = await pool.execute(req)
    assert r.status == "error" and "ran" not in r.stdout and "files[" in r.stderr, r


async def test_fetch_aliases_are_read_once_within_a_total_cap(pool):
    program = "open('f', 'wb').write(b'x' * 600_000)\nimport os\nos.mkdir('d0')\n"
    aliases = ["f", "./f", "d0/../f", "d0/./../f", "d0//../f"] * 40
    async with no_runner_lost(pool):
        # past the request model (which refuses duplicate paths): the runner dedupes on its own
        r = await pool.execute(ExecRequest.model_construct(program=program, stdin="", files=[], fetch_files=aliases,
                                                           limits=Limits(output_bytes=1 << 20), language="python"))
    assert r.status == "finished", r
    assert list(r.files) == ["f"] and len(base64.b64decode(r.files["f"])) == 600_000, sorted(r.files)[:5]
    two = "open('a', 'wb').write(b'a' * 800_000)\nopen('b', 'wb').write(b'b' * 800_000)\n"
    async with no_runner_lost(pool):
        capped = await pool.execute(ExecRequest(program=two, fetch_files=["a", "b"],
                                                limits=Limits(output_bytes=1 << 20)))
    # the total stays within the cap: the first whole, the second left out
    assert list(capped.files) == ["a"] and "b" not in capped.stderr, sorted(capped.files)


async def test_fetch_paths_out_of_scratch_are_refused_by_the_runner(pool):
    """Past the request model (which names the field): the runner reads nothing outside the scratch."""
    program = "open('out.txt', 'w').write('ok')\nimport os\nos.symlink('/etc/passwd', 'link')\n"
    async with no_runner_lost(pool):
        r = await pool.execute(ExecRequest.model_construct(
            program=program, stdin="", files=[], limits=Limits(), language="python",
            fetch_files=["out.txt", "../../etc/passwd", "/etc/passwd", "link", "missing"]))
    assert r.status == "finished" and r.files == {"out.txt": base64.b64encode(b"ok").decode()}, r


async def test_surrogate_stdin_and_program_do_not_crash(pool):
    async with no_runner_lost(pool):
        a = await pool.execute(ExecRequest.model_construct(
            program="import sys\nprint(len(sys.stdin.read()))\n", stdin="ab\ud800cd\udcff", files=[],
            fetch_files=[], limits=Limits(), language="python"))
        b = await pool.execute(ExecRequest.model_construct(
            program="print('\ud800')\nx = 1 +\n", stdin="", files=[], fetch_files=[], limits=Limits(),
            language="python"))
    assert a.status == "finished" and a.stdout.strip().isdigit(), a
    assert not b.syntax_ok and b.status == "error", b


@pytest.mark.parametrize("kind", kind_params())
async def test_full_scratch_is_a_clear_job_error(kind):
    """One job fills the runner's scratch; the next one's files do not fit: its error."""
    filler = ExecRequest(program="""
import time
try:
    with open('big', 'wb') as f:
        while True:
            f.write(b'x' * (1 << 20))
except OSError as e:
    print('full', type(e).__name__, flush=True)
time.sleep(4)
""", limits=Limits(timeout_s=10, fsize_mb=1024))
    async with make_pool(kind, size=1, per_runner=2) as p:
        async with no_runner_lost(p):
            async def late():
                await asyncio.sleep(2.0)
                return await p.execute(ExecRequest(program="print(open('in').read()[:3])\n",
                                                   files=[_file("in", b"y" * (2 << 20))]))

            a, b = await asyncio.gather(p.execute(filler), late())
    assert a.stdout.startswith("full"), a
    if b.status == "finished":  # the host gives each job a scratch quota of its own
        assert b.stdout == "yyy\n", b
    else:
        assert b.status == "error" and "files[0]" in b.stderr, b


# ------------------------------------------------------------- health: busy is not dead


@pytest.mark.parametrize("kind", kind_params())
async def test_long_cleanup_is_not_a_dead_runner(kind):
    """A job leaves many files: its connection cleans up longer than a health ping waits.
    The pool asks a fresh connection before it calls the runner dead, and finds it alive."""
    # as many files as the scratch's inode quota lets it make (the quota bounds the cleanup too)
    program = ("import os\nn = 0\nfor i in range(400):\n    try:\n        os.mkdir(f'd{i}')\n    except OSError:\n"
               "        break\n    for j in range(150):\n"
               "        try:\n            open(f'd{i}/{j}', 'w').close()\n            n += 1\n"
               "        except OSError:\n            break\nprint(n)\n")
    async with make_pool(kind, size=1, per_runner=1) as p:
        p.health_interval, p.health_timeout = 0.1, 0.05
        async with no_runner_lost(p):
            r = await p.execute(ExecRequest(program=program, limits=Limits(timeout_s=30)))
            for _ in range(20):  # health ticks while the supervisor removes the files
                await asyncio.sleep(0.1)
        assert r.status == "finished" and int(r.stdout) > 1000, r
