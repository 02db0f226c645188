"""JSON decoded in small steps, for large request bodies.

`json.loads` is one C call: on a 7 MB body it holds the interpreter lock for a fifth of a
second even in a worker thread, and the event loop (health checks included) waits. This
decoder walks the structure in Python and leaves only the leaves (one string, one number) to
C (`json.decoder.scanstring`, a short regex match), so the lock changes hands every few
milliseconds; it also stops an over-long top-level list at its cap, before the rest is
read. It accepts what `json.loads` accepts (NaN and Infinity included) and gives the same
values; it is slower per token (about 6x), so small bodies still go to `json.loads`.
Written by hand: no well-kept library decodes JSON incrementally and yields the lock.
"""

from __future__ import annotations

import re
from json.decoder import scanstring
from typing import Any

_VALUE = re.compile(
    r"[ \t\n\r]*(?:(\")|([{\[])|(-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?)|(true|false|null|NaN|Infinity|-Infinity))"
)
_SEP = re.compile(r"[ \t\n\r]*([,:\]}])")
_CONST = {"true": True, "false": False, "null": None, "NaN": float("nan"), "Infinity": float("inf"),
          "-Infinity": float("-inf")}


class ListTooLong(ValueError):
    """The capped top-level list has more elements than allowed."""


def loads(text: str, cap_key: str | None = None, cap: int | None = None) -> Any:
    """`json.loads(text)`, in steps; a top-level object's `cap_key` list longer than `cap`
    raises ListTooLong as soon as element `cap + 1` is read. ValueError on bad JSON."""
    obj, pos = _value(text, 0, cap_key, cap)
    if text[pos:].strip(" \t\n\r"):
        raise ValueError(f"extra data at {pos}")
    return obj


def _sep(text: str, pos: int) -> tuple[str, int]:
    m = _SEP.match(text, pos)
    if m is None:
        raise ValueError(f"expected , : ] or }} at {pos}")
    return m.group(1), m.end()


def _value(text: str, pos: int, cap_key: str | None = None, cap: int | None = None) -> tuple[Any, int]:
    m = _VALUE.match(text, pos)
    if m is None:
        raise ValueError(f"expected a value at {pos}")
    if m.group(1):
        return scanstring(text, m.end())
    if m.group(2) == "[":
        return _array(text, m.end(), None)
    if m.group(2) == "{":
        return _object(text, m.end(), cap_key, cap)
    if m.group(3):
        s = m.group(3)
        return (float(s) if ("." in s or "e" in s or "E" in s) else int(s)), m.end()
    return _CONST[m.group(4)], m.end()


def _array(text: str, pos: int, cap: int | None) -> tuple[list, int]:
    out: list = []
    m = _SEP.match(text, pos)
    if m is not None and m.group(1) == "]":
        return out, m.end()
    while True:
        v, pos = _value(text, pos)
        out.append(v)
        if cap is not None and len(out) > cap:
            raise ListTooLong(f"more than {cap} elements")
        ch, pos = _sep(text, pos)
        if ch == "]":
            return out, pos
        if ch != ",":
            raise ValueError(f"expected , or ] at {pos}")


def _object(text: str, pos: int, cap_key: str | None, cap: int | None) -> tuple[dict, int]:
    out: dict = {}
    m = _SEP.match(text, pos)
    if m is not None and m.group(1) == "}":
        return out, m.end()
    while True:
        k = _VALUE.match(text, pos)
        if k is None or not k.group(1):
            raise ValueError(f"expected a string key at {pos}")
        key, pos = scanstring(text, k.end())
        ch, pos = _sep(text, pos)
        if ch != ":":
            raise ValueError(f"expected : at {pos}")
        if key == cap_key:
            a = _VALUE.match(text, pos)
            if a is not None and a.group(2) == "[":
                out[key], pos = _array(text, a.end(), cap)
            else:
                out[key], pos = _value(text, pos)
        else:
            out[key], pos = _value(text, pos)
        ch, pos = _sep(text, pos)
        if ch == "}":
            return out, pos
        if ch != ",":
            raise ValueError(f"expected , or }} at {pos}")
