"""Scaling out on Ray Serve, side by side in one run on one machine:

1. Serve's proxy in front of one replica against the same server called directly (`reward-server
   serve`), both pinned to one CPU with the same pool: the proxy's throughput cost (target <= 10%);
2. N replicas on N simulated nodes (a local Ray cluster, each node one CPU: `num_cpus=1`, its
   replica and runners pinned to a CPU of their own, the same pool per replica) against one:
   throughput x N (target >= 0.8 x N, N up to the machine's cores).

    python bench/scale_out.py [--items 256] [--loop 100000] [--passes 5] [--batch 64]

Each completion runs a loop of `--loop` iterations in the sandbox (0: a one-line function, where
the per-request costs weigh most). The one-replica and the N-replica fleets are two Serve
applications side by side (`/one`, `/fleet`, each replica half a node's CPU in Ray's books), so
every pass measures all three modes seconds apart; the figures are medians over passes, each
ratio taken within a pass (a shared machine's load drifts between passes). Needs the `ray` extra.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import ray  # noqa: E402
from ray import serve  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402

from reward_server.client import AsyncRewardClient  # noqa: E402
from reward_server.deploy.ray import CPUS_ENV, FleetArgs, build_app  # noqa: E402
from reward_server.local import SubprocessServer, free_port  # noqa: E402


def corpus(n: int, loop: int) -> list[dict]:
    """n completions that pass their tests, each running `loop` iterations of a sum."""
    items = []
    for k in range(n):
        if loop:
            code = f"```python\ndef f(n):\n    s = 0\n    for i in range(n):\n        s += i % {k % 7 + 2}\n    return s\n```"
            want = sum(i % (k % 7 + 2) for i in range(loop))
            asserts = [f"assert f({loop}) == {want}"]
        else:
            code = "```python\ndef add(a, b):\n    return a + b\n```"
            asserts = [f"assert add({k}, 2) == {k + 2}"]
        items.append({"id": str(k), "completion": code,
                      "task": {"type": "code", "tests": {"kind": "assert", "asserts": asserts}}})
    return items


async def throughput(url: str, items: list[dict], batch: int, concurrency: int) -> float:
    """Completions per second for the whole corpus through the bundled client (all must pass)."""
    async with AsyncRewardClient(url, max_batch=batch, max_concurrency=concurrency) as client:
        await client.score(items[:concurrency])  # warm: connections, the runners' first fork
        t0 = time.perf_counter()
        results = await client.score(items)
        dt = time.perf_counter() - t0
    bad = [r for r in results if r.status != "ok" or r.reward != 1.0]
    if bad:
        raise RuntimeError(f"{len(bad)} completions scored wrong: {bad[0]}")
    return len(items) / dt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--items", type=int, default=256)
    ap.add_argument("--loop", type=int, default=100_000, help="iterations each completion runs (0: a one-liner)")
    ap.add_argument("--passes", type=int, default=5)
    ap.add_argument("--batch", type=int, default=64, help="items per request")
    ap.add_argument("--concurrency", type=int, default=8, help="requests in flight")
    ap.add_argument("--slots", type=int, default=2, help="jobs one server's (replica's) pool runs at once")
    ap.add_argument("--nodes", type=int, default=0, help="simulated nodes for the scaling phase (default: the cores)")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    a = ap.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    n = a.nodes or len(cpus)
    settings = {"sandbox": "bwrap", "pool_size": 1, "pool_slots": a.slots, "math_workers": 1}
    items = corpus(a.items, a.loop)
    run = lambda url: asyncio.run(throughput(url, items, a.batch, a.concurrency))  # noqa: E731

    # the direct server: `reward-server serve`, pinned to the first CPU (its runners inherit it)
    os.sched_setaffinity(0, {cpus[0]})
    try:
        direct = SubprocessServer.start(["--sandbox", "bwrap", "--pool", "1", "--math-workers", "1",
                                         "--text-logs", "--log-level", "warning"],
                                        env={**os.environ, "REWARD_SERVER_POOL_SLOTS": str(a.slots)})
    finally:
        os.sched_setaffinity(0, set(cpus))
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
    figures: dict[str, list[float]] = {"direct": [], "serve_1": [], f"serve_{n}": []}
    try:
        for i in range(n):
            cluster.add_node(num_cpus=1, env_vars={CPUS_ENV: str(cpus[i % len(cpus)])})
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False, logging_level="WARNING")
        port = free_port()
        serve.start(proxy_location="HeadOnly", http_options={"host": "127.0.0.1", "port": port})
        # two applications side by side, each replica half a node's CPU: one replica, and n
        # replicas (one per node); only the one measured has work at a time
        for name, replicas in (("one", 1), ("fleet", n)):
            serve.run(build_app(FleetArgs(replicas=replicas, cpus_per_replica=0.5, settings=settings)),
                      name=name, route_prefix=f"/{name}")
        proxy = f"http://127.0.0.1:{port}"
        for p in range(a.passes):
            figures["direct"].append(run(direct.url))
            figures["serve_1"].append(run(proxy + "/one"))
            figures[f"serve_{n}"].append(run(proxy + "/fleet"))
            print(f"pass {p}: direct {figures['direct'][-1]:.1f}/s, serve 1 replica {figures['serve_1'][-1]:.1f}/s, "
                  f"serve {n} replicas {figures[f'serve_{n}'][-1]:.1f}/s", flush=True)
    finally:
        direct.stop()
        try:
            serve.shutdown()
            ray.shutdown()
        finally:
            cluster.shutdown()

    passes = list(zip(figures["direct"], figures["serve_1"], figures[f"serve_{n}"], strict=True))
    cost = statistics.median(1 - s1 / d for d, s1, _ in passes)
    scale = statistics.median(sn / s1 for _, s1, sn in passes)
    med = {k: statistics.median(v) for k, v in figures.items()}
    print(f"\nitems {a.items} x loop {a.loop}, batch {a.batch}, {a.concurrency} requests in flight, "
          f"{a.slots} slots per server, {a.passes} passes (medians; ratios taken within each pass)")
    print(f"| mode | completions/s |\n|---|---|\n| direct, 1 CPU | {med['direct']:.1f} |\n"
          f"| Serve, 1 replica | {med['serve_1']:.1f} |\n| Serve, {n} replicas on {n} nodes | {med[f'serve_{n}']:.1f} |")
    print(f"proxy cost: {cost:+.1%} (target <= 10%); scaling x{scale:.2f} for {n} replicas (target >= {0.8 * n:.1f})")
    if a.json:
        a.json.write_text(json.dumps({"args": vars(a) | {"json": str(a.json)}, "passes": figures, "median": med,
                                      "proxy_cost": cost, "scaling": scale}, indent=2))


if __name__ == "__main__":
    main()
