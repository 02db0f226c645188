"""One shape for a code result: what /v1/score writes for a code item is a `CodeDetail`, the
client reads the same JSON back into it, and the runner's wire keys are known on the server
side by `sandbox/jobs.py` alone. Through real HTTP against a real server, on each host."""

from __future__ import annotations

import re
from pathlib import Path

import httpx

from reward_server.client import CodeDetail, RewardClient, ScoreResult
from tests.server.conftest import ADD_TASK, ECHO_STDIO_TASK, GOOD_ADD, GOOD_STDIO, SYNTAX_ERR

ROOT = Path(__file__).resolve().parents[2]

# what a Python code item's detail holds, no more (a compiled program adds "compile")
CODE_KEYS = {"kind", "syntax_ok", "runs", "passed", "total", "tests", "load_message", "extract_mode", "code_chars",
             "wall_s", "queue_s", "runner", "flags"}
EXITS = "```python\nimport os\ndef add(a, b):\n    if a == 2:\n        os._exit(0)\n    return a + b\n```"

ITEMS = [
    {"id": "good", "completion": GOOD_ADD, "task": ADD_TASK},
    {"id": "syntax", "completion": SYNTAX_ERR, "task": ADD_TASK},
    {"id": "empty", "completion": "```python\n\n```", "task": ADD_TASK},
    {"id": "exits", "completion": EXITS, "task": ADD_TASK},
    {"id": "stdio", "completion": GOOD_STDIO, "task": ECHO_STDIO_TASK},
    {"id": "math", "completion": "so \\boxed{\\frac{1}{2}}", "task": {"type": "math", "answer": "0.5"}},
]


def test_the_client_reads_back_exactly_the_json_the_server_wrote(url):
    raw = httpx.post(url + "/v1/score", json={"items": ITEMS}, timeout=120).json()["results"]
    for j in raw:
        r = ScoreResult.model_validate(j)  # what the client does with each result
        assert r.model_dump(mode="json") == j, j
        if j["detail"].get("kind") == "code":
            assert isinstance(r.detail, CodeDetail) and r.code is r.detail, j
            assert set(j["detail"]) == CODE_KEYS, j
        else:
            assert isinstance(r.detail, dict) and r.code is None and r.flags == [], j


def test_the_client_result_is_the_code_detail(url):
    with RewardClient(url) as cl:
        good, syntax, empty, exits, stdio, math = cl.score(ITEMS)
    assert good.ok and good.code is not None and (good.code.passed, good.code.total) == (4, 4) and good.flags == []
    assert all(t.status == "passed" for t in good.code.tests) and good.code.runner
    assert syntax.code is not None and syntax.code.syntax_ok is False and syntax.reward == 0.0
    assert empty.code is not None and empty.code.code_chars == 0 and empty.code.total == 4
    assert [t.status for t in empty.code.tests] == ["skipped"] * 4
    assert exits.code is not None and "early_exit" in exits.flags and exits.flags == exits.code.flags
    assert [t.status for t in exits.code.tests] == ["passed", "passed", "error", "passed"]
    assert stdio.code is not None and stdio.code.passed == 2 and stdio.code.compile is None
    assert math.ok and math.code is None and math.detail["kind"] == "math"


def test_the_runner_wire_keys_live_in_jobs_only():
    """The run/exec messages and the answers' keys: built and read in sandbox/jobs.py, nowhere
    else on the server side (the runner, sandbox/runner/, is the other end)."""
    wire = re.compile(r"""["'](op)["']\s*:\s*["'](run|exec)["']|["']exec_std(out|err)["']""")
    found = []
    for top in ("sandbox", "reward_server", "trainer"):
        for path in (ROOT / top).rglob("*.py"):
            rel = path.relative_to(ROOT).as_posix()
            if rel.startswith("sandbox/runner/") or rel == "sandbox/jobs.py":
                continue
            if wire.search(path.read_text(encoding="utf-8")):
                found.append(rel)
    assert found == [], found
