"""Code grading on the server side: cut the program out of a completion, build the
sandbox job, and shape the runner's per-test verdicts into one reward."""

from __future__ import annotations

import re
from dataclasses import dataclass

from reward_server.schemas import CodeTask, ExtractOptions
from reward_server.settings import Weights
from sandbox.jobs import Job, JobResult, Limits
from sandbox.runner import languages

# An opening fence: three or more backticks, an optional info string, end of line.
_FENCE_OPEN = re.compile(r"^[ \t]*(`{3,})[ \t]*([\w+.#-]*)[^\n`]*\n", re.MULTILINE)
_PYTHON_TAGS = {"python", "py", "python3", "py3"}


@dataclass(frozen=True)
class Block:
    lang: str
    code: str
    closed: bool


def fenced_blocks(text: str) -> list[Block]:
    """All fenced blocks in order. A last fence left open (a truncated completion) runs to the end."""
    blocks: list[Block] = []
    pos = 0
    while True:
        m = _FENCE_OPEN.search(text, pos)
        if m is None:
            return blocks
        ticks, lang = m.group(1), m.group(2).lower()
        close = re.compile(r"^[ \t]*" + ticks + r"`*[ \t]*$", re.MULTILINE)
        c = close.search(text, m.end())
        if c is None:
            blocks.append(Block(lang, text[m.end():], closed=False))
            return blocks
        blocks.append(Block(lang, text[m.end():c.start()], closed=True))
        pos = c.end()


def strip_think(text: str) -> str:
    i = text.rfind("</think>")
    return text[i + len("</think>"):] if i >= 0 else text


def fence_tags(language: str) -> tuple[str, set[str]]:
    """(the mode name, the fence tags) of a task's language: ```python for python, ```cpp,
    ```c++ ... for C++ (sandbox.runner.languages' aliases)."""
    lang = languages.get(language) if language != "python" else None
    if lang is None:
        return "last_python_fence", _PYTHON_TAGS
    return f"last_{lang.name}_fence", {lang.name, *lang.aliases}


def extract_code(completion: str, options: ExtractOptions | None = None, language: str = "python") -> tuple[str, str]:
    """Return (program, mode used): the last fence of the task's language (```python by
    default), else the first fence, else the raw text."""
    opts = options or ExtractOptions()
    text = strip_think(completion) if opts.strip_think else completion
    if opts.mode == "raw":
        return text, "raw"
    blocks = fenced_blocks(text)
    if opts.mode in ("auto", "last_python_fence"):
        mode, tags = fence_tags(language)
        mine = [b for b in blocks if b.lang in tags]
        if mine:
            return mine[-1].code, mode
        if opts.mode == "last_python_fence":
            return text, "raw"
    if not blocks:
        return text, "raw"
    if opts.mode == "last_fence":
        return blocks[-1].code, "last_fence"
    return blocks[0].code, "first_fence"


def build_job(program: str, task: CodeTask, default_limits: Limits | None = None) -> Job:
    limits = default_limits or Limits()
    update: dict[str, float | int] = {}
    if task.timeout_s is not None:
        update["timeout_s"] = task.timeout_s
    if task.memory_mb is not None:
        update["memory_mb"] = task.memory_mb
    if update:
        limits = limits.model_copy(update=update)
    return Job(program=task.prefix + program, language=task.language, tests=task.tests, limits=limits)


def shape_reward(result: JobResult, weights: Weights) -> float:
    """`w_syntax*syntax_ok + w_runtime*runs + w_tests*passed/total`, normalised so that a program
    that compiles, runs and passes everything scores exactly `sum(weights)` (1.0 by default).

    With no tests at all (total == 0) the test term counts as passed only if the program runs.
    """
    if result.total > 0:
        frac = result.passed / result.total
    else:
        frac = 1.0 if (result.syntax_ok and result.runs) else 0.0
    r = weights.syntax * float(result.syntax_ok) + weights.runtime * float(result.runs) + weights.tests * frac
    return round(r, 10)


def code_detail(result: JobResult, mode: str, code_chars: int) -> dict:
    return {
        "kind": "code",
        "syntax_ok": result.syntax_ok,
        "runs": result.runs,
        "passed": result.passed,
        "total": result.total,
        "tests": [{"status": t.status, "time_s": round(t.time_s, 6), "message": t.message} for t in result.tests],
        "load_message": result.load_message,
        "extract_mode": mode,
        "code_chars": code_chars,
        "wall_s": round(result.wall_s, 6),
        "runner": result.runner,
        **({"compile": result.compile.model_dump()} if result.compile is not None else {}),
    }
