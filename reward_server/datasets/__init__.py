"""Data set rows as tasks: one converter per published format, and the names that route to it.

`to_task(format, row)` turns one row, exactly as the data set publishes it, into our code
task (a plain dict, `reward_server.schemas.CodeTask`'s fields) with the comparison mode of the
data set's own tester, the row's time and memory limits, its checker and interactor;
`format_of(data_source)` maps a data set's name (verl's `data_source`, a Hub id) to its
format. A row that does not fit is a `RowError` naming the field (a 422 at the API).
Each module cites the schema it reads; docs/JUDGING.md has the table.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from reward_server.datasets import apps, codecontests, codeforces, humaneval, livecodebench, mbpp
from reward_server.datasets.rows import RowError, plain

__all__ = ["CONVERTERS", "FORMATS", "RowError", "dataset_task", "format_of", "plain", "to_task"]

CONVERTERS: dict[str, Callable[..., dict]] = {
    codecontests.FORMAT: codecontests.to_task,
    apps.FORMAT: apps.to_task,
    "taco": apps.taco_task,
    livecodebench.FORMAT: livecodebench.to_task,
    codeforces.FORMAT: codeforces.to_task,
    humaneval.FORMAT: humaneval.to_task,
    mbpp.FORMAT: mbpp.to_task,
}
FORMATS = tuple(CONVERTERS)

# names a data set goes by (Hub ids, verl data_source values), lower-cased -> format
_ALIASES = {
    "deepmind/code_contests": "codecontests", "code_contests": "codecontests",
    "codeparrot/apps": "apps", "baai/taco": "taco",
    "livecodebench/code_generation_lite": "livecodebench", "livecodebench/code_generation": "livecodebench",
    "open-r1/codeforces": "codeforces",
    "openai/openai_humaneval": "humaneval", "openai_humaneval": "humaneval",
    "google-research-datasets/mbpp": "mbpp", "mbpp_sanitized": "mbpp",
}


def format_of(name: Any) -> str | None:
    """The format a data set's name routes to (`deepmind/code_contests`, `codecontests`,
    `open-r1/codeforces`, ...); None for a name we do not know."""
    if not isinstance(name, str):
        return None
    key = name.strip().lower()
    if key in CONVERTERS:
        return key
    return _ALIASES.get(key)


def to_task(fmt: str, row: Any, language: str = "python") -> dict:
    """Our code task from one row of data set format `fmt` (a name `format_of` knows)."""
    name = format_of(fmt)
    if name is None:
        raise RowError("dataset", "format", f"{fmt!r} is not a format we read; known: {', '.join(FORMATS)}")
    return CONVERTERS[name](plain(row), language=language)


def dataset_task(spec: dict) -> dict:
    """`{"type": "dataset", "format": ..., "row": {...}, "language"?: ...}` -> our code task:
    a data set's row sent as it is (an OpenRLHF label, a JSON task column)."""
    for field in ("format", "row"):
        if spec.get(field) is None:
            raise RowError("dataset", field, "is missing (a dataset task is {'type': 'dataset', 'format', 'row'})")
    extra = sorted(set(spec) - {"type", "format", "row", "language"})
    if extra:
        raise RowError("dataset", extra[0], "is not a field of a dataset task (type, format, row, language)")
    language = spec.get("language") or "python"
    if not isinstance(language, str):
        raise RowError("dataset", "language", "must be a string")
    return to_task(spec["format"], spec["row"], language=language)
