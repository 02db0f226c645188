"""Side-by-side benchmark: our math grader vs Math-Verify on math_public.jsonl.

    python bench/math_bench.py [PATH] [--verbose] [--no-math-verify] [--workers 2]

Both run over every case in one run. Ours runs sequentially through the isolated worker
pool (each check crosses a process boundary, as in the server), then once more
concurrently with grade_many. Math-Verify (``pip install math-verify``) runs in this process
with its defaults. Printed per checker: accuracy on all and on non-contested cases, false
positives, p50/p99/max milliseconds per case and the total seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def default_path() -> Path:
    for p in (ROOT / "../shared/data/math_public.jsonl", Path("/work/shared/data/math_public.jsonl"),
              ROOT / "shared/data/math_public.jsonl"):
        if p.exists():
            return p.resolve()
    return ROOT / "../shared/data/math_public.jsonl"


def summarize(name: str, rows: list[dict], verdicts: list[bool], times: list[float], total: float) -> dict:
    ok = [v == r["expected"] for v, r in zip(verdicts, rows, strict=True)]
    nc = [o for o, r in zip(ok, rows, strict=True) if not r["contested"]]
    fp = sum(1 for v, r in zip(verdicts, rows, strict=True) if v and not r["expected"])
    fp_nc = sum(1 for v, r in zip(verdicts, rows, strict=True) if v and not r["expected"] and not r["contested"])
    n_false = sum(1 for r in rows if not r["expected"])
    ts = sorted(times)
    return {
        "name": name,
        "acc_all": sum(ok) / len(ok),
        "acc_nc": sum(nc) / len(nc),
        "fp": fp, "fp_nc": fp_nc, "n_false": n_false,
        "p50": statistics.median(ts) * 1000,
        "p99": ts[min(len(ts) - 1, int(round(0.99 * (len(ts) - 1))))] * 1000,
        "max": ts[-1] * 1000,
        "total": total,
        "over_2s": sum(1 for t in ts if t > 2.0),
    }


def print_table(stats: list[dict]) -> None:
    hdr = ("| checker | accuracy, all | accuracy, non-contested | false positives (non-contested) "
           "| p50 ms | p99 ms | max ms | cases > 2 s | total s |")
    print(hdr)
    print("|" + "---|" * 9)
    for s in stats:
        print(f"| {s['name']} | {s['acc_all']:.1%} | {s['acc_nc']:.1%} | {s['fp']} of {s['n_false']} ({s['fp_nc']}) "
              f"| {s['p50']:.1f} | {s['p99']:.0f} | {s['max']:.0f} | {s['over_2s']} | {s['total']:.1f} |")


def run_ours(rows: list[dict], workers: int, verbose: bool) -> list[dict]:
    from reward_server.grading.math import MathGrader, MathOptions

    out = []
    opts = MathOptions()

    async def go():
        grader = MathGrader(workers=workers, options=opts)
        t = time.perf_counter()
        await grader.start()
        startup = time.perf_counter() - t
        verdicts, times, grades = [], [], []
        t0 = time.perf_counter()
        for r in rows:
            t1 = time.perf_counter()
            g = await grader.grade(r["pred"], r["gold"])
            times.append(time.perf_counter() - t1)
            verdicts.append(g.reward == 1.0)
            grades.append(g)
        total = time.perf_counter() - t0
        out.append(summarize("ours (sequential, isolated)", rows, verdicts, times, total))
        t0 = time.perf_counter()
        many = await grader.grade_many([(r["pred"], r["gold"]) for r in rows])
        total = time.perf_counter() - t0
        out.append(summarize(f"ours (grade_many, {workers} workers)", rows, [g.reward == 1.0 for g in many],
                             [g.time_s for g in many], total))
        await grader.close()
        print(f"our pool start-up (sympy import in {workers} workers, in parallel): {startup:.2f} s")
        if verbose:
            print("\nour mistakes:")
            for r, g in zip(rows, grades, strict=True):
                if (g.reward == 1.0) != r["expected"]:
                    print(f"  {r['id']} {'contested ' if r['contested'] else ''}expected={r['expected']} "
                          f"status={g.status} reason={g.reason!r}\n     gold={r['gold'][:100]!r}\n"
                          f"     extracted={(g.extracted or '')[:100]!r} pred={g.parsed_pred!r} ref={g.parsed_ref!r}")
        return out

    return asyncio.run(go())


def run_math_verify(rows: list[dict]) -> dict | None:
    try:
        from math_verify import parse, verify
    except ImportError:
        print("Math-Verify is not installed; to compare: pip install math-verify", file=sys.stderr)
        return None
    import logging

    logging.getLogger("math_verify").setLevel(logging.CRITICAL)
    verdicts, times = [], []
    t0 = time.perf_counter()
    for r in rows:
        t1 = time.perf_counter()
        try:
            v = bool(verify(parse(r["gold"]), parse(r["pred"])))
        except Exception:  # noqa: BLE001
            v = False
        times.append(time.perf_counter() - t1)
        verdicts.append(v)
    return summarize("Math-Verify 0.9 (defaults)", rows, verdicts, times, time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("path", nargs="?", default=str(default_path()))
    ap.add_argument("--verbose", "-v", action="store_true", help="list our mistakes")
    ap.add_argument("--no-math-verify", action="store_true")
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args()
    rows = [json.loads(line) for line in open(a.path, encoding="utf-8") if line.strip()]
    print(f"{len(rows)} cases from {a.path} ({sum(r['contested'] for r in rows)} contested, "
          f"{sum(not r['expected'] for r in rows)} expected false)")
    stats = run_ours(rows, a.workers, a.verbose)
    if not a.no_math_verify:
        mv = run_math_verify(rows)
        if mv:
            stats.append(mv)
    print()
    print_table(stats)


if __name__ == "__main__":
    main()
