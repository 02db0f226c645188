"""LiveCodeBench (`livecodebench/code_generation_lite`) rows as tasks.

Schema (`lcb_runner/benchmarks/code_generation.py` in LiveCodeBench/LiveCodeBench, and the
data set's card): `public_test_cases`, a JSON string of `[{"input", "output", "testtype"}]`
with `testtype` "stdin" or "functional"; `private_test_cases`, the same list either as JSON
or (code_generation_lite) as base64 of zlib of a pickle of that JSON string; `metadata`, a
JSON string whose `func_name` names the method of `class Solution` (from `starter_code`) that
functional tests call. A functional test's `input` is one JSON value per line (the
arguments), its `output` one JSON value.

The private tests are pickles, and a pickle from a row is untrusted data: ours is read by an
unpickler whose `find_class` refuses every global, so only plain values (str, bytes, numbers,
lists, dicts, tuples) can come out and no callable can be reached (Python's documented way of
"restricting globals"); the result must be the JSON string, decompressed to at most
`MAX_PRIVATE_BYTES`.

LiveCodeBench's `testing_util.py` runs each Python program after its `import_string` (star
imports of the standard modules a solution may use, `typing` included): the task's `prefix`.
Comparison: it compares stdin tests line by line after
stripping, with a decimal fallback per line: mode `livecodebench`; functional tests compare
the returned value exactly (`CallTests`, no float tolerance). LiveCodeBench gives no limits
per problem (its runner's timeout is a command-line flag): the server's defaults stand in.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import pickle
import zlib
from typing import Any

from reward_server.datasets.rows import RowError, code_task, json_field, obj

FORMAT = "livecodebench"
MAX_PRIVATE_BYTES = 256 << 20  # decompressed private tests of one row
# testing_util's import_string: every Python program runs after these star-imports, the same
# modules imported by name, and a recursion limit of 50000 (the task's `prefix`)
_MODULES = ("string", "re", "datetime", "collections", "heapq", "bisect", "copy", "math", "random", "statistics",
            "itertools", "functools", "operator", "io", "sys", "json")
PRELUDE = ("".join(f"from {m} import *\n" for m in (*_MODULES, "builtins", "typing"))
           + "".join(f"import {m}\n" for m in _MODULES) + "sys.setrecursionlimit(50000)\n")


class _PlainUnpickler(pickle.Unpickler):
    """Plain values only: no global (class, function) may be named, so nothing can be called."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"global {module}.{name} refused (plain values only)")


def _unpickle_plain(data: bytes) -> Any:
    return _PlainUnpickler(io.BytesIO(data)).load()


def private_tests(value: str) -> list:
    """The private tests of a row: JSON, or base64(zlib(pickle(JSON string)))."""
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        pass
    field = "private_test_cases"
    try:
        packed = base64.b64decode(value.encode("ascii"), validate=True)
    except (UnicodeEncodeError, binascii.Error, ValueError):
        raise RowError(FORMAT, field, "is neither JSON nor base64") from None
    d = zlib.decompressobj()
    try:
        raw = d.decompress(packed, MAX_PRIVATE_BYTES)
    except zlib.error as e:
        raise RowError(FORMAT, field, f"is not zlib data ({e})") from None
    if d.unconsumed_tail:
        raise RowError(FORMAT, field, f"decompresses past {MAX_PRIVATE_BYTES} bytes")
    try:
        text = _unpickle_plain(raw)
    except Exception as e:  # any malformed or refused pickle is the row's fault, said so
        raise RowError(FORMAT, field, f"is not a pickle of plain values ({type(e).__name__}: {e})") from None
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if isinstance(text, list):
        return text
    if not isinstance(text, str):
        raise RowError(FORMAT, field, f"unpickles to {type(text).__name__}, not the JSON string of the tests")
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise RowError(FORMAT, field, f"holds invalid JSON ({e.msg})") from None


def _tests(row: dict) -> list[dict]:
    tests: list = []
    for field in ("public_test_cases", "private_test_cases"):
        value = row.get(field)
        if value is None or value == "":
            continue
        got = private_tests(value) if field == "private_test_cases" and isinstance(value, str) \
            else json_field(row, FORMAT, field, [])
        if not isinstance(got, list):
            raise RowError(FORMAT, field, "must be a list of {'input', 'output', 'testtype'}")
        for i, t in enumerate(got):
            if not isinstance(t, dict) or not isinstance(t.get("input"), str) or not isinstance(t.get("output"), str):
                raise RowError(FORMAT, f"{field}[{i}]", "must have 'input' and 'output' strings")
            if t.get("testtype") not in ("stdin", "functional"):
                raise RowError(FORMAT, f"{field}[{i}].testtype", f"must be 'stdin' or 'functional', got {t.get('testtype')!r}")
        tests += got
    if not tests:
        raise RowError(FORMAT, "public_test_cases / private_test_cases", "is missing or empty: the row has no tests")
    return tests


def _call_case(test: dict, i: int) -> dict:
    try:
        args = [json.loads(line) for line in test["input"].split("\n") if line.strip()]
        expected = json.loads(test["output"])
    except json.JSONDecodeError as e:
        raise RowError(FORMAT, f"test {i}", f"functional input/output is not JSON ({e.msg})") from None
    return {"args": args, "expected": expected}


def to_task(row: dict, language: str = "python") -> dict:
    """Stdin tests (mode `livecodebench`) or functional tests (calls of `metadata.func_name`)."""
    row = obj(row, FORMAT)
    tests = _tests(row)
    kinds = {t["testtype"] for t in tests}
    if len(kinds) > 1:
        raise RowError(FORMAT, "testtype", "mixes stdin and functional tests in one row")
    extra = {"prefix": PRELUDE} if language == "python" else {}
    if kinds == {"stdin"}:
        cases = [{"stdin": t["input"], "stdout": t["output"]} for t in tests]
        return code_task({"kind": "stdio", "cases": cases, "compare": "livecodebench"}, language, **extra)
    meta = json_field(row, FORMAT, "metadata", {})
    fn = meta.get("func_name") if isinstance(meta, dict) else None
    if not isinstance(fn, str) or not fn:
        raise RowError(FORMAT, "metadata.func_name", "is missing: functional tests need the method's name")
    cases = [_call_case(t, i) for i, t in enumerate(tests)]
    return code_task({"kind": "call", "fn_name": fn, "cases": cases, "float_tolerance": None}, language, **extra)
