"""/v1/score and the operational routes, through real HTTP against a real server."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from reward_server.client import AsyncRewardClient, RewardClient, RewardServerError
from tests.server.conftest import (
    ADD_TASK,
    CALL_TASK,
    ECHO_STDIO_TASK,
    GOOD_ADD,
    GOOD_STDIO,
    HALF_ADD,
    HUMANEVAL_TASK,
    SYNTAX_ERR,
)


def post(url: str, body, **kw) -> httpx.Response:
    return httpx.post(url + "/v1/score", json=body, timeout=120, **kw)


def test_scores_code_in_item_order(url):
    items = [
        {"id": "good", "completion": GOOD_ADD, "task": ADD_TASK},
        {"id": "half", "completion": HALF_ADD, "task": ADD_TASK},
        {"id": "syntax", "completion": SYNTAX_ERR, "task": ADD_TASK},
        {"id": 7, "completion": GOOD_STDIO, "task": ECHO_STDIO_TASK},
        {"completion": "def sq(x):\n    return x * x\n", "task": HUMANEVAL_TASK},
        {"id": "call", "completion": "```py\ndef twice(x):\n    return x * 2\n```", "task": CALL_TASK},
        {"id": "empty", "completion": "I don't know.", "task": ADD_TASK},
    ]
    r = post(url, {"items": items})
    assert r.status_code == 200, r.text
    assert r.headers["x-request-id"]
    res = r.json()["results"]
    assert [x["id"] for x in res] == ["good", "half", "syntax", 7, None, "call", "empty"]
    good, half, syn, stdio, he, call, empty = res
    assert good["status"] == "ok" and good["reward"] == pytest.approx(1.0)
    d = good["detail"]
    assert (d["syntax_ok"], d["runs"], d["passed"], d["total"]) == (True, True, 4, 4)
    assert d["extract_mode"] == "last_python_fence" and len(d["tests"]) == 4
    assert all(t["status"] == "passed" for t in d["tests"])
    assert half["detail"]["passed"] == 2 and half["reward"] == pytest.approx(0.1 + 0.1 + 0.8 * 0.5)
    assert syn["detail"]["syntax_ok"] is False and syn["reward"] == pytest.approx(0.0)
    assert stdio["reward"] == pytest.approx(1.0), stdio
    assert he["reward"] == pytest.approx(1.0) and he["detail"]["total"] == 3 and he["detail"]["extract_mode"] == "raw"
    assert call["reward"] == pytest.approx(1.0), call
    # "I don't know." is not a program that earns syntax credit
    assert empty["reward"] < 0.2


def test_weights_and_extract_options(url):
    items = [{"completion": HALF_ADD, "task": ADD_TASK}]
    r = post(url, {"items": items, "weights": {"syntax": 0, "runtime": 0, "tests": 1}})
    assert r.json()["results"][0]["reward"] == pytest.approx(0.5)
    # raw mode runs the whole text (fences included): a syntax error
    r = post(url, {"items": items, "extract": {"mode": "raw"}})
    assert r.json()["results"][0]["detail"]["syntax_ok"] is False


def test_timeout_is_the_candidates_failure_not_infra(url):
    task = {**ADD_TASK, "timeout_s": 0.5, "stop_on_timeout": False}
    prog = "```python\ndef add(a, b):\n    if a == 2:\n        while True: pass\n    return a + b\n```"
    r = post(url, {"items": [{"completion": prog, "task": task}]})
    res = r.json()["results"][0]
    assert res["status"] == "ok"
    assert res["detail"]["passed"] == 3
    assert sorted(t["status"] for t in res["detail"]["tests"]).count("timeout") == 1


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "items"),
        ({"items": [{"task": ADD_TASK}]}, "items.0.completion"),
        ({"items": [{"completion": "x"}]}, "items.0.task"),
        ({"items": [{"completion": "x", "task": {"type": "cobol"}}]}, "items.0.task"),
        ({"items": [{"completion": "x", "task": {"type": "code", "tests": {"kind": "assert", "test": "def check(c): pass"}}}]},
         "items.0.task.tests.entry_point"),
        ({"items": [{"completion": "x", "task": {"type": "code", "tests": {"kind": "stdio", "cases": []}}}]},
         "items.0.task.tests.cases"),
        ({"items": [{"completion": "x", "task": {"type": "code", "tests": {"kind": "fuzz"}}}]}, "items.0.task.tests"),
        ({"items": [{"completion": "x", "task": {**ADD_TASK, "language": "cobol"}}]}, "items.0.task.language"),
        ({"items": [{"completion": "x", "task": {**ADD_TASK, "timeout_s": 10_000}}]}, "items.0.task.timeout_s"),
        ({"items": [{"completion": "x", "task": {**ADD_TASK, "memory_mb": 10**6}}]}, "items.0.task.memory_mb"),
        ({"items": [{"completion": 5, "task": ADD_TASK}]}, "items.0.completion"),
        ({"items": [], "weights": {"syntax": -1}}, "weights.syntax"),
        ({"items": [{"completion": "x", "task": {"type": "math"}}]}, "items.0.task.answer"),
        ({"items": [{"completion": "x", "task": ADD_TASK, "extra": 1}]}, "items.0.extra"),
    ],
)
def test_malformed_requests_get_422_naming_the_field(url, body, field):
    r = post(url, body)
    assert r.status_code == 422, r.text
    j = r.json()
    assert field in [d["field"] for d in j["detail"]], j
    assert field in j["message"]


def test_invalid_json_is_422_not_500(url):
    r = httpx.post(url + "/v1/score", content=b'{"items": [', headers={"content-type": "application/json"})
    assert r.status_code == 422
    r = httpx.post(url + "/v1/score", content=b"\xff\xfe", headers={"content-type": "application/json"})
    assert r.status_code == 422


def test_oversized_completion_is_422(url, server):
    big = "x = 1\n" * (server.settings.max_code_bytes // 6 + 10)
    r = post(url, {"items": [{"completion": big, "task": ADD_TASK}]})
    assert r.status_code == 422 and r.json()["detail"][0]["field"] == "items.0.completion"


def test_too_many_items_is_422(url, server):
    n = server.settings.max_items_per_request + 1
    r = post(url, {"items": [{"completion": "", "task": ADD_TASK}] * n})
    assert r.status_code == 422 and r.json()["detail"][0]["field"] == "items"


def test_body_over_limit_is_413_by_header_and_by_stream(url, server):
    limit = server.settings.max_body_bytes
    big = json.dumps({"items": [{"completion": "#" * (limit + 10), "task": ADD_TASK}]}).encode()
    r = httpx.post(url + "/v1/score", content=big, headers={"content-type": "application/json"})
    assert r.status_code == 413
    assert "request_id" in r.json()

    def chunks():  # no Content-Length: chunked transfer, counted as it streams
        for i in range(0, len(big), 1 << 20):
            yield big[i:i + (1 << 20)]

    r = httpx.post(url + "/v1/score", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413


def test_health_ready_metrics_and_request_id(url):
    assert httpx.get(url + "/healthz").json() == {"status": "ok"}
    r = httpx.get(url + "/readyz")
    assert r.status_code == 200 and r.json()["ready"] is True and r.json()["pool"]["live"] >= 1
    r = post(url, {"items": [{"completion": GOOD_ADD, "task": ADD_TASK}]}, headers={"X-Request-ID": "trace-abc"})
    assert r.headers["x-request-id"] == "trace-abc"
    m = httpx.get(url + "/metrics").text
    for name in (
        "reward_server_requests_total", "reward_server_request_seconds_bucket", "reward_server_items_total",
        "reward_server_queue_depth", "reward_server_pool_size", "reward_server_pool_runner_restarts_total",
        "reward_server_reward_bucket",
    ):
        assert name in m, name
    assert 'reward_server_items_total{kind="code",status="ok"}' in m


def test_openapi_has_examples(url):
    spec = httpx.get(url + "/openapi.json").json()
    assert "/v1/score" in spec["paths"] and "/run_code" in spec["paths"] and "/get_reward" in spec["paths"]
    assert spec["components"]["schemas"]["ScoreRequest"]["examples"]


def test_sync_client_splits_batches(url):
    items = [{"id": i, "completion": GOOD_ADD if i % 2 else HALF_ADD, "task": ADD_TASK} for i in range(10)]
    with RewardClient(url, max_batch=3) as c:
        res = c.score(items)
    assert [r.id for r in res] == list(range(10))
    assert [r.reward for r in res] == [pytest.approx(0.6) if i % 2 == 0 else pytest.approx(1.0) for i in range(10)]


async def test_async_client_spreads_over_urls_and_survives_a_dead_one(url):
    # one URL has nothing listening: the client retries those chunks on the live one
    async with AsyncRewardClient([url, "http://127.0.0.1:9"], max_batch=2, backoff_base=0.05) as c:
        res = await c.score([{"completion": GOOD_ADD, "task": ADD_TASK}] * 8)
    assert [r.reward for r in res] == [pytest.approx(1.0)] * 8


async def test_async_client_raises_on_422(url):
    async with AsyncRewardClient(url) as c:
        with pytest.raises(RewardServerError) as ei:
            await c.score([{"completion": "x", "task": {"type": "code"}}])
    assert ei.value.status_code == 422 and "items.0.task.tests" in str(ei.value)


async def test_concurrent_batches_all_answered(url):
    async with AsyncRewardClient(url, max_batch=4) as c:
        outs = await asyncio.gather(*(c.score([{"completion": GOOD_STDIO, "task": ECHO_STDIO_TASK}] * 6) for _ in range(4)))
    assert all(r.reward == pytest.approx(1.0) for out in outs for r in out)
