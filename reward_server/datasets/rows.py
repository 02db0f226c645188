"""What every data set converter shares: plain values from `datasets`/pandas, the row error
that names the missing field, and reading a row's fields (a JSON string column, a number, a
list of test strings).

A converter takes one row exactly as its data set publishes it and returns our code task as
a plain dict (`reward_server.schemas.CodeTask`'s fields); a row that does not match the
schema is a `RowError` naming the field, which the routes answer with a 422.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

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


class RowError(ValueError):
    """A data set row that does not match its published schema; the message names the field."""

    def __init__(self, fmt: str, field: str, why: str):
        self.fmt, self.field = fmt, field
        super().__init__(f"{fmt} row: {field!r} {why}")


def obj(row: Any, fmt: str) -> dict:
    """The row itself, which must be an object (one row of the data set, all its columns)."""
    if not isinstance(row, dict):
        raise RowError(fmt, "<row>", f"must be an object (the data set's row), got {type(row).__name__}")
    return row


def need(row: Any, fmt: str, field: str) -> Any:
    """`row[field]`, or a RowError saying it is missing (a null counts as missing)."""
    value = obj(row, fmt).get(field)
    if value is None:
        raise RowError(fmt, field, "is missing")
    return value


def json_field(row: dict, fmt: str, field: str, default: Any = None) -> Any:
    """A column the data set stores as a JSON string (APPS' `input_output`, LiveCodeBench's
    `metadata`); already-parsed values are taken as they are; absent or empty -> `default`."""
    value = row.get(field)
    if value is None or (isinstance(value, str) and not value.strip()):
        return default
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError as e:
            raise RowError(fmt, field, f"is not valid JSON ({e.msg} at {e.pos})") from None
    return value


def strings(value: Any, fmt: str, field: str) -> list[str]:
    """A list of test strings (CodeContests' `input`/`output`), each a str."""
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise RowError(fmt, field, "must be a list of strings")
    return value


def positive(value: Any, fmt: str, field: str) -> float | None:
    """A limit as a positive number; 0 (the data set's 'not given') -> None."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise RowError(fmt, field, f"must be a non-negative number, got {value!r}")
    return float(value) if value > 0 else None


def memory_mb(mb: float | None) -> int | None:
    """A memory limit in MiB, rounded up; at least 16 (the sandbox's floor)."""
    return None if mb is None else max(16, math.ceil(mb))


def code_task(tests: dict, language: str = "python", timeout_s: float | None = None,
              memory: float | None = None, **extra: Any) -> dict:
    """Our code task from a converter's parts; absent limits stay absent (the server's defaults)."""
    task: dict[str, Any] = {"type": "code", "language": language, "tests": tests, **extra}
    if timeout_s is not None:
        task["timeout_s"] = timeout_s
    if (mb := memory_mb(memory)) is not None:
        task["memory_mb"] = mb
    return task


def stdio_cases(inputs: list[str], outputs: list[str], fmt: str, field: str) -> list[dict]:
    if len(inputs) != len(outputs):
        raise RowError(fmt, field, f"has {len(inputs)} inputs but {len(outputs)} outputs")
    return [{"stdin": i, "stdout": o} for i, o in zip(inputs, outputs, strict=True)]

