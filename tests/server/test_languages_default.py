"""Languages on by default on the bwrap host (issue 17 item 5), through HTTP on real servers
and real pools: with no options a server answers C++ and Java stdio tasks right, while every
Python job still runs in the interpreter-only view (no toolchain file is visible to it); the
pool whose runners see the toolchains starts on the first job in another language (not before:
/readyz says so), serves a mixed batch beside the Python pool, shares its CPU plan and its
admission bound; `languages: true` is one view for all jobs, `languages: false` Python only;
`--eager-toolchains` starts it at start-up; a language whose toolchain this host lacks answers
the same per-item error as before.

bwrap only: a docker runner's view is its image (the toolchain image, or the lean one), so
there is no per-language routing to test there (docs/LANGUAGES.md)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys

import httpx
import pytest

from sandbox.runtimes import RuntimePools, toolchains
from tests.sandbox.lang_programs import CASES, EXPECTED, PROGRAMS, completion
from tests.server.conftest import free_port, sandbox_kinds, start_server, wait_ready

pytestmark = pytest.mark.skipif("bwrap" not in sandbox_kinds(), reason="per-language routing is the bwrap host's")

FOUND = {"cpp", "java", "go", "rust", "javascript"}  # .ci/run installs them (typescript: fetch_typescript.sh)
# files of toolchain packages (g++, gcc, libstdc++'s headers, the JDK, go) and the count of /usr
VIEW = """
import os
paths = ['/usr/bin/g++', '/usr/lib/gcc', '/usr/include/c++', '/usr/lib/jvm', '/usr/bin/javac', '/usr/lib/go-1.19',
         '/usr/bin/rustc', '/usr/bin/node', '/etc/alternatives']
n = sum(len(files) for _, _, files in os.walk('/usr'))
print({'seen': [p for p in paths if os.path.lexists(p)], 'usr_files': n})
"""
ADD_PY = "a, b = map(int, input().split())\nprint(a + b)\n"


def score(url: str, items: list[dict]) -> list[dict]:
    r = httpx.post(url + "/v1/score", json={"items": items}, timeout=300)
    assert r.status_code == 200, r.text
    return r.json()["results"]


def task(lang: str) -> dict:
    return {"type": "code", "language": lang, "tests": {"kind": "stdio", "cases": CASES}, "timeout_s": 4.0,
            "memory_mb": 256}


def item(lang: str, kind: str = "correct") -> dict:
    program = ADD_PY if lang == "python" else PROGRAMS[lang][kind]
    return {"completion": completion(lang, program) if lang != "python" else f"```python\n{program}```",
            "task": task(lang)}


def python_view(url: str) -> dict:
    r = httpx.post(url + "/run_code", json={"code": VIEW, "language": "python", "run_timeout": 20}, timeout=120)
    assert r.status_code == 200 and r.json()["status"] == "Success", r.text
    return ast.literal_eval(r.json()["run_result"]["stdout"].strip())


def readyz(url: str) -> dict:
    r = httpx.get(url + "/readyz", timeout=10)
    assert r.status_code == 200, r.text
    return r.json()


@pytest.fixture(scope="module")
def server():
    s = start_server(sandbox="bwrap", pool_size=1)
    yield s
    s.stop()


def test_the_toolchain_pool_starts_on_the_first_job_in_another_language():
    s = start_server(sandbox="bwrap", pool_size=1)
    try:
        body = readyz(s.url)
        assert body["toolchains"]["state"] == "idle" and body["toolchains"]["mode"] == "auto", body
        assert FOUND <= set(body["languages"]) and "python" in body["languages"], body  # found, not started
        assert FOUND <= set(body["toolchains"]["languages"]), body
        assert set(s.pool.pools) == {"python"}
        assert [r["reward"] for r in score(s.url, [item("python")])] == [1.0]
        assert python_view(s.url)["seen"] == []
        assert set(s.pool.pools) == {"python"} and readyz(s.url)["toolchains"]["state"] == "idle"  # Python starts nothing

        # the first jobs in other languages, several at once in one batch with Python ones: one start
        kinds = [("python", "correct"), ("cpp", "correct"), ("java", "correct"), ("cpp", "wrong"), ("python", "correct"),
                 ("java", "wrong"), ("cpp", "correct"), ("go", "correct")]
        res = score(s.url, [item(lang, k) for lang, k in kinds])
        assert [r["reward"] for r in res] == [1.0, 1.0, 1.0, 0.2, 1.0, 0.2, 1.0, 1.0], res
        assert set(s.pool.pools) == {"python", toolchains.POOL}
        tc, py = s.pool.pools[toolchains.POOL], s.pool.pools["python"]
        tc_runners = {h.ident for h in tc.handles()}
        py_runners = {h.ident for h in py.handles()}
        for (lang, _), r in zip(kinds, res, strict=True):
            assert r["detail"]["runner"] in (py_runners if lang == "python" else tc_runners), (lang, r["detail"]["runner"])
        assert len(tc_runners) == tc.size == py.size == 1  # made as the Python pool, started once
        body = readyz(s.url)
        assert body["toolchains"]["state"] == "ready" and body["toolchains"]["start_s"] > 0, body
        # one CPU plan, one admission bound (one pool's capacity) for all pools
        assert tc.cpus is py.cpus
        assert tc.capacity == py.capacity == s.app.state.admission.max_inflight
        # Python jobs still see the interpreter's files only, beside a running toolchain pool
        view = python_view(s.url)
        assert view["seen"] == [] and view["usr_files"] < 1000, view
    finally:
        s.stop()


@pytest.mark.parametrize("lang", ["cpp", "java"])
def test_cpp_and_java_stdio_tasks_with_no_options(server, lang):
    """The six programs of each (correct, wrong, compile error, runtime error, time and memory
    limits), each test with its status, on a server started with no options."""
    kinds = list(EXPECTED)
    results = score(server.url, [item(lang, k) for k in kinds])
    for k, res in zip(kinds, results, strict=True):
        assert res["status"] == "ok", (k, res)
        assert [t["status"] for t in res["detail"]["tests"]] == EXPECTED[k], (lang, k, res["detail"])
        assert res["detail"]["syntax_ok"] is (k != "compile_error"), (k, res)
    assert results[0]["reward"] == pytest.approx(1.0)
    assert python_view(server.url)["seen"] == []


def test_run_code_cpp_and_python_with_no_options(server):
    for lang, code in (("cpp", PROGRAMS["cpp"]["correct"]), ("python", ADD_PY)):
        r = httpx.post(server.url + "/run_code", json={"code": code, "language": lang, "stdin": "20 22\n",
                                                       "run_timeout": 5, "compile_timeout": 30}, timeout=120)
        assert r.status_code == 200 and r.json()["status"] == "Success", r.text
        assert r.json()["run_result"]["stdout"].strip() == "42", r.text
    bad = httpx.post(server.url + "/run_code", json={"code": PROGRAMS["cpp"]["compile_error"], "language": "cpp"},
                     timeout=120).json()
    assert bad["status"] == "Failed" and bad["compile_result"]["return_code"] != 0, bad


def test_include_of_a_host_file_shows_nothing(server):
    """The toolchain pool's view is the toolchains' packages: the compiler finds no host file."""
    for path in ("/etc/shadow", "/etc/passwd", os.path.abspath(__file__)):
        prog = f'#include "{path}"\nint main() {{}}\n'
        r = httpx.post(server.url + "/run_code", json={"code": prog, "language": "cpp"}, timeout=120).json()
        assert r["status"] == "Failed" and "No such file" in r["compile_result"]["stderr"], r
        assert "root:" not in r["compile_result"]["stderr"] and "toolchain" not in r["compile_result"]["stderr"], r


def test_languages_true_is_one_view_for_every_job():
    s = start_server(sandbox="bwrap", pool_size=1, sandbox_options={"languages": True})
    try:
        body = readyz(s.url)
        assert body["toolchains"]["state"] == "in every runner" and FOUND <= set(body["languages"]), body
        assert [r["reward"] for r in score(s.url, [item("cpp"), item("python")])] == [1.0, 1.0]
        assert set(s.pool.pools) == {"python"}  # no pool of its own: everything in one view
        assert {"/usr/bin/g++", "/usr/lib/gcc"} <= set(python_view(s.url)["seen"])  # the cost of that view
    finally:
        s.stop()


def test_languages_false_is_python_only():
    s = start_server(sandbox="bwrap", pool_size=1, sandbox_options={"languages": False})
    try:
        body = readyz(s.url)
        assert body["toolchains"]["state"] == "off" and body["languages"] == ["python"], body
        cpp, py = score(s.url, [item("cpp"), item("python")])
        assert cpp["status"] == "ok" and cpp["reward"] == 0.0, cpp
        assert [t["status"] for t in cpp["detail"]["tests"]] == ["error"] * 3, cpp
        assert "cpp toolchain is not installed" in cpp["detail"]["tests"][0]["message"], cpp
        assert py["reward"] == 1.0, py
        assert set(s.pool.pools) == {"python"}
    finally:
        s.stop()


def test_a_bad_languages_option_is_refused_naming_it():
    for bad in ("yes", 1, "maybe", []):
        with pytest.raises(ValueError, match="languages must be true, false or \"auto\""):
            RuntimePools("bwrap", languages=bad)


def test_eager_toolchains_and_a_missing_toolchain_from_the_command_line(tmp_path):
    """`--eager-toolchains`: ready at start-up. TypeScript's compiler absent (an empty
    VERIREWARD_TYPESCRIPT_DIR): /readyz leaves it out and a TypeScript item gets the clear
    per-item error, while JavaScript (same node, the toolchain pool) and Python still score."""
    port = free_port()
    log = tmp_path / "server.log"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")]),
           "VERIREWARD_TYPESCRIPT_DIR": str(tmp_path / "no-typescript")}
    cmd = [sys.executable, "-m", "reward_server.cli", "serve", "--host", "127.0.0.1", "--port", str(port),
           "--sandbox", "bwrap", "--pool", "1", "--log-level", "warning", "--eager-toolchains"]
    url = f"http://127.0.0.1:{port}"
    with open(log, "wb") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env)
    try:
        try:
            wait_ready(url, 180)
        except TimeoutError:
            pytest.fail(f"server did not come up:\n{log.read_text()[-4000:]}")
        body = readyz(url)
        assert body["toolchains"]["state"] == "ready" and body["toolchains"]["eager"] is True, body
        assert "typescript" not in body["languages"] and FOUND <= set(body["languages"]), body
        ts_prog = "const [a, b] = require('fs').readFileSync(0, 'utf8').split(' ').map(Number);\nconsole.log(a + b);\n"
        ts = {"completion": f"```ts\n{ts_prog}```", "task": task("typescript")}
        js = {"completion": f"```js\n{ts_prog}```", "task": task("javascript")}
        t, j, p = score(url, [ts, js, item("python")])
        assert t["status"] == "ok" and t["reward"] == 0.0, t
        assert [x["status"] for x in t["detail"]["tests"]] == ["error"] * 3, t
        assert "typescript toolchain is not installed" in t["detail"]["tests"][0]["message"], t
        assert (j["reward"], p["reward"]) == (1.0, 1.0), (j, p)
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
