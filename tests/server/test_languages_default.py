"""Languages on by default (issue 17 item 5), through HTTP on real servers and real pools, on
both hosts: with no options a server answers C++ and Java stdio tasks right, while every Python
job still runs in the interpreter-only view (no toolchain file is visible to it: bwrap's view
of the interpreter's files, docker's lean image); the pool whose runners see the toolchains
(bwrap: the host's packages; docker: the toolchain image) starts on the first job in another
language (not before: /readyz says so), serves a mixed batch beside the Python pool, shares its
CPU plan and its admission bound; `languages: true` is one view for all jobs, `languages:
false` Python only; `--eager-toolchains` starts it at start-up; a language whose toolchain the
bwrap host lacks answers the same per-item error as before.

Docker needs both images (`TOOLCHAINS=1 bash sandbox/build_images.sh`, as .ci/run does)."""

from __future__ import annotations

import ast
import asyncio
import os
import subprocess
import sys

import httpx
import pytest

from sandbox import toolchains
from sandbox.router import RuntimePools
from tests.conftest import IN_CI
from tests.sandbox.lang_programs import CASES, EXPECTED, PROGRAMS, completion
from tests.server.conftest import free_port, kind_params, sandbox_kinds, start_server, wait_ready

needs_bwrap = pytest.mark.skipif("bwrap" not in sandbox_kinds(), reason="the bwrap host's view")

FOUND = {"cpp", "java", "go", "rust", "javascript"}  # .ci/run installs them (typescript: fetch_typescript.sh)
# files of toolchain packages (g++, gcc, libstdc++'s headers, the JDK, go...) and the count of /usr
# (Debian's /etc/alternatives: absent on bwrap's interpreter view, the lean image's own on docker)
VIEW = """
import os
paths = ['/usr/bin/g++', '/usr/lib/gcc', '/usr/include/c++', '/usr/lib/jvm', '/usr/bin/javac', '/usr/lib/go-1.19',
         '/usr/bin/rustc', '/usr/bin/node', '/usr/bin/go', '/usr/bin/cc']
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


def need_images(kind: str) -> None:
    if kind != "docker":
        return
    from sandbox.hosts.docker import DockerHost

    for image in (DockerHost.default_image(), toolchains.image()):
        if not DockerHost.image_present(image):
            why = f"docker image {image} is missing: TOOLCHAINS=1 bash sandbox/build_images.sh"
            if IN_CI:
                pytest.fail(why, pytrace=False)
            pytest.skip(why)


def readyz(url: str) -> dict:
    r = httpx.get(url + "/readyz", timeout=10)
    assert r.status_code == 200, r.text
    return r.json()


@pytest.fixture(scope="module", params=kind_params())
def server(request):
    need_images(request.param)
    s = start_server(sandbox=request.param, pool_size=1)
    yield s
    s.stop()


@pytest.mark.parametrize("kind", kind_params())
def test_the_toolchain_pool_starts_on_the_first_job_in_another_language(kind):
    need_images(kind)
    s = start_server(sandbox=kind, pool_size=1)
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
        assert tc.capacity == py.capacity == s.app.state.server.admission.max_inflight
        # Python jobs still see the interpreter's files only, beside a running toolchain pool
        view = python_view(s.url)
        assert view["seen"] == [], view
        if kind == "bwrap":
            assert view["usr_files"] < 1000, view  # the interpreter's (43 here: its stdlib is outside /usr)
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


def test_include_of_a_host_file_shows_nothing(server, tmp_path):
    """The toolchain pool's view has no host file (bwrap: the toolchains' packages only, no
    /etc; docker: the image): `#include` of one is a compile error that shows nothing of it."""
    secret = tmp_path / "secret.h"
    secret.write_text("int leaked = 271828;\n")
    paths = [str(secret), os.path.abspath(__file__)]
    if server.settings.sandbox == "bwrap":
        paths += ["/etc/shadow", "/etc/passwd"]
    for path in paths:
        prog = f'#include "{path}"\nint main() {{}}\n'
        r = httpx.post(server.url + "/run_code", json={"code": prog, "language": "cpp"}, timeout=120).json()
        assert r["status"] == "Failed" and "No such file" in r["compile_result"]["stderr"], r
        assert "271828" not in r["compile_result"]["stderr"] and "root:" not in r["compile_result"]["stderr"], r


@pytest.mark.parametrize("kind", kind_params())
def test_languages_true_is_one_view_for_every_job(kind):
    need_images(kind)
    s = start_server(sandbox=kind, pool_size=1, sandbox_options={"languages": True})
    try:
        body = readyz(s.url)
        assert body["toolchains"]["state"] == "in every runner" and FOUND <= set(body["languages"]), body
        assert [r["reward"] for r in score(s.url, [item("cpp"), item("python")])] == [1.0, 1.0]
        assert set(s.pool.pools) == {"python"}  # no pool of its own: everything in one view
        assert {"/usr/bin/g++", "/usr/lib/gcc"} <= set(python_view(s.url)["seen"])  # the cost of that view
    finally:
        s.stop()


@pytest.mark.parametrize("kind", kind_params())
def test_languages_false_is_python_only(kind, shared_servers):
    need_images(kind)
    s = shared_servers.get(sandbox=kind, pool_size=1, sandbox_options={"languages": False})  # shared: only scored on
    body = readyz(s.url)
    assert body["toolchains"]["state"] == "off" and body["languages"] == ["python"], body
    cpp, py = score(s.url, [item("cpp"), item("python")])
    assert cpp["status"] == "ok" and cpp["reward"] == 0.0, cpp
    assert [t["status"] for t in cpp["detail"]["tests"]] == ["error"] * 3, cpp
    assert "cpp toolchain is not installed" in cpp["detail"]["tests"][0]["message"], cpp
    assert py["reward"] == 1.0, py
    assert set(s.pool.pools) == {"python"}


def test_a_bad_languages_option_is_refused_naming_it():
    for bad in ("yes", 1, "maybe", []):
        with pytest.raises(ValueError, match="languages must be true, false or \"auto\""):
            RuntimePools("bwrap", languages=bad)


@needs_bwrap
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


def test_which_pool_gets_which_option():
    """The routing rule per host kind: auto routes on bwrap, and on docker unless an image is
    named; the toolchain pool's host sees the toolchains, the others as the option says."""
    assert toolchains.routes("auto", "bwrap", {}) and toolchains.routes("auto", "docker", {})
    assert not toolchains.routes("auto", "docker", {"image": "x"}) and not toolchains.routes("auto", "socketdir", {})
    assert not toolchains.routes(True, "bwrap", {}) and not toolchains.routes(False, "bwrap", {})
    assert toolchains.host_options("bwrap", "auto", toolchains.POOL, {}) == {"languages": True}
    assert toolchains.host_options("bwrap", "auto", "python", {}) == {"languages": False}
    assert toolchains.host_options("bwrap", True, "sci", {}) == {"languages": True}
    assert toolchains.host_options("docker", "auto", toolchains.POOL, {}) == {"image": toolchains.image()}
    assert toolchains.host_options("docker", "auto", "python", {}) == {}
    assert toolchains.host_options("docker", True, "python", {}) == {"image": toolchains.image()}
    assert toolchains.host_options("docker", True, "python", {"image": "mine"}) == {}
    assert toolchains.host_options("socketdir", "auto", toolchains.POOL, {}) == {}
    pools = RuntimePools("bwrap")
    pools.toolchain_languages = ["cpp"]
    assert (pools.pool_for("cpp", "python"), pools.pool_for("cpp", "sci")) == (toolchains.POOL, toolchains.POOL)
    assert (pools.pool_for("python", "sci"), pools.pool_for("rust", "python")) == ("sci", "python")  # rust: not found


def _children() -> set[int]:
    """This process's live child processes (the hosts' bwrap / mountns.py runners)."""
    me, out = os.getpid(), set()
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == me and fields[0] != "Z":
                out.add(int(d))
    return out


@needs_bwrap
async def test_a_lazy_start_cut_short_by_close_leaves_no_runner():
    """Shutdown while the first C++ job starts the toolchain pool: the job is the sandbox's
    failure (InfraError), and no runner of that pool outlives the pools."""
    from sandbox import ExecRequest, InfraError, Limits

    before = _children()
    rp = RuntimePools("bwrap", size=1, per_runner=1)
    await rp.start()
    job = asyncio.ensure_future(rp.execute(ExecRequest(program=PROGRAMS["cpp"]["correct"], language="cpp",
                                                       stdin="1 2\n", limits=Limits(timeout_s=5))))
    await asyncio.sleep(0.3)  # the toolchain pool is starting (its scan and runner take over a second)
    assert not job.done()
    await rp.close()
    with pytest.raises(InfraError):
        await job
    await asyncio.sleep(0.5)
    assert _children() - before == set()
