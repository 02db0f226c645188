"""Stateful sessions, side by side in one run (docs/SESSIONS.md):

1. session create p50 and execute overhead p50 through HTTP (`reward-server serve` in a
   subprocess; a trivial cell, so the round trip is all overhead), against
2. a Jupyter kernel per trajectory (`jupyter_client` + `ipykernel`, what self-hosted users
   run): kernel start until ready, and a trivial cell's round trip;
3. a 10-turn trajectory: in one session (each cell once) against `/run_code` replaying the
   history on every turn (turn k runs cells 1..k): CPU time of the server's whole process tree
   (server, runners, sandboxed interpreters), from /proc;
4. the memory of idle sessions: PSS of the server's process tree before and after opening
   `--idle` sessions (PSS shares the forked interpreters' common pages out fairly);
5. with `--busy N`: /v1/score requests of known verdicts beside N sessions running a CPU-bound
   cell at once (every verdict as when scored alone, every cell answered).

Usage: python bench/sessions.py [--creates 40] [--executes 200] [--kernels 5] [--trajectories 4] [--idle 200]
       [--busy 100]
(bwrap; the Jupyter part needs `pip install jupyter_client ipykernel`, skipped without them)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reward_server.local import SubprocessServer  # noqa: E402

CLK = os.sysconf("SC_CLK_TCK")

# a 10-turn trajectory: each cell does some real work (a few ms to tens of ms of CPU), as a
# model's tool calls do; later cells use what earlier ones defined
CELLS = [
    "import math, itertools, fractions, statistics, collections",
    "primes = [n for n in range(2, 60000) if all(n % p for p in range(2, math.isqrt(n) + 1))]\nlen(primes)",
    "def collatz(n):\n    k = 0\n    while n != 1:\n        n = n // 2 if n % 2 == 0 else 3 * n + 1\n        k += 1\n    return k\n"
    "max(range(1, 30000), key=collatz)",
    "gaps = collections.Counter(b - a for a, b in zip(primes, primes[1:]))\ngaps.most_common(3)",
    "h = sum(fractions.Fraction(1, k) for k in range(1, 400))\nh.denominator % 1000",
    "statistics.mean(collatz(n) for n in range(1, 20000))",
    "pal = [p for p in primes if str(p) == str(p)[::-1]]\nlen(pal)",
    "sum(1 for c in itertools.combinations(range(40), 3) if sum(c) % 7 == 0)",
    "pow(3, 10 ** 5, 10 ** 9 + 7)",
    "print(len(primes), gaps.most_common(1), len(pal))",
]


# ---------------------------------------------------------------------------- /proc

def _stat(pid: str) -> tuple[int, float] | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            rest = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    ppid = int(rest[1])
    cpu = sum(int(x) for x in rest[11:15]) / CLK  # utime stime cutime cstime
    return ppid, cpu


def tree(root: int) -> dict[int, float]:
    """pid -> CPU seconds (its own and its reaped children's) for `root` and every descendant."""
    kids: dict[int, list[int]] = defaultdict(list)
    cpu: dict[int, float] = {}
    for d in os.listdir("/proc"):
        if d.isdigit() and (st := _stat(d)) is not None:
            kids[st[0]].append(int(d))
            cpu[int(d)] = st[1]
    out, todo = {}, [root]
    while todo:
        p = todo.pop()
        if p in cpu:
            out[p] = cpu[p]
            todo.extend(kids.get(p, []))
    return out


def tree_cpu(root: int) -> float:
    return sum(tree(root).values())


def tree_pss_mb(root: int) -> tuple[float, float]:
    """(PSS, RSS) of the tree in MiB."""
    pss = rss = 0
    for pid in tree(root):
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        pss += int(line.split()[1])
                    elif line.startswith("Rss:"):
                        rss += int(line.split()[1])
        except OSError:
            continue
    return pss / 1024, rss / 1024


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


# ---------------------------------------------------------------------------- parts

def sessions_latency(c: httpx.Client, creates: int, executes: int) -> dict:
    create_ms, delete_ms = [], []
    for _ in range(creates):
        t = time.perf_counter()
        r = c.post("/v1/sessions", json={})
        create_ms.append((time.perf_counter() - t) * 1000)
        sid = r.json()["session_id"]
        t = time.perf_counter()
        c.delete(f"/v1/sessions/{sid}")
        delete_ms.append((time.perf_counter() - t) * 1000)
    sid = c.post("/v1/sessions", json={}).json()["session_id"]
    rt, inside, floor, post_floor = [], [], [], []
    for i in range(executes):  # interleaved with the HTTP floors, so all see the same load
        t = time.perf_counter()
        out = c.post(f"/v1/sessions/{sid}/execute", json={"code": f"x = {i}"}).json()
        rt.append((time.perf_counter() - t) * 1000)
        inside.append(out["time_s"] * 1000)
        t = time.perf_counter()
        c.get("/healthz")
        floor.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()  # the same POST through the gateway, answered 404 before any work
        c.post("/v1/sessions/nobody.0/execute", json={"code": f"x = {i}"})
        post_floor.append((time.perf_counter() - t) * 1000)
    c.delete(f"/v1/sessions/{sid}")
    return {"create_p50_ms": statistics.median(create_ms), "create_p90_ms": pct(create_ms, 0.9),
            "http_floor_p50_ms": statistics.median(floor), "post_floor_p50_ms": statistics.median(post_floor),
            "delete_p50_ms": statistics.median(delete_ms),
            "execute_rt_p50_ms": statistics.median(rt), "execute_rt_p90_ms": pct(rt, 0.9),
            "execute_in_sandbox_p50_ms": statistics.median(inside)}


def jupyter_latency(kernels: int, executes: int) -> dict | None:
    try:
        from jupyter_client.manager import start_new_kernel
    except ImportError:
        return None
    start_ms, rt = [], []
    for k in range(kernels):
        t = time.perf_counter()
        km, kc = start_new_kernel(kernel_name="python3", startup_timeout=60)
        start_ms.append((time.perf_counter() - t) * 1000)
        try:
            if k == 0:
                for i in range(executes):
                    t = time.perf_counter()
                    kc.execute_interactive(f"x = {i}", timeout=30, output_hook=lambda msg: None)
                    rt.append((time.perf_counter() - t) * 1000)
        finally:
            kc.stop_channels()
            km.shutdown_kernel(now=True)
    return {"create_p50_ms": statistics.median(start_ms), "create_p90_ms": pct(start_ms, 0.9),
            "execute_rt_p50_ms": statistics.median(rt)}


def trajectory_cpu(c: httpx.Client, root: int, trajectories: int) -> dict:
    """Server-tree CPU of one 10-turn trajectory, each way, alternated to share the box's noise."""
    sess, replay = [], []
    for _ in range(trajectories):
        t0 = tree_cpu(root)
        sid = c.post("/v1/sessions", json={}).json()["session_id"]
        for cell in CELLS:
            out = c.post(f"/v1/sessions/{sid}/execute", json={"code": cell, "timeout_s": 30}).json()
            assert out["status"] == "ok", out
        c.delete(f"/v1/sessions/{sid}")
        time.sleep(0.2)  # reaped: its CPU lands in its parent's cutime
        sess.append(tree_cpu(root) - t0)
        t0 = tree_cpu(root)
        for k in range(1, len(CELLS) + 1):
            out = c.post("/run_code", json={"code": "\n".join(CELLS[:k]), "language": "python", "run_timeout": 30}).json()
            assert out["status"] == "Success", out
        time.sleep(0.2)
        replay.append(tree_cpu(root) - t0)
    s, r = statistics.median(sess), statistics.median(replay)
    return {"session_cpu_s": s, "replay_cpu_s": r, "ratio": r / s}


def idle_memory(c: httpx.Client, root: int, n: int) -> dict:
    time.sleep(0.5)
    pss0, rss0 = tree_pss_mb(root)
    sids = []
    for _ in range(n):
        r = c.post("/v1/sessions", json={"labels": {"bench": "idle"}})
        if r.status_code != 200:
            break
        sids.append(r.json()["session_id"])
    for sid in sids:  # each touched once: an interpreter that has run a cell
        c.post(f"/v1/sessions/{sid}/execute", json={"code": "x = 1"})
    time.sleep(0.5)
    pss1, rss1 = tree_pss_mb(root)
    for sid in sids:
        c.delete(f"/v1/sessions/{sid}")
    per = (pss1 - pss0) / max(1, len(sids))
    return {"opened": len(sids), "pss_before_mb": pss0, "pss_after_mb": pss1, "pss_per_session_mb": per,
            "rss_after_mb": rss1, "pss_200_mb": pss0 + per * 200}


SCORE_ITEMS = [  # known verdicts: 1.0, 0.6 (2 of 4 tests), 0.0 (does not compile), 1.0
    {"completion": "```python\ndef add(a, b):\n    return a + b\n```", "task": None},
    {"completion": "```python\ndef add(a, b):\n    return a + b if a > 0 and b > 0 else 99\n```", "task": None},
    {"completion": "```python\ndef add(a, b)\n    return a + b\n```", "task": None},
    {"completion": "```python\nprint(sum(map(int, input().split())))\n```",
     "task": {"type": "code", "tests": {"kind": "stdio", "cases": [{"stdin": "1 2\n", "stdout": "3\n"}]}}},
]
ADD_TASK = {"type": "code", "tests": {"kind": "assert", "asserts": ["assert add(1, 2) == 3", "assert add(-1, 1) == 0",
                                                                     "assert add(2, 2) == 4", "assert add(0, 5) == 5"]}}


def busy_check(c: httpx.Client, n: int, requests: int = 20) -> dict:
    """/v1/score beside n sessions each running a CPU-bound cell at once: every verdict as when
    scored alone, no session call lost."""
    from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415

    items = [{**it, "task": it["task"] or ADD_TASK} for it in SCORE_ITEMS]
    alone = [r["reward"] for r in c.post("/v1/score", json={"items": items}).json()["results"]]
    sids = [c.post("/v1/sessions", json={}).json()["session_id"] for _ in range(n)]
    burn = "s = 0\nfor i in range(2 * 10 ** 6):\n    s += i\ns"
    t = time.perf_counter()
    with ThreadPoolExecutor(n + requests) as pool:
        busy = [pool.submit(c.post, f"/v1/sessions/{sid}/execute", json={"code": burn, "timeout_s": 30}) for sid in sids]
        scored = [pool.submit(c.post, "/v1/score", json={"items": items}) for _ in range(requests)]
        changed = sum(1 for f in scored if [r["reward"] for r in f.result().json()["results"]] != alone)
        statuses = [f.result().json().get("status") for f in busy]
    wall = time.perf_counter() - t
    for sid in sids:
        c.delete(f"/v1/sessions/{sid}")
    return {"sessions": n, "score_requests": requests, "verdicts_changed": changed,
            "sessions_ok": statuses.count("ok"), "wall_s": wall}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--creates", type=int, default=40)
    ap.add_argument("--executes", type=int, default=200)
    ap.add_argument("--kernels", type=int, default=5)
    ap.add_argument("--trajectories", type=int, default=4)
    ap.add_argument("--idle", type=int, default=200)
    ap.add_argument("--busy", type=int, default=0, help="also: /v1/score beside this many busy sessions")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = ap.parse_args()
    env = {**os.environ, "REWARD_SERVER_MAX_SESSIONS": str(max(args.idle, args.busy, 8)), "REWARD_SERVER_LOG_LEVEL": "warning",
           "REWARD_SERVER_MAX_TIMEOUT_S": "60"}
    srv = SubprocessServer.start(["--sandbox", "bwrap"], env=env, timeout_s=180)
    out: dict = {}
    try:
        with httpx.Client(base_url=srv.url, timeout=120) as c:
            out["sessions"] = sessions_latency(c, args.creates, args.executes)
            out["trajectory"] = trajectory_cpu(c, srv.proc.pid, args.trajectories)
            out["idle"] = idle_memory(c, srv.proc.pid, args.idle)
            if args.busy:
                out["busy"] = busy_check(c, args.busy)
    finally:
        srv.stop()
    out["jupyter"] = jupyter_latency(args.kernels, min(args.executes, 100))
    s, j = out["sessions"], out["jupyter"]
    print("| | create p50 ms | create p90 ms | trivial execute round trip p50 ms |\n| --- | --- | --- | --- |")
    print(f"| session (HTTP, bwrap) | {s['create_p50_ms']:.1f} | {s['create_p90_ms']:.1f} | {s['execute_rt_p50_ms']:.2f} "
          f"(in the sandbox {s['execute_in_sandbox_p50_ms']:.2f}) |")
    print(f"| HTTP floor (GET /healthz) | | | {s['http_floor_p50_ms']:.2f} |")
    print(f"| HTTP floor (the same POST to an unknown session: 404) | | | {s['post_floor_p50_ms']:.2f} |")
    if j is not None:
        print(f"| Jupyter kernel per trajectory | {j['create_p50_ms']:.1f} | {j['create_p90_ms']:.1f} | "
              f"{j['execute_rt_p50_ms']:.2f} |")
        print(f"\ncreate: sessions {j['create_p50_ms'] / s['create_p50_ms']:.0f}x faster than a Jupyter kernel")
    t = out["trajectory"]
    print(f"10-turn trajectory, server CPU: session {t['session_cpu_s'] * 1000:.0f} ms, /run_code replaying "
          f"{t['replay_cpu_s'] * 1000:.0f} ms: {t['ratio']:.1f}x cheaper")
    m = out["idle"]
    print(f"idle sessions: {m['opened']} opened, PSS {m['pss_before_mb']:.0f} -> {m['pss_after_mb']:.0f} MiB "
          f"({m['pss_per_session_mb']:.2f} MiB each; 200 -> {m['pss_200_mb']:.0f} MiB), RSS sum {m['rss_after_mb']:.0f} MiB")
    if "busy" in out:
        b = out["busy"]
        print(f"/v1/score beside {b['sessions']} busy sessions: {b['verdicts_changed']} of {b['score_requests']} "
              f"requests had another verdict than alone; {b['sessions_ok']} of {b['sessions']} cells ok "
              f"({b['wall_s']:.1f} s)")
    if args.json is not None:
        args.json.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
