"""The FastAPI application: wires the routes, the gateway middleware, the error handlers
and the lifespan, and nothing else.

`create_app(settings, pool=None)` builds the app; its lifespan starts the sandbox (a
`JobRunner`: a pool per runtime, unless one is passed in, which the caller then owns) and the
math grader, and on shutdown stops taking work, finishes what it accepted, then closes them.
Every route goes through the `Scorer` (limits, admission, grading), see `reward_server.scoring`;
what the app holds is one `ServerState` on `app.state.server`.
"""

from __future__ import annotations

import contextlib
import logging

from fastapi import FastAPI

from reward_server import errors
from reward_server.admission import Admission
from reward_server.body import install_openapi
from reward_server.gateway import GatewayMiddleware
from reward_server.grading.math import MathGrader
from reward_server.logs import configure_logging
from reward_server.routes import nemo, openrlhf, ops, sandbox_fusion, score, sessions
from reward_server.scoring import Scorer
from reward_server.sessions.manager import SessionManager
from reward_server.settings import Settings
from reward_server.state import ServerState
from sandbox.api import JobRunner
from sandbox.router import RuntimePools

log = logging.getLogger("reward_server")


def _make_runner(settings: Settings) -> JobRunner:
    """One pool per runtime offered (sandbox.router.RuntimePools), each sized as the settings
    say; admission bounds their jobs together (one pool's capacity, see lifespan)."""
    options = dict(settings.sandbox_options)
    pin = options.pop("pin_cpus", settings.pin_cpus)
    if settings.max_sessions is not None:  # the sandbox holds as many as the server admits
        options.setdefault("max_sessions", settings.max_sessions)
    if pin is not None and not isinstance(pin, bool):
        raise ValueError(f"pin_cpus must be true or false, not {pin!r}")
    return RuntimePools(settings.sandbox, settings.runtimes, default=settings.runtime, lazy=settings.lazy_runtimes,
                        eager_toolchains=settings.eager_toolchains, size=settings.pool_size, slots=settings.pool_slots, job_memory_mb=settings.job_memory_mb,
                        pin_cpus=pin, **options)


async def _start_math(settings: Settings) -> MathGrader | None:
    """The math grader's workers; None (math items then come back as infra_error with a
    reason) where they cannot start."""
    try:
        grader = MathGrader(workers=settings.math_workers)
        await grader.start()
        return grader
    except Exception:
        log.exception("math grader failed to start; math items will be infra_error")
        return None


def create_app(settings: Settings | None = None, pool: JobRunner | None = None) -> FastAPI:
    settings = settings or Settings()
    state = ServerState(settings)  # the app's one state: metrics now, the sandbox and the scorer at start-up

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        owns_pool = pool is None
        p = _make_runner(settings) if pool is None else pool
        if owns_pool:
            await p.start()
        grader = await _start_math(settings)
        max_inflight = settings.max_inflight_jobs or max(1, p.capacity)
        admission = Admission(max_inflight, settings.max_queued_jobs, settings.retry_after_s)
        state.runner, state.admission = p, admission
        state.scorer = Scorer(settings, p, grader, admission, state.metrics)
        state.sessions = SessionManager(settings, p, state.scorer, admission, state.metrics)
        await state.sessions.start()
        offered = [name for name, st in p.status().items() if st["state"] not in ("unavailable", "not offered")]
        log.info("reward server ready", extra={"sandbox": p.kind, "max_inflight": max_inflight, "runtimes": offered,
                                               "max_queued": settings.max_queued_jobs, "math": grader is not None})
        try:
            yield
        finally:
            idle = await admission.drain(settings.shutdown_grace_s)
            drained = idle and admission.cancelled == 0  # the truth: every accepted job answered
            facts = {"drained": drained, "answered": admission.answered, "cancelled": admission.cancelled,
                     "left": admission.admitted}
            (log.info if drained else log.warning)("shutting down", extra=facts)
            await state.sessions.close_all()  # none of their processes outlives the server
            if grader is not None:
                with contextlib.suppress(Exception):
                    await grader.close()
            if owns_pool:
                await p.close()

    app = FastAPI(
        title="verireward reward server",
        version="0.1.0",
        description=(
            "Scores model completions for GRPO: code by running its tests in a sandbox, math by "
            "checking the final answer. Compatible with SandboxFusion (`/run_code`, `/submit`), "
            "OpenRLHF (`/get_reward`), TRL and verl."
        ),
        lifespan=lifespan,
    )
    app.state.server = state
    app.add_middleware(GatewayMiddleware, settings=settings, state=state)
    errors.install(app, lambda reason: state.metrics.rejected.labels(reason).inc())
    for module in (score, ops, sandbox_fusion, openrlhf, sessions, nemo):
        app.include_router(module.router)
    install_openapi(app)
    return app


def app_from_env() -> FastAPI:
    """`uvicorn --factory reward_server.app:app_from_env` (settings from REWARD_SERVER_*)."""
    s = Settings()
    configure_logging(s.log_level, s.log_json)
    return create_app(s)
