"""Runtimes picked through HTTP (issue 16 item 2) on live servers on each host: the lean default
cannot import the scientific stack (an honest failed test, never infra_error), `runtime: "sci"`
can; `/run_code` and `/submit` take the field as an extension; an unknown or unavailable runtime
is a 422 naming the field and listing those offered; a batch mixing runtimes answers each item
right; `--runtime sci` makes sci the default; a runtime not built is listed unavailable, not a
crash; hostile programs on sci keep the isolation (the packages are read-only, no network, an
in-memory patch of a warm module dies with its job). Admission bounds the jobs of all runtime
pools together.

Needs the sci runtime built (`bash sandbox/build_runtime.sh sci`, DOCKER=1 for docker):
skipped locally without it, a failure in CI."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import time

import httpx
import pytest

from sandbox import hosts
from sandbox.router import RuntimePools
from tests.conftest import IN_CI
from tests.sandbox.test_isolation import SYSCALLS
from tests.server.conftest import free_port, kind_params, start_server, wait_ready

SCI = """
import numpy as np, scipy, pandas as pd, sympy, networkx as nx
import scipy.linalg
a, b = map(int, input().split())
print(int(np.array([a, b]).sum()), int(pd.Series([a, b]).max()), sympy.Integer(a) * b,
      nx.path_graph(a + b).number_of_edges(), round(float(scipy.linalg.det([[a, 0], [0, b]]))))
"""
SCI_TESTS = {"kind": "stdio", "cases": [{"stdin": "2 3\n", "stdout": "5 3 6 4 6\n"},
                                        {"stdin": "1 1\n", "stdout": "2 1 1 1 1\n"}]}
ADD = "def add(a, b):\n    return a + b\n"
ADD_TESTS = {"kind": "assert", "asserts": ["assert add(1, 2) == 3", "assert add(2, 2) == 4"]}
NP_ADD = "import numpy as np\ndef add(a, b):\n    return int(np.add(a, b))\n"

WRITE_PACKAGES = """
import os, numpy
site = os.path.dirname(os.path.dirname(numpy.__file__))
out = {}
for name, path in (('module', numpy.__file__), ('sitecustomize', os.path.join(site, 'sitecustomize.py')),
                   ('new_file', os.path.join(site, 'numpy', 'evil.py')),
                   ('pycache', os.path.join(site, 'numpy', '__pycache__', 'evil.cpython-311.pyc'))):
    try:
        with open(path, 'a') as f:
            f.write('import sys; sys.exit(0)\\n')
        out[name] = 'WROTE'
    except OSError as e:
        out[name] = type(e).__name__
for name, op in (('chmod', lambda: os.chmod(numpy.__file__, 0o777)),
                 ('rename', lambda: os.rename(numpy.__file__, numpy.__file__ + '.bak')),
                 ('unlink', lambda: os.unlink(os.path.join(site, 'numpy', 'version.py'))),
                 ('mkdir', lambda: os.mkdir(os.path.join(site, 'evil')))):
    try:
        op()
        out[name] = 'DONE'
    except OSError as e:
        out[name] = type(e).__name__
print(out)
"""
NETWORK = """
import socket
out = {}
for name, addr in (('tcp', ('1.1.1.1', 53)), ('local', ('127.0.0.1', 80))):
    try:
        socket.create_connection(addr, timeout=2).close()
        out[name] = 'CONNECTED'
    except OSError as e:
        out[name] = type(e).__name__
try:
    socket.getaddrinfo('pypi.org', 443)
    out['dns'] = 'RESOLVED'
except OSError as e:
    out['dns'] = type(e).__name__
print(out)
"""
PATCH = "import numpy\nnumpy.sum = lambda *a, **k: 42\nimport numpy.linalg\nprint(numpy.sum([1, 2]))\n"
CHECK_PATCH = "import numpy\nprint(numpy.sum([1, 2]))\n"


def _need_sci(kind: str) -> None:
    why = hosts.unavailable_reason("sci", kind)
    if why:
        if IN_CI:
            pytest.fail(why, pytrace=False)
        pytest.skip(why)


@pytest.fixture(scope="module", params=kind_params())
def server(request):
    _need_sci(request.param)
    s = start_server(sandbox=request.param, pool_size=1, lazy_runtimes=False)  # runtimes: every one built here
    yield s
    s.stop()


def _score(url: str, items: list[dict]) -> httpx.Response:
    return httpx.post(url + "/v1/score", json={"items": items}, timeout=180)


def _item(completion: str, tests: dict, runtime: str | None = None, **kw) -> dict:
    task = {"type": "code", "tests": tests, "timeout_s": 10, "memory_mb": 1024, **kw}
    if runtime is not None:
        task["runtime"] = runtime
    return {"completion": f"```python\n{completion}```", "task": task}


def _run_code(url: str, code: str, **kw) -> dict:
    r = httpx.post(url + "/run_code", json={"code": code, "language": "python", "run_timeout": 20,
                                            "memory_limit_MB": 1024, **kw}, timeout=180)
    assert r.status_code == 200, r.text
    return r.json()


def _run_stdout(url: str, code: str, **kw) -> str:
    res = _run_code(url, code, **kw)
    assert res["status"] == "Success", res
    return res["run_result"]["stdout"]


def test_readyz_lists_runtimes(server):
    r = httpx.get(server.url + "/readyz", timeout=10)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["default_runtime"] == "python"
    assert (body["runtimes"]["python"]["state"], body["runtimes"]["python"]["default"]) == ("ready", True), body
    assert body["runtimes"]["sci"]["state"] == "ready" and body["runtimes"]["sci"]["default"] is False, body


def test_lean_default_cannot_import_the_stack_and_sci_can(server):
    lean, sci = _score(server.url, [_item(SCI, SCI_TESTS), _item(SCI, SCI_TESTS, runtime="sci")]).json()["results"]
    assert lean["status"] == "ok" and lean["reward"] < 0.5, lean  # a failed program, not infra_error
    assert [t["status"] for t in lean["detail"]["tests"]] == ["error", "error"], lean  # the program raised
    assert sci["status"] == "ok" and sci["reward"] == 1.0, sci
    assert sci["detail"]["passed"] == 2, sci
    lean, sci = _score(server.url, [_item(NP_ADD, ADD_TESTS), _item(NP_ADD, ADD_TESTS, runtime="sci")]).json()["results"]
    assert lean["status"] == "ok" and lean["detail"]["passed"] == 0, lean
    assert "ModuleNotFoundError" in lean["detail"]["load_message"], lean
    assert sci["reward"] == 1.0, sci


def test_run_code_takes_runtime_as_an_extension(server):
    lean = _run_code(server.url, SCI, stdin="2 3\n")  # what a SandboxFusion client sends: the default
    assert lean["status"] == "Failed" and "ModuleNotFoundError: No module named 'numpy'" in lean["run_result"]["stderr"], lean
    assert _run_stdout(server.url, SCI, stdin="2 3\n", runtime="sci") == "5 3 6 4 6\n"
    warm = "import sys\nprint('numpy' in sys.modules)\n"  # numpy is warm in sci's spawners only
    assert _run_stdout(server.url, warm, runtime="sci") == "True\n"
    assert _run_stdout(server.url, warm) == "False\n"


def test_submit_takes_runtime_in_config(server):
    def submit(**cfg) -> dict:
        body = {"dataset": "x", "id": 1, "completion": f"```python\n{SCI}```", "config": {
            "language": "python", "provided_data": {"test": [
                {"input": {"stdin": c["stdin"]}, "output": {"stdout": c["stdout"]}} for c in SCI_TESTS["cases"]]}, **cfg}}
        r = httpx.post(server.url + "/submit", json=body, timeout=180)
        assert r.status_code == 200, r.text
        return r.json()

    assert submit()["accepted"] is False
    assert submit(runtime="sci")["accepted"] is True


@pytest.mark.parametrize("name", ["nope", "SCI", "", "sci " * 20])
def test_unknown_runtime_is_a_422_naming_the_field(server, name):
    r = _score(server.url, [_item(ADD, ADD_TESTS), _item(ADD, ADD_TESTS, runtime=name)])
    assert r.status_code == 422, r.text
    (err,) = r.json()["detail"]
    assert err["loc"][:3] == ["body", "items", 1] and err["loc"][-1] == "runtime", err
    if len(name) <= 64:
        assert err["loc"] == ["body", "items", 1, "task", "runtime"], err
        assert "available: python, sci" in err["msg"], err
    r = httpx.post(server.url + "/run_code", json={"code": "print(1)", "runtime": name}, timeout=30)
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "runtime"], r.text
    r = httpx.post(server.url + "/submit", json={"completion": "print(1)", "config": {
        "runtime": name, "provided_data": {"test": [{"input": {"stdin": ""}, "output": {"stdout": "1\n"}}]}}}, timeout=30)
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "config", "runtime"], r.text


def test_runtime_is_for_python_programs(server):
    cpp = {"completion": "```cpp\nint main(){}\n```", "task": {
        "type": "code", "language": "cpp", "runtime": "sci", "tests": {"kind": "stdio", "cases": [{"stdin": "", "stdout": ""}]}}}
    r = _score(server.url, [cpp])
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "items", 0, "task", "runtime"], r.text


def test_a_batch_mixing_runtimes_answers_each_right(server):
    cases = [  # (item, reward)
        (_item(SCI, SCI_TESTS, runtime="sci"), 1.0),
        (_item(SCI, SCI_TESTS), None),  # fails: no numpy on the lean runtime
        (_item(ADD, ADD_TESTS, runtime="python"), 1.0),
        (_item(ADD, ADD_TESTS, runtime="sci"), 1.0),
        (_item(NP_ADD, ADD_TESTS, runtime="sci"), 1.0),
        (_item(NP_ADD, ADD_TESTS), None),
        (_item("def add(a, b):\n    return a - b\n", ADD_TESTS, runtime="sci"), 0.2),  # wrong on either
        (_item(SCI, SCI_TESTS, runtime="sci"), 1.0),
    ] * 2
    r = _score(server.url, [c for c, _ in cases])
    assert r.status_code == 200, r.text
    for i, ((_, want), got) in enumerate(zip(cases, r.json()["results"], strict=True)):
        assert got["status"] == "ok", (i, got)
        if want is None:
            assert got["reward"] < 0.5 and got["detail"]["passed"] == 0, (i, got)
        else:
            assert got["reward"] == pytest.approx(want), (i, got)


def test_hostile_code_on_sci_cannot_touch_the_packages_or_the_network(server):
    out = ast.literal_eval(_run_stdout(server.url, WRITE_PACKAGES, runtime="sci").strip())
    assert set(out) == {"module", "sitecustomize", "new_file", "pycache", "chmod", "rename", "unlink", "mkdir"}, out
    assert not {"WROTE", "DONE"} & set(out.values()), out
    net = ast.literal_eval(_run_stdout(server.url, NETWORK, runtime="sci").strip())
    assert not {"CONNECTED", "RESOLVED"} & set(net.values()), net
    kernel = ast.literal_eval(_run_stdout(server.url, SYSCALLS, runtime="sci").strip())  # the lean pool's jail
    assert "ALLOWED" not in kernel.values(), kernel  # no namespaces, mount, bpf, ptrace, raw sockets...
    assert kernel["bounding_set"] == "empty" and kernel["no_new_privs"] == "set", kernel
    for _ in range(3):  # a warm module patched in one job is that job's alone
        assert _run_stdout(server.url, PATCH, runtime="sci") == "42\n"
        assert _run_stdout(server.url, CHECK_PATCH, runtime="sci") == "3\n"
    # the packages still work for the next program, graded as usual
    (res,) = _score(server.url, [_item(SCI, SCI_TESTS, runtime="sci")]).json()["results"]
    assert res["reward"] == 1.0, res


def test_admission_bounds_all_runtime_pools_together(server):
    pools = server.app.state.server.runner
    assert set(pools.pools) == {"python", "sci"}
    one = pools.pools["python"].capacity
    assert pools.pools["sci"].capacity == one
    assert server.app.state.server.admission.max_inflight == one  # not 2 x: the jobs of both pools share it
    assert pools.pools["sci"].cpus is pools.pools["python"].cpus  # one CPU plan: pinned jobs never share a CPU
    stats = httpx.get(server.url + "/readyz", timeout=10).json()["pool"]
    assert stats["capacity"] == 2 * one and stats["size"] == 2, stats


# ---- servers started from the command line


def _serve(kind: str, *args: str, env: dict | None = None, log_path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    cmd = [sys.executable, "-m", "reward_server.cli", "serve", "--host", "127.0.0.1", "--port", str(port),
           "--sandbox", kind, "--pool", "1", "--log-level", "warning", *args]
    full_env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")]),
                **(env or {})}
    fh = open(log_path, "wb")  # noqa: SIM115 - the server's log, read on failure
    return subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=full_env), f"http://127.0.0.1:{port}"


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()


@pytest.mark.parametrize("kind", kind_params())
def test_server_started_with_runtime_sci_runs_sci_by_default(kind, tmp_path):
    _need_sci(kind)
    log = tmp_path / "server.log"
    proc, url = _serve(kind, "--runtime", "sci", "--runtimes", "sci", log_path=log)
    try:
        try:
            wait_ready(url, 120)
        except TimeoutError:
            pytest.fail(f"server did not come up:\n{log.read_text()[-4000:]}")
        body = httpx.get(url + "/readyz", timeout=10).json()
        assert body["default_runtime"] == "sci" and body["runtimes"]["sci"]["state"] == "ready", body
        assert body["runtimes"]["python"]["state"] == "not offered", body
        (res,) = _score(url, [_item(SCI, SCI_TESTS)]).json()["results"]
        assert res["reward"] == 1.0, res
        assert _run_stdout(url, SCI, stdin="2 3\n") == "5 3 6 4 6\n"  # a SandboxFusion client gets sci too
        # a C++ item names no runtime: the lean runtime is not offered, the toolchain pool runs it
        cpp = {"completion": "```cpp\n#include <iostream>\nint main(){int a,b;std::cin>>a>>b;std::cout<<a+b<<'\\n';}\n```",
               "task": {"type": "code", "language": "cpp", "tests": {"kind": "stdio", "cases": [
                   {"stdin": "2 3\n", "stdout": "5\n"}]}}}
        (res,) = _score(url, [cpp]).json()["results"]
        assert res["reward"] == 1.0, res
        assert httpx.get(url + "/readyz", timeout=10).json()["toolchains"]["state"] == "ready"
        r = _score(url, [_item(ADD, ADD_TESTS, runtime="python")])
        assert r.status_code == 422 and "available: sci" in r.json()["detail"][0]["msg"], r.text
    finally:
        _stop(proc)


def _not_built(kind: str, tmp_path) -> dict:
    """The environment of a server on which sci is not built (an empty runtime cache for bwrap,
    an image tag nobody built for docker)."""
    if kind == "docker":
        return {"VERIREWARD_SANDBOX_IMAGE_SCI": "verireward-sandbox:never-built-runtime"}
    return {"VERIREWARD_RUNTIME_CACHE": str(tmp_path / "empty-runtime-cache")}


@pytest.mark.parametrize("kind", kind_params())
def test_a_runtime_not_built_is_listed_unavailable_not_a_crash(kind, tmp_path):
    log = tmp_path / "server.log"
    proc, url = _serve(kind, "--runtimes", "python,sci", env=_not_built(kind, tmp_path), log_path=log)
    try:
        try:
            wait_ready(url, 120)
        except TimeoutError:
            pytest.fail(f"server did not come up:\n{log.read_text()[-4000:]}")
        sci = httpx.get(url + "/readyz", timeout=10).json()["runtimes"]["sci"]
        assert sci["state"] == "unavailable" and "build_runtime.sh sci" in sci["reason"], sci
        r = _score(url, [_item(SCI, SCI_TESTS, runtime="sci")])
        assert r.status_code == 422, r.text
        (err,) = r.json()["detail"]
        assert err["loc"] == ["body", "items", 0, "task", "runtime"] and "build_runtime.sh sci" in err["msg"], err
        assert "available: python" in err["msg"], err
        (res,) = _score(url, [_item(ADD, ADD_TESTS)]).json()["results"]
        assert res["reward"] == 1.0, res
    finally:
        _stop(proc)


@pytest.mark.parametrize("kind", kind_params())
def test_default_runtime_not_built_refuses_to_start_saying_why(kind, tmp_path):
    log = tmp_path / "server.log"
    proc, _ = _serve(kind, "--runtime", "sci", env=_not_built(kind, tmp_path), log_path=log)
    try:
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert proc.poll() not in (None, 0), log.read_text()[-4000:]
        assert "build_runtime.sh sci" in log.read_text(), log.read_text()[-4000:]
    finally:
        _stop(proc)


def test_runtime_settings_from_the_environment(monkeypatch):
    from reward_server.settings import Settings

    monkeypatch.setenv("REWARD_SERVER_RUNTIME", "sci")
    monkeypatch.setenv("REWARD_SERVER_RUNTIMES", "python, sci")
    s = Settings()
    assert (s.runtime, s.runtimes) == ("sci", ("python", "sci"))
    monkeypatch.setenv("REWARD_SERVER_RUNTIMES", "python,nope")
    with pytest.raises(ValueError, match="unknown runtime 'nope'"):
        Settings()


@pytest.mark.parametrize("kind", kind_params())
async def test_warm_set_from_the_environment(kind, monkeypatch):
    """VERIREWARD_RUNTIME_WARM_SCI=numpy,sympy: sympy is imported before the fork too."""
    _need_sci(kind)
    from sandbox import ExecRequest, Limits

    monkeypatch.setenv("VERIREWARD_RUNTIME_WARM_SCI", "numpy,sympy")
    probe = "import sys\nprint('numpy' in sys.modules, 'sympy' in sys.modules)\n"
    async with RuntimePools(kind, runtimes=(), default="sci", size=1, per_runner=1) as rp:
        r = await rp.execute(ExecRequest(program=probe, runtime="sci", limits=Limits(timeout_s=10, memory_mb=1024)))
    assert (r.status, r.stdout) == ("finished", "True True\n"), r


@pytest.mark.parametrize("kind", kind_params())
def test_lazy_runtimes_start_on_first_use(kind):
    _need_sci(kind)
    s = start_server(sandbox=kind, pool_size=1, lazy_runtimes=True)
    try:
        assert httpx.get(s.url + "/readyz", timeout=10).json()["runtimes"]["sci"]["state"] == "idle"
        assert set(s.pool.pools) == {"python"}
        both = _score(s.url, [_item(SCI, SCI_TESTS, runtime="sci") for _ in range(4)]).json()["results"]
        assert [r["reward"] for r in both] == [1.0] * 4, both  # concurrent first jobs: one start, all answered
        sci = httpx.get(s.url + "/readyz", timeout=10).json()["runtimes"]["sci"]
        assert sci["state"] == "ready" and sci["start_s"] > 0, sci
    finally:
        s.stop()


@pytest.mark.parametrize("kind", kind_params())
def test_max_inflight_holds_across_runtimes(kind):
    """Six sleeping jobs, three per runtime, with 2 in flight at most: at least three rounds of
    1 s (with a bound per pool, 4 would run at once and it would take two)."""
    _need_sci(kind)
    s = start_server(sandbox=kind, pool_size=1, max_inflight_jobs=2)
    try:
        sleeper = "import time\ntime.sleep(1)\nprint('ok')\n"
        tests = {"kind": "stdio", "cases": [{"stdin": "", "stdout": "ok\n"}]}
        items = [_item(sleeper, tests, runtime=rt, timeout_s=2) for rt in ("python", "sci") * 3]
        t0 = time.monotonic()
        results = _score(s.url, items).json()["results"]
        elapsed = time.monotonic() - t0
        assert [r["reward"] for r in results] == [1.0] * 6, results
        assert elapsed >= 3.0, elapsed
    finally:
        s.stop()
