"""Checkers (special judges) through HTTP on a real server and pool, both hosts: every problem of
checker_problems.py (Python and C++ checkers) with several correct programs whose outputs
differ, wrong ones and partial-credit ones, each test's verdict right; a checker that rejects
its own reference, does not compile, or includes testlib.h on a server without one is the task's
error (task_error, reward null, the cause named), counted in /metrics; /readyz says whether a
testlib header is configured; a checker that includes testlib.h builds against the operator's
header (a stand-in written here; the real one where VERIREWARD_TESTLIB_H names it)."""

from __future__ import annotations

import os

import httpx
import pytest

from tests.sandbox.checker_problems import PROBLEMS, Problem
from tests.sandbox.lang_programs import host_options
from tests.server.conftest import kind_params


@pytest.fixture(scope="module", params=kind_params())
def kind(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def url(kind, shared_servers) -> str:
    """The server with toolchains that the language suites share (tests/shared.py)."""
    return shared_servers.get(sandbox=kind, sandbox_options=host_options(kind)).url


def score(url: str, items: list[dict]) -> list[dict]:
    r = httpx.post(url + "/v1/score", json={"items": items}, timeout=600)
    assert r.status_code == 200, r.text
    return r.json()["results"]


def task(p: Problem, language: str = "python") -> dict:
    return {"type": "code", "language": language, "timeout_s": 4.0,
            "tests": {"kind": "stdio", "cases": p.cases, "checker": {"language": p.checker_language, "source": p.checker}}}


def fence(program: str, language: str = "python") -> str:
    return f"```{language}\n{program}\n```"


def test_any_valid_answer_problems(url):
    """Each problem's right programs pass every test though their outputs differ; each wrong one
    gets exactly its statuses; partial credit is the checker's points."""
    assert len(PROBLEMS) >= 20
    assert {p.checker_language for p in PROBLEMS} == {"python", "cpp"}
    items, want = [], []
    for p in PROBLEMS:
        for k, prog in enumerate(p.good):
            items.append({"id": f"{p.name}/good{k}", "completion": fence(prog), "task": task(p)})
            want.append(["passed"] * len(p.cases))
        for k, (prog, statuses) in enumerate(p.bad):
            items.append({"id": f"{p.name}/bad{k}", "completion": fence(prog), "task": task(p)})
            want.append(statuses)
        for k, (prog, statuses) in enumerate(p.cpp):
            items.append({"id": f"{p.name}/cpp{k}", "completion": fence(prog, "cpp"), "task": task(p, "cpp")})
            want.append(statuses)
        for k, (prog, scores) in enumerate(p.partial):
            items.append({"id": f"{p.name}/partial{k}", "completion": fence(prog), "task": task(p)})
            want.append(scores)
    results = score(url, items)
    wrong = []
    for item, res, w in zip(items, results, want):
        if res["status"] != "ok":
            wrong.append((item["id"], res["status"], res["detail"].get("error")))
            continue
        tests = res["detail"]["tests"]
        if isinstance(w[0], float):  # partial credit: a failed test carrying the checker's points
            got = [t.get("score") for t in tests]
            if got != pytest.approx(w) or any(t["status"] != "failed" for t in tests):
                wrong.append((item["id"], tests))
            elif res["reward"] != pytest.approx(0.2 + 0.8 * sum(w) / len(w)):
                wrong.append((item["id"], "reward", res["reward"]))
            continue
        got = [t["status"] for t in tests]
        if got != w:
            wrong.append((item["id"], got, [t["message"][:100] for t in tests]))
        elif all(s == "passed" for s in w) and res["reward"] != pytest.approx(1.0):
            wrong.append((item["id"], "reward", res["reward"]))
        if res["detail"]["flags"]:
            wrong.append((item["id"], "flags", res["detail"]["flags"]))
    assert not wrong, wrong


PERM = PROBLEMS[0]


def _task_with_checker(source: str, language: str = "cpp") -> dict:
    return {"type": "code", "tests": {"kind": "stdio", "cases": PERM.cases, "checker": {"language": language, "source": source}}}


def _metric(url: str, on: str) -> float:
    text = httpx.get(url + "/metrics").text
    for line in text.splitlines():
        if line.startswith(f'reward_server_checker_failures_total{{on="{on}"}}'):
            return float(line.split()[-1])
    return 0.0


def test_checkers_that_are_wrong_are_the_tasks_error(url):
    """A checker that rejects its own reference, one that does not compile, one that crashes on
    the reference, and one that includes testlib.h on a server without a header: task_error,
    reward null, the cause named, never the candidate's 0 nor an infra_error."""
    right = fence(PERM.good[0])
    before = _metric(url, "task")
    cases = {
        "rejects_reference": (_task_with_checker("int main(){return 1;}"), "does not accept test 0's expected answer"),
        "python_rejects_reference": (_task_with_checker("import sys\nsys.exit(2)", "python"), "(pe"),
        "crashes_on_reference": (_task_with_checker("int main(){int*p=nullptr;return *p;}"), "did not finish"),
        "does_not_compile": (_task_with_checker("int main( {"), "compile error"),
        "python_syntax_error": (_task_with_checker("def (:", "python"), "does not accept"),
        "needs_testlib": (_task_with_checker('#include "testlib.h"\nint main(int c,char**v){registerTestlibCmd(c,v);quitf(_ok,"");}'),
                          "testlib.h and this server has no testlib header configured"),
        "unknown_language": (_task_with_checker("x", "cobol"), None),
    }
    items = [{"id": k, "completion": right, "task": t} for k, (t, _) in cases.items() if k != "unknown_language"]
    results = score(url, items)
    for item, res in zip(items, results):
        why = cases[item["id"]][1]
        assert res["status"] == "task_error" and res["reward"] is None, (item["id"], res)
        assert "checker" in res["detail"]["error"] and why in res["detail"]["error"], (item["id"], res["detail"])
    assert _metric(url, "task") >= before + len(items)
    # a language no server runs is refused at the boundary, naming the field
    r = httpx.post(url + "/v1/score", json={"items": [{"completion": right, "task": cases["unknown_language"][0]}]})
    assert r.status_code == 422 and "checker" in r.text, r.text
    ready = httpx.get(url + "/readyz").json()
    assert ready["testlib_header"] is False


def test_reference_check_is_cached_and_a_right_answer_still_passes(url):
    """Identical items after the first reuse the reference check; each still gets its own verdict."""
    t = task(PERM)
    items = [{"id": str(k), "completion": fence(PERM.good[k % len(PERM.good)]), "task": t} for k in range(6)]
    for res in score(url, items):
        assert res["status"] == "ok" and res["reward"] == pytest.approx(1.0), res


# A stand-in for testlib.h, written here (testlib itself is third-party code, never committed):
# the calls the checker below uses, with testlib's exit codes and its "points <x>" line. It
# carries the header path (setting, job message, written beside the source, cache key) in CI;
# VERIREWARD_TESTLIB_H=/path/to/testlib.h runs the same checker against the real one too.
FAKE_TESTLIB = r'''// A stand-in for testlib.h written for these tests (not testlib): the few calls the checker uses.
#pragma once
#include <bits/stdc++.h>
enum TResult { _ok = 0, _wa = 1, _pe = 2, _fail = 3, _points = 7 };
struct InStream {
    std::ifstream f;
    int readInt() { long long x; if (!(f >> x)) { std::fprintf(stderr, "wrong output format expected an integer\n"); std::exit(_pe); } return (int)x; }
    bool seekEof() { f >> std::ws; return f.eof(); }
};
InStream inf, ouf, ans;
void registerTestlibCmd(int argc, char** argv) { if (argc < 4) std::exit(_fail); inf.f.open(argv[1]); ouf.f.open(argv[2]); ans.f.open(argv[3]); }
[[noreturn]] void quitf(TResult r, const char* fmt, ...) {
    va_list a; va_start(a, fmt); std::vfprintf(stderr, fmt, a); va_end(a); std::fputc('\n', stderr); std::exit(r);
}
[[noreturn]] void quitp(double p, const char* fmt, ...) {
    std::fprintf(stderr, "points %.10f ", p); va_list a; va_start(a, fmt); std::vfprintf(stderr, fmt, a); va_end(a);
    std::fputc('\n', stderr); std::exit(_points);
}
'''

TESTLIB_CHECKER = r'''#include "testlib.h"
int main(int argc, char* argv[]) {
    registerTestlibCmd(argc, argv);
    int n = inf.readInt(), k = 0;
    std::vector<int> seen(n + 1);
    while (!ouf.seekEof()) { int x = ouf.readInt(); if (x < 1 || x > n || seen[x]) quitf(_wa, "repeated %d", x); seen[x] = 1; k++; }
    if (k == n) quitf(_ok, "a permutation of %d", n);
    if (k == 0) quitf(_wa, "empty");
    quitp(double(k) / n, "only %d of %d", k, n);
}'''


def _headers() -> list:
    real = os.environ.get("VERIREWARD_TESTLIB_H")
    return ["stand-in", pytest.param("real", marks=pytest.mark.skipif(not real, reason="set VERIREWARD_TESTLIB_H to "
                                                                      "a testlib.h (github.com/MikeMirzayanov/testlib)"))]


@pytest.mark.parametrize("header", _headers())
def test_testlib_checker_with_points(kind, header, shared_servers, tmp_path_factory):
    """A server with a testlib header configured says so on /readyz and builds checkers that
    include it: OK, WA, presentation error and quitp's points (partial credit in the reward)."""
    path = os.environ.get("VERIREWARD_TESTLIB_H", "")
    if header == "stand-in":
        path = str(tmp_path_factory.getbasetemp() / "testlib.h")  # the same path for both hosts: one server each
        with open(path, "w") as f:
            f.write(FAKE_TESTLIB)
    srv = shared_servers.get(sandbox=kind, sandbox_options=host_options(kind), testlib_header=path)
    t = {"type": "code", "tests": {"kind": "stdio", "cases": [{"stdin": "4\n", "stdout": "1 2 3 4\n"}],
                                   "checker": {"source": TESTLIB_CHECKER}}}
    progs = {"ok": "n=int(input());print(*range(n,0,-1))", "half": "print(1, 2)", "rep": "print(1, 1)", "junk": "print('x')"}
    res = {r["id"]: r for r in score(srv.url, [{"id": k, "completion": fence(p), "task": t} for k, p in progs.items()])}
    assert all(r["status"] == "ok" for r in res.values()), res
    assert res["ok"]["reward"] == pytest.approx(1.0)
    assert res["half"]["detail"]["tests"][0]["score"] == pytest.approx(0.5)
    assert res["half"]["reward"] == pytest.approx(0.6)
    assert "repeated 1" in res["rep"]["detail"]["tests"][0]["message"]
    assert "presentation error" in res["junk"]["detail"]["tests"][0]["message"]
    assert httpx.get(srv.url + "/readyz").json()["testlib_header"] is True


def test_testlib_header_setting_is_checked_at_start(tmp_path):
    """A header path that cannot be read refuses the start, naming the setting."""
    from reward_server.settings import Settings

    with pytest.raises(ValueError, match="testlib_header"):
        Settings(testlib_header=tmp_path / "missing.h")
    with pytest.raises(ValueError, match="testlib_header"):
        Settings(testlib_header=tmp_path)  # a directory


JS_RIGHT = "const n=parseInt(require('fs').readFileSync(0,'utf8'));let a=[];for(let i=n;i>=1;i--)a.push(i);console.log(a.join(' '));"
JAVA_RIGHT = ("import java.util.*;public class Main{public static void main(String[] x){int n=new Scanner(System.in).nextInt();"
              "StringBuilder b=new StringBuilder();for(int i=1;i<=n;i++)b.append(i).append('\\n');System.out.print(b);}}")
JAVA_WRONG = "public class Main{public static void main(String[] x){System.out.println(\"1 1\");}}"


def test_checked_java_and_node_programs(url):
    """Java and node programs (which otherwise share one harness process between tests) are
    checked with a process per test; their different right answers pass, a wrong one fails."""
    items = [{"id": "js", "completion": fence(JS_RIGHT, "javascript"), "task": task(PERM, "javascript")},
             {"id": "java", "completion": fence(JAVA_RIGHT, "java"), "task": task(PERM, "java")},
             {"id": "java_wrong", "completion": fence(JAVA_WRONG, "java"), "task": task(PERM, "java")}]
    res = {r["id"]: r for r in score(url, items)}
    assert res["js"]["reward"] == pytest.approx(1.0), res["js"]
    assert res["java"]["reward"] == pytest.approx(1.0), res["java"]
    assert [t["status"] for t in res["java_wrong"]["detail"]["tests"]] == ["failed", "failed"], res["java_wrong"]
