"""What the languages option costs, side by side: `auto` (Python jobs in the interpreter-only
view, a toolchain pool started on the first job in another language), `true` (one view with
the toolchains for every runner: the baseline before routing) and `false` (Python only).

Per mode, on real pools (sandbox.router.RuntimePools, as the server makes them): seconds to
start, the first and a later Python job, the first C++ job (with auto: the toolchain pool's
lazy start, its packages scan included) and a later one, and the names (files and links)
under /usr a Python job sees. Each mode runs in a process of its own (the packages scan is
cached per process).

    sudo python bench/toolchain_routing.py [--kind bwrap] [--size 1]
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import json
import subprocess
import sys
import time

from sandbox import ExecRequest, Limits, toolchains
from sandbox.router import RuntimePools

PY = "print(sum(range(10)))\n"
COUNT = "import os\nprint(sum(len(f) for _, _, f in os.walk('/usr')))\n"
CPP = "#include <bits/stdc++.h>\nint main(){long long a,b;std::cin>>a>>b;std::cout<<a+b<<'\\n';}\n"


async def _timed(rp: RuntimePools, req: ExecRequest) -> tuple[float, str]:
    t0 = time.monotonic()
    r = await rp.execute(req)
    assert r.status == "finished" or "not installed" in r.stderr, r  # false: no C++ toolchain in view
    return time.monotonic() - t0, r.stdout.strip()


async def one(kind: str, mode: object, size: int, n: int) -> dict:
    lim = Limits(timeout_s=10, memory_mb=256)
    t0 = time.monotonic()
    rp = RuntimePools(kind, size=size, per_runner=1, languages=mode)
    await rp.start()
    row: dict = {"start": time.monotonic() - t0}
    try:
        row["py_first"] = (await _timed(rp, ExecRequest(program=PY, limits=lim)))[0]
        row["usr_files"] = ast.literal_eval((await _timed(rp, ExecRequest(program=COUNT, limits=lim)))[1])
        row["cpp_first"], out = await _timed(rp, ExecRequest(program=CPP, language="cpp", stdin="20 22\n", limits=lim))
        ok = out == "42"  # false: python only, the toolchain is not installed there
        later_cpp, later_py = [], []
        for i in range(n):  # distinct programs: each a build (a cache miss), as a new completion is
            later_cpp.append((await _timed(rp, ExecRequest(program=CPP + f"// {i}\n", language="cpp",
                                                           stdin="1 2\n", limits=lim)))[0])
            later_py.append((await _timed(rp, ExecRequest(program=PY, limits=lim)))[0])
        row["cpp_later"] = sorted(later_cpp)[len(later_cpp) // 2] if ok else None
        row["cpp_first"] = row["cpp_first"] if ok else None
        row["py_later"] = sorted(later_py)[len(later_py) // 2]
        row["pools"] = ",".join(rp.pools)
        row["toolchains"] = rp.toolchain_status()["state"]
    finally:
        await rp.close()
    return row


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kind", default="bwrap", choices=["bwrap", "docker"])
    ap.add_argument("--size", type=int, default=1, help="runners per pool")
    ap.add_argument("--repeat", type=int, default=3, help="later jobs of each kind (median)")
    ap.add_argument("--mode", choices=["auto", "true", "false"], help="one mode, its row as JSON (the parent's call)")
    a = ap.parse_args()
    if a.mode:
        print(json.dumps(await one(a.kind, {"auto": "auto", "true": True, "false": False}[a.mode], a.size, a.repeat)))
        return
    rows = {}
    for mode in ("auto", "true", "false"):
        out = subprocess.run([sys.executable, __file__, "--kind", a.kind, "--size", str(a.size), "--repeat",
                              str(a.repeat), "--mode", mode], capture_output=True, text=True, check=True).stdout
        rows[mode] = json.loads(out.strip().splitlines()[-1])
    cols = ("start", "py_first", "py_later", "cpp_first", "cpp_later", "usr_files", "pools", "toolchains")
    print(f"{a.kind}, {a.size} runner(s) per pool; seconds (median of {a.repeat} for later jobs); "
          "cpp with false: not installed (-)")
    print("| languages | " + " | ".join(cols) + " |")
    print("|---" * (len(cols) + 1) + "|")
    for mode, row in rows.items():
        cells = [f"{row[c]:.2f}" if isinstance(row[c], float) else "-" if row[c] is None else str(row[c]) for c in cols]
        print(f"| {mode}{' (default)' if mode == 'auto' else ''} | " + " | ".join(cells) + " |")
    print(f"toolchain image (docker): {toolchains.image()}")


if __name__ == "__main__":
    asyncio.run(main())
