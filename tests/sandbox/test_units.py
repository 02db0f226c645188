"""Fast unit tests of the runner's pure parts: plain-data codec, stdout comparison, test plans."""

from __future__ import annotations

import ast
import builtins
import json
import math
import socket
import threading

import pytest

from sandbox.runner import codec, framing, verdict
from sandbox.runner.compare import stdout_matches
from sandbox.runner.verdict import free_names, unit_labels


@pytest.mark.parametrize(
    "value",
    [None, True, 0, -7, 2**200, 1.5, "héllo", b"\x00\xff", [1, [2, (3, 4)]], (1,), {"a": 1, 2: [3]},
     {1, 2}, frozenset({"x"}), 1 + 2j, {(1, 2): {"k": None}}],
)
def test_codec_round_trip_keeps_exact_types(value):
    back = codec.decode(codec.encode(value))
    assert back == value
    assert type(back) is type(value)


def test_codec_nan_and_inf():
    back = codec.decode(codec.encode([math.inf, -math.inf, math.nan]))
    assert back[0] == math.inf and back[1] == -math.inf and math.isnan(back[2])


class AlwaysEqual:
    def __eq__(self, other):
        return True


class SneakyInt(int):
    def __eq__(self, other):
        return True


class SneakyStr(str):
    def __eq__(self, other):
        return True


@pytest.mark.parametrize("value", [AlwaysEqual(), SneakyInt(3), SneakyStr("x"), [1, SneakyInt(2)], {"k": AlwaysEqual()},
                                   lambda: 1, iter([1]), object()])
def test_codec_refuses_anything_but_exact_builtins(value):
    with pytest.raises(codec.Unencodable):
        codec.encode(value)


def test_codec_refuses_self_reference_and_giant_ints():
    a: list = []
    a.append(a)
    with pytest.raises(codec.Unencodable):
        codec.encode(a)
    with pytest.raises(codec.Unencodable):
        codec.encode(10**5000)


@pytest.mark.parametrize(
    "value",
    [[], [1, 2, -3], ["a", "b"], [True, None, "x"], [1.5, -0.0], (1, 2), ([1, 2], ("a",)), [1, True], [1, 2.5],
     [1, "a"], [float("inf"), 1.0], [2**4095, -(2**4095)]],
)
def test_codec_flat_lists_round_trip_as_fresh_exact_values(value):
    enc = codec.encode(value)
    back = codec.decode(enc)
    assert back == value or (value and value[0] != value[0])
    assert [type(v) for v in back] == [type(v) for v in value]
    if type(value) is list:
        assert back is not value and back is not enc


@pytest.mark.parametrize("value", [[1, SneakyInt(2)], (SneakyStr("a"),), [2**4096], [-(2**4096), 1], ["a", AlwaysEqual()]])
def test_codec_flat_lists_refuse_what_the_walk_refuses(value):
    with pytest.raises(codec.Unencodable):
        codec.encode(value)


def test_codec_counts_flat_lists_against_the_size_budget(monkeypatch):
    monkeypatch.setattr(codec, "MAX_ITEMS", 10)
    codec.encode(list(range(9)))
    with pytest.raises(codec.Unencodable):
        codec.encode(list(range(10)))
    with pytest.raises(codec.Unencodable):
        codec.encode([["a"] * 5, ["b"] * 5])


def test_decoded_lists_are_copies_of_the_frame():
    frame = {"args": [[1, 2, 3], ["x"]]}
    args = codec.decode(frame["args"])
    args[0].append(4)
    assert frame["args"] == [[1, 2, 3], ["x"]]


def test_decode_rejects_unknown_tags():
    with pytest.raises(ValueError):
        codec.decode({"$x": 1})
    with pytest.raises(ValueError):
        codec.decode({"a": 1, "b": 2})


def test_values_equal_json_semantics():
    eq = codec.values_equal
    assert eq((1, 2), [1, 2])
    assert eq(2.0, 2)
    assert not eq(True, 1) and not eq(1, True)
    assert eq(0.1 + 0.2, 0.3, 1e-9) and not eq(0.1 + 0.2, 0.3, None)
    assert eq({1: "a"}, {"1": "a"})
    assert eq({3, 1}, [1, 3])
    assert not eq([1, 2], [1, 2, 3])
    assert not eq("1", 1)


def test_frame_reader_handles_split_and_joined_frames():
    data = framing.encode_frame({"a": 1}) + framing.encode_frame([2, 3])
    r = framing.FrameReader()
    assert r.feed(data[:3]) == []
    assert r.feed(data[3:]) == [{"a": 1}, [2, 3]]
    with pytest.raises(framing.FrameError):
        framing.FrameReader(limit=10).feed(framing.encode_frame("x" * 100))


def test_frames_encode_as_the_json_library_does():
    value = {"a": [1, 2.5, float("nan"), float("-inf"), "é\ud800", None, True], "b": {"c": []}, 3: "x"}
    reference = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode(value)
    assert framing.encode_frame(value) == framing.HEADER.pack(len(reference.encode("utf-8", "surrogatepass"))) + \
        reference.encode("utf-8", "surrogatepass")
    sent, got = socket.socketpair()
    with sent, got:
        framing.send_frame(sent, value)
        back = framing.recv_frame(got)
    assert back["a"][4] == "é\ud800" and back["b"] == {"c": []} and back["3"] == "x"


def test_an_answer_is_read_whole_and_nothing_may_follow_it():
    sent, got = socket.socketpair()
    with sent, got:
        frame = framing.encode_frame({"id": 1, "value": "x" * 20_000})  # more than one read
        sent.sendall(frame[:2])  # even the header split
        reader = threading.Timer(0.05, lambda: sent.sendall(frame[2:]))
        reader.start()
        assert framing.recv_answer(got) == {"id": 1, "value": "x" * 20_000}
        reader.join()
        sent.sendall(framing.encode_frame({"id": 2}) + framing.encode_frame({"id": 3}))
        with pytest.raises(framing.FrameError, match="after an answer"):
            framing.recv_answer(got)
        sent.sendall(framing.encode_frame("x" * 100))
        with pytest.raises(framing.FrameError, match="exceeds"):
            framing.recv_answer(got, limit=10)
    a, b = socket.socketpair()
    a.close()
    with b:
        assert framing.recv_answer(b) is None  # the peer hung up between answers


@pytest.mark.parametrize(
    ("actual", "expected", "tol", "ok"),
    [
        ("1 2\n3\n", "1 2\n3", None, True),
        ("1 2  \r\n3\n\n\n", "1 2\n3\n", None, True),
        ("1 2\n", "1 2\n3\n", None, False),  # a correct prefix is not enough
        ("1 2\n3\n4\n", "1 2\n3\n", None, False),
        ("0.3333333\n", "0.333333333\n", 1e-6, True),
        ("0.3333333\n", "0.333333333\n", None, False),
        ("abc 1.0\n", "abc 1\n", 1e-9, True),
        ("abc 1.0\n", "abd 1\n", 1e-9, False),
        (" 1 2\n", "1 2\n", None, False),  # leading whitespace matters
    ],
)
def test_stdout_matches(actual, expected, tol, ok):
    assert stdout_matches(actual, expected, tol) is ok


HUMANEVAL_STYLE = '''
METADATA = {"author": "x"}

def check(candidate):
    """docstring"""
    import math
    assert candidate(1) == 2
    assert True, "not a test of the candidate"
    assert math.isclose(candidate(2), 3)
'''


def test_flat_check_splits_into_one_test_per_candidate_assert():
    labels = unit_labels({"kind": "assert", "test": HUMANEVAL_STYLE, "entry_point": "f"})
    assert labels == ["assert candidate(1) == 2", "assert math.isclose(candidate(2), 3)"]


def _run_split(test: str, candidate) -> list[str]:
    """A split check's units run against a plain function: each unit's outcome."""
    c = verdict.compiled({"kind": "assert", "test": test, "entry_point": "f"})
    ns: dict = {"__builtins__": builtins, "__name__": "__tests__"}
    exec(c.module, ns)
    outcomes = []
    for name in c.units:
        try:
            ns[name](candidate)
            outcomes.append("passed")
        except AssertionError:
            outcomes.append("failed")
    return outcomes


def test_split_asserts_run_with_checks_own_scoping():
    test = (
        "K = 10\n"
        "def check(candidate):\n"
        "    base = [1, 2, 3]\n"
        "    import math as m\n"
        "    assert [candidate(x) for x in base] == [x + 1 for x in base]\n"
        "    assert all(candidate(x) - x == 1 for x in range(K))\n"
        "    assert (y := candidate(1)) == 2 and y == 2\n"
        "    assert m.isclose(candidate(0.5), 1.5)\n"
        "    assert candidate(base[0]) == 3\n"
    )
    assert _run_split(test, lambda x: x + 1) == ["passed"] * 4 + ["failed"]
    assert _run_split(test, lambda x: x) == ["failed"] * 5


def test_split_keeps_a_check_that_the_module_itself_calls():
    test = ("def check(candidate):\n    assert candidate(1) == 2\n    assert candidate(2) == 3\n"
            "RESULT = []\ntry:\n    check(lambda x: x + 1)\n    RESULT.append('ran')\nexcept AssertionError:\n    pass\n")
    c = verdict.compiled({"kind": "assert", "test": test, "entry_point": "f"})
    ns: dict = {"__builtins__": builtins}
    exec(c.module, ns)
    assert ns["RESULT"] == ["ran"] and len(c.units) == 2
    assert _run_split(test, lambda x: x + 1) == ["passed", "passed"]


def test_non_flat_check_is_one_test():
    test = "def check(candidate):\n    for i in range(3):\n        assert candidate(i) == i + 1\n"
    assert unit_labels({"kind": "assert", "test": test, "entry_point": "f"}) == ["check(candidate)"]
    assert unit_labels({"kind": "assert", "test": HUMANEVAL_STYLE, "entry_point": "f", "split_asserts": False}) == [
        "check(candidate)"
    ]


def test_labels_for_lists_and_calls():
    assert len(unit_labels({"kind": "assert", "asserts": ["assert f(1)", "assert f(2)"]})) == 2
    assert unit_labels({"kind": "call", "fn_name": "f", "cases": [{}, {}, {}]}) == ["case 0", "case 1", "case 2"]


FREE_NAMES_SOURCE = """
import os.path as p, json
from collections import Counter as C
def helper(a: Hint, *rest, key=None, **kw):
    local = a + len(rest)
    return [x for x in local if unknown_in_comp(x)]
class Box(Base):
    pass
try:
    risky()
except ValueError as err:
    print(err, missing)
assert candidate(sum(xs)) == helper(Box, p, json, C)
sorted = 3
"""


def test_free_names_are_the_candidates_plus_builtins_it_redefines():
    # what the tests use and bind nowhere goes to the candidate; builtins stay ours unless
    # the program defines them (then the tests see the program's `sum`)
    tree = ast.parse(FREE_NAMES_SOURCE)
    free = {"Base", "unknown_in_comp", "risky", "missing", "candidate", "xs"}
    assert free_names(tree) == free
    assert free_names(tree, defined=frozenset({"sum", "len"})) == free | {"sum", "len"}
    # bound anywhere counts as bound (`sorted = 3` after no use; `x` in the comprehension)
    assert "sorted" not in free_names(tree, defined=frozenset({"sorted"}))
    assert free_names(ast.parse("y = 1"), ast.parse("assert f(y)")) == {"f"}


def test_warm_interpreter_registers_no_costly_fork_handlers():
    """random and threading reseed / rebuild state in every forked candidate (measured 0.15
    and 0.7 ms per job); the runner's warm interpreter must not import them."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    code = (
        "import sys; sys.path.insert(0, sys.argv[1])\n"
        "from sandbox.runner import server, spawner\n"
        "server.preload()\n"
        "print(sorted({'random', 'threading'} & set(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-I", "-c", code, str(root)], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_cpu_plan_pins_while_jobs_fit_the_cpus_each_to_its_own():
    from sandbox.pool import CpuPlan

    plan = CpuPlan([0, 1, 2])
    taken = [plan.take() for _ in range(4)]
    assert taken == [0, 1, 2, None]  # the fourth job finds more jobs than CPUs
    plan.give(1)
    assert plan.take() is None  # still four jobs in flight: the new one is not pinned either
    plan.give(None)
    plan.give(None)
    assert plan.take(prefer=2) == 1  # two in flight again; 2 is held, 1 is free
    plan.give(0)
    plan.give(2)
    plan.give(1)
    assert plan.jobs == 0 and plan.take(prefer=2) == 2  # where the connection already is
    assert plan.take() == 0  # then the CPU freed first (idle longest)
    assert CpuPlan([3]).take() is None  # one CPU: nothing to choose, nobody pinned
    assert CpuPlan([]).take() is None
