"""The Ray Serve application: a scoring fleet on an existing Ray cluster (the `ray` extra).

Each replica is a whole reward server (`reward_server.app.create_app`: its own sandbox pool on its
own node, bwrap or docker as `sandbox: auto` finds there, its math grader, admission and
`/metrics`), at most one per node (`max_replicas_per_node=1`), with our FastAPI app as Serve's
ingress, so every route works unchanged behind Serve's proxy and Serve runs its lifespan (the
pool starts before the replica takes traffic). Serve places, routes, restarts and scales the
replicas; the application tells it two things:

- `check_health` fails while the replica's pool has no live runner: after three misses in a row
  Serve stops routing to it and replaces it (a replica that comes up without one never joins);
- `record_autoscaling_stats` reports the replica's accepted jobs, and `inflight_jobs_policy`
  holds their sum against one replica's capacity (`target_ongoing_requests`), inside Serve's own
  delays, factors and bounds.

Sessions stay on the replica that holds them through Serve's model multiplexing: a session id is
the replica's "model". When the replica opens a session it loads that id (a no-op marker), so
Serve's router learns where it lives, and every session call that names it in the
`serve_multiplexed_model_id` header (the bundled clients send it) goes to that replica; a call that
still lands elsewhere is answered 503 (`session_elsewhere`) and retried, never 404.

Every response names the replica and node that answered (`x-reward-replica`, `x-reward-node`).
`reward-server ray up|down` (reward_server/cli.py) and `serve run|deploy deploy/ray/serve.yaml`
both build the application with `build_app`.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Annotated, Any, Literal

import ray
from fastapi import FastAPI
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from ray import serve
from ray.serve.config import AutoscalingContext

from reward_server.app import create_app
from reward_server.sessions.models import ROUTE_HEADER
from reward_server.settings import Settings
from reward_server.state import ServerState
from sandbox.pool import default_slots

log = logging.getLogger("reward_server.deploy")

APP_NAME = "reward-server"
DEPLOYMENT = "RewardServer"
REPLICA_HEADER = "x-reward-replica"
NODE_HEADER = "x-reward-node"
INFLIGHT_METRIC = "inflight_jobs"
# CPUs (e.g. "0" or "2,3") a node's replica and its runners keep to, where several Ray nodes share
# one machine (benches, tests); unset on a real node, whose pool sizes itself to the machine
CPUS_ENV = "REWARD_SERVER_CPUS"
# session ids a replica keeps registered with Serve's router, oldest used dropped first: far more
# than a replica holds live, so a live session is dropped only when this many newer ones were used
HELD_SESSIONS = 4096


class FleetArgs(BaseModel):
    """What `build_app` takes: the `args:` of a Serve config file, or `reward-server ray up`'s flags."""

    model_config = ConfigDict(extra="forbid")

    replicas: Annotated[int, Field(ge=1)] | Literal["auto"] = Field(
        "auto", description="replicas (the most, with autoscale): a number, or auto for one per alive node with "
        "cpus_per_replica CPUs")
    autoscale: bool = Field(False, description="let Serve scale between min_replicas and replicas on in-flight jobs")
    min_replicas: int = Field(1, ge=0, description="autoscale: the fewest replicas kept")
    cpus_per_replica: float = Field(1.0, gt=0, description="Ray CPUs a replica reserves on its node")
    target_jobs: int | None = Field(
        None, ge=1, description="autoscale: accepted jobs per replica Serve aims for (default: one replica's "
        "capacity, from the settings or the smallest node's cores)")
    max_ongoing_requests: int = Field(
        256, ge=1, description="HTTP requests (batches) one replica holds at once; our admission bounds the jobs")
    health_check_period_s: float = Field(2.0, gt=0)
    health_check_timeout_s: float = Field(30.0, gt=0)
    autoscaling: dict[str, Any] = Field(
        default_factory=dict, description="more of Serve's autoscaling_config (upscale_delay_s, downscale_delay_s, "
        "look_back_period_s, ...)")
    settings: dict[str, Any] = Field(
        default_factory=dict, description="every replica's reward-server settings (reward_server.settings.Settings "
        "fields); the rest come from each node's REWARD_SERVER_* environment")


    @field_validator("settings")
    @classmethod
    def _valid_settings(cls, v: dict[str, Any]) -> dict[str, Any]:
        """Refused here, at deploy time, rather than by every replica on its node."""
        try:
            Settings(**v)
        except ValidationError as e:
            raise ValueError(f"settings: {e}") from None
        return v


def _pin_to_env_cpus() -> None:
    """Keep this process (and so its runners) on the CPUs `REWARD_SERVER_CPUS` names, if set."""
    spec = os.environ.get(CPUS_ENV, "").strip()
    if spec:
        os.sched_setaffinity(0, {int(c) for c in spec.split(",") if c.strip()})


class _ReplicaHeaders:
    """ASGI middleware: every HTTP answer names the replica and the node that gave it. It also
    keeps the session routing current: it hands the replica's `hold` to the session manager (once
    the server's lifespan made one), and a call naming a session this replica holds refreshes it
    in Serve's registry (its least recently used ids go first)."""

    def __init__(self, app: Any, replica: str, node: str, owner: RewardServer) -> None:
        self.app = app
        self.owner = owner
        self.headers = [(REPLICA_HEADER.encode(), replica.encode()), (NODE_HEADER.encode(), node.encode())]
        self.route = ROUTE_HEADER.encode()

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        m = self.owner.state.sessions if self.owner.state is not None else None
        if m is not None:
            if m.on_open is None:
                m.on_open = self.owner.hold
            sid = next((v.decode("latin-1") for k, v in scope.get("headers", ()) if k == self.route), None)
            if sid and sid in m.sessions:
                await self.owner.hold(sid)

        async def send_named(message: dict) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *self.headers]}
            await send(message)

        await self.app(scope, receive, send_named)


@serve.ingress()  # late-bound: the app is built on the replica's node (__serve_build_asgi_app__)
class RewardServer:
    """One replica: a whole reward server; Serve calls the three methods below."""

    def __init__(self, settings: dict[str, Any]) -> None:
        _pin_to_env_cpus()
        self.settings = Settings(**settings)
        self.replica = serve.get_replica_context().replica_id.unique_id
        self.node = ray.get_runtime_context().get_node_id()
        self.state: ServerState | None = None

    def __serve_build_asgi_app__(self) -> FastAPI:
        app = create_app(self.settings)
        app.add_middleware(_ReplicaHeaders, replica=self.replica, node=self.node, owner=self)
        self.state = app.state.server
        return app

    @serve.multiplexed(max_num_models_per_replica=HELD_SESSIONS)
    async def hold(self, session_id: str) -> bool:
        """Serve's "model load" for a session id: nothing to load; Serve records that this
        replica holds it and routes calls carrying it in `serve_multiplexed_model_id` here."""
        return True

    def check_health(self) -> None:
        """Healthy while the pool has a live runner (and the server is not draining)."""
        st = self.state
        if st is None or st.runner is None or not st.runner.ready:
            raise RuntimeError(f"replica {self.replica}: no live sandbox runner")
        if st.admission is not None and st.admission.draining:
            raise RuntimeError(f"replica {self.replica}: draining")

    def record_autoscaling_stats(self) -> dict[str, float]:
        """The jobs this replica has accepted and not answered (running and waiting)."""
        adm = self.state.admission if self.state is not None else None
        return {INFLIGHT_METRIC: float(adm.admitted if adm is not None else 0)}


def inflight_jobs_policy(ctx: AutoscalingContext) -> tuple[float, dict[str, Any]]:
    """Replicas wanted: every replica's accepted jobs over one replica's capacity (the config's
    `target_ongoing_requests`). A batch in flight counts as at least one job, so load seen before
    the first stats arrive still counts. Serve applies the delays, factors and bounds."""
    if ctx.current_num_replicas == 0:
        return ctx.target_num_replicas, {}
    jobs = sum(((ctx.aggregated_metrics or {}).get("inflight_jobs") or {}).values())
    jobs = max(jobs, ctx.total_num_requests)
    return jobs / ctx.config.get_target_ongoing_requests(), {}


def nodes_with_cpus(cpus: float) -> list[str]:
    """Ids of the alive nodes with at least `cpus` CPUs (ray must be initialised)."""
    return [n["NodeID"] for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get("CPU", 0) >= cpus]


def replica_capacity(settings: Settings, cpus: float) -> int:
    """Jobs one replica runs at once, as its admission will count them: the settings where they
    say, else the pool's default on the smallest node that can hold a replica."""
    if settings.max_inflight_jobs:
        return settings.max_inflight_jobs
    if settings.pool_slots:
        return settings.pool_slots
    cores = [n["Resources"]["CPU"] for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get("CPU", 0) >= cpus]
    return default_slots(cores=int(min(cores)) if cores else None, job_memory_mb=settings.job_memory_mb)


def build_app(args: dict[str, Any] | FleetArgs) -> serve.Application:
    """The Serve application (a Serve config's `import_path: reward_server.deploy.ray:build_app`)."""
    a = args if isinstance(args, FleetArgs) else FleetArgs.model_validate(args)
    settings = Settings(**a.settings)
    nodes = nodes_with_cpus(a.cpus_per_replica)
    count = len(nodes) if a.replicas == "auto" else a.replicas
    if count < 1:
        raise ValueError(f"no alive Ray node has {a.cpus_per_replica} CPUs to give a replica")
    if count > len(nodes):
        log.warning("%d replicas asked, %d nodes can hold one: the rest wait for nodes", count, len(nodes))
    options: dict[str, Any] = {
        "max_replicas_per_node": 1,
        "ray_actor_options": {"num_cpus": a.cpus_per_replica},
        "max_ongoing_requests": a.max_ongoing_requests,
        "health_check_period_s": a.health_check_period_s,
        "health_check_timeout_s": a.health_check_timeout_s,
        "graceful_shutdown_timeout_s": settings.shutdown_grace_s + 5,
    }
    if a.autoscale:
        options["autoscaling_config"] = {
            "min_replicas": min(a.min_replicas, count), "max_replicas": count,
            "target_ongoing_requests": a.target_jobs or replica_capacity(settings, a.cpus_per_replica),
            "policy": {"policy_function": f"{__name__}:inflight_jobs_policy"},
            "upscale_delay_s": 10.0, "downscale_delay_s": 120.0,
            **a.autoscaling,
        }
    else:
        options["num_replicas"] = count
    return serve.deployment(RewardServer, name=DEPLOYMENT).options(**options).bind(a.settings)


def up(args: FleetArgs, address: str = "auto", host: str = "0.0.0.0", port: int = 8000,
       proxy_location: str = "EveryNode", timeout_s: float = 300.0) -> str:
    """Deploy (or update) the fleet on the cluster at `address`; returns Serve's URL once every
    replica is up. The application outlives this call (Serve's controller holds it)."""
    ray.init(address=address, ignore_reinit_error=True, logging_level=logging.WARNING)
    serve.start(proxy_location=proxy_location, http_options={"host": host, "port": port})
    serve.run(build_app(args), name=APP_NAME, route_prefix="/")
    deadline = time.monotonic() + timeout_s
    while True:
        st = serve.status().applications[APP_NAME]
        if st.status == "RUNNING":
            break
        if st.status in ("DEPLOY_FAILED", "UNHEALTHY") or time.monotonic() > deadline:
            raise RuntimeError(f"{APP_NAME}: {st.status}: {st.message}")
        time.sleep(0.5)
    shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    return f"http://{shown}:{port}"


def down(address: str = "auto") -> None:
    """Delete the fleet (Serve itself and other applications stay)."""
    ray.init(address=address, ignore_reinit_error=True, logging_level=logging.WARNING)
    serve.delete(APP_NAME)
