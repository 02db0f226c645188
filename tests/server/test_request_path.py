"""The request path cannot be stalled or crashed by model text (issue 15, findings 7, 8, 10
and 15) and reward-hack telemetry, all through real HTTP against a real server and pool."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import httpx
import pytest
from pydantic import ValidationError

from reward_server.client import RewardClient, RewardServerError
from reward_server.settings import Settings
from sandbox.api import JobRunner, PoolStats
from sandbox.jobs import MAX_FILES_BYTES
from tests.server.conftest import ADD_TASK, GOOD_ADD, free_port
from tests.server.hostile import FENCE_NO_NEWLINE, SPECIAL_RUN, SURROGATE_RAISE, HealthProbe, hostile_items


def post(url: str, path: str, body, **kw) -> httpx.Response:
    return httpx.post(url + path, json=body, timeout=120, **kw)


def raw_post(url: str, path: str, text: str, **kw) -> httpx.Response:
    """A body with JSON escapes exactly as written (lone surrogates stay `\\ud800` escapes)."""
    return httpx.post(url + path, content=text.encode("ascii"), timeout=120,
                      headers={"content-type": "application/json"}, **kw)


# ---- finding 7: lone surrogates fail only their own item, never the batch -----------------


def test_surrogates_from_runner_completion_and_id_fail_only_their_item(url):
    items = [{"id": "honest", "completion": GOOD_ADD, "task": ADD_TASK}] + [it for it, _ in hostile_items()[:3]]
    r = raw_post(url, "/v1/score", json.dumps({"items": items}))  # json.dumps writes surrogates as \\udXXX
    assert r.status_code == 200, r.text
    res = r.json()["results"]
    assert [x["status"] for x in res] == ["ok"] * 4
    assert res[0]["reward"] == pytest.approx(1.0)
    raised = res[1]
    assert raised["reward"] == pytest.approx(0.2) and raised["detail"]["passed"] == 0
    assert any("\\ud800" in t["message"] for t in raised["detail"]["tests"]), raised  # escaped, not lost
    assert res[2]["reward"] == pytest.approx(1.0)
    assert res[3]["id"] == "id-\\udc80" and res[3]["reward"] == pytest.approx(1.0)


def test_run_code_with_surrogates_in_code_and_output(url):
    """Surrogates in the code and in what the program writes: a 200 with valid JSON, and the
    program's own outcome as plain python3 gives it (print cannot encode a lone surrogate;
    stderr writes it backslash-escaped)."""
    body = '{"code": "import sys\\nsys.stderr.write(chr(0xDC80))\\nprint(\\"x\\ud800\\")"}'
    r = raw_post(url, "/run_code", body)
    assert r.status_code == 200, r.text
    j = r.json()
    assert j["status"] == "Failed" and j["run_result"]["return_code"] == 1, j
    assert j["run_result"]["stdout"] == "", j
    err = j["run_result"]["stderr"]
    assert err.startswith("\\udc80") and "UnicodeEncodeError" in err, err


def test_client_retries_only_failed_items_once_and_never_resends_the_batch(url):
    """A 64-item batch with hostile items comes back in one request (no 500, no resend)."""
    items = [{"completion": GOOD_ADD, "task": ADD_TASK}] * 8 + [{"completion": SURROGATE_RAISE, "task": ADD_TASK}]
    with RewardClient(url, max_batch=64) as cl:
        res = cl.score(items)
        assert cl.stats.requests == 1 and cl.stats.item_retries == 0
    assert [r.reward for r in res] == [pytest.approx(1.0)] * 8 + [pytest.approx(0.2)]


# ---- finding 8: no backtracking on model text; CPU work off the event loop ----------------


def test_fence_without_newline_and_special_token_runs_do_not_stall_the_server(url):
    with HealthProbe(url) as probe:
        t0 = time.perf_counter()
        r = post(url, "/v1/score", {"items": [{"completion": FENCE_NO_NEWLINE, "task": ADD_TASK}] * 2})
        assert r.status_code == 200 and [x["reward"] for x in r.json()["results"]] == [0.0, 0.0]
        q = "```python\ndef add(a, b):\n    return a + b\n```" + SPECIAL_RUN
        label = json.dumps(ADD_TASK)
        queries = [q, FENCE_NO_NEWLINE + SPECIAL_RUN, SPECIAL_RUN + " x"]  # the last: tokens not at the end
        r = post(url, "/get_reward", {"query": queries, "prompts": ["", "", ""], "labels": [label] * 3})
        assert r.status_code == 200, r.text
        assert r.json()["rewards"] == [pytest.approx(1.0), 0.0, 0.0]
        elapsed = time.perf_counter() - t0
    assert elapsed < 10, elapsed
    probe.assert_responsive()


# ---- finding 10: files / fetch_files / stdin / labels validated (422 naming the field) ----


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"files": {"a.txt": "not base64!"}}, "files.a.txt"),
        ({"files": {"/etc/x": "aGk="}}, "files./etc/x"),
        ({"files": {"../up": "aGk="}}, "files.../up"),
        ({"files": {"a\u0000b": "aGk="}}, "files.a\u0000b"),
        ({"files": {"x" * 300: "aGk="}}, "files." + "x" * 300),
        ({"files": {"d": "aGk=", "d/f": "aGk="}}, "files"),
        ({"files": {"a": "aGk=", "./a": "aGk="}}, "files"),
        ({"files": {"big": "A" * (MAX_FILES_BYTES // 3 * 4 + 8)}}, "files"),
        ({"fetch_files": ["/etc/passwd"]}, "fetch_files.0"),
        ({"fetch_files": ["d/../../x"]}, "fetch_files.0"),
    ],
)
def test_run_code_bad_files_are_422_naming_the_field(url, extra, field):
    r = post(url, "/run_code", {"code": "print(1)", "language": "python", **extra})
    assert r.status_code == 422, r.text
    assert field in [d["field"] for d in r.json()["detail"]], r.json()


@pytest.mark.parametrize(("text", "field"), [
    ('{"code": "print(1)", "stdin": "\\ud800"}', "stdin"),
    ('{"code": "print(1)", "files": {"a\\udc80": "aGk="}}', "files.a\\udc80"),
    ('{"code": "print(1)", "fetch_files": ["\\udc80"]}', "fetch_files.0"),
])
def test_run_code_surrogate_stdin_and_names_are_422(url, text, field):
    r = raw_post(url, "/run_code", text)
    assert r.status_code == 422, r.text
    assert field in [d["field"] for d in r.json()["detail"]], r.json()


def test_run_code_fetch_file_aliases_are_read_once_and_null_files_skipped(url):
    code = "open('f', 'w').write('x' * 1000)\nimport os\nos.makedirs('d0')"
    aliases = ["f", "./f", "d0/../f", "d0/./../f"] * 8
    r = post(url, "/run_code", {"code": code, "files": {"skip.txt": None, "in.txt": "aGk="}, "fetch_files": aliases})
    assert r.status_code == 200, r.text
    j = r.json()
    assert j["status"] == "Success", j
    assert list(j["files"]) == ["f"]


def test_get_reward_label_with_non_list_inputs_is_422(url):
    r = post(url, "/get_reward", {"query": ["x"], "prompts": [""], "labels": [{"inputs": 5, "outputs": 5}]})
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["field"] == "labels.0"


# ---- finding 15: caps first, finite weights, no blank token, 500s carry the request id ----


def test_huge_item_count_is_refused_before_validation_and_health_stays_fast(url, server):
    n = 200_000
    item = '{"completion":"x","task":{"type":"math","answer":"1"}}'
    body = '{"items":[' + ",".join([item] * n) + "]}"
    with HealthProbe(url) as probe:
        t0 = time.perf_counter()
        r = raw_post(url, "/v1/score", body)
        took = time.perf_counter() - t0
    assert r.status_code == 422 and r.json()["detail"][0]["field"] == "items", r.text[:300]
    assert "at most" in r.json()["message"]
    assert took < 60, took  # the old path validated all 200 000 items first; the cap now stops at item 4097
    probe.assert_responsive()


@pytest.mark.parametrize("weights", ['{"syntax": 1e999}', '{"tests": -1e999}', '{"runtime": NaN}', '{"flag_penalty": Infinity}'])
def test_non_finite_weights_are_422(url, weights):
    text = '{"items": [{"completion": "x", "task": {"type": "math", "answer": "1"}}], "weights": ' + weights + "}"
    r = raw_post(url, "/v1/score", text)
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["field"].startswith("weights."), r.json()


def test_blank_auth_token_refuses_to_start():
    for blank in ("", "   "):
        with pytest.raises(ValidationError, match="auth_token is empty"):
            Settings(auth_token=blank)
    port = free_port()
    p = subprocess.run([sys.executable, "-m", "reward_server.cli", "serve", "--port", str(port), "--auth-token", ""],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and "auth_token is empty" in p.stderr, p.stderr[-2000:]


class _BuggyPool:
    """A JobRunner whose run and execute have a bug (raise a plain error): the only way to reach
    the server's last-resort 500 path on purpose; the real pool never does this."""

    kind = "buggy"
    default_runtime = "python"
    ready = True
    capacity = 1

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        pass

    async def run(self, job, on_event=None):
        raise ZeroDivisionError("a bug")

    async def execute(self, req):
        raise ZeroDivisionError("a bug")

    def refusal(self, runtime: str) -> str | None:
        return None

    def stats(self) -> PoolStats:
        return PoolStats(kind="buggy", size=1, live=1, in_flight=0, capacity=1, restarts=0, jobs_total=0,
                         infra_errors=0)

    def languages(self) -> list[str]:
        return ["python"]

    def status(self) -> dict:
        return {"python": {"default": True, "state": "ready"}}

    def toolchain_status(self) -> None:
        return None

    def handles(self) -> list:
        return []

    session_capacity = 0

    async def open_session(self, spec):
        raise ZeroDivisionError("a bug")

    async def session_execute(self, key, req):
        raise ZeroDivisionError("a bug")

    async def close_session(self, key) -> None:
        pass

    def session_program(self, key) -> str:
        raise ZeroDivisionError("a bug")

    def session_stats(self):
        raise ZeroDivisionError("a bug")


def test_500_carries_the_request_id():
    assert isinstance(_BuggyPool(), JobRunner)  # the server's one interface, whole
    from tests.server.conftest import start_server_with_pool  # noqa: PLC0415

    s = start_server_with_pool(_BuggyPool())
    try:
        r = httpx.post(s.url + "/run_code", json={"code": "print(1)"}, headers={"x-request-id": "rid-123"}, timeout=30)
        assert r.status_code == 500
        assert r.headers["x-request-id"] == "rid-123"
        assert r.json()["request_id"] == "rid-123" and "rid-123" in r.json()["detail"]
        assert httpx.get(s.url + "/healthz").status_code == 200
        with RewardClient(s.url, backoff_base=0.01) as cl:  # a bug is tried once more, not max_retries times
            with pytest.raises(RewardServerError, match="500"):
                cl.post_json("/run_code", {"code": "print(1)"})
            assert cl.stats.requests == 2
    finally:
        s.stop()


# ---- telemetry: detail.flags, /metrics, flag_penalty --------------------------------------


def test_results_carry_flags_and_metrics_count_them(url):
    r = post(url, "/v1/score", {"items": [{"completion": GOOD_ADD, "task": ADD_TASK}]})
    d = r.json()["results"][0]["detail"]
    assert d["flags"] == [] and r.json()["results"][0]["reward"] == pytest.approx(1.0)
    m = httpx.get(url + "/metrics").text
    assert "# TYPE reward_server_hack_attempts_total counter" in m


def _runner_reports_flags() -> bool:
    """True once any runner module (not the vocabulary itself) uses sandbox.runner.flags."""
    from pathlib import Path  # noqa: PLC0415

    import sandbox.runner as runner  # noqa: PLC0415

    here = Path(runner.__file__).parent
    return any("flags." in p.read_text() for p in here.rglob("*.py") if p.name != "flags.py")


@pytest.mark.skipif(not _runner_reports_flags(), reason="the runner on this branch does not report flags yet")
def test_shadowing_attempt_is_flagged_counted_and_penalised_only_when_asked(url):
    task = {"type": "code", "tests": {"kind": "assert", "entry_point": "f",
                                      "test": "def check(candidate):\n    assert abs(candidate(1) - 2) < 1e-9\n"}}
    prog = "```python\ndef abs(x):\n    return 0\ndef f(x):\n    return 0\n```"
    r = post(url, "/v1/score", {"items": [{"completion": prog, "task": task}]})
    res = r.json()["results"][0]
    assert "shadowed_name" in res["detail"]["flags"] and res["reward"] == pytest.approx(0.2)
    r = post(url, "/v1/score", {"items": [{"completion": prog, "task": task}], "weights": {"flag_penalty": 0.5}})
    assert r.json()["results"][0]["reward"] == pytest.approx(-0.3)
    assert 'reward_server_hack_attempts_total{kind="shadowed_name"}' in httpx.get(url + "/metrics").text


def test_too_many_tests_in_one_task_are_refused_before_validation(url, server):
    cap = server.settings.max_tests_per_item
    cases = ",".join(['{"stdin": "", "stdout": "1"}'] * (cap * 50))
    task = '{"type": "code", "tests": {"kind": "stdio", "cases": [' + cases + "]}}"
    body = '{"items": [{"completion": "print(1)", "task": {"type": "math", "answer": "1"}}, {"completion": "print(1)", "task": ' + task + "}]}"
    with HealthProbe(url) as probe:
        r = raw_post(url, "/v1/score", body)
    assert r.status_code == 422, r.text[:300]
    assert r.json()["detail"][0]["field"] == "items.1.task.tests" and f"at most {cap}" in r.json()["message"]
    probe.assert_responsive()
    r = post(url, "/get_reward", {"query": ["x"], "labels": ['{"type": "code", "tests": {"kind": "stdio", "cases": [' + cases + "]}}"]})
    assert r.status_code == 422 and r.json()["detail"][0]["field"] == "labels.0.tests", r.text[:300]
