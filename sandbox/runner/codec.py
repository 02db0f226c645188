"""Plain data across the candidate boundary.

Only exact builtin types cross: a subclass of int whose __eq__ always says True, or any
object of the candidate's own class, cannot be encoded and so cannot pass a test. Values
are rebuilt as fresh builtins on the trusted side, so nothing the candidate defined is
ever compared there.
"""

from __future__ import annotations

import base64
import collections
import decimal
import fractions
import math
from typing import Any

# Captured when the runner starts, before any candidate code could rebind them.
_COUNTER = collections.Counter
_ORDERED = collections.OrderedDict
_DEFAULT = collections.defaultdict
_DEQUE = collections.deque
_FRACTION = fractions.Fraction
_DECIMAL = decimal.Decimal

MAX_DEPTH = 64
MAX_ITEMS = 2_000_000


class Unencodable(Exception):
    """A value that is not plain data."""


def encode(value: Any) -> Any:
    budget = [MAX_ITEMS]
    return _enc(value, 0, budget)


def _enc(x: Any, depth: int, budget: list[int]) -> Any:
    if depth > MAX_DEPTH:
        raise Unencodable("value nested too deeply")
    budget[0] -= 1
    if budget[0] < 0:
        raise Unencodable("value too large")
    t = type(x)
    if x is None or t is bool or t is str:
        return x
    if t is int:
        if x.bit_length() > 4096:
            raise Unencodable("integer too large")
        return x
    if t is float:
        if math.isfinite(x):
            return x
        return {"$f": repr(x)}
    if t is list:
        flat = _flat(x, budget)
        return flat if flat is not None else [_enc(v, depth + 1, budget) for v in x]
    if t is tuple:
        flat = _flat(x, budget)
        return {"$t": flat if flat is not None else [_enc(v, depth + 1, budget) for v in x]}
    if t is dict:
        return {"$d": [[_enc(k, depth + 1, budget), _enc(v, depth + 1, budget)] for k, v in x.items()]}
    if t is set:
        return {"$s": [_enc(v, depth + 1, budget) for v in x]}
    if t is frozenset:
        return {"$fs": [_enc(v, depth + 1, budget) for v in x]}
    if t is bytes:
        return {"$b": base64.b64encode(x).decode("ascii")}
    if t is complex:
        return {"$c": [_enc(x.real, depth + 1, budget), _enc(x.imag, depth + 1, budget)]}
    # standard-library containers and numbers that are values, rebuilt as the same types
    if t is _COUNTER or t is _ORDERED or t is _DEFAULT:
        tag = {_COUNTER: "$C", _ORDERED: "$O", _DEFAULT: "$d"}[t]
        return {tag: [[_enc(k, depth + 1, budget), _enc(v, depth + 1, budget)] for k, v in dict.items(x)]}
    if t is _DEQUE:
        return {"$q": [_enc(v, depth + 1, budget) for v in x]}
    if t is _FRACTION:
        return {"$F": [x.numerator, x.denominator]}
    if t is _DECIMAL:
        return {"$D": str(x)}
    if issubclass(t, tuple) and type(getattr(t, "_fields", None)) is tuple:  # namedtuple
        return {"$t": [_enc(v, depth + 1, budget) for v in tuple.__iter__(x)]}
    raise Unencodable(f"values of type {t.__name__!s} are not plain data")


_NO_CHECK = frozenset({str, bool, type(None)})
_INT_LIMIT = 1 << 4096  # an int of more bits is refused (its decimal form is huge)


def _flat(x: list | tuple, budget: list[int]) -> list | None:
    """A fresh copy of a list or tuple of plain scalars that JSON carries as they are, or None
    for anything else (the element-by-element walk decides). The element types are checked
    exactly, in C (set, map, min, max): lists of ints or strings are most arguments and
    answers, and the walk costs ~0.4 us an element."""
    kinds = set(map(type, x))
    if not kinds <= _NO_CHECK:
        if kinds == {int}:
            if not (-_INT_LIMIT < min(x) and max(x) < _INT_LIMIT):
                return None
        elif kinds == {float}:
            if not all(map(math.isfinite, x)):
                return None
        else:
            return None
    budget[0] -= len(x)
    if budget[0] < 0:
        raise Unencodable("value too large")
    return list(x)


_PLAIN = frozenset({int, float, str, bool, type(None)})


def decode(data: Any) -> Any:
    return _dec(data, 0)


def _dec(d: Any, depth: int) -> Any:
    if depth > MAX_DEPTH + 1:
        raise ValueError("nested too deeply")
    t = type(d)
    if d is None or t in (bool, int, float, str):
        return d
    if t is list:
        if set(map(type, d)) <= _PLAIN:
            return list(d)  # a copy: the caller may keep the frame it came in
        return [_dec(v, depth + 1) for v in d]
    if t is dict and len(d) == 1:
        (tag, body), = d.items()
        if tag == "$f":
            return float(body)
        if tag == "$t":
            return tuple(_dec(v, depth + 1) for v in body)
        if tag == "$d":
            return {_dec(k, depth + 1): _dec(v, depth + 1) for k, v in body}
        if tag == "$s":
            return {_dec(v, depth + 1) for v in body}
        if tag == "$fs":
            return frozenset(_dec(v, depth + 1) for v in body)
        if tag == "$b":
            return base64.b64decode(body)
        if tag == "$c":
            return complex(_dec(body[0], depth + 1), _dec(body[1], depth + 1))
        if tag == "$C":
            return _COUNTER({_dec(k, depth + 1): _dec(v, depth + 1) for k, v in body})
        if tag == "$O":
            return _ORDERED((_dec(k, depth + 1), _dec(v, depth + 1)) for k, v in body)
        if tag == "$q":
            return _DEQUE(_dec(v, depth + 1) for v in body)
        if tag == "$F":
            return _FRACTION(int(body[0]), int(body[1]))
        if tag == "$D":
            return _DECIMAL(str(body))
    raise ValueError(f"not an encoded value: {str(d)[:80]}")


def from_json(value: Any) -> Any:
    """JSON test data (lists, objects) as Python values, for `call` cases."""
    return value


def values_equal(actual: Any, expected: Any, tol: float | None = None) -> bool:
    """Equality for JSON-described expectations: lists match tuples (JSON has no tuples),
    ints match equal floats, floats within `tol` (absolute or relative)."""
    ta, te = type(actual), type(expected)
    if ta is bool or te is bool:
        return ta is te and actual == expected
    if ta in (int, float) and te in (int, float):
        if actual == expected:
            return True
        if tol is None or not (math.isfinite(actual) and math.isfinite(expected)):
            return bool(math.isnan(actual) and math.isnan(expected)) if ta is float and te is float else False
        return abs(actual - expected) <= max(tol, tol * abs(expected))
    if ta in (list, tuple) and te in (list, tuple):
        return len(actual) == len(expected) and all(values_equal(a, e, tol) for a, e in zip(actual, expected))
    if ta is dict and te is dict:
        if len(actual) != len(expected):
            return False
        for k, v in expected.items():
            key = k
            if key not in actual and isinstance(k, str):
                # JSON object keys are strings; allow int keys written as strings
                try:
                    key = int(k)
                except ValueError:
                    return False
            if key not in actual or not values_equal(actual[key], v, tol):
                return False
        return True
    if ta in (set, frozenset) and te in (list, tuple, set, frozenset):
        return actual == set(_hashable(expected))
    return ta is te and actual == expected


def _hashable(items: Any) -> Any:
    return [tuple(x) if type(x) is list else x for x in items]
