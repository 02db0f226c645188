"""Candidate -> verdict: the candidate's changes to its arguments never reach the test's own objects
unless the task declares the function in-place (`in_place` on the assert tests), through HTTP on a
live server on each host.

A test like `xs = [3, 1, 2]; assert f(xs) == sorted(xs)` must judge f against the `xs` the test
made: a candidate that rewrites its argument to match its own wrong answer (`a[:] = [42]; return
[42]`) fails, whatever the container (list, dict, set, nested, passed twice, held by a module-level
name, passed by keyword) and whatever the path (MBPP asserts, a split or whole HumanEval check()).
Honest programs score as before: a pure one everywhere, an in-place one where the task says so."""

from __future__ import annotations

import httpx
import pytest

from tests.conftest import kind_params


@pytest.fixture(scope="module", params=kind_params())
def url(request, shared_servers):
    """The default server (shared: tests/shared.py); the tests only score on it."""
    return shared_servers.get(sandbox=request.param).url


def reward(passed: int, total: int) -> float:
    return 0.1 + 0.1 + 0.8 * passed / total


def asserts(*lines: str, **extra) -> dict:
    return {"type": "code", "timeout_s": 10, "tests": {"kind": "assert", "asserts": list(lines), **extra}}


def check(test: str, entry: str, **extra) -> dict:
    return {"type": "code", "timeout_s": 10, "tests": {"kind": "assert", "test": test, "entry_point": entry, **extra}}


def score(url: str, items: list[tuple[str, str, dict, tuple[int, int]]]) -> None:
    """One batch; each item's (passed, total) and reward must be the careful judge's."""
    body = {"items": [{"id": i, "completion": f"```python\n{prog}```\n", "task": task} for i, prog, task, _ in items]}
    r = httpx.post(url + "/v1/score", json=body, timeout=300)
    assert r.status_code == 200, r.text
    got = {res["id"]: res for res in r.json()["results"]}
    wrong = []
    for i, _prog, _task, (passed, total) in items:
        res = got[i]
        d = res["detail"]
        if (res["status"], d.get("passed"), d.get("total")) != ("ok", passed, total) or \
                res["reward"] != pytest.approx(reward(passed, total)):
            wrong.append((i, (passed, total), res["reward"], d.get("passed"), d.get("total"),
                          [t["message"] for t in d.get("tests", [])]))
    assert not wrong, wrong


# ---- the attacks: each rewrites what the test reads after the call --------------------------------

SORTED = "xs = [3, 1, 2]\nassert f(xs) == sorted(xs)"
LIST_ATTACK = "def f(a):\n    a[:] = [42]\n    return [42]\n"
DICT_ATTACK = "def double(d):\n    d.clear()\n    d.update({'z': 0})\n    return {'z': 0}\n"
DICT_TEST = "d = {'a': 1, 'b': 2}\nassert double(d) == {k: 2 * v for k, v in d.items()}"
LEN_ATTACK = "def count(w):\n    w.extend(['pad'] * (7 - len(w)))\n    return 7\n"
LEN_TEST = "w = ['a', 'b', 'c']\nassert count(w) == len(w)"
SET_ATTACK = "def total(s):\n    s.clear()\n    return 0\n"
SET_TEST = "s = {1, 2, 3}\nassert total(s) == sum(s)"
NESTED_ATTACK = "def flat(m):\n    for row in m:\n        row.clear()\n    return []\n"
NESTED_TEST = "m = [[1, 2], [3, 4]]\nassert flat(m) == [x for row in m for x in row]"
KWARGS_ATTACK = "def f(a=None):\n    a[:] = [42]\n    return [42]\n"
KWARGS_TEST = "xs = [3, 1, 2]\nassert f(a=xs) == sorted(xs)"
TWICE_ATTACK = "def merge(a, b):\n    a.clear()\n    b.clear()\n    return []\n"
TWICE_TEST = "a = [2, 1]\nassert merge(a, a) == sorted(a + a)"
# a module-level list the setup makes, shared by the job's tests
MODULE_SETUP = "DATA = [3, 1, 2]"
MODULE_ATTACK = "def f(a):\n    a.clear()\n    return []\n"
# the candidate's process forges the reply itself (it runs beside our call loop): a change the
# verdict side did not ask for is never taken, whoever says so
FORGED = ("import sys\n_g = sys._getframe(1).f_globals\n_real, _codec = _g['_call'], _g['codec']\n"
          "def _forged(ns, msg):\n    reply = _real(ns, msg)\n"
          "    reply['args_after'] = _codec.encode([[42]])\n    reply['kwargs_after'] = _codec.encode({})\n"
          "    return reply\n_g['_call'] = _forged\ndef f(a):\n    return [42]\n")
CHECK_SPLIT = ("def check(candidate):\n    xs = [3, 1, 2]\n    ys = [9, 8]\n    assert candidate(xs) == sorted(xs)\n"
               "    assert candidate(ys) == sorted(ys)\n")
CHECK_WHOLE = ("CASES = [[3, 1, 2], [9, 8]]\n\ndef check(candidate):\n    for c in CASES:\n"
               "        assert candidate(c) == sorted(c)\n")


def attack_items() -> list[tuple[str, str, dict, tuple[int, int]]]:
    return [
        ("list", LIST_ATTACK, asserts(SORTED), (0, 1)),
        ("dict", DICT_ATTACK, asserts(DICT_TEST), (0, 1)),
        ("len", LEN_ATTACK, asserts(LEN_TEST), (0, 1)),
        ("set", SET_ATTACK, asserts(SET_TEST), (0, 1)),
        ("nested", NESTED_ATTACK, asserts(NESTED_TEST), (0, 1)),
        ("kwargs", KWARGS_ATTACK, asserts(KWARGS_TEST), (0, 1)),
        ("twice", TWICE_ATTACK, asserts(TWICE_TEST), (0, 1)),
        # the first test passes (any list is not None) and empties DATA; the second reads DATA
        ("module", MODULE_ATTACK, asserts("assert f(DATA) is not None", "assert f(DATA) == sorted(DATA)",
                                          setup=MODULE_SETUP), (1, 2)),
        ("forged", FORGED, asserts(SORTED), (0, 1)),
        ("check-split", LIST_ATTACK, check(CHECK_SPLIT, "f"), (0, 2)),
        ("check-whole", LIST_ATTACK, check(CHECK_WHOLE, "f"), (0, 1)),
        ("check-unsplit", LIST_ATTACK, check(CHECK_SPLIT, "f", split_asserts=False), (0, 1)),
    ]


def test_candidate_changes_to_arguments_do_not_reach_the_tests(url):
    score(url, attack_items())


# ---- honest programs ----------------------------------------------------------------------------

PURE = {
    "list": "def f(a):\n    return sorted(a)\n",
    "dict": "def double(d):\n    return {k: 2 * v for k, v in d.items()}\n",
    "len": "def count(w):\n    return len(w)\n",
    "set": "def total(s):\n    return sum(s)\n",
    "nested": "def flat(m):\n    return [x for row in m for x in row]\n",
    "kwargs": "def f(a=None):\n    return sorted(a)\n",
    "twice": "def merge(a, b):\n    return sorted(a + b)\n",
    "module": "def f(a):\n    return sorted(a)\n",
    "forged": "def f(a):\n    return sorted(a)\n",
    "check-split": "def f(a):\n    return sorted(a)\n",
    "check-whole": "def f(a):\n    return sorted(a)\n",
    "check-unsplit": "def f(a):\n    return sorted(a)\n",
}


def test_honest_pure_programs_still_pass(url):
    items = []
    for i, _prog, task, (_passed, total) in attack_items():
        items.append((i, PURE[i], task, (total, total)))
    # a pure program that leaves its argument alone, a test that checks it did
    items.append(("untouched", "def f(a):\n    return sorted(a)\n",
                  asserts("xs = [3, 1, 2]\nassert f(xs) == [1, 2, 3] and xs == [3, 1, 2]"), (1, 1)))
    score(url, items)


INPLACE = ("def sort_in_place(xs):\n    xs.sort()\ndef push(x, xs, d):\n    xs.append(x)\n    d[x] = 1\n"
           "def nest(xs):\n    xs[0].append(9)\ndef add(s, x):\n    s.add(x)\ndef fill(xs=None, d=None):\n"
           "    xs.append(1)\n    d['k'] = 2\n")
INPLACE_TESTS = [
    "a = [3, 1, 2]\nsort_in_place(a)\nassert a == [1, 2, 3]",
    "a, d = [], {}\npush(7, a, d)\nassert a == [7] and d == {7: 1}",
    "a = [[1], [2]]\nnest(a)\nassert a == [[1, 9], [2]]",
    "s = {1}\nadd(s, 2)\nassert s == {1, 2}",
    "a, d = [], {}\nfill(xs=a, d=d)\nassert a == [1] and d == {'k': 2}",
]
INPLACE_CHECK = ("def check(candidate):\n    a = [3, 1, 2]\n    b = [2, 1]\n    r = candidate(a)\n"
                 "    s = candidate(b)\n    assert a == [1, 2, 3]\n    assert b == [1, 2]\n")  # split: two tests


def test_declared_in_place_tasks_see_the_changes(url):
    n = len(INPLACE_TESTS)
    score(url, [
        ("inplace-list", INPLACE, asserts(*INPLACE_TESTS, in_place=True), (n, n)),
        ("inplace-check", "def sort_in_place(xs):\n    xs.sort()\n",
         check(INPLACE_CHECK, "sort_in_place", in_place=True), (2, 2)),
        # the same tasks undeclared: the tests see what they passed in, so nothing changed
        ("undeclared-list", INPLACE, asserts(*INPLACE_TESTS), (0, n)),
        ("undeclared-check", "def sort_in_place(xs):\n    xs.sort()\n", check(INPLACE_CHECK, "sort_in_place"), (0, 2)),
    ])


def test_in_place_is_a_field_of_assert_tests_only(url):
    """A call case never reads its arguments again, so `in_place` there is refused by name."""
    task = {"type": "code", "tests": {"kind": "call", "fn_name": "f", "in_place": True,
                                      "cases": [{"args": [[1]], "expected": [1]}]}}
    r = httpx.post(url + "/v1/score", json={"items": [{"completion": "def f(a):\n    return a\n", "task": task}]},
                   timeout=60)
    assert r.status_code == 422 and "in_place" in r.text, r.text
