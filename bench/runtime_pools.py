"""What one more runtime costs a server: each runtime's pool started alone with the server's
default sizing (make_pool's defaults), side by side: seconds to start, and the memory its
runners hold idle and after every connection has run a job (bwrap: the runners' processes'
PSS, from /proc; docker: the containers' memory use as `docker stats` reports it). Then the
per-job cost (sequential exec jobs, one runner): a trivial job on each runtime, and a job's
`import numpy` on sci with numpy warm in the spawners (the default) and without (`cold`).

Usage: python bench/runtime_pools.py [--kind bwrap] [--runtimes python,sci] [--jobs 30]
(needs `bash sandbox/build_runtime.sh sci`, with DOCKER=1 for --kind docker)
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import statistics
import subprocess
import time

from sandbox import ExecRequest, Limits, runtimes
from sandbox.router import RuntimePools


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children.get(p, [])
    return out


def _pss_mb(pid: int) -> float:
    total = 0
    for p in _descendants(pid):
        try:
            with open(f"/proc/{p}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


def _docker_mb(ident: str) -> float:
    out = subprocess.run(["docker", "stats", "--no-stream", "--format", "{{.MemUsage}}", ident],
                         capture_output=True, text=True, check=False).stdout.split("/")[0].strip()
    num, unit = float(out.rstrip("KMGiB")), out.lstrip("0123456789.")
    return num * {"KiB": 1 / 1024, "MiB": 1, "GiB": 1024, "kB": 1 / 1000, "MB": 1, "GB": 1000}.get(unit, 1)


def _memory_mb(pool) -> float:
    if pool.kind == "docker":
        return sum(_docker_mb(h.ident) for h in pool.handles())
    return sum(_pss_mb(h.pid) for h in pool.handles() if h.pid)


async def measure(kind: str, runtime: str) -> tuple[float, int, float, float]:
    t0 = time.perf_counter()
    rp = RuntimePools(kind, runtimes=(), default=runtime)
    await rp.start()
    start_s = time.perf_counter() - t0
    try:
        pool = rp.pools[runtime]
        idle = _memory_mb(pool)
        # every connection of every runner runs one job (a spawner each, warm imports done)
        await asyncio.gather(*(rp.execute(ExecRequest(program="import time; time.sleep(0.5)", runtime=runtime,
                                                      limits=Limits(timeout_s=5)))
                               for _ in range(pool.capacity)))
        await asyncio.sleep(1)
        used = _memory_mb(pool)
        return start_s, pool.capacity, idle, used
    finally:
        await rp.close()


JOBS = [("print(1)", "python", "print(1)"), ("print(1)", "sci", "print(1)"),
        ("import numpy; numpy.ones(3).sum()", "sci", "import numpy\nprint(numpy.ones(3).sum())"),
        ("import sympy (not warm)", "sci", "import sympy\nprint(sympy.Integer(2) ** 3)"),
        ("import pandas (not warm)", "sci", "import pandas\nprint(len(pandas.Series([1, 2])))")]


async def per_job(kind: str, n: int, cold: bool) -> list[tuple[str, str, list[float], str]]:
    sci = runtimes.RUNTIMES["sci"]
    if cold:  # the same runtime, nothing imported before the fork
        runtimes.RUNTIMES["sci"] = dataclasses.replace(sci, warm=())
    rows = []
    try:
        async with RuntimePools(kind, runtimes=("sci",), size=1, per_runner=1) as rp:
            for label, rt, program in JOBS if not cold else JOBS[2:3]:
                times, out = [], ""
                for _ in range(n):
                    t = time.perf_counter()
                    r = await rp.execute(ExecRequest(program=program, runtime=rt, limits=Limits(timeout_s=30, memory_mb=1024)))
                    times.append((time.perf_counter() - t) * 1000)
                    out = r.stdout.strip() if r.status == "finished" else r.status
                rows.append((label, rt + (" (cold)" if cold else ""), sorted(times), out))
    finally:
        runtimes.RUNTIMES["sci"] = sci
    return rows


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kind", default="bwrap")
    ap.add_argument("--runtimes", default="python,sci")
    ap.add_argument("--jobs", type=int, default=30)
    args = ap.parse_args()
    print(f"| runtime ({args.kind}) | start s | slots | memory idle MB | memory, every connection warm MB |")
    print("| --- | --- | --- | --- | --- |")
    for rt in args.runtimes.split(","):
        start_s, slots, idle, used = await measure(args.kind, rt)
        print(f"| {rt} | {start_s:.2f} | {slots} | {idle:.0f} | {used:.0f} |")
    print(f"\n| job ({args.kind}, {args.jobs} in a row) | runtime | median ms | p90 ms | stdout |\n| --- | --- | --- | --- | --- |")
    for cold in (False, True):
        for label, rt, times, out in await per_job(args.kind, args.jobs, cold):
            print(f"| {label} | {rt} | {statistics.median(times):.1f} | {times[int(len(times) * 0.9)]:.1f} | {out} |")


if __name__ == "__main__":
    asyncio.run(main())
