"""Graceful shutdown tells the truth (issue 16 item 5): work accepted and still running when
the grace runs out is answered 503 (retry elsewhere), never a bare 500, and the shutdown log
counts it as cancelled instead of claiming `drained`. Real server, real pool."""

from __future__ import annotations

import logging
import threading
import time

import httpx
import pytest

from tests.server.conftest import kind_params, start_server

SLEEPER = "import time\ntime.sleep(4)\nprint('late')"


@pytest.mark.parametrize("kind", kind_params())
def test_shutdown_past_its_grace_answers_503_and_reports_cancelled(kind, caplog):
    caplog.set_level(logging.WARNING, logger="reward_server")
    s = start_server(sandbox=kind, pool_size=1, max_inflight_jobs=1, graceful_s=1)
    out: list[httpx.Response] = []

    def send() -> None:
        out.append(httpx.post(s.url + "/run_code", json={"code": SLEEPER, "run_timeout": 10}, timeout=60))

    threads = [threading.Thread(target=send) for _ in range(3)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 30
    while s.app.state.server.admission.admitted < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    s.stop()
    for t in threads:
        t.join(60)
    assert [r.status_code for r in out] == [503] * 3, [(r.status_code, r.text) for r in out]
    assert all(r.headers["retry-after"] == "1" and "shut down" in r.json()["detail"] for r in out)
    adm = s.app.state.server.admission
    assert adm.cancelled == 3 and adm.admitted == 0
    recs = [r for r in caplog.records if r.getMessage() == "shutting down"]
    assert recs and recs[-1].drained is False and recs[-1].cancelled == 3, recs


@pytest.mark.parametrize("kind", kind_params())
def test_queued_jobs_of_a_client_that_left_never_start(kind):
    """verl's client gives up after `2*timeout + 10` s; what it queued must not hold up others."""
    s = start_server(sandbox=kind, pool_size=1, max_inflight_jobs=1)
    try:
        jobs_before = s.pool.stats().jobs_total
        hog = threading.Thread(target=lambda: httpx.post(
            s.url + "/run_code", json={"code": "import time\ntime.sleep(2)"}, timeout=60))
        hog.start()
        adm = s.app.state.server.admission
        deadline = time.monotonic() + 30
        while adm.running < 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        for _ in range(3):  # each queues behind the hog, then its client gives up
            with pytest.raises(httpx.ReadTimeout):
                httpx.post(s.url + "/run_code", json={"code": "print('never')"}, timeout=0.3)
        items = [{"completion": "```python\nprint(1)\n```", "task": {"type": "code", "tests": {
            "kind": "stdio", "cases": [{"stdin": "", "stdout": "1\n"}] }}}] * 4
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(s.url + "/v1/score", json={"items": items}, timeout=0.3)
        hog.join(60)
        deadline = time.monotonic() + 10
        while adm.admitted and time.monotonic() < deadline:
            time.sleep(0.02)
        assert adm.cancelled == 7 and adm.admitted == 0
        assert s.pool.stats().jobs_total == jobs_before + 1  # the hog; none of the 7 ran
        r = httpx.post(s.url + "/run_code", json={"code": "print('after')"}, timeout=60)
        assert r.json()["run_result"]["stdout"] == "after\n"
    finally:
        s.stop()
