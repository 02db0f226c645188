"""Unit tests of the streaming stdout comparison: it gives the whole-output rule's verdict
for any split of the bytes, and holds no more than one expected line's worth of text."""

from __future__ import annotations

import math
import random

import pytest

from sandbox.runner.compare import LINE_SLACK, StdoutMatcher, stdout_matches


def _oracle(actual: str, expected: str, tol: float | None) -> bool:
    """The whole-output rule as main had it before streaming (kept verbatim as the oracle)."""
    def lines(text: str) -> list[str]:
        out = [line.rstrip() for line in text.replace("\r\n", "\n").split("\n")]
        while out and not out[-1]:
            out.pop()
        return out

    def tok(a: str, b: str) -> bool:
        if a == b:
            return True
        try:
            x, y = float(a), float(b)
        except ValueError:
            return False
        return math.isfinite(x) and math.isfinite(y) and abs(x - y) <= max(tol, tol * abs(y))

    a, e = lines(actual), lines(expected)
    if len(a) != len(e):
        return False
    if tol is None:
        return a == e
    return all(len(x.split()) == len(y.split()) and all(tok(p, q) for p, q in zip(x.split(), y.split()))
               for x, y in zip(a, e))


@pytest.mark.parametrize("seed", range(5))
def test_stream_matches_whole_output_rule(seed):
    rng = random.Random(seed)
    alpha = ["a", "b", " ", "\n", "\r", "\r\n", "1.0", "1.0000001", "2", "\t", "\u00e9", "\u65e5"]
    for _ in range(4000):
        exp = "".join(rng.choice(alpha) for _ in range(rng.randint(0, 12)))
        act = exp if rng.random() < 0.5 else "".join(rng.choice(alpha) for _ in range(rng.randint(0, 12)))
        if rng.random() < 0.3:
            act += rng.choice(["\n", " \n\n", "x", "\n\n1"])
        tol = rng.choice([None, 1e-6])
        want = _oracle(act, exp, tol)
        assert stdout_matches(act, exp, tol) is want, (act, exp, tol)
        data, m, i = act.encode(), StdoutMatcher(exp, tol), 0
        while i < len(data):  # bytes split anywhere, UTF-8 sequences included
            k = rng.randint(1, 4)
            m.feed(data[i:i + k])
            i += k
        assert m.finish() is want, (act, exp, tol)


def test_first_difference_messages():
    m = StdoutMatcher("1\n2\n3\n")
    m.feed(b"1\n5\n3\n")
    assert not m.finish() and m.difference == "line 2: expected '2', got '5'"
    m = StdoutMatcher("1\n2\n")
    m.feed(b"1\n2\n3\n4\n")
    assert not m.finish() and m.difference == "expected 2 lines, got 4"
    m = StdoutMatcher("1\n2\n3\n")
    m.feed(b"1\n2\n")
    assert not m.finish() and m.difference == "expected 3 lines, got 2"


def test_holds_one_line_at_most():
    m = StdoutMatcher("short\n")
    chunk = b"x" * (1 << 16)
    for _ in range(256):  # 16 MiB on one line
        m.feed(chunk)
        assert m._partial_len <= len("short") + LINE_SLACK + len(chunk)
    assert not m.finish() and m.difference.startswith("line 1:")
    big = "y" * (4 << 20)
    m = StdoutMatcher(big + "\n")
    for i in range(0, len(big), 1 << 16):
        m.feed(big[i:i + (1 << 16)].encode())
    assert m.finish()


def test_exec_answer_fits_one_frame():
    from sandbox.runner import framing
    from sandbox.runner.script import FRAME_ROOM, fit_frame

    out, err, cut = fit_frame("\x01" * (16 << 20), "\x02" * (16 << 20), {"f": "A" * (1 << 20)})
    assert cut and len(framing.encode_frame([out, err])) + (1 << 20) <= FRAME_ROOM
    assert out == "\x01" * len(out) and len(out) > 1 << 20
    assert fit_frame("ok", "", {}) == ("ok", "", False)
