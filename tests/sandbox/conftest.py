from __future__ import annotations

import contextlib
import os

import pytest_asyncio

from sandbox import ExecRequest, Job, Limits, make_pool
from sandbox.runner.uidlease import UID_HI, UID_LO
from tests.conftest import kind_params


@pytest_asyncio.fixture(scope="session", params=kind_params())
async def pool(request):
    p = make_pool(request.param, size=2, per_runner=2)
    await p.start()
    yield p
    await p.close()


def job(program: str, tests: dict, **limits) -> Job:
    lim = {"timeout_s": 2.0, "memory_mb": 256}
    lim.update(limits)
    return Job(program=program, tests=tests, limits=Limits(**lim))


CANARY = job("def inc(x):\n    return x + 1\n", {"kind": "assert", "asserts": ["assert inc(1) == 2", "assert inc(5) == 6"]})


async def assert_still_serves(pool) -> None:
    """After an attack, the pool must still grade an honest program correctly."""
    r = await pool.run(CANARY)
    assert (r.syntax_ok, r.runs, r.passed, r.total) == (True, True, 2, 2), r


@contextlib.asynccontextmanager
async def no_runner_lost(pool):
    """Around an attack: the same runners serve afterwards, none replaced, no infra error."""
    before = (sorted(h.ident for h in pool.handles()), pool.restarts, pool.infra_errors)
    yield
    await assert_still_serves(pool)
    after = (sorted(h.ident for h in pool.handles()), pool.restarts, pool.infra_errors)
    assert after == before, (before, after)


# A secret in the server's environment: no job may ever see it.
SECRET_ENV = "VERIREWARD_TEST_SECRET"
os.environ.setdefault(SECRET_ENV, "env-secret-" + os.urandom(8).hex())


async def probe(pool, program: str, timeout_s: float = 5.0, **kw) -> str:
    """Run a program once and return what it printed (stdout then stderr)."""
    r = await pool.execute(ExecRequest(program=program, limits=Limits(timeout_s=timeout_s, memory_mb=256), **kw))
    return r.stdout + r.stderr


def host_job_processes(uid_lo: int = UID_LO, uid_hi: int = UID_HI) -> list[int]:
    """Processes on this machine left from jobs (containers share the host's uids): any
    process of a candidate uid (uid_lo + 2*slot), and any process of a verdict uid (one
    above) other than a supervisor's one long-lived verdict process: a direct child of a
    root `vr-super-N` process (a candidate can change neither its uid nor its parent).
    Several runners (and pools of other tests) may be alive, each with its own verdicts."""
    found = []
    verdicts: dict[int, list[int]] = {}  # parent pid -> verdict-uid children
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                uid = os.stat(f"/proc/{name}").st_uid
                with open(f"/proc/{name}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            state, ppid = fields[0], int(fields[1])
            if not uid_lo <= uid < uid_hi or state in ("Z", "X"):
                continue
            if (uid - uid_lo) % 2 == 0:
                if not _in_session_slot(ppid):
                    found.append(int(name))
            else:
                verdicts.setdefault(ppid, []).append(int(name))
    for ppid, pids in verdicts.items():
        legit = _uid_of(ppid) == 0 and _comm_of(ppid).startswith("vr-super") and len(pids) == 1
        if not legit:
            found += pids
    return found


def _in_session_slot(ppid: int) -> bool:
    """Whether a process descends from a runner's session slot (`vr-slot-K` with K at or past
    the runner's `--slots`): a live session's interpreter, which lives between calls by design
    (open sessions of other tests' servers), not a job's leftover."""
    pid = ppid
    for _ in range(4):
        comm = _comm_of(pid)
        if comm.startswith("vr-slot-") and comm[8:].isdigit() and _uid_of(pid) == 0:
            runner = _parent_of(pid)
            if _comm_of(runner) != "vr-runner":
                return False
            try:
                with open(f"/proc/{runner}/cmdline", "rb") as f:
                    argv = f.read().decode(errors="replace").split("\0")
                slots = int(argv[argv.index("--slots") + 1])
            except (OSError, ValueError, IndexError):
                return False
            return int(comm[8:]) >= slots
        pid = _parent_of(pid)
        if pid <= 1:
            return False
    return False


def _parent_of(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def _comm_of(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def _uid_of(pid: int) -> int:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return -1
