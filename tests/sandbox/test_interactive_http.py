"""Interactive problems through HTTP on a real server and pool, both hosts: per problem (interactors
in Python and C++, fixed and adaptive, tests/sandbox/interactive_problems.py) a correct, a wrong, an
over-the-budget, a deadlocking and a crashing program (Python and C++), each test with the status a
testlib judge gives; an interactor that does not compile is the task's error; one that breaks on a
test fails that test, flagged; a checker judges the interactor's output file after its OK."""

from __future__ import annotations

import httpx
import pytest

from tests.sandbox.interactive_problems import GUESS_OK, GUESS_PY, PROBLEMS, expected_status
from tests.sandbox.lang_programs import host_options
from tests.server.conftest import kind_params

FENCE = {"python": "python", "cpp": "cpp", "javascript": "javascript"}


@pytest.fixture(scope="module", params=kind_params())
def url(request, shared_servers):
    """A server whose runners have the toolchains, shared with the language suites (tests/shared.py)."""
    return shared_servers.get(sandbox=request.param, sandbox_options=host_options(request.param)).url


def score(url: str, items: list[dict]) -> list[dict]:
    r = httpx.post(url + "/v1/score", json={"items": items}, timeout=300)
    assert r.status_code == 200, r.text
    return r.json()["results"]


def item(lang: str, program: str, task: dict, ident: str = "") -> dict:
    return {"id": ident, "completion": f"```{FENCE[lang]}\n{program}```\n", "task": task}


@pytest.mark.parametrize("problem", PROBLEMS, ids=[p.name for p in PROBLEMS])
def test_every_kind_of_program_gets_its_verdict(url, problem):
    items = [item(lang, src, problem.task(lang, timeout_s=1.0), kind) for kind, (lang, src) in problem.programs.items()]
    for res in score(url, items):
        kind = res["id"]
        assert res["status"] == "ok", (kind, res)
        tests = res["detail"]["tests"]
        statuses = [t["status"] for t in tests]
        want = expected_status(kind)
        if want == "passed":
            assert statuses == ["passed"] * len(tests), (problem.name, kind, tests)
            assert res["reward"] == pytest.approx(1.0), (kind, res)
        else:
            assert statuses[0] == want, (problem.name, kind, tests, res["detail"].get("stderr"))
            assert res["reward"] < 1.0, (kind, res)
        if want == "timeout":
            assert "deadlock" in tests[0]["message"], tests[0]
            assert statuses[1:] == ["skipped"] * (len(tests) - 1)  # stop_on_timeout: one timeout per item
        if want == "failed":
            assert "interactor" in tests[0]["message"], tests[0]
        assert "interactor_failed" not in res["detail"]["flags"], (kind, res["detail"])


def test_an_interactor_that_does_not_compile_is_the_tasks_error(url):
    for lang, src in (("cpp", "int main( {"), ("python", "def broken(:\n")):
        task = PROBLEMS[0].task("python")
        task["tests"]["interactor"] = {"language": lang, "source": src}
        [res] = score(url, [item("python", GUESS_OK, task)])
        assert res["status"] == "task_error" and res["reward"] is None, res
        assert "interactor" in str(res), res


BROKEN_ON_SECOND = GUESS_PY.replace('n, x, q = map(int, open(sys.argv[1]).read().split())',
                                    'n, x, q = map(int, open(sys.argv[1]).read().split())\n'
                                    'if n == 1000: import os; os.abort()\n'
                                    'if n == 1: sys.exit(3)')


def test_an_interactor_that_breaks_on_a_test_fails_that_test_flagged(url):
    task = PROBLEMS[0].task("python")
    task["tests"]["interactor"]["source"] = BROKEN_ON_SECOND
    [res] = score(url, [item("python", GUESS_OK, task)])
    d = res["detail"]
    assert res["status"] == "ok" and [t["status"] for t in d["tests"]] == ["passed", "failed", "failed"], d
    assert "the interactor failed" in d["tests"][1]["message"] and "SIGABRT" in d["tests"][1]["message"], d
    assert "FAIL" in d["tests"][2]["message"], d
    assert "interactor_failed" in d["flags"], d
    assert 0 < res["reward"] < 1


CHECKER = r'''
import sys
inp, out, ans = (open(p).read().split() for p in sys.argv[1:4])
# the interactor's output file holds how many questions were asked: at most half the budget passes
asked, budget = int(out[0]), int(inp[2])
sys.exit(0 if 2 * asked <= budget + 1 else 1)
'''


def test_a_checker_judges_the_interactors_output_file(url):
    task = PROBLEMS[0].task("python")
    task["tests"]["checker"] = {"language": "python", "source": CHECKER}
    task["tests"]["cases"] = [{"stdin": "100 37 14", "stdout": "0\n"}, {"stdin": "100 1 14", "stdout": "0\n"}]
    [res] = score(url, [item("python", GUESS_OK, task)])
    d = res["detail"]
    # binary search finds 37 in 3 questions and 1 in 6 (at most 7.5 pass): both pass the checker
    assert [t["status"] for t in d["tests"]] == ["passed", "passed"], d
    task["tests"]["cases"] = [{"stdin": "100 1 8", "stdout": "0\n"}]
    [res] = score(url, [item("python", GUESS_OK, task)])
    assert [t["status"] for t in res["detail"]["tests"]] == ["failed"], res  # 6 questions > 4.5: the interactor's OK, the checker's WA
    assert "checker" in res["detail"]["tests"][0]["message"], res


# the interactor spends 1.2 s of CPU before it answers: the program's limit (1 s) counts its own CPU only
SLOW_INTERACTOR = GUESS_PY.replace("print(n, q, flush=True)",
                                   "import time\nt = time.process_time()\nwhile time.process_time() - t < 1.2: pass\n"
                                   "print(n, q, flush=True)")


def test_the_programs_time_is_its_own_cpu(url):
    task = PROBLEMS[0].task("python", timeout_s=1.0)
    task["tests"]["interactor"]["source"] = SLOW_INTERACTOR
    task["tests"]["cases"] = task["tests"]["cases"][:1]
    spin = "import time\nt = time.process_time()\nwhile time.process_time() - t < 2: pass\n" + GUESS_OK
    res = [*score(url, [item("python", GUESS_OK, task, "honest")]), *score(url, [item("python", spin, task, "spins")])]
    assert [t["status"] for t in res[0]["detail"]["tests"]] == ["passed"], res[0]["detail"]["tests"]
    assert [t["status"] for t in res[1]["detail"]["tests"]] == ["timeout"], res[1]
    assert "CPU time limit" in res[1]["detail"]["tests"][0]["message"], res[1]


# testlib's quitp: exit 7, "points <value>" on stderr: half credit for a search over half the budget
POINTS_INTERACTOR = GUESS_PY.replace('''        out.write(f"{asked}\\n"); out.close()''', '''        out.write(f"{asked}\\n"); out.close()
        if 2 * asked > q:
            print("points 0.5 slow search", file=sys.stderr); sys.exit(7)''')


def test_an_interactors_points_are_partial_credit(url):
    task = PROBLEMS[0].task("python")
    task["tests"]["interactor"]["source"] = POINTS_INTERACTOR
    task["tests"]["cases"] = [{"stdin": "100 50 12", "stdout": ""}, {"stdin": "100 1 12", "stdout": ""}]
    [res] = score(url, [item("python", GUESS_OK, task)])
    d = res["detail"]
    # 50 is found at once (passed); 1 takes 6 questions, over half of 12? no: 6 <= 6 -> passed too
    assert [t["status"] for t in d["tests"]] == ["passed", "passed"], d
    task["tests"]["cases"] = [{"stdin": "100 1 10", "stdout": ""}]
    [res] = score(url, [item("python", GUESS_OK, task)])
    [t] = res["detail"]["tests"]
    assert t["status"] == "failed" and t["score"] == pytest.approx(0.5), res
    assert 0 < res["reward"] < 1
