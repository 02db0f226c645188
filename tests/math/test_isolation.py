"""Worker isolation: injection payloads, DoS inputs, timeouts, threads, asyncio."""

import os
import signal
import threading
import time

import pytest

from reward_server.grading.math import MathGrader, MathOptions, grade_sync
from reward_server.grading.math.grade import check

MARK = "/tmp/verireward_math_pwned_test"

INJECTIONS = [
    rf"\boxed{{__import__('os').system('touch {MARK}')}}",
    f"__import__(\"os\").system(\"touch {MARK}\")",
    f"exec(\"import os; os.system('touch {MARK}')\")",
    f"\\pi+eval(\"open('{MARK}','w').write('x')\")",
    f"[open(\"{MARK}\",\"w\").write(\"x\"), 2]",
    "lambda: 1",
    "[x for x in range(3)]",
    r"\boxed{\text{__import__('os').system('touch " + MARK + r"')}}",
]

DOS = [
    "9**9**9**9", "2**999999999", "10**100000", "(10**1000)**1000", r"\boxed{5^{5^{5^{5^5}}}}",
    r"\boxed{(10^{10})!}", "9999999!", "(" * 500 + "2" + ")" * 500,
    "-" * 300 + "1", "1+" * 100_000 + "1", r"\boxed{" + r"\frac{1}{" * 200 + "2" + "}" * 200 + "}",
    "x" * 200_000, r"\boxed{(x+1)^{100000}}", r"\sqrt{" * 300 + "2" + "}" * 300,
]


@pytest.fixture(scope="module")
async def grader():
    g = MathGrader(workers=2)
    await g.start()
    yield g
    await g.close()


@pytest.mark.parametrize("payload", INJECTIONS)
async def test_injection_executes_nothing(grader, payload):
    if os.path.exists(MARK):
        os.remove(MARK)
    g = await grader.grade(payload, "1")
    assert g.reward == 0.0
    assert not os.path.exists(MARK)
    # and nothing executes in-process either
    assert check(payload, "2", {})["reward"] == 0.0
    assert not os.path.exists(MARK)


@pytest.mark.parametrize("payload", DOS)
async def test_dos_finishes_within_limit(grader, payload):
    t = time.perf_counter()
    g = await grader.grade(payload, "1")
    assert time.perf_counter() - t < 2.0 + 0.5
    assert g.reward == 0.0
    assert g.status in ("too_large", "timeout", "parse_error", "ok", "no_answer")


async def test_timeout_kills_and_replaces_worker(grader):
    # a worker that stops answering (SIGSTOP: even its own soft timer cannot fire) is killed at the
    # hard limit and replaced; the caller gets status "timeout" within the limit
    pids = set(grader.pool.pids())
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    opts = MathOptions(timeout_s=0.3)
    for _ in range(len(pids)):
        t = time.perf_counter()
        g = await grader.grade(r"\boxed{4}", "4", opts)
        assert time.perf_counter() - t < 0.3 + 0.5
        assert g.status == "timeout" and g.reward == 0.0
    assert grader.pool.replaced >= len(pids)
    g2 = await grader.grade(r"\boxed{4}", "4")  # waits for a fresh worker
    assert g2.reward == 1.0
    assert not pids & set(grader.pool.pids())


async def test_soft_timeout_keeps_worker(grader):
    opts = MathOptions(timeout_s=0.05)
    heavy = r"\boxed{" + "+".join(rf"\sin(x^{k})" for k in range(1, 60)) + "}"
    g = await grader.grade(heavy, "+".join(rf"\cos(x^{k})" for k in range(1, 60)), opts)
    assert g.status == "timeout" and g.reward == 0.0


async def test_grade_many_keeps_order(grader):
    pairs = [(rf"\boxed{{{i}}}", str(i if i % 3 else i + 1)) for i in range(12)]
    out = await grader.grade_many(pairs)
    assert [g.reward for g in out] == [0.0 if i % 3 == 0 else 1.0 for i in range(12)]


def test_grade_sync_from_non_main_thread():
    res = []
    th = threading.Thread(target=lambda: res.append(grade_sync(r"so \boxed{\frac{2}{4}}", "0.5")))
    th.start()
    th.join(60)
    assert res and res[0].reward == 1.0 and res[0].status == "ok"


def test_options_forbid_extra():
    with pytest.raises(ValueError):
        MathOptions(bogus=1)
