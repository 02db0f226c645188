"""Conformance: an honest program in the sandbox behaves as under plain `python3 prog.py`.

Each program of tests/sandbox/conformance_programs.py runs three ways: under this machine's
python3 in a fresh temporary directory (the reference, with the candidates' environment), as
an exec job (SandboxFusion's run_code path) and as a stdio test whose expected output is the
reference's. Through the real pool on each host, the suite asserts the same stdout, exit
status and verdict (and stderr, path normalised, where the program's frames are all it shows).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile

import pytest

from sandbox import ExecRequest, Job, Limits
from sandbox.runner import limits as runner_limits
from tests.sandbox.conformance_programs import PROGRAMS

LIMITS = {"timeout_s": 10.0, "memory_mb": 1024, "output_bytes": 16 << 20}
_PATH = re.compile(r'File "[^"\n]*/prog\.py"')


def reference(program: str, stdin: str) -> tuple[str, str, int]:
    """(stdout, stderr, exit status) of `python3 /abs/dir/prog.py` run in that fresh directory."""
    with tempfile.TemporaryDirectory(prefix="vr-conf-") as d:
        d = os.path.realpath(d)
        path = os.path.join(d, "prog.py")
        with open(path, "w", encoding="utf-8") as f:
            f.write(program)
        env = dict(runner_limits.CANDIDATE_ENV, HOME=d, TMPDIR=d)
        r = subprocess.run([os.path.realpath(sys.executable), path], cwd=d, env=env, timeout=60,
                           input=stdin.encode("utf-8"), capture_output=True)
        return r.stdout.decode("utf-8", "replace"), r.stderr.decode("utf-8", "replace"), r.returncode


def normalise(stderr: str) -> str:
    return _PATH.sub('File "<dir>/prog.py"', stderr)


@pytest.mark.parametrize(("program", "stdin", "compare_stderr"),
                         [pytest.param(p, s, c, id=name) for name, p, s, c in PROGRAMS])
async def test_exec_matches_plain_python(pool, program: str, stdin: str, compare_stderr: bool):
    want_out, want_err, want_rc = reference(program, stdin)
    r = await pool.execute(ExecRequest(program=program, stdin=stdin, limits=Limits(**LIMITS)))
    assert r.stdout == want_out, (r.stdout[-2000:], want_out[-2000:], r.stderr)
    assert r.return_code == want_rc, (r.return_code, want_rc, r.stderr, want_err)
    assert r.status == ("finished" if want_rc == 0 else "error"), r
    assert not r.output_truncated, r
    if compare_stderr:
        assert normalise(r.stderr) == normalise(want_err), (r.stderr, want_err)


@pytest.mark.parametrize(("program", "stdin"), [pytest.param(p, s, id=name) for name, p, s, _ in PROGRAMS])
async def test_stdio_verdict_matches_plain_python(pool, program: str, stdin: str):
    want_out, want_err, want_rc = reference(program, stdin)
    job = Job(program=program, tests={"kind": "stdio", "cases": [{"stdin": stdin, "stdout": want_out}]},
              limits=Limits(**LIMITS))
    r = await pool.run(job)
    assert r.syntax_ok, r
    want = "passed" if want_rc == 0 else "error"
    assert [t.status for t in r.tests] == [want], (r.tests, want_err)
    assert r.passed == (1 if want_rc == 0 else 0)


# Threads that each malloc while they all live: glibc would give each its own arena (64 MiB of
# address space apiece), and under the default RLIMIT_AS (512 MiB) the 9th thread's stack did
# not fit ("can't start new thread") in a program using ~30 MiB. The runner caps the arenas.
THREADS_AT_DEFAULT_LIMITS = (
    "import threading\nfrom concurrent.futures import ThreadPoolExecutor\n"
    "N = 14\ngate = threading.Barrier(N)\n"
    "def work(i):\n    chunks = [bytearray(4096) for _ in range(500)]\n    gate.wait(timeout=10)\n"
    "    return sum(len(c) for c in chunks)\n"
    "with ThreadPoolExecutor(N) as ex:\n    print(sum(ex.map(work, range(N))))\n"
    "import subprocess, sys\n"  # what it execs is capped too
    "print(subprocess.run([sys.executable, '-c', 'import os; print(os.environ[\"MALLOC_ARENA_MAX\"])'],"
    " capture_output=True, text=True).stdout, end='')\n"
)


async def test_threads_that_malloc_fit_the_default_memory_limit(pool):
    r = await pool.execute(ExecRequest(program=THREADS_AT_DEFAULT_LIMITS, limits=Limits()))
    assert (r.status, r.stdout, r.stderr) == ("finished", f"{14 * 500 * 4096}\n2\n", ""), r
