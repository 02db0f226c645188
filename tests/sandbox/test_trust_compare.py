"""Candidate -> verdict through the numbers it prints: a tolerant comparison is exact where the
data is exact, through HTTP on a live server on each host, and the matcher's rules one by one.

With `float_tolerance` set on a stdio task, an answer used to be read as a float token by token:
`n*n + 1` passed for a 24-digit `n*n` even at tolerance 0, an answer off by 1000 passed at 2e9
with 1e-6 where the expected answer was an integer, and `1_000`, other scripts' digits or a
non-ASCII blank passed for `1000`, `123` and `1 2`. Now an integer expected token needs exactly
its value, a tolerance applies only where the expected token is a decimal, and a token outside
the strict grammar (sandbox/runner/compare.py) is text. The `call` tests' int answers against an
expected float are measured exactly too (sandbox/runner/codec.py). Honest programs score as before.
"""

from __future__ import annotations

import time

import httpx
import pytest

from sandbox.runner import codec
from sandbox.runner.compare import StdoutMatcher, stdout_matches
from tests.conftest import kind_params

N2 = str(10**23 + 7)  # a 24-digit answer: past a float's 53 bits


@pytest.fixture(scope="module", params=kind_params())
def url(request, shared_servers):
    """The default server (shared: tests/shared.py); the tests only score on it."""
    return shared_servers.get(sandbox=request.param).url


def stdio(expected: str, tol: float | None) -> dict:
    tests = {"kind": "stdio", "cases": [{"stdin": "", "stdout": expected}]}
    if tol is not None:
        tests["float_tolerance"] = tol
    return {"type": "code", "timeout_s": 10, "tests": tests}


def printing(text: str) -> str:
    return f"import sys\nsys.stdout.write({text!r})\n"


# (name, program, task, passes?): each attack must fail its one test, each honest one pass it
ATTACKS = [
    ("n*n+1 at tolerance 0", printing(str(int(N2) + 1) + "\n"), stdio(N2 + "\n", 0.0)),
    ("n*n+1 at 1e-6", printing(str(int(N2) + 1) + "\n"), stdio(N2 + "\n", 1e-6)),
    ("off by 1000 at 2e9", printing("2000001000\n"), stdio("2000000000\n", 1e-6)),
    ("1e24 for an integer", printing("1e24\n"), stdio("1000000000000000000000001\n", 1e-6)),
    ("underscores", printing("1_000\n"), stdio("1000\n", 0.5)),
    ("arabic-indic digits", printing("\u0661\u0662\u0663\n"), stdio("123\n", 0.5)),
    ("fullwidth digits", printing("\uff14\uff12\n"), stdio("42\n", 1e-9)),
    ("em space between tokens", printing("1\u20032\n"), stdio("1 2\n", 1e-9)),
    ("integer within a float's rounding", printing("9007199254740993\n"), stdio("9007199254740992\n", 0.0)),
]
HONEST = [
    ("exact integers", printing("42 7\n"), stdio("42 7\n", 1e-6)),
    ("a big integer exactly", printing(N2 + "\n"), stdio(N2 + "\n", 1e-6)),
    ("1 for 1.0", printing("1\n"), stdio("1.0\n", 0.0)),
    ("3.0 for 3", printing("3.0\n"), stdio("3\n", 1e-6)),
    ("full precision for 9 digits", "print(1/3)\n", stdio("0.333333333\n", 1e-6)),
    ("within a relative tolerance", printing("2000001000.0\n"), stdio("2000000000.0\n", 1e-6)),
    ("an exponent for a decimal", printing("1.5e-7\n"), stdio("0.00000015\n", 1e-9)),
    ("negative zero", printing("-0.0 -0\n"), stdio("0.0 0\n", 1e-9)),
    ("text and numbers", printing("YES 2.50000001\nNO\n"), stdio("YES 2.5\nNO\n", 1e-6)),
]


def test_tolerant_stdio_is_exact_where_the_data_is_exact(url):
    items = [(f"attack: {n}", p, t, False) for n, p, t in ATTACKS] + [(f"honest: {n}", p, t, True) for n, p, t in HONEST]
    body = {"items": [{"id": name, "completion": f"```python\n{prog}```\n", "task": task}
                      for name, prog, task, _ in items]}
    r = httpx.post(url + "/v1/score", json=body, timeout=300)
    assert r.status_code == 200, r.text
    got = {res["id"]: res for res in r.json()["results"]}
    wrong = []
    for name, _prog, _task, passes in items:
        res = got[name]
        d = res["detail"]
        want = (1, 1.0) if passes else (0, pytest.approx(0.2))
        if res["status"] != "ok" or not d["runs"] or (d["passed"], res["reward"]) != want:
            wrong.append((name, res["reward"], d.get("passed"), [t.get("message") for t in d.get("tests", [])]))
    assert not wrong, wrong


def test_call_int_answers_against_an_expected_float_are_measured_exactly(url):
    """10**20 + 1 is not 1e20 at tolerance 0 (the difference was taken after rounding the int to a
    float); 10**20 is, and an int within a set tolerance still passes."""
    def call(ret: str, expected: float, tol: float) -> dict:
        return {"completion": f"```python\ndef f():\n    return {ret}\n```\n",
                "task": {"type": "code", "timeout_s": 10,
                         "tests": {"kind": "call", "fn_name": "f", "float_tolerance": tol,
                                   "cases": [{"args": [], "expected": expected}]}}}
    items = [call("10**20 + 1", 1e20, 0.0), call("2**53 + 1", float(2**53), 0.0),
             call("10**20", 1e20, 0.0), call("10**20 + 10**10", 1e20, 1e-9)]
    r = httpx.post(url + "/v1/score", json={"items": items}, timeout=300)
    assert r.status_code == 200, r.text
    passed = [res["detail"]["passed"] for res in r.json()["results"]]
    assert passed == [0, 0, 1, 1], r.json()


# ---- the matcher's rules, one by one -----------------------------------------------------------


@pytest.mark.parametrize(("actual", "expected", "tol", "ok"), [
    # integers: exact value at any length and tolerance
    (str(10**30 + 1), str(10**30), 0.5, False),
    ("1" + "0" * 10000, "1" + "0" * 10000, 1e-9, True),
    ("1" + "0" * 9999 + "1", "1" + "0" * 10000, 1e-3, False),
    ("007", "7", 0.0, True),
    ("-0", "0", 0.0, True),
    ("-7", "7", 1.0, False),
    ("8", "7", 1.0, False),
    # an integer expected: a decimal answer only at exactly its value
    ("7.0", "7", 0.0, True),
    ("7e0", "7", 0.0, True),
    ("7.0000001", "7", 1e-3, False),
    ("1e24", "1000000000000000000000000", 0.0, True),
    # a decimal expected: within the tolerance, absolute or relative
    ("1", "1.0", 0.0, True),
    ("1.0000001", "1.0", 1e-6, True),
    ("1.000002", "1.0", 1e-6, False),
    ("1.0000010", "1.0", 1e-6, True),  # the tolerance as written (1e-06), not its binary float
    ("-0.0", "0.0", 0.0, True),
    ("2000001000", "2e9", 1e-6, True),
    ("2000003000", "2e9", 1e-6, False),
    (".5", "0.5", 0.0, True),
    ("5.", "5.0", 0.0, True),
    # outside the grammar: text, character for character
    ("+1", "1", 0.5, False),
    ("+1", "+1", 0.0, True),
    ("1_000", "1000", 0.5, False),
    ("0x10", "16", 0.5, False),
    ("inf", "1e308", 1e9, False),
    ("nan", "0.5", 1.0, False),
    ("Infinity", "inf", 0.0, False),
    ("\u0661", "1", 0.5, False),
    ("1e99999", "1.0", 1e9, False),  # a five-digit exponent: text
    ("1e-9999", "0.0", 1e-9, True),
    ("1e9999", "1.0", 1e-9, False),
    ("1\u20032", "1 2", 0.5, False),
    ("1\t 2", "1 2", 0.0, True),
    ("abc", "abd", 1.0, False),
])
def test_token_rules(actual, expected, tol, ok):
    assert stdout_matches(actual + "\n", expected + "\n", tol) is ok


def test_without_a_tolerance_lines_compare_as_text():
    assert stdout_matches("1.0\n", "1.0\n") and not stdout_matches("1\n", "1.0\n")
    assert not stdout_matches("007\n", "7\n")


def test_hostile_tokens_cost_little():
    """Huge exponents and long tokens are text or bounded work: a line of them is judged in
    well under a second (no Decimal of 10**9 digits, no int() digit limit)."""
    line = " ".join(["9" * 1024 + "e9999", "1e999999999", "-" + "1" * 100000, "0." + "1" * 2000] * 8)
    expected = " ".join(["1.5", "2.5", "3", "4.5"] * 8)
    t0 = time.monotonic()
    m = StdoutMatcher(expected + "\n", 1e-6, bounded=False)
    m.feed(line.encode() + b"\n")
    assert not m.finish()
    assert time.monotonic() - t0 < 1.0


def test_codec_int_against_float_is_exact():
    assert not codec.values_equal(10**20 + 1, 1e20, 0.0)
    assert codec.values_equal(10**20, 1e20, 0.0)
    assert codec.values_equal(10**20 + 10**10, 1e20, 1e-9)
    assert not codec.values_equal(10**20 + 10**12, 1e20, 1e-9)
    assert not codec.values_equal(10**5000, 1.0, 1e-9)
    assert codec.values_equal(4, 3.5, 0.5) and not codec.values_equal(5, 3.5, 0.1)
