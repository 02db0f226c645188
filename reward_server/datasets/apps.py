"""APPS (`codeparrot/apps`) and TACO (`BAAI/TACO`) rows as tasks, and the same `input_output`
shape as verl/PRIME ground truth (`{"inputs", "outputs", "fn_name"?}`).

Schema (the data sets' cards and loading scripts): `input_output`, a JSON string
`{"inputs": [...], "outputs": [...], "fn_name"?: str}`: with `fn_name` each input is the
call's argument list and each output its value (TACO wraps it in a one-element list); without
it, stdin and stdout strings (a list of lines is joined). `starter_code` is the prompt's.
TACO adds `time_limit` and `memory_limit` as text ("1 second", "256 megabytes"; often
"None"). APPS gives no limits (its `testing_util` uses 4 s per test: the server's default
stands in).

Comparison: APPS' `testing_util.py` passes a stdio test through a cascade of exact,
stripped-line, token and `allclose` comparisons: mode `apps`; TACO's own `testing_util.py`
compares the whole stdout (`compare_std_results`): mode `taco` (verl's `prime_code` is a third
variant, used for the rows verl itself judges with it).
Call tests compare the returned value (`CallTests`). Its programs run after a block of imports
(`PRELUDE`, the task's `prefix` for a Python program).
"""

from __future__ import annotations

import json
import re
from typing import Any

from reward_server.datasets.rows import RowError, code_task, json_field, need, obj

FORMAT = "apps"
# verl's default_compute_score judges these data sources' in/outs with prime_code
# (verl/utils/reward_score/__init__.py): so do we, with its comparison
VERL_PRIME_CODE_SOURCES = ("codecontests", "apps", "codeforces", "taco", "likaixin/TACO-verified")
# APPS' testing_util (and verl's prime_code) runs every Python program after these imports, so a
# program that uses `List` or `Counter` without importing them passes there; numpy's import is
# left out (the `python` runtime has no numpy)
PRELUDE = "\n".join([
    "import sys", "import time", "import itertools",
    "from itertools import accumulate, product, permutations, combinations",
    "import collections", "from collections import Counter, OrderedDict, deque, defaultdict, ChainMap",
    "from functools import lru_cache", "import math",
    "from math import sqrt, sin, cos, tan, ceil, fabs, floor, gcd, exp, log, log2",
    "import fractions", "from typing import List, Tuple", "import random", "import heapq", "from heapq import *",
]) + "\n"
_SECONDS = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(?:s|sec|secs|second|seconds)\s*$", re.I)
_MEGABYTES = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(?:m|mb|mib|megabyte|megabytes)\s*$", re.I)


def _lines(x: Any) -> str:
    if isinstance(x, list):
        return "\n".join(str(v) for v in x) + "\n"
    return str(x)


def _call_args(x: Any) -> list:
    if isinstance(x, list):
        return x
    if isinstance(x, str):  # verl's sandbox convention: one JSON value per line
        try:
            return [json.loads(line) for line in x.split("\n") if line.strip()]
        except json.JSONDecodeError:
            return [x]
    return [x]


def _expected(x: Any) -> Any:
    if isinstance(x, str):
        try:
            return json.loads(x)
        except json.JSONDecodeError:
            return x
    return x


def _cases(gt: dict, key: str) -> list:
    x = gt.get(key)
    if x is None:
        return []
    if not isinstance(x, list | tuple):
        raise ValueError(f"verl ground truth: {key!r} must be a list (one entry per test case), got {type(x).__name__}")
    return list(x)


def _call_case(inputs: Any, output: Any) -> dict:
    """TACO/APPS store a call case's output wrapped in a one-element list (`[[2]]` for 2); verl's
    prime_code accepts `output == expected` or `output == expected[0]`. Both pass here too, but
    only for a one-element list (prime_code's `expected[0]` for longer lists would pass `1`
    against `[1, 2]`, which no careful judge would)."""
    x = _expected(output)
    case: dict[str, Any] = {"args": _call_args(inputs), "expected": x}
    if isinstance(x, list) and len(x) == 1:
        case["also_expected"] = [x[0]]
    return case


def in_outs_task(gt: dict) -> dict:
    """verl/PRIME/APPS `{"inputs": [...], "outputs": [...], "fn_name"?}`, or verl's
    `{"assert_case": ["assert f(1) == 2", ...]}` (each assert run after the program) -> our code
    task (plain values: `reward_server.labels` hands them over so)."""
    asserts = _cases(gt, "assert_case")
    if asserts:
        if not all(isinstance(a, str) for a in asserts):
            raise ValueError("verl ground truth: 'assert_case' must be a list of strings")
        return {"type": "code", "language": "python", "tests": {"kind": "assert", "asserts": asserts}}
    inputs, outputs = _cases(gt, "inputs"), _cases(gt, "outputs")
    if len(inputs) != len(outputs) or not inputs:
        raise ValueError(f"verl ground truth needs as many inputs as outputs (got {len(inputs)} and {len(outputs)})")
    fn = gt.get("fn_name")
    if fn:
        if not isinstance(fn, str):
            raise ValueError("verl ground truth: 'fn_name' must be a string")
        cases = [_call_case(i, o) for i, o in zip(inputs, outputs, strict=True)]
        tests = {"kind": "call", "fn_name": fn, "cases": cases}
    else:
        tests = {"kind": "stdio", "cases": [{"stdin": _lines(i), "stdout": _lines(o)} for i, o in zip(inputs, outputs, strict=True)]}
    task: dict[str, Any] = {"type": "code", "language": "python", "tests": tests}
    return task


def verl_task(gt: dict, data_source: object = None) -> dict:
    """verl ground truth as `in_outs_task` makes it; the in/outs of a data source verl judges
    with prime_code get its imports (`PRELUDE`) and, on stdio, its comparison (else `lines`)."""
    task = in_outs_task(gt)
    if data_source in VERL_PRIME_CODE_SOURCES and task["tests"]["kind"] != "assert":
        task["prefix"] = PRELUDE
        if task["tests"]["kind"] == "stdio":
            task["tests"]["compare"] = "prime_code"
    return task


def _limit(row: dict, field: str, pattern: re.Pattern) -> float | None:
    """TACO's text limits ("2 seconds", "256 megabytes"); "None", absent or other text -> None."""
    value = row.get(field)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value) if value > 0 else None
    m = pattern.match(value) if isinstance(value, str) else None
    return float(m.group(1)) or None if m else None


def to_task(row: dict, language: str = "python", compare: str = "apps") -> dict:
    """An APPS or TACO row: its `input_output` tests (stdio compared as the data set's own judge
    does: mode `apps`, or `taco` for TACO, whose judge compares the whole stdout), TACO's limits."""
    row = obj(row, FORMAT)
    io = json_field(row, FORMAT, "input_output")
    if io is None:
        need(row, FORMAT, "input_output")
        raise RowError(FORMAT, "input_output", "is empty: the row has no tests")
    if not isinstance(io, dict):
        raise RowError(FORMAT, "input_output", "must be a JSON object {'inputs', 'outputs', 'fn_name'?}")
    try:
        task = in_outs_task(io)
    except ValueError as e:
        raise RowError(FORMAT, "input_output", str(e).replace("verl ground truth", "").lstrip(": ")) from None
    tests = task["tests"]
    if tests["kind"] == "stdio":
        tests["compare"] = compare
        task["language"] = language
    extra = {"prefix": PRELUDE} if task["language"] == "python" else {}
    return code_task(tests, task["language"], timeout_s=_limit(row, "time_limit", _SECONDS),
                     memory=_limit(row, "memory_limit", _MEGABYTES), **extra)


def taco_task(row: dict, language: str = "python") -> dict:
    """A TACO row: APPS' schema and TACO's limits, stdout judged by TACO's own comparison."""
    return to_task(row, language, compare="taco")
