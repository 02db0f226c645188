"""Code grading on the server side: cut the program out of a completion, build the
sandbox job, and shape the runner's per-test verdicts into one reward."""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass

from reward_server.schemas import CodeTask, ExtractOptions
from reward_server.settings import Weights
from sandbox.jobs import AssertCheckTests, Job, JobResult, Limits
from sandbox.runner import languages

_PYTHON_TAGS = {"python", "py", "python3", "py3"}
_SOURCE_CACHE_CHARS = 1 << 16  # a group's items share their task: its sources are checked once


@functools.lru_cache(maxsize=512)
def _compile_error_cached(source: str, signature_end: bool) -> str | None:
    return _compile_error(source, signature_end)


def _compile_error(source: str, signature_end: bool) -> str | None:
    """Why `source` cannot run as Python test code on the trusted side, or None. With
    `signature_end` (a HumanEval prompt) it may stop at the entry point's signature, as the
    verdict side reads it (the runner appends a body of `pass`)."""
    try:
        if signature_end:
            try:
                ast.parse(source)
            except SyntaxError:
                ast.parse(source + "\n    pass\n")
        else:
            compile(source, "<task>", "exec", dont_inherit=True)
    except SyntaxError as e:
        return f"does not compile as Python (line {e.lineno}: {e.msg})"
    except (ValueError, RecursionError, MemoryError) as e:  # NUL bytes, nesting too deep
        return f"does not compile as Python ({type(e).__name__}: {e})"[:300]
    return None


def source_error(source: str, signature_end: bool = False) -> str | None:
    if not source.strip():
        return None
    if len(source) <= _SOURCE_CACHE_CHARS:
        return _compile_error_cached(source, signature_end)
    return _compile_error(source, signature_end)


def task_source_errors(task: CodeTask) -> list[tuple[list, str]]:
    """`(loc inside tests, reason)` for each piece of a Python test spec the verdict side must
    compile and cannot: the check module, asserts, setup, helpers, a HumanEval prompt (its
    definitions are helpers). Bad task data is the task's 422, never a sandbox failure."""
    t = task.tests
    out: list[tuple[list, str]] = []

    def check(loc: list, source: str, signature_end: bool = False, hint: str = "") -> None:
        why = source_error(source, signature_end)
        if why:
            out.append((loc, why + hint))

    if t.kind != "assert":
        return out
    check(["helpers"], t.helpers)
    if isinstance(t, AssertCheckTests):
        check(["test"], t.test, hint="; it must define check(candidate)")
        check(["prompt"], t.prompt, signature_end=True,
              hint="; `prompt` is a HumanEval prompt: Python code up to the function's body (its other definitions "
                   "are helpers), not prose; put a prose question in your own prompt column")
    else:
        check(["setup"], t.setup)
        for i, a in enumerate(t.asserts):
            check(["asserts", i], a)
    return out
_LANG_CHARS = frozenset("+.#-_")


@dataclass(frozen=True)
class Block:
    lang: str
    code: str
    closed: bool


def _opening(line: str) -> tuple[int, str] | None:
    """(backticks, language) when `line` opens a fence: optional blanks, three or more
    backticks, an info string without backticks (its first word is the language)."""
    s = line.lstrip(" \t")
    ticks = len(s) - len(s.lstrip("`"))
    if ticks < 3 or "`" in s[ticks:]:
        return None
    info = s[ticks:].lstrip(" \t")
    n = 0
    while n < len(info) and (info[n].isalnum() or info[n] in _LANG_CHARS):
        n += 1
    return ticks, info[:n].lower()


def _closes(line: str, ticks: int) -> bool:
    s = line.strip(" \t")
    return len(s) >= ticks and s.count("`") == len(s)


def fenced_blocks(text: str) -> list[Block]:
    """All fenced blocks in order. A last fence left open (a truncated completion) runs to the end.

    One pass over the lines with plain string operations (no regex), so the time is linear in
    the text whatever the model wrote; an opening fence needs its newline, as in CommonMark.
    """
    blocks: list[Block] = []
    pos, n = 0, len(text)
    open_at = -1  # where the open block's code starts
    ticks, lang = 0, ""
    while pos < n:
        end = text.find("\n", pos)
        line_end = n if end < 0 else end
        line = text[pos:line_end]
        if open_at < 0:
            fence = _opening(line) if end >= 0 else None
            if fence is not None:
                ticks, lang = fence
                open_at = end + 1
        elif _closes(line, ticks):
            blocks.append(Block(lang, text[open_at:pos], closed=True))
            open_at = -1
        if end < 0:
            break
        pos = end + 1
    if open_at >= 0:
        blocks.append(Block(lang, text[open_at:], closed=False))
    return blocks


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


def build_job(program: str, task: CodeTask, default_limits: Limits | None = None, runtime: str | None = None,
              time_scale: float = 1.0, max_timeout_s: float | None = None) -> Job:
    """The sandbox job of a task, on `runtime` (the server resolves the task's field), else the task's.
    A task's own `timeout_s` (a data set's limit, set on its judge's machine) is multiplied by the
    host's `time_scale` and capped at `max_timeout_s`; the server's default is not scaled."""
    limits = default_limits or Limits()
    update: dict[str, float | int] = {}
    if task.timeout_s is not None:
        scaled = task.timeout_s * time_scale
        update["timeout_s"] = scaled if max_timeout_s is None else min(scaled, max(max_timeout_s, task.timeout_s))
    if task.memory_mb is not None:
        update["memory_mb"] = task.memory_mb
    if task.stop_on_timeout is not None:
        update["stop_on_timeout"] = task.stop_on_timeout
    if task.wall_factor is not None:
        update["wall_factor"] = task.wall_factor
    if update:
        limits = limits.model_copy(update=update)
    tests = task.tests
    if task.prefix and isinstance(tests, AssertCheckTests) and not (tests.prompt or tests.helpers):
        # a HumanEval prompt given as the program's prefix is also the task's: its helpers
        # (HumanEval/38's encode_cyclic) then run on the trusted side, not the program's
        tests = tests.model_copy(update={"prompt": task.prefix})
    runtime = runtime or task.runtime
    return Job(program=task.prefix + program, language=task.language, tests=tests, limits=limits,
               **({"runtime": runtime} if runtime else {}))


def shape_reward(result: JobResult, weights: Weights) -> float:
    """`w_syntax*syntax_ok + w_runtime*runs + w_tests*passed/total`, normalised so that a program
    that compiles, runs and passes everything scores exactly `sum(weights)` (1.0 by default).

    With no tests at all (total == 0) the test term counts as passed only if the program runs.
    A job the runner flagged (`result.flags`, what the candidate tried) loses `weights.flag_penalty`
    (default 0). Every test status but `passed` (`protocol_error` included) is a failed test.
    """
    if result.total > 0:  # a checker's partial credit (a failed test's `score`) counts as that fraction of a test
        frac = (result.passed + sum(t.score or 0.0 for t in result.tests if t.status != "passed")) / result.total
    else:
        frac = 1.0 if (result.syntax_ok and result.runs) else 0.0
    r = weights.syntax * float(result.syntax_ok) + weights.runtime * float(result.runs) + weights.tests * frac
    if result.flags:
        r -= weights.flag_penalty
    return round(r, 10)

