"""Plain data across the candidate boundary.

Only exact builtin types cross: a subclass of int whose __eq__ always says True, or any
object of the candidate's own class, cannot be encoded and so cannot pass a test. Values
are rebuilt as fresh builtins on the trusted side, so nothing the candidate defined is
ever compared there. A few standard-library value types (Counter, OrderedDict,
defaultdict, deque, Fraction, Decimal) cross too, matched by identity with the classes
captured at start-up and rebuilt from their plain contents, so no candidate code rides
along. Integers of any size cross (past 4096 bits as hexadecimal: power-of-two bases are
exempt from Python's 4300-digit limit on int/str conversion).
"""

from __future__ import annotations

import base64
import collections
import decimal
import fractions
import hashlib
import math
import types
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
MAX_INT_BITS = 1 << 23  # ~2.5 M decimal digits; a 1 MiB hexadecimal string in the frame
_HEX_BITS = 4096  # past this an int crosses as {"$i": hex} (its decimal form is huge)
# the factories a defaultdict may carry across: builtins, named (a function cannot cross)
_FACTORIES = {None: None, "int": int, "float": float, "str": str, "list": list, "dict": dict, "set": set,
              "tuple": tuple, "bool": bool}


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
        if x.bit_length() > _HEX_BITS:
            return _big_int(x)
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
    if t is _COUNTER or t is _ORDERED:
        tag = "$C" if t is _COUNTER else "$O"
        return {tag: [[_enc(k, depth + 1, budget), _enc(v, depth + 1, budget)] for k, v in dict.items(x)]}
    if t is _DEFAULT:
        factory = x.default_factory
        name = factory.__name__ if factory is not None and _FACTORIES.get(factory.__name__) is factory else None
        return {"$dd": [name, [[_enc(k, depth + 1, budget), _enc(v, depth + 1, budget)] for k, v in dict.items(x)]]}
    if t is _DEQUE:
        return {"$q": [_enc(v, depth + 1, budget) for v in x]}
    if t is _FRACTION:
        return {"$F": [_enc(x.numerator, depth + 1, budget), _enc(x.denominator, depth + 1, budget)]}
    if t is _DECIMAL:
        return {"$D": str(x)}
    if issubclass(t, tuple) and type(getattr(t, "_fields", None)) is tuple:  # namedtuple
        return {"$t": [_enc(v, depth + 1, budget) for v in tuple.__iter__(x)]}
    raise Unencodable(f"values of type {t.__name__!s} are not plain data")


def _big_int(x: int) -> dict:
    if x.bit_length() > MAX_INT_BITS:
        raise Unencodable("integer too large")
    return {"$i": format(x, "x")}  # '-' and hex digits; linear time, no digit limit


_NO_CHECK = frozenset({str, bool, type(None)})
_INT_LIMIT = 1 << _HEX_BITS  # an int of more bits takes the walk (it crosses as hexadecimal)


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
        if tag == "$i":
            return _dec_int(body)
        if tag == "$dd":
            factory = _FACTORIES[body[0]] if body[0] is None or type(body[0]) is str else None
            return _DEFAULT(factory, {_dec(k, depth + 1): _dec(v, depth + 1) for k, v in body[1]})
        if tag == "$C":
            return _COUNTER({_dec(k, depth + 1): _dec(v, depth + 1) for k, v in body})
        if tag == "$O":
            return _ORDERED((_dec(k, depth + 1), _dec(v, depth + 1)) for k, v in body)
        if tag == "$q":
            return _DEQUE(_dec(v, depth + 1) for v in body)
        if tag == "$F":
            num, den = _dec(body[0], depth + 1), _dec(body[1], depth + 1)
            if type(num) is not int or type(den) is not int:
                raise ValueError("not an encoded fraction")
            return _FRACTION(num, den)
        if tag == "$D":
            return _DECIMAL(str(body))
    raise ValueError(f"not an encoded value: {str(d)[:80]}")


def _dec_int(body: Any) -> int:
    if type(body) is not str or not 0 < len(body) <= MAX_INT_BITS // 4 + 1:
        raise ValueError("not an encoded integer")
    return int(body, 16)


def code_digest(obj: Any) -> str | None:
    """A fingerprint of a function's code that two compiles of the same source share
    (bytecode, constants, names; not file names or line numbers), or of a plain-data value;
    None for anything else. Telemetry only: it tells a helper the program repeated from its
    prompt from one it rewrote."""
    try:
        if type(obj) is types.FunctionType:
            shape: Any = ("code", _code_shape(obj.__code__, 0))
        else:
            shape = ("value", encode(obj))
        return hashlib.sha256(repr(shape).encode("utf-8", "surrogatepass")).hexdigest()
    except (Unencodable, ValueError, RecursionError):
        return None


def _code_shape(code: Any, depth: int) -> tuple:
    if depth > 32:
        raise RecursionError("code nested too deeply")
    consts = tuple(_code_shape(c, depth + 1) if type(c) is type(code) else (type(c).__name__, c)
                   for c in code.co_consts)
    return (code.co_code, consts, code.co_names, code.co_varnames, code.co_argcount, code.co_kwonlyargcount,
            code.co_posonlyargcount, code.co_flags)


def to_json(value: Any, depth: int = 0) -> Any:
    """`call` case data made safe for a JSON frame: an int past 4096 bits as {"$i": hex}
    (its decimal form is over Python's 4300-digit limit: the frame could not be written);
    everything else as it is. The job model applies it when it is dumped."""
    t = type(value)
    if t is int and value.bit_length() > _HEX_BITS:
        return _big_int(value)
    if depth > MAX_DEPTH:
        return value
    if t is list or t is tuple:
        return [to_json(v, depth + 1) for v in value]
    if t is dict:
        return {k: to_json(v, depth + 1) for k, v in value.items()}
    return value


def from_json(value: Any, depth: int = 0) -> Any:
    """JSON test data (lists, objects) as Python values, for `call` cases: to_json's
    {"$i": hex} back to the int (an object of that one key means nothing else here)."""
    t = type(value)
    if t is dict:
        if len(value) == 1 and type(value.get("$i")) is str:
            return _dec_int(value["$i"])
        return {k: from_json(v, depth + 1) for k, v in value.items()} if depth <= MAX_DEPTH else value
    if t is list and depth <= MAX_DEPTH:
        return [from_json(v, depth + 1) for v in value]
    return value


_ORDERED_SEQS = (list, tuple, _DEQUE)  # what an expected JSON list matches in order
_ANY_ORDER = (list, tuple, _DEQUE, set, frozenset)  # ... and in any order, where the case says so
_DICTS = (dict, _COUNTER, _ORDERED, _DEFAULT)  # what an expected JSON object matches


def values_equal(actual: Any, expected: Any, tol: float | None = None, unordered: bool = False) -> bool:
    """Does a decoded answer match a JSON-described expectation? Exact by type, as a careful
    judge reads JSON: ints exactly (a float answer only when it equals the int exactly: 3.0
    for 3, never "close to"); an expected float within `tol` (absolute or relative) of an
    int or float; bool only as bool; an expected list by a list, tuple or deque in order,
    and (only when `unordered`, at the top level) by any collection holding the same
    elements as many times, a set included; an expected object by a dict or a standard
    dict type (Counter, OrderedDict, defaultdict), keys that JSON wrote as strings matching
    int keys. Both sides are trusted values (decoded), so `==` runs no candidate code."""
    if unordered and type(expected) is list and type(actual) in _ANY_ORDER:
        return _same_elements(list(actual), expected, tol)
    return _equal(actual, expected, tol)


def _equal(a: Any, e: Any, tol: float | None) -> bool:
    ta, te = type(a), type(e)
    if ta is bool or te is bool:
        return ta is te and a == e
    if te is int:
        return (ta is int or ta is float) and a == e
    if te is float:
        if ta is not int and ta is not float:
            return False
        if a == e:
            return True
        if math.isnan(e):
            return ta is float and math.isnan(a)
        if tol is None or not math.isfinite(e):
            return False
        if ta is int:
            return _int_near(a, e, tol)
        return math.isfinite(a) and abs(a - e) <= max(tol, tol * abs(e))
    if te is list or te is tuple:
        return ta in _ORDERED_SEQS and len(a) == len(e) and all(_equal(x, y, tol) for x, y in zip(a, e))
    if te is dict:
        return ta in _DICTS and _dict_equal(a, e, tol)
    if te in (set, frozenset):
        return ta in (set, frozenset) and a == e
    return ta is te and a == e


def _int_near(a: int, e: float, tol: float) -> bool:
    """An int answer within `tol` of an expected float, with the difference taken exactly: `a - e`
    would round `a` to a float first, and 10**20 + 1 would pass for 1e20 at tolerance 0."""
    if math.isinf(tol):
        return True
    if a.bit_length() > 2100:  # past every finite float times any finite tolerance
        return False
    e_exact, t = fractions.Fraction(e), fractions.Fraction(tol)
    return abs(a - e_exact) <= max(t, t * abs(e_exact))


def _dict_equal(a: dict, e: dict, tol: float | None) -> bool:
    if len(a) != len(e):
        return False
    for k, v in e.items():
        key = k
        if key not in a and type(k) is str:
            try:  # JSON object keys are strings; an int key written as a string
                key = int(k)
            except ValueError:
                return False
        if key not in a or not _equal(dict.__getitem__(a, key), v, tol):
            return False
    return True


def _same_elements(actual: list, expected: list, tol: float | None) -> bool:
    """The same elements as many times, in any order (a greedy match: each expected element
    is matched by _equal to one actual element; sorting cannot respect the tolerance)."""
    if len(actual) != len(expected):
        return False
    fast = _counted(actual, expected) if tol is None or not _has_float(expected) else None
    if fast is not None:
        return fast
    left = list(actual)
    for y in expected:
        for j, x in enumerate(left):
            if _equal(x, y, tol):
                left[j] = left[-1]
                left.pop()
                break
        else:
            return False
    return True


def _has_float(items: list) -> bool:
    return any(type(v) is float or type(v) in (list, dict) for v in items)


def _counted(actual: list, expected: list) -> bool | None:
    """Multiset equality by canonical keys, for scalars and sequences of them (linear); None
    when some element has no key that agrees with _equal (dicts, floats under a tolerance)."""
    try:
        ka = collections.Counter(map(_key, actual))
        ke = collections.Counter(map(_key, expected))
    except _NoKey:
        return None
    return ka == ke


class _NoKey(Exception):
    pass


def _key(v: Any) -> Any:
    t = type(v)
    if t is bool:
        return ("b", v)
    if t is int or t is float:
        if t is float and math.isnan(v):
            return ("nan",)
        return ("n", v)  # 3 and 3.0 hash and compare equal, as _equal has them
    if t is str or v is None:
        return ("s", v)
    if t in _ORDERED_SEQS:
        return ("l", tuple(map(_key, v)))
    raise _NoKey
