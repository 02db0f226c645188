"""Math items through /v1/score, /get_reward and the adapters (the math grader's own
behaviour is tested in tests/math; here: wiring, options, 422s, mixed batches)."""

from __future__ import annotations

import json

import httpx
import pytest

from reward_server.compat import verl as verl_compat
from reward_server.compat.trl import make_trl_reward_func
from tests.server.conftest import ADD_TASK, GOOD_ADD


def score(url, items):
    r = httpx.post(url + "/v1/score", json={"items": items}, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()["results"]


def test_math_items_and_detail(url):
    res = score(url, [
        {"id": "a", "completion": "so x = \\boxed{\\frac{1}{2}}", "task": {"type": "math", "answer": "0.5"}},
        {"id": "b", "completion": "The answer is \\boxed{3}", "task": {"type": "math", "answer": "4"}},
        {"id": "c", "completion": GOOD_ADD, "task": ADD_TASK},
    ])
    a, b, c = res
    assert a["status"] == "ok" and a["reward"] == pytest.approx(1.0)
    d = a["detail"]
    assert d["kind"] == "math"
    for key in ("reward", "status", "extracted", "parsed_pred", "parsed_ref", "reason", "time_s"):
        assert key in d, key
    assert b["reward"] == pytest.approx(0.0)
    assert c["reward"] == pytest.approx(1.0) and c["detail"]["kind"] == "code"


def test_math_options_per_task(url):
    flexible = {"type": "math", "answer": "50\\%"}
    strict = {"type": "math", "answer": "50\\%", "percent": "strict"}
    res = score(url, [{"completion": "\\boxed{50}", "task": flexible}, {"completion": "\\boxed{50}", "task": strict}])
    assert res[0]["reward"] == pytest.approx(1.0)
    assert res[1]["reward"] == pytest.approx(0.0)


def test_round_two_notations_and_options_over_http(url):
    gsm = "He buys 3 packs: 3*12 = <<3*12=36>>36 eggs.\nHe uses 8: 36-8 = <<36-8=28>>28.\n#### 28"
    rounded = {"type": "math", "answer": "3.14", "rounded_reference": "precision"}
    res = score(url, [
        {"completion": "\\boxed{28}", "task": {"type": "math", "answer": gsm}},
        {"completion": "\\boxed{\\pi}", "task": rounded},
        {"completion": "\\boxed{\\pi}", "task": {"type": "math", "answer": "3.14"}},
        {"completion": "The roots are -1 and 4.", "task": {"type": "math", "answer": "4, -1"}},
        {"completion": "\\boxed{x < -2 \\text{ or } x > 2}", "task": {"type": "math", "answer": "|x| > 2"}},
    ])
    assert [r["reward"] for r in res] == [pytest.approx(v) for v in (1.0, 1.0, 0.0, 1.0, 1.0)]
    assert res[1]["detail"]["reason"] == "rounds to the reference"


def test_interval_form_over_http(url):
    union, single = "(-\\infty,-2)\\cup(2,\\infty)", "x \\in [-2, 7]"
    res = score(url, [
        {"completion": "\\boxed{|x| > 2}", "task": {"type": "math", "answer": union}},
        {"completion": "\\boxed{|x| > 2}", "task": {"type": "math", "answer": union, "interval_form": "required"}},
        {"completion": "\\boxed{-2 \\le x \\le 7}", "task": {"type": "math", "answer": single}},
        {"completion": "\\boxed{-2 \\le x \\le 7}", "task": {"type": "math", "answer": single, "interval_form": "either"}},
    ])
    assert [r["reward"] for r in res] == [pytest.approx(v) for v in (1.0, 0.0, 0.0, 1.0)]


@pytest.mark.parametrize(("task", "field"), [
    ({"type": "math", "answer": "1", "rounded_reference": "loose"}, "items.0.task.rounded_reference"),
    ({"type": "math", "answer": "1", "timeout_s": 10_000}, "items.0.task.timeout_s"),
    ({"type": "math", "answer": "1", "interval_form": "loose"}, "items.0.task.interval_form"),
    ({"type": "math", "answer": "1", "no_such_option": True}, "items.0.task.no_such_option"),
    ({"type": "math", "answer": ["1"]}, "items.0.task.answer"),
])
def test_bad_math_options_are_422(url, task, field):
    r = httpx.post(url + "/v1/score", json={"items": [{"completion": "1", "task": task}]})
    assert r.status_code == 422, r.text
    assert field in [d["field"] for d in r.json()["detail"]]


def test_math_through_openrlhf_trl_and_verl(url):
    body = {"query": ["Q: 6*7?\nA: \\boxed{42}", "Q: 6*7?\nA: 41"], "prompts": ["Q: 6*7?\nA: "] * 2, "labels": ["42", json.dumps({"type": "math", "answer": "42"})]}
    j = httpx.post(url + "/get_reward", json=body, timeout=60).json()
    assert j["rewards"] == [pytest.approx(1.0), pytest.approx(0.0)]

    f = make_trl_reward_func(url, task_column="answer")
    assert f(prompts=["q"] * 2, completions=["\\boxed{2}", "\\boxed{3}"], answer=["2", "2"]) == [1.0, 0.0]

    d = verl_compat.compute_score("openai/gsm8k", "#### 18\nThe answer is 18", "18", server_url=url)
    assert d["score"] == pytest.approx(1.0) and d["acc"] == 1.0 and set(d) == {"score", "acc", "passed", "total", "infra_error", "task_error", "queue_timeout"}
