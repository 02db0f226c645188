"""`POST /v1/score`: the native API."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import TypeAdapter

from reward_server.body import parse_body, request_body
from reward_server.errors import BODY_RESPONSES
from reward_server.logs import request_id
from reward_server.schemas import ScoreItem, ScoreRequest, ScoreResponse, encode_results
from reward_server.state import ServerState

router = APIRouter(tags=["score"])
_ITEM: TypeAdapter = TypeAdapter(ScoreItem)


def _raw_tasks(obj: Any) -> list[tuple[list, Any]]:
    items = obj.get("items") if isinstance(obj, dict) else None
    if not isinstance(items, list):
        return []
    return [(["items", i, "task", "tests"], it.get("task")) for i, it in enumerate(items) if isinstance(it, dict)]


@router.post(
    "/v1/score",
    response_model=ScoreResponse,
    summary="Score a batch of completions",
    openapi_extra=request_body(ScoreRequest),
    responses=BODY_RESPONSES,
)
async def score(request: Request):
    st = ServerState.of(request)
    req = await parse_body(request, ScoreRequest, list_field="items", max_items=st.settings.max_items_per_request,
                           precheck=lambda obj: st.scorer.check_raw_tasks(_raw_tasks(obj)), element=_ITEM)
    results = await st.scorer.score(req.items, req.weights, req.extract, queue_timeout_s=req.queue_timeout_s)
    st.request_log[request_id.get()] = {"items": len(results)}
    body = await asyncio.to_thread(encode_results, results)
    return Response(content=body, media_type="application/json")
