"""The `sci` runtime through the real pools on each host: its packages import and compute,
numpy is warm (imported before the candidate was forked), the default runtime stays lean,
and honest programs still behave as under plain python3.

Needs the runtime built (`bash sandbox/build_runtime.sh sci`, with DOCKER=1 for docker):
skipped locally without it, a failure in CI."""

from __future__ import annotations

import pytest
import pytest_asyncio

from sandbox import ExecRequest, Job, Limits, hosts, runtimes
from sandbox.router import RuntimePools
from tests.conftest import IN_CI, kind_params
from tests.sandbox.conformance_programs import PROGRAMS
from tests.sandbox.test_conformance import LIMITS, normalise, reference

IMPORTS = """
import sys
print('warm', 'numpy' in sys.modules)
import numpy as np, scipy, sympy, pandas as pd, networkx as nx, sortedcontainers, more_itertools, regex
import scipy.optimize
print(int(np.arange(5).sum()), sympy.factor('x**2 - 1'), int(pd.DataFrame({'a': [1, 2]}).a.sum()),
      nx.path_graph(4).number_of_edges(), round(scipy.optimize.brentq(lambda x: x * x - 2, 0, 2), 6),
      list(sortedcontainers.SortedList([3, 1, 2])), list(more_itertools.chunked(range(4), 2)),
      regex.sub(r'\\p{L}+', 'w', 'ab 12'))
"""
WANT = "warm True\n10 (x - 1)*(x + 1) 3 3 1.414214 [1, 2, 3] [[0, 1], [2, 3]] w 12\n"


def _ready(kind: str) -> str | None:
    ok = hosts.docker_ready("sci") if kind == "docker" else runtimes.bwrap_ready("sci")
    return None if ok else f"runtime sci not built for {kind}: DOCKER=1 bash sandbox/build_runtime.sh sci"


@pytest_asyncio.fixture(scope="module", params=kind_params())
async def pools(request):
    why = _ready(request.param)
    if why:
        if IN_CI:
            pytest.fail(why, pytrace=False)
        pytest.skip(why)
    rp = RuntimePools(request.param, runtimes=("sci",), size=1, per_runner=2)
    await rp.start()
    yield rp
    await rp.close()


async def test_sci_packages_import_and_compute(pools):
    r = await pools.execute(ExecRequest(program=IMPORTS, runtime="sci", limits=Limits(timeout_s=30, memory_mb=1024)))
    assert (r.status, r.stdout) == ("finished", WANT), r


async def test_sci_in_function_mode(pools):
    program = "import numpy as np\ndef f(xs):\n    return int(np.asarray(xs).sum())\n"
    job = Job(program=program, runtime="sci", tests={"kind": "call", "fn_name": "f", "cases": [
        {"args": [[1, 2, 3]], "expected": 6}]}, limits=Limits(timeout_s=10, memory_mb=1024))
    r = await pools.run(job)
    assert (r.passed, r.total) == (1, 1), r


async def test_default_runtime_stays_lean(pools):
    r = await pools.execute(ExecRequest(program="import numpy\n"))
    assert r.status == "error" and "ModuleNotFoundError: No module named 'numpy'" in r.stderr, r


def test_unknown_runtime_is_refused():
    with pytest.raises(ValueError, match="runtime"):
        ExecRequest(program="pass", runtime="nope")


@pytest.mark.parametrize(("program", "stdin", "compare_stderr"),
                         [pytest.param(p, s, c, id=n) for n, p, s, c in PROGRAMS
                          if n in ("exit_code", "dunder_file", "mp_pool", "traceback_nested", "recursion_error_uncaught",
                                   "stdin_buffer", "atexit_after_sys_exit", "sys_path_flags")])
async def test_sci_runtime_conformance(pools, program: str, stdin: str, compare_stderr: bool):
    want_out, want_err, want_rc = reference(program, stdin)
    r = await pools.execute(ExecRequest(program=program, stdin=stdin, runtime="sci", limits=Limits(**LIMITS)))
    assert (r.stdout, r.return_code) == (want_out, want_rc), (r, want_err)
    if compare_stderr:
        assert normalise(r.stderr) == normalise(want_err), (r.stderr, want_err)
