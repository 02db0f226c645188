"""OpenRLHF's remote reward model protocol: `POST /get_reward`.

OpenRLHF (`--remote_rm_url http://host:8000/get_reward`) posts
`{"query": [prompt+response, ...], "prompts": [prompt, ...], "labels": [label, ...]}` and
reads `rewards` (and, in newer versions, `scores` and `extra_logs`). Each label is one of
our tasks serialised as a JSON string (`{"type": "code", "tests": ...}`); a label that is
not a JSON object is taken as a math reference answer. Infrastructure errors score 0.0
(OpenRLHF needs numbers) and are counted in `extra_logs.infra_error`. A missing or empty
label is a 422 naming `labels[i]` and OpenRLHF's `--label_key`, never a silent 0.0.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from reward_server.body import parse_body, request_body
from reward_server.errors import BODY_RESPONSES, InvalidRequest, error
from reward_server.labels import task_of
from reward_server.schemas import ScoreItem, Task
from reward_server.state import ServerState

router = APIRouter(tags=["compat: OpenRLHF"])
_task_adapter: TypeAdapter = TypeAdapter(Task)
_LABEL_HINT = " (OpenRLHF sends an empty label when --label_key is not set: pass --label_key <the task column>)"
_PLAIN_SPECIAL = ("</s>", "<eos>", "<pad>")
_SPECIAL_MAX = 40  # characters inside <|...|>


def _blank_start(text: str, end: int) -> int:
    while end > 0 and text[end - 1].isspace():
        end -= 1
    return end


def _special_start(text: str, end: int) -> int | None:
    """Where a special token (`<|name|>`, `</s>`, `<eos>`, `<pad>`) ending at `end` starts."""
    for tok in _PLAIN_SPECIAL:
        if text.endswith(tok, 0, end):
            return end - len(tok)
    if not text.endswith("|>", 0, end):
        return None
    start = text.rfind("<|", max(0, end - _SPECIAL_MAX - 4), end - 2)
    if start < 0:
        return None
    inner = text[start + 2:end - 2]
    if not 1 <= len(inner) <= _SPECIAL_MAX or any(c in inner for c in "|<>"):
        return None
    return start


def strip_trailing_special(text: str) -> str:
    """`text` without the special tokens (and blanks) a decoder left at its end. Written by
    hand, walking back from the end: linear in the text, unlike a regex anchored at `$`."""
    cut = None
    end = len(text)
    while (start := _special_start(text, _blank_start(text, end))) is not None:
        cut = end = start
    return text if cut is None else text[:_blank_start(text, cut)]


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
    queue_timeout_s: float | None = Field(None, gt=0, le=86400, description="our extension: a code item still "
                                          "waiting for a slot after this long scores 0, flagged in extra_logs.queue_timeout")


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
    return strip_trailing_special(text)


def _items(req: GetRewardRequest, check_raw_tasks) -> list[ScoreItem]:
    """One item per query (label -> task, query - prompt -> completion), or 422 naming `labels[i]`."""
    n = len(req.query)
    errors: list[dict] = []
    if req.prompts is not None and len(req.prompts) != n:
        errors.append(error(["prompts"], f"expected {n} prompts, got {len(req.prompts)}"))
    if req.labels is None or len(req.labels) != n:
        got = "none" if req.labels is None else len(req.labels)
        errors.append(error(["labels"], f"expected {n} labels (one task per query), got {got}{_LABEL_HINT}"))
    if errors:
        raise InvalidRequest(errors)
    items: list[ScoreItem] = []
    for i, q in enumerate(req.query):
        if len(errors) >= 20:
            break
        label = req.labels[i]  # type: ignore[index]
        if label is None or (isinstance(label, str) and not label.strip()):
            errors.append(error(["labels", i], f"label is empty: every query needs its task{_LABEL_HINT}", "missing"))
            continue
        try:
            raw = task_of(label)
            check_raw_tasks([(["labels", i, "tests"], raw)])
            task = _task_adapter.validate_python(raw)
        except ValidationError as e:
            errors.extend(error(["labels", i, *err["loc"]], err["msg"], err["type"]) for err in e.errors())
            continue
        except (ValueError, TypeError) as e:
            errors.append(error(["labels", i], str(e)))
            continue
        prompt = req.prompts[i] if req.prompts is not None else None
        items.append(ScoreItem.model_construct(id=i, completion=completion_of(q, prompt), task=task))
    if errors:
        raise InvalidRequest(errors[:20])
    return items


@router.post("/get_reward", response_model=GetRewardResponse, summary="OpenRLHF remote reward model",
             openapi_extra=request_body(GetRewardRequest), responses=BODY_RESPONSES)
async def get_reward(request: Request):
    st = ServerState.of(request)
    req = await parse_body(request, GetRewardRequest, list_field="query", max_items=st.settings.max_items_per_request)
    items = await asyncio.to_thread(_items, req, st.scorer.check_raw_tasks)
    results = await st.scorer.score(items, field="query", queue_timeout_s=req.queue_timeout_s)
    rewards = [r.reward if r.reward is not None else 0.0 for r in results]
    infra = [1.0 if r.status == "infra_error" else 0.0 for r in results]
    late = [1.0 if r.status == "queue_timeout" else 0.0 for r in results]
    passed = [(c.passed / c.total) if (c := r.code) is not None and c.total else float(r.reward or 0.0)
              for r in results]
    body = GetRewardResponse(rewards=rewards, scores=rewards, extra_logs={"pass_rate": passed, "infra_error": infra, "queue_timeout": late})
    return Response(body.model_dump_json(), media_type="application/json")
