"""Bounded load test of the reward server (loopback only; stops by itself).

Starts a real server (uvicorn on 127.0.0.1, a free port, the real sandbox pool), scores every
distinct item of a mixed catalogue once alone, then has many concurrent clients post mixed
batches for a fixed number of requests: passing, failing and syntax-error programs, hanging
ones (timeouts), hostile ones (fork bomb, memory bomb, output flood, os._exit, SIGKILL of its
own process group) and math answers. It reports throughput, p50/p99 latency and the count of
every HTTP code and item status, and checks:

- no request lost (every request gets an HTTP answer), no 5xx;
- no 429 while the clients stay within the configured capacity (`--clients x --batch <=
  max_inflight + max_queued`); in the burst phase, beyond it, 429s appear and every accepted
  request is answered in full;
- every item's reward equals what the same item scored alone (with faults injected, an item
  may instead be `infra_error` with a null reward, never mis-scored).

    python bench/load_test.py --sandbox bwrap                 # short form (~40 requests)
    python bench/load_test.py --sandbox docker --long         # long form, faults and RSS
    python bench/load_test.py --sandbox docker --faults --docker-restart   # restarts dockerd

`tests/reliability/` runs the same code under pytest (short form in CI).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import random
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# ---- the catalogue: one entry per distinct item ---------------------------------------------

_ADD_ASSERTS = ["assert add(1, 2) == 3", "assert add(-1, 1) == 0", "assert add(2, 2) == 4", "assert add(0, 5) == 5"]


def _code(tests: dict, timeout_s: float = 3, memory_mb: int | None = None) -> dict:
    task: dict[str, Any] = {"type": "code", "language": "python", "tests": tests, "timeout_s": timeout_s}
    if memory_mb:
        task["memory_mb"] = memory_mb
    return task


def _fence(src: str) -> str:
    return f"```python\n{src}```\n"


ADD = _code({"kind": "assert", "asserts": _ADD_ASSERTS})
STDIO = _code({"kind": "stdio", "cases": [{"stdin": "1 2\n", "stdout": "3\n"}, {"stdin": "5 7\n", "stdout": "12\n"}]})
CALL = _code({"kind": "call", "fn_name": "twice", "cases": [{"args": [1], "expected": 2}, {"args": ["ab"], "expected": "abab"}]})
HUMANEVAL = _code({"kind": "assert", "entry_point": "sq",
                   "test": "def check(candidate):\n    assert candidate(2) == 4\n    assert candidate(3) == 9\n    assert candidate(-1) == 1\n"})
# hostile items get one test and tight limits: each costs at most ~1 s of a slot
ONE = _code({"kind": "assert", "asserts": ["assert f() == 1"]}, timeout_s=1, memory_mb=128)

CATALOGUE: dict[str, tuple[str, dict]] = {
    # name: (completion, task); the first word of the name is its class
    "pass_add": (_fence("def add(a, b):\n    return a + b\n"), ADD),
    "pass_stdio": (_fence("a, b = map(int, input().split())\nprint(a + b)\n"), STDIO),
    "pass_call": (_fence("def twice(x):\n    return x * 2\n"), CALL),
    "pass_humaneval": (_fence("def sq(x):\n    return x * x\n"), HUMANEVAL),
    "fail_half": (_fence("def add(a, b):\n    return a + b if a > 0 and b > 0 else 99\n"), ADD),
    "fail_syntax": (_fence("def add(a, b)\n    return a + b\n"), ADD),
    "fail_runtime": (_fence("def add(a, b):\n    return undefined_name\n"), ADD),
    "fail_stdio": (_fence("print(int(input().split()[0]) - 1)\n"), STDIO),
    "fail_nocode": ("I do not know.", ADD),
    "hang_loop": (_fence("def f():\n    while True:\n        pass\n"), ONE),
    "hang_sleep": (_fence("import time\ndef f():\n    time.sleep(60)\n"), ONE),
    "hang_toplevel": (_fence("import time\ntime.sleep(60)\ndef f():\n    return 1\n"), ONE),
    "hostile_forkbomb": (_fence("import os\ndef f():\n    while True:\n        try:\n            os.fork()\n"
                                "        except OSError:\n            pass\n"), ONE),
    "hostile_membomb": (_fence("def f():\n    x = []\n    while True:\n        x.append(bytearray(1 << 24))\n"), ONE),
    "hostile_flood": (_fence("import sys\ndef f():\n    while True:\n        sys.stdout.write('x' * 65536)\n"), ONE),
    "hostile_exit": (_fence("import os\ndef f():\n    os._exit(0)\n"), ONE),
    "hostile_exit_toplevel": (_fence("import os\nos._exit(0)\ndef f():\n    return 1\n"), ONE),
    "hostile_killpg": (_fence("import os, signal\ndef f():\n    os.killpg(0, signal.SIGKILL)\n"), ONE),
    "math_right": ("So the answer is $\\boxed{\\frac{1}{2}}$.", {"type": "math", "answer": "0.5"}),
    "math_wrong": ("The answer is \\boxed{3}.", {"type": "math", "answer": "\\frac{1}{2}"}),
    "math_latex": ("Thus $x = \\boxed{2\\sqrt{2}}$", {"type": "math", "answer": "\\sqrt{8}"}),
}
CLASSES = ("pass", "fail", "hang", "hostile", "math")


def item(name: str, ident: Any = None) -> dict:
    completion, task = CATALOGUE[name]
    out = {"completion": completion, "task": task}
    if ident is not None:
        out["id"] = ident
    return out


def make_batches(n_requests: int, batch: int, seed: int = 0, names: list[str] | None = None) -> list[list[str]]:
    """n_requests batches of `batch` catalogue names; every class in every batch where it fits,
    so that a slow hostile item always shares a request with quick honest ones."""
    rng = random.Random(seed)
    names = names or list(CATALOGUE)
    by_class = {c: [n for n in names if n.startswith(c + "_")] for c in CLASSES}
    by_class = {c: v for c, v in by_class.items() if v}
    out = []
    for _ in range(n_requests):
        b = [rng.choice(v) for v in list(by_class.values())[:batch]]
        b += [rng.choice(names) for _ in range(batch - len(b))]
        rng.shuffle(b)
        out.append(b)
    return out


# ---- running requests ------------------------------------------------------------------------


@dataclass
class Outcome:
    index: int
    names: list[str]
    code: int | None  # None: no HTTP answer at all (lost)
    latency_s: float
    results: list[dict] | None = None
    retry_after: str | None = None
    error: str = ""


@dataclass
class Report:
    phase: str
    outcomes: list[Outcome]
    wall_s: float
    notes: dict = field(default_factory=dict)

    @property
    def codes(self) -> Counter:
        return Counter("lost" if o.code is None else str(o.code) for o in self.outcomes)

    @property
    def item_statuses(self) -> Counter:
        c: Counter = Counter()
        for o in self.outcomes:
            for n, r in zip(o.names, o.results or [], strict=False):
                c[f"{n.split('_')[0]}:{r['status']}"] += 1
        return c

    @property
    def items_answered(self) -> int:
        return sum(len(o.results or []) for o in self.outcomes)

    def latency(self, q: float) -> float:
        xs = sorted(o.latency_s for o in self.outcomes if o.code == 200)
        if not xs:
            return float("nan")
        return xs[min(len(xs) - 1, max(0, math.ceil(q * len(xs)) - 1))]

    def summary(self) -> dict:
        ok = [o for o in self.outcomes if o.code == 200]
        return {
            "phase": self.phase,
            "requests": len(self.outcomes),
            "codes": dict(sorted(self.codes.items())),
            "items_answered": self.items_answered,
            "item_statuses": dict(sorted(self.item_statuses.items())),
            "wall_s": round(self.wall_s, 3),
            "requests_per_s": round(len(ok) / self.wall_s, 2) if self.wall_s else None,
            "items_per_s": round(self.items_answered / self.wall_s, 2) if self.wall_s else None,
            "latency_p50_s": round(self.latency(0.50), 3),
            "latency_p99_s": round(self.latency(0.99), 3),
            "latency_mean_s": round(statistics.fmean(o.latency_s for o in ok), 3) if ok else None,
            **self.notes,
        }


async def post_batch(client: httpx.AsyncClient, url: str, index: int, names: list[str], timeout: float) -> Outcome:
    body = {"items": [item(n, f"{index}-{j}") for j, n in enumerate(names)]}
    t0 = time.perf_counter()
    try:
        r = await client.post(url + "/v1/score", json=body, timeout=timeout)
    except httpx.HTTPError as e:
        return Outcome(index, names, None, time.perf_counter() - t0, error=f"{type(e).__name__}: {e}")
    dt = time.perf_counter() - t0
    out = Outcome(index, names, r.status_code, dt, retry_after=r.headers.get("retry-after"))
    if r.status_code == 200:
        out.results = r.json()["results"]
    else:
        out.error = r.text[:500]
    return out


async def run_load(url: str, batches: list[list[str]], clients: int, *, phase: str = "load",
                   timeout: float = 300, headers: dict | None = None) -> Report:
    """`clients` concurrent clients work through `batches` (each client posts one request at a
    time, no retries: a 429 is recorded as such)."""
    todo = list(enumerate(batches))
    outcomes: list[Outcome] = []
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)

    async with httpx.AsyncClient(headers=headers, limits=limits) as client:

        async def worker() -> None:
            while todo:
                i, names = todo.pop(0)
                outcomes.append(await post_batch(client, url, i, names, timeout))

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(clients)))
        wall = time.perf_counter() - t0
    outcomes.sort(key=lambda o: o.index)
    return Report(phase, outcomes, wall)


async def run_burst(url: str, batches: list[list[str]], *, timeout: float = 300, headers: dict | None = None) -> Report:
    """Every request at once."""
    async with httpx.AsyncClient(headers=headers, limits=httpx.Limits(max_connections=len(batches))) as client:
        t0 = time.perf_counter()
        outcomes = await asyncio.gather(*(post_batch(client, url, i, b, timeout) for i, b in enumerate(batches)))
        wall = time.perf_counter() - t0
    return Report("burst", list(outcomes), wall)


Solo = dict[str, tuple[str, float | None]]


async def score_solo(url: str, names: list[str] | None = None, *, headers: dict | None = None, timeout: float = 120) -> Solo:
    """Each distinct item scored alone (one item per request, one request at a time)."""
    out: Solo = {}
    async with httpx.AsyncClient(headers=headers) as client:
        for n in names or list(CATALOGUE):
            r = await client.post(url + "/v1/score", json={"items": [item(n)]}, timeout=timeout)
            r.raise_for_status()
            res = r.json()["results"][0]
            out[n] = (res["status"], res["reward"])
    return out


def check(report: Report, solo: Solo, *, allow_429: bool = False, allow_infra: bool = False) -> list[str]:
    """Every way the report breaks the contract, as readable lines (empty: all good)."""
    problems = []
    for n, (status, reward) in solo.items():
        if status != "ok" or reward is None:
            problems.append(f"solo {n}: {status} {reward}")
    for o in report.outcomes:
        tag = f"{report.phase} request {o.index}"
        if o.code is None:
            problems.append(f"{tag}: lost ({o.error})")
        elif o.code >= 500:
            problems.append(f"{tag}: {o.code} {o.error}")
        elif o.code == 429:
            if not allow_429:
                problems.append(f"{tag}: 429 within the configured capacity")
            elif not o.retry_after or int(o.retry_after) < 1:
                problems.append(f"{tag}: 429 without Retry-After")
        elif o.code != 200:
            problems.append(f"{tag}: unexpected {o.code} {o.error}")
        else:
            res = o.results or []
            if [r["id"] for r in res] != [f"{o.index}-{j}" for j in range(len(o.names))]:
                problems.append(f"{tag}: ids/order wrong: {[r['id'] for r in res]}")
                continue
            for n, r in zip(o.names, res, strict=True):
                want = solo.get(n)
                if r["status"] == "infra_error":
                    if not allow_infra or r["reward"] is not None:
                        problems.append(f"{tag} {r['id']} {n}: infra_error reward={r['reward']} {r['detail']}")
                elif want is None:
                    continue
                elif r["status"] != "ok" or r["reward"] is None or abs(r["reward"] - want[1]) > 1e-9:
                    problems.append(f"{tag} {r['id']} {n}: {r['status']} reward {r['reward']} != alone {want[1]} "
                                    f"detail={json.dumps(r['detail'])[:300]}")
    return problems


# ---- faults ----------------------------------------------------------------------------------


def kill_runner(handle) -> str:
    """SIGKILL a runner: a bwrap runner's whole process group, or a docker runner's container."""
    if handle.pid:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(handle.pid, signal.SIGKILL)
    else:
        import docker  # noqa: PLC0415

        client = docker.from_env(timeout=10)
        try:
            with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):
                client.containers.get(handle.extra.get("id") or handle.ident).kill()
        finally:
            client.close()
    return handle.ident


class RandomKiller:
    """A thread that kills a random live runner every `lo..hi` seconds until stopped."""

    def __init__(self, pool, lo: float = 0.5, hi: float = 2.0, seed: int = 0, max_kills: int | None = None):
        self.pool, self.lo, self.hi, self.max_kills = pool, lo, hi, max_kills
        self.rng = random.Random(seed)
        self.killed: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="random-killer", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.rng.uniform(self.lo, self.hi)):
            if self.max_kills is not None and len(self.killed) >= self.max_kills:
                return
            handles = self.pool.handles()
            if handles:
                with contextlib.suppress(Exception):
                    self.killed.append(kill_runner(self.rng.choice(handles)))

    def __enter__(self) -> RandomKiller:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)


def wait_pool_full(pool, timeout: float = 30) -> float:
    """Seconds until `pool.stats().live == size` (raises TimeoutError)."""
    t0 = time.monotonic()
    while True:
        st = pool.stats()
        if st.live == st.size:
            return time.monotonic() - t0
        if time.monotonic() - t0 > timeout:
            raise TimeoutError(f"pool not back to full size after {timeout}s: {st}")
        time.sleep(0.05)


DOCKERD_LOG = "/tmp/verireward-dockerd.log"


def dockerd_pids() -> list[int]:
    pids = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            with contextlib.suppress(OSError):
                with open(f"/proc/{name}/comm") as f:
                    if f.read().strip() == "dockerd":
                        pids.append(int(name))
    return pids


def restart_docker_engine(timeout: float = 90) -> float:
    """Stop dockerd (SIGTERM, as a service manager would; its containers go down with it) and
    start it again the way CI starts it (`nohup dockerd >LOG 2>&1 &`). Returns the seconds the
    engine was unavailable."""
    t0 = time.monotonic()
    pids = dockerd_pids()
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while any(os.path.exists(f"/proc/{p}") for p in pids):
        if time.monotonic() > deadline:
            raise TimeoutError("dockerd did not stop")
        time.sleep(0.1)
    with open(DOCKERD_LOG, "ab") as log:
        subprocess.Popen(["dockerd"], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                         start_new_session=True)
    while subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
        if time.monotonic() > deadline:
            raise TimeoutError("dockerd did not come back")
        time.sleep(0.3)
    return time.monotonic() - t0


def rss_mib(pid: int | str = "self") -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


# ---- the CLI ---------------------------------------------------------------------------------


def _print(report: Report, problems: list[str]) -> dict:
    s = report.summary()
    s["problems"] = len(problems)
    print(f"\n== {report.phase}: {s['requests']} requests, {s['items_answered']} items in {s['wall_s']} s "
          f"({s['items_per_s']} items/s, {s['requests_per_s']} req/s); latency p50 {s['latency_p50_s']} s, "
          f"p99 {s['latency_p99_s']} s")
    print(f"   HTTP codes: {s['codes']}")
    print(f"   item statuses: {s['item_statuses']}")
    for k, v in report.notes.items():
        print(f"   {k}: {v}")
    for p in problems[:20]:
        print("   PROBLEM:", p)
    print(f"   {'OK' if not problems else f'{len(problems)} PROBLEMS'}", flush=True)
    return s


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sandbox", default="bwrap", choices=["bwrap", "docker"])
    ap.add_argument("--pool", type=int, default=2, help="runners")
    ap.add_argument("--max-inflight", type=int, default=None,
                    help="jobs handed to the pool at once (default: the pool's capacity, sized from cores and memory)")
    ap.add_argument("--max-queued", type=int, default=28, help="queued jobs beyond max_inflight before 429")
    ap.add_argument("--requests", type=int, default=40)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--clients", type=int, default=4, help="concurrent clients (clients x batch <= capacity: no 429)")
    ap.add_argument("--burst", type=int, default=16, help="requests sent at once beyond capacity (0: skip)")
    ap.add_argument("--faults", action="store_true", help="also a run with runners killed at random intervals")
    ap.add_argument("--docker-restart", action="store_true", help="also restart dockerd mid-load (docker only)")
    ap.add_argument("--rss-batches", type=int, default=0, help="batches for the RSS check (0: skip)")
    ap.add_argument("--long", action="store_true", help="long form: 400 requests, faults, 400 RSS batches")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", dest="json_out", help="write the summaries here")
    args = ap.parse_args(argv)
    if args.long:
        args.requests = max(args.requests, 400)
        args.faults = True
        args.rss_batches = max(args.rss_batches, 400)

    from reward_server.local import InProcessServer  # noqa: PLC0415

    server = InProcessServer.start(sandbox=args.sandbox, pool_size=args.pool, max_inflight_jobs=args.max_inflight,
                          max_queued_jobs=args.max_queued)
    max_inflight = server.app.state.server.admission.max_inflight
    limit = max_inflight + args.max_queued
    clients = args.clients
    if clients * args.batch > limit:
        print(f"note: {clients} clients x {args.batch} items > admission limit {limit}; 429s are allowed")
    print(f"server {server.url}: sandbox={args.sandbox} pool={args.pool} max_inflight={max_inflight} "
          f"max_queued={args.max_queued} (limit {limit} jobs); {args.requests} requests x {args.batch} items, "
          f"{clients} clients; cpus={os.cpu_count()}", flush=True)
    summaries: list[dict] = []
    failed = 0
    try:
        t0 = time.perf_counter()
        solo = asyncio.run(score_solo(server.url))
        print(f"scored {len(solo)} distinct items alone in {time.perf_counter() - t0:.1f} s:")
        for n, (st, rw) in solo.items():
            print(f"   {n:<24} {st} {rw}")

        batches = make_batches(args.requests, args.batch, args.seed)
        rep = asyncio.run(run_load(server.url, batches, clients))
        probs = check(rep, solo, allow_429=clients * args.batch > limit)
        summaries.append(_print(rep, probs))
        failed += bool(probs)

        if args.burst:
            bb = make_batches(args.burst, args.batch, args.seed + 1)
            rep = asyncio.run(run_burst(server.url, bb))
            probs = check(rep, solo, allow_429=True)
            if rep.codes.get("429", 0) == 0 and args.burst * args.batch > limit:
                probs.append("burst beyond capacity saw no 429")
            summaries.append(_print(rep, probs))
            failed += bool(probs)

        if args.faults:
            pool = server.pool
            restarts0 = pool.stats().restarts
            with RandomKiller(pool, 0.5, 2.0, seed=args.seed) as killer:
                rep = asyncio.run(run_load(server.url, make_batches(args.requests, args.batch, args.seed + 2), clients,
                                           phase="faults"))
            rep.notes["runners_killed"] = len(killer.killed)
            rep.notes["pool_full_after_s"] = round(wait_pool_full(pool), 2)
            rep.notes["restarts"] = pool.stats().restarts - restarts0
            probs = check(rep, solo, allow_infra=True)
            summaries.append(_print(rep, probs))
            failed += bool(probs)

        if args.docker_restart and args.sandbox == "docker":
            pool = server.pool
            box: dict = {}

            def restarter() -> None:
                time.sleep(1.0)
                box["down_s"] = restart_docker_engine()

            th = threading.Thread(target=restarter)
            th.start()
            rep = asyncio.run(run_load(server.url, make_batches(max(args.requests, 40), args.batch, args.seed + 3),
                                       clients, phase="docker-restart"))
            th.join()
            rep.notes["engine_down_s"] = round(box.get("down_s", float("nan")), 2)
            rep.notes["pool_full_after_s"] = round(wait_pool_full(pool, 120), 2)
            probs = check(rep, solo, allow_infra=True)
            summaries.append(_print(rep, probs))
            failed += bool(probs)

        if args.rss_batches:
            summaries.append(rss_run(server.url, args.rss_batches, args.batch))
    finally:
        server.stop()
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({"sandbox": args.sandbox, "pool": args.pool,
                                                    "phases": summaries}, indent=2))
    print("\nALL OK" if not failed else f"\n{failed} phase(s) with problems")
    return 1 if failed else 0


def rss_run(url: str, batches: int, batch: int, warmup: int = 10) -> dict:
    """Server RSS (this process hosts it) across `batches` honest batches after a warm-up."""
    names = [n for n in CATALOGUE if n.startswith(("pass", "fail", "math"))]
    bs = make_batches(warmup + batches, batch, 7, names)

    async def go() -> list[float]:
        samples = []
        async with httpx.AsyncClient() as c:
            for i, b in enumerate(bs):
                o = await post_batch(c, url, i, b, 120)
                if o.code != 200:
                    raise RuntimeError(f"RSS run: {o.code} {o.error}")
                if i >= warmup - 1:
                    samples.append(rss_mib())
        return samples

    t0 = time.perf_counter()
    samples = asyncio.run(go())
    out = {"phase": "rss", "batches": batches, "items": batches * batch, "wall_s": round(time.perf_counter() - t0, 1),
           "rss_start_mib": round(samples[0], 1), "rss_end_mib": round(samples[-1], 1),
           "rss_max_mib": round(max(samples), 1), "rss_growth_mib": round(samples[-1] - samples[0], 1)}
    print(f"\n== rss: {out}", flush=True)
    return out


if __name__ == "__main__":
    sys.exit(main())
