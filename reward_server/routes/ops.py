"""Operational routes: liveness, readiness, Prometheus metrics."""

from __future__ import annotations

import contextlib
import json
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from reward_server.state import ServerState
from sandbox.runner import compare_modes

router = APIRouter(tags=["ops"])


@router.get("/healthz", summary="Liveness: the process answers")
async def healthz():
    return {"status": "ok"}


@router.get("/readyz", summary="Readiness: the default runtime's sandbox pool has live runners",
            responses={503: {"description": "not ready: no live runner, or shutting down (same body)"}})
async def readyz(request: Request):
    st = ServerState.of(request)
    p, adm = st.runner, st.admission
    ready = bool(p is not None and p.ready and adm is not None and not adm.draining)
    body: dict[str, Any] = {"ready": ready}
    if p is not None:
        with contextlib.suppress(Exception):
            body["languages"] = p.languages()
        with contextlib.suppress(Exception):  # the toolchain pool: idle until the first such job
            toolchains = p.toolchain_status()
            if toolchains is not None:
                body["toolchains"] = toolchains
        with contextlib.suppress(Exception):
            body["pool"] = json.loads(p.stats().model_dump_json())
        body["default_runtime"] = p.default_runtime
        with contextlib.suppress(Exception):  # each runtime: ready / idle / down / unavailable (why) / not offered
            body["runtimes"] = p.status()
    if st.sessions is not None:  # /v1/sessions: live, lost, capacity, created, and this server's id prefix
        body["sessions"] = st.sessions.figures()
    body["testlib_header"] = st.settings.testlib_header is not None  # checkers that include testlib.h can build
    body["time_scale"] = st.settings.time_scale  # multiplies a task's own timeout_s (docs/JUDGING.md)
    body["compare_modes"] = list(compare_modes.MODES)  # stdio tests' `compare` (docs/JUDGING.md)
    return JSONResponse(status_code=200 if ready else 503, content=body)


@router.get("/metrics", summary="Prometheus metrics", response_class=Response,
            responses={200: {"description": "Prometheus text exposition format",
                             "content": {CONTENT_TYPE_LATEST.split(";")[0]: {"schema": {"type": "string"}}}}})
async def metrics(request: Request):
    return Response(generate_latest(ServerState.of(request).metrics.registry), media_type=CONTENT_TYPE_LATEST)
