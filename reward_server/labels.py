"""Turning other stacks' data into our items: completions (plain or chat messages) and
tasks (our task object, its JSON string, verl's `{"inputs", "outputs", "fn_name"?}`, or a
bare math answer)."""

from __future__ import annotations

import json
import os
from typing import Any

from reward_server import jsonsteps

DEFAULT_URL = "http://127.0.0.1:8000"
_SMALL = 1 << 20


def server_url(url: str | list[str] | None = None) -> str | list[str]:
    return url or os.environ.get("REWARD_SERVER_URL") or DEFAULT_URL


def server_token(token: str | None = None) -> str | None:
    return token or os.environ.get("REWARD_SERVER_TOKEN") or None


def _plain(x: Any) -> Any:
    """numpy arrays/scalars (verl, datasets) -> plain Python."""
    if hasattr(x, "tolist") and not isinstance(x, str | bytes):
        return x.tolist()
    return x


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
    x = _plain(x)
    if isinstance(x, list):
        return "\n".join(str(v) for v in x) + "\n"
    return str(x)


def _call_args(x: Any) -> list:
    x = _plain(x)
    if isinstance(x, list):
        return x
    if isinstance(x, str):  # verl's sandbox convention: one JSON value per line
        try:
            return [json.loads(line) for line in x.split("\n") if line.strip()]
        except json.JSONDecodeError:
            return [x]
    return [x]


def _expected(x: Any) -> Any:
    x = _plain(x)
    if isinstance(x, str):
        try:
            return json.loads(x)
        except json.JSONDecodeError:
            return x
    return x


def _cases(gt: dict, key: str) -> list:
    x = _plain(gt.get(key))
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
    label = _plain(label)
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
