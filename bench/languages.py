"""Compiled languages: ours (cache miss, cache hit, each more test) against `docker run`
compile-and-run per completion and a compile-per-test client (SandboxFusion's pattern under
verl: one request per test case, each compiling), side by side, per completion of N tests.

CPU is the whole sandbox's: the bwrap runner's process tree (runner, supervisors, spawners,
verdict processes, compilers, programs; what they reaped included), read from /proc before
and after; wall is sequential, one completion at a time. The baselines run the same
compiler with the same flags (no precompiled header: SandboxFusion and `docker run` images
have none) and the same binary per test; `docker run` uses the toolchain image when built.
Also: Java and node per completion once built, and the cache hit rate on GRPO-like groups
(8 completions per prompt, some identical).

Usage:
    python bench/languages.py                 # C++ 20 tests, 4 completions per mode
    python bench/languages.py --only java,javascript   # the shared process vs a process per test
    python bench/languages.py --only cpp --rounds 3     # C++ miss / hit rows only, repeated (for A/B runs)
    python bench/languages.py --tests 20 --completions 6 --json out.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sandbox import Job, Limits, make_pool  # noqa: E402
from sandbox.runner.languages.table import CPP_FLAGS  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
TOOLCHAIN_IMAGE = os.environ.get("VERIREWARD_TOOLCHAIN_IMAGE", "verireward-sandbox:toolchains")

CPP = """#include <bits/stdc++.h>
using namespace std;
int main() {{ int n; cin >> n; vector<long long> v(n); for (auto& x : v) cin >> x;
  sort(v.begin(), v.end()); long long salt = {salt}; (void)salt;
  for (auto x : v) cout << x << ' '; cout << '\\n'; }}
"""
JAVA = """import java.util.*;
public class Main {{ public static void main(String[] a) {{ Scanner s = new Scanner(System.in); int n = s.nextInt();
  long[] v = new long[n]; for (int i = 0; i < n; i++) v[i] = s.nextLong(); Arrays.sort(v); long salt = {salt};
  StringBuilder b = new StringBuilder(); for (long x : v) b.append(x).append(' '); System.out.println(b); }} }}
"""
NODE = """const t = require('fs').readFileSync(0, 'utf8').trim().split(/\\s+/).map(Number); const salt = {salt};
console.log(t.slice(1).sort((x, y) => x - y).join(' ') + ' ');
"""


def cases(n: int) -> list[dict]:
    out = []
    for i in range(n):
        v = [(i * 7919 + k * 104729) % 1000 for k in range(10)]
        out.append({"stdin": f"{len(v)}\n{' '.join(map(str, v))}\n", "stdout": " ".join(map(str, sorted(v))) + " \n"})
    return out


def tree_cpu(root: int) -> float:
    """CPU seconds of `root` and its live descendants, with what each has reaped."""
    parent: dict[int, int] = {}
    times: dict[int, float] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                data = f.read()
        except OSError:
            continue
        fields = data[data.rindex(b")") + 2:].split()
        parent[int(name)] = int(fields[1])
        times[int(name)] = sum(int(x) for x in fields[11:15]) / TICK  # utime stime cutime cstime
    keep, total = {root}, 0.0
    changed = True
    while changed:
        changed = False
        for pid, pp in parent.items():
            if pp in keep and pid not in keep:
                keep.add(pid)
                changed = True
    for pid in keep:
        total += times.get(pid, 0.0)
    return total


def runner_cpu(pool) -> float:
    return sum(tree_cpu(proc.pid) for proc in pool.host.procs.values())


async def ours(pool, lang: str, template: str, salts: list[int], tests: list[dict]) -> tuple[float, float, list]:
    """(CPU s, wall s) per completion, and the compile outcomes."""
    c0, t0 = runner_cpu(pool), time.perf_counter()
    outcomes = []
    for s in salts:
        r = await pool.run(Job(program=template.format(salt=s), language=lang, tests={"kind": "stdio", "cases": tests},
                               limits=Limits(timeout_s=5, memory_mb=512)))
        assert r.passed == r.total, (lang, r.tests[:2], r.load_message[:500])
        outcomes.append(r.compile.cache if r.compile else "")
    n = len(salts)
    return (runner_cpu(pool) - c0) / n, (time.perf_counter() - t0) / n, outcomes


def children_cpu() -> float:
    t = os.times()
    return t.children_user + t.children_system


def compile_per_test(salts: list[int], tests: list[dict]) -> tuple[float, float]:
    """A client that sends one request per test, each compiling (no cache, no PCH)."""
    gxx = shutil.which("g++")
    c0, t0 = children_cpu(), time.perf_counter()
    with tempfile.TemporaryDirectory() as d:
        for s in salts:
            src = os.path.join(d, "main.cpp")
            with open(src, "w") as f:
                f.write(CPP.format(salt=s))
            for case in tests:
                subprocess.run([gxx, *CPP_FLAGS, "-o", os.path.join(d, "main"), src], check=True)
                out = subprocess.run([os.path.join(d, "main")], input=case["stdin"], capture_output=True, text=True)
                assert out.stdout == case["stdout"]
    n = len(salts)
    return (children_cpu() - c0) / n, (time.perf_counter() - t0) / n


def docker_run(salts: list[int], tests: list[dict]) -> tuple[float, float] | None:
    """`docker run --rm` per completion: compile, then every test, in one fresh container."""
    if shutil.which("docker") is None or subprocess.run(["docker", "image", "inspect", TOOLCHAIN_IMAGE],
                                                        capture_output=True).returncode != 0:
        return None
    t0 = time.perf_counter()
    c0 = children_cpu()
    with tempfile.TemporaryDirectory() as d:
        os.chmod(d, 0o755)
        for i, case in enumerate(tests):
            with open(os.path.join(d, f"in{i}"), "w") as f:
                f.write(case["stdin"])
        for s in salts:
            with open(os.path.join(d, "main.cpp"), "w") as f:
                f.write(CPP.format(salt=s))
            script = (f"g++ {' '.join(CPP_FLAGS)} -o /tmp/main /w/main.cpp && "
                      f"for i in $(seq 0 {len(tests) - 1}); do /tmp/main < /w/in$i; done")
            out = subprocess.run(["docker", "run", "--rm", "--network", "none", "-v", f"{d}:/w:ro",
                                  "--entrypoint", "sh", TOOLCHAIN_IMAGE, "-c", script],
                                 capture_output=True, text=True, check=True)
            assert out.stdout == "".join(c["stdout"] for c in tests), out.stderr[-500:]
    n = len(salts)
    return (children_cpu() - c0) / n, (time.perf_counter() - t0) / n  # CPU: the docker client only


async def groups(pool, prompts: int) -> dict:
    """GRPO-like: 8 completions per prompt, 3 distinct programs among them, sent at once."""
    tests = cases(5)
    counts: dict[str, int] = {}
    for p in range(prompts):
        salts = [p * 100 + k for k in (1, 1, 1, 2, 2, 3, 1, 2)]
        jobs = [pool.run(Job(program=CPP.format(salt=s), language="cpp", tests={"kind": "stdio", "cases": tests}))
                for s in salts]
        for r in await asyncio.gather(*jobs):
            counts[r.compile.cache] = counts.get(r.compile.cache, 0) + 1
    total = sum(counts.values())
    return {"counts": counts, "hit_rate": round((counts.get("hit", 0) + counts.get("merged", 0)) / total, 3)}


def row(name: str, cpu: float | None, wall: float | None, target: str = "") -> str:
    c = f"{cpu * 1000:9.1f}" if cpu is not None else "        -"
    w = f"{wall * 1000:9.1f}" if wall is not None else "        -"
    return f"{name:<44} {c} {w}   {target}"


async def shared_rows(n_tests: int, n: int, langs: list[str]) -> None:
    """Java / node per completion once built: the shared harness process against a process per
    test (the same programs with a word that makes sharing unfaithful, in a comment)."""
    tests = cases(n_tests)
    forced = {"java": "// FileDescriptor: a process per test\n", "javascript": "// child_process: a process per test\n"}
    pool = make_pool("bwrap", size=1, per_runner=2, languages=True)
    await pool.start()
    try:
        print(f"\nper completion of {n_tests} tests after compile (cache hit), sequential, {n} runs (ms)")
        print(f"{'':<44} {'CPU':>9} {'wall':>9}   target (issue 17)")
        for lang, template, target in (("java", JAVA, "CPU <= 200"), ("javascript", NODE, "CPU <= 40")):
            if lang not in langs:
                continue
            base = int(time.time()) % 100000 * 1000
            for name, prog in (("shared process", template), ("a process per test", forced[lang] + template)):
                await ours(pool, lang, prog, [base], tests)  # built, runner warm
                got = await ours(pool, lang, prog, [base] * n, tests)
                print(row(f"ours, {lang} {n_tests} tests, {name}", got[0], got[1], target if name[0] == "s" else ""))
    finally:
        await pool.close()


async def cpp_rows(n_tests: int, n: int, rounds: int) -> None:
    """C++ cache miss and hit only (no baselines), `rounds` times with new programs: quick enough
    to alternate with another checkout of the code at the same load."""
    tests = cases(n_tests)
    pool = make_pool("bwrap", size=1, per_runner=2, languages=True)
    await pool.start()
    try:
        await ours(pool, "cpp", CPP, [-1], tests)  # warm the runner
        base = int(time.time()) % 100000 * 1000
        print(f"\nper completion of {n_tests} tests, {n} distinct programs per round (ms)")
        for r in range(rounds):
            salts = [base + r * 100 + i for i in range(n)]
            miss = await ours(pool, "cpp", CPP, salts, tests)
            hit = await ours(pool, "cpp", CPP, salts, tests)
            print(row(f"round {r + 1}: C++ cache miss", miss[0], miss[1], "CPU <= 350"))
            print(row(f"round {r + 1}: C++ cache hit", hit[0], hit[1], "CPU <= 50"))
    finally:
        await pool.close()


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tests", type=int, default=20)
    ap.add_argument("--completions", type=int, default=4)
    ap.add_argument("--json", default="")
    ap.add_argument("--only", default="", help="java,javascript: only those rows (no C++ or baselines); "
                    "cpp: only C++ miss and hit")
    ap.add_argument("--rounds", type=int, default=1, help="with --only cpp: rounds of distinct programs")
    a = ap.parse_args()
    if a.only == "cpp":
        await cpp_rows(a.tests, a.completions, a.rounds)
        return
    if a.only:
        await shared_rows(a.tests, a.completions, a.only.split(","))
        return
    tests, n = cases(a.tests), a.completions
    pool = make_pool("bwrap", size=1, per_runner=2, languages=True)
    await pool.start()
    res: dict = {"tests": a.tests, "completions": n}
    try:
        await ours(pool, "cpp", CPP, [-1], tests)  # warm the runner (first fork of each role)
        base = int(time.time()) % 100000 * 1000
        miss = await ours(pool, "cpp", CPP, [base + i for i in range(n)], tests)
        hit = await ours(pool, "cpp", CPP, [base + i for i in range(n)], tests)
        one = await ours(pool, "cpp", CPP, [base + i for i in range(n)], tests[:1])
        per_test = ((hit[0] - one[0]) / (a.tests - 1), (hit[1] - one[1]) / (a.tests - 1))
        await ours(pool, "java", JAVA, [base], tests)
        java = await ours(pool, "java", JAVA, [base] * n, tests)
        await ours(pool, "javascript", NODE, [base], tests)
        node = await ours(pool, "javascript", NODE, [base] * n, tests)
        grpo = await groups(pool, 3)
    finally:
        await pool.close()
    cpt = compile_per_test([base + 50 + i for i in range(max(1, n // 2))], tests)
    dr = docker_run([base + 80 + i for i in range(max(1, n // 2))], tests)
    print(f"\nper completion of {a.tests} tests, sequential, {n} distinct programs per mode (ms)")
    print(f"{'':<44} {'CPU':>9} {'wall':>9}   target (issue 17)")
    print(row("ours, C++ cache miss (compile + tests)", miss[0], miss[1], "CPU <= 350"))
    print(row("ours, C++ cache hit", hit[0], hit[1], "CPU <= 50"))
    print(row("ours, C++ each additional test", per_test[0], per_test[1], "CPU <= 2"))
    print(row("docker run, compile-and-run per completion", dr[0] if dr else None, dr[1] if dr else None,
              f"ours miss >= 3x faster (wall: {dr[1] / miss[1]:.1f}x)" if dr else "no toolchain image"))
    print(row("compile-per-test client (SandboxFusion/verl)", cpt[0], cpt[1],
              f"ours >= 40x faster (CPU vs miss: {cpt[0] / miss[0]:.1f}x, vs hit: {cpt[0] / hit[0]:.0f}x)"))
    print(row("ours, Java after compile (cache hit)", java[0], java[1], "CPU <= 200"))
    print(row("ours, node (cache hit)", node[0], node[1], "CPU <= 40"))
    print(f"GRPO-like groups (8 per prompt, 3 distinct): {grpo}")
    res.update(miss=miss[:2], hit=hit[:2], per_test=per_test, docker_run=dr, compile_per_test=cpt, java=java[:2],
               node=node[:2], grpo=grpo, outcomes={"miss": miss[2], "hit": hit[2]})
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    asyncio.run(main())
