"""The server's side of stateful sessions: ids that name this server, TTL, idle timeout, CPU
budget, labels, the cap on live sessions (apart from the job slots), the sweeper that ends
expired ones, and grading a session's program through the same `Scorer` as `/v1/score`.

The sandbox keeps the processes (`sandbox.api.SessionRunner`, keyed by its own opaque keys);
this keeps what a client sees: a session id `<server id>.<random>`, its limits and state. An
execute is one job: admitted like a `/v1/score` item (429 when the queue is full) and run in a
job slot, so sessions and scoring share the sandbox fairly (one FIFO queue). Nothing a
session's process says reaches a reward: `score` runs the session's replayable program (its
files, then each execute that completed without error) as an ordinary candidate in a fresh job.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import secrets
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from fastapi import HTTPException

from reward_server.admission import Admission, ClientGone
from reward_server.errors import InvalidRequest, RequestRejected, error
from reward_server.metrics import Metrics
from reward_server.schemas import ExtractOptions, ScoreItem, ScoreResult
from reward_server.scoring import Scorer
from reward_server.sessions.models import (
    ELSEWHERE,
    ID_HEX,
    ID_SEP,
    SessionCreate,
    SessionInfo,
    SessionScore,
    b64_files,
    server_of,
    well_formed,
)
from reward_server.settings import Settings
from sandbox.api import InfraError, JobRunner, SessionsFull, UnknownSession
from sandbox.sessions import SessionExec, SessionExecResult, SessionSpec

log = logging.getLogger("reward_server.sessions")

_TOMBSTONES = 65536  # ended ids remembered (DELETE stays idempotent, an execute says why it is gone)
_RAW = ExtractOptions(mode="raw", strip_think=False)  # a session's program is code, not model text


@dataclass
class Session:
    """One session as the server keeps it (the sandbox holds its process under `key`)."""

    id: str
    key: str
    spec: SessionSpec
    labels: dict[str, str]
    created_at: float
    expires_at: float
    idle_timeout_s: float
    last_used: float
    executes: int = 0
    cpu_s: float = 0.0
    busy: int = 0
    lost_reason: str = ""  # set once its process is gone
    program: str | None = None  # kept when it is lost (the sandbox's entry is closed then)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    @property
    def lost(self) -> bool:
        return bool(self.lost_reason)

    def idle_end(self) -> float:
        return self.last_used + self.idle_timeout_s

    def info(self) -> SessionInfo:
        state = "lost" if self.lost else ("busy" if self.busy else "live")
        return SessionInfo(
            session_id=self.id, state=state, language=self.spec.language, runtime=self.spec.runtime,
            memory_mb=self.spec.memory_mb, labels=dict(self.labels), created_at=round(self.created_at, 3),
            expires_at=round(self.expires_at, 3), idle_timeout_s=self.idle_timeout_s,
            idle_expires_at=round(min(self.expires_at, self.idle_end()), 3), executes=self.executes,
            cpu_s=round(self.cpu_s, 6), cpu_budget_s=self.spec.cpu_budget_s, lost_reason=self.lost_reason,
        )


def not_found(session_id: str, why: str = "") -> HTTPException:
    reason = f" (it ended: {why})" if why else ""
    return HTTPException(status_code=404, detail=f"no session {session_id[:100]!r}{reason}")


class SessionManager:
    """Sessions of one server. `start()` runs the sweeper; `close_all()` ends every session (at
    server stop, before the sandbox closes)."""

    def __init__(self, settings: Settings, runner: JobRunner, scorer: Scorer, admission: Admission, metrics: Metrics,
                 clock: Callable[[], float] = time.time):
        self.settings = settings
        self.runner = runner
        self.scorer = scorer
        self.admission = admission
        self.metrics = metrics
        self.clock = clock
        self.server_id = settings.session_server_id or secrets.token_hex(3)
        cap = runner.session_capacity
        self.capacity = cap if settings.max_sessions is None else min(settings.max_sessions, cap)
        self.sessions: dict[str, Session] = {}
        self.ended: OrderedDict[str, str] = OrderedDict()  # id -> how it ended
        self.created_total = 0
        self._opening = 0
        self._closing = False
        self._sweeper: asyncio.Task | None = None
        # told each new session's id once it is open (the Ray fleet's replica: Serve learns where it lives)
        self.on_open: Callable[[str], Awaitable[None]] | None = None
        metrics.sessions_live.set_function(lambda: self.live)

    # ------------------------------------------------------------------ life cycle
    async def start(self) -> None:
        self._sweeper = asyncio.ensure_future(self._sweep_loop())

    async def close_all(self) -> None:
        """Refuse new sessions, end every one (none of their processes is left)."""
        self._closing = True
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._sweeper
        await asyncio.gather(*(self._end(s, "shutdown") for s in list(self.sessions.values())),
                             return_exceptions=True)

    @property
    def live(self) -> int:
        """Sessions whose process is alive (a lost one no longer holds a sandbox slot)."""
        return sum(1 for s in self.sessions.values() if not s.lost)

    def figures(self) -> dict[str, object]:
        """/readyz's `sessions` block."""
        return {"server_id": self.server_id, "live": self.live, "lost": len(self.sessions) - self.live,
                "capacity": self.capacity, "created": self.created_total}

    # ------------------------------------------------------------------ create
    def _limits(self, body: SessionCreate) -> tuple[float, float, float]:
        s = self.settings
        errors = []
        for name, value, ceiling in (("ttl_s", body.ttl_s, s.session_ttl_s),
                                     ("idle_timeout_s", body.idle_timeout_s, s.session_idle_timeout_s),
                                     ("cpu_budget_s", body.cpu_budget_s, s.session_cpu_budget_s)):
            if value is not None and value > ceiling:
                errors.append(error([name], f"at most {ceiling} on this server", "less_than_equal"))
        if errors:
            raise InvalidRequest(errors)
        return (body.ttl_s or s.session_ttl_s, body.idle_timeout_s or s.session_idle_timeout_s,
                body.cpu_budget_s or s.session_cpu_budget_s)

    def _retry_after(self) -> int:
        """Seconds until a session could end by itself (its TTL or idle timeout), within bounds."""
        now = self.clock()
        ends = [min(x.expires_at, x.idle_end()) - now for x in self.sessions.values() if not x.lost]
        soonest = min(ends, default=60.0)
        return max(math.ceil(self.settings.retry_after_s), min(60, math.ceil(max(0.0, soonest))))

    def _full(self) -> RequestRejected:
        return RequestRejected(429, f"session capacity reached: {self.live} live, limit {self.capacity}; retry later",
                               retry_after=self._retry_after(), reason="sessions_full")

    async def open(self, body: SessionCreate) -> Session:
        """A new session (422 naming a field over its ceiling; 429 when full; 503 while stopping
        or when the sandbox fails)."""
        if self._closing or self.admission.draining:
            raise RequestRejected(503, "server is shutting down", retry_after=1, reason="shutting_down")
        if self.capacity <= 0:
            raise RequestRejected(503, "this server's sandbox offers no sessions", retry_after=60,
                                  reason="sessions_unavailable")
        ttl, idle, budget = self._limits(body)
        runtime = self.scorer.resolve_runtime(body.runtime, ["runtime"], body.language)
        try:
            spec = SessionSpec(language=body.language, runtime=runtime, cpu_budget_s=budget,
                               files=b64_files(body.files), **({"memory_mb": body.memory_mb} if body.memory_mb else {}))
        except ValueError as e:  # pydantic's ValidationError is one
            raise _invalid(e, list(body.files)) from None
        if self.live + self._opening >= self.capacity:
            raise self._full()
        self._opening += 1
        try:
            key = await self.runner.open_session(spec)
        except SessionsFull:
            raise self._full() from None
        except InfraError as e:
            log.warning("sandbox could not open a session: %s", e)
            raise RequestRejected(503, f"the sandbox could not open a session: {e}", retry_after=1,
                                  reason="sandbox_error") from None
        except ValueError as e:
            raise InvalidRequest([error(["runtime"], str(e), "runtime_unavailable")]) from None
        finally:
            self._opening -= 1
        now = self.clock()
        sid = f"{self.server_id}{ID_SEP}{secrets.token_hex(ID_HEX)}"
        s = Session(id=sid, key=key, spec=spec, labels=dict(body.labels), created_at=now, expires_at=now + ttl,
                    idle_timeout_s=idle, last_used=now)
        if self._closing:  # the server began stopping while the sandbox opened it
            await self.runner.close_session(key)
            raise RequestRejected(503, "server is shutting down", retry_after=1, reason="shutting_down")
        self.sessions[sid] = s
        self.created_total += 1
        self.metrics.sessions_created.inc()
        if self.on_open is not None:
            try:
                await self.on_open(sid)
            except Exception:  # a routing hint; the session itself is open and fine
                log.exception("on_open hook failed for session %s", sid)
        return s

    # ------------------------------------------------------------------ look up
    def elsewhere(self, session_id: str) -> None:
        """503, not 404, for an id another server gave: behind a load balancer (a Ray Serve
        fleet) the request reached the wrong replica, and a retry is routed again."""
        owner = server_of(session_id)
        if owner != self.server_id and well_formed(session_id):  # anything else is no id of any server: 404
            raise RequestRejected(503, f"session {session_id[:100]!r} lives on server {owner[:40]!r}, this is "
                                  f"{self.server_id!r} ({ELSEWHERE}): retry (a load balancer routes it again)", retry_after=0,
                                  reason="session_elsewhere")

    def get(self, session_id: str) -> Session:
        s = self.sessions.get(session_id)
        if s is None:
            self.elsewhere(session_id)
            raise not_found(session_id, self.ended.get(session_id, ""))
        return s

    def find(self, labels: dict[str, str]) -> list[Session]:
        return [s for s in self.sessions.values() if all(s.labels.get(k) == v for k, v in labels.items())]

    # ------------------------------------------------------------------ execute
    async def execute(self, session_id: str, req: SessionExec) -> SessionExecResult:
        """Run code in the session (one call at a time per session; others wait their turn). The
        call is one job: admitted (429 when the queue is full) and run in a job slot."""
        s = self.get(session_id)
        if s.lost:
            return _lost_answer(s)
        self.scorer.admit(1)
        cancelled = False
        t0 = time.perf_counter()
        s.busy += 1
        try:
            async with s.lock:
                if s.lost:
                    return _lost_answer(s)
                if s.id not in self.sessions:  # ended while this call waited
                    raise not_found(session_id, self.ended.get(session_id, ""))
                async with self.admission.slot():
                    try:
                        res = await self.runner.session_execute(s.key, req)
                    except UnknownSession:  # closed under it (TTL, DELETE, shutdown)
                        res = SessionExecResult(status="session_lost",
                                                message=f"the session ended: {self.ended.get(s.id, 'closed')}")
                    except InfraError as e:
                        res = SessionExecResult(status="session_lost", message=f"the sandbox failed: {e}")
        except (asyncio.CancelledError, ClientGone):
            cancelled = True
            raise
        finally:
            s.busy -= 1
            s.last_used = self.clock()
            self.admission.release(1, cancelled=cancelled)
        s.executes += 1
        s.cpu_s = max(s.cpu_s + res.cpu_s, res.cpu_total_s)
        self.metrics.session_execute.labels(res.status).observe(time.perf_counter() - t0)
        if res.status == "session_lost" and not s.lost and s.id in self.sessions:
            await self._lose(s, res.message or "its process is gone")
        return res

    async def _lose(self, s: Session, why: str) -> None:
        """Its process is gone: keep the entry (executes answer session_lost, `score` still
        grades its program) and free the sandbox's slot."""
        s.lost_reason = why
        with contextlib.suppress(UnknownSession):
            s.program = self.runner.session_program(s.key)
        self.metrics.sessions_lost.inc()
        with contextlib.suppress(Exception):
            await self.runner.close_session(s.key)

    # ------------------------------------------------------------------ score
    async def score(self, session_id: str, body: SessionScore) -> ScoreResult:
        """Grade the session's program with `body.task`, as `/v1/score` grades a completion."""
        s = self.get(session_id)
        task = body.task
        if task.language != s.spec.language:
            raise InvalidRequest([error(["task", "language"], f"the session runs {s.spec.language}", "value_error")])
        if task.runtime is None:  # graded where it ran
            task = task.model_copy(update={"runtime": s.spec.runtime})
        if s.program is not None:
            program = s.program
        else:
            try:
                program = self.runner.session_program(s.key)
            except UnknownSession:
                raise not_found(session_id, self.ended.get(session_id, "closed")) from None
        item = ScoreItem.model_construct(id=session_id, completion=program, task=task)
        try:
            results = await self.scorer.score([item], body.weights, _RAW, field="session")
        except InvalidRequest as e:
            raise InvalidRequest([_relocate(err) for err in e.errors]) from None
        return results[0]

    # ------------------------------------------------------------------ end
    async def close(self, session_id: str) -> tuple[bool, str]:
        """DELETE: (True, '') when this call ended it, (False, how) when it had already ended;
        404 for an id this server never gave."""
        s = self.sessions.get(session_id)
        if s is None:
            if session_id in self.ended:
                return False, self.ended[session_id]
            self.elsewhere(session_id)
            raise not_found(session_id)
        await self._end(s, "deleted")
        return True, ""

    async def _end(self, s: Session, how: str) -> None:
        if self.sessions.pop(s.id, None) is None:
            return
        self.ended[s.id] = how
        while len(self.ended) > _TOMBSTONES:
            self.ended.popitem(last=False)
        self.metrics.sessions_ended.labels(how).inc()
        if not s.lost:
            try:
                await self.runner.close_session(s.key)
            except Exception:  # the runner is gone with its sessions; nothing of it is left to kill
                log.exception("closing session %s failed", s.id)

    async def sweep(self) -> None:
        """End the sessions past their TTL (busy or not: a TTL is a hard end) or idle past their
        idle timeout (a lost one too: nobody came to read why)."""
        now = self.clock()
        for s in list(self.sessions.values()):
            if now >= s.expires_at:
                await self._end(s, "ttl")
            elif not s.busy and now >= s.idle_end():
                await self._end(s, "idle")

    async def _sweep_loop(self) -> None:
        while True:
            await asyncio.sleep(self.settings.session_sweep_s)
            try:
                await self.sweep()
            except Exception:
                log.exception("session sweep failed")


def _lost_answer(s: Session) -> SessionExecResult:
    return SessionExecResult(status="session_lost", message=s.lost_reason, cpu_total_s=s.cpu_s)


def _invalid(e: ValueError, paths: list[str]) -> InvalidRequest:
    """The SessionSpec's errors at the request's fields (`files.<path>`, as the request names it)."""
    errs = getattr(e, "errors", None)
    if not callable(errs):
        return InvalidRequest([error(["files"], str(e))])
    out = []
    for x in errs():
        loc = list(x["loc"]) or ["files"]
        if loc[0] == "files" and len(loc) > 1 and isinstance(loc[1], int) and loc[1] < len(paths):
            loc = ["files", paths[loc[1]]]
        out.append(error(loc, x["msg"], x["type"]))
    return InvalidRequest(out)


def _relocate(err: dict) -> dict:
    """A /v1/score error about the one item, said about this request: the task's fields as
    `task.*`, the completion as the session's program."""
    loc = list(err.get("loc", []))
    if loc[:3] == ["body", "session", 0]:
        rest = loc[3:]
        loc = ["body", "session_program"] if rest[:1] == ["completion"] else ["body", *rest]
    return {**err, "loc": loc}
