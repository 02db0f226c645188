"""/v1/sessions through HTTP on a real server, on each host: state persists, sessions are
isolated from each other, TTL / idle timeout / DELETE end a session and every process it
started, a full server answers 429 with Retry-After, /v1/score keeps its verdicts beside many
busy sessions, and a session's `score` cannot be faked from inside the session. The NeMo-Skills
protocol (`POST /execute` with `X-Session-ID`) is checked as its client speaks it, the bundled
client's routing by session id across two servers too. verl's tool: tests/server/test_verl_tool.py.
"""

from __future__ import annotations

import concurrent.futures
import os
import time
import uuid

import httpx
import pytest

from reward_server.client import RewardClient
from reward_server.sessions.models import ELSEWHERE
from tests.conftest import kind_params
from tests.server.conftest import (
    ADD_TASK,
    ECHO_STDIO_TASK,
    GOOD_ADD,
    GOOD_STDIO,
    HALF_ADD,
    HUMANEVAL_TASK,
    SYNTAX_ERR,
)
from tests.shared import SESSION_SERVER


@pytest.fixture(scope="module", params=kind_params())
def server(request, shared_servers):
    return shared_servers.get(sandbox=request.param, **SESSION_SERVER)


@pytest.fixture(scope="module")
def url(server) -> str:
    return server.url


@pytest.fixture
def http(url: str):
    with httpx.Client(base_url=url, timeout=120) as c:
        yield c


def open_session(http: httpx.Client, **body) -> str:
    r = http.post("/v1/sessions", json=body)
    if r.status_code == 503 and "could not open" in r.text:  # the sandbox failed (503 + Retry-After, as the
        time.sleep(float(r.headers.get("retry-after", 1)))  # bundled client does): seen once on docker
        r = http.post("/v1/sessions", json=body)
    assert r.status_code == 200, r.text
    return r.json()["session_id"]


def run(http: httpx.Client, sid: str, code: str, **kw) -> dict:
    r = http.post(f"/v1/sessions/{sid}/execute", json={"code": code, **kw})
    assert r.status_code == 200, r.text
    return r.json()


def ok(http: httpx.Client, sid: str, code: str, **kw) -> dict:
    out = run(http, sid, code, **kw)
    assert out["status"] == "ok", out
    return out


def host_pids(marker: str) -> list[int]:
    """Processes anywhere on this machine whose command line carries `marker` (the sandboxes'
    processes are in namespaces below ours, so /proc shows them)."""
    found = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/cmdline", "rb") as f:
                    if marker.encode() in f.read():
                        found.append(int(d))
            except OSError:
                continue
    return found


def uid_pids(uid: int) -> list[int]:
    """Processes anywhere on this machine running as `uid` (a session's leased uid is its own)."""
    found = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/status") as f:
                    if any(ln.startswith("Uid:") and int(ln.split()[1]) == uid for ln in f):
                        found.append(int(d))
            except (OSError, ValueError):
                continue
    return found


def wait_until(pred, timeout: float = 15.0, step: float = 0.2) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(step)
    return pred()


SPAWN = """
import os, subprocess, sys
MARK = {mark!r}
kids = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", MARK], start_new_session=True)]
if os.fork() == 0:  # a daemon: double fork, new session, parent gone
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(600)", MARK])
    os._exit(0)
os.wait()
len(kids)
"""


# ---------------------------------------------------------------------------- state

def test_state_persists_between_executes(http):
    sid = open_session(http, labels={"suite": "persist"}, files={"given.txt": "aGVsbG8="})
    try:
        ok(http, sid, "import math\nx = 41\nopen('notes.txt', 'w').write('kept')")
        assert ok(http, sid, "x += 1\nmath.factorial(5)")["result"] == "120"
        out = ok(http, sid, "print(x, open('notes.txt').read(), open('given.txt').read())")
        assert out["stdout"] == "42 kept hello\n" and out["result"] is None
        ok(http, sid, "def f(n):\n    return n * x")
        assert ok(http, sid, "f(2)")["result"] == "84"
        err = run(http, sid, "undefined_name + 1")
        assert err["status"] == "error" and err["error"]["type"] == "NameError"
        assert "sandbox/runner" not in err["error"]["traceback"] and "undefined_name" in err["error"]["traceback"]
        assert ok(http, sid, "x")["result"] == "42"  # an error leaves the state as it was
        assert ok(http, sid, "input()", stdin="from stdin\n")["result"] == "'from stdin'"
        info = http.get(f"/v1/sessions/{sid}").json()
        assert info["executes"] == 8 and info["state"] == "live" and info["labels"] == {"suite": "persist"}
        listed = http.get("/v1/sessions", params={"label": "suite=persist"}).json()["sessions"]
        assert [s["session_id"] for s in listed] == [sid]
        assert http.get("/v1/sessions", params={"label": "suite=other"}).json()["sessions"] == []
    finally:
        http.delete(f"/v1/sessions/{sid}")


def test_bad_input_is_4xx_naming_the_field(http):
    r = http.post("/v1/sessions", json={"ttl_s": 10 ** 9})
    assert r.status_code == 422 and r.json()["detail"][0]["field"] == "ttl_s", r.text
    r = http.post("/v1/sessions", json={"labels": {"bad key!": "x"}})
    assert r.status_code == 422 and r.json()["detail"][0]["field"].startswith("labels"), r.text
    r = http.post("/v1/sessions", json={"files": {"../x": "aGk="}})
    assert r.status_code == 422 and r.json()["detail"][0]["field"] == "files.../x", r.text
    sid = open_session(http)
    try:
        r = http.post(f"/v1/sessions/{sid}/execute", json={"code": "1", "timeout_s": 10 ** 6})
        assert r.status_code == 422 and r.json()["detail"][0]["field"] == "timeout_s", r.text
        r = http.post(f"/v1/sessions/{sid}/execute", json={"cod": "1"})
        assert r.status_code == 422, r.text
        r = http.post(f"/v1/sessions/{sid}/score", json={"task": {"type": "code", "tests": {"kind": "nope"}}})
        assert r.status_code == 422 and r.json()["detail"][0]["field"].startswith("task.tests"), r.text
    finally:
        http.delete(f"/v1/sessions/{sid}")
    mine = sid.split(".")[0]  # an id this server never gave: 404
    for method, path in (("GET", f"/v1/sessions/{mine}.0"), ("POST", f"/v1/sessions/{mine}.0/execute"),
                         ("DELETE", f"/v1/sessions/{mine}.0"), ("POST", f"/v1/sessions/{mine}.0/score")):
        r = http.request(method, path, json={"code": "1"} if method == "POST" else None)
        assert r.status_code == 404, (method, path, r.text)


def test_another_servers_session_is_503_to_retry(http):
    """An id another server gave (behind a load balancer: a request routed to the wrong replica)
    is 503 with Retry-After, so a client retries and is routed again; never 404, which would end
    the caller's session."""
    other = "nope." + "0" * 32  # shaped as a server gives ids; "nope.0" is no server's id: 404
    for method, path in (("GET", f"/v1/sessions/{other}"), ("POST", f"/v1/sessions/{other}/execute"),
                         ("DELETE", f"/v1/sessions/{other}"), ("POST", f"/v1/sessions/{other}/score")):
        r = http.request(method, path, json={"code": "1"} if method == "POST" else None)
        assert http.request(method, "/v1/sessions/nope.0" + path.rsplit(other, 1)[1],
                            json={"code": "1"} if method == "POST" else None).status_code == 404
        assert r.status_code == 503 and r.headers["retry-after"] == "0", (method, path, r.text)
        assert "lives on server 'nope'" in r.text and ELSEWHERE in r.text, r.text


# ---------------------------------------------------------------------------- isolation

def test_two_sessions_never_see_each_other(http):
    a, b = open_session(http), open_session(http)
    tag = uuid.uuid4().hex[:8]
    try:
        ok(http, a, "secret = 7")
        assert run(http, b, "secret")["status"] == "error"
        where = ok(http, a, "import os\nopen('mine.txt', 'w').write('A')\nos.path.abspath('mine.txt')")["result"]
        assert ok(http, b, f"import os\nos.path.exists('mine.txt'), os.access({where}, os.R_OK)")["result"] == \
            "(False, False)"
        pid = int(ok(http, a, "import os\nos.getpid()")["result"])  # A's interpreter: it lives between calls
        probe = run(http, b, f"import os, signal\nout = []\n"
                             f"for how in ('cmdline', 'environ', 'mem', 'kill'):\n"
                             f"    try:\n"
                             f"        if {pid} == os.getpid():\n"
                             f"            break  # another runner's namespace: the number is B's own\n"
                             f"        if how == 'kill':\n"
                             f"            os.kill({pid}, signal.SIGKILL)\n"
                             f"        else:\n"
                             f"            open(f'/proc/{pid}/{{how}}', 'rb').read(64)\n"
                             f"        out.append(how)\n"
                             f"    except OSError:\n"
                             f"        pass\nout")
        assert probe["status"] == "ok" and probe["result"] == "[]", probe  # none of it reached A
        assert ok(http, a, "secret")["result"] == "7"  # A lives on, its memory as it was
        ok(http, a, f"open('/dev/shm/s31-{tag}', 'w').write('A')")
        assert ok(http, b, f"import os\nos.path.exists('/dev/shm/s31-{tag}')")["result"] == "False"
        # a listener in A (where sockets are refused altogether, nothing listens and B finds nothing)
        port = ok(http, a, f"import socket\nport = 1\ntry:\n    srv = socket.socket(socket.AF_UNIX)\n"
                           f"    srv.bind('\\0s31-{tag}')\n    srv.listen(1)\n    tcp = socket.socket()\n"
                           "    tcp.bind(('127.0.0.1', 0))\n    tcp.listen(1)\n    port = tcp.getsockname()[1]\n"
                           "except OSError:\n    pass\nport")["result"]
        reach = run(http, b, f"import socket\nout = []\nfor fam, addr in ((socket.AF_UNIX, '\\0s31-{tag}'), "
                             f"(socket.AF_INET, ('127.0.0.1', {port}))):\n"
                             "    try:\n        s = socket.socket(fam)\n        s.settimeout(1)\n"
                             "        s.connect(addr)\n        out.append(fam)\n"
                             "    except OSError:\n        pass\nout")
        assert reach["status"] == "ok" and reach["result"] == "[]", reach
    finally:
        http.delete(f"/v1/sessions/{a}")
        http.delete(f"/v1/sessions/{b}")


# ---------------------------------------------------------------------------- ends

def test_ttl_idle_and_delete_end_the_session_and_its_processes(url, http):
    """A session's children die with each call anyway; a call still running (its child and a
    double-forked daemon with it) ends with the session on DELETE and at its TTL, and an idle
    session's interpreter goes at its idle timeout."""
    sids = {"deleted": open_session(http), "ttl": open_session(http, ttl_s=3),
            "idle": open_session(http, idle_timeout_s=2)}
    marks = {how: f"s31-mark-{how}-{uuid.uuid4().hex[:8]}" for how in ("deleted", "ttl")}
    idle_uid = int(ok(http, sids["idle"], "import os\nos.getuid()")["result"])
    assert uid_pids(idle_uid), "the idle session's interpreter, seen from the host"
    with concurrent.futures.ThreadPoolExecutor(2) as pool, httpx.Client(base_url=url, timeout=60) as c:
        calls = {how: pool.submit(c.post, f"/v1/sessions/{sids[how]}/execute",
                                  json={"code": SPAWN.format(mark=marks[how]) + "\nimport time\ntime.sleep(25)",
                                        "timeout_s": 30})
                 for how in marks}
        for how in marks:
            assert wait_until(lambda m=marks[how]: len(host_pids(m)) >= 2, 10), how  # a child and a daemon
        r = http.delete(f"/v1/sessions/{sids['deleted']}")
        assert r.json() == {"session_id": sids["deleted"], "deleted": True, "reason": ""}
        assert wait_until(lambda: host_pids(marks["deleted"]) == [], 3)  # killed by then (a kill lands at once)
        assert calls["deleted"].result().json()["status"] == "session_lost"
        assert wait_until(lambda: host_pids(marks["ttl"]) == [], 10), host_pids(marks["ttl"])
        assert calls["ttl"].result().json()["status"] == "session_lost"
    r = http.delete(f"/v1/sessions/{sids['deleted']}")  # idempotent
    assert r.status_code == 200 and r.json()["deleted"] is False and r.json()["reason"] == "deleted"
    for how in ("ttl", "idle"):
        assert wait_until(lambda h=how: http.get(f"/v1/sessions/{sids[h]}").status_code == 404, 15), how
        r = http.post(f"/v1/sessions/{sids[how]}/execute", json={"code": "1"})
        assert r.status_code == 404 and how in r.json()["detail"], r.text
    assert wait_until(lambda: uid_pids(idle_uid) == [], 5), uid_pids(idle_uid)  # its interpreter is gone
    metrics = http.get("/metrics").text
    for how in ("deleted", "ttl", "idle"):
        assert f'reward_server_sessions_ended_total{{how="{how}"}}' in metrics


def test_a_busy_session_cannot_outlive_its_ttl(http):
    sid = open_session(http, ttl_s=2)
    t0 = time.monotonic()
    out = run(http, sid, "while True:\n    pass", timeout_s=20)
    assert out["status"] == "session_lost" and time.monotonic() - t0 < 10, out
    assert http.get(f"/v1/sessions/{sid}").status_code == 404


def test_hostile_code_ends_as_that_sessions_error(http):
    """Fork and memory bombs, an output flood, an infinite loop: each ends that call (or that
    session), and the server and the other sessions go on."""
    bystander = open_session(http)
    ok(http, bystander, "kept = 1")
    cases = {
        "loop": ("while True:\n    pass", ("timeout", "session_lost")),
        "flood": ("import sys\nwhile True:\n    sys.stdout.write('x' * 65536)", ("timeout", "session_lost", "error")),
        "memory": ("x = bytearray(8 << 30)", ("error", "session_lost")),
        "fork": ("import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass",
                 ("timeout", "session_lost", "error")),
    }
    for name, (code, allowed) in cases.items():
        sid = open_session(http, memory_mb=256)
        try:
            out = run(http, sid, code, timeout_s=2)
            assert out["status"] in allowed, (name, out["status"], out["message"])
            assert len(out["stdout"]) <= 4 << 20, name
        finally:
            http.delete(f"/v1/sessions/{sid}")
    assert ok(http, bystander, "kept")["result"] == "1"
    http.delete(f"/v1/sessions/{bystander}")
    r = http.post("/v1/score", json={"items": [{"completion": GOOD_ADD, "task": ADD_TASK}]})
    assert r.json()["results"][0]["reward"] == 1.0


def test_server_stop_ends_every_session(server):
    """A server of its own: at stop, its sessions' interpreters (an idle one, one mid-call) are gone."""
    from reward_server.local import InProcessServer

    own = InProcessServer.start(sandbox=server.settings.sandbox, pool_size=1)
    try:
        with httpx.Client(base_url=own.url, timeout=60) as c, concurrent.futures.ThreadPoolExecutor(1) as pool:
            sids = [open_session(c) for _ in range(2)]
            uids = [int(ok(c, sid, "import os\nos.getuid()")["result"]) for sid in sids]
            assert all(uid_pids(u) for u in uids)
            call = pool.submit(c.post, f"/v1/sessions/{sids[1]}/execute", json={"code": "import time\ntime.sleep(2)"})
            time.sleep(0.5)
            own.stop()  # drains the running call, then closes every session, then the sandbox
            assert call.result().json()["status"] == "ok"  # accepted work is finished
    finally:
        own.stop()
    assert wait_until(lambda: not any(uid_pids(u) for u in uids), 5), [uid_pids(u) for u in uids]


# ---------------------------------------------------------------------------- capacity

def test_a_full_server_answers_429_with_retry_after(http):
    opened = []
    try:
        cap = http.get("/readyz").json()["sessions"]["capacity"]
        for _ in range(cap + 1):
            r = http.post("/v1/sessions", json={"labels": {"suite": "full"}})
            if r.status_code == 429:
                break
            assert r.status_code == 200, r.text
            opened.append(r.json()["session_id"])
        assert r.status_code == 429, f"{len(opened)} opened, capacity {cap}"
        assert int(r.headers["retry-after"]) >= 1 and "capacity" in r.json()["detail"]
        assert len(opened) <= cap
        http.delete(f"/v1/sessions/{opened.pop()}")
        opened.append(open_session(http))  # room again
    finally:
        for sid in opened:
            http.delete(f"/v1/sessions/{sid}")


# ---------------------------------------------------------------------------- scoring beside sessions

SCORE_ITEMS = [
    {"completion": GOOD_ADD, "task": ADD_TASK},
    {"completion": HALF_ADD, "task": ADD_TASK},
    {"completion": SYNTAX_ERR, "task": ADD_TASK},
    {"completion": GOOD_STDIO, "task": ECHO_STDIO_TASK},
]


def test_v1_score_keeps_its_verdicts_beside_20_busy_sessions(url, http):
    """20 sessions each burning CPU (2 cores here; the acceptance figure is 100 on a larger box)
    while /v1/score requests run: every verdict as when scored alone, nothing lost."""
    alone = [r["reward"] for r in http.post("/v1/score", json={"items": SCORE_ITEMS}).json()["results"]]
    assert alone[0] == 1.0 and alone[2] < alone[1] < 1.0
    sids = [open_session(http, labels={"suite": "busy"}) for _ in range(20)]
    burn = "s = 0\nfor i in range(2 * 10 ** 6):\n    s += i\ns"
    try:
        with concurrent.futures.ThreadPoolExecutor(28) as pool, httpx.Client(base_url=url, timeout=300) as c:
            busy = [pool.submit(lambda s=s: c.post(f"/v1/sessions/{s}/execute", json={"code": burn, "timeout_s": 20}))
                    for s in sids]
            scored = [pool.submit(lambda: c.post("/v1/score", json={"items": SCORE_ITEMS})) for _ in range(6)]
            for f in scored:
                results = f.result().json()["results"]
                assert [r["status"] for r in results] == ["ok"] * 4, results
                assert [r["reward"] for r in results] == alone
            for f in busy:
                out = f.result().json()
                assert out["status"] == "ok" and out["result"] == str(sum(range(2 * 10 ** 6))), out
    finally:
        for sid in sids:
            http.delete(f"/v1/sessions/{sid}")


# ---------------------------------------------------------------------------- score integrity

def score(http: httpx.Client, sid: str, task: dict) -> dict:
    r = http.post(f"/v1/sessions/{sid}/score", json={"task": task})
    assert r.status_code == 200, r.text
    return r.json()


def test_score_grades_the_session_program_as_v1_score_does(http):
    sid = open_session(http)
    try:
        ok(http, sid, "def add(a, b):\n    return a + b")
        run(http, sid, "raise ValueError('not replayed')")
        got = score(http, sid, ADD_TASK)
        ref = http.post("/v1/score", json={"items": [{"completion": GOOD_ADD, "task": ADD_TASK}]}).json()["results"][0]
        assert got["reward"] == ref["reward"] == 1.0 and got["status"] == "ok"
        assert set(got["detail"]) == set(ref["detail"]) and got["detail"]["flags"] == ref["detail"]["flags"] == []
        assert got["detail"]["passed"] == got["detail"]["total"] == 4
    finally:
        http.delete(f"/v1/sessions/{sid}")


# Each: the cells an agent runs in its session, and the check a naive grader would run in that
# same session (exec'ing the tests where the agent's code lives). The naive grader is fooled
# (the attack works there); /score, which grades the replayed program behind /v1/score's
# boundary, is not.
ATTACKS = {
    "always-equal object": (["class Eq:\n    def __eq__(self, o):\n        return True\n    __hash__ = None\n"
                             "def add(a, b):\n    return Eq()"], "assert add(1, 2) == 3\nassert add(0, 5) == 5"),
    "monkeypatched builtins": (["import builtins\ndef add(a, b):\n    return 7\nbuiltins.abs = lambda x: 0"],
                               "assert abs(add(1, 2) - 3) < 1e-9"),
    "grader's files written": (["import json, os\ndef add(a, b):\n    return 7\n"
                                "for p in ('result.json', 'verdict.json', '/tmp/result.json'):\n"
                                "    try:\n        open(p, 'w').write(json.dumps({'passed': 4, 'total': 4}))\n"
                                "    except OSError:\n        pass"],
                               "import json\nassert json.load(open('result.json'))['passed'] == 4"),
    "own check defined": (["def sq(x):\n    return 0\ndef check(candidate):\n    return True"],
                          "check(sq)"),
    "exit inside the function": (["import os\ndef sq(x):\n    os._exit(0)"], None),
}


@pytest.mark.parametrize("name", list(ATTACKS))
def test_score_cannot_be_faked_from_inside_the_session(http, name):
    cells, naive = ATTACKS[name]
    task = HUMANEVAL_TASK if "sq" in cells[0] else ADD_TASK
    sid = open_session(http)
    try:
        for cell in cells:
            ok(http, sid, cell)
        if naive is not None:
            assert run(http, sid, naive)["status"] == "ok"  # a grader in the session would pass it
        got = score(http, sid, task)
        assert got["status"] == "ok" and got["detail"]["passed"] == 0, got
        program = "```python\n" + "\n".join(cells) + "\n```"
        ref = http.post("/v1/score", json={"items": [{"completion": program, "task": task}]}).json()["results"][0]
        assert got["reward"] == ref["reward"] and got["detail"]["flags"] == ref["detail"]["flags"]
    finally:
        http.delete(f"/v1/sessions/{sid}")


def test_a_session_that_kills_itself_is_lost_and_scores_what_it_had(http):
    sid = open_session(http)
    try:
        ok(http, sid, "def add(a, b):\n    return a + b")
        parent = run(http, sid, "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)")
        assert parent["status"] == "error", parent  # the runner is not its to kill
        out = run(http, sid, "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")
        assert out["status"] == "session_lost", out
        assert run(http, sid, "1")["status"] == "session_lost"
        assert http.get(f"/v1/sessions/{sid}").json()["state"] == "lost"
        got = score(http, sid, ADD_TASK)  # its program: the cells that completed
        assert got["status"] == "ok" and got["reward"] == 1.0, got
    finally:
        http.delete(f"/v1/sessions/{sid}")
    assert "reward_server_sessions_lost_total" in http.get("/metrics").text


# ---------------------------------------------------------------------------- NeMo-Skills

def nemo(http: httpx.Client, code: str, sid: str | None, language: str = "ipython", timeout: float = 10,
         std_input: str = "", max_output_characters: int = 1000) -> httpx.Response:
    """A request exactly as NeMo-Skills' LocalSandbox sends it (nemo_skills/code_execution/sandbox.py:
    `_prepare_request`'s body, `_send_request`'s X-Session-ID header)."""
    body = {"generated_code": code, "std_input": std_input, "timeout": timeout, "language": language,
            "max_output_characters": max_output_characters, "traceback_verbosity": "Plain"}
    headers = {"Content-Type": "application/json", **({"X-Session-ID": sid} if sid else {})}
    return http.post("/execute", json=body, headers=headers)


def test_nemo_skills_protocol(http):
    """NeMo-Skills' own expectations (tests/test_code_execution.py there) on this server."""
    sid = str(uuid.uuid4())
    assert http.get("/health").json()["status"] == "healthy"
    r = nemo(http, "\n    a = 1\n    a\n    ", sid)
    assert r.json() == {"process_status": "completed", "stdout": "1\n", "stderr": "", "new_session_created": True}
    r = nemo(http, "a + 5", sid)
    assert r.json() == {"process_status": "completed", "stdout": "6\n", "stderr": "", "new_session_created": False}
    out = nemo(http, "1 / 0", sid).json()
    assert out["process_status"] == "error" and out["stderr"] == ""
    assert out["stdout"].startswith("Traceback (most recent call last):\n")
    assert out["stdout"].endswith("ZeroDivisionError: division by zero\n") and "File " not in out["stdout"]
    out = nemo(http, "import time\ntime.sleep(3)\nprint('done')", sid, timeout=1).json()
    assert out["process_status"] == "timeout" and out["stderr"].endswith("Execution timed out after 1 seconds\n")
    assert nemo(http, "a", sid).json()["stdout"] == "1\n"  # the session lived on
    out = nemo(http, "print('x' * 50)", sid, max_output_characters=10).json()
    assert out["stdout"] == "x" * 10 + "<output cut>"
    listed = http.get("/sessions").json()
    assert sid in listed["sessions"] and listed["backend"] == "ipython"
    assert http.delete(f"/sessions/{sid}").status_code == 200
    assert http.delete(f"/sessions/{sid}").status_code == 404  # the client treats it as deleted
    out = nemo(http, "a", sid).json()  # a new session: the client replays its history on this flag
    assert out["new_session_created"] is True and out["process_status"] == "error" and "NameError" in out["stdout"]
    http.delete(f"/sessions/{sid}")
    out = nemo(http, "print(input('something '))", None, language="python", std_input="new").json()
    assert out == {"process_status": "completed", "stdout": "something new\n", "stderr": ""}
    out = nemo(http, "1 / 0", None, language="python3").json()
    assert out["process_status"] == "completed" and "ZeroDivisionError" in out["stderr"]
    r = nemo(http, "1", None)
    assert r.status_code == 422 and r.json()["detail"][0]["field"] == "header.X-Session-ID"
    r = nemo(http, "echo hi", None, language="shell")
    assert r.status_code == 422 and r.json()["detail"][0]["field"] == "language"


def test_nemo_sessions_past_capacity_evict_the_least_recently_used(http):
    """NeMo's server holds any number of sessions and its client deletes none it did not restore:
    here a full server ends the least recently used idle NeMo session, and that client, told
    `new_session_created`, replays its history (as after a restart of NeMo's own server)."""
    cap = http.get("/readyz").json()["sessions"]["capacity"]
    ids = [str(uuid.uuid4()) for _ in range(cap + 1)]
    try:
        for i, xid in enumerate(ids):
            out = nemo(http, f"v = {i}\nv", xid).json()
            assert out["process_status"] == "completed" and out["stdout"] == f"{i}\n", out
        again = nemo(http, "v", ids[0]).json()  # the oldest was evicted for the last one
        assert again["new_session_created"] is True and again["process_status"] == "error"
        assert nemo(http, "v", ids[-1]).json()["stdout"] == f"{cap}\n"
    finally:
        for xid in ids:
            http.delete(f"/sessions/{xid}")


@pytest.mark.skipif(not os.environ.get("NEMO_SKILLS_SRC"),
                    reason="NeMo-Skills is not on PyPI: NEMO_SKILLS_SRC=<a checkout> runs its client and its tests "
                           "unchanged (bench/nemo_compat.py)")
def test_nemo_skills_client_and_its_tests_unchanged(url, monkeypatch):
    import asyncio
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("nemo_compat", Path(__file__).parents[2] / "bench/nemo_compat.py")
    compat = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(compat)
    host, port = url.removeprefix("http://").split(":")
    monkeypatch.setenv("NEMO_SKILLS_SANDBOX_HOST", host)
    monkeypatch.setenv("NEMO_SKILLS_SANDBOX_PORT", port)
    results = asyncio.run(compat.run_all(compat.load(Path(os.environ["NEMO_SKILLS_SRC"]))))
    assert [r for r in results if r[1] != "passed"] == [] and len(results) == 23


# ---------------------------------------------------------------------------- the bundled client

def test_client_routes_a_session_to_its_server(server, shared_servers):
    """Two servers; sessions opened through one client are reached by a fresh client that was
    never told where they are (the id names its server)."""
    other = shared_servers.get(sandbox=server.settings.sandbox, max_sessions=8, session_server_id="second")
    urls = [server.url, other.url]
    with RewardClient(urls) as a:
        made = [a.open_session(labels={"suite": "route"}) for _ in range(4)]
        assert {m.server_id for m in made} >= {"second"}  # spread over both
        for i, m in enumerate(made):
            assert a.execute(m.session_id, f"v = {i}").status == "ok"
    with RewardClient(list(reversed(urls))) as b:
        for i, m in enumerate(made):
            assert b.execute(m.session_id, "v").result == str(i)
        assert len(b.sessions({"suite": "route"})) == 4
        got = b.score_session(made[0].session_id, ADD_TASK)
        assert got.status == "ok" and got.reward is not None
        assert all(b.close_session(m.session_id) for m in made)
        assert not b.close_session(made[0].session_id)  # already ended: no error
    with httpx.Client(base_url=other.url) as direct:
        assert direct.get("/v1/sessions", params={"label": "suite=route"}).json()["sessions"] == []

