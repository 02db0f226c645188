"""MBPP (`google-research-datasets/mbpp`, full and sanitized) rows as tasks.

Schema (the data set's card): full: `task_id`, `text`, `code`, `test_list`, `test_setup_code`,
`challenge_test_list`; sanitized: `task_id`, `prompt`, `code`, `test_imports`, `test_list`.
Each of `test_list` is one assert, one test here; the setup (`test_setup_code`, or the
`test_imports` lines) runs before each. The original evaluation runs `test_list` only, so
the challenge tests are not added. The functions of the reference `code` that the asserts
call are listed in `candidate_names`, so one named like a builtin (MBPP/126's `sum`) reaches
the candidate's, not the builtin. Limits: none per problem (server defaults).
"""

from __future__ import annotations

import ast

from reward_server.datasets.rows import RowError, code_task, need, obj

FORMAT = "mbpp"


def _defined(code: object) -> set[str]:
    """Top-level function names of the reference solution (none where it does not parse)."""
    if not isinstance(code, str):
        return set()
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return set()
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}


def _called(asserts: list[str]) -> set[str]:
    names: set[str] = set()
    for a in asserts:
        try:
            tree = ast.parse(a)
        except (SyntaxError, ValueError):
            continue  # the server names a broken assert (check_sources)
        names |= {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    return names


def to_task(row: dict, language: str = "python") -> dict:
    """The row's `test_list`, one test each, after its setup."""
    row = obj(row, FORMAT)
    asserts = need(row, FORMAT, "test_list")
    if not isinstance(asserts, list) or not asserts or not all(isinstance(a, str) for a in asserts):
        raise RowError(FORMAT, "test_list", "must be a non-empty list of assert statements")
    setup = row.get("test_setup_code")
    if setup is None and row.get("test_imports") is not None:
        imports = row["test_imports"]
        if not isinstance(imports, list) or not all(isinstance(i, str) for i in imports):
            raise RowError(FORMAT, "test_imports", "must be a list of import lines")
        setup = "\n".join(imports)
    if setup is not None and not isinstance(setup, str):
        raise RowError(FORMAT, "test_setup_code", "must be a string")
    tests: dict = {"kind": "assert", "asserts": asserts}
    if setup:
        tests["setup"] = setup
    names = sorted(_defined(row.get("code")) & _called(asserts))
    if names:
        tests["candidate_names"] = names
    return code_task(tests, language)
