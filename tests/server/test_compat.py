"""Compatibility: SandboxFusion's /run_code as verl's sandbox_fusion reward path uses it,
OpenRLHF's /get_reward, and the TRL and verl adapters on real batches."""

from __future__ import annotations

import base64
import json

import httpx
import pytest

from reward_server.compat import verl as verl_compat
from reward_server.compat.trl import make_async_trl_reward_func, make_trl_reward_func
from tests.server.conftest import ADD_TASK, GOOD_ADD, GOOD_STDIO, HALF_ADD

# ---- verl's sandbox_fusion client, as it behaves on the wire ---------------------------


def verl_request(url: str, code: str, stdin: str | None, timeout: int = 10, memory_limit_mb: int | None = 1024):
    """What verl's `call_sandbox_api` posts: a JSON string body, these exact fields."""
    payload = {"compile_timeout": timeout, "run_timeout": timeout, "code": code, "stdin": stdin}
    if memory_limit_mb is not None:  # newer verl sends it; older verl does not
        payload["memory_limit_MB"] = memory_limit_mb
    payload.update({"language": "python", "files": {}, "fetch_files": []})
    r = httpx.post(url + "/run_code", content=json.dumps(payload),
                   headers={"Content-Type": "application/json", "Accept": "application/json"},
                   timeout=timeout * 2 + 10)
    r.raise_for_status()
    return r.json()


def verl_verdict(resp: dict, expected: str):
    """verl's reading of one case: True/False, -1 sandbox error, -2 runtime error, -3 timeout, -4 compile error."""
    status, run, comp = resp.get("status"), resp.get("run_result"), resp.get("compile_result")
    if status == "SandboxError":
        return -1
    if status == "Failed":
        if comp and (comp.get("status") in ("Error", "TimeLimitExceeded") or comp.get("return_code") != 0):
            return -4
        if run:
            if run["status"] == "TimeLimitExceeded":
                return -3
            if run["status"] == "Error" or run.get("return_code") != 0:
                return -2
        return -1
    if status == "Success" and run and run["status"] == "Finished":
        return str(run.get("stdout") or "").rstrip("\n") == str(expected).rstrip("\n")
    return -1


def test_verl_sandbox_fusion_path(url):
    code = "import sys\na, b = map(int, sys.stdin.read().split())\nprint(a + b)\n"
    cases = [("1 2\n", "3"), ("10 20", "30\n"), ("2 2", "5")]
    verdicts = [verl_verdict(verl_request(url, code, i), o) for i, o in cases]
    assert verdicts == [True, True, False]

    # exit code != 0 -> runtime error; syntax error -> runtime error (python has no compile step)
    assert verl_verdict(verl_request(url, "raise SystemExit(3)", ""), "") == -2
    resp = verl_request(url, "def f(:\n  pass", "")
    assert resp["status"] == "Failed" and resp["compile_result"] is None
    assert resp["run_result"]["status"] == "Finished" and resp["run_result"]["return_code"] != 0
    assert "SyntaxError" in resp["run_result"]["stderr"]
    assert verl_verdict(resp, "") == -2
    # time limit
    resp = verl_request(url, "while True: pass", "", timeout=1)
    assert resp["status"] == "Failed" and resp["run_result"]["status"] == "TimeLimitExceeded"
    assert verl_verdict(resp, "") == -3
    # older verl: no memory_limit_MB, stdin None
    assert verl_verdict(verl_request(url, "print('hi')", None, memory_limit_mb=None), "hi") is True
    # a language we do not run is a sandbox error, not the candidate's failure
    r = httpx.post(url + "/run_code", json={"code": "print('hi')", "language": "lua"}).json()
    assert r["status"] == "SandboxError" and verl_verdict(r, "") == -1


def test_verl_call_based_wrapper_over_run_code(url):
    # verl wraps call-based problems in a program that reads one JSON value per stdin line
    # and prints json.dumps(result); the sandbox only sees a stdio program.
    user = "class Solution:\n    def add(self, a, b):\n        return a + b\n"
    wrapper = (
        "import sys, json\n" + user +
        "args = [json.loads(l) for l in sys.stdin.read().split('\\n') if l.strip()]\n"
        "print(json.dumps(getattr(Solution(), 'add')(*args)))\n"
    )
    assert verl_verdict(verl_request(url, wrapper, "1\n2"), "3") is True
    assert verl_verdict(verl_request(url, wrapper, "[1]\n[2]"), "[1, 2]") is True


def test_run_code_files_and_fetch(url):
    body = {
        "code": "data = open('in.txt').read()\nopen('out.txt', 'w').write(data.upper())\nprint(len(data))",
        "language": "python",
        "files": {"in.txt": base64.b64encode(b"hello").decode()},
        "fetch_files": ["out.txt"],
    }
    r = httpx.post(url + "/run_code", json=body, timeout=60).json()
    assert r["status"] == "Success", r
    assert r["run_result"]["stdout"].strip() == "5"
    assert base64.b64decode(r["files"]["out.txt"]) == b"HELLO"


def test_run_code_422_names_the_field(url):
    r = httpx.post(url + "/run_code", json={"language": "python"})
    assert r.status_code == 422 and r.json()["detail"][0]["field"] == "code"


# ---- OpenRLHF ----------------------------------------------------------------------------


def test_openrlhf_get_reward(url):
    prompt = "<|im_start|>user\nWrite add(a, b).<|im_end|>\n<|im_start|>assistant\n"
    queries = [prompt + GOOD_ADD + "<|im_end|>", prompt + HALF_ADD + "<|im_end|>", prompt + "no idea<|im_end|>"]
    body = {"query": queries, "prompts": [prompt] * 3, "labels": [json.dumps(ADD_TASK)] * 3}
    r = httpx.post(url + "/get_reward", json=body, timeout=120)
    assert r.status_code == 200, r.text
    j = r.json()
    assert j["rewards"] == [pytest.approx(1.0), pytest.approx(0.6), pytest.approx(0.0)]
    assert j["scores"] == j["rewards"]
    assert j["extra_logs"]["pass_rate"] == [pytest.approx(1.0), pytest.approx(0.5), pytest.approx(0.0)]
    assert j["extra_logs"]["infra_error"] == [0.0, 0.0, 0.0]


def test_openrlhf_bad_label_is_422(url):
    body = {"query": ["x"], "prompts": [""], "labels": [json.dumps({"type": "code", "tests": {"kind": "nope"}})]}
    r = httpx.post(url + "/get_reward", json=body)
    assert r.status_code == 422 and r.json()["detail"][0]["field"].startswith("labels.0")
    r = httpx.post(url + "/get_reward", json={"query": ["a", "b"], "prompts": ["", ""], "labels": ["1"]})
    assert r.status_code == 422 and r.json()["detail"][0]["field"] == "labels"


# ---- TRL ---------------------------------------------------------------------------------


def test_trl_reward_func_plain_and_conversational(url):
    f = make_trl_reward_func(url)
    assert f.__name__ == "verireward"
    prompts = ["Write add."] * 3
    completions = [GOOD_ADD, HALF_ADD, "I cannot solve this."]
    tasks = [ADD_TASK, json.dumps(ADD_TASK), ADD_TASK]  # dict or JSON string column
    out = f(prompts=prompts, completions=completions, task=tasks, trainer_state=None)
    assert out == [pytest.approx(1.0), pytest.approx(0.6), pytest.approx(0.0)]

    conv_prompts = [[{"role": "user", "content": "Write add."}]] * 2
    conv = [[{"role": "assistant", "content": GOOD_ADD}], [{"role": "assistant", "content": [{"type": "text", "text": GOOD_ADD}]}]]
    assert f(prompts=conv_prompts, completions=conv, task=[ADD_TASK] * 2) == [pytest.approx(1.0)] * 2

    with pytest.raises(KeyError, match="task"):
        f(prompts=prompts, completions=completions, other=[1, 2, 3])


async def test_trl_async_reward_func(url):
    f = make_async_trl_reward_func(url, task_column="spec")
    out = await f(prompts=["p"] * 2, completions=[GOOD_STDIO, "print(0)"], spec=[
        {"type": "code", "tests": {"kind": "stdio", "cases": [{"stdin": "1 2\n", "stdout": "3\n"}]}}] * 2)
    assert out[0] == pytest.approx(1.0) and out[1] == pytest.approx(0.2)


# ---- verl --------------------------------------------------------------------------------


def test_verl_compute_score_formats(url):
    stdio_gt = json.dumps({"inputs": ["1 2\n", "3 4\n"], "outputs": ["3\n", "7\n"]})
    d = verl_compat.compute_score("codecontests", GOOD_STDIO, stdio_gt, server_url=url)
    assert d["score"] == pytest.approx(1.0) and d["acc"] == 1.0 and d["passed"] == 2 and d["total"] == 2

    call_gt = {"inputs": [[1, 2], [5, 5]], "outputs": [3, 10], "fn_name": "add"}
    d = verl_compat.compute_score("taco", GOOD_ADD, call_gt, server_url=url)
    assert d["score"] == pytest.approx(1.0), d

    # our own task, as dict, as JSON string, or via extra_info
    assert verl_compat.compute_score("x", HALF_ADD, ADD_TASK, server_url=url)["score"] == pytest.approx(0.6)
    assert verl_compat.compute_score("x", HALF_ADD, json.dumps(ADD_TASK), server_url=url)["passed"] == 2
    d = verl_compat.compute_score("x", GOOD_ADD, "ignored", extra_info={"task": ADD_TASK}, server_url=url)
    assert d["score"] == pytest.approx(1.0)


def test_verl_batch_form_keys_are_uniform(url, monkeypatch):
    monkeypatch.setenv("REWARD_SERVER_URL", url)
    outs = verl_compat.compute_score_batch(
        data_sources=["a"] * 3,
        solution_strs=[GOOD_ADD, HALF_ADD, GOOD_STDIO],
        ground_truths=[ADD_TASK, ADD_TASK, {"inputs": ["2 3"], "outputs": ["5"]}],
        extra_infos=[None, None, {"index": 3}],
    )
    assert [o["score"] for o in outs] == [pytest.approx(1.0), pytest.approx(0.6), pytest.approx(1.0)]
    assert len({tuple(sorted(o)) for o in outs}) == 1
