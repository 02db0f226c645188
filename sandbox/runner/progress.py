"""Test progress shared between the verdict process and its supervisor through memory.

The supervisor keeps each test's wall clock, but waking it with a message at the start and
end of every test costs more than many tests do. The verdict process instead writes
which test runs since when, and each finished test's status, into a shared page; the
supervisor reads it only when a deadline may have passed or the verdict process died
(then the statuses it wrote survive it). Only the verdict process, trusted code running the
tests, writes here; candidates never see this memory.
"""

from __future__ import annotations

import mmap
import struct
import time

from .cpuclock import process_cpu_s

GEN = struct.Struct("<q")  # a sequence lock: odd while the verdict process is writing
# current test index (-1 none), its start (monotonic clock), the candidate's CPU seconds then
# (-1: not known): a test's time limit is the CPU its candidate used since it began (cpuclock.py)
BODY = struct.Struct("<qdd")
CAND = struct.Struct("<q")  # the pid of the candidate the verdict process holds (0: none); the supervisor writes it
CAND_AT = GEN.size + BODY.size
HEAD_SIZE = 48
STATUSES = ("", "passed", "failed", "error", "timeout", "memory", "output_limit", "aborted", "protocol_error")
CODE = {name: i for i, name in enumerate(STATUSES)}
SIZE = 1 << 16
MAX_TESTS = SIZE - HEAD_SIZE
_ZEROS = memoryview(bytes(MAX_TESTS))  # reset source, made once: a reset happens every job


class Progress:
    """A shared anonymous mapping: create it before forking the verdict process."""

    def __init__(self) -> None:
        self.mem = mmap.mmap(-1, SIZE)  # MAP_SHARED: both sides of a fork see the writes

    # --- verdict side
    def _write(self, index: int, when: float, cpu: float) -> None:
        gen = GEN.unpack_from(self.mem)[0]
        GEN.pack_into(self.mem, 0, gen + 1)
        BODY.pack_into(self.mem, GEN.size, index, when, cpu)
        GEN.pack_into(self.mem, 0, gen + 2)

    def begin(self, index: int) -> None:
        pid = CAND.unpack_from(self.mem, CAND_AT)[0]
        cpu = process_cpu_s(pid) if pid > 0 else None
        self._write(index, time.monotonic(), -1.0 if cpu is None else cpu)

    def finish(self, index: int, status: str) -> None:
        if 0 <= index < MAX_TESTS:
            self.mem[HEAD_SIZE + index] = CODE.get(status, CODE["error"])
        self._write(-1, time.monotonic(), -1.0)

    # --- supervisor side
    def reset(self, n_tests: int) -> None:
        """Only while no verdict process is writing (between its jobs, or after its death)."""
        GEN.pack_into(self.mem, 0, 0)
        BODY.pack_into(self.mem, GEN.size, -1, 0.0, -1.0)
        CAND.pack_into(self.mem, CAND_AT, 0)
        k = min(n_tests, MAX_TESTS)
        self.mem[HEAD_SIZE : HEAD_SIZE + k] = _ZEROS[:k]

    def set_candidate(self, pid: int) -> None:
        """Which candidate the verdict process is handed next (0: none): it reads that
        process's CPU clock at the start of each test."""
        CAND.pack_into(self.mem, CAND_AT, max(0, pid))

    def current(self) -> tuple[int, float]:
        """(index, started) of the running test, or (-1, when the last one ended)."""
        index, started, _cpu = self.current_cpu()
        return index, started

    def current_cpu(self) -> tuple[int, float, float | None]:
        """(index, started, the candidate's CPU seconds then or None) of the running test."""
        for _ in range(10_000):
            gen = GEN.unpack_from(self.mem)[0]
            if gen % 2:
                continue
            index, started, cpu = BODY.unpack_from(self.mem, GEN.size)
            if GEN.unpack_from(self.mem)[0] == gen:
                return index, started, (cpu if cpu >= 0 else None)
        return -1, time.monotonic(), None  # a writer killed mid-store: treat as between tests

    def status(self, index: int) -> str:
        if not 0 <= index < MAX_TESTS:
            return ""
        code = self.mem[HEAD_SIZE + index]
        return STATUSES[code] if code < len(STATUSES) else "error"
