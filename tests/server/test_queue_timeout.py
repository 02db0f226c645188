"""Queue time apart from run time, through HTTP on both hosts: `detail.queue_s` beside `wall_s`,
and a request's `queue_timeout_s` answering `queue_timeout` (reward null, never run, never a
candidate's time-limit failure), counted in /metrics and mapped by every integration."""

from __future__ import annotations

import httpx
import pytest

from tests.conftest import kind_params

# one job slot: a batch of slow items queues behind the first
pytestmark = pytest.mark.parametrize("kind", kind_params())

SLEEP_S = 0.8
SLOW = f"```python\nimport time\ntime.sleep({SLEEP_S})\nprint(int(input()) * 2)\n```"
TASK = {"type": "code", "timeout_s": 2, "tests": {"kind": "stdio", "cases": [{"stdin": "21\n", "stdout": "42\n"}]}}


def _server(shared_servers, kind: str):
    return shared_servers.get(sandbox=kind, pool_size=1, max_inflight_jobs=1)


def _score(url: str, n: int, **extra) -> list[dict]:
    body = {"items": [{"id": i, "completion": SLOW, "task": TASK} for i in range(n)], **extra}
    r = httpx.post(url + "/v1/score", json=body, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()["results"]


def test_queue_s_is_apart_from_wall_s(shared_servers, kind):
    srv = _server(shared_servers, kind)
    results = _score(srv.url, 3)
    assert [r["status"] for r in results] == ["ok"] * 3
    assert [r["reward"] for r in results] == [1.0] * 3
    queued = sorted(r["detail"]["queue_s"] for r in results)
    # one ran at once, the next waited for it, the last for both: the wait is not the run
    assert queued[0] < SLEEP_S / 2
    assert queued[2] >= 1.5 * SLEEP_S
    for r in results:
        assert r["detail"]["wall_s"] >= SLEEP_S * 0.9
        assert r["detail"]["wall_s"] < r["detail"]["queue_s"] + 2 * SLEEP_S + 2


def test_past_queue_timeout_is_its_own_status(shared_servers, kind):
    srv = _server(shared_servers, kind)
    before = _timeouts(srv.url)
    results = _score(srv.url, 3, queue_timeout_s=SLEEP_S / 2)
    statuses = sorted(r["status"] for r in results)
    assert statuses == ["ok", "queue_timeout", "queue_timeout"], results
    for r in results:
        if r["status"] == "ok":
            assert r["reward"] == 1.0
            continue
        assert r["reward"] is None  # never a candidate's 0, never a time-limit verdict
        assert "tests" not in r["detail"]
        assert r["detail"]["queue_s"] >= SLEEP_S / 2
        assert "queue_timeout_s" in r["detail"]["error"]
    assert _timeouts(srv.url) - before == 2


def test_queue_timeout_must_be_positive(shared_servers, kind):
    srv = _server(shared_servers, kind)
    for bad in (0, -1, "soon"):
        r = httpx.post(srv.url + "/v1/score", json={"items": [{"completion": SLOW, "task": TASK}], "queue_timeout_s": bad},
                       timeout=30)
        assert r.status_code == 422, r.text
        assert any(e["loc"][-1] == "queue_timeout_s" for e in r.json()["detail"]), r.text


def test_integrations_map_queue_timeout(shared_servers, kind):
    """verl's dict, OpenRLHF's extra_logs and TRL's None each say the item was not graded."""
    from reward_server.integrations.trl import make_trl_reward_func
    from reward_server.integrations.verl import compute_score_batch

    srv = _server(shared_servers, kind)
    n = 3
    out = compute_score_batch(["x"] * n, [SLOW] * n, [TASK] * n, server_url=srv.url, queue_timeout_s=SLEEP_S / 2)
    assert sorted(d["queue_timeout"] for d in out) == [0, 1, 1]
    assert all(d["score"] == 0.0 and d["infra_error"] == 0 for d in out if d["queue_timeout"])

    fn = make_trl_reward_func(srv.url, queue_timeout_s=SLEEP_S / 2)
    rewards = fn(prompts=["p"] * n, completions=[SLOW] * n, task=[TASK] * n)
    assert sorted(rewards, key=lambda r: r is None) == [1.0, None, None]

    import json

    body = {"query": [SLOW] * n, "labels": [json.dumps(TASK)] * n, "queue_timeout_s": SLEEP_S / 2}
    r = httpx.post(srv.url + "/get_reward", json=body, timeout=60)
    assert r.status_code == 200, r.text
    logs = r.json()["extra_logs"]
    assert sorted(logs["queue_timeout"]) == [0.0, 1.0, 1.0]
    assert sorted(r.json()["rewards"]) == [0.0, 0.0, 1.0]


def _timeouts(url: str) -> float:
    text = httpx.get(url + "/metrics", timeout=10).text
    total = 0.0
    for line in text.splitlines():
        if line.startswith('reward_server_queue_timeouts_total{kind="code"}'):
            total += float(line.split()[-1])
    return total
