"""Backpressure (429 + Retry-After, nothing accepted is dropped), auth, the CLI, a runner
killed mid-batch, graceful shutdown. All through real HTTP against real servers."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time

import httpx
import pytest

from reward_server.client import AsyncRewardClient
from tests.server.conftest import ADD_TASK, GOOD_ADD, kind_params, start_server

SLOW_ADD = "```python\nimport time\ntime.sleep(0.3)\ndef add(a, b):\n    return a + b\n```"


# ---- auth and CLI -------------------------------------------------------------------------


def test_cli_server_auth(cli_server):
    url, tok = cli_server.url, cli_server.token
    assert httpx.get(url + "/healthz").status_code == 200
    assert httpx.get(url + "/readyz").status_code == 200
    body = {"items": [{"completion": GOOD_ADD, "task": ADD_TASK}]}
    r = httpx.post(url + "/v1/score", json=body)
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    assert httpx.post(url + "/v1/score", json=body, headers={"Authorization": "Bearer wrong"}).status_code == 401
    for path in ("/metrics", "/openapi.json"):
        assert httpx.get(url + path).status_code == 401
    assert httpx.post(url + "/run_code", json={"code": "print(1)", "language": "python"}).status_code == 401
    r = httpx.post(url + "/v1/score", json=body, headers={"Authorization": f"Bearer {tok}"}, timeout=60)
    assert r.status_code == 200 and r.json()["results"][0]["reward"] == pytest.approx(1.0)
    assert httpx.get(url + "/metrics", headers={"Authorization": f"Bearer {tok}"}).status_code == 200


async def test_burst_beyond_capacity_gets_429_and_every_accepted_request_is_answered(cli_server):
    """The CLI server runs 1 job at a time and queues 2 more; a burst of 12 must be partly
    refused with Retry-After, and every accepted request must come back complete."""
    url, headers = cli_server.url, {"Authorization": f"Bearer {cli_server.token}"}
    body = {"items": [{"completion": SLOW_ADD, "task": ADD_TASK}]}
    async with httpx.AsyncClient(headers=headers, timeout=120) as c:
        rs = await asyncio.gather(*(c.post(url + "/v1/score", json=body) for _ in range(12)))
        codes = [r.status_code for r in rs]
        assert set(codes) <= {200, 429}, codes
        assert codes.count(429) >= 1 and codes.count(200) >= 3, codes
        for r in rs:
            if r.status_code == 429:
                assert int(r.headers["retry-after"]) >= 1
            else:
                res = r.json()["results"]
                assert len(res) == 1 and res[0]["status"] == "ok" and res[0]["reward"] == pytest.approx(1.0)
        m = (await c.get(url + "/metrics")).text
        assert 'reward_server_rejected_total{reason="overloaded"}' in m
    # the client retries 429s until everything is scored
    async with AsyncRewardClient(url, token=cli_server.token, max_batch=1, max_concurrency=8) as client:
        res = await client.score([{"completion": SLOW_ADD, "task": ADD_TASK}] * 6)
    assert [r.reward for r in res] == [pytest.approx(1.0)] * 6


# ---- a runner dies mid-batch --------------------------------------------------------------


def kill_one_runner(pool) -> str:
    """SIGKILL one runner's main process (bwrap) or its container (docker), the way an OOM
    killer or an operator would."""
    handle = pool.handles()[0]
    if handle.pid:
        os.kill(handle.pid, signal.SIGKILL)
    else:
        import docker  # noqa: PLC0415

        docker.from_env().containers.get(handle.ident).kill()
    return handle.ident


@pytest.fixture(scope="module", params=kind_params())
def kill_server(request):
    s = start_server(sandbox=request.param, pool_size=2)
    yield s
    s.stop()


def test_runner_killed_mid_batch_gives_retried_or_infra_error_items(kill_server):
    url = kill_server.url
    items = [{"id": i, "completion": SLOW_ADD, "task": ADD_TASK} for i in range(8)]
    out: dict = {}

    def send():
        out["r"] = httpx.post(url + "/v1/score", json={"items": items}, timeout=180)

    th = threading.Thread(target=send)
    th.start()
    time.sleep(0.6)  # the batch is running on both runners
    kill_one_runner(kill_server.pool)
    th.join(180)
    r = out["r"]
    assert r.status_code == 200, r.text
    res = r.json()["results"]
    assert [x["id"] for x in res] == list(range(8))
    for x in res:
        # never the candidate's failure: either scored right (retried) or an infra error without a reward
        assert (x["status"] == "ok" and x["reward"] == pytest.approx(1.0)) or (
            x["status"] == "infra_error" and x["reward"] is None
        ), x
    # the pool replaced the runner and serves on
    deadline = time.monotonic() + 60
    while httpx.get(url + "/readyz").status_code != 200 and time.monotonic() < deadline:
        time.sleep(0.2)
    r = httpx.post(url + "/v1/score", json={"items": [{"completion": GOOD_ADD, "task": ADD_TASK}] * 4}, timeout=60)
    assert [x["reward"] for x in r.json()["results"]] == [pytest.approx(1.0)] * 4
    # the replacement is counted once it is up, which may be after the batch was answered
    deadline = time.monotonic() + 60
    while True:
        m = httpx.get(url + "/metrics").text
        restarts = [ln for ln in m.splitlines() if ln.startswith("reward_server_pool_runner_restarts_total")]
        if (restarts and float(restarts[0].split()[-1]) >= 1) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert restarts and float(restarts[0].split()[-1]) >= 1


# ---- graceful shutdown --------------------------------------------------------------------


@pytest.mark.parametrize("kind", kind_params())
def test_graceful_shutdown_finishes_accepted_work(kind):
    s = start_server(sandbox=kind, pool_size=1)
    items = [{"completion": SLOW_ADD, "task": ADD_TASK}] * 4
    out: dict = {}

    def send():
        out["r"] = httpx.post(s.url + "/v1/score", json={"items": items}, timeout=120)

    th = threading.Thread(target=send)
    th.start()
    deadline = time.monotonic() + 30
    while s.app.state.server.admission.admitted == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    s.stop()  # like SIGTERM: stop accepting, finish what was accepted, then close the pool
    th.join(60)
    r = out["r"]
    assert r.status_code == 200
    assert [x["reward"] for x in r.json()["results"]] == [pytest.approx(1.0)] * 4
    assert not s.thread.is_alive()


def test_cli_flags_reach_the_settings(cli_server):
    """`--time-scale` and `--max-sessions` (the judging and session settings) take effect as
    their environment variables do: /readyz reports them."""
    r = httpx.get(cli_server.url + "/readyz", headers={"Authorization": f"Bearer {cli_server.token}"}, timeout=10)
    body = r.json()
    assert body["time_scale"] == 1.5
    assert body["testlib_header"] is False
    assert body["sessions"]["capacity"] == 3, body["sessions"]
