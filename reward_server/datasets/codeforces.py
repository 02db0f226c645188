"""open-r1's Codeforces (`open-r1/codeforces`) rows as tasks.

Schema (the data set's card): `official_tests` `[{"input", "output"}]` (with
`official_tests_complete`), `time_limit` (seconds) and `memory_limit` (MB) as floats,
`input_mode` "stdio" or "file", `generated_checker` (a Python checker, null where plain
comparison judges), `interaction_format` (set for interactive problems), and
`generated_tests`: in the card's default config a count, the tests themselves in the
`generated_tests/*.parquet` files; a row whose `generated_tests` holds the joined list of
`{"input", "output"}` gets them after the official ones (open-r1's `cf_scoring.py` does the
same).

Judging as open-r1's own runner does (its piston package's `run` script and
`cf_scoring.py`): the program runs on the test's input under the row's limits; with a
`generated_checker`, `python3 checker.py <input> <correct output> <program output>` decides,
printing 1 (or 100) for a correct answer; without one, the whitespace-separated tokens must
match: mode `tokens` (the script also folds the case of the words yes/no, which `tokens`
does not). The generated checker's calling convention is not testlib's, so the task's checker
is a Python adapter that runs it with open-r1's argument order and maps its printed verdict to
testlib's exit codes (0 accepted, 1 wrong answer).

Interactive problems: the data set ships no interactor; a row with `interaction_format` is
refused unless it carries an `interactor` (testlib C++ source) of its own. `input_mode`
"file" (the program reads input.txt) is refused: our tests are stdin/stdout.
"""

from __future__ import annotations

from typing import Any

from reward_server.datasets.rows import RowError, code_task, obj, positive

FORMAT = "codeforces"

# The adapter: testlib's `checker <input> <output> <answer>`, exit 0/1, around open-r1's
# `checker.py <input> <correct output> <program output>` that prints 1 or 100 when correct.
# open-r1's run script drops \r and blank lines from the answer and blank lines from the
# output before its checker reads them; the adapter does the same where it can write a copy.
_ADAPTER = r'''
import contextlib, io, os, sys, tempfile

SOURCE = __SOURCE__


def _copy(path, d, name, drop_cr):
    with open(path, encoding="utf-8", errors="replace", newline="") as f:
        text = f.read()
    lines = text.split("\n")
    if drop_cr:
        lines = [line[:-1] if line.endswith("\r") else line for line in lines]
    out = os.path.join(d, name)
    with open(out, "w", encoding="utf-8", newline="") as f:
        f.write("".join(line + "\n" for line in lines if line))
    return out


def main():
    inp, out, ans = sys.argv[1:4]
    try:
        d = tempfile.mkdtemp()
        inp = _copy(inp, d, "input.txt", True)
        ans = _copy(ans, d, "correct_output.txt", True)
        out = _copy(out, d, "solution_output.txt", False)
    except OSError:
        pass  # no writable directory: the files as they are
    sys.argv = ["checker.py", inp, ans, out]
    buf = io.StringIO()
    code = 0
    try:
        with contextlib.redirect_stdout(buf):
            exec(compile(SOURCE, "checker.py", "exec"), {"__name__": "__main__"})
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException as e:
        print("checker.py raised %s: %s" % (type(e).__name__, e), file=sys.stderr)
        code = 1
    verdict = "".join(buf.getvalue().split())
    print("checker.py printed %r, exit %d" % (verdict[:40], code), file=sys.stderr)
    sys.exit(0 if code == 0 and verdict in ("1", "100") else 1)


main()
'''


def checker_adapter(source: str) -> str:
    """A testlib-protocol Python checker that runs open-r1's generated `checker.py` source."""
    return _ADAPTER.replace("__SOURCE__", repr(source), 1)


def _tests(row: dict, field: str) -> list[dict]:
    tests = row.get(field)
    if tests is None or isinstance(tests, int):  # the card's count of generated tests: held elsewhere
        return []
    if not isinstance(tests, list):
        raise RowError(FORMAT, field, "must be a list of {'input', 'output'}")
    for i, t in enumerate(tests):
        if not isinstance(t, dict) or not isinstance(t.get("input"), str) or not isinstance(t.get("output"), str):
            raise RowError(FORMAT, f"{field}[{i}]", "must have 'input' and 'output' strings")
    return [{"stdin": t["input"], "stdout": t["output"]} for t in tests]


def to_task(row: dict, language: str = "python") -> dict:
    """Official then generated tests, the row's limits, its checker (adapted) or mode `tokens`."""
    row = obj(row, FORMAT)
    mode = row.get("input_mode") or "stdio"
    if mode != "stdio":
        raise RowError(FORMAT, "input_mode", f"is {mode!r}: the program reads files; only stdio problems are judged here")
    cases = _tests(row, "official_tests") + _tests(row, "generated_tests")
    if not cases:
        raise RowError(FORMAT, "official_tests", "is missing or empty: the row has no tests")
    tests: dict[str, Any] = {"kind": "stdio", "cases": cases, "compare": "tokens"}
    checker = row.get("generated_checker")
    if checker:
        if not isinstance(checker, str):
            raise RowError(FORMAT, "generated_checker", "must be the checker's Python source")
        tests["checker"] = {"language": "python", "source": checker_adapter(checker)}
    if row.get("interaction_format"):
        interactor = row.get("interactor")
        if not isinstance(interactor, str) or not interactor.strip():
            raise RowError(FORMAT, "interactor", "is missing: an interactive problem (interaction_format is set) "
                           "needs an interactor, and open-r1's codeforces ships none; add the column (testlib C++ source)")
        tests["interactor"] = {"language": "cpp", "source": interactor}
    return code_task(tests, language, timeout_s=positive(row.get("time_limit"), FORMAT, "time_limit"),
                     memory=positive(row.get("memory_limit"), FORMAT, "memory_limit"))
