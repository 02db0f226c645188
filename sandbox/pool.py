"""The async pool the server uses: runners on some host, jobs spread over them.

Each runner serves several connections at once; a connection is a warm supervisor plus
spawner inside the runner, so connections are kept and reused between jobs. A runner that
dies (killed, OOM, container gone) is replaced, and the job it held is retried once on
another runner; if that fails too the caller gets InfraError, never a candidate failure.
A runner is replaced only when it is gone itself (its host says so, or a fresh connection
gets no answer): a lost connection or a busy one (a long cleanup) says nothing about it.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import secrets
import time
from collections.abc import Callable
from typing import Any

from sandbox.api import InfraError, PoolStats, RuntimeStatus, SessionsFull, TaskError, UnknownSession
from sandbox.hosts import HostKind, make_host, resolve_kind
from sandbox.hosts.base import Host, RunnerHandle, RunnerStartError
from sandbox.jobs import (
    ExecRequest,
    ExecResult,
    Job,
    JobResult,
    exec_message,
    exec_result,
    job_result,
    refusal,
    run_message,
)
from sandbox.runner import framing, languages, taskprog, uidlease, units
from sandbox.runner.cpuclock import HARD_FACTOR
from sandbox.runner.cpus import allowed_cpus
from sandbox.runner.framing import MAX_FRAME
from sandbox.runner.server import session_socket
from sandbox.sessions import SessionExec, SessionExecResult, SessionSpec, SessionStats, replay_program

log = logging.getLogger("sandbox.pool")

__all__ = ["CpuPlan", "HostKind", "InfraError", "PoolStats", "SandboxPool", "TaskError", "default_slots", "make_pool"]


class RunnerLost(Exception):
    pass


class _Conn:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.cpu: int | None = None  # where its last job ran: its processes are still there

    async def send(self, obj: Any) -> None:
        await framing.write_frame(self.writer, obj)

    async def recv(self) -> Any:
        try:
            return await framing.read_frame(self.reader)
        except framing.FrameError as exc:
            raise RunnerLost(f"bad frame from runner: {exc}") from None

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.writer.close()


class _Session:
    """One open session: the connection to its supervisor (a session slot of `runner`) and the
    code of its executes that completed without error, in order (what grading replays)."""

    def __init__(self, runner: _Runner, conn: _Conn, spec: SessionSpec) -> None:
        self.runner = runner
        self.conn = conn
        self.spec = spec
        self.cells: list[str] = []
        self.lost = ""  # why it is gone ("" while it lives)
        self.cpu_total_s = 0.0
        self.lock = asyncio.Lock()  # one call at a time


SESSION_START_S = 30.0  # for a session's interpreter to be ready (a loaded machine's fork of a supervisor)
SESSION_SLACK_S = 30.0  # beyond an execute's own limit and the runner's grace, before the runner counts as lost


HEALTH_MISSES = 3  # health ticks in a row without an answer before a live runner is replaced


class _Runner:
    def __init__(self, handle: RunnerHandle) -> None:
        self.handle = handle
        self.idle: collections.deque[_Conn] = collections.deque()
        self.in_flight = 0
        self.alive = True
        self.unanswered = 0  # health ticks in a row on which neither connection answered
        self.sessions = 0  # its session slots taken by open sessions
        self.spare: _Conn | None = None  # a session slot's supervisor, ready for the next open
        self.spare_task: asyncio.Task | None = None  # making the spare

    def drop_connections(self) -> None:
        for c in self.idle:
            c.close()
        self.idle.clear()
        if self.spare is not None:
            self.spare.close()
            self.spare = None


def _held(r: _Runner) -> int:
    """A runner's session slots in use: its sessions and its spare (made or on its way)."""
    making = r.spare_task is not None and not r.spare_task.done()
    return r.sessions + (1 if r.spare is not None or making else 0)


class _NoSlot(Exception):
    """The runner answered that every slot of that kind is busy (a slot still cleaning up)."""


def _no_slot(ev: Any) -> bool:
    return isinstance(ev, dict) and ev.get("event") == "infra_error" and "no free slot" in str(ev.get("message", ""))


class SandboxPool:
    """A JobRunner (`sandbox.api`) of one host and one runtime: one view for every job."""

    def __init__(self, host: Host, size: int = 2, per_runner: int = 2, *, health_interval: float = 2.0,
                 health_timeout: float = 5.0, no_runner_timeout: float = 30.0, pin_cpus: bool = True) -> None:
        if size < 1 or per_runner < 1:
            raise ValueError("size and per_runner must be >= 1")
        self.host = host
        self.size = size
        self.per_runner = per_runner
        self.health_interval = health_interval
        self.health_timeout = health_timeout  # for one ping's answer
        self.no_runner_timeout = no_runner_timeout
        # a dynamic host (socketdir) is not sized by us: its runners come and go on their own,
        # `discover()` adds them on each health tick and a dead one is dropped, not replaced
        self.dynamic = host.dynamic
        self._seen: set[str] = set()
        if self.dynamic:
            self.size = 0
        self.runners: list[_Runner | None] = [None] * self.size
        self._cond: asyncio.Condition | None = None
        self._replacing: set[int] = set()
        self._tasks: set[asyncio.Task] = set()
        self._health: asyncio.Task | None = None
        self._closed = False
        self.restarts = 0
        self.jobs_total = 0
        self.infra_errors = 0
        self._languages: list[str] | None = None  # as the runners report them (pong)
        self.cpus = CpuPlan(sorted(allowed_cpus()) if pin_cpus else [])
        self.sessions: dict[str, _Session] = {}
        self._call_waiters = 0  # session calls waiting for a share of their runner's job slots
        self.session_counts = {"opened": 0, "closed": 0, "lost": 0, "executes": 0}

    # ---------------------------------------------------------------- lifecycle
    @property
    def kind(self) -> str:
        return self.host.kind

    @property
    def default_runtime(self) -> str:
        return self.host.runtime

    @property
    def capacity(self) -> int:
        return self.size * self.per_runner

    @property
    def ready(self) -> bool:
        return any(r is not None and r.alive for r in self.runners)

    def stats(self) -> PoolStats:
        live = [r for r in self.runners if r is not None and r.alive]
        return PoolStats(
            kind=self.kind, size=self.size, live=len(live),
            in_flight=sum(r.in_flight for r in live), capacity=self.capacity,
            restarts=self.restarts, jobs_total=self.jobs_total, infra_errors=self.infra_errors,
        )

    def handles(self) -> list[RunnerHandle]:
        """The live runners (tests kill them to check recovery)."""
        return [r.handle for r in self.runners if r is not None and r.alive]

    def refusal(self, runtime: str) -> str | None:
        """One pool runs its host's runtime only (`sandbox.router.RuntimePools` routes runtimes)."""
        if runtime == self.default_runtime:
            return None
        return f"runtime {runtime!r} is not offered (available: {self.default_runtime})"

    def status(self) -> dict[str, RuntimeStatus]:
        return {self.default_runtime: {"default": True, "state": "ready" if self.ready else "down"}}

    def toolchain_status(self) -> dict[str, Any] | None:
        return None  # one view: no toolchain pool beside it

    async def start(self) -> None:
        self._cond = asyncio.Condition()
        if self.dynamic:
            await self._start_dynamic()
            return
        results = await asyncio.gather(*(self.host.start_runner(i) for i in range(self.size)), return_exceptions=True)
        for i, res in enumerate(results):
            if isinstance(res, BaseException):
                log.error("runner %d failed to start: %s", i, res)
                self._schedule_replace(i)
            else:
                self.runners[i] = _Runner(res)
        if not self.ready:
            await self.close()
            raise RunnerStartError(f"no {self.kind} runner started: {results[0]}")
        live = next((r for r in self.runners if r is not None), None)
        if live is not None:
            await self._answers(live)  # its pong says which languages the runners can run
        for r in self.runners:
            if r is not None:
                self._refill(r)
        self._health = asyncio.create_task(self._health_loop())
        log.info("sandbox pool ready: host=%s runners=%d per_runner=%d", self.kind, self.size, self.per_runner)

    async def _start_dynamic(self) -> None:
        deadline = time.monotonic() + self.host.start_timeout
        while True:
            await self._discover()
            if self.ready or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.25)
        if not self.ready:
            await self.close()
            raise RunnerStartError(f"no {self.kind} runner answered in {self.host.where()}")
        self._health = asyncio.create_task(self._health_loop())
        log.info("sandbox pool ready: host=%s runners=%d per_runner=%d (more join as they appear)",
                 self.kind, self.size, self.per_runner)

    async def _discover(self) -> None:
        """Add the runners a dynamic host finds that the pool does not hold yet."""
        known = {r.handle.socket_path for r in self.runners if r is not None and r.alive}
        try:
            handles = await self.host.discover(known)
        except Exception as exc:  # noqa: BLE001 - a failed scan must not stop the health loop
            log.warning("runner discovery failed: %s", exc)
            return
        if not handles or self._closed:
            return
        for h in handles:
            self.runners.append(_Runner(h))
            if h.socket_path in self._seen:
                self.restarts += 1  # a restarted container bound its socket again
            self._seen.add(h.socket_path)
            log.info("runner %s joined the pool", h.ident)
        self.size = len(self.runners)
        assert self._cond is not None
        async with self._cond:
            self._cond.notify_all()

    async def close(self) -> None:
        self._closed = True
        for s in self.sessions.values():
            s.conn.close()  # the runners' stop below ends their processes
        self.sessions.clear()
        if self._health:
            self._health.cancel()
        for t in list(self._tasks):
            t.cancel()
        for r in self.runners:
            if r is not None:
                r.drop_connections()
                with contextlib.suppress(Exception):
                    await self.host.stop_runner(r.handle)
        self.runners = [] if self.dynamic else [None] * self.size
        await self.host.close()

    async def __aenter__(self) -> SandboxPool:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -------------------------------------------------------------- scheduling
    async def _acquire(self, avoid: _Runner | None) -> _Runner:
        assert self._cond is not None, "pool not started"
        dead_since: float | None = None
        async with self._cond:
            while True:
                if self._closed:
                    raise InfraError("pool is closed")
                alive = [r for r in self.runners if r is not None and r.alive]
                free = [r for r in alive if r.in_flight < self.per_runner]
                if avoid is not None and len(free) > 1:
                    free = [r for r in free if r is not avoid] or free
                if free:
                    r = min(free, key=lambda x: x.in_flight)
                    r.in_flight += 1
                    return r
                # busy runners are worth waiting for; only a pool with none alive gives up
                if alive:
                    dead_since = None
                else:
                    dead_since = dead_since or time.monotonic()
                    if time.monotonic() - dead_since > self.no_runner_timeout:
                        raise InfraError("no live sandbox runner")
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._cond.wait(), 1.0)

    async def _release(self, r: _Runner) -> None:
        assert self._cond is not None
        async with self._cond:
            r.in_flight -= 1
            if self._call_waiters:  # a session call waits for this runner's share only: wake every waiter
                self._cond.notify_all()
            else:
                self._cond.notify()

    async def _connect(self, r: _Runner) -> _Conn:
        """The connection idle longest: its supervisor has finished cleaning up after its
        last job. Each runner keeps one connection beyond its job limit, so a job rarely
        waits for the cleanup of the job before it."""
        # open: the idle ones plus one per other job in flight (this job is counted in in_flight)
        if r.idle and (len(r.idle) > 1 or len(r.idle) + r.in_flight - 1 > self.per_runner):
            return r.idle.popleft()
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_unix_connection(r.handle.socket_path, limit=MAX_FRAME), 10
            )
        except (OSError, asyncio.TimeoutError) as exc:
            if r.idle:
                return r.idle.popleft()
            raise RunnerLost(f"cannot connect: {exc}") from None
        return _Conn(reader, writer)

    async def _exchange(self, msg: dict, budget_s: float, on_event: Callable[[dict], None] | None) -> tuple[dict, str]:
        """Send one job, retrying once on another runner if the first is lost."""
        last = ""
        avoid = None
        for attempt in range(2):
            r = await self._acquire(avoid)
            taken, cpu = False, None
            try:
                conn = await self._connect(r)
                taken, cpu = True, self.cpus.take(conn.cpu)
                if cpu is not None:
                    conn.cpu = cpu
                try:
                    sent = msg if cpu is None else {**msg, "cpu": cpu}
                    final = await _within(self._talk(conn, sent, on_event), budget_s)
                except BaseException:
                    conn.close()
                    raise
                if r.alive:
                    r.idle.append(conn)
                else:
                    conn.close()
                return final, r.handle.ident
            except (RunnerLost, OSError, asyncio.IncompleteReadError, asyncio.TimeoutError, ValueError) as exc:
                last = f"{type(exc).__name__}: {exc}"
                log.warning("runner %s lost a job (attempt %d): %s", r.handle.ident, attempt + 1, last)
                if not await self._answers(r):
                    self._mark_dead(r)
                avoid = r
            finally:
                if taken:
                    self.cpus.give(cpu)
                await self._release(r)
        self.infra_errors += 1
        raise InfraError(f"job failed on two runners: {last}")

    async def _talk(self, conn: _Conn, msg: dict, on_event: Callable[[dict], None] | None) -> dict:
        await conn.send(msg)
        while True:
            ev = await conn.recv()
            kind = ev.get("event")
            if kind in ("done", "exec_done"):
                return ev
            if kind in ("infra_error", "error"):
                raise RunnerLost(ev.get("message", kind))
            if on_event is not None:
                on_event(ev)

    # ------------------------------------------------------------------ public
    def languages(self) -> list[str]:
        """The languages this pool's runners build and run: what a runner said in its last
        health answer, else the host's word, else this machine's toolchains."""
        if self._languages is not None:
            return list(self._languages)
        said = self.host.languages()
        if said is not None:
            return list(said)
        return sorted(k for k, ok in languages.available().items() if ok)

    async def run(self, job: Job, on_event: Callable[[dict], None] | None = None) -> JobResult:
        """Run a job's tests; `on_event` sees each test's result as it finishes."""
        self._check_runtime(job.runtime)
        msg = run_message(job, stream=on_event is not None)
        n_guess = units.upper_bound(msg["tests"])
        budget = job.limits.timeout_s * job.limits.wall_factor * HARD_FACTOR * (n_guess + 3) + 30
        if job.language != "python":
            budget += job.limits.compile_timeout_s
        budget += taskprog.budget_s(msg["tests"], msg["limits"], n_guess)  # its checker or interactor
        self.jobs_total += 1
        done, ident = await self._exchange(msg, budget, on_event)
        if (why := refusal(done)) is not None:
            raise TaskError(why)
        return job_result(done, ident)

    def _check_runtime(self, runtime: str) -> None:
        """A job for another runtime never runs here without its packages (RuntimePools routes
        each runtime to a pool of its own)."""
        ours = self.host.runtime
        if runtime != ours:
            raise ValueError(f"runtime {runtime!r}: this pool runs {ours!r} (sandbox.router.RuntimePools routes runtimes)")

    async def execute(self, req: ExecRequest) -> ExecResult:
        self._check_runtime(req.runtime)
        msg = exec_message(req)
        budget = req.limits.timeout_s * req.limits.wall_factor * HARD_FACTOR + 30
        if req.language != "python":
            budget += req.limits.compile_timeout_s
        self.jobs_total += 1
        done, ident = await self._exchange(msg, budget, None)
        return exec_result(done, ident)

    # ---------------------------------------------------------------- sessions
    @property
    def session_capacity(self) -> int:
        return self.size * self.host.session_slots

    def session_stats(self) -> SessionStats:
        c = self.session_counts
        return SessionStats(capacity=self.session_capacity, live=sum(1 for s in self.sessions.values() if not s.lost),
                            opened_total=c["opened"], closed_total=c["closed"], lost_total=c["lost"],
                            executes_total=c["executes"])

    async def open_session(self, spec: SessionSpec) -> str:
        """A session in a session slot of the runner holding fewest, on its spare connection
        where it has one (a supervisor and an interpreter forked ahead: an open then costs the
        interpreter's load only). SessionsFull: every slot is taken."""
        self._check_runtime(spec.runtime)
        if self._closed:
            raise InfraError("pool is closed")
        msg = {"op": "session", "memory_mb": spec.memory_mb, "nproc": spec.nproc, "cpu_budget_s": spec.cpu_budget_s,
               "files": [f.model_dump() for f in spec.files]}
        slots = self.host.session_slots
        tried: set[int] = set()
        while True:
            alive = [r for r in self.runners if r is not None and r.alive and id(r) not in tried]
            usable = [r for r in alive if r.spare is not None or _held(r) < slots]
            if not usable:
                pending = [r.spare_task for r in alive if r.spare_task is not None and not r.spare_task.done()
                           and r.sessions < slots]
                if not pending:
                    raise SessionsFull(f"all {self.session_capacity} session slots are taken")
                await asyncio.wait(pending, timeout=SESSION_START_S)  # a spare on its way holds the last slot
                continue
            r = min(usable, key=lambda x: (x.sessions, x.spare is None))  # balanced first, then a ready spare
            r.sessions += 1
            making = r.spare_task
            if r.spare is None and making is not None and not making.done():
                # the spare on its way started before this open: it is ready sooner than a fresh one
                with contextlib.suppress(Exception):
                    await asyncio.wait([making], timeout=SESSION_START_S)
            spare, r.spare = r.spare, None
            try:
                conn = None
                if spare is not None:
                    with contextlib.suppress(RunnerLost, OSError, asyncio.IncompleteReadError, asyncio.TimeoutError):
                        conn = await _within(self._start_on(spare, msg), SESSION_START_S)
                if conn is None:  # no spare, or a stale one (its runner was replaced): a fresh connection
                    conn = await _within(self._open_on(r, msg), SESSION_START_S)
                break
            except SessionsFull:
                r.sessions -= 1
                tried.add(id(r))  # its slots are still being cleaned up: another runner, if any
            except (RunnerLost, OSError, asyncio.IncompleteReadError, asyncio.TimeoutError) as exc:
                r.sessions -= 1
                self.infra_errors += 1
                raise InfraError(f"runner {r.handle.ident} could not open a session: {exc}") from None
            except BaseException:
                r.sessions -= 1
                raise
            finally:
                self._refill(r)
        key = secrets.token_hex(16)
        self.sessions[key] = _Session(r, conn, spec)
        self.session_counts["opened"] += 1
        return key

    async def _start_on(self, conn: _Conn, msg: dict) -> _Conn:
        """Open the session on a connection to a session slot: `conn` once its interpreter is
        ready (the connection is closed on any other answer)."""
        try:
            await conn.send(msg)
            ev = await conn.recv()
        except BaseException:
            conn.close()
            raise
        kind = ev.get("event") if isinstance(ev, dict) else None
        if kind == "session_ready":
            return conn
        conn.close()
        if kind == "session_error":
            raise ValueError(f"session not opened: {ev.get('message', '')}")
        if _no_slot(ev):
            raise _NoSlot()
        raise RunnerLost(str(ev.get("message", kind)) if isinstance(ev, dict) else "bad answer")

    async def _open_on(self, r: _Runner, msg: dict) -> _Conn:
        """A fresh connection whose supervisor holds a ready session. A runner whose slots are all
        still cleaning up after closed sessions is asked again for a moment, then SessionsFull."""
        for attempt in range(40):
            reader, writer = await asyncio.open_unix_connection(session_socket(r.handle.socket_path), limit=MAX_FRAME)
            try:
                return await self._start_on(_Conn(reader, writer), msg)
            except _NoSlot:
                await asyncio.sleep(0.01 * (attempt + 1))
        raise SessionsFull(f"runner {r.handle.ident} has no free session slot")

    def _refill(self, r: _Runner) -> None:
        """Give `r` a spare session connection (made in the background) where a slot is free for it."""
        if (self._closed or not r.alive or r.spare is not None or r.sessions + 1 > self.host.session_slots
                or (r.spare_task is not None and not r.spare_task.done())):
            return
        task = r.spare_task = asyncio.create_task(self._make_spare(r))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _make_spare(self, r: _Runner) -> None:
        for attempt in range(20):
            if self._closed or not r.alive:
                return
            conn = None
            try:
                reader, writer = await asyncio.open_unix_connection(session_socket(r.handle.socket_path),
                                                                    limit=MAX_FRAME)
                conn = _Conn(reader, writer)
                ev = await framing.ping(reader, writer, self.health_timeout)
            except Exception:  # noqa: BLE001 - no spare: an open makes its own connection
                if conn is not None:
                    conn.close()
                return
            if isinstance(ev, dict) and ev.get("event") == "pong":
                if self._closed or not r.alive or r.spare is not None or r.sessions + 1 > self.host.session_slots:
                    conn.close()
                else:
                    r.spare = conn
                return
            conn.close()
            if not _no_slot(ev):
                return
            await asyncio.sleep(0.02 * (attempt + 1))  # its slots are still cleaning up after closed sessions

    def _session(self, key: str) -> _Session:
        s = self.sessions.get(key)
        if s is None:
            raise UnknownSession(key)
        return s

    async def session_execute(self, key: str, req: SessionExec) -> SessionExecResult:
        s = self._session(key)
        async with s.lock:
            if s.lost:
                return SessionExecResult(status="session_lost", message=s.lost, cpu_total_s=s.cpu_total_s)
            r = s.runner
            await self._acquire_on(r)  # a share of its runner's job slots while the code runs
            self.session_counts["executes"] += 1
            try:
                await s.conn.send({"op": "session_exec", "code": req.code, "stdin": req.stdin,
                                   "timeout_s": req.timeout_s})
                ev = await _within(s.conn.recv(), req.timeout_s + SESSION_SLACK_S)
                if not isinstance(ev, dict) or ev.get("event") != "session_done":
                    raise RunnerLost(f"unexpected answer {str(ev)[:200]}")
                res = SessionExecResult(**{k: v for k, v in ev.items() if k != "event"})
            except (RunnerLost, OSError, asyncio.IncompleteReadError, asyncio.TimeoutError, ValueError) as exc:
                res = SessionExecResult(status="session_lost", message=f"the session's runner was lost: {exc}"[:500],
                                        cpu_total_s=s.cpu_total_s)
                if not s.lost and not await self._answers(r):
                    self._mark_dead(r)  # replaced now, not at the next health tick
            finally:
                await self._release(r)
            s.cpu_total_s = res.cpu_total_s
            if res.status == "ok":
                s.cells.append(req.code)
            elif res.status == "session_lost":
                self._lose(s, res.message)
            return res

    def _lose(self, s: _Session, why: str) -> None:
        """The session's process is gone (its supervisor has ended, or the runner): its slot is free."""
        if not s.lost:
            s.lost = why or "session lost"
            s.conn.close()
            s.runner.sessions -= 1
            self.session_counts["lost"] += 1
            self._refill(s.runner)

    async def close_session(self, key: str) -> None:
        s = self.sessions.pop(key, None)
        if s is None:
            return
        self.session_counts["closed"] += 1
        if s.lost:
            return
        s.runner.sessions -= 1
        if s.lock.locked():  # a call runs: hanging up ends it, and the runner cleans up at once
            s.lost = "the session was closed"  # that call answers session_lost
            s.conn.close()
            return
        try:
            await s.conn.send({"op": "session_close"})
            await _within(s.conn.recv(), SESSION_SLACK_S)  # {"event": "session_closed"}: nothing of it is left
        except (RunnerLost, OSError, asyncio.IncompleteReadError, asyncio.TimeoutError):
            pass
        finally:
            s.conn.close()
            self._refill(s.runner)

    def session_program(self, key: str) -> str:
        s = self._session(key)
        return replay_program(s.spec.files, s.cells)

    async def _acquire_on(self, r: _Runner) -> None:
        """One of `r`'s job shares (as a job takes on it), waiting in the same queue as jobs."""
        assert self._cond is not None, "pool not started"
        async with self._cond:
            self._call_waiters += 1
            try:
                while r.alive and r.in_flight >= self.per_runner and not self._closed:
                    with contextlib.suppress(asyncio.TimeoutError):
                        await asyncio.wait_for(self._cond.wait(), 1.0)
            finally:
                self._call_waiters -= 1
            r.in_flight += 1

    # ---------------------------------------------------------------- recovery
    def _mark_dead(self, r: _Runner) -> None:
        if not r.alive:
            return
        r.alive = False
        r.drop_connections()
        if self.dynamic:
            # not ours to replace: forget it; discover() adds it back if its socket answers again
            if r in self.runners:
                self.runners.remove(r)
            self.size = len(self.runners)
            log.warning("runner %s left the pool", r.handle.ident)
            return
        idx = self.runners.index(r) if r in self.runners else r.handle.index
        self._schedule_replace(idx, r)

    def _schedule_replace(self, idx: int, old: _Runner | None = None) -> None:
        if self._closed or idx in self._replacing or not self.host.replaceable:
            return
        self._replacing.add(idx)
        task = asyncio.create_task(self._replace(idx, old))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _replace(self, idx: int, old: _Runner | None) -> None:
        try:
            if old is not None:
                with contextlib.suppress(Exception):
                    await self.host.stop_runner(old.handle)
            delay = 0.1
            while not self._closed:
                try:
                    handle = await self.host.start_runner(idx)
                    break
                except Exception as exc:  # noqa: BLE001 - keep trying; the pool reports not ready
                    log.error("restarting runner %d failed: %s", idx, exc)
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 5)
            else:
                return
            self.runners[idx] = _Runner(handle)
            self._refill(self.runners[idx])
            self.restarts += 1
            log.info("runner %d replaced by %s", idx, handle.ident)
            assert self._cond is not None
            async with self._cond:
                self._cond.notify_all()
        finally:
            self._replacing.discard(idx)

    async def _health_loop(self) -> None:
        while not self._closed:
            await asyncio.sleep(self.health_interval)
            for i, r in enumerate(list(self.runners)):
                if r is None:
                    self._schedule_replace(i)
                elif r.alive:
                    verdict = await self._healthy(r)
                    if verdict is None:
                        r.unanswered += 1  # alive by its host, slow to answer: a busy machine
                    else:
                        r.unanswered = 0
                    if verdict is False or r.unanswered >= HEALTH_MISSES:
                        log.warning("runner %s failed its health check", r.handle.ident)
                        self._mark_dead(r)
            if self.dynamic:
                await self._discover()

    async def _healthy(self, r: _Runner) -> bool | None:
        """True: it answered; False: its host says it is gone; None: alive by its host, but no
        connection answered in time (counted: only HEALTH_MISSES such ticks in a row replace it,
        so a loaded machine's slow fork of a fresh supervisor is never a dead runner)."""
        if not await self.host.is_alive(r.handle):
            return False
        if not r.idle:
            return os.path.exists(r.handle.socket_path) or r.in_flight > 0
        conn = r.idle.popleft()  # idle longest: the one whose cleanup is most likely over
        try:
            await asyncio.wait_for(self._ping(conn), self.health_timeout)
        except Exception:  # noqa: BLE001 - busy (a long cleanup) or broken: that connection only
            conn.close()
            return True if await self._answers(r, check_host=False) else None
        r.idle.append(conn)
        return True

    async def _answers(self, r: _Runner, check_host: bool = True) -> bool:
        """Whether the runner itself lives: its host says so and a fresh connection gets an
        answer (a pong, or the refusal of a runner with every slot busy)."""
        if check_host:
            with contextlib.suppress(Exception):
                if not await self.host.is_alive(r.handle):
                    return False
        conn = None
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_unix_connection(r.handle.socket_path, limit=MAX_FRAME), self.health_timeout)
            conn = _Conn(reader, writer)
            await asyncio.wait_for(self._ping(conn, refusal_ok=True), self.health_timeout)
            return True
        except Exception:  # noqa: BLE001
            return False
        finally:
            if conn is not None:
                conn.close()

    async def _ping(self, conn: _Conn, refusal_ok: bool = False) -> None:
        try:
            ev = await framing.ping(conn.reader, conn.writer)
        except framing.FrameError as exc:
            raise RunnerLost(f"bad frame from runner: {exc}") from None
        if ev.get("event") == "pong" or (refusal_ok and ev.get("event") == "infra_error"):
            said = ev.get("languages")
            if isinstance(said, list) and all(isinstance(x, str) for x in said):
                self._languages = sorted(said)[:50]  # what the runners see (their view, their image)
            return
        raise RunnerLost("bad pong")


class CpuPlan:
    """Which CPU each job's processes keep to. A job is a chain of a few dozen handoffs
    (supervisor, candidate, verdict process); when they share one CPU each handoff is a
    local switch, when the kernel spreads them each one wakes an idle CPU (on a virtual
    machine an exit to the hypervisor). Measured at two jobs on two cores: HumanEval
    172 -> 224 jobs/s (bwrap), 209 -> 228 (docker). Jobs are pinned only while the pool
    has no more jobs in flight than CPUs, each to a CPU none of the others holds; beyond
    that every new job runs unpinned and the kernel balances them (pinning half of them,
    or all of them balanced by count, was slower at four jobs on two cores).
    The CPUs are those this process may use: to run several pools on one machine, give
    each its own set (`taskset`, a container's cpuset) or turn pinning off."""

    def __init__(self, cpus: list[int]) -> None:
        self.n_cpus = len(cpus) if len(cpus) > 1 else 0  # one CPU: nothing to choose
        self.free = list(cpus) if self.n_cpus else []
        self.jobs = 0  # in flight, pinned or not

    def take(self, prefer: int | None = None) -> int | None:
        """For a job starting now: `prefer` (where the connection's processes already are)
        when it is free, else the CPU free longest; None when the pool has more jobs than
        CPUs (or every CPU is held). Each take is matched by one give."""
        self.jobs += 1
        if self.jobs > self.n_cpus or not self.free:
            return None
        if prefer is not None and prefer in self.free:
            self.free.remove(prefer)
            return prefer
        return self.free.pop(0)

    def give(self, cpu: int | None) -> None:
        self.jobs -= 1
        if cpu is not None:
            self.free.append(cpu)  # to the back: the next job takes the CPU idle longest


async def _within(coro: Any, seconds: float) -> Any:
    """`coro` under a deadline; asyncio.timeout where it exists (wait_for wraps the
    coroutine in a task of its own: two more event-loop turns per job)."""
    if hasattr(asyncio, "timeout"):
        async with asyncio.timeout(seconds):
            return await coro
    return await asyncio.wait_for(coro, seconds)  # Python 3.10


SLOTS_PER_CORE = 4
JOB_MEMORY_MB = 256


def memory_bytes() -> int:
    """The memory this process's jobs share: the cgroup's limit where one is set, else the
    machine's RAM (0 when neither can be read)."""
    try:
        with open("/sys/fs/cgroup/memory.max") as f:
            text = f.read().strip()
        if text.isdigit():
            return int(text)
    except OSError:
        pass
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return 0


def default_slots(cores: int | None = None, mem_bytes: int | None = None, job_memory_mb: int = JOB_MEMORY_MB,
                  per_core: int = SLOTS_PER_CORE) -> int:
    """Jobs the pool runs at once by default: min(per_core * cores, memory / job_memory_mb).
    More than one per core because a test's limit is CPU time (sandbox/runner/cpuclock.py): a
    job that sleeps, blocks or waits for its turn on a core costs no CPU and its verdict does
    not change, so the pool can overlap them; memory is what really bounds it (a typical job's
    processes hold well under job_memory_mb resident; its address-space cap is per process)."""
    cores = cores or len(allowed_cpus()) or os.cpu_count() or 2
    mem = memory_bytes() if mem_bytes is None else mem_bytes
    by_memory = mem // (job_memory_mb << 20) if mem > 0 else per_core * cores
    return max(1, min(per_core * cores, by_memory))


DEFAULT_MAX_SESSIONS = 8


def make_pool(kind: HostKind = "auto", size: int | None = None, per_runner: int | None = None,
              pin_cpus: bool | None = None, slots: int | None = None, job_memory_mb: int = JOB_MEMORY_MB,
              max_sessions: int = DEFAULT_MAX_SESSIONS, **host_options: Any) -> SandboxPool:
    """A pool on the named host; `auto` takes docker when an engine and our image answer.
    `slots` is the jobs it runs at once (default: `default_slots`), spread over `size`
    runners (default: one per core, at most 8) of `per_runner` jobs each; `per_runner`
    given alone fixes the capacity at size * per_runner.
    `max_sessions` (sandbox.sessions) are held at once beside the job slots, spread over the runners
    (each runner gets that share of session slots: uids, scratch and /dev/shm of their own).
    `pin_cpus` (see CpuPlan) defaults to on where the pool starts its own runners and off
    for socketdir, whose runners other reward servers on the same machine may share.
    One pool is one view: bwrap's `languages=True` puts the toolchains in every runner's (default:
    the interpreter's only); sending each job to a pool by its language is
    `sandbox.router.RuntimePools`' (what the server uses); the host is `sandbox.hosts.make_host`'s."""
    cpus = os.cpu_count() or 2
    size = size or max(1, min(cpus, 8))
    per_runner_given = per_runner
    if per_runner is None:
        total = slots or default_slots(job_memory_mb=job_memory_mb)
        per_runner = max(1, -(-total // size))
    kind = resolve_kind(kind, host_options.get("image"))
    if kind == "socketdir":
        # runners join and leave as the orchestrator scales them; `size` is what answers.
        # They run with --slots 8: 4 jobs each leaves room for health probes.
        size = 1
        per_runner = per_runner_given or 4
    if kind != "socketdir" and max_sessions > 0:
        host_options.setdefault("session_slots", -(-max_sessions // size))  # spread over the runners
        most = uidlease.BLOCK // 2 - (per_runner + 3)  # a runner's uid block: 2 uids a slot (make_host: +3 job slots)
        if host_options["session_slots"] > most:
            raise ValueError(f"max_sessions={max_sessions} over {size} runners is {host_options['session_slots']} "
                             f"session slots a runner; at most {most}: raise size or lower max_sessions")
    host = make_host(kind, per_runner=per_runner, job_memory_mb=job_memory_mb, **host_options)
    if pin_cpus is None:
        pin_cpus = kind != "socketdir"
    return SandboxPool(host, size=size, per_runner=per_runner, pin_cpus=pin_cpus)
