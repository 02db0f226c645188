"""DeepMind's CodeContests (`deepmind/code_contests`) rows as tasks.

Schema (the data set's card and `contest_problem.proto` in google-deepmind/code_contests):
`public_tests`, `private_tests`, `generated_tests`, each `{"input": [str], "output": [str]}`;
`time_limit` a `google.protobuf.Duration` `{"seconds", "nanos"}` (null when unknown);
`memory_limit_bytes` (0 when unknown); `input_file` / `output_file` (a few old problems read
files; ours read stdin). Solutions are given in `solutions.language` codes 1 PYTHON (2),
2 CPP, 3 PYTHON3, 4 JAVA; the candidate's language is the caller's choice, and stdio tests
judge any language the server runs.

Comparison: the data set's own tester (`execution/tester_sandboxer.cc`) compares
whitespace-separated tokens, case-insensitively, doubles within 1e-5: mode `codecontests`.
"""

from __future__ import annotations

from reward_server.datasets.rows import RowError, code_task, obj, positive, stdio_cases, strings

FORMAT = "codecontests"
TEST_SETS = ("public_tests", "private_tests", "generated_tests")


def _seconds(row: dict) -> float | None:
    tl = row.get("time_limit")
    if tl is None:
        return None
    if not isinstance(tl, dict):
        raise RowError(FORMAT, "time_limit", "must be {'seconds', 'nanos'} (a protobuf Duration)")
    s = positive(tl.get("seconds") or 0, FORMAT, "time_limit.seconds") or 0.0
    ns = positive(tl.get("nanos") or 0, FORMAT, "time_limit.nanos") or 0.0
    return (s + ns / 1e9) or None


def to_task(row: dict, language: str = "python", test_sets: tuple[str, ...] = TEST_SETS) -> dict:
    """Public, private and generated tests (in that order; `test_sets` picks), the row's limits,
    mode `codecontests`."""
    row = obj(row, FORMAT)
    cases: list[dict] = []
    for name in test_sets:
        if name not in TEST_SETS:
            raise RowError(FORMAT, name, f"is not a test set; CodeContests has {', '.join(TEST_SETS)}")
        tests = row.get(name)
        if tests is None:
            continue
        if not isinstance(tests, dict):
            raise RowError(FORMAT, name, "must be {'input': [...], 'output': [...]}")
        inputs = strings(tests.get("input", []), FORMAT, f"{name}.input")
        outputs = strings(tests.get("output", []), FORMAT, f"{name}.output")
        cases += stdio_cases(inputs, outputs, FORMAT, name)
    if not cases:
        raise RowError(FORMAT, " / ".join(test_sets), "is missing or empty: the row has no tests")
    memory = positive(row.get("memory_limit_bytes"), FORMAT, "memory_limit_bytes")
    return code_task({"kind": "stdio", "cases": cases, "compare": "codecontests"}, language,
                     timeout_s=_seconds(row), memory=None if memory is None else memory / (1 << 20))
