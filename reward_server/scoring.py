"""The one service every route goes through: limits, admission, then scoring (code through
the sandbox pool, math through the math grader) or a single execution (`/run_code`).

A route parses its body (`reward_server.body`), turns it into items, and calls `score` or
`execute`; caps, 429/503/504 and infra errors are decided here once, so a compat route
cannot get them wrong. CPU work on model text (code extraction) runs in worker threads, so
the event loop keeps answering health checks whatever a completion holds.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from reward_server.admission import Admission, ClientGone, QueueTimeout
from reward_server.errors import InvalidRequest, RequestRejected, error, invalid
from reward_server.grading import testlib
from reward_server.grading.code import build_job, extract_code, shape_reward, task_source_errors
from reward_server.grading.math import MathGrader, MathOptions
from reward_server.metrics import Metrics
from reward_server.schemas import CodeDetail, CodeTask, ExtractOptions, MathTask, ScoreItem, ScoreResult
from reward_server.settings import Settings, Weights
from sandbox import runtimes
from sandbox.api import InfraError, JobRunner, TaskError
from sandbox.jobs import ExecRequest, ExecResult, Limits, escape_surrogates
from sandbox.runner import units

log = logging.getLogger("reward_server.scoring")

_MAX_ERRORS = 20


def count_tests(task: CodeTask) -> int:
    """The tests the runner would report for this task, counted from its syntax alone (an
    empty completion's result lists them all as skipped)."""
    spec = build_job("", task).tests.model_dump()
    try:
        return len(units.labels(spec))
    except (SyntaxError, ValueError, KeyError, TypeError, RecursionError, MemoryError):
        return units.upper_bound(spec)  # test code the runner will refuse: the bound stands in


class Scorer:
    def __init__(self, settings: Settings, runner: JobRunner, math_grader: MathGrader | None,
                 admission: Admission, metrics: Metrics):
        self.settings = settings
        self.runner = runner
        self.math = math_grader
        self.admission = admission
        self.metrics = metrics
        self.default_limits = Limits(wall_factor=settings.wall_factor)  # a task's own fields override it

    # ------------------------------------------------------------------ runtimes
    @property
    def default_runtime(self) -> str:
        """What a code task that names no runtime runs on: the sandbox's default (--runtime)."""
        return self.runner.default_runtime

    def runtime_refusal(self, name: str, language: str = "python") -> str | None:
        """Why a job on runtime `name` is refused here (None: accepted): a program in another
        language than Python on a runtime of packages, else the sandbox's word."""
        if language != "python" and name != runtimes.DEFAULT:
            return (f"runtime {name!r} is a set of Python packages; a {language} program runs on "
                    f"{runtimes.DEFAULT!r} (leave runtime unset)")
        return self.runner.refusal(name)

    def resolve_runtime(self, name: str | None, loc: list, language: str = "python") -> str:
        """The runtime a request names, else the default, or a 422 at `loc` listing the
        available ones. A runtime's packages are Python's: a program in another language runs
        on the lean runtime (where the toolchains are) whenever this server offers it."""
        if name is None:
            if language != "python" and self.runtime_refusal(runtimes.DEFAULT) is None:
                return runtimes.DEFAULT
            return self.default_runtime
        why = self.runtime_refusal(name, language)
        if why is not None:
            raise invalid(loc, why, "runtime_unavailable")
        return name

    # ------------------------------------------------------------------ the road in
    async def score(
        self, items: list[ScoreItem], weights: Weights | None = None, extract: ExtractOptions | None = None,
        field: str = "items", queue_timeout_s: float | None = None,
    ) -> list[ScoreResult]:
        """Check the caps and the tasks' test code, admit the items (429 when full), grade
        them; results in item order. A code item still waiting for a slot after
        `queue_timeout_s` is `queue_timeout` (never run, never the candidate's failure)."""
        self.check_limits(items, field)
        await asyncio.to_thread(self.check_sources, items, field)  # compiling test code: off the loop
        self.admit(len(items))
        return await self.score_items(items, weights, extract, queue_timeout_s)

    async def execute(self, req: ExecRequest) -> ExecResult:
        """One `/run_code` execution: queued up to the admission bound, then 504 (which verl
        retries; a 429 it would score as a failure). InfraError propagates to the route."""
        self.admit(1, full_status=504)
        cancelled = False
        try:
            async with self.admission.slot():
                return await self.runner.execute(req)
        except (asyncio.CancelledError, ClientGone):
            cancelled = True
            raise
        finally:
            self.admission.release(1, cancelled=cancelled)

    def admit(self, n: int, full_status: int = 429) -> None:
        """Accept n jobs now or refuse the request: `full_status` when over capacity, 503 while
        starting or shutting down."""
        adm = self.admission
        if adm.draining:
            raise RequestRejected(503, "server is shutting down", retry_after=1, reason="shutting_down")
        if not adm.try_admit(n):
            raise RequestRejected(
                full_status, f"over capacity: {adm.admitted} jobs accepted, limit {adm.limit}; retry later",
                retry_after=adm.retry_after(n), reason="overloaded",
            )

    def check_raw_tasks(self, tasks: list[tuple[list, Any]]) -> None:
        """Caps that must hold before a task is validated (validating a 300 000-case task holds
        the interpreter for most of a second): `(loc, task JSON)` pairs, 422 naming each."""
        cap = self.settings.max_tests_per_item
        errors = [error(loc, f"at most {cap} test cases per task, got {n}", "too_long")
                  for loc, t in tasks if (n := units.upper_bound(t.get("tests") if isinstance(t, dict) else None)) > cap]
        if errors:
            raise InvalidRequest(errors[:_MAX_ERRORS])

    def check_sources(self, items: list[ScoreItem], field: str = "items") -> None:
        """Test code that cannot compile is the task's error, seen before any job: a 422 naming
        the field (`items.3.task.tests.prompt`), never an infra_error for every completion."""
        errors = [error([field, i, "task", "tests", *loc], msg, "task_invalid")
                  for i, it in enumerate(items) if isinstance(it.task, CodeTask)
                  for loc, msg in task_source_errors(it.task)]
        if errors:
            raise InvalidRequest(errors[:_MAX_ERRORS])

    def check_limits(self, items: list[ScoreItem], field: str = "items") -> None:
        """The server's caps on each item (422 naming the field); the item count was checked
        before the body was validated."""
        s = self.settings
        if len(items) > s.max_items_per_request:
            raise InvalidRequest([error([field], f"at most {s.max_items_per_request} items per request, got {len(items)}", "too_long")])
        errors: list[dict] = []
        for i, it in enumerate(items):
            c = it.completion
            if len(c) > s.max_code_bytes or (len(c) * 4 > s.max_code_bytes and len(c.encode("utf-8", "surrogatepass")) > s.max_code_bytes):
                errors.append(error([field, i, "completion"], f"longer than {s.max_code_bytes} bytes", "too_long"))
            t = it.task
            if isinstance(t, MathTask):
                if t.model_extra:
                    try:
                        t._options = MathOptions.model_validate(t.model_extra)
                    except ValueError as e:
                        errors.extend(error([field, i, "task", *err["loc"]], err["msg"], err["type"]) for err in e.errors())
            else:
                if t.timeout_s is not None and t.timeout_s > s.max_timeout_s:
                    errors.append(error([field, i, "task", "timeout_s"], f"at most {s.max_timeout_s}", "less_than_equal"))
                if t.memory_mb is not None and t.memory_mb > s.max_memory_mb:
                    errors.append(error([field, i, "task", "memory_mb"], f"at most {s.max_memory_mb}", "less_than_equal"))
                if t.runtime is not None and (why := self.runtime_refusal(t.runtime, t.language)) is not None:
                    errors.append(error([field, i, "task", "runtime"], why, "runtime_unavailable"))
            if len(errors) >= _MAX_ERRORS:
                break
        if errors:
            raise InvalidRequest(errors)

    # ------------------------------------------------------------------ grading
    async def score_items(
        self, items: list[ScoreItem], weights: Weights | None = None, extract: ExtractOptions | None = None,
        queue_timeout_s: float | None = None,
    ) -> list[ScoreResult]:
        """Grade already-admitted items concurrently; results in item order. Releases one
        admission unit per item as it finishes. One item's failure is its own result."""
        w = weights or self.settings.default_weights
        return list(await asyncio.gather(*(self._one(it, w, extract, queue_timeout_s) for it in items)))

    async def _one(self, item: ScoreItem, weights: Weights, extract: ExtractOptions | None,
                   queue_timeout_s: float | None = None) -> ScoreResult:
        t0 = time.perf_counter()
        kind = item.task.type
        cancelled = False
        try:
            if isinstance(item.task, MathTask):
                res = await self._math(item)
            else:
                res = await self._code(item, item.task, weights, extract, queue_timeout_s)
        except QueueTimeout as e:  # waited past the client's bound: never ran, said so
            res = ScoreResult(id=item.id, reward=None, status="queue_timeout",
                              detail={"kind": kind, "error": str(e), "queue_s": round(e.waited_s, 6)})
        except asyncio.CancelledError:  # shutdown past its grace: counted, never scored
            cancelled = True
            raise
        except ClientGone:  # its client left before the job started: never run, never scored
            cancelled = True
            res = ScoreResult(id=item.id, reward=None, status="infra_error", detail={"kind": kind, "error": "client gone"})
        except Exception as e:  # a bug, not the candidate's fault: never score it as a failure
            log.exception("grading failed for item %r", item.id)
            res = ScoreResult(id=item.id, reward=None, status="infra_error", detail={"kind": kind, "error": f"internal: {type(e).__name__}"})
        finally:
            self.admission.release(1, cancelled=cancelled)
        m = self.metrics
        m.items.labels(kind, res.status).inc()
        m.item_latency.labels(kind).observe(time.perf_counter() - t0)
        if res.status == "queue_timeout":
            m.queue_timeouts.labels(kind).inc()
        if res.reward is not None:
            m.rewards.labels(kind).observe(res.reward)
        for flag in res.flags:
            m.hack_attempts.labels(flag).inc()
        return res

    async def _code(self, item: ScoreItem, task: CodeTask, weights: Weights, extract: ExtractOptions | None,
                    queue_timeout_s: float | None = None) -> ScoreResult:
        program, mode = await asyncio.to_thread(extract_code, item.completion, extract, task.language)
        if not program.strip():
            # Nothing to run: no syntax/runtime credit for an empty answer (that would be a free reward).
            n = await asyncio.to_thread(count_tests, task)  # parses the test code
            return ScoreResult(id=item.id, reward=0.0, status="ok", detail=CodeDetail.no_code(n, mode))
        # a named runtime was checked by check_limits (one whose lazy start failed since is the pool's InfraError)
        runtime = task.runtime or self.resolve_runtime(None, ["task", "runtime"], task.language)
        job = build_job(escape_surrogates(program), task, self.default_limits, runtime,
                        self.settings.time_scale, self.settings.max_timeout_s)
        job = testlib.attach(job, self.settings.testlib_header)  # where its checker includes testlib.h
        wait = None
        try:
            async with self.admission.slot(queue_timeout_s) as wait:
                self.metrics.queue_wait.observe(wait.queue_s)
                result = await self.runner.run(job)
        except TaskError as e:  # the runner could not run the task's tests: the task's fault, said so
            if str(e).startswith("the checker"):  # sandbox/runner/checker.py's words
                self.metrics.checker_failures.labels("task").inc()
            return ScoreResult(
                id=item.id, reward=None, status="task_error",
                detail={"kind": "code", "error": str(e), "extract_mode": mode, "code_chars": len(program),
                        "queue_s": round(wait.queue_s, 6) if wait else 0.0},
            )
        except InfraError as e:
            return ScoreResult(
                id=item.id, reward=None, status="infra_error",
                detail={"kind": "code", "error": str(e) or type(e).__name__, "extract_mode": mode, "code_chars": len(program),
                        "queue_s": round(wait.queue_s, 6) if wait else 0.0},
            )
        if result.compile is not None:
            self.metrics.compile_cache.labels(task.language, result.compile.cache).inc()
        if "checker_failed" in result.flags:
            self.metrics.checker_failures.labels("output").inc()
        return ScoreResult(
            id=item.id, reward=shape_reward(result, weights), status="ok",
            detail=CodeDetail.of(result, mode, len(program), wait.queue_s),
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
        if not extra:
            return None
        if task._options is None:  # a caller that skipped admission (none of the routes do)
            task._options = MathOptions.model_validate(extra)
        return task._options
