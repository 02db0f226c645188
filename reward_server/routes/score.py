"""`POST /v1/score`: the native API."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import TypeAdapter

from reward_server import datasets
from reward_server.body import parse_body, request_body
from reward_server.datasets import RowError
from reward_server.errors import BODY_RESPONSES, InvalidRequest, error
from reward_server.logs import request_id
from reward_server.schemas import ScoreItem, ScoreRequest, ScoreResponse, encode_results
from reward_server.scoring import Scorer
from reward_server.state import ServerState

router = APIRouter(tags=["score"])
_ITEM: TypeAdapter = TypeAdapter(ScoreItem)


def _dataset_rows(items: list) -> None:
    """Each item whose task is a data set's own row (`{"type": "dataset", "format", "row"}`)
    gets the task the row makes (`reward_server.datasets`), in place, before anything is
    validated; a row that does not fit is a 422 naming the field (`items.0.task.row.public_tests`)."""
    errors: list[dict] = []
    for i, it in enumerate(items):
        t = it.get("task") if isinstance(it, dict) else None
        if not (isinstance(t, dict) and t.get("type") == "dataset"):
            continue
        try:
            it["task"] = datasets.dataset_task(t)
        except RowError as e:
            parts = e.field.replace("[", ".").replace("]", "").split(".")
            at = [e.field] if e.fmt == "dataset" else ["row", *(int(p) if p.isdigit() else p for p in parts)]
            errors.append(error(["items", i, "task", *at], str(e), "row_invalid"))
        if len(errors) >= 20:
            break
    if errors:
        raise InvalidRequest(errors)


def _raw_tasks(obj: Any) -> list[tuple[list, Any]]:
    items = obj.get("items") if isinstance(obj, dict) else None
    if not isinstance(items, list):
        return []
    return [(["items", i, "task", "tests"], it.get("task")) for i, it in enumerate(items) if isinstance(it, dict)]


def _prepare(obj: Any, scorer: Scorer) -> None:
    """Before the body is validated: data set rows become tasks, then the raw caps are checked."""
    items = obj.get("items") if isinstance(obj, dict) else None
    if isinstance(items, list):
        _dataset_rows(items)
    scorer.check_raw_tasks(_raw_tasks(obj))


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
                           precheck=lambda obj: _prepare(obj, st.scorer), element=_ITEM)
    results = await st.scorer.score(req.items, req.weights, req.extract, queue_timeout_s=req.queue_timeout_s)
    st.request_log[request_id.get()] = {"items": len(results)}
    body = await asyncio.to_thread(encode_results, results)
    return Response(content=body, media_type="application/json")
