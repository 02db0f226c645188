"""Tasks: JSONL files of ``{"prompt", "task"}`` and bundled seeded generators.

``task`` is the reward server's task schema verbatim (``{"type": "math", "answer": ...}`` or
``{"type": "code", "language": "python", "tests": {...}}``), so a JSONL written for this trainer
can be scored by the server with no translation.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MATH_SUFFIX = "\nGive the final answer as a number in \\boxed{}."
CODE_SUFFIX = "\nReply with only the function in a ```python code block."
# the bigarith tasks name the tool: without it SmolLM2-135M wrote a python block in 2 of 16 greedy answers
TOOL_HINT = " Use Python: write a ```python block that prints the result."


@dataclass(frozen=True)
class TaskItem:
    id: str
    prompt: str
    task: dict[str, Any] = field(hash=False)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "prompt": self.prompt, "task": self.task}


# --------------------------------------------------------------------------------------------
# arithmetic word problems (scored as math)

_NAMES = ["Tom", "Ana", "Li", "Sara", "Omar", "Mia", "Ben", "Zoe", "Ivan", "Nora", "Raj", "Eva"]
_ITEMS = ["apples", "books", "marbles", "stickers", "coins", "pencils", "cards", "shells", "cookies", "stamps"]


def _arith_problem(rng: random.Random) -> tuple[str, int]:
    n = rng.choice(_NAMES)
    m = rng.choice([x for x in _NAMES if x != n])
    it = rng.choice(_ITEMS)
    kind = rng.randrange(8)
    if kind == 0:
        a, b = rng.randint(2, 30), rng.randint(2, 30)
        return f"{n} has {a} {it} and gets {b} more. How many {it} does {n} have now?", a + b
    if kind == 1:
        a = rng.randint(10, 40)
        b = rng.randint(1, a - 1)
        return f"{n} had {a} {it} and gave {b} to {m}. How many {it} does {n} have left?", a - b
    if kind == 2:
        a, b = rng.randint(2, 9), rng.randint(2, 9)
        return f"{n} has {a} boxes with {b} {it} in each box. How many {it} are there in total?", a * b
    if kind == 3:
        b = rng.randint(2, 9)
        q = rng.randint(2, 9)
        return f"{n} shares {b * q} {it} equally among {b} friends. How many {it} does each friend get?", q
    if kind == 4:
        a, b, c = rng.randint(2, 20), rng.randint(2, 20), rng.randint(2, 20)
        return f"{n} has {a} {it}, {m} has {b} {it}, and their teacher has {c} {it}. How many {it} do they have altogether?", a + b + c
    if kind == 5:
        a, b = rng.randint(2, 15), rng.randint(2, 15)
        return f"{n} has {a} {it}. {m} has {b} more {it} than {n}. How many {it} does {m} have?", a + b
    if kind == 6:
        a, b = rng.randint(2, 9), rng.randint(2, 9)
        c = rng.randint(1, a * b - 1)
        return (
            f"{n} buys {a} packs of {it} with {b} in each pack and then gives away {c}. "
            f"How many {it} does {n} have now?",
            a * b - c,
        )
    a, b = rng.randint(11, 99), rng.randint(11, 99)
    return f"What is {a} + {b}?", a + b


def _arith_easy_problem(rng: random.Random) -> tuple[str, int]:
    """One-step sums and differences of small numbers (results 2-20): a 135M model gets some right."""
    n = rng.choice(_NAMES)
    it = rng.choice(_ITEMS)
    if rng.randrange(2) == 0:
        a, b = rng.randint(1, 10), rng.randint(1, 10)
        return f"{n} has {a} {it} and gets {b} more. How many {it} does {n} have now?", a + b
    a = rng.randint(3, 20)
    b = rng.randint(1, a - 1)
    return f"{n} had {a} {it} and lost {b}. How many {it} does {n} have left?", a - b


ARITH_DIFFICULTIES = ("standard", "easy")


def arithmetic_tasks(n: int, seed: int, difficulty: str = "standard") -> list[TaskItem]:
    if difficulty not in ARITH_DIFFICULTIES:
        raise ValueError(f"arithmetic difficulty must be one of {ARITH_DIFFICULTIES}, not {difficulty!r}")
    gen = _arith_easy_problem if difficulty == "easy" else _arith_problem
    # "standard" keeps its historical stream seed, so its splits are unchanged
    rng = random.Random(f"arith-{seed}" if difficulty == "standard" else f"arith-{difficulty}-{seed}")
    return _distinct_math_tasks(n, rng, gen, "arith", MATH_SUFFIX)


def _distinct_math_tasks(n: int, rng: random.Random, gen: Callable[[random.Random], tuple[str, int]],
                         prefix: str, suffix: str) -> list[TaskItem]:
    """Up to n math tasks from `gen`, no problem text twice (at most 50 draws per task)."""
    out: list[TaskItem] = []
    seen: set[str] = set()
    tries = 0
    while len(out) < n and tries < n * 50:
        tries += 1
        text, ans = gen(rng)
        if text in seen:
            continue
        seen.add(text)
        out.append(TaskItem(f"{prefix}-{len(out)}", text + suffix, {"type": "math", "answer": str(ans)}))
    return out


# --------------------------------------------------------------------------------------------
# exact big-integer and modular arithmetic (scored as math): out of reach of a small model's
# mental arithmetic, one line of Python with a tool (the tools=python demo)


def _bigarith_problem(rng: random.Random) -> tuple[str, int]:
    if rng.randrange(2) == 0:
        a, b = rng.randint(10_000, 99_999), rng.randint(10_000, 99_999)
        return f"Compute {a} * {b} exactly.", a * b
    base, exp = rng.randint(2, 20), rng.randint(50, 500)
    mod = rng.choice([1_000_003, 999_983, 1_000_033, 65_537, 104_729, 1_299_709])
    return f"Compute {base}^{exp} mod {mod}.", pow(base, exp, mod)


def bigarith_tasks(n: int, seed: int) -> list[TaskItem]:
    """Products of two 5-digit numbers and modular powers, half each, graded by the math grader."""
    return _distinct_math_tasks(n, random.Random(f"bigarith-{seed}"), _bigarith_problem, "bigarith",
                                TOOL_HINT + MATH_SUFFIX)


# --------------------------------------------------------------------------------------------
# small function-writing tasks (scored by the server's assert tests)

_Family = Callable[[random.Random], tuple[str, str, Callable[..., Any], Callable[[random.Random], tuple]]]


def _fam_add_k(rng: random.Random):
    k = rng.randint(2, 50)
    return "add_k", f"`add_k(x)` that returns x plus {k}", (lambda x: x + k), (lambda r: (r.randint(-100, 100),))


def _fam_mul_k(rng: random.Random):
    k = rng.randint(2, 12)
    return "times_k", f"`times_k(x)` that returns x multiplied by {k}", (lambda x: x * k), (lambda r: (r.randint(-50, 50),))


def _fam_sum_list(rng: random.Random):
    return "sum_list", "`sum_list(xs)` that returns the sum of the integers in the list xs", sum, (
        lambda r: ([r.randint(-20, 20) for _ in range(r.randint(0, 6))],)
    )


def _fam_max_list(rng: random.Random):
    return "largest", "`largest(xs)` that returns the largest integer in the non-empty list xs", max, (
        lambda r: ([r.randint(-50, 50) for _ in range(r.randint(1, 6))],)
    )


def _fam_count_char(rng: random.Random):
    ch = rng.choice("aeiou")
    return (
        "count_char",
        f"`count_char(s)` that returns how many times the letter '{ch}' occurs in the string s",
        (lambda s: s.count(ch)),
        (lambda r: ("".join(r.choice("abcdeiou xyz") for _ in range(r.randint(0, 12))),)),
    )


def _fam_reverse(rng: random.Random):
    return "reverse", "`reverse(s)` that returns the string s reversed", (lambda s: s[::-1]), (
        lambda r: ("".join(r.choice("abcdefgh") for _ in range(r.randint(0, 8))),)
    )


def _fam_is_even(rng: random.Random):
    return "is_even", "`is_even(n)` that returns True if the integer n is even and False otherwise", (
        lambda n: n % 2 == 0
    ), (lambda r: (r.randint(-100, 100),))


def _fam_square_sum(rng: random.Random):
    return "square_sum", "`square_sum(n)` that returns 1*1 + 2*2 + ... + n*n for n >= 0", (
        lambda n: sum(i * i for i in range(1, n + 1))
    ), (lambda r: (r.randint(0, 15),))


def _fam_clamp(rng: random.Random):
    lo = rng.randint(-10, 0)
    hi = rng.randint(1, 10)
    return "clamp", f"`clamp(x)` that returns x limited to the range {lo} to {hi} inclusive", (
        lambda x: max(lo, min(hi, x))
    ), (lambda r: (r.randint(-20, 20),))


def _fam_count_pos(rng: random.Random):
    return "count_positive", "`count_positive(xs)` that returns how many numbers in the list xs are greater than 0", (
        lambda xs: sum(1 for x in xs if x > 0)
    ), (lambda r: ([r.randint(-9, 9) for _ in range(r.randint(0, 7))],))


_FAMILIES = [
    _fam_add_k, _fam_mul_k, _fam_sum_list, _fam_max_list, _fam_count_char,
    _fam_reverse, _fam_is_even, _fam_square_sum, _fam_clamp, _fam_count_pos,
]


def code_tasks(n: int, seed: int, num_asserts: int = 4) -> list[TaskItem]:
    rng = random.Random(f"code-{seed}")
    out: list[TaskItem] = []
    seen: set[str] = set()
    tries = 0
    while len(out) < n and tries < n * 50:
        tries += 1
        name, desc, fn, gen_args = rng.choice(_FAMILIES)(rng)
        prompt = f"Write a Python function {desc}." + CODE_SUFFIX
        asserts: list[str] = []
        arg_seen: set[str] = set()
        for _ in range(num_asserts * 4):
            if len(asserts) == num_asserts:
                break
            args = gen_args(rng)
            key = repr(args)
            if key in arg_seen:
                continue
            arg_seen.add(key)
            asserts.append(f"assert {name}({', '.join(repr(a) for a in args)}) == {fn(*args)!r}")
        if prompt in seen:
            # the same function with different tests is a different task only in name; skip
            continue
        seen.add(prompt)
        task = {"type": "code", "language": "python", "tests": {"kind": "assert", "asserts": asserts}}
        out.append(TaskItem(f"code-{len(out)}", prompt, task))
    return out


# --------------------------------------------------------------------------------------------


def load_jsonl(path: str | Path) -> list[TaskItem]:
    items: list[TaskItem] = []
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{lineno}: not JSON: {e}") from None
            if not isinstance(rec, dict) or not isinstance(rec.get("prompt"), str) or not isinstance(rec.get("task"), dict):
                raise ValueError(f"{path}:{lineno}: expected an object with 'prompt' (string) and 'task' (object)")
            if rec["task"].get("type") not in ("math", "code"):
                raise ValueError(f"{path}:{lineno}: task.type must be 'math' or 'code'")
            items.append(TaskItem(str(rec.get("id", f"line-{lineno}")), rec["prompt"], rec["task"]))
    if not items:
        raise ValueError(f"{path}: no tasks")
    return items


def write_jsonl(items: list[TaskItem], path: str | Path) -> None:
    with open(path, "w") as f:
        for it in items:
            f.write(json.dumps(it.to_json()) + "\n")


def build_split(source: str, num_train: int, num_eval: int, seed: int,
                arith_difficulty: str = "standard") -> tuple[list[TaskItem], list[TaskItem]]:
    """Train and held-out lists; the split is a function of ``seed`` (and ``arith_difficulty``) only,
    disjoint by prompt."""
    if source == "arithmetic":
        pool = arithmetic_tasks(num_train + num_eval, seed, arith_difficulty)
    elif source == "code":
        pool = code_tasks(num_train + num_eval, seed)
    elif source == "bigarith":
        pool = bigarith_tasks(num_train + num_eval, seed)
    elif source == "mixed":
        half = (num_train + num_eval + 1) // 2
        pool = arithmetic_tasks(half, seed, arith_difficulty) + code_tasks(half, seed)
    else:
        pool = load_jsonl(source)
    pool = list(pool)
    random.Random(f"split-{seed}").shuffle(pool)
    if num_eval >= len(pool):
        raise ValueError(f"{source}: {len(pool)} tasks cannot give {num_eval} held-out tasks and a training set")
    eval_items = pool[:num_eval]
    train_items = pool[num_eval : num_eval + num_train]
    return train_items, eval_items


class TaskStream:
    """Endless deterministic stream over the training tasks: a fresh seeded shuffle each epoch.

    The whole state is ``position`` (prompts consumed so far), so resuming is exact.
    """

    def __init__(self, items: list[TaskItem], seed: int, position: int = 0):
        if not items:
            raise ValueError("no training tasks")
        self.items = items
        self.seed = seed
        self.position = position
        self._perm_epoch = -1
        self._perm: list[int] = []

    def _perm_for(self, epoch: int) -> list[int]:
        if epoch != self._perm_epoch:
            perm = list(range(len(self.items)))
            random.Random(f"stream-{self.seed}-{epoch}").shuffle(perm)
            self._perm, self._perm_epoch = perm, epoch
        return self._perm

    def take(self, n: int) -> list[TaskItem]:
        out = []
        for _ in range(n):
            epoch, idx = divmod(self.position, len(self.items))
            out.append(self.items[self._perm_for(epoch)[idx]])
            self.position += 1
        return out

    @property
    def epoch(self) -> int:
        return self.position // len(self.items)
