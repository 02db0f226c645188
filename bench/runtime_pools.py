"""What one more runtime costs a server: each runtime's pool started alone with the server's
default sizing (make_pool's defaults), side by side: seconds to start, and the memory its
runners hold idle and after every connection has run a job (bwrap: the runners' processes'
PSS, from /proc; docker: the containers' memory use as `docker stats` reports it).

Usage: python bench/runtime_pools.py [--kind bwrap] [--runtimes python,sci]
(needs `bash sandbox/build_runtime.sh sci`, with DOCKER=1 for --kind docker)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import time

from sandbox import ExecRequest, Limits
from sandbox.runtimes import RuntimePools


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


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kind", default="bwrap")
    ap.add_argument("--runtimes", default="python,sci")
    args = ap.parse_args()
    print(f"| runtime ({args.kind}) | start s | slots | memory idle MB | memory, every connection warm MB |")
    print("| --- | --- | --- | --- | --- |")
    for rt in args.runtimes.split(","):
        start_s, slots, idle, used = await measure(args.kind, rt)
        print(f"| {rt} | {start_s:.2f} | {slots} | {idle:.0f} | {used:.0f} |")


if __name__ == "__main__":
    asyncio.run(main())
