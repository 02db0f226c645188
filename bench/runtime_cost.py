"""Per-job cost of each runtime, side by side: the same small exec jobs through a pool of the
default runtime and of `sci` (numpy warm in the spawners), and what a candidate's
`import numpy` / `import pandas, scipy.optimize` costs in each way of getting it.

Usage: python bench/runtime_cost.py [--kind bwrap] [--jobs 40]
(needs `bash sandbox/build_runtime.sh sci`, with DOCKER=1 for --kind docker)
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from sandbox import ExecRequest, Limits
from sandbox.router import RuntimePools

CASES = [
    ("print(1)", "python", "print(1)"),
    ("print(1)", "sci", "print(1)"),
    ("import numpy", "sci", "import numpy\nprint(numpy.__version__)"),
    ("import pandas, scipy.optimize", "sci", "import pandas, scipy.optimize\nprint(1)"),
    ("VmSize of a candidate (MB)", "python", "print(open('/proc/self/status').read().split('VmSize:')[1].split()[0])"),
    ("VmSize of a candidate (MB)", "sci", "print(open('/proc/self/status').read().split('VmSize:')[1].split()[0])"),
]


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kind", default="bwrap")
    ap.add_argument("--jobs", type=int, default=40)
    args = ap.parse_args()
    async with RuntimePools(args.kind, runtimes=("sci",), size=1, per_runner=1) as rp:
        print("| job | runtime | median ms | p90 ms | stdout |\n| --- | --- | --- | --- | --- |")
        for label, runtime, program in CASES:
            times, out = [], ""
            for _ in range(args.jobs):
                t = time.perf_counter()
                r = await rp.execute(ExecRequest(program=program, runtime=runtime,
                                                 limits=Limits(timeout_s=30, memory_mb=1024)))
                times.append((time.perf_counter() - t) * 1000)
                out = r.stdout.strip() if r.status == "finished" else r.status
            if label.startswith("VmSize"):
                out = f"{int(out) // 1024}"
            times.sort()
            print(f"| {label} | {runtime} | {statistics.median(times):.1f} | {times[int(len(times) * 0.9)]:.1f} | {out} |")


if __name__ == "__main__":
    asyncio.run(main())
