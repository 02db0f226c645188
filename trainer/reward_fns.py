"""Bundled Python reward sources (``kind: python`` in ``reward_sources``): cheap, local terms
added to the verifier's reward with a weight.

Every function takes ``(completions, **kw)`` and returns one float (or None: not applicable) per
completion; the trainer passes ``tasks``, ``prompts``, ``completion_lengths`` (tokens, including
the EOS that ended a completion), ``truncated`` and ``max_completion_length``, plus the source's
own ``kwargs``.
"""

from __future__ import annotations

import re
from typing import Any

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")


def soft_overlong(completions: list[str], *, completion_lengths: list[int], max_completion_length: int,
                  buffer: int, penalty: float = 1.0, **_: Any) -> list[float]:
    """DAPO's soft overlong punishment (Yu et al. 2025, eq. 13): 0 up to ``L_max - buffer`` tokens,
    then linear down to ``-penalty`` at ``L_max`` (a truncated completion gets ``-penalty``)."""
    start = max_completion_length - buffer
    out = []
    for n in completion_lengths:
        if n <= start:
            out.append(0.0)
        else:
            out.append(-penalty * min(1.0, (n - start) / buffer))
    return out


def truncation_penalty(completions: list[str], *, truncated: list[bool], penalty: float = 1.0,
                       **_: Any) -> list[float]:
    """``-penalty`` for a completion cut off at ``max_completion_length``, 0 for one that ended: the
    cap's punishment without a price on length below it (the soft penalty also grades every length
    in its buffer, which in a group of wrong answers is a pure push towards brevity)."""
    return [-penalty if t else 0.0 for t in truncated]


def boxed_format(completions: list[str], **_: Any) -> list[float]:
    """1.0 when the completion gives exactly one ``\\boxed{...}`` answer, else 0.0 (a format reward)."""
    return [1.0 if len(_BOXED.findall(c)) == 1 else 0.0 for c in completions]


def length_penalty(completions: list[str], *, completion_lengths: list[int], max_completion_length: int,
                   **_: Any) -> list[float]:
    """``-length / max_completion_length``: a linear pressure towards short answers."""
    return [-n / max_completion_length for n in completion_lengths]


def boxed_integer_match(completions: list[str], *, tasks: list[dict[str, Any]], **_: Any) -> list[float | None]:
    """1.0 when the last ``\\boxed{}`` holds the task's integer answer, else 0.0; None for tasks whose
    answer is not an integer. A local stand-in for the verifier where no server can run (the offline
    GPU check); the verifier's SymPy grader is the real judge."""
    out: list[float | None] = []
    for c, t in zip(completions, tasks, strict=True):
        ans = str(t.get("answer", "")).strip()
        if not re.fullmatch(r"-?\d+", ans):
            out.append(None)
            continue
        found = _BOXED.findall(c)
        got = found[-1].strip().replace(",", "") if found else ""
        out.append(1.0 if re.fullmatch(r"-?\d+", got) and int(got) == int(ans) else 0.0)
    return out
