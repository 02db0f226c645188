"""A batch of 64 honest items (Python and C++) with one hostile item of each trust-crossing kind
(argument write-back, a build directory swapped for a link, builds that crowd the cache, integers
judged with a tolerance, math phrases, a compile that blocks without CPU, state carried from one
test to the next, syscalls Docker closes): 200, every honest reward right, every hostile item scored
truthfully on its own, no runner restarted, and the honest items answered within 2x their time
alone. Real server, real pool, both hosts."""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from tests.conftest import kind_params
from tests.sandbox.test_trust_build import MAIN_JAVA, PROCESSOR, b64, javac_class
from tests.server.conftest import ADD_TASK, ECHO_STDIO_TASK, GOOD_ADD, GOOD_STDIO, HALF_ADD, start_server


def _cpp(body: str) -> str:
    return f"```cpp\n#include <bits/stdc++.h>\nusing namespace std;\n{body}\n```"


CPP_STDIO = {**ECHO_STDIO_TASK, "language": "cpp"}
CPP_ADD = [_cpp(f"int main() {{ long long a, b; cin >> a >> b; cout << a + b{' + 0' * k} << endl; }}")
           for k in range(4)]
CPP_WRONG = _cpp("int main() { long long a, b; cin >> a >> b; cout << a * b << endl; }")  # 1*2 != 3, 5*7 != 12

HONEST = [(GOOD_ADD, ADD_TASK, 1.0), (HALF_ADD, ADD_TASK, 0.6), (GOOD_STDIO, ECHO_STDIO_TASK, 1.0),
          *((c, CPP_STDIO, 1.0) for c in CPP_ADD), (CPP_WRONG, CPP_STDIO, 0.2)]

# -- one hostile item of each kind, with the reward a careful judge gives it --------------------------

WRITEBACK = ("```python\ndef f(a):\n    a[:] = [42]\n    return [42]\n```",
             {"type": "code", "tests": {"kind": "assert", "entry_point": "f",
                                        "test": "def check(candidate):\n    xs = [3, 1, 2]\n"
                                                "    assert candidate(xs) == sorted(xs)\n"}}, 0.2)
# a legal program with a 40 MiB binary: several of them must not crowd honest builds out
BIG_BINARY = (_cpp("static char big[40 << 20] = {1};\n"
                   "int main() { long long a, b; cin >> a >> b; cout << a + b + big[0] - 1 << endl; }"),
              CPP_STDIO, 1.0)
BIG_BINARY_2 = (_cpp("static char big[41 << 20] = {2};\n"
                     "int main() { long long a, b; cin >> a >> b; cout << a + b + big[0] - 2 << endl; }"),
                CPP_STDIO, 1.0)
N = 123456789012
EXACT_INTEGERS = ("```python\nn = int(input())\nprint(n * n + 1)\n```",
                  {"type": "code", "tests": {"kind": "stdio", "float_tolerance": 1e-6,
                                             "cases": [{"stdin": f"{N}\n", "stdout": f"{N * N}\n"}]}}, 0.2)
MATH_NEGATION = ("The answer is 7, not 5.", {"type": "math", "answer": "5"}, 0.0)
BLOCKING_COMPILE = (_cpp('#include "/dev/ptmx"\nint main() {}'), CPP_STDIO, 0.0)
STATE_CARRIED = ("```python\nimport os\nif os.path.exists('seen'):\n    print(open('seen').read())\n"
                 "else:\n    s = input()\n    open('seen', 'w').write(s)\n    print(s)\n```",
                 {"type": "code", "tests": {"kind": "stdio", "cases": [{"stdin": "alpha\n", "stdout": "alpha\n"},
                                                                       {"stdin": "beta\n", "stdout": "alpha\n"}]}},
                 0.6)  # the second test is only passed by a program that saw the first one's input
SYSCALLS = ("```python\nimport ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\nout = []\n"
            "for nr in (154, 447):  # modify_ldt(0, buf, 16), memfd_secret(0)\n"
            "    buf = ctypes.create_string_buffer(16)\n"
            "    r = libc.syscall(nr, 0, buf, 16) if nr == 154 else libc.syscall(nr, 0)\n"
            "    out.append('open' if r >= 0 else 'refused')\nprint(*out)\n```",
            {"type": "code", "tests": {"kind": "stdio", "cases": [{"stdin": "", "stdout": "refused refused\n"}]}}, 1.0)

HOSTILE = {"writeback": WRITEBACK, "big-binary": BIG_BINARY, "big-binary-2": BIG_BINARY_2,
           "exact-integers": EXACT_INTEGERS, "math-negation": MATH_NEGATION,
           "blocking-compile": BLOCKING_COMPILE, "state-carried": STATE_CARRIED, "syscalls": SYSCALLS}


def _items(rows: list[tuple[str, str, dict, float]]) -> list[dict]:
    return [{"id": i, "completion": c, "task": t} for i, c, t, _ in rows]


def _check(rows: list[tuple[str, str, dict, float]], response: httpx.Response) -> None:
    assert response.status_code == 200, response.text[:500]
    got = response.json()["results"]
    wrong = [(i, want, r["status"], r["reward"], [x.get("message", "")[:200] for x in r["detail"].get("tests", [])]
              or r["detail"].get("error", ""))
             for (i, _c, _t, want), r in zip(rows, got, strict=True)
             if r["status"] != "ok" or r["reward"] != pytest.approx(want)]
    assert not wrong, wrong


@pytest.mark.parametrize("kind", kind_params())
def test_honest_items_keep_their_rewards_and_pace_beside_every_hostile_kind(kind, tmp_path):
    s = start_server(sandbox=kind, pool_size=2, max_queued_jobs=256)  # both batches admitted at once
    try:
        honest = [(f"h{i}", *HONEST[i % len(HONEST)]) for i in range(64)]
        hostile = [(name, *row) for name, row in HOSTILE.items()]
        with httpx.Client(timeout=300) as c:
            _check(honest, c.post(s.url + "/v1/score", json={"items": _items(honest)}))  # warm: builds cached
            t0 = time.perf_counter()
            _check(honest, c.post(s.url + "/v1/score", json={"items": _items(honest)}))
            alone = time.perf_counter() - t0
            print(f"honest batch alone {alone:.2f} s")
        restarts_before = s.pool.stats().restarts

        hostile_answer: list[httpx.Response] = []

        def send_hostile() -> None:
            with httpx.Client(timeout=300) as c:
                hostile_answer.append(c.post(s.url + "/v1/score", json={"items": _items(hostile)}))

        # compile-time code that swaps its build directory for a link (a /run_code job: it needs `files`)
        processor = {"code": MAIN_JAVA, "language": "java", "run_timeout": 5, "compile_timeout": 20,
                     "files": {"META-INF/services/javax.annotation.processing.Processor": b64("P\n"),
                               "P.class": b64(javac_class(tmp_path, PROCESSOR, "P"))}}
        processor_answer: list[httpx.Response] = []

        def send_processor() -> None:
            with httpx.Client(timeout=300) as c:
                processor_answer.append(c.post(s.url + "/run_code", json=processor))

        senders = [threading.Thread(target=send_hostile), threading.Thread(target=send_processor)]
        for sender in senders:
            sender.start()
        time.sleep(0.2)  # the hostile items are in the pool first
        with httpx.Client(timeout=300) as c:
            t0 = time.perf_counter()
            beside = c.post(s.url + "/v1/score", json={"items": _items(honest)})
            took = time.perf_counter() - t0
        for sender in senders:
            sender.join(300)
        print(f"honest batch beside the hostile items {took:.2f} s")
        _check(honest, beside)
        assert hostile_answer, "the hostile batch got no answer"
        _check(hostile, hostile_answer[0])
        assert processor_answer and processor_answer[0].status_code == 200, processor_answer
        ran = processor_answer[0].json()
        assert ran["status"] == "Success" and ran["run_result"]["stdout"] == "hello\n", ran  # built without it
        assert "PROCESSOR" not in str(ran), ran  # the processor never ran
        assert s.pool.stats().restarts == restarts_before
        assert took <= 2 * alone + 1.0, (took, alone)
    finally:
        s.stop()
