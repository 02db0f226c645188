"""Data set rows as tasks (reward_server.datasets): each format's row, written here in its
published schema (not copied data), turned into our task with the data set's comparison mode,
limits and checker; a row that does not fit names its field (422 through the API). Then
through HTTP on each host: honest and wrong programs scored from rows of each format, sent as
`{"type": "dataset"}` tasks, through verl's and TRL's functions (routed by `data_source`) and
OpenRLHF's labels. The server-wide `time_scale` is seen to move a row's time limit."""

from __future__ import annotations

import base64
import json
import os
import pickle
import zlib

import httpx
import pytest

from reward_server import datasets
from reward_server.datasets import RowError, codeforces, livecodebench
from reward_server.grading.code import build_job
from reward_server.integrations.trl import make_trl_reward_func
from reward_server.integrations.verl import compute_score_batch
from reward_server.labels import task_of
from reward_server.schemas import CodeTask
from tests.server.conftest import kind_params

# ---------------------------------------------------------------- rows, in each data set's schema

CC_ROW = {  # deepmind/code_contests: a sum of two numbers
    "name": "1_A. Sum", "description": "Print a+b.", "source": 2, "difficulty": 7,
    "public_tests": {"input": ["1 2\n"], "output": ["3\n"]},
    "private_tests": {"input": ["10 -4\n"], "output": ["6\n"]},
    "generated_tests": {"input": ["0 0\n", "1000000000 1000000000\n"], "output": ["0\n", "2000000000\n"]},
    "solutions": {"language": [3, 2], "solution": ["print(sum(map(int, input().split())))", "..."]},
    "incorrect_solutions": {"language": [], "solution": []},
    "cf_contest_id": 1, "cf_index": "A", "cf_points": 500.0, "cf_rating": 800, "cf_tags": ["math"],
    "is_description_translated": False, "untranslated_description": "",
    "time_limit": {"seconds": 2, "nanos": 500000000}, "memory_limit_bytes": 256 << 20,
    "input_file": "", "output_file": "",
}
APPS_STDIO_ROW = {  # codeparrot/apps: stdin/stdout tests, input_output a JSON string
    "problem_id": 11, "question": "Reverse the line.", "solutions": json.dumps(["print(input()[::-1])"]),
    "input_output": json.dumps({"inputs": ["abc\n", "xy\n"], "outputs": ["cba\n", "yx\n"]}),
    "difficulty": "introductory", "url": "https://example.invalid/11", "starter_code": "",
}
TACO_CALL_ROW = {  # BAAI/TACO: a call-based row (fn_name), outputs wrapped in a one-element list
    "question": "Square it.", "solutions": "[]", "starter_code": "def square(n):\n    ",
    "input_output": json.dumps({"fn_name": "square", "inputs": [[3], [-4]], "outputs": [[9], [16]]}),
    "difficulty": "EASY", "raw_tags": "[]", "name": None, "source": "codewars", "tags": "[]", "skill_types": "[]",
    "url": "https://example.invalid/sq", "Expected Auxiliary Space": None, "time_limit": "3 seconds", "date": None,
    "picture_num": "0", "memory_limit": "128 megabytes", "Expected Time Complexity": None,
}


def lcb_private(tests: list[dict]) -> str:
    """code_generation_lite's private tests: base64(zlib(pickle(JSON string)))."""
    return base64.b64encode(zlib.compress(pickle.dumps(json.dumps(tests)))).decode()


LCB_STDIN_ROW = {  # livecodebench/code_generation_lite, an AtCoder-style stdin problem
    "question_title": "Double", "question_content": "Print 2n.", "platform": "atcoder", "question_id": "abc000_a",
    "contest_id": "abc000", "contest_date": "2024-01-01T00:00:00", "starter_code": "", "difficulty": "easy",
    "public_test_cases": json.dumps([{"input": "4\n", "output": "8\n", "testtype": "stdin"}]),
    "private_test_cases": lcb_private([{"input": "21\n", "output": "42\n", "testtype": "stdin"}]),
    "metadata": "{}",
}
LCB_CALL_ROW = {  # a LeetCode-style functional problem: Solution().maxOf(nums)
    **LCB_STDIN_ROW, "platform": "leetcode", "question_id": "9999",
    "starter_code": "class Solution:\n    def maxOf(self, nums: List[int]) -> int:\n        ",
    "public_test_cases": json.dumps([{"input": "[1, 5, 2]", "output": "5", "testtype": "functional"}]),
    "private_test_cases": lcb_private([{"input": "[-3, -7]", "output": "-3", "testtype": "functional"}]),
    "metadata": json.dumps({"func_name": "maxOf"}),
}
CF_ROW = {  # open-r1/codeforces, no checker: plain comparison
    "id": "1/A", "aliases": None, "contest_id": "1", "contest_name": "Round", "contest_type": "CF",
    "contest_start": 0, "contest_start_year": 2010, "index": "A", "time_limit": 1.0, "memory_limit": 256.0,
    "title": "Max", "description": "Print the larger.", "input_format": "", "output_format": "",
    "interaction_format": None, "note": None, "examples": [{"input": "1 2\n", "output": "2\n"}], "editorial": None,
    "rating": 800, "tags": ["implementation"], "testset_size": 2,
    "official_tests": [{"input": "1 2\n", "output": "2\n"}, {"input": "7 -1\n", "output": "7\n"}],
    "official_tests_complete": True, "input_mode": "stdio", "generated_checker": None, "executable": True,
    "generated_tests": 0,
}
# open-r1's generated checker: `checker.py <input> <correct output> <program output>`, prints 1 when correct
CF_CHECKER = """import sys
inp, ans, out = sys.argv[1:4]
n = int(open(inp).read().split()[0])
got = sorted(map(int, open(out).read().split()))
print(1 if got == list(range(1, n + 1)) else 0)
"""
CF_PERM_ROW = {  # "print any permutation of 1..n": a checker decides
    **CF_ROW, "id": "2/B", "title": "Any permutation", "generated_checker": CF_CHECKER,
    "official_tests": [{"input": "3\n", "output": "1 2 3\n"}, {"input": "5\n", "output": "1 2 3 4 5\n"}],
}
# an interactive row: open-r1 ships no interactor, so this row carries one (C++, testlib's protocol
# `interactor <input> <output>`, written here without testlib): the input is "n hidden budget"; the
# program hears "n", asks "? y" and hears "less"/"more"/"yes", and must say "! y" within the budget
CF_INTERACTOR = r"""
#include <cstdio>
#include <cstring>
int main(int argc, char** argv) {
    long long n, hidden, budget;
    FILE* in = fopen(argv[1], "r");
    if (!in || fscanf(in, "%lld %lld %lld", &n, &hidden, &budget) != 3) return 3;
    printf("%lld\n", n); fflush(stdout);
    char op[4]; long long y; long long used = 0;
    while (scanf("%3s %lld", op, &y) == 2) {
        if (op[0] == '!') { FILE* out = fopen(argv[2], "w"); fprintf(out, "%lld\n", used); return y == hidden ? 0 : 1; }
        if (++used > budget) return 1;
        puts(hidden < y ? "less" : hidden > y ? "more" : "yes"); fflush(stdout);
    }
    return 1;
}
"""
CF_INTERACTIVE_ROW = {
    **CF_ROW, "id": "3/C", "title": "Guess", "interaction_format": "Ask '? y'; answer '! y'.",
    "official_tests": [{"input": "100 37 7\n", "output": "37\n"}, {"input": "1000 1 10\n", "output": "1\n"}],
    "interactor": CF_INTERACTOR,
}
HE_ROW = {  # openai/openai_humaneval
    "task_id": "HumanEval/900", "entry_point": "add",
    "prompt": 'def add(a: int, b: int) -> int:\n    """Return a + b."""\n',
    "canonical_solution": "    return a + b\n",
    "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(-1, 1) == 0\n",
}
MBPP_ROW = {  # google-research-datasets/mbpp (full): a function named like a builtin
    "task_id": 900, "text": "Write a function sum that adds the squares of a list.",
    "code": "def sum(xs):\n    t = 0\n    for x in xs:\n        t += x * x\n    return t",
    "test_list": ["assert sum([1, 2]) == 5", "assert sum([]) == 0", "assert sum([3]) == 9"],
    "test_setup_code": "", "challenge_test_list": [],
}
MBPP_SANITIZED_ROW = {  # the sanitized config: prompt + test_imports
    "source_file": "x.py", "task_id": 901, "prompt": "Return the square root, rounded down.",
    "code": "import math\ndef isqrt_(n):\n    return math.isqrt(n)", "test_imports": ["import math"],
    "test_list": ["assert isqrt_(10) == math.isqrt(10)"],
}


def fence(code: str, lang: str = "python") -> str:
    return f"```{lang}\n{code}\n```"


# ---------------------------------------------------------------- conversion (no server)

def test_codecontests_row_all_three_test_sets_its_limits_and_mode():
    t = datasets.to_task("deepmind/code_contests", CC_ROW)
    CodeTask.model_validate(t)
    assert [c["stdin"] for c in t["tests"]["cases"]] == ["1 2\n", "10 -4\n", "0 0\n", "1000000000 1000000000\n"]
    assert t["tests"]["compare"] == "codecontests"
    assert t["timeout_s"] == 2.5 and t["memory_mb"] == 256
    only_public = datasets.CONVERTERS["codecontests"](CC_ROW, test_sets=("public_tests",))
    assert len(only_public["tests"]["cases"]) == 1
    assert datasets.to_task("codecontests", CC_ROW, language="c++")["language"] == "c++"  # CodeTask canonicalises
    unknown = datasets.to_task("codecontests", {**CC_ROW, "time_limit": None, "memory_limit_bytes": 0})
    assert "timeout_s" not in unknown and "memory_mb" not in unknown  # the server's defaults


def test_apps_and_taco_rows_reuse_the_verl_normalisation():
    t = datasets.to_task("codeparrot/apps", APPS_STDIO_ROW)
    s_prefix = t.pop("prefix")
    assert t["tests"] == {"kind": "stdio", "compare": "apps",
                          "cases": [{"stdin": "abc\n", "stdout": "cba\n"}, {"stdin": "xy\n", "stdout": "yx\n"}]}
    assert "timeout_s" not in t
    c = datasets.to_task("BAAI/TACO", TACO_CALL_ROW)
    CodeTask.model_validate(c)
    assert c["tests"]["kind"] == "call" and c["tests"]["fn_name"] == "square"
    assert c["tests"]["cases"][0] == {"args": [3], "expected": [9], "also_expected": [9]}  # labels' rule, one place
    assert c["timeout_s"] == 3.0 and c["memory_mb"] == 128
    verl = task_of({"inputs": [[3]], "outputs": [[9]], "fn_name": "square"})
    assert verl["tests"]["cases"] == c["tests"]["cases"][:1]
    assert c["prefix"] == s_prefix and "from typing import List" in s_prefix  # APPS' imports, Python only
    assert "prefix" not in datasets.to_task("apps", APPS_STDIO_ROW, language="cpp")


def test_livecodebench_rows_stdin_and_functional_private_tests_unpacked():
    s = datasets.to_task("livecodebench", LCB_STDIN_ROW)
    assert s["tests"]["compare"] == "livecodebench" and s["prefix"] == livecodebench.PRELUDE
    assert [c["stdout"] for c in s["tests"]["cases"]] == ["8\n", "42\n"]
    f = datasets.to_task("livecodebench/code_generation_lite", LCB_CALL_ROW)
    CodeTask.model_validate(f)
    assert f["tests"]["fn_name"] == "maxOf"
    assert [c["args"] for c in f["tests"]["cases"]] == [[[1, 5, 2]], [[-3, -7]]]
    assert [c["expected"] for c in f["tests"]["cases"]] == [5, -3]
    plain_json = {**LCB_STDIN_ROW, "private_test_cases": json.dumps([{"input": "1\n", "output": "2\n", "testtype": "stdin"}])}
    assert len(datasets.to_task("livecodebench", plain_json)["tests"]["cases"]) == 2


class _MakeDir:
    """A pickle that calls os.mkdir when loaded by an unrestricted unpickler."""

    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        return (os.mkdir, (self.path,))


def test_livecodebench_private_tests_are_never_unpickled_with_globals(tmp_path):
    """A row's pickle that names a callable: plain pickle.loads runs it (the attack works), our
    reader refuses it before anything is called."""
    target = tmp_path / "pwned"
    evil = base64.b64encode(zlib.compress(pickle.dumps(_MakeDir(str(target))))).decode()
    pickle.loads(zlib.decompress(base64.b64decode(evil)))  # what a loader that trusts the row does
    assert target.exists()
    target.rmdir()
    with pytest.raises(RowError, match="private_test_cases.*refused"):
        datasets.to_task("livecodebench", {**LCB_STDIN_ROW, "private_test_cases": evil})
    assert not target.exists()
    bomb = base64.b64encode(zlib.compress(b"\0" * (livecodebench.MAX_PRIVATE_BYTES + 1))).decode()
    with pytest.raises(RowError, match="decompresses past"):
        datasets.to_task("livecodebench", {**LCB_STDIN_ROW, "private_test_cases": bomb})
    not_a_string = base64.b64encode(zlib.compress(pickle.dumps({"a": 1}))).decode()
    with pytest.raises(RowError, match="not the JSON string"):
        datasets.to_task("livecodebench", {**LCB_STDIN_ROW, "private_test_cases": not_a_string})


def test_codeforces_rows_limits_checker_adapter_interactive_and_file_mode():
    t = datasets.to_task("open-r1/codeforces", CF_ROW)
    assert t["tests"]["compare"] == "tokens" and "checker" not in t["tests"]
    assert t["timeout_s"] == 1.0 and t["memory_mb"] == 256
    c = datasets.to_task("codeforces", CF_PERM_ROW)
    CodeTask.model_validate(c)
    assert c["tests"]["checker"]["language"] == "python"
    assert repr(CF_CHECKER) in c["tests"]["checker"]["source"]
    joined = datasets.to_task("codeforces", {**CF_ROW, "generated_tests": [{"input": "5 5\n", "output": "5\n"}]})
    assert len(joined["tests"]["cases"]) == 3  # official, then the joined generated tests
    with pytest.raises(RowError, match="'interactor' is missing"):
        datasets.to_task("codeforces", {**CF_ROW, "interaction_format": "Ask at most 10 queries."})
    inter = datasets.to_task("codeforces", {**CF_ROW, "interaction_format": "...", "interactor": "int main(){}"})
    assert inter["tests"]["interactor"] == {"language": "cpp", "source": "int main(){}"}
    with pytest.raises(RowError, match="'input_mode' is 'file'"):
        datasets.to_task("codeforces", {**CF_ROW, "input_mode": "file"})


def _adapter_verdict(tmp_path, checker: str, inp: str, out: str, ans: str) -> int:
    """Run the adapted checker as testlib would (`checker <input> <output> <answer>`), here."""
    import subprocess
    import sys

    files = {}
    for name, text in (("in", inp), ("out", out), ("ans", ans)):
        files[name] = tmp_path / name
        files[name].write_text(text)
    src = tmp_path / "checker.py"
    src.write_text(codeforces.checker_adapter(checker))
    return subprocess.run([sys.executable, str(src), str(files["in"]), str(files["out"]), str(files["ans"])],
                          capture_output=True, timeout=30).returncode


def test_codeforces_checker_adapter_speaks_testlib_exit_codes(tmp_path):
    assert _adapter_verdict(tmp_path, CF_CHECKER, "3\n", "3 1 2\n", "1 2 3\n") == 0
    assert _adapter_verdict(tmp_path, CF_CHECKER, "3\n", "1 2 3\n\n\n", "1 2 3\r\n") == 0
    assert _adapter_verdict(tmp_path, CF_CHECKER, "3\n", "1 1 2\n", "1 2 3\n") == 1
    assert _adapter_verdict(tmp_path, CF_CHECKER, "3\n", "", "1 2 3\n") == 1
    assert _adapter_verdict(tmp_path, "print(100)", "1\n", "x\n", "y\n") == 0  # open-r1 also takes 100
    assert _adapter_verdict(tmp_path, "import sys\nprint(1)\nsys.exit(3)", "1\n", "x\n", "y\n") == 1
    assert _adapter_verdict(tmp_path, "raise ValueError('bad output')", "1\n", "x\n", "y\n") == 1


def test_humaneval_and_mbpp_rows():
    h = datasets.to_task("openai_humaneval", HE_ROW)
    CodeTask.model_validate(h)
    assert h["prefix"] == HE_ROW["prompt"] and h["tests"]["entry_point"] == "add"
    m = datasets.to_task("mbpp", MBPP_ROW)
    CodeTask.model_validate(m)
    assert m["tests"]["asserts"] == MBPP_ROW["test_list"] and m["tests"]["candidate_names"] == ["sum"]
    assert "setup" not in m["tests"]
    s = datasets.to_task("google-research-datasets/mbpp", MBPP_SANITIZED_ROW)
    assert s["tests"]["setup"] == "import math" and s["tests"]["candidate_names"] == ["isqrt_"]


@pytest.mark.parametrize(("fmt", "row", "field"), [
    ("codecontests", {"name": "x"}, "public_tests / private_tests / generated_tests"),
    ("codecontests", {**CC_ROW, "public_tests": {"input": ["1"], "output": []}}, "public_tests"),
    ("codecontests", {**CC_ROW, "time_limit": 2}, "time_limit"),
    ("codecontests", {**CC_ROW, "memory_limit_bytes": -1}, "memory_limit_bytes"),
    ("apps", {"problem_id": 1}, "input_output"),
    ("apps", {"input_output": "{not json"}, "input_output"),
    ("apps", {"input_output": json.dumps({"inputs": ["1"], "outputs": []})}, "input_output"),
    ("livecodebench", {"question_id": "x"}, "public_test_cases / private_test_cases"),
    ("livecodebench", {**LCB_CALL_ROW, "metadata": "{}"}, "metadata.func_name"),
    ("livecodebench", {**LCB_STDIN_ROW, "private_test_cases": "@@@"}, "private_test_cases"),
    ("codeforces", {"id": "1/A"}, "official_tests"),
    ("codeforces", {**CF_ROW, "official_tests": [{"input": "1"}]}, "official_tests[0]"),
    ("codeforces", {**CF_ROW, "time_limit": "fast"}, "time_limit"),
    ("humaneval", {"prompt": "def f():\n", "test": "def check(c): pass"}, "entry_point"),
    ("mbpp", {"task_id": 1, "code": ""}, "test_list"),
    ("mbpp", {"test_list": "assert f() == 1"}, "test_list"),
])
def test_a_row_that_does_not_fit_names_its_field(fmt, row, field):
    with pytest.raises(RowError) as e:
        datasets.to_task(fmt, row)
    assert e.value.field == field and repr(field) in str(e.value)


def test_routing_by_data_source_and_dataset_tasks():
    assert datasets.format_of("deepmind/code_contests") == "codecontests"
    assert datasets.format_of("LiveCodeBench") == "livecodebench"
    assert datasets.format_of("openai/gsm8k") is None and datasets.format_of(None) is None
    assert task_of(json.dumps(CC_ROW), "codecontests")["tests"]["compare"] == "codecontests"  # a JSON string row
    assert task_of(CC_ROW, "openai/gsm8k") == CC_ROW  # unknown source: passed on as it is (the server names it)
    # verl's own ground truth wins over the routing (PRIME's data_source "codecontests" with in/outs),
    # judged with prime_code's comparison as verl does for that source; other sources keep `lines`
    verl = task_of({"inputs": ["1\n"], "outputs": ["1\n"]}, "codecontests")
    assert verl["tests"]["kind"] == "stdio" and verl["tests"]["compare"] == "prime_code" and "List" in verl["prefix"]
    assert "compare" not in task_of({"inputs": ["1\n"], "outputs": ["1\n"]}, "my_source")["tests"]
    assert task_of({"inputs": [[1]], "outputs": [[1]], "fn_name": "f"}, "taco")["tests"]["kind"] == "call"
    d = task_of({"type": "dataset", "format": "mbpp", "row": MBPP_ROW})
    assert d["tests"]["candidate_names"] == ["sum"]
    with pytest.raises(RowError, match="'format'"):
        task_of({"type": "dataset", "row": MBPP_ROW})
    with pytest.raises(RowError, match="'options'"):
        task_of({"type": "dataset", "format": "mbpp", "row": MBPP_ROW, "options": {}})
    with pytest.raises(RowError, match="not a format we read"):
        task_of({"type": "dataset", "format": "gsm8k", "row": {}})


def test_rows_as_pandas_hands_them_over():
    """verl reads parquet through pandas: struct columns arrive as dicts of numpy arrays."""
    np = pytest.importorskip("numpy")
    row = {**CC_ROW, "public_tests": {"input": np.array(["1 2\n"], dtype=object), "output": np.array(["3\n"])},
           "time_limit": {"seconds": np.int64(2), "nanos": np.int64(0)}, "memory_limit_bytes": np.int64(1 << 28)}
    t = task_of(row, "codecontests")
    CodeTask.model_validate(t)
    assert t["tests"]["cases"][0] == {"stdin": "1 2\n", "stdout": "3\n"} and t["timeout_s"] == 2.0


def test_time_scale_multiplies_a_tasks_own_limit_capped_by_the_server():
    task = CodeTask.model_validate(datasets.to_task("codecontests", CC_ROW))
    assert build_job("x", task).limits.timeout_s == 2.5
    assert build_job("x", task, time_scale=2.0, max_timeout_s=30).limits.timeout_s == 5.0
    assert build_job("x", task, time_scale=100.0, max_timeout_s=30).limits.timeout_s == 30
    default = CodeTask.model_validate({"tests": {"kind": "stdio", "cases": [{"stdout": "1"}]}})
    assert build_job("x", default, time_scale=3.0, max_timeout_s=30).limits.timeout_s == 5.0  # default: unscaled


# ---------------------------------------------------------------- through HTTP, on each host

# (format, row, language, honest completion, wrong completion)
CASES = [
    ("codecontests", CC_ROW, "python", fence("print(sum(map(int, input().split())))"),
     fence("a, b = map(int, input().split())\nprint(a - b)")),
    ("codecontests", CC_ROW, "cpp",
     fence("#include <cstdio>\nint main(){long long a,b;scanf(\"%lld %lld\",&a,&b);printf(\"%lld\\n\",a+b);}", "cpp"),
     fence("#include <cstdio>\nint main(){long long a,b;scanf(\"%lld %lld\",&a,&b);printf(\"%lld\\n\",a*b);}", "cpp")),
    ("apps", APPS_STDIO_ROW, "python", fence("print(input()[::-1])"), fence("print(input())")),
    ("taco", TACO_CALL_ROW, "python", fence("def square(n):\n    return n * n"), fence("def square(n):\n    return 2 * n")),
    # and APPS/TACO after theirs: Counter without an import
    ("taco", TACO_CALL_ROW, "python", fence("def square(n):\n    return Counter({n: n})[n] * n"),
     fence("def square(n):\n    return Counter([n])[n]")),
    ("livecodebench", LCB_STDIN_ROW, "python", fence("print(2 * int(input()))"), fence("print(int(input()) + 2)")),
    # LiveCodeBench runs programs after its star-imports: the starter code's `List` needs no import
    ("livecodebench", LCB_CALL_ROW, "python",
     fence("class Solution:\n    def maxOf(self, nums: List[int]) -> int:\n        return max(nums)"),
     fence("class Solution:\n    def maxOf(self, nums):\n        return nums[0]")),
    ("codeforces", CF_ROW, "python", fence("print(max(map(int, input().split())))"),
     fence("print(min(map(int, input().split())))")),
    ("codeforces", CF_PERM_ROW, "python", fence("n = int(input())\nprint(*range(n, 0, -1))"),
     fence("n = int(input())\nprint(*[1] * n)")),
    ("codeforces", CF_PERM_ROW, "cpp",
     fence("#include <cstdio>\nint main(){int n;scanf(\"%d\",&n);for(int i=n;i>0;i--)printf(\"%d \",i);}", "cpp"),
     fence("#include <cstdio>\nint main(){int n;scanf(\"%d\",&n);for(int i=0;i<n;i++)printf(\"%d \",i);}", "cpp")),
    # a C++ program: a Python one beside a C++ interactor is routed by its own language to a runner
    # without the toolchains (bwrap's default), so its interactor cannot be built there
    ("codeforces", CF_INTERACTIVE_ROW, "cpp",
     fence("#include <cstdio>\n#include <cstring>\nint main(){long long lo=1,hi;scanf(\"%lld\",&hi);char r[8];"
           "while(true){long long m=(lo+hi)/2;printf(\"? %lld\\n\",m);fflush(stdout);scanf(\"%7s\",r);"
           "if(!strcmp(r,\"yes\")){printf(\"! %lld\\n\",m);fflush(stdout);return 0;}"
           "if(!strcmp(r,\"less\"))hi=m-1;else lo=m+1;}}", "cpp"),
     fence("#include <cstdio>\n#include <cstring>\nint main(){long long n;scanf(\"%lld\",&n);char r[8];"
           "for(long long y=1;y<=n;y++){printf(\"? %lld\\n\",y);fflush(stdout);scanf(\"%7s\",r);"
           "if(!strcmp(r,\"yes\")){printf(\"! %lld\\n\",y);fflush(stdout);return 0;}}}", "cpp")),  # over budget
    ("humaneval", HE_ROW, "python", fence("    return a + b"), fence("def add(a, b):\n    return a - b")),
    ("humaneval", HE_ROW, "python", fence("def add(a, b):\n    return b + a"), fence("    return a * b")),
    ("mbpp", MBPP_ROW, "python", fence("def sum(xs):\n    t = 0\n    for x in xs:\n        t += x * x\n    return t"),
     fence("def sum(xs):\n    t = 0\n    for x in xs:\n        t += x\n    return t")),
    ("mbpp", MBPP_SANITIZED_ROW, "python", fence("import math\ndef isqrt_(n):\n    return math.isqrt(n)"),
     fence("def isqrt_(n):\n    return n")),
]


def _items() -> list[dict]:
    items = []
    for i, (fmt, row, lang, good, bad) in enumerate(CASES):
        task = {"type": "dataset", "format": fmt, "row": row, "language": lang}
        items += [{"id": f"{i}-good", "completion": good, "task": task},
                  {"id": f"{i}-bad", "completion": bad, "task": task}]
    return items


@pytest.fixture(scope="module", params=kind_params())
def kind(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def url(kind, shared_servers) -> str:
    return shared_servers.get(sandbox=kind).url


def test_rows_of_each_format_score_honest_and_wrong_programs(url):
    w = {"syntax": 0, "runtime": 0, "tests": 1}
    r = httpx.post(url + "/v1/score", json={"items": _items(), "weights": w}, timeout=300)
    assert r.status_code == 200, r.text
    for res in r.json()["results"]:
        assert res["status"] == "ok", res
        if res["id"].endswith("good"):
            assert res["reward"] == 1.0 and res["detail"]["flags"] == [], res  # a prelude's imports flag nothing
        else:
            assert res["reward"] < 1.0, res
    by_id = {res["id"]: res for res in r.json()["results"]}
    assert by_id["0-good"]["detail"]["total"] == 4  # public, private and generated tests
    assert by_id["0-bad"]["detail"]["passed"] == 1  # 0 0 -> 0 either way


def test_the_data_sets_own_comparison_applies(url):
    """CodeContests' tester folds case and APPS' cascade compares tokens: a program its own
    judge accepts is accepted from the row, and refused by the default `lines` rule."""
    cc = {**CC_ROW, "public_tests": {"input": ["1\n"], "output": ["YES\n"]}, "private_tests": None,
          "generated_tests": None}
    apps = {"input_output": json.dumps({"inputs": ["1\n"], "outputs": ["1 2\n"]})}
    items = [
        {"id": "cc", "completion": fence("print('yes')"), "task": {"type": "dataset", "format": "codecontests", "row": cc}},
        {"id": "cc-lines", "completion": fence("print('yes')"),
         "task": {"tests": {"kind": "stdio", "cases": [{"stdin": "1\n", "stdout": "YES\n"}]}}},
        {"id": "apps", "completion": fence("print('1    2')"), "task": {"type": "dataset", "format": "apps", "row": apps}},
        {"id": "apps-lines", "completion": fence("print('1    2')"),
         "task": {"tests": {"kind": "stdio", "cases": [{"stdin": "1\n", "stdout": "1 2\n"}]}}},
    ]
    r = httpx.post(url + "/v1/score", json={"items": items, "weights": {"syntax": 0, "runtime": 0, "tests": 1}},
                   timeout=120)
    got = {res["id"]: res["reward"] for res in r.json()["results"]}
    assert got == {"cc": 1.0, "cc-lines": 0.0, "apps": 1.0, "apps-lines": 0.0}, r.text


def test_a_row_that_does_not_fit_is_a_422_naming_the_field(url):
    bad = {"type": "dataset", "format": "codecontests", "row": {**CC_ROW, "private_tests": {"input": ["1"], "output": "x"}}}
    r = httpx.post(url + "/v1/score", json={"items": [{"completion": "x", "task": bad}]}, timeout=60)
    assert r.status_code == 422, r.text
    errs = r.json()["detail"]
    assert errs[0]["loc"] == ["body", "items", 0, "task", "row", "private_tests", "output"], errs
    r = httpx.post(url + "/v1/score", json={"items": [{"completion": "x", "task": {"type": "dataset", "row": {}}}]},
                   timeout=60)
    assert r.status_code == 422 and r.json()["detail"][0]["loc"][-1] == "format", r.text
    label = json.dumps({"type": "dataset", "format": "apps", "row": {"problem_id": 3}})
    r = httpx.post(url + "/get_reward", json={"query": ["x"], "prompts": [""], "labels": [label]}, timeout=60)
    assert r.status_code == 422 and "'input_output' is missing" in r.text, r.text


def test_openrlhf_label_carries_a_row(url):
    label = json.dumps({"type": "dataset", "format": "livecodebench", "row": LCB_STDIN_ROW})
    good, bad = fence("print(2 * int(input()))"), fence("print(0)")
    r = httpx.post(url + "/get_reward", json={"query": [good, bad], "prompts": ["", ""], "labels": [label, label]},
                   timeout=120)
    assert r.status_code == 200, r.text
    assert r.json()["extra_logs"]["pass_rate"] == [1.0, 0.0]


def test_verl_routes_rows_by_data_source(url):
    good, bad = fence("print(sum(map(int, input().split())))"), fence("print(0)")
    out = compute_score_batch(["deepmind/code_contests", "codecontests", "livecodebench"], [good, bad, good],
                              [CC_ROW, json.dumps(CC_ROW), LCB_STDIN_ROW], [None, {"index": 1}, None], server_url=url,
                              weights={"syntax": 0, "runtime": 0, "tests": 1})
    assert [o["score"] for o in out[:2]] == [1.0, 0.25], out  # 0 0 -> 0 passes for the wrong one
    assert out[0]["total"] == 4
    assert out[2]["score"] < 1.0  # the CodeContests program on LiveCodeBench's row: its tests, not the other's


def test_trl_rows_from_the_columns_by_data_source_or_dataset(url):
    fn = make_trl_reward_func(url, weights={"syntax": 0, "runtime": 0, "tests": 1})
    cols = {k: [v, v] for k, v in MBPP_ROW.items()}
    good = fence("def sum(xs):\n    return __import__('builtins').sum(x * x for x in xs)")
    out = fn(prompts=["p", "p"], completions=[good, fence("def sum(xs):\n    return 0")],
             data_source=["mbpp", "mbpp"], **cols)
    assert out[0] == 1.0 and out[1] < 1.0, out
    he = make_trl_reward_func(url, dataset="openai/openai_humaneval", weights={"syntax": 0, "runtime": 0, "tests": 1})
    cols = {k: [v] for k, v in HE_ROW.items()}
    assert he(prompts=["p"], completions=[[{"role": "assistant", "content": fence("    return a + b")}]], **cols) == [1.0]


@pytest.fixture(scope="module")
def fast_host(kind, shared_servers) -> str:
    """A server whose host is said to be 4x faster than the data set's judge (time_scale 0.25)."""
    return shared_servers.get(sandbox=kind, pool_size=1, time_scale=0.25).url


def test_time_scale_moves_the_rows_limit_and_readyz_says_it(fast_host, url):
    assert httpx.get(fast_host + "/readyz", timeout=30).json()["time_scale"] == 0.25
    assert httpx.get(url + "/readyz", timeout=30).json()["time_scale"] == 1.0
    # ~1 s of CPU: inside the row's 2.5 s, outside 2.5 s x 0.25
    burn = fence("import time\nt = time.process_time()\nwhile time.process_time() - t < 1.0:\n    pass\n"
                 "print(sum(map(int, input().split())))")
    row = {**CC_ROW, "private_tests": None, "generated_tests": {"input": [], "output": []}}
    item = {"completion": burn, "task": {"type": "dataset", "format": "codecontests", "row": row}}
    body = {"items": [item], "weights": {"syntax": 0, "runtime": 0, "tests": 1}}
    scaled = httpx.post(fast_host + "/v1/score", json=body, timeout=120).json()["results"][0]
    unscaled = httpx.post(url + "/v1/score", json=body, timeout=120).json()["results"][0]
    assert unscaled["reward"] == 1.0, unscaled
    assert scaled["reward"] == 0.0 and scaled["detail"]["tests"][0]["status"] == "timeout", scaled


def test_a_generated_checker_that_rejects_its_own_answer_is_the_rows_error(url):
    """open-r1's checker, adapted, is self-checked on the row's answer like any checker: one
    that refuses it makes the item a task_error (the data set's defect), not the program's 0."""
    row = {**CF_PERM_ROW, "generated_checker": "print(0)"}
    item = {"completion": fence("n = int(input())\nprint(*range(1, n + 1))"),
            "task": {"type": "dataset", "format": "codeforces", "row": row}}
    res = httpx.post(url + "/v1/score", json={"items": [item]}, timeout=120).json()["results"][0]
    assert res["status"] == "task_error" and res["reward"] is None, res


def test_taco_rows_are_judged_by_tacos_own_comparison():
    """TACO's judge compares the whole stdout (mode `taco`), APPS's runs its cascade (`apps`)."""
    assert datasets.to_task("taco", APPS_STDIO_ROW)["tests"]["compare"] == "taco"
    assert datasets.to_task("apps", APPS_STDIO_ROW)["tests"]["compare"] == "apps"
    assert datasets.to_task(datasets.format_of("BAAI/TACO"), APPS_STDIO_ROW)["tests"]["compare"] == "taco"
