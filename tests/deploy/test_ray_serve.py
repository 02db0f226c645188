"""The Ray Serve fleet (reward_server/deploy/ray.py) on a real local Ray cluster: a head with no
CPUs to give (Serve's controller and HTTP proxy) and three one-CPU worker nodes, each its own
raylet and processes, all on this machine (`ray.cluster_utils.Cluster`). Everything goes through
Serve's HTTP address with our real clients: a batch scored across every replica, the trainer's
and the integrations' one URL, a replica whose pool lost its runners taken out of routing and
replaced, a node killed mid-batch losing nothing, autoscaling on in-flight jobs up and down, and
`sandbox: auto` picking docker on nodes with an engine (marked `docker`).

Each node gets a TMPDIR of its own, so its replica's bwrap runners live under a directory the
test can point at (to kill them and keep them from coming back). bwrap host but for the last
test; in CI (`CI=true`) a missing `ray` fails instead of skipping (.ci/run installs the `ray` extra).
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import importlib
import json
import os
import shutil
import signal
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from reward_server.local import free_port
from tests.conftest import IN_CI

if IN_CI:
    import ray  # the ray extra is installed in CI: its absence must fail, never skip
else:
    ray = pytest.importorskip("ray")
from ray import serve  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402
from ray.serve._private.api import call_user_app_builder_with_args_if_necessary  # noqa: E402
from ray.serve.schema import ServeDeploySchema  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from reward_server import cli  # noqa: E402
from reward_server.client import AsyncRewardClient, RewardClient  # noqa: E402
from reward_server.deploy.ray import APP_NAME, DEPLOYMENT, NODE_HEADER, REPLICA_HEADER, FleetArgs, build_app  # noqa: E402

pytestmark = pytest.mark.timeout(240)

ROOT = Path(__file__).resolve().parents[2]
NODES = 3
SETTINGS = {"sandbox": "bwrap", "pool_size": 1, "pool_slots": 4, "math_workers": 1, "shutdown_grace_s": 5}
ADD_OK = "```python\ndef add(a, b):\n    return a + b\n```"
ADD_BAD = "```python\ndef add(a, b):\n    return a - b\n```"
# Serve's per-replica autoscaling metrics, pushed twice a second instead of every 10 s
RAY_ENV = {"RAY_SERVE_REPLICA_AUTOSCALING_METRIC_PUSH_INTERVAL_S": "0.5",
           "RAY_SERVE_HANDLE_AUTOSCALING_METRIC_PUSH_INTERVAL_S": "0.5"}


def add_item(k: int, good: bool = True, sleep_s: float = 0.0) -> dict:
    body = f"    import time\n    time.sleep({sleep_s})\n" if sleep_s else ""
    code = ADD_OK if good else ADD_BAD
    code = code.replace("def add(a, b):\n", "def add(a, b):\n" + body)
    return {"id": f"i{k}", "completion": code,
            "task": {"type": "code", "tests": {"kind": "assert", "asserts": [f"assert add({k}, 2) == {k + 2}"]}}}


def expected(item: dict) -> float:
    return 1.0 if "a + b" in item["completion"] else 0.2  # a wrong answer still compiles and runs


@dataclass
class Fleet:
    cluster: Any
    nodes: list[Any]  # the worker nodes (ray._private.node.Node), index = their TMPDIR's
    tmpdirs: list[str]
    url: str
    removed: set[str] = field(default_factory=set)

    def node_index(self, node_id: str) -> int:
        return next(i for i, n in enumerate(self.nodes) if n.node_id == node_id)

    def deploy(self, **args: Any) -> None:
        args.setdefault("settings", SETTINGS)
        serve.run(build_app(FleetArgs(**args)), name=APP_NAME, route_prefix="/")

    def running(self) -> int:
        dep = serve.status().applications[APP_NAME].deployments[DEPLOYMENT]
        return dep.replica_states.get("RUNNING", 0)


class Recording(httpx.HTTPTransport):
    """The client's real transport, noting which replica and node answered each request."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, str]] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        resp = super().handle_request(request)
        self.seen.append((resp.headers.get(REPLICA_HEADER, ""), resp.headers.get(NODE_HEADER, "")))
        return resp


class AsyncRecording(httpx.AsyncHTTPTransport):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[float, str, str, int]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        resp = await super().handle_async_request(request)
        self.seen.append((time.monotonic(), resp.headers.get(REPLICA_HEADER, ""), resp.headers.get(NODE_HEADER, ""),
                          resp.status_code))
        return resp


@pytest.fixture(scope="module")
def fleet():
    saved = {k: os.environ.get(k) for k in RAY_ENV}
    os.environ.update(RAY_ENV)  # the raylets, and so every worker, inherit it
    tmpdirs = [tempfile.mkdtemp(prefix=f"verireward-node{i}-") for i in range(NODES)]
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
    try:
        nodes = [cluster.add_node(num_cpus=1, env_vars={"TMPDIR": d}) for d in tmpdirs]
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False, logging_level="WARNING")
        up = ["ray", "up", "--address", cluster.address, "--host", "127.0.0.1", "--port", str(free_port()),
              "--proxy-location", "HeadOnly", "--replicas", "auto", "--sandbox", "bwrap",
              *[f"--setting={k}={json.dumps(v)}" for k, v in SETTINGS.items() if k != "sandbox"],
              "--option", "health_check_period_s=0.5", "--option", "health_check_timeout_s=5"]
        res = CliRunner().invoke(cli.app, up)
        assert res.exit_code == 0, res.output
        yield Fleet(cluster, nodes, tmpdirs, res.output.strip().splitlines()[-1])
        res = CliRunner().invoke(cli.app, ["ray", "down", "--address", cluster.address])
        assert res.exit_code == 0 and APP_NAME not in serve.status().applications, res.output
    finally:
        try:
            serve.shutdown()
            ray.shutdown()
        finally:
            cluster.shutdown()
            for d in tmpdirs:
                shutil.rmtree(d, ignore_errors=True)
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


@pytest.mark.parametrize("flags, field", [(["--replicas", "many"], "replicas"), (["--replicas", "0"], "replicas"),
                                          (["--option", "max_ongoing_requests=0"], "max_ongoing_requests"),
                                          (["--setting", "pool_size=-1"], "pool_size")])
def test_ray_up_refuses_bad_flags_naming_them(flags, field):
    """Checked before any cluster is reached: exit 2, the field named."""
    res = CliRunner().invoke(cli.app, ["ray", "up", "--address", "127.0.0.1:1", *flags])
    assert res.exit_code == 2 and field in res.output, res.output


def test_batch_scored_across_every_replica(fleet):
    """One URL, every replica: 60 items, every reward right, answered by all three nodes; the
    ops routes and the integrations work through Serve's proxy unchanged."""
    items = [add_item(k, good=k % 3 != 0) for k in range(60)]
    transport = Recording()
    with RewardClient(fleet.url, max_batch=2, max_concurrency=6, transport=transport) as client:
        results = client.score(items)
    assert [r.status for r in results] == ["ok"] * 60
    assert [r.reward for r in results] == [pytest.approx(expected(it)) for it in items]
    nodes = {node for _, node in transport.seen}
    assert len({rep for rep, _ in transport.seen}) == NODES and nodes == {n.node_id for n in fleet.nodes}

    ready = httpx.get(fleet.url + "/readyz", timeout=30)
    assert ready.status_code == 200 and ready.json()["pool"]["kind"] == "bwrap", ready.text
    metrics = httpx.get(fleet.url + "/metrics", timeout=30)
    assert metrics.status_code == 200 and "reward_server_pool_live" in metrics.text
    assert metrics.headers[REPLICA_HEADER]

    # the integrations and the trainer take the one URL
    from reward_server.compat import verl as verl_compat
    from reward_server.compat.trl import make_trl_reward_func
    from trainer.rewards import HttpScorer

    task = add_item(1)["task"]
    assert make_trl_reward_func(fleet.url)(prompts=["p"] * 2, completions=[ADD_OK, ADD_BAD], task=[task] * 2) == [
        pytest.approx(1.0), pytest.approx(0.2)]
    assert verl_compat.compute_score("x", ADD_OK, task, server_url=fleet.url)["score"] == pytest.approx(1.0)
    r = httpx.post(fleet.url + "/get_reward", json={"query": ["q " + ADD_OK], "prompts": ["q "],
                                                    "labels": [json.dumps(task)]}, timeout=60)
    assert r.status_code == 200 and r.json()["rewards"] == [pytest.approx(1.0)], r.text
    r = httpx.post(fleet.url + "/run_code", json={"code": "print(6 * 7)", "language": "python"}, timeout=60)
    assert r.status_code == 200 and r.json()["run_result"]["stdout"] == "42\n", r.text
    scorer = HttpScorer([fleet.url])
    try:
        got = scorer.submit([add_item(5), add_item(6, good=False)]).result(timeout=60)
    finally:
        scorer.close()
    assert [x.reward for x in got] == [pytest.approx(1.0), pytest.approx(0.2)]


class RoutedRecording(httpx.HTTPTransport):
    """The client's real transport, noting each answer's path, status and replica."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, int, str]] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        resp = super().handle_request(request)
        self.seen.append((request.url.path, resp.status_code, resp.headers.get(REPLICA_HEADER, "")))
        return resp


def test_sessions_stay_on_their_replica(fleet):
    """Sessions opened through Serve's one URL spread over the replicas, and every call for one
    reaches the replica that holds it (the client's `serve_multiplexed_model_id` header and the
    replica's multiplexed `hold`): ten executes each build state right, and score grades it.
    Without the header the same calls are spread at random: some land on a replica that does not
    hold the session and are answered 503 (to retry), never 404."""
    transport = RoutedRecording()
    with RewardClient(fleet.url, max_concurrency=6, transport=transport) as client:
        with concurrent.futures.ThreadPoolExecutor(6) as pool:  # opened together: Serve spreads them
            sids = [c.session_id for c in pool.map(lambda _: client.open_session(labels={"suite": "ray-route"}),
                                                   range(6))]
        servers = {sid.split(".")[0] for sid in sids}
        assert len(servers) > 1, sids  # spread over replicas

        def build(sid: str) -> list[tuple[str, str | None]]:
            out = [client.execute(sid, "x = 0")]
            out += [client.execute(sid, "x += 1\nx") for _ in range(10)]
            return [(r.status, r.result) for r in out]

        with concurrent.futures.ThreadPoolExecutor(6) as pool:
            got = list(pool.map(build, sids))
        assert got == [[("ok", None)] + [("ok", str(k)) for k in range(1, 11)]] * 6, got
        for sid in sids:  # right only where the replayed state is x == 10
            assert client.execute(sid, "def add(a, b):\n    return a + b + x - 10").status == "ok"
        assert [client.score_session(sid, add_item(3)["task"]).reward for sid in sids] == [pytest.approx(1.0)] * 6
        answered: dict[str, set[str]] = collections.defaultdict(set)  # session -> the replicas that answered
        for path, code, rep in transport.seen:
            if code == 200 and path.startswith("/v1/sessions/"):
                answered[path.split("/")[3]].add(rep)
        assert all(len(answered[sid]) == 1 for sid in sids), answered  # always the one that holds it
        assert len({rep for reps in answered.values() for rep in reps}) == len(servers)
        misrouted = sum(1 for _, code, _ in transport.seen if code == 503)

        # without the header: Serve's plain routing, most calls reach a replica that lacks the session
        statuses = collections.Counter(
            httpx.post(f"{fleet.url}/v1/sessions/{sid}/execute", json={"code": "None"}, timeout=30).status_code
            for sid in sids for _ in range(3))
        assert set(statuses) <= {200, 503} and statuses[503] > 0, statuses
        for sid in sids:
            assert client.close_session(sid)
    print(f"sessions on {len(servers)} replicas; 503s retried with the header: {misrouted}; "
          f"without it: {dict(statuses)}")


def test_serve_config_file_builds_the_fleet(fleet):
    """deploy/ray/serve.yaml passes Serve's own schema, and its builder and args give the fleet
    this cluster can hold: one replica per node at most, autoscaling on our in-flight jobs."""
    cfg = ServeDeploySchema.model_validate(yaml.safe_load((ROOT / "deploy/ray/serve.yaml").read_text()))
    (app_cfg,) = cfg.applications
    module, _, attr = app_cfg.import_path.partition(":")
    builder = getattr(importlib.import_module(module), attr)
    dep = call_user_app_builder_with_args_if_necessary(builder, app_cfg.args)._bound_deployment
    auto = dep._deployment_config.autoscaling_config
    assert dep._replica_config.max_replicas_per_node == 1 and auto.max_replicas == NODES - len(fleet.removed)
    assert auto.policy.policy_function == "reward_server.deploy.ray:inflight_jobs_policy"
    assert auto.target_ongoing_requests == 4  # one node's pool: 4 x its one CPU


def _pids_under(path: str) -> list[int]:
    """Processes whose command line names `path` (a node's runners: mountns, bwrap, the runner)."""
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if path.encode() in (p / "cmdline").read_bytes():
                    out.append(int(p.name))
            except OSError:
                pass
    return out


def test_replica_without_live_runners_gets_no_traffic(fleet):
    """One node's sandbox breaks (its runners die and cannot start again): that replica fails
    Serve's health check, gets no request from then on, and Serve replaces it (on the same node,
    the only one with a CPU free), after which the node serves again."""
    with RewardClient(fleet.url) as client:
        client.score([add_item(0)])
    broken = 0
    tmp = fleet.tmpdirs[broken]
    roots = [p for p in Path(tmp).iterdir() if p.name.startswith("verireward-bwrap-")]  # a host per pool
    victims = [pid for root in roots for pid in _pids_under(str(root))]
    for root in roots:
        shutil.rmtree(root)
        root.write_text("")  # its pool's next runner cannot make its socket directory
    assert victims, "no runner process found under the replica's directory"
    for pid in victims:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    node_id = fleet.nodes[broken].node_id
    deadline = time.monotonic() + 45
    while fleet.running() == NODES:  # its pool notices (2 s), then 3 failed checks 0.5 s apart
        assert time.monotonic() < deadline, "Serve never took the replica out"
        time.sleep(0.2)
    t_out = time.monotonic()
    transport = Recording()
    with RewardClient(fleet.url, max_batch=1, max_concurrency=4, transport=transport) as client:
        results = client.score([add_item(k) for k in range(24)])
    assert all(r.status == "ok" and r.reward == pytest.approx(1.0) for r in results)
    assert node_id not in {node for _, node in transport.seen}, "a replica with no live runner got traffic"

    while fleet.running() < NODES:  # replaced: a fresh replica, a fresh pool, the same node
        assert time.monotonic() < t_out + 60, "Serve never replaced the replica"
        time.sleep(0.2)
    transport = Recording()
    with RewardClient(fleet.url, max_batch=1, max_concurrency=4, transport=transport) as client:
        client.score([add_item(k) for k in range(30)])
    assert node_id in {node for _, node in transport.seen}


def test_node_killed_mid_batch_loses_nothing(fleet):
    """A node dies with requests in flight on its replica: every item still comes back right
    (re-sent by the client to another replica), none as the candidate's failure."""
    items = [add_item(k, sleep_s=0.3) for k in range(96)]
    transport = AsyncRecording()

    async def go() -> tuple[list, Any]:
        async with AsyncRewardClient(fleet.url, max_batch=2, max_concurrency=12, transport=transport) as client:
            task = asyncio.create_task(client.score(items))
            while not transport.seen:
                await asyncio.sleep(0.05)
            victim = transport.seen[0][2]  # a node whose replica is answering now
            await asyncio.to_thread(fleet.cluster.remove_node, fleet.nodes[fleet.node_index(victim)], False)
            fleet.removed.add(victim)
            return await task, client.stats

    results, stats = asyncio.run(go())
    wrong = [(it["id"], r.status, r.reward) for it, r in zip(items, results, strict=True)
             if not (r.status == "ok" and r.reward == pytest.approx(1.0)) and not (r.status == "infra_error" and r.reward is None)]
    assert not wrong, wrong
    assert collections.Counter(r.status for r in results)["ok"] >= len(items) - 4  # infra_error only where retries ran out
    assert stats.request_retries >= 1, "nothing was in flight on the killed node"


def test_autoscaling_on_inflight_jobs(fleet):
    """Sustained load above one replica's capacity adds a replica; quiet takes it away. The load
    is one request of 16 slow jobs at a time: one ongoing request, under Serve's default target
    of 2, so only the jobs the replica reports (target 2 each) can ask for a second replica."""
    alive = [n for n in fleet.nodes if n.node_id not in fleet.removed]
    assert len(alive) >= 2
    fleet.deploy(replicas="auto", autoscale=True, min_replicas=1, target_jobs=2, health_check_period_s=0.5,
                 autoscaling={"initial_replicas": 1, "upscale_delay_s": 0.5, "downscale_delay_s": 2.0,
                              "look_back_period_s": 1.0})
    deadline = time.monotonic() + 60
    while fleet.running() != 1:  # the fixed fleet's extra replicas go
        assert time.monotonic() < deadline, serve.status().applications[APP_NAME]
        time.sleep(0.2)

    stop = threading.Event()
    failures: list[str] = []

    def load() -> None:
        with RewardClient(fleet.url, max_batch=16, max_concurrency=1) as client:
            while not stop.is_set():
                res = client.score([add_item(k, sleep_s=0.5) for k in range(16)])
                failures.extend(r.status for r in res if r.status != "ok" or r.reward != pytest.approx(1.0))

    worker = threading.Thread(target=load, daemon=True)
    worker.start()
    try:
        deadline = time.monotonic() + 60
        while fleet.running() < 2:
            assert time.monotonic() < deadline, "no replica added under sustained load"
            time.sleep(0.2)
    finally:
        stop.set()
        worker.join(60)
    assert not failures
    deadline = time.monotonic() + 60
    while fleet.running() > 1:
        assert time.monotonic() < deadline, "the added replica never went after the load stopped"
        time.sleep(0.2)


@pytest.mark.docker
def test_docker_where_the_node_has_an_engine(fleet):
    """`sandbox: auto` on every replica: on a node where a Docker engine and the sandbox image
    answer (every node here), each replica's pool is docker, and a batch is scored right
    across them."""
    alive = {n.node_id for n in fleet.nodes} - fleet.removed
    fleet.deploy(replicas="auto", settings={**SETTINGS, "sandbox": "auto"}, health_check_period_s=0.5)
    deadline = time.monotonic() + 90
    while fleet.running() != len(alive) or serve.status().applications[APP_NAME].status != "RUNNING":
        assert time.monotonic() < deadline, serve.status().applications[APP_NAME]
        time.sleep(0.2)
    items = [add_item(k, good=k % 2 == 0) for k in range(24)]
    transport = Recording()
    with RewardClient(fleet.url, max_batch=2, max_concurrency=4, transport=transport) as client:
        results = client.score(items)
    assert [r.reward for r in results] == [pytest.approx(expected(it)) for it in items]
    assert {node for _, node in transport.seen} == alive
    kinds = set()
    for _ in range(20):
        r = httpx.get(fleet.url + "/readyz", timeout=30)
        kinds.add((r.headers[NODE_HEADER], r.json()["pool"]["kind"]))
    assert {kind for _, kind in kinds} == {"docker"}, kinds
