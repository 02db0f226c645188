"""Group keeping, one rule for rollouts and for the eval's variance check: a prompt's group is
kept when at least two completions were scored and their rewards' sample std reaches
``min_group_std``; otherwise it carries no signal and is dropped."""

from __future__ import annotations

from collections.abc import Sequence as Seq
from dataclasses import dataclass
from typing import Generic, TypeVar

from .loss import group_std

T = TypeVar("T")


@dataclass
class GroupResult(Generic[T]):
    kept: list[list[T]]  # one list per kept prompt, in prompt order
    groups: int  # prompts seen
    filtered: int  # groups dropped (too few scored, or low variance)
    all_same: int  # of those, groups whose rewards were all equal


def keep_groups(members: Seq[T], prompt_index: Seq[int], rewards: Seq[float | None], n_prompts: int,
                min_std: float) -> GroupResult[T]:
    """Split ``members`` into per-prompt groups (``reward`` None = not scored, left out) and keep
    those with variance."""
    by: dict[int, list[tuple[T, float]]] = {}
    for m, j, r in zip(members, prompt_index, rewards, strict=True):
        if r is not None:
            by.setdefault(j, []).append((m, r))
    kept: list[list[T]] = []
    filtered = all_same = 0
    for j in range(n_prompts):
        g = by.get(j, [])
        rs = [r for _, r in g]
        if len(g) < 2 or group_std(rs) < min_std:
            filtered += 1
            if g and all(r == rs[0] for r in rs):
                all_same += 1
            continue
        kept.append([m for m, _ in g])
    return GroupResult(kept, n_prompts, filtered, all_same)
