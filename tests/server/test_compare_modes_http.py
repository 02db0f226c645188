"""The comparison modes through HTTP on a live server (both hosts): for every mode, one output
that passes under it and fails under another, in one /v1/score batch; a per-case override;
/submit's `config.compare`; an unknown mode is a 422 naming the field; /readyz and OpenAPI
list the modes."""

from __future__ import annotations

import httpx
import pytest

from sandbox.runner.compare_modes import MODES

# mode, output, expected, another mode under which the same output fails
EXAMPLES = [
    ("lines", "1 2  \n\n", "1 2", "testlib:fcmp"),
    ("tokens", "1\n2\n", "1 2\n", "lines"),
    ("codecontests", "YES 0.333333\n", "yes 0.3333333\n", "lines"),
    ("sandboxfusion", "Yes\n", "YES\n", "livecodebench"),
    ("livecodebench", "1.50 2\n", "1.5 2.0\n", "lines"),
    ("apps", "2 1\n", "1 2\n", "prime_code"),
    ("taco", "b a\n", "a\nb\n", "apps"),
    ("prime_code", "1.000000001\n", "1\n", "livecodebench"),
    ("testlib:wcmp", "1\n2\n", "1 2\n", "testlib:lcmp"),
    ("testlib:lcmp", "1   2\n", "1 2\n", "testlib:fcmp"),
    ("testlib:fcmp", "x y\n", "x y\n", "testlib:ncmp"),
    ("testlib:ncmp", "1 2 3\n", "1\n2\n3\n", "testlib:lcmp"),
    ("testlib:uncmp", "3 1 2\n", "1 2 3\n", "testlib:ncmp"),
    ("testlib:yesno", "yes\n", "YES\n", "testlib:fcmp"),
    ("testlib:rcmp4", "3.14165\n", "3.1416\n", "testlib:rcmp6"),
    ("testlib:rcmp6", "3.1415931\n", "3.1415926\n", "testlib:rcmp9"),
    ("testlib:rcmp9", "1000000000.9\n", "1000000000\n", "lines"),
    ("testlib:hcmp", "123456789012345678901234567890\n", "123456789012345678901234567890\n", "testlib:ncmp"),
]


def printing(text: str) -> str:
    return f"```python\nimport sys\nsys.stdout.write({text!r})\n```\n"


def task(expected: str, compare: str, **more) -> dict:
    return {"type": "code", "timeout_s": 10, "tests": {"kind": "stdio", "compare": compare, **more,
                                                       "cases": [{"stdin": "", "stdout": expected}]}}


def test_every_mode_has_an_output_it_passes_and_another_mode_fails(url):
    assert {e[0] for e in EXAMPLES} == set(MODES)
    items = []
    for mode, out, exp, other in EXAMPLES:
        items.append({"id": f"{mode}/pass", "completion": printing(out), "task": task(exp, mode)})
        items.append({"id": f"{other}/fail-for-{mode}", "completion": printing(out), "task": task(exp, other)})
    resp = httpx.post(url + "/v1/score", json={"items": items}, timeout=180)
    assert resp.status_code == 200, resp.text
    got = {r["id"]: r for r in resp.json()["results"]}
    wrong = []
    for item in items:
        r = got[item["id"]]
        passed = r["status"] == "ok" and r["detail"]["passed"] == 1
        if passed is not item["id"].split("/")[1].startswith("pass"):
            wrong.append((item["id"], r["status"], r.get("detail", {}).get("tests")))
    assert not wrong, wrong


def test_a_case_may_name_its_own_mode(url):
    t = task("1 2\n", "lines")
    t["tests"]["cases"] = [{"stdin": "", "stdout": "1 2\n", "compare": "tokens"}, {"stdin": "", "stdout": "1 2\n"}]
    resp = httpx.post(url + "/v1/score", json={"items": [{"id": "x", "completion": printing("1\n2\n"), "task": t}]},
                      timeout=60)
    assert resp.status_code == 200, resp.text
    tests = resp.json()["results"][0]["detail"]["tests"]
    assert [x["status"] for x in tests] == ["passed", "failed"], tests


def test_an_unknown_mode_is_a_422_naming_the_field(url):
    resp = httpx.post(url + "/v1/score", json={"items": [{"completion": printing("1"), "task": task("1", "exact")}]},
                      timeout=60)
    assert resp.status_code == 422 and "compare" in resp.text and "unknown comparison mode" in resp.text, resp.text
    body = {"completion": printing("1"), "config": {"language": "python", "compare": "nope",
                                                    "provided_data": {"test": [{"input": {"stdin": ""},
                                                                                "output": {"stdout": "1"}}]}}}
    resp = httpx.post(url + "/submit", json=body, timeout=60)
    assert resp.status_code == 422 and "compare" in resp.text, resp.text


@pytest.mark.parametrize(("compare", "accepted"), [(None, False), ("sandboxfusion", True), ("lines", False)])
def test_submit_takes_the_mode_as_an_extension(url, compare, accepted):
    """SandboxFusion's /submit here compares by `lines` (as before) unless config.compare names a mode."""
    config = {"language": "python", "provided_data": {"test": [{"input": {"stdin": ""}, "output": {"stdout": "YES\n"}}]}}
    if compare is not None:
        config["compare"] = compare
    resp = httpx.post(url + "/submit", json={"completion": printing("yes\n"), "config": config}, timeout=60)
    assert resp.status_code == 200, resp.text
    assert resp.json()["accepted"] is accepted


def test_readyz_and_openapi_list_the_modes(url):
    body = httpx.get(url + "/readyz", timeout=30).json()
    assert body["compare_modes"] == list(MODES)
    spec = httpx.get(url + "/openapi.json", timeout=30).text
    assert "testlib:rcmp9" in spec and "livecodebench" in spec


@pytest.mark.parametrize(("lang", "program"), [
    ("cpp", '#include <cstdio>\nint main() { std::printf("YES 0.333333\\n"); return 0; }\n'),
    ("javascript", 'process.stdout.write("YES 0.333333\\n");\n'),  # node's harness: tests in one process
])
def test_other_languages_compare_by_the_mode(url, lang, program):
    items = [{"id": mode, "completion": f"```{lang}\n{program}```\n",
              "task": {**task("yes 0.3333333\n", mode), "language": lang}} for mode in ("codecontests", "lines")]
    resp = httpx.post(url + "/v1/score", json={"items": items}, timeout=300)
    assert resp.status_code == 200, resp.text
    got = {r["id"]: r["detail"]["tests"][0]["status"] for r in resp.json()["results"]}
    assert got == {"codecontests": "passed", "lines": "failed"}, resp.text
