"""Turning other stacks' data into our items: completions (plain or chat messages) and
tasks (our task object, its JSON string, verl's `{"inputs", "outputs", "fn_name"?}`, or a
bare math answer).

The one normalisation of foreign task data, used by every integration (TRL, verl, OpenRLHF's
route, the Python client): what `datasets` and pandas hand over becomes plain JSON (`plain`),
and a null at one of our model levels (the task, its tests, a case, a checker) means the key
is absent (`without_absent`): a `datasets` struct column holds every key any row had and fills
the others with null. Values inside a case (`args`, `expected`, ...) are data and kept as given.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from reward_server import jsonsteps

DEFAULT_URL = "http://127.0.0.1:8000"
_SMALL = 1 << 20


def server_url(url: str | list[str] | None = None) -> str | list[str]:
    return url or os.environ.get("REWARD_SERVER_URL") or DEFAULT_URL


def server_token(token: str | None = None) -> str | None:
    return token or os.environ.get("REWARD_SERVER_TOKEN") or None


_MISSING = ("NAType", "NaTType")  # pandas' markers of a missing value


def plain(x: Any) -> Any:
    """Plain JSON values from what `datasets`, pandas and numpy hand over: arrays and numpy
    scalars -> lists and numbers, mappings -> dicts, tuples -> lists, pandas' NA -> None, at
    every depth (a struct column read through pandas holds arrays inside dicts)."""
    if x is None or isinstance(x, str | bool | int | float):
        return x
    if isinstance(x, Mapping):
        return {k if isinstance(k, str) else str(plain(k)): plain(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [plain(v) for v in x]
    if type(x).__name__ in _MISSING:
        return None
    if hasattr(x, "tolist") and not isinstance(x, bytes | bytearray):
        return plain(x.tolist())
    return x


def _present(d: dict) -> dict:
    return {k: v for k, v in d.items() if v is not None}


def without_absent(task: dict) -> dict:
    """`task` without its null fields at our model levels: the task, `tests`, each of
    `tests.cases`, `tests.checker` / `tests.interactor`. A null there is the key of another
    row of the same column (so `language: null` is the default language, not an error);
    a case's own values stay as they are (`expected: null` is a call's `None`)."""
    t = _present(task)
    tests = t.get("tests")
    if isinstance(tests, dict):
        tests = _present(tests)
        cases = tests.get("cases")
        if isinstance(cases, list):
            tests["cases"] = [_present(c) if isinstance(c, dict) else c for c in cases]
        for key in ("checker", "interactor"):
            if isinstance(tests.get(key), dict):
                tests[key] = _present(tests[key])
        t["tests"] = tests
    return t


def normal_task(task: Any) -> Any:
    """A task object as we take it from any integration: plain values, absent nulls dropped.
    Anything that is not an object passes as plain values (the server names what is wrong)."""
    task = plain(task)
    return without_absent(task) if isinstance(task, dict) else task


def completion_text(c: Any) -> str:
    """A completion: a string, or TRL's conversational form `[{"role": "assistant", "content": ...}]`."""
    if isinstance(c, str):
        return c
    if isinstance(c, dict):
        return _content_text(c.get("content", ""))
    if isinstance(c, list | tuple):
        msgs = [m for m in c if isinstance(m, dict)]
        assistant = [m for m in msgs if m.get("role", "assistant") == "assistant"] or msgs
        return "\n".join(_content_text(m.get("content", "")) for m in assistant)
    return str(c)


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # multimodal parts
        return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    return "" if content is None else str(content)


def _lines(x: Any) -> str:
    x = plain(x)
    if isinstance(x, list):
        return "\n".join(str(v) for v in x) + "\n"
    return str(x)


def _call_args(x: Any) -> list:
    x = plain(x)
    if isinstance(x, list):
        return x
    if isinstance(x, str):  # verl's sandbox convention: one JSON value per line
        try:
            return [json.loads(line) for line in x.split("\n") if line.strip()]
        except json.JSONDecodeError:
            return [x]
    return [x]


def _expected(x: Any) -> Any:
    x = plain(x)
    if isinstance(x, str):
        try:
            return json.loads(x)
        except json.JSONDecodeError:
            return x
    return x


def _cases(gt: dict, key: str) -> list:
    x = plain(gt.get(key))
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


def verl_in_outs_task(gt: dict) -> dict:
    """verl/PRIME/APPS `{"inputs": [...], "outputs": [...], "fn_name"?}`, or verl's
    `{"assert_case": ["assert f(1) == 2", ...]}` (each assert run after the program) -> our code task."""
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


def task_of(label: Any) -> Any:
    """Our task from whatever a dataset column holds; a non-object string is a math answer."""
    label = normal_task(label)
    if isinstance(label, dict):
        if "type" in label or "tests" in label:
            return label
        if ("inputs" in label and "outputs" in label) or "assert_case" in label:
            return verl_in_outs_task(label)
        if "answer" in label:
            return {"type": "math", **label}
        return label
    if isinstance(label, str):
        s = label.strip()
        if s.startswith("{"):
            try:
                obj = json.loads(s) if len(s) < _SMALL else jsonsteps.loads(s)  # a big label: in steps
            except json.JSONDecodeError:
                obj = None
            if isinstance(obj, dict):
                return task_of(obj)
        return {"type": "math", "answer": label}
    if isinstance(label, int | float) and not isinstance(label, bool):
        return {"type": "math", "answer": str(label)}
    return label
