"""HumanEval (`openai/openai_humaneval`) rows as tasks.

Schema (the data set's card; `human_eval/data.py` and `execution.py` in openai/human-eval):
`task_id`, `prompt` (the signature and docstring), `canonical_solution`, `test` (defines
`check(candidate)`), `entry_point`. The harness runs `prompt + completion + test +
check(entry_point)`: the task's `prefix` is the prompt, so a completion that is the body alone
passes as it does there, and one that restates the whole function replaces the prompt's.
Limits: none per problem (the harness's timeout is an argument): the server's defaults.
"""

from __future__ import annotations

from reward_server.datasets.rows import RowError, code_task, need

FORMAT = "humaneval"


def to_task(row: dict, language: str = "python") -> dict:
    """`check(candidate)` of the row's test, called with its entry point, after the prompt."""
    test, entry, prompt = (need(row, FORMAT, f) for f in ("test", "entry_point", "prompt"))
    for field, value in (("test", test), ("entry_point", entry), ("prompt", prompt)):
        if not isinstance(value, str):
            raise RowError(FORMAT, field, "must be a string")
    return code_task({"kind": "assert", "test": test, "entry_point": entry}, language, prefix=prompt)
