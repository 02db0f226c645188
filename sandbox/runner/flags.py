"""What a candidate tried: the reward-hack telemetry vocabulary, one place for every layer.

The runner (supervisor and verdict process) adds a kind to a job's `flags` when it sees the
candidate do it; the server returns them as `detail.flags` and counts them in /metrics
(`reward_server_hack_attempts_total{kind=...}`); the trainer logs the flagged share per step.
A flag never changes a verdict by itself: an attempt that failed is just a failed test.
"""

from __future__ import annotations

CONTROL_CHANNEL = "control_channel"  # wrote frames to its control channel it was not asked for
SHADOWED_NAME = "shadowed_name"  # defined a builtin, stdlib module or task helper name the tests use
CONTROL_FLOW_EXCEPTION = "control_flow_exception"  # raised StopIteration/SystemExit/... into a test
EARLY_EXIT = "early_exit"  # exited or killed itself while a test was calling it
SIGNAL_PROBE = "signal_probe"  # signalled or probed processes that are not its own
MALFORMED_FRAME = "malformed_frame"  # a frame that broke the protocol (syntax, type, order)
OVERSIZE_FRAME = "oversize_frame"  # a frame over the size bound
SCRATCH_FULL = "scratch_full"  # filled its scratch quota (bytes or inodes)
INTERACTOR_FAILED = "interactor_failed"  # the task's interactor broke on a test (after it built): the test failed
CHECKER_FAILED = "checker_failed"  # its output made the task's checker fail, crash or time out (checker.py)

KINDS: frozenset[str] = frozenset({
    CONTROL_CHANNEL, SHADOWED_NAME, CONTROL_FLOW_EXCEPTION, EARLY_EXIT, SIGNAL_PROBE,
    MALFORMED_FRAME, OVERSIZE_FRAME, SCRATCH_FULL, CHECKER_FAILED, INTERACTOR_FAILED,
})


def clean(kinds: object) -> list[str]:
    """The known kinds among what a runner reported, sorted and unique (anything else is dropped)."""
    if not isinstance(kinds, (list, tuple, set, frozenset)):
        return []
    return sorted({k for k in kinds if isinstance(k, str) and k in KINDS})
