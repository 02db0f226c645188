"""Prometheus metrics, one registry per app (so several apps can live in one process)."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from reward_server.admission import Admission
from sandbox.api import JobRunner

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
_REWARD_BUCKETS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.99, 1.0)


class _LiveCollector:
    """Values read at scrape time: admission queue, pool size/liveness/restarts."""

    def __init__(self, admission: Callable[[], Admission | None], pool: Callable[[], JobRunner | None]):
        self._admission = admission
        self._pool = pool

    def collect(self):
        adm = self._admission()
        if adm is not None:
            yield GaugeMetricFamily("reward_server_queue_depth", "accepted jobs waiting for a sandbox slot", value=adm.queued)
            yield GaugeMetricFamily("reward_server_inflight_jobs", "jobs running in the sandbox pool", value=adm.running)
            yield GaugeMetricFamily("reward_server_admitted_jobs", "accepted jobs not yet answered", value=adm.admitted)
            yield GaugeMetricFamily("reward_server_admission_limit", "accepted jobs allowed at once", value=adm.limit)
        pool = self._pool()
        if pool is None:
            return
        try:
            st = pool.stats()
        except Exception:  # a scrape must never fail because the pool is between states
            return
        kind, figures = st.kind, st.model_dump()
        for name, attr, doc in (
            ("reward_server_pool_size", "size", "runners the pool keeps"),
            ("reward_server_pool_live", "live", "runners alive now"),
            ("reward_server_pool_in_flight", "in_flight", "jobs the pool is running"),
            ("reward_server_pool_capacity", "capacity", "jobs the pool can run at once"),
        ):
            g = GaugeMetricFamily(name, doc, labels=["kind"])
            g.add_metric([kind], float(figures[attr]))
            yield g
        for name, attr, doc in (
            ("reward_server_pool_runner_restarts", "restarts", "runners replaced after dying"),
            ("reward_server_pool_jobs", "jobs_total", "jobs the pool has run"),
            ("reward_server_pool_infra_errors", "infra_errors", "jobs the pool gave up on (runner lost twice)"),
        ):
            c = CounterMetricFamily(name, doc, labels=["kind"])
            c.add_metric([kind], float(figures[attr]))
            yield c


class Metrics:
    def __init__(self, admission: Callable[[], Admission | None], pool: Callable[[], JobRunner | None]):
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter(
            "reward_server_requests", "HTTP requests by route and status code", ["route", "code"], registry=r
        )
        self.latency = Histogram(
            "reward_server_request_seconds", "HTTP request latency", ["route"], buckets=_LATENCY_BUCKETS, registry=r
        )
        self.items = Counter(
            "reward_server_items", "scored items by task kind and outcome", ["kind", "status"], registry=r
        )
        self.item_latency = Histogram(
            "reward_server_item_seconds", "time to grade one item (queueing included)", ["kind"],
            buckets=_LATENCY_BUCKETS, registry=r,
        )
        self.queue_wait = Histogram(
            "reward_server_queue_seconds", "time a code job waited for a sandbox slot before it ran",
            buckets=_LATENCY_BUCKETS, registry=r,
        )
        self.queue_timeouts = Counter(
            "reward_server_queue_timeouts", "items answered queue_timeout: they waited past their request's "
            "queue_timeout_s and never ran", ["kind"], registry=r,
        )
        self.rewards = Histogram(
            "reward_server_reward", "rewards given", ["kind"], buckets=_REWARD_BUCKETS, registry=r
        )
        self.rejected = Counter(
            "reward_server_rejected", "requests refused before any work", ["reason"], registry=r
        )
        self.hack_attempts = Counter(
            "reward_server_hack_attempts",
            "items whose candidate tried a reward hack, by kind (sandbox.runner.flags; docs/SERVER.md)",
            ["kind"], registry=r,
        )
        self.checker_failures = Counter(
            "reward_server_checker_failures", "code items whose task checker failed: on=output (on a candidate's "
            "output after it accepted its reference: that test failed, flagged checker_failed) or on=task (it did not "
            "build or rejected its own reference: task_error)", ["on"], registry=r,
        )
        self.compile_cache = Counter(
            "reward_server_compile_cache", "builds of programs in compiled languages by the runner's compile cache: "
            "hit, merged (an identical build in flight), miss, none (nothing to build)", ["language", "cache"],
            registry=r,
        )
        # stateful sessions (reward_server.sessions); the live gauge reads the manager at scrape time
        self.sessions_live = Gauge("reward_server_sessions_live", "sessions whose process is alive", registry=r)
        self.sessions_created = Counter("reward_server_sessions_created", "sessions opened", registry=r)
        self.sessions_ended = Counter(
            "reward_server_sessions_ended", "sessions ended, by how: deleted, ttl and idle (expired), shutdown",
            ["how"], registry=r,
        )
        self.sessions_lost = Counter(
            "reward_server_sessions_lost", "sessions whose process was lost (a limit, a crash, an interrupt that "
            "did not land, its runner died)", registry=r,
        )
        self.session_execute = Histogram(
            "reward_server_session_execute_seconds", "time to answer one session execute (queueing included), "
            "by status", ["status"], buckets=(0.001, 0.0025, *_LATENCY_BUCKETS), registry=r,
        )
        r.register(_LiveCollector(admission, pool))
