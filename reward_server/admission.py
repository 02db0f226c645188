"""Bounded admission: a fixed number of jobs run at once, a fixed number wait; beyond that
the server refuses the whole request up front (429 + Retry-After) instead of queueing
without bound. Work that was accepted is always finished, also during shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import math
import time

# Set by the gateway for each request: fires when its client disconnects.
client_gone: contextvars.ContextVar[asyncio.Event | None] = contextvars.ContextVar("client_gone", default=None)


class ClientGone(Exception):
    """The request's client disconnected while its job waited for a slot: the job never starts."""


class QueueTimeout(Exception):
    """The job waited for a slot past the client's `queue_timeout_s`: it never starts (the
    client said an answer that late is no use to it; the item is `queue_timeout`)."""

    def __init__(self, waited_s: float) -> None:
        super().__init__(f"waited {waited_s:.3f} s for a sandbox slot, past queue_timeout_s")
        self.waited_s = waited_s


class Wait:
    """How long a job waited for its slot (`queue_s`), known once it holds one."""

    __slots__ = ("queue_s",)

    def __init__(self) -> None:
        self.queue_s = 0.0


class Admission:
    def __init__(self, max_inflight: int, max_queued: int, min_retry_after_s: float = 1.0):
        self.max_inflight = max_inflight
        self.limit = max_inflight + max_queued
        self.min_retry_after_s = min_retry_after_s
        self.admitted = 0  # accepted, not yet answered
        self.running = 0  # holding a slot
        self.draining = False
        self.answered = 0  # jobs that ran to an answer
        self.cancelled = 0  # accepted jobs cut off before their answer (shutdown past its grace)
        self.queue_timeouts = 0  # jobs that waited past their client's queue_timeout_s (never started)
        self._slots = asyncio.Semaphore(max_inflight)
        self._idle = asyncio.Event()
        self._idle.set()
        self._job_s = 0.05  # EWMA of one job's time in a slot, for Retry-After

    @property
    def queued(self) -> int:
        return max(0, self.admitted - self.running)

    def try_admit(self, n: int) -> bool:
        """Accept n jobs or none. A request larger than the whole limit is still accepted
        when nothing else is admitted, so that no valid request is refused forever."""
        if self.draining:
            return False
        if self.admitted > 0 and self.admitted + n > self.limit:
            return False
        self.admitted += n
        self._idle.clear()
        return True

    def release(self, n: int = 1, cancelled: bool = False) -> None:
        if cancelled:
            self.cancelled += n
        else:
            self.answered += n
        self.admitted -= n
        if self.admitted <= 0:
            self.admitted = 0
            self._idle.set()

    async def _acquire(self) -> None:
        """A slot, or ClientGone when the request's client leaves first (a job whose answer
        nobody will read must not hold the queue up for those still waiting)."""
        gone = client_gone.get()
        if gone is None or not self._slots.locked():
            await self._slots.acquire()
            return
        if gone.is_set():
            raise ClientGone
        acq = asyncio.ensure_future(self._slots.acquire())
        left = asyncio.ensure_future(gone.wait())
        try:
            await asyncio.wait({acq, left}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:  # cancelled while waiting: never keep a slot nobody will release
            left.cancel()
            if acq.done() and not acq.cancelled():
                self._slots.release()
            else:
                acq.cancel()
            raise
        left.cancel()
        if acq.done() and not acq.cancelled():
            return
        acq.cancel()
        raise ClientGone

    @contextlib.asynccontextmanager
    async def slot(self, queue_timeout_s: float | None = None):
        """Hold a job slot; yields a `Wait` with the time spent queueing for it. Past
        `queue_timeout_s` of waiting: QueueTimeout, and the job never starts."""
        wait = Wait()
        t_in = time.perf_counter()
        if queue_timeout_s is None:
            await self._acquire()
        else:
            try:
                await asyncio.wait_for(self._acquire(), queue_timeout_s)
            except asyncio.TimeoutError:
                self.queue_timeouts += 1
                raise QueueTimeout(max(time.perf_counter() - t_in, queue_timeout_s)) from None
        wait.queue_s = time.perf_counter() - t_in
        try:
            self.running += 1
            t0 = time.perf_counter()
            try:
                yield wait
            finally:
                self.running -= 1
                self._job_s = 0.9 * self._job_s + 0.1 * (time.perf_counter() - t0)
        finally:
            self._slots.release()

    def retry_after(self, n: int = 1) -> int:
        """Seconds until roughly n more jobs would fit: the backlog divided by the throughput."""
        backlog = max(0, self.admitted + n - self.limit) + self.queued
        est = backlog * self._job_s / max(1, self.max_inflight)
        return max(math.ceil(self.min_retry_after_s), min(60, math.ceil(est)))

    def begin_drain(self) -> None:
        """Refuse new work from now on (503); what was accepted runs on."""
        self.draining = True

    async def drain(self, timeout: float) -> bool:
        """Stop accepting; wait until no accepted job is left (answered or cancelled)."""
        self.draining = True
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
            return True
        except asyncio.TimeoutError:
            return False
