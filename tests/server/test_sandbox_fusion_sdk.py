"""The SandboxFusion SDK itself (`pip install sandbox-fusion`, unchanged) against the server:
`run_code`, `run_concurrent` and `submit` (CommonOJ, provided_data). Skips where the SDK is
not installed (it is not a dependency of this project); run with it on the path:
`pip install --target /tmp/sf sandbox-fusion aiohttp tenacity` then
`PYTHONPATH=$PWD:/tmp/sf pytest tests/server/test_sandbox_fusion_sdk.py`."""

from __future__ import annotations

import pytest

sf = pytest.importorskip("sandbox_fusion")
from sandbox_fusion.common import run_concurrent  # noqa: E402


def test_sdk_run_code_run_concurrent_and_submit(url):
    sf.set_endpoint(url)
    r = sf.run_code(sf.RunCodeRequest(code="print(input())", stdin="hi", language="python"))
    assert r.status == sf.RunStatus.Success and r.run_result.stdout == "hi\n"
    reqs = [[sf.RunCodeRequest(code=f"print({i} * 2)", language="python")] for i in range(20)]
    outs = run_concurrent(sf.run_code, args=reqs, concurrency=8)
    assert [o.run_result.stdout.strip() for o in outs] == [str(i * 2) for i in range(20)]
    tests = [{"input": {"stdin": "1 2"}, "output": {"stdout": "3"}}, {"input": {"stdin": "4 5"}, "output": {"stdout": "9"}}]
    cfg = sf.TestConfig(dataset_type="CommonOJDataset", language="python", run_timeout=5,
                        provided_data={"id": 0, "content": "", "test": tests})
    good = "```python\nprint(sum(map(int, input().split())))\n```"
    e = sf.submit(sf.SubmitRequest(dataset="oj", id=0, completion=good, config=cfg))
    assert e.accepted and [t.passed for t in e.tests] == [True, True]
    e = sf.submit(sf.SubmitRequest(dataset="oj", id=1, completion="```python\nprint(3)\n```", config=cfg))
    assert not e.accepted and [t.passed for t in e.tests] == [True, False]
