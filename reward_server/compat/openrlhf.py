"""OpenRLHF's remote reward model protocol: `POST /get_reward`.

OpenRLHF (`--remote_rm_url http://host:8000/get_reward`) posts
`{"query": [prompt+response, ...], "prompts": [prompt, ...], "labels": [label, ...]}` and
reads `rewards` (and, in newer versions, `scores` and `extra_logs`). Each label is one of
our tasks serialised as a JSON string (`{"type": "code", "tests": ...}`); a label that is
not a JSON object is taken as a math reference answer. Infrastructure errors score 0.0
(OpenRLHF needs numbers) and are counted in `extra_logs.infra_error`.
"""

from __future__ import annotations

import re
from typing import Any

from fastapi import APIRouter, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from reward_server.compat.common import task_of
from reward_server.schemas import ScoreItem, ScoreRequest, Task

router = APIRouter(tags=["compat: OpenRLHF"])
_task_adapter: TypeAdapter = TypeAdapter(Task)
_TRAILING_SPECIAL = re.compile(r"(?:\s*(?:<\|[^|<>]{1,40}\|>|</s>|<eos>|<pad>))+\s*$")


class GetRewardRequest(BaseModel):
    model_config = ConfigDict(
        extra="ignore",
        json_schema_extra={"examples": [{
            "query": ["Q: 1+1?\nA: \\boxed{2}"], "prompts": ["Q: 1+1?\nA: "], "labels": ['{"type": "math", "answer": "2"}'],
        }]},
    )
    query: list[str]
    prompts: list[str] | None = None
    labels: list[Any] | None = None


class GetRewardResponse(BaseModel):
    rewards: list[float]
    scores: list[float]
    extra_logs: dict[str, list[float]] = Field(default_factory=dict)


def completion_of(query: str, prompt: str | None) -> str:
    """The response part of `query` (= prompt + response, as OpenRLHF decodes it)."""
    text = query
    if prompt:
        if query.startswith(prompt):
            text = query[len(prompt):]
        else:
            i = query.find(prompt)  # e.g. a BOS token decoded in front
            if i >= 0:
                text = query[i + len(prompt):]
    return _TRAILING_SPECIAL.sub("", text)


@router.post("/get_reward", response_model=GetRewardResponse, summary="OpenRLHF remote reward model")
async def get_reward(req: GetRewardRequest, request: Request):
    st = request.app.state
    n = len(req.query)
    errors: list[dict] = []
    if req.prompts is not None and len(req.prompts) != n:
        errors.append({"loc": ["body", "prompts"], "msg": f"expected {n} prompts, got {len(req.prompts)}", "type": "value_error"})
    if req.labels is None or len(req.labels) != n:
        got = "none" if req.labels is None else len(req.labels)
        errors.append({"loc": ["body", "labels"], "msg": f"expected {n} labels (one task per query), got {got}", "type": "value_error"})
    if errors:
        raise RequestValidationError(errors)
    if n > st.settings.max_items_per_request:
        raise RequestValidationError([{"loc": ["body", "query"], "msg": f"at most {st.settings.max_items_per_request} items", "type": "too_long"}])
    items: list[ScoreItem] = []
    for i, q in enumerate(req.query):
        prompt = req.prompts[i] if req.prompts is not None else None
        try:
            task = _task_adapter.validate_python(task_of(req.labels[i]))
        except ValidationError as e:
            raise RequestValidationError(
                [{"loc": ["body", "labels", i, *err["loc"]], "msg": err["msg"], "type": err["type"]} for err in e.errors()]
            ) from None
        except ValueError as e:
            raise RequestValidationError([{"loc": ["body", "labels", i], "msg": str(e), "type": "value_error"}]) from None
        items.append(ScoreItem.model_construct(id=i, completion=completion_of(q, prompt), task=task))
    st.check_limits(ScoreRequest.model_construct(items=items, weights=None, extract=None))
    st.admit(n)
    results = await st.scorer.score_items(items)
    rewards = [r.reward if r.reward is not None else 0.0 for r in results]
    infra = [1.0 if r.status == "infra_error" else 0.0 for r in results]
    passed = [
        (r.detail["passed"] / r.detail["total"]) if r.detail.get("total") else float(r.reward or 0.0)
        for r in results
    ]
    body = GetRewardResponse(rewards=rewards, scores=rewards, extra_logs={"pass_rate": passed, "infra_error": infra})
    return Response(body.model_dump_json(), media_type="application/json")
