"""A test's time limit is the candidate's CPU time, as competitive judges count it.

Wall-clock limits make a verdict depend on what else the machine does: a correct program
that needs 0.5 s of CPU fails a 2.5 s limit when fourteen processes share two cores. So the
limit is on the CPU the candidate's processes used for that test (user + system), read from
the kernel, and the wall clock is only a backstop (`wall_factor` times the limit) for a
program that sleeps or blocks. Reading the clock is cheap (one clock_gettime on the
process's CPU clock, ~0.3 us), and it is read only once the wall clock has passed the CPU
limit (a program cannot have used more CPU than wall time per thread), then again each time
it could have reached the limit at full speed.
"""

from __future__ import annotations

import time

from . import procfs

MIN_STEP_S = 0.01  # re-arm at least this far ahead: a starved program gains CPU slowly


def process_clock(pid: int) -> int:
    """The clock id of `pid`'s process CPU clock (all its threads, user + system, in ns):
    the kernel's CPUCLOCK_SCHED encoding, readable for any process in our pid namespace."""
    return ((~pid) << 3) | 2


def process_cpu_s(pid: int) -> float | None:
    """CPU seconds `pid` (all its threads) used so far; None once it is gone."""
    if pid <= 0:
        return None
    try:
        return time.clock_gettime(process_clock(pid))
    except (OSError, OverflowError):  # gone, or no pid at all (beyond pid_max)
        return None


def tree_cpu_s(pid: int, uid: int | None, since: float | None = None, children_reaped: bool = True) -> float | None:
    """CPU seconds of a job's processes: the candidate `pid`, the children it reaped (where
    `children_reaped`), and (when every job has a uid of its own) the other processes of its
    uid still alive, those started at or after `since` (a monotonic time) only where given.
    None once the candidate is gone."""
    own = process_cpu_s(pid)
    if own is None:
        return None
    total = own
    if children_reaped:
        st = procfs.stat(pid)
        if st is not None:
            total += st.children_cpu_s
    if uid is None:
        return total
    born_after = None if since is None else since + _boot_offset() - 1 / procfs.CLK_TCK
    for other in procfs.owned_by((uid,), skip=pid):
        st = procfs.stat(other)
        if st is not None and (born_after is None or st.start_s >= born_after):
            total += st.cpu_s
    return total


def _boot_offset() -> float:
    """CLOCK_BOOTTIME minus CLOCK_MONOTONIC (process start times count from boot)."""
    try:
        return time.clock_gettime(time.CLOCK_BOOTTIME) - time.monotonic()
    except (AttributeError, OSError):
        return 0.0


class TestClock:
    """One test's (or one load's) limits: `limit_s` of CPU; a wall-clock backstop of
    `wall_factor` times that for a program that sleeps or blocks, not counting the time it
    waited for a CPU (a starved computation is not a sleeper: it meets the CPU limit); and a
    hard cap of HARD_FACTOR backstops in all, whatever the machine does. `check` says
    whether one has passed and when to look again."""

    __test__ = False  # not a pytest class

    def __init__(self, limit_s: float, wall_factor: float, started: float, cpu_at_start: float | None) -> None:
        self.limit_s = limit_s
        self.wall_s = limit_s * max(1.0, wall_factor)
        # wall_factor 1 is a plain wall-clock limit (SandboxFusion's run_timeout: its clients
        # size their read timeouts on it), with no allowance for waiting for a CPU
        self.hard_s = self.wall_s * (HARD_FACTOR if wall_factor > 1 else 1)
        self.started = started
        self.cpu_at_start = cpu_at_start
        self.used: float | None = None  # CPU seconds at the last check, where it could be read
        self.waited = 0.0  # seconds it waited for a CPU since the first check
        self._delay0: float | None = None

    @property
    def first_check(self) -> float:
        """Before this, neither limit can have passed (CPU time <= wall time per thread)."""
        return self.started + self.limit_s

    def check(self, now: float, cpu_now: float | None, delay_now: float | None = None) -> tuple[str, float]:
        """("cpu" | "wall" | "hard" | "", when to look again). `delay_now`: the process's run
        queue delay so far (procfs.run_delay_s), counted from the first check on. Without a CPU
        reading (the process is gone, or the clock was not readable at the start) only the
        wall clock counts."""
        if now < self.first_check:
            return "", self.first_check
        used = None if cpu_now is None or self.cpu_at_start is None else cpu_now - self.cpu_at_start
        if used is not None:
            self.used = used
        if used is not None and used >= self.limit_s:
            return "cpu", now
        if now >= self.started + self.hard_s:
            return ("hard" if self.hard_s > self.wall_s else "wall"), now
        if delay_now is not None:
            if self._delay0 is None:
                self._delay0 = delay_now
            self.waited = max(0.0, delay_now - self._delay0)
        off = now - self.started - self.waited  # wall time it did not spend waiting for a CPU
        if off >= self.wall_s:
            return "wall", now
        step = self.wall_s - off
        if used is not None:
            step = min(step, self.limit_s - used)
        return "", min(self.started + self.hard_s, now + max(step, MIN_STEP_S))

    def message(self, which: str) -> str:
        """What a test's result says about the limit that ended it."""
        if which == "cpu":
            return f"CPU time limit exceeded ({self.limit_s:g} s)"
        used = "" if self.used is None else f"; it used {self.used:.2f} s of CPU"
        if which == "hard":
            return f"wall-clock limit exceeded ({self.hard_s:g} s in all, the hard cap of a {self.limit_s:g} s CPU limit{used})"
        why = "the program slept or waited" if not self.used else f"it used {self.used:.2f} s of CPU"
        waited = f", not counting {self.waited:.1f} s waiting for a CPU" if self.waited >= 0.05 else ""
        return f"wall-clock limit exceeded ({self.wall_s:g} s{waited}, the backstop of a {self.limit_s:g} s CPU limit: {why})"


HARD_FACTOR = 4  # the hard cap, in wall-clock backstops: bounds a job whatever the load


def wall_factor_of(lim: dict) -> float:
    """The job's wall-clock backstop factor (a job message from an older server has none)."""
    try:
        return max(1.0, float(lim.get("wall_factor", DEFAULT_WALL_FACTOR)))
    except (TypeError, ValueError):
        return DEFAULT_WALL_FACTOR


DEFAULT_WALL_FACTOR = 3.0
