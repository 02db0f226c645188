"""Bounded load through real HTTP: many concurrent clients posting mixed batches (passing,
failing, hanging, hostile, math). Nothing lost, no 5xx, 429 only beyond the configured
capacity, and every reward equal to the item's reward when scored alone."""

from __future__ import annotations

import asyncio

from tests.reliability.conftest import BATCH, CLIENTS, LIMIT, REQUESTS, lt


def test_solo_scores_cover_every_class(load_server):
    solo = load_server.solo
    assert set(solo) == set(lt.CATALOGUE)
    assert all(st == "ok" and r is not None for st, r in solo.values()), solo
    assert solo["pass_add"][1] == 1.0 and solo["math_right"][1] == 1.0 and solo["math_wrong"][1] == 0.0
    for n in ("hang_loop", "hostile_forkbomb", "hostile_membomb", "hostile_flood", "hostile_exit"):
        assert solo[n][1] < 1.0, (n, solo[n])


def test_load_within_capacity_loses_nothing_and_scores_as_alone(load_server):
    assert CLIENTS * BATCH <= LIMIT
    batches = lt.make_batches(REQUESTS, BATCH, seed=11)
    rep = asyncio.run(lt.run_load(load_server.url, batches, CLIENTS))
    summary = rep.summary()
    print(summary)
    assert lt.check(rep, load_server.solo, allow_429=False) == []
    assert summary["codes"] == {"200": REQUESTS}
    assert rep.items_answered == REQUESTS * BATCH
    # every class went through
    assert {k.split(":")[0] for k in summary["item_statuses"]} == set(lt.CLASSES)


def test_burst_beyond_capacity_gets_429_and_accepted_requests_are_answered(load_server):
    n = 3 * LIMIT // BATCH  # three times what the server admits, all at once
    rep = asyncio.run(lt.run_burst(load_server.url, lt.make_batches(n, BATCH, seed=12)))
    print(rep.summary())
    codes = rep.codes
    assert lt.check(rep, load_server.solo, allow_429=True) == []
    assert set(codes) <= {"200", "429"}, codes
    assert codes["429"] >= 1 and codes["200"] >= LIMIT // BATCH, codes
    # the server is idle again afterwards: admission fully released
    assert load_server.app.state.server.admission.admitted == 0
