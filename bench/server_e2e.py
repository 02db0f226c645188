"""End-to-end cost of the HTTP layer: the same 512 completions (64 prompts x 8 samples, a
GRPO step) scored straight through the sandbox pool and through `reward-server serve`
over HTTP, side by side in one run on the same host and pool size.

    python bench/server_e2e.py [--sandbox bwrap] [--pool N] [--rounds 3] [--batch 512]

The HTTP path includes everything a trainer pays: the client's JSON encoding, the
server's validation, extraction, admission, the pool, reward shaping and the response.
Target: HTTP end-to-end <= 1.3x pool-only.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from reward_server.client import AsyncRewardClient  # noqa: E402
from reward_server.grading.code import build_job, extract_code  # noqa: E402
from reward_server.local import SubprocessServer  # noqa: E402
from reward_server.schemas import ScoreItem  # noqa: E402

# ---- a corpus: 64 prompts, 8 samples each, the mix a policy produces -------------------

_OPS = [
    ("add", "a + b", [(1, 2), (0, 0), (-3, 7), (10, 5)]),
    ("sub", "a - b", [(5, 3), (0, 9), (-1, -1), (7, 7)]),
    ("mul", "a * b", [(2, 3), (0, 8), (-2, 4), (5, 5)]),
    ("mx", "max(a, b)", [(1, 2), (9, 3), (-5, -6), (4, 4)]),
]


def _assert_prompt(i: int):
    name, expr, cases = _OPS[i % len(_OPS)]
    fn = f"{name}{i}"
    asserts = [f"assert {fn}({a}, {b}) == {eval(expr, {'a': a, 'b': b, 'max': max})}" for a, b in cases]
    task = {"type": "code", "tests": {"kind": "assert", "asserts": asserts}, "timeout_s": 2}
    good = f"def {fn}(a, b):\n    return {expr}\n"
    samples = [
        f"Sure.\n```python\n{good}```",
        f"```python\n{good}```\nThis is correct.",
        f"```python\ndef {fn}(a, b):\n    return a\n```",  # partly wrong
        f"```python\ndef {fn}(a, b)\n    return {expr}\n```",  # syntax error
        f"```python\ndef {fn}(a, b):\n    return undefined_name\n```",  # runtime error in tests
        f"<think>try {expr}</think>\n```python\n{good}```",
        f"```python\nimport math\n\ndef {fn}(a, b):\n    r = {expr}\n    return r\n```",
        f"```python\ndef {fn}(a, b):\n    return {expr} + (1 if a == 0 else 0)\n```",
    ]
    return task, samples


def _stdio_prompt(i: int):
    task = {
        "type": "code",
        "tests": {"kind": "stdio", "cases": [{"stdin": f"{i} {j}\n", "stdout": f"{i + j}\n"} for j in range(3)]},
        "timeout_s": 2,
    }
    good = "a, b = map(int, input().split())\nprint(a + b)\n"
    samples = [
        f"```python\n{good}```",
        "```python\nimport sys\na, b = map(int, sys.stdin.read().split())\nprint(a + b)\n```",
        "```python\na, b = map(int, input().split())\nprint(a - b)\n```",
        "```python\nprint(int(input()) + 1)\n```",
        f"```python\n{good}```",
        "```python\na, b = map(int, input().split())\nprint(a + b, end='')\n```",
        "```python\nx = input(\n```",
        f"```python\n{good}print()\n```",
    ]
    return task, samples


def _call_prompt(i: int):
    fn = f"rev{i}"
    task = {
        "type": "code",
        "tests": {"kind": "call", "fn_name": fn, "cases": [{"args": [s], "expected": s[::-1]} for s in ("abc", "", "racecar", "xy")]},
        "timeout_s": 2,
    }
    good = f"def {fn}(s):\n    return s[::-1]\n"
    samples = [
        f"```python\n{good}```",
        f"```python\nclass Solution:\n    def {fn}(self, s):\n        return ''.join(reversed(s))\n```",
        f"```python\ndef {fn}(s):\n    return s\n```",
        f"```python\ndef {fn}(s):\n    return list(reversed(s))\n```",
        f"```python\n{good}```",
        f"```python\ndef {fn}(s):\n    return s[::-1] if s else None\n```",
        f"```python\ndef {fn}(s):\n    raise ValueError(s)\n```",
        f"```python\n{good}```",
    ]
    return task, samples


def corpus(prompts: int = 64, samples: int = 8) -> list[dict]:
    makers = [_assert_prompt, _assert_prompt, _stdio_prompt, _call_prompt]
    items = []
    for i in range(prompts):
        task, outs = makers[i % len(makers)](i)
        for k in range(samples):
            items.append({"id": f"p{i}-s{k}", "completion": outs[k % len(outs)], "task": task})
    return items


# ---- the two paths ------------------------------------------------------------------------


async def pool_only(items: list[dict], kind: str, size: int | None, rounds: int) -> tuple[list[float], list]:
    from sandbox import make_pool  # noqa: PLC0415

    pool = make_pool(kind=kind, size=size)
    await pool.start()
    try:
        parsed = [ScoreItem.model_validate(it) for it in items]
        jobs = [build_job(extract_code(it.completion)[0], it.task) for it in parsed]
        # the best way to drive the pool directly: exactly `capacity` jobs in flight
        slots = asyncio.Semaphore(pool.capacity)

        async def one(j):
            async with slots:
                return await pool.run(j)

        await asyncio.gather(*(one(j) for j in jobs[:32]))  # warm the connections
        times, results = [], []
        for _ in range(rounds):
            t0 = time.perf_counter()
            results = await asyncio.gather(*(one(j) for j in jobs))
            times.append(time.perf_counter() - t0)
        return times, results
    finally:
        await pool.close()


async def via_http(items: list[dict], kind: str, size: int | None, rounds: int, batch: int) -> tuple[list[float], list]:
    args = ["--sandbox", kind, "--log-level", "warning", *(["--pool", str(size)] if size else [])]
    log = Path(tempfile.gettempdir()) / "server_e2e-server.log"  # its tail is quoted if the server fails to start
    server = await asyncio.to_thread(SubprocessServer.start, args, log, 120)
    try:
        async with AsyncRewardClient(server.url, max_batch=batch, timeout=600) as client:
            await client.score(items[:32])  # warm
            times, results = [], []
            for _ in range(rounds):
                t0 = time.perf_counter()
                results = await client.score(items)
                times.append(time.perf_counter() - t0)
            return times, results
    finally:
        server.stop(30)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sandbox", default="bwrap")
    ap.add_argument("--pool", type=int, default=None, help="runners (default: the host's choice)")
    ap.add_argument("--prompts", type=int, default=64)
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batch", type=int, default=512, help="client max_batch (items per HTTP request)")
    args = ap.parse_args()

    items = corpus(args.prompts, args.samples)
    n = len(items)
    print(f"{n} completions ({args.prompts} prompts x {args.samples}), sandbox={args.sandbox}, "
          f"pool={args.pool or 'default'}, rounds={args.rounds}, cpus={os.cpu_count()}", flush=True)

    # alternate the two paths so that drift on a shared machine hits both
    pool_times: list[float] = []
    http_times: list[float] = []
    pool_res = http_res = None
    for _ in range(2):
        t, pool_res = asyncio.run(pool_only(items, args.sandbox, args.pool, max(1, args.rounds // 2 + 1)))
        pool_times += t
        t, http_res = asyncio.run(via_http(items, args.sandbox, args.pool, max(1, args.rounds // 2 + 1), args.batch))
        http_times += t

    # same verdicts both ways
    mismatches = sum(
        1 for a, b in zip(pool_res, http_res, strict=True)
        if b.code is None or (a.passed, a.total) != (b.code.passed, b.code.total)
    )
    mean_reward = statistics.fmean(r.reward for r in http_res if r.reward is not None)

    p_best, h_best = min(pool_times), min(http_times)
    p_med, h_med = statistics.median(pool_times), statistics.median(http_times)
    rows = [
        ("pool only (in-process)", p_best, p_med, n / p_best),
        ("HTTP end-to-end", h_best, h_med, n / h_best),
    ]
    print()
    print(f"{'path':<26}{'best s':>9}{'median s':>10}{'compl/s':>10}")
    for name, b, m, rate in rows:
        print(f"{name:<26}{b:>9.3f}{m:>10.3f}{rate:>10.1f}")
    ratio_best, ratio_med = h_best / p_best, h_med / p_med
    print(f"\nHTTP / pool-only: {ratio_best:.2f}x (best), {ratio_med:.2f}x (median); target <= 1.3x -> "
          f"{'OK' if ratio_med <= 1.3 else 'MISSED'}")
    print(f"verdict mismatches between the paths: {mismatches}; mean reward {mean_reward:.3f}")


if __name__ == "__main__":
    main()
