"""Turning other stacks' data into our items: completions (plain or chat messages) and
tasks (our task object, its JSON string, verl's `{"inputs", "outputs", "fn_name"?}`, a data
set's own row routed by its name to `reward_server.datasets`, or a bare math answer).

The one normalisation of foreign task data, used by every integration (TRL, verl, OpenRLHF's
route, the Python client): what `datasets` and pandas hand over becomes plain JSON (`plain`),
and a null at one of our model levels (the task, its tests, a case, a checker) means the key
is absent (`without_absent`): a `datasets` struct column holds every key any row had and fills
the others with null. Values inside a case (`args`, `expected`, ...) are data and kept as given.
"""

from __future__ import annotations

import json
import os
from typing import Any

from reward_server import datasets, jsonsteps
from reward_server.datasets.apps import in_outs_task as verl_in_outs_task
from reward_server.datasets.apps import verl_task
from reward_server.datasets.rows import plain

__all__ = ["completion_text", "normal_task", "plain", "server_token", "server_url", "task_of", "verl_in_outs_task",
           "without_absent"]

DEFAULT_URL = "http://127.0.0.1:8000"
_SMALL = 1 << 20


def server_url(url: str | list[str] | None = None) -> str | list[str]:
    return url or os.environ.get("REWARD_SERVER_URL") or DEFAULT_URL


def server_token(token: str | None = None) -> str | None:
    return token or os.environ.get("REWARD_SERVER_TOKEN") or None


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


def task_of(label: Any, data_source: Any = None) -> Any:
    """Our task from whatever a dataset column holds; a non-object string is a math answer.

    A data set's own row becomes a task by its format (`reward_server.datasets`): sent as
    `{"type": "dataset", "format", "row"}`, or as the bare row with `data_source` naming the
    data set (verl's `data_source` column, a Hub id). Our task and verl's in/outs win over the
    routing, so a verl data set whose `data_source` is "codecontests" keeps its ground truth
    (judged with prime_code's comparison, as verl judges it)."""
    label = normal_task(label)
    if isinstance(label, dict):
        if label.get("type") == "dataset":
            return datasets.dataset_task(label)
        if "type" in label or "tests" in label:
            return label
        if ("inputs" in label and "outputs" in label) or "assert_case" in label:
            return verl_task(label, data_source)
        if (fmt := datasets.format_of(data_source)) is not None:
            return datasets.to_task(fmt, label)
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
                return task_of(obj, data_source)
        return {"type": "math", "answer": label}
    if isinstance(label, int | float) and not isinstance(label, bool):
        return {"type": "math", "answer": str(label)}
    return label
