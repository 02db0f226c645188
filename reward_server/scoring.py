"""Scoring items: code through the sandbox pool, math through the math grader. Shared by
`/v1/score` and the compatibility endpoints."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from reward_server.grading.code import build_job, code_detail, extract_code, shape_reward
from reward_server.schemas import CodeTask, ExtractOptions, MathTask, ScoreItem, ScoreResult
from reward_server.settings import Settings, Weights

log = logging.getLogger("reward_server.scoring")


def load_math_module():
    """The math grader lands separately; the server works without it (math items then come
    back as infra_error with a reason)."""
    try:
        from reward_server.grading import math as m  # noqa: PLC0415
    except Exception as e:  # ImportError, or a half-written module
        log.warning("math grader unavailable: %s", e)
        return None
    if not hasattr(m, "MathGrader"):
        log.warning("math grader unavailable: reward_server.grading.math has no MathGrader")
        return None
    return m


def _infra_error_type():
    try:
        from sandbox import InfraError  # noqa: PLC0415

        return InfraError
    except Exception:  # the pool module not there yet
        return RuntimeError


def count_tests(task: CodeTask) -> int:
    t = task.tests
    if t.kind == "assert":
        return len(getattr(t, "asserts", None) or []) or 1
    return len(t.cases)


class Scorer:
    def __init__(self, settings: Settings, pool: Any, math_grader: Any, math_module: Any, admission, metrics):
        self.settings = settings
        self.pool = pool
        self.math = math_grader
        self.math_module = math_module
        self.admission = admission
        self.metrics = metrics
        self.infra_error = _infra_error_type()

    async def score_items(
        self, items: list[ScoreItem], weights: Weights | None = None, extract: ExtractOptions | None = None
    ) -> list[ScoreResult]:
        """Grade already-admitted items concurrently; results in item order. Releases one
        admission unit per item as it finishes."""
        w = weights or self.settings.default_weights
        return list(await asyncio.gather(*(self._one(it, w, extract) for it in items)))

    async def _one(self, item: ScoreItem, weights: Weights, extract: ExtractOptions | None) -> ScoreResult:
        t0 = time.perf_counter()
        kind = item.task.type
        try:
            if isinstance(item.task, MathTask):
                res = await self._math(item)
            else:
                res = await self._code(item, item.task, weights, extract)
        except Exception as e:  # a bug, not the candidate's fault: never score it as a failure
            log.exception("grading failed for item %r", item.id)
            res = ScoreResult(id=item.id, reward=None, status="infra_error", detail={"kind": kind, "error": f"internal: {e!r}"})
        finally:
            self.admission.release(1)
        m = self.metrics
        m.items.labels(kind, res.status).inc()
        m.item_latency.labels(kind).observe(time.perf_counter() - t0)
        if res.reward is not None:
            m.rewards.labels(kind).observe(res.reward)
        return res

    async def _code(self, item: ScoreItem, task: CodeTask, weights: Weights, extract: ExtractOptions | None) -> ScoreResult:
        program, mode = extract_code(item.completion, extract, task.language)
        if not program.strip():
            # Nothing to run: no syntax/runtime credit for an empty answer (that would be a free reward).
            n = count_tests(task)
            detail = {
                "kind": "code", "syntax_ok": False, "runs": False, "passed": 0, "total": n,
                "tests": [{"status": "skipped", "time_s": 0.0, "message": "no code"}] * n,
                "load_message": "no code found in the completion", "extract_mode": mode, "code_chars": 0,
                "wall_s": 0.0, "runner": "",
            }
            return ScoreResult(id=item.id, reward=0.0, status="ok", detail=detail)
        job = build_job(program, task)
        try:
            async with self.admission.slot():
                result = await self.pool.run(job)
        except self.infra_error as e:
            return ScoreResult(
                id=item.id, reward=None, status="infra_error",
                detail={"kind": "code", "error": str(e) or type(e).__name__, "extract_mode": mode, "code_chars": len(program)},
            )
        if result.compile is not None:
            self.metrics.compile_cache.labels(task.language, result.compile.cache).inc()
        return ScoreResult(
            id=item.id, reward=shape_reward(result, weights), status="ok", detail=code_detail(result, mode, len(program))
        )

    async def _math(self, item: ScoreItem) -> ScoreResult:
        task: MathTask = item.task  # type: ignore[assignment]
        if self.math is None:
            return ScoreResult(id=item.id, reward=None, status="infra_error", detail={"kind": "math", "error": "math grader not available"})
        options = self.math_options(task)
        grade = await self.math.grade(item.completion, task.answer, options)
        detail = {"kind": "math", **grade.model_dump(mode="json")}
        return ScoreResult(id=item.id, reward=float(grade.reward), status="ok", detail=detail)

    def math_options(self, task: MathTask):
        extra = task.model_extra or {}
        if not extra or self.math_module is None:
            return None
        return self.math_module.MathOptions.model_validate(extra)
