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
        deadline = time.perf_counter() + 5  # a request that ended at once still gets two answers judged
        while len(self.times) < 2 and self._thread.is_alive() and time.perf_counter() < deadline:
            time.sleep(self.period)
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


def _code(program: str) -> str:
    return f"```python\n{program}```\n"


def _task(tests: dict, **kw) -> dict:
    return {"type": "code", "tests": tests, "timeout_s": 5, **kw}


_FORGE = (
    "import os, struct\n"
    "def spray(text):\n"
    "    data = text.encode('utf-8', 'surrogatepass')\n"
    "    for fd in range(3, 64):\n"
    "        try:\n"
    "            os.write(fd, struct.pack('>I', len(data)) + data)\n"
    "        except OSError:\n"
    "            pass\n"
)
_SQ = {"kind": "assert", "asserts": ["assert sq(2) == 4", "assert sq(3) == 9"]}
_ECHO = {"kind": "stdio", "cases": [{"stdin": "7\n", "stdout": "7\n"}, {"stdin": "8\n", "stdout": "8\n"}]}


def _r(passed: int, total: int, syntax: bool = True, runs: bool = True) -> float:
    return 0.1 * syntax + 0.1 * runs + 0.8 * passed / total


def runner_hostile_items() -> list[tuple[dict, float]]:
    """(item, reward a careful judge gives) for one hostile program of each runner-side kind
    of issue 15 (findings 1-6, 11, 12, 16), through /v1/score: none may gain reward, fail
    another item, cost a runner or stall the server."""
    check_setup = ("def check(candidate):\n    out = candidate(1)\n    f = candidate\n    assert out == 2\n"
                   "    assert f(4) == 5\n    assert candidate(10) == 11\n")
    flow = "def check(candidate):\n    assert all(map(candidate, [1, 2, 3]))\n    assert candidate(1)\n"
    shadow = {"kind": "assert", "asserts": ["assert set(f([1, 2])) == set([2, 1])", "assert abs(f(2.0) - 4.0) < 1e-6"]}
    items = [
        # 1: builtins the tests use, redefined by the program, stay the tests' own
        ("shadow", _code("def set(x):\n    return 0\ndef abs(x):\n    return 0\ndef f(x):\n    return 0\n"),
         _task(shadow), _r(0, 2)),
        # 2: a set is not a sorted list; ints compare exactly
        ("set-for-list", _code("def srt(a):\n    return set(a)\n"),
         _task({"kind": "call", "fn_name": "srt", "cases": [{"args": [[3, 1, 2]], "expected": [1, 2, 3]}]}), _r(0, 1)),
        ("int-tolerance", _code("def inc(x):\n    return x + 1\n"),
         _task({"kind": "call", "fn_name": "inc", "cases": [{"args": [10**9], "expected": 10**9}]}), _r(0, 1)),
        # 3: asserts reached through setup names are counted, not dropped
        ("setup-alias", _code("def inc(x):\n    return 11 if x == 10 else 0\n"),
         _task({"kind": "assert", "test": check_setup, "entry_point": "inc"}), _r(1, 3)),
        # 4: a StopIteration from the candidate cannot end all(map(...)) early
        ("stop-iteration", _code("def f(x):\n    raise StopIteration\n"),
         _task({"kind": "assert", "test": flow, "entry_point": "f"}), _r(0, 2)),
        # 5: a script that forges an exit frame and exits 3: the kernel's status counts
        ("forged-exit", _code(_FORGE + "spray('{\"exit\": 0, \"exc_type\": \"\"}')\nprint(input())\nos._exit(3)\n"),
         _task(_ECHO), _r(0, 2, runs=False)),
        # 5: a top level that claims it ran, then raises
        ("forged-runs", _code(_FORGE + "spray('{\"runs\": true, \"message\": \"\", \"names\": [\"sq\"]}')\n"
                              "def sq(x):\n    return x * x\nraise RuntimeError('boom')\n"), _task(_SQ), _r(0, 2, runs=False)),
        # 6: a frame the decoder cannot read (a 5000-digit int) in the answer to a call
        ("giant-int-frame", _code(_FORGE + "def sq(x):\n    spray('{\"id\": 1, \"ok\": true, \"value\": ' + '9' * 5000 + '}')\n"
                                  "    return x * x\n"), _task(_SQ), _r(0, 2, runs=False)),
        # 11: a job holding processes: another job's threads and processes still start
        ("hold-processes", _code("import os, time\nfor _ in range(12):\n    if os.fork() == 0:\n        time.sleep(4)\n"
                                 "        os._exit(0)\ndef sq(x):\n    return x * x + 1\n"), _task(_SQ), _r(0, 2)),
        # 12: a job filling its scratch (bytes): other jobs still write theirs
        ("fill-scratch", _code("try:\n    with open('big', 'wb') as f:\n        while True:\n"
                               "            f.write(b'x' * (1 << 20))\nexcept OSError:\n    pass\ndef sq(x):\n    return 0\n"),
         _task(_SQ, memory_mb=512), _r(0, 2)),
    ]
    return [({"id": i, "completion": c, "task": t}, want) for i, c, t, want in items]


def honest_runner_items() -> list[tuple[dict, float]]:
    """Honest programs that the hostile ones above must not disturb (threads, processes,
    scratch files, big ints, stdlib containers)."""
    threads = ("import threading\ndef sq(x):\n    out = []\n    ts = [threading.Thread(target=out.append, args=(x * x,))"
               " for _ in range(8)]\n    [t.start() for t in ts]\n    [t.join() for t in ts]\n    return out[0]\n")
    files = ("def sq(x):\n    with open(f'f{x}', 'w') as f:\n        f.write(str(x * x) * 1000)\n"
             "    return int(open(f'f{x}').read()[:len(str(x * x))])\n")
    items = [
        ("threads", _code(threads), _task(_SQ), 1.0),
        ("files", _code(files), _task(_SQ), 1.0),
        ("big-int", _code("def g(k):\n    return 7**k\n"),
         _task({"kind": "assert", "asserts": ["assert g(20000) == 7**20000", "assert g(3) == 343"]}), 1.0),
        ("counter", _code("import collections\ndef count(s):\n    return collections.Counter(s)\n"),
         _task({"kind": "call", "fn_name": "count", "cases": [{"args": ["aab"], "expected": {"a": 2, "b": 1}}]}), 1.0),
    ]
    return [({"id": i, "completion": c, "task": t}, want) for i, c, t, want in items]
