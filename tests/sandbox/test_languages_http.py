"""Languages beyond Python through HTTP on a real server and a real pool: per language a
correct, a wrong, a compile-error, a runtime-error, a time-limit and a memory-limit program on
a stdio problem with several tests, each test with the status a careful judge gives;
SandboxFusion's /run_code with compile_result; /readyz's languages; the compile cache's
counts in /metrics (identical submissions build once)."""

from __future__ import annotations

import asyncio
import base64
import re

import httpx
import pytest

from sandbox.runner import languages
from tests.sandbox.lang_programs import CASES, EXPECTED, PROGRAMS, completion, host_options
from tests.server.conftest import kind_params

LANGS = list(PROGRAMS)


@pytest.fixture(scope="module", params=kind_params())
def url(request, shared_servers):
    """A server whose runners have the toolchains, shared by the language suites (tests/shared.py)."""
    return shared_servers.get(sandbox=request.param, sandbox_options=host_options(request.param)).url


def score(url: str, items: list[dict]) -> list[dict]:
    r = httpx.post(url + "/v1/score", json={"items": items}, timeout=300)
    assert r.status_code == 200, r.text
    return r.json()["results"]


def task(lang: str, **kw) -> dict:
    return {"type": "code", "language": lang, "tests": {"kind": "stdio", "cases": CASES}, "timeout_s": 4.0,
            "memory_mb": 256, **kw}


def test_toolchains_are_installed():
    """The test machine has every toolchain (.ci/run installs them): a missing one fails here."""
    assert all(languages.available().values()), languages.available()


@pytest.mark.parametrize("lang", LANGS)
def test_six_programs_per_language(url, lang):
    kinds = list(EXPECTED)
    items = [{"id": k, "completion": completion(lang, PROGRAMS[lang][k]), "task": task(lang)} for k in kinds]
    results = score(url, items)
    for k, res in zip(kinds, results):
        assert res["status"] == "ok", (k, res)
        d = res["detail"]
        got = [t["status"] for t in d["tests"]]
        assert got == EXPECTED[k], (lang, k, got, d)
        assert d["extract_mode"] == f"last_{lang}_fence"
        assert d["compile"]["ok"] is (k != "compile_error")
        assert d["syntax_ok"] is (k != "compile_error")
        if k == "correct":
            assert res["reward"] == pytest.approx(1.0)
        if k == "compile_error":
            assert res["reward"] == 0.0
            assert d["load_message"].startswith("compile error:")
            assert d["compile"]["stderr"], d
        if k in ("runtime_error", "time_limit", "memory_limit"):
            assert 0 < res["reward"] < 1


def test_aliases_sandbox_fusion_clients_send(url):
    """nodejs, c++, golang: the names other stacks send mean our languages."""
    res = score(url, [{"completion": completion("javascript", PROGRAMS["javascript"]["correct"]),
                       "task": task("nodejs")},
                      {"completion": "```c++\n" + PROGRAMS["cpp"]["correct"] + "```", "task": task("c++")}])
    assert [r["reward"] for r in res] == [1.0, 1.0], res


def test_bad_language_is_a_4xx_naming_the_field(url):
    r = httpx.post(url + "/v1/score", json={"items": [{"completion": "x", "task": task("cobol")}]}, timeout=30)
    assert r.status_code == 422 and "language" in r.text and "cobol" in r.text, r.text
    bad = {"type": "code", "language": "cpp", "tests": {"kind": "assert", "asserts": ["assert f() == 1"]}}
    r = httpx.post(url + "/v1/score", json={"items": [{"completion": "x", "task": bad}]}, timeout=30)
    assert r.status_code == 422 and "stdio" in r.text, r.text


def test_readyz_lists_languages(url):
    body = httpx.get(url + "/readyz", timeout=10).json()
    assert set(body["languages"]) >= {"python", "cpp", "java", "go", "rust", "javascript"}, body


def run_code(url: str, code: str, language: str, stdin: str = "", **kw) -> dict:
    body = {"code": code, "language": language, "stdin": stdin, "run_timeout": 3, "compile_timeout": 20, **kw}
    r = httpx.post(url + "/run_code", json=body, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()


SF_NAMES = {"cpp": "cpp", "java": "java", "go": "go", "rust": "rust", "javascript": "nodejs"}


@pytest.mark.parametrize("lang", LANGS)
def test_run_code_every_language(url, lang):
    ok = run_code(url, PROGRAMS[lang]["correct"], SF_NAMES[lang], "20 22\n")
    assert ok["status"] == "Success", ok
    assert ok["run_result"]["stdout"].strip() == "42"
    assert ok["compile_result"]["status"] == "Finished" and ok["compile_result"]["return_code"] == 0
    bad = run_code(url, PROGRAMS[lang]["compile_error"], SF_NAMES[lang], "1 2\n")
    assert bad["status"] == "Failed" and bad["run_result"] is None, bad
    assert bad["compile_result"]["return_code"] != 0 and bad["compile_result"]["stderr"], bad
    crash = run_code(url, PROGRAMS[lang]["runtime_error"], SF_NAMES[lang], "0 1\n")
    assert crash["status"] == "Failed" and crash["run_result"]["return_code"] != 0, crash
    slow = run_code(url, PROGRAMS[lang]["time_limit"], SF_NAMES[lang], "5 1\n", run_timeout=1)
    assert slow["status"] == "Failed" and slow["run_result"]["status"] == "TimeLimitExceeded", slow


def test_run_code_compiles_with_the_files_sent(url):
    """A header sent as a file is what the compiler includes (and it is part of the cache key)."""
    prog = '#include <cstdio>\n#include "k.h"\nint main() { printf("%d\\n", K); }\n'
    outs = []
    for k in (7, 8):
        files = {"k.h": base64.b64encode(f"#define K {k}\n".encode()).decode()}
        outs.append(run_code(url, prog, "cpp", files=files)["run_result"]["stdout"].strip())
    assert outs == ["7", "8"]


def test_identical_submissions_build_once(url):
    """A GRPO group (8 completions of one prompt, some identical) sent at once: each distinct
    program is built at most once per runner; the rest are hits or merged; /metrics counts them."""
    variant = PROGRAMS["cpp"]["correct"].replace("endl", "'\\n'")
    programs = [PROGRAMS["cpp"]["correct"] + "// group\n"] * 6 + [variant + "// group\n"] * 2
    items = [{"completion": completion("cpp", p), "task": task("cpp")} for p in programs]
    before = _cache_counts(url)
    res = score(url, items)
    assert [r["reward"] for r in res] == [1.0] * 8
    after = _cache_counts(url)
    delta = {k: after.get(k, 0) - before.get(k, 0) for k in ("hit", "miss", "merged")}
    assert sum(delta.values()) == 8, delta
    assert delta["miss"] <= 2 * 2, delta  # two distinct programs, at most once per runner (pool of 2)
    assert delta["hit"] + delta["merged"] >= 4, delta


def _cache_counts(url: str) -> dict[str, float]:
    text = httpx.get(url + "/metrics", timeout=10).text
    out: dict[str, float] = {}
    for m in re.finditer(r'reward_server_compile_cache_total\{cache="(\w+)",language="cpp"\} ([0-9.e+]+)', text):
        out[m.group(1)] = float(m.group(2))
    return out


def test_concurrent_languages_do_not_disturb_each_other(url):
    """Every language at once on the same pool: each still gets its own right verdicts."""
    async def go():
        async with httpx.AsyncClient(timeout=300) as c:
            reqs = [c.post(url + "/v1/score", json={"items": [
                {"completion": completion(lang, PROGRAMS[lang]["correct"]), "task": task(lang)}]}) for lang in LANGS]
            return await asyncio.gather(*reqs)

    for r in asyncio.run(go()):
        assert r.json()["results"][0]["reward"] == 1.0, r.text


@pytest.mark.parametrize("kind", [p.values[0] for p in kind_params()])
def test_a_host_without_toolchains_answers_a_clear_error_per_item(kind, shared_servers):
    """A host with languages false (no toolchain pool: bwrap's interpreter-only view, docker's
    plain runner image): /readyz says python only, a C++ item gets the reason on each test,
    python still scores, no crash."""
    import time

    s = shared_servers.get(sandbox=kind, pool_size=1, sandbox_options={"languages": False})  # shared: only scored on
    deadline = time.monotonic() + 10
    while "cpp" in httpx.get(s.url + "/readyz", timeout=10).json().get("languages", ["cpp"]):
        assert time.monotonic() < deadline, "readyz still lists cpp"
        time.sleep(0.2)
    assert httpx.get(s.url + "/readyz", timeout=10).json()["languages"] == ["python"]
    res = score(s.url, [{"completion": completion("cpp", PROGRAMS["cpp"]["correct"]), "task": task("cpp")},
                        {"completion": "```python\nprint(sum(map(int, input().split())))\n```",
                         "task": task("python")}])
    assert res[0]["status"] == "ok" and res[0]["reward"] == 0.0, res[0]
    assert [t["status"] for t in res[0]["detail"]["tests"]] == ["error"] * 3
    assert "toolchain is not installed" in res[0]["detail"]["tests"][0]["message"]
    assert res[1]["reward"] == 1.0, res[1]
    sf = run_code(s.url, PROGRAMS["cpp"]["correct"], "cpp", "1 2\n")
    assert sf["status"] == "SandboxError" and "not installed" in sf["message"], sf
