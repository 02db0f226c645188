"""Program extraction and reward shaping (pure functions; the HTTP paths are in test_api)."""

from __future__ import annotations

import pytest

from reward_server.grading.code import extract_code, shape_reward
from reward_server.schemas import ExtractOptions
from reward_server.settings import Weights
from sandbox.jobs import JobResult


@pytest.mark.parametrize(
    ("text", "mode", "code", "used"),
    [
        ("```python\na = 1\n```\ntext\n```python\nb = 2\n```", "auto", "b = 2\n", "last_python_fence"),
        ("```\nx = 1\n```\n```js\ny\n```", "auto", "x = 1\n", "first_fence"),
        ("```js\ny\n```\n```py\nz = 3\n```", "auto", "z = 3\n", "last_python_fence"),
        ("plain = 1\n", "auto", "plain = 1\n", "raw"),
        ("```python\nunterminated = 1\n", "auto", "unterminated = 1\n", "last_python_fence"),
        ("````python\na = '```'\n````", "auto", "a = '```'\n", "last_python_fence"),
        ("<think>```python\nwrong = 1\n```</think>\n```python\nright = 1\n```", "auto", "right = 1\n", "last_python_fence"),
        ("```python\na = 1\n```\n```text\nout\n```", "last_fence", "out\n", "last_fence"),
        ("```python\na = 1\n```", "raw", "```python\na = 1\n```", "raw"),
        ("no fences", "last_python_fence", "no fences", "raw"),
    ],
)
def test_extract(text, mode, code, used):
    assert extract_code(text, ExtractOptions(mode=mode)) == (code, used)


def test_strip_think_off_keeps_thinking_code():
    text = "<think>\n```python\nthought = 1\n```\n</think> no code after"
    assert extract_code(text, ExtractOptions(strip_think=False))[0] == "thought = 1\n"


def _res(syntax_ok, runs, passed, total):
    return JobResult(syntax_ok=syntax_ok, runs=runs, passed=passed, total=total, tests=[])


def test_shape_reward():
    w = Weights()
    assert shape_reward(_res(True, True, 4, 4), w) == pytest.approx(1.0)
    assert shape_reward(_res(True, True, 1, 4), w) == pytest.approx(0.4)
    assert shape_reward(_res(True, False, 0, 4), w) == pytest.approx(0.1)
    assert shape_reward(_res(False, False, 0, 4), w) == pytest.approx(0.0)
    assert shape_reward(_res(True, True, 0, 0), w) == pytest.approx(1.0)  # nothing to fail
    assert shape_reward(_res(True, False, 0, 0), w) == pytest.approx(0.1)
    assert shape_reward(_res(True, True, 1, 2), Weights(syntax=0, runtime=0, tests=1)) == pytest.approx(0.5)


def test_protocol_error_is_a_failed_test_and_flags_cost_only_the_penalty():
    from sandbox.jobs import TestResult  # noqa: PLC0415

    tests = [TestResult(status="passed"), TestResult(status="protocol_error")]
    r = JobResult(syntax_ok=True, runs=True, passed=1, total=2, tests=tests, flags=["malformed_frame"])
    assert shape_reward(r, Weights()) == pytest.approx(0.6)  # flagged, no penalty asked: what the verdicts give
    assert shape_reward(r, Weights(flag_penalty=0.5)) == pytest.approx(0.1)
    clean = r.model_copy(update={"flags": []})
    assert shape_reward(clean, Weights(flag_penalty=0.5)) == pytest.approx(0.6)
