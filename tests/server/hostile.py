"""Hostile inputs shared by the request-path tests (tests/server) and the mixed-batch test
(tests/reliability): each tries one way model text (or a client) used to stall or crash the
server, with the truthful outcome it must get instead."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import httpx

from tests.server.conftest import ADD_TASK, GOOD_ADD

# A candidate whose exception message holds a lone surrogate (the runner reports it as JSON "\ud800").
SURROGATE_RAISE = "```python\ndef add(a, b):\n    raise ValueError('bad ' + chr(0xD800))\n```"
# A completion with a lone surrogate in its text (JSON "\udcff" escape in the body).
SURROGATE_TEXT = "```python\ndef add(a, b):\n    return a + b  # \udcff\n```"
# An opening fence and 100 KB without a newline: froze the event loop for ~27 s on a regex.
FENCE_NO_NEWLINE = "```" + "a" * 100_000
# A long run of special tokens at the end of an OpenRLHF query: ~34 s on a regex.
SPECIAL_RUN = "<|a|>" * 40_000


def hostile_items() -> list[tuple[dict, float]]:
    """(item, reward it must get) for one hostile item of each /v1/score kind handled here."""
    return [
        ({"id": "surrogate-raise", "completion": SURROGATE_RAISE, "task": ADD_TASK}, 0.2),  # compiles, runs, fails all
        ({"id": "surrogate-text", "completion": SURROGATE_TEXT, "task": ADD_TASK}, 1.0),  # the comment is just a comment
        ({"id": "id-\udc80", "completion": GOOD_ADD, "task": ADD_TASK}, 1.0),
        ({"id": "fence", "completion": FENCE_NO_NEWLINE, "task": ADD_TASK}, 0.0),  # not a program
    ]


@dataclass
class HealthProbe:
    """Polls /healthz from its own thread while a test runs; `worst` is the slowest answer."""

    url: str
    period: float = 0.02
    times: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with httpx.Client(timeout=30) as c:
            while not self._stop.is_set():
                t0 = time.perf_counter()
                try:
                    ok = c.get(self.url + "/healthz").status_code == 200
                except httpx.HTTPError as e:
                    ok = False
                    self.failures.append(repr(e))
                self.times.append(time.perf_counter() - t0)
                if not ok and not self.failures:
                    self.failures.append("healthz not 200")
                self._stop.wait(self.period)

    def __enter__(self) -> HealthProbe:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(30)

    @property
    def worst(self) -> float:
        return max(self.times, default=0.0)

    def assert_responsive(self) -> None:
        """No stall: 90% of answers under 100 ms and none over 1 s. (A blocked event loop shows
        as seconds; a lone 150 ms answer is the shared machine's scheduler, seen at load ~9 on
        2 cores. The strict every-answer-under-100-ms check is tests/reliability's.)"""
        assert not self.failures, self.failures
        assert len(self.times) >= 2, self.times
        p90 = sorted(self.times)[int(0.9 * (len(self.times) - 1))]
        assert p90 < 0.1 and self.worst < 1.0, (p90, self.worst, self.times)
