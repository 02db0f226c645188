"""Stdout comparison for stdio tests, done by the runner, never by the program."""

from __future__ import annotations

import math


def _lines(text: str) -> list[str]:
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def _token_equal(a: str, b: str, tol: float) -> bool:
    if a == b:
        return True
    try:
        x, y = float(a), float(b)
    except ValueError:
        return False
    if not (math.isfinite(x) and math.isfinite(y)):
        return False
    return abs(x - y) <= max(tol, tol * abs(y))


def stdout_matches(actual: str, expected: str, float_tolerance: float | None = None) -> bool:
    """Line by line, ignoring trailing whitespace and trailing blank lines; the number of
    lines must match, so a correct prefix does not pass."""
    a, e = _lines(actual), _lines(expected)
    if len(a) != len(e):
        return False
    if float_tolerance is None:
        return a == e
    for la, le in zip(a, e):
        ta, te = la.split(), le.split()
        if len(ta) != len(te) or not all(_token_equal(x, y, float_tolerance) for x, y in zip(ta, te)):
            return False
    return True
