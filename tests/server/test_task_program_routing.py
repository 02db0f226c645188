"""A Python program judged by a task program in another language (a C++ checker or
interactor) goes to the pool that can build it: the default server's Python-only runner
cannot, and the item would be a task_error for a sound task. Through HTTP on both hosts."""

from __future__ import annotations

import httpx
import pytest

from tests.conftest import kind_params

pytestmark = pytest.mark.parametrize("kind", kind_params())

# accepts any permutation of 1..n (the reference prints 1..n; a candidate may print another)
PERM_CHECKER = r"""
#include <cstdio>
#include <vector>
int main(int argc, char** argv) {
    FILE* in = fopen(argv[1], "r"); FILE* out = fopen(argv[2], "r");
    int n; if (fscanf(in, "%d", &n) != 1) return 3;
    std::vector<int> seen(n + 1, 0);
    for (int i = 0; i < n; i++) { int x; if (fscanf(out, "%d", &x) != 1 || x < 1 || x > n || seen[x]++) return 1; }
    int extra; if (fscanf(out, "%d", &extra) == 1) return 1;
    return 0;
}
"""
TASK = {"type": "code", "language": "python",
        "tests": {"kind": "stdio", "cases": [{"stdin": "4\n", "stdout": "1 2 3 4\n"}, {"stdin": "3\n", "stdout": "1 2 3\n"}],
                  "checker": {"language": "cpp", "source": PERM_CHECKER}}}
REVERSED = "```python\nn = int(input())\nprint(*range(n, 0, -1))\n```"
REPEATS = "```python\nn = int(input())\nprint(*([1] * n))\n```"


def test_python_program_with_a_cpp_checker(shared_servers, kind):
    srv = shared_servers.get(sandbox=kind)
    items = [{"id": "rev", "completion": REVERSED, "task": TASK}, {"id": "rep", "completion": REPEATS, "task": TASK}]
    r = httpx.post(srv.url + "/v1/score", json={"items": items}, timeout=180)
    assert r.status_code == 200, r.text
    rev, rep = r.json()["results"]
    assert rev["status"] == "ok" and rev["reward"] == 1.0, rev
    assert rep["status"] == "ok" and rep["detail"]["passed"] == 0, rep
