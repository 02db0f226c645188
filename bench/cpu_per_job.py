"""CPU per job on the docker host, split by process class: where a sandbox job's cost sits.

Wall clock on a shared machine is noise; CPU time is not (much). This runs the corpus of
bench/sandbox_throughput.py (HumanEval canonical, as that tree's own bench builds each job)
through a docker pool of the tree on PYTHONPATH, and reads, after warm-up and again after
the measured jobs, before the pool closes:

    container   the runner container's cpuacct cgroup (every process in it, dead ones too)
    vr-super    the supervisors (one per connection), vr-spawner, vr-verdict, vr-runner,
                vr-slot-* keepers: /proc/<pid>/task/*/schedstat, ns
    candidates  container minus the live processes above (the forked candidates, reaped)
    client      this process (the pool's client side, asyncio), getrusage

Usage (one tree at a time; bench/ab_throughput.sh interleaves two):
    PYTHONPATH=TREE VERIREWARD_SANDBOX_IMAGE=IMAGE python bench/cpu_per_job.py --passes 5
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import importlib.util
import json
import os
import re
import resource
import sys

CG = "/sys/fs/cgroup/cpuacct/docker/{id}/cpuacct.usage"
CG_PROCS = "/sys/fs/cgroup/cpuacct/docker/{id}/cgroup.procs"


def _bench_module():
    """The throughput bench of the tree on PYTHONPATH (its corpus and job shape)."""
    root = next(p for p in sys.path if os.path.isfile(os.path.join(p or ".", "bench", "sandbox_throughput.py")))
    spec = importlib.util.spec_from_file_location("tree_bench", os.path.join(root or ".", "bench", "sandbox_throughput.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules["tree_bench"] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def _proc_ns(pid: int) -> int:
    total = 0
    for f in glob.glob(f"/proc/{pid}/task/*/schedstat"):
        try:
            with open(f) as fh:
                total += int(fh.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as fh:
            return fh.read().strip()
    except OSError:
        return "?"


def _klass(comm: str) -> str:
    return re.sub(r"-\d+$", "", comm)


def snapshot(ids: list[str]) -> dict:
    """{container: ns, (pid, class): ns} over the given containers, and the client's ns."""
    out: dict = {"container": 0, "procs": {}}
    for cid in ids:
        with open(CG.format(id=cid)) as fh:
            out["container"] += int(fh.read())
        with open(CG_PROCS.format(id=cid)) as fh:
            for line in fh:
                pid = int(line)
                out["procs"][pid] = (_klass(_comm(pid)), _proc_ns(pid))
    ru = resource.getrusage(resource.RUSAGE_SELF)
    out["client"] = int((ru.ru_utime + ru.ru_stime) * 1e9)
    return out


def breakdown(a: dict, b: dict, n: int) -> dict[str, float]:
    """ms per job per process class between two snapshots."""
    per: dict[str, float] = {}
    live = 0
    for pid, (klass, ns) in b["procs"].items():
        d = ns - a["procs"].get(pid, (klass, 0))[1]
        per[klass] = per.get(klass, 0) + d
        live += d
    per["candidates"] = (b["container"] - a["container"]) - live
    born = [k for pid, (k, _) in b["procs"].items() if pid not in a["procs"] and k != "vr-candidate"]
    gone = [k for pid, (k, _) in a["procs"].items() if pid not in b["procs"] and k != "vr-candidate"]
    if born or gone:  # a connection made or lost during the run: its processes' CPU lands in "candidates"
        print(f"note: processes started {sorted(born)}, ended {sorted(gone)} during the measured jobs",
              file=sys.stderr)
    per["container"] = b["container"] - a["container"]
    per["client"] = b["client"] - a["client"]
    per["total"] = per["container"] + per["client"]
    return {k: v / n / 1e6 for k, v in per.items()}


async def measure(passes: int, concurrency: int, limit: int | None, perf: str = "", pyspy: str = "", strace: str = "") -> tuple[dict, int, float]:
    from sandbox import Job, Limits, make_pool

    tb = _bench_module()
    items = tb.corpus("canonical", limit) * passes
    pool = make_pool("docker", size=min(concurrency, os.cpu_count() or 2), per_runner=max(1, concurrency // 2 or 1))
    await pool.start()
    try:
        def tests(it) -> dict:
            t = {"kind": "assert", "test": it.test, "entry_point": it.entry_point}
            if getattr(it, "prompt", ""):
                t["prompt"] = it.prompt  # only where that tree's bench sends it
            return t

        jobs = [Job(program=it.program, tests=tests(it), limits=Limits(timeout_s=it.timeout, memory_mb=1024))
                for it in items]
        for _ in range(3):
            await asyncio.gather(*(pool.run(j) for j in jobs[: 2 * concurrency + 2]))
        ids = [h.extra["id"] for h in pool.handles()]
        sem = asyncio.Semaphore(concurrency)
        right = 0

        async def one(j, it) -> None:
            nonlocal right
            async with sem:
                r = await pool.run(j)
                right += int((r.passed == r.total and r.total > 0) == it.expect_pass)

        s0 = snapshot(ids)
        rec = None
        if strace:  # every system call of the runners' processes and what they fork (slow)
            args = ["strace", "-f", "-qq", "-o", strace]
            for p, (k, _) in s0["procs"].items():
                if k != "vr-candidate":
                    args += ["-p", str(p)]
            rec = await asyncio.create_subprocess_exec(*args, stdout=asyncio.subprocess.DEVNULL,
                                                       stderr=asyncio.subprocess.DEVNULL)
            await asyncio.sleep(1.0)
            with open(strace + ".procs", "w") as fh:
                json.dump({p: k for p, (k, _) in s0["procs"].items()}, fh)
        elif perf and not pyspy:  # samples of the runner processes and what they fork from now on (inherit)
            pids = ",".join(str(p) for p, (k, _) in s0["procs"].items() if k != "vr-candidate")
            rec = await asyncio.create_subprocess_exec("perf", "record", "-q", "-g", "-F", "999", "-o", perf, "-p", pids,
                                                       stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
            await asyncio.sleep(1.0)
        spies = []
        if pyspy:  # py-spy (installed separately) on each supervisor and what it forks
            for p, (k, _) in s0["procs"].items():
                if k == "vr-super":
                    spies.append(await asyncio.create_subprocess_exec(
                        pyspy, "record", "--subprocesses", "--nonblocking", "-r", "250", "-f", "raw", "-o",
                        f"{perf or 'pyspy'}.{p}.txt", "-p", str(p),
                        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL))
            await asyncio.sleep(2.0)
        t0 = asyncio.get_running_loop().time()
        await asyncio.gather(*(one(j, it) for j, it in zip(jobs, items)))
        wall = asyncio.get_running_loop().time() - t0
        s1 = snapshot(ids)
        if rec is not None:
            rec.send_signal(2)
            await rec.wait()
        for spy in spies:
            spy.send_signal(2)
            await spy.wait()
    finally:
        await pool.close()
    return breakdown(s0, s1, len(items)), right, len(items) / wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--passes", type=int, default=5)
    ap.add_argument("--concurrency", type=int, default=2)
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--label", default="")
    ap.add_argument("--perf", default="", help="also `perf record -g` the runners' processes into this file")
    ap.add_argument("--pyspy", default="", help="py-spy binary: sample each supervisor (and its children) into PERF.<pid>.txt")
    ap.add_argument("--strace", default="", help="strace -f the runners' processes into this file")
    ap.add_argument("--json", action="store_true", help="one JSON line instead of a table")
    a = ap.parse_args()
    per, right, rate = asyncio.run(measure(a.passes, a.concurrency, a.limit, a.perf, a.pyspy, a.strace))
    n = 164 * a.passes if a.limit is None else a.limit * a.passes
    if a.json:
        print(json.dumps({"label": a.label, "n": n, "right": right, "rate": round(rate, 1),
                          **{k: round(v, 4) for k, v in per.items()}}))
        return
    print(f"{a.label} {n} jobs, {right} verdicts right, {rate:.1f} jobs/s (wall, noisy)")
    for k in sorted(per, key=lambda k: -per[k]):
        print(f"  {k:12s} {per[k]:7.3f} ms/job")


if __name__ == "__main__":
    main()
