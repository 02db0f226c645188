"""What the candidate's runtime gives beyond the conformance programs: function-call mode's
builtins and __file__, a per-job /dev/shm, files left open flushed at exit, through the real
pool on each host."""

from __future__ import annotations

import base64

import pytest

from sandbox import ExecRequest, Job, Limits
from tests.sandbox.conftest import job


async def test_call_mode_has_site_builtins_and_file(pool):
    program = (
        "import os, sys\n"
        "def info():\n"
        "    return [type(exit).__name__, type(quit).__name__, type(help).__name__, callable(license),\n"
        "            os.path.basename(__file__), os.path.dirname(__file__) == os.getcwd(), sys.getrecursionlimit()]\n"
        "def depth(n=1):\n"
        "    try:\n        return depth(n + 1)\n    except RecursionError:\n        return n\n"
    )
    r = await pool.run(job(program, {"kind": "call", "fn_name": "info", "cases": [
        {"args": [], "expected": ["Quitter", "Quitter", "_Helper", True, "prog.py", True, 1000]}]}))
    assert (r.passed, r.total) == (1, 1), r
    # plain python: depth() called from a module's top level reaches n == 999 under the limit of 1000
    r = await pool.run(job(program, {"kind": "call", "fn_name": "depth", "cases": [{"args": [], "expected": 999}]}))
    assert (r.passed, r.total) == (1, 1), r


async def test_call_mode_traceback_free_messages(pool):
    r = await pool.run(job("def f(x):\n    return 1 // x\n", {"kind": "call", "fn_name": "f", "cases": [
        {"args": [0], "expected": 0}]}))
    assert r.tests[0].status == "error" and "ZeroDivisionError" in r.tests[0].message, r
    assert "candidate.py" not in r.tests[0].message and "sandbox" not in r.tests[0].message, r


async def test_dev_shm_is_per_job(pool):
    """A job may make files in /dev/shm (POSIX shared memory, semaphores) but cannot list
    what others made, and nothing it left is there for the next job."""
    made = await pool.execute(ExecRequest(program=(
        "import os, stat\n"
        "fd = os.open('/dev/shm/left-behind', os.O_CREAT | os.O_WRONLY, 0o644)\nos.write(fd, b'secret')\nos.close(fd)\n"
        "st = os.stat('/dev/shm')\nprint(oct(stat.S_IMODE(st.st_mode)))\n"
        "try:\n    print(os.listdir('/dev/shm'))\nexcept PermissionError:\n    print('cannot list')\n"), limits=Limits()))
    assert made.stdout.splitlines() == ["0o1733", "cannot list"], made
    for _ in range(4):  # every slot of the pool's runners, the next jobs
        r = await pool.execute(ExecRequest(program=(
            "try:\n    print(open('/dev/shm/left-behind').read())\nexcept OSError as e:\n    print(type(e).__name__)\n")))
        assert r.stdout.strip() == "FileNotFoundError", r


async def test_files_left_open_are_flushed_at_exit(pool):
    program = ("f = open('out.txt', 'w')\nf.write('x' * 10 + '\\n')\n"
               "g = open('bin.dat', 'wb')\ng.write(bytes(range(10)))\nprint('done')\n")
    r = await pool.execute(ExecRequest(program=program, fetch_files=["out.txt", "bin.dat"]))
    assert r.status == "finished", r
    assert base64.b64decode(r.files["out.txt"]) == b"x" * 10 + b"\n", r
    assert base64.b64decode(r.files["bin.dat"]) == bytes(range(10)), r


async def test_exec_file_named_like_the_program_is_left_alone(pool):
    from sandbox.jobs import ExecFile

    mine = base64.b64encode(b"DATA = 5\n").decode()
    r = await pool.execute(ExecRequest(
        program="import os\nprint(open('prog.py').read().strip(), os.path.basename(__file__))\n",
        files=[ExecFile(path="prog.py", content_b64=mine)]))
    assert r.stdout.strip() == "DATA = 5 prog_1.py", r


BIG = "import sys\nn = int(input())\nsys.stdout.write(''.join(f'{i} {i * i}\\n' for i in range(n)))\n"


def _big_expected(n: int) -> str:
    return "".join(f"{i} {i * i}\n" for i in range(n))


async def test_stdio_large_correct_output_passes(pool):
    """CodeContests-sized answers: 2 MB and 6 MB (more than the runner keeps) pass under the
    default cap; the last line wrong fails, with where."""
    for n in (150_000, 420_000):
        want = _big_expected(n)
        r = await pool.run(job(BIG, {"kind": "stdio", "cases": [{"stdin": f"{n}\n", "stdout": want}]},
                               timeout_s=10))
        assert [t.status for t in r.tests] == ["passed"], (n, r.tests)
        assert len(r.stdout) <= 4096, len(r.stdout)
    wrong = want[: want.rindex("\n", 0, len(want) - 1) + 1] + "0 0\n"
    r = await pool.run(job(BIG, {"kind": "stdio", "cases": [{"stdin": f"{n}\n", "stdout": wrong}]}, timeout_s=10))
    assert r.tests[0].status == "failed" and f"line {n}:" in r.tests[0].message, r.tests


async def test_stdio_output_cap_per_request(pool):
    n = 150_000  # ~2 MB
    want = _big_expected(n)
    r = await pool.run(job(BIG, {"kind": "stdio", "cases": [{"stdin": f"{n}\n", "stdout": want}]},
                           timeout_s=10, output_bytes=1 << 20))
    assert r.tests[0].status == "output_limit", r.tests


async def test_exec_keeps_output_up_to_the_cap(pool):
    n = 150_000
    r = await pool.execute(ExecRequest(program=BIG, stdin=f"{n}\n", limits=Limits(timeout_s=10)))
    assert r.status == "finished" and r.stdout == _big_expected(n) and not r.output_truncated, (r.status, len(r.stdout))
    r = await pool.execute(ExecRequest(program=BIG, stdin=f"{n}\n", limits=Limits(timeout_s=10, output_bytes=1 << 20)))
    assert r.status == "output_limit", r.status
    assert 0 < len(r.stdout) <= 1 << 20 and _big_expected(n).startswith(r.stdout), len(r.stdout)


async def test_a_pool_refuses_a_job_for_another_runtime(pool):
    """A sci job sent to a plain pool is refused, never run without its packages."""
    with pytest.raises(ValueError, match="runtime 'sci'"):
        await pool.run(Job(program="import numpy\n", runtime="sci",
                           tests={"kind": "assert", "asserts": ["assert True"]}))
    with pytest.raises(ValueError, match="runtime 'sci'"):
        await pool.execute(ExecRequest(program="import numpy\n", runtime="sci"))
