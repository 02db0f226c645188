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

GEN = struct.Struct("<q")  # a sequence lock: odd while the verdict process is writing
BODY = struct.Struct("<qd")  # current test index (-1 none), its start (monotonic clock)
HEAD_SIZE = 32
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
    def _write(self, index: int, when: float) -> None:
        gen = GEN.unpack_from(self.mem)[0]
        GEN.pack_into(self.mem, 0, gen + 1)
        BODY.pack_into(self.mem, GEN.size, index, when)
        GEN.pack_into(self.mem, 0, gen + 2)

    def begin(self, index: int) -> None:
        self._write(index, time.monotonic())

    def finish(self, index: int, status: str) -> None:
        if 0 <= index < MAX_TESTS:
            self.mem[HEAD_SIZE + index] = CODE.get(status, CODE["error"])
        self._write(-1, time.monotonic())

    # --- supervisor side
    def reset(self, n_tests: int) -> None:
        """Only while no verdict process is writing (between its jobs, or after its death)."""
        GEN.pack_into(self.mem, 0, 0)
        BODY.pack_into(self.mem, GEN.size, -1, 0.0)
        k = min(n_tests, MAX_TESTS)
        self.mem[HEAD_SIZE : HEAD_SIZE + k] = _ZEROS[:k]

    def current(self) -> tuple[int, float]:
        """(index, started) of the running test, or (-1, when the last one ended)."""
        for _ in range(10_000):
            gen = GEN.unpack_from(self.mem)[0]
            if gen % 2:
                continue
            index, started = BODY.unpack_from(self.mem, GEN.size)
            if GEN.unpack_from(self.mem)[0] == gen:
                return index, started
        return -1, time.monotonic()  # a writer killed mid-store: treat as between tests

    def status(self, index: int) -> str:
        if not 0 <= index < MAX_TESTS:
            return ""
        code = self.mem[HEAD_SIZE + index]
        return STATUSES[code] if code < len(STATUSES) else "error"
