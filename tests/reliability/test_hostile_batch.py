"""A batch of 64 honest items with one hostile item of each kind of issue 15 (request path and runner):
200, every honest reward right, every hostile item scored truthfully on its own, no runner
restarted, and /healthz answering in under 100 ms throughout. Real server, real pool."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.conftest import kind_params
from tests.reliability.conftest import make_server
from tests.server.conftest import ADD_TASK, ECHO_STDIO_TASK, GOOD_ADD, GOOD_STDIO, HALF_ADD
from tests.server.hostile import HealthProbe, honest_runner_items, hostile_items, runner_hostile_items

HONEST = [(GOOD_ADD, ADD_TASK, 1.0), (HALF_ADD, ADD_TASK, 0.6), (GOOD_STDIO, ECHO_STDIO_TASK, 1.0)]


@pytest.mark.parametrize("kind", kind_params())
def test_honest_batch_with_hostile_items_is_scored_right_and_health_stays_fast(kind):
    s = make_server(kind)
    try:
        extra = honest_runner_items()
        honest = extra + [({"id": f"h{i}", "completion": c, "task": t}, want) for i, (c, t, want) in
                          ((i, HONEST[i % len(HONEST)]) for i in range(64 - len(extra)))]
        hostile = hostile_items() + runner_hostile_items()
        batch = honest[:20] + hostile + honest[20:]
        body = json.dumps({"items": [it for it, _ in batch]})  # lone surrogates travel as \\udXXX escapes
        restarts_before = s.pool.stats().restarts
        with HealthProbe(s.url) as probe:
            r = httpx.post(s.url + "/v1/score", content=body.encode("ascii"), timeout=300,
                           headers={"content-type": "application/json"})
        assert r.status_code == 200, r.text[:500]
        res = r.json()["results"]
        assert len(res) == len(batch)
        for (item, want), got in zip(batch, res, strict=True):
            assert got["status"] == "ok", (item["id"], got)
            assert got["reward"] == pytest.approx(want), (item["id"], got)
        assert s.pool.stats().restarts == restarts_before
        assert not probe.failures, probe.failures
        assert len(probe.times) >= 3 and probe.worst < 0.1, probe.worst
    finally:
        s.stop()
