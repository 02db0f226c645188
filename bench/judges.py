"""Judges side by side, in one run, through HTTP on a real server (bwrap host): what a checker
costs per test, and what a checked completion costs against SandboxFusion's pattern.

Rows (CPU is the sandbox's: the runner processes' tree under this process, what they reaped
included, read from /proc before and after; the server's own CPU apart; wall is sequential):

    unchecked     a C++ completion of N stdio tests compared by the runner (`lines`), built once
    checked       the same with a C++ checker (testlib's protocol, no testlib.h): each test's
                  output checked in a process of its own as the task uid; the checker built and
                  its reference checks done in a warm-up (a GRPO group repeats its task)
    checked_new   a checked completion as a GRPO step sees it: a new program (built: a cache
                  miss) checked by the task's cached checker
    interactive   the unchecked row's program and tests judged by a C++ interactor (it sends the
                  input, reads the answer): the interactor as the task uid, the supervisor relaying
    sf_pattern    SandboxFusion's pattern, emulated through our own /run_code: one request per
                  test to run the program and one to run the checker on the files, each request
                  compiling its source (a fresh number in the source defeats our compile cache,
                  as SandboxFusion has none; our precompiled bits/stdc++.h still serves these
                  compiles, which SandboxFusion's image lacks: this row is cheaper than theirs)

Targets: checked <= 2x unchecked per test (CPU); interactive <= 3x unchecked; checked_new >= 20x cheaper than sf_pattern per
completion. ROWS is the list of row functions: an interactive row goes there (same accounting).

Usage:
    python bench/judges.py                  # N=20 tests, 8 completions per row, 1 for sf_pattern
    python bench/judges.py --tests 20 --completions 8 --sf 1 --json out.json
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.languages import tree_cpu  # noqa: E402
from reward_server.local import InProcessServer  # noqa: E402

PROGRAM = """#include <bits/stdc++.h>
using namespace std;
int main() {{ int n; cin >> n; vector<long long> v(n); for (auto& x : v) cin >> x;
  sort(v.begin(), v.end(), greater<long long>()); long long salt = {salt}; (void)salt;
  for (auto x : v) cout << x << ' '; cout << '\\n'; }}
"""
# any order of the multiset is right (the reference is the program's own order, so the unchecked
# row passes too);
# reads argv's files, or fixed names where run by /run_code (no arguments there)
CHECKER = """#include <bits/stdc++.h>
using namespace std;
int main(int argc, char** argv) {{ long long salt = {salt}; (void)salt;
  ifstream in(argc > 3 ? argv[1] : "input.txt"), out(argc > 3 ? argv[2] : "output.txt"), ans(argc > 3 ? argv[3] : "answer.txt");
  int n; in >> n; vector<long long> a(n), b; for (auto& x : a) in >> x; long long x;
  while (out >> x) b.push_back(x); if ((int)b.size() != n) return 1;
  sort(a.begin(), a.end()); sort(b.begin(), b.end()); return a == b ? 0 : 1; }}
"""


# the same sorting, judged interactively: the interactor sends the test's input, reads the program's
# answer and says whether it is the multiset in descending order (testlib's exit codes)
INTERACTOR = """#include <bits/stdc++.h>
using namespace std;
int main(int argc, char** argv) {{ long long salt = {salt}; (void)salt;
  ifstream in(argv[1]); int n; in >> n; vector<long long> a(n); for (auto& x : a) in >> x;
  printf("%d\\n", n); for (auto x : a) printf("%lld ", x); printf("\\n"); fflush(stdout);
  vector<long long> b(n); for (auto& x : b) if (scanf("%lld", &x) != 1) return 1;
  sort(a.begin(), a.end(), greater<long long>()); ofstream(argv[2]) << n << "\\n"; return a == b ? 0 : 1; }}
"""


def cases(n: int) -> list[dict]:
    out = []
    for i in range(n):
        v = [(i * 7919 + k * 104729) % 1000 for k in range(10)]
        out.append({"stdin": f"{len(v)}\n{' '.join(map(str, v))}\n", "stdout": " ".join(map(str, sorted(v, reverse=True))) + "\n"})
    return out


class Bench:
    def __init__(self, url: str, n_tests: int) -> None:
        self.url = url
        self.client = httpx.Client(timeout=600)
        self.tests = cases(n_tests)
        self.salt = 0

    def fresh(self) -> int:
        self.salt += 1
        return int(time.time() * 1000) * 1000 + self.salt

    def sandbox_cpu(self) -> float:
        own = os.times()
        return tree_cpu(os.getpid()) - (own.user + own.system)

    def measure(self, fn: Callable[[], None], times: int) -> tuple[float, float]:
        """(sandbox CPU s, wall s) per call of `fn`."""
        c0, t0 = self.sandbox_cpu(), time.perf_counter()
        for _ in range(times):
            fn()
        return (self.sandbox_cpu() - c0) / times, (time.perf_counter() - t0) / times

    def score(self, program: str, checker: str | None) -> dict:
        tests: dict = {"kind": "stdio", "cases": self.tests}
        if checker is not None:
            tests["checker"] = {"language": "cpp", "source": checker}
        task = {"type": "code", "language": "cpp", "tests": tests, "timeout_s": 5.0, "memory_mb": 256}
        r = self.client.post(self.url + "/v1/score", json={"items": [{"completion": f"```cpp\n{program}\n```", "task": task}]})
        res = r.json()["results"][0]
        assert res["status"] == "ok" and res["detail"]["passed"] == len(self.tests), res
        return res

    def run_code(self, code: str, stdin: str = "", files: dict[str, str] | None = None) -> dict:
        body = {"code": code, "language": "cpp", "stdin": stdin, "compile_timeout": 60, "run_timeout": 10,
                "files": {k: base64.b64encode(v.encode()).decode() for k, v in (files or {}).items()}}
        r = self.client.post(self.url + "/run_code", json=body)
        out = r.json()
        assert out.get("status") == "Success", out
        return out


def unchecked_row(b: Bench, completions: int) -> dict:
    program = PROGRAM.format(salt=1)
    b.score(program, None)  # built once
    cpu, wall = b.measure(lambda: b.score(program, None), completions)
    return {"row": "unchecked", "cpu_per_test_ms": cpu / len(b.tests) * 1e3, "wall_per_test_ms": wall / len(b.tests) * 1e3}


def checked_row(b: Bench, completions: int) -> dict:
    program, checker = PROGRAM.format(salt=1), CHECKER.format(salt=1)
    for _ in range(4):  # the checker built, each slot's reference checks done
        b.score(program, checker)
    cpu, wall = b.measure(lambda: b.score(program, checker), completions)
    return {"row": "checked", "cpu_per_test_ms": cpu / len(b.tests) * 1e3, "wall_per_test_ms": wall / len(b.tests) * 1e3}


def interactive_row(b: Bench, completions: int) -> dict:
    """The unchecked row's program and tests, judged by a C++ interactor: per test two processes
    (the interactor as the task uid, the program) and the supervisor's relay between them."""
    program, interactor = PROGRAM.format(salt=1), INTERACTOR.format(salt=1)

    def one() -> None:
        tests = {"kind": "stdio", "cases": b.tests, "interactor": {"language": "cpp", "source": interactor}}
        task = {"type": "code", "language": "cpp", "tests": tests, "timeout_s": 5.0, "memory_mb": 256}
        r = b.client.post(b.url + "/v1/score", json={"items": [{"completion": f"```cpp\n{program}\n```", "task": task}]})
        res = r.json()["results"][0]
        assert res["status"] == "ok" and res["detail"]["passed"] == len(b.tests), res

    one()  # the interactor built
    cpu, wall = b.measure(one, completions)
    return {"row": "interactive", "cpu_per_test_ms": cpu / len(b.tests) * 1e3, "wall_per_test_ms": wall / len(b.tests) * 1e3}


def checked_new_row(b: Bench, completions: int) -> dict:
    checker = CHECKER.format(salt=1)
    cpu, wall = b.measure(lambda: b.score(PROGRAM.format(salt=b.fresh()), checker), completions)
    return {"row": "checked_new", "cpu_per_completion_s": cpu, "wall_per_completion_s": wall}


def sf_pattern_row(b: Bench, completions: int) -> dict:
    def one() -> None:
        for case in b.tests:  # the program compiled in each request too (SandboxFusion keeps no build)
            out = b.run_code(PROGRAM.format(salt=b.fresh()), case["stdin"])["run_result"]["stdout"]
            files = {"input.txt": case["stdin"], "output.txt": out, "answer.txt": case["stdout"]}
            b.run_code(CHECKER.format(salt=b.fresh()), "", files)  # compiled each time, as SandboxFusion does

    cpu, wall = b.measure(one, completions)
    return {"row": "sf_pattern", "cpu_per_completion_s": cpu, "wall_per_completion_s": wall}


ROWS: list[Callable[[Bench, int], dict]] = [unchecked_row, checked_row, checked_new_row, interactive_row]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tests", type=int, default=20)
    ap.add_argument("--completions", type=int, default=8)
    ap.add_argument("--sf", type=int, default=1, help="completions in SandboxFusion's pattern (each is 2 x tests compiles)")
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    srv = InProcessServer.start(sandbox="bwrap", sandbox_options={"languages": True}, pool_size=1)
    try:
        b = Bench(srv.url, a.tests)
        rows = [row(b, a.completions) for row in ROWS]
        if a.sf:
            rows.append(sf_pattern_row(b, a.sf))
    finally:
        srv.stop()
    by = {r["row"]: r for r in rows}
    print(f"{a.tests} tests per completion, bwrap host, {os.cpu_count()} CPUs")
    for r in rows:
        print("  ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in r.items()))
    ratio = by["checked"]["cpu_per_test_ms"] / by["unchecked"]["cpu_per_test_ms"]
    print(f"checked / unchecked CPU per test: {ratio:.2f}x (target <= 2x)")
    if "interactive" in by:
        ratio = by["interactive"]["cpu_per_test_ms"] / by["unchecked"]["cpu_per_test_ms"]
        print(f"interactive / unchecked CPU per test: {ratio:.2f}x (target <= 3x)")
    if "sf_pattern" in by:
        gain = by["sf_pattern"]["cpu_per_completion_s"] / by["checked_new"]["cpu_per_completion_s"]
        print(f"sf_pattern / checked_new CPU per completion: {gain:.1f}x cheaper (target >= 20x)")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
