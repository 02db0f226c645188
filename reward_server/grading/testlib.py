"""testlib.h for checkers and interactors: the operator's header, sent with the jobs that need it.

testlib (github.com/MikeMirzayanov/testlib) is third-party code: this project never ships it.
An operator names the file (`REWARD_SERVER_TESTLIB_HEADER`); a job whose checker or interactor
includes it carries its text to the runner, which writes it beside that program's source for
the compile (its hash is part of the compile cache's key). The same on every host: nothing is
mounted. A program that includes it where none is configured is the task's error, said so by
the runner (docs/JUDGING.md).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from sandbox.jobs import Job, StdioTests
from sandbox.runner.taskprog import needs_testlib

MAX_BYTES = 4 << 20  # testlib.h is ~250 KB


@functools.lru_cache(maxsize=4)
def _read(path: str, mtime_ns: int, size: int) -> str:
    with open(path, "rb") as f:
        return f.read(MAX_BYTES).decode("utf-8", "surrogateescape")


def header(path: Path | None) -> str | None:
    """The header's text (read once per version of the file), or None where none is configured."""
    if path is None:
        return None
    st = os.stat(path)
    return _read(str(path), st.st_mtime_ns, st.st_size)


def attach(job: Job, path: Path | None) -> Job:
    """`job` carrying the header where its checker or interactor includes testlib.h (and one is configured)."""
    tests = job.tests
    if not isinstance(tests, StdioTests) or path is None:
        return job
    progs = [p for p in (tests.checker, getattr(tests, "interactor", None)) if p is not None]
    if not any(needs_testlib(p.source) for p in progs):
        return job
    return job.model_copy(update={"testlib_h": header(path)})
