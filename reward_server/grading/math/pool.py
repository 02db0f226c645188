"""A small pool of killable, pre-warmed worker processes (thread-safe, asyncio-friendly)."""

from __future__ import annotations

import asyncio
import os
import queue
import select
import subprocess
import sys
import threading
import time
from pathlib import Path

from sandbox.runner import framing

from .options import MathGrade, MathOptions

_ROOT = str(Path(__file__).resolve().parents[3])
_GRACE_S = 0.15
_START_TIMEOUT_S = 60.0


class _Worker:
    def __init__(self) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = _ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env.pop("PYTHONSTARTUP", None)
        self.proc = subprocess.Popen(
            [sys.executable, "-u", "-m", "reward_server.grading.math.worker"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env=env, cwd=_ROOT, close_fds=True, start_new_session=True,
        )
        self.rfd = self.proc.stdout.fileno()
        self.wfd = self.proc.stdin.fileno()

    def wait_ready(self, timeout: float) -> bool:
        msg = self._recv(timeout)
        return msg == "r"

    def _recv(self, timeout: float):
        """The worker's next frame (sandbox.runner.framing's one header rule), or None when it
        did not come in time."""
        deadline = time.monotonic() + timeout
        buf = b""
        need = framing.HEADER.size
        header_done = False
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            r, _, _ = select.select([self.rfd], [], [], left)
            if not r:
                return None
            chunk = os.read(self.rfd, max(need - len(buf), 1))
            if not chunk:
                raise EOFError("worker closed its pipe")
            buf += chunk
            if not header_done and len(buf) >= need:
                need = framing.body_size(buf, framing.MAX_FRAME)
                buf = buf[framing.HEADER.size :]
                header_done = True
            if header_done and len(buf) >= need:
                return framing.decode_body(buf[:need])

    def send(self, obj) -> None:
        view = memoryview(framing.encode_frame(obj))
        while view:
            n = os.write(self.wfd, view)
            view = view[n:]

    def kill(self) -> None:
        try:
            self.proc.kill()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except OSError:
                pass


class WorkerPool:
    """N worker processes; `run` is blocking and safe to call from any thread."""

    def __init__(self, workers: int = 2) -> None:
        self.size = max(1, int(workers))
        self._idle: queue.Queue[_Worker] = queue.Queue()
        self._all: set[_Worker] = set()
        self._lock = threading.Lock()
        self._started = False
        self._closed = False
        self.replaced = 0

    def start(self) -> None:
        with self._lock:
            if self._started:
                return
            self._started = True
            self._closed = False
        ws = [_Worker() for _ in range(self.size)]
        for w in ws:
            with self._lock:
                self._all.add(w)
            if w.wait_ready(_START_TIMEOUT_S):
                self._idle.put(w)
            else:
                self._discard(w)
                self._spawn_async()

    def _discard(self, w: _Worker) -> None:
        with self._lock:
            self._all.discard(w)
        w.kill()

    def _spawn_async(self) -> None:
        def go():
            if self._closed:
                return
            w = _Worker()
            with self._lock:
                self._all.add(w)
            try:
                ok = w.wait_ready(_START_TIMEOUT_S)
            except (EOFError, OSError):
                ok = False
            if ok and not self._closed:
                self._idle.put(w)
            else:
                self._discard(w)
                if not self._closed:
                    time.sleep(0.5)
                    self._spawn_async()

        self.replaced += 1
        threading.Thread(target=go, daemon=True, name="math-worker-spawn").start()

    def run(self, completion: str, answer: str, options: MathOptions) -> MathGrade:
        if not self._started:
            self.start()
        if self._closed:
            raise RuntimeError("math grader is closed")
        w = self._idle.get()
        t0 = time.perf_counter()
        opts = options.model_dump()
        try:
            w.send({"completion": completion, "answer": answer, "options": opts})
            res = w._recv(options.timeout_s + _GRACE_S)
        except (EOFError, OSError, ValueError):
            self._discard(w)
            self._spawn_async()
            return MathGrade.failed("worker_error", "worker died", time.perf_counter() - t0)
        if res is None:
            self._discard(w)
            self._spawn_async()
            return MathGrade.failed("timeout", f"over {options.timeout_s:g}s; worker replaced", time.perf_counter() - t0)
        self._idle.put(w)
        res["time_s"] = time.perf_counter() - t0
        return MathGrade.model_validate(res)

    def close(self) -> None:
        self._closed = True
        with self._lock:
            ws = list(self._all)
            self._all.clear()
        for w in ws:
            w.kill()
        while not self._idle.empty():
            try:
                self._idle.get_nowait()
            except queue.Empty:
                break
        self._started = False

    def pids(self) -> list[int]:
        with self._lock:
            return [w.proc.pid for w in self._all]


class MathGrader:
    """Async front of the worker pool: `await grader.grade(completion, answer)`."""

    def __init__(self, workers: int = 2, options: MathOptions | None = None) -> None:
        self.options = options or MathOptions()
        self.pool = WorkerPool(workers)

    async def start(self) -> None:
        await asyncio.to_thread(self.pool.start)

    async def close(self) -> None:
        await asyncio.to_thread(self.pool.close)

    async def __aenter__(self) -> MathGrader:
        await self.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def grade(self, completion: str, answer: str, options: MathOptions | None = None) -> MathGrade:
        return await asyncio.to_thread(self.pool.run, completion, answer, options or self.options)

    async def grade_many(self, pairs: list[tuple[str, str]], options: MathOptions | None = None) -> list[MathGrade]:
        return list(await asyncio.gather(*(self.grade(c, a, options) for c, a in pairs)))

    def grade_sync(self, completion: str, answer: str, options: MathOptions | None = None) -> MathGrade:
        """Blocking variant, callable from any thread (not from inside the event loop)."""
        return self.pool.run(completion, answer, options or self.options)


_default_pool: WorkerPool | None = None
_default_lock = threading.Lock()


def grade_sync(completion: str, answer: str, options: MathOptions | None = None) -> MathGrade:
    """Grade one completion in an isolated worker of a process-wide default pool (2 workers)."""
    global _default_pool
    with _default_lock:
        if _default_pool is None:
            _default_pool = WorkerPool(int(os.environ.get("MATH_GRADER_WORKERS", "2")))
        pool = _default_pool
    return pool.run(completion, answer, options or MathOptions())
