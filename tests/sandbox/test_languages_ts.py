"""TypeScript through HTTP on a real server and pool, both hosts: the six programs of a stdio
problem with each test's status, SandboxFusion's /run_code with `language: typescript`, what
TypeScript has beyond JavaScript stripped faithfully (enums, namespaces, parameter properties,
imports), and attacks on the compile step: the compiler follows no `/// <reference>` nor
import into a host file, a source that crashes the compiler is a compile error, a host
without the compiler answers a clear per-item error."""

from __future__ import annotations

import os
import tempfile

import httpx
import pytest

from sandbox import Job, Limits, make_pool
from sandbox.runner import languages
from tests.sandbox.conftest import no_runner_lost
from tests.sandbox.lang_programs import CASES, EXPECTED, host_options
from tests.server.conftest import kind_params

SECRET = "verireward-ts-secret-" + os.urandom(6).hex()

READ = "const [a, b] = require('fs').readFileSync(0, 'utf8').trim().split(/\\s+/).map(Number) as number[];\n"
IMPORT = "import * as fs from 'fs';\nconst [a, b]: number[] = fs.readFileSync(0, 'utf8').trim().split(/\\s+/).map(Number);\n"

PROGRAMS = {
    "correct": IMPORT + "function add(x: number, y: number): number { return x + y; }\nconsole.log(add(a, b));\n",
    "wrong": READ + "const s: string = String(a) + String(b);\nconsole.log(s);\n",
    # a syntax error TypeScript's parser rejects (no type check: a type error alone would run)
    "compile_error": READ + "function add(x: number, y: number): number { return x + y;\nconsole.log(add(a, b));\n",
    "runtime_error": READ + "interface Box { v: number }\nif (a === 0) { const n = null as unknown as Box; "
                            "console.log(n.v); }\nconsole.log(a + b);\n",
    "time_limit": READ + "let k: number = 0;\nwhile (a === 5) k++;\nconsole.log(a + b);\n",
    "memory_limit": READ + "const keep: number[][] = [];\nwhile (a === 1) keep.push(new Array<number>(1 << 20).fill(a));\n"
                           "console.log(a + b);\n",
}

# what TypeScript adds to JavaScript, each of which a lossy stripper gets wrong (sucrase drops
# namespaces: "Util is not defined"); the expected line is what tsc's own output prints
FEATURES = """
import { EOL } from "os";
namespace Util { export function dbl(x: number): number { return 2 * x; } }
enum Dir { Up = 1, Down }
const enum Flag { On = 7 }
abstract class Shape { abstract area(): number; }
class Sq extends Shape { constructor(public readonly s: number) { super(); } area(): number { return this.s ** 2; } }
type Pair<T> = [T, T];
declare const notThere: number;
function len<T extends { length: number }>(x: T): number { return x.length; }
const m = new Map<string, number[]>([["k", [1, 2, 3]]]);
const o: { q?: { r: number } } = {};
let d = Dir.Down;
process.stdout.write([Util.dbl(21), new Sq(3).area(), d, Dir[Dir.Up], Flag.On, len<Pair<number>>([1, 2]),
  m.get("k")!.length, o.q?.r ?? "none", <number>(<unknown>5)].join(" ") + EOL);
"""
FEATURES_OUT = "42 9 2 Up 7 2 3 none 5\n"


def completion(program: str) -> str:
    return f"Plan first.\n```python\nprint('not this one')\n```\nThe solution:\n```ts\n{program}```\n"


@pytest.fixture(scope="module", params=kind_params())
def url(request, shared_servers):
    """A server whose runners have the toolchains, shared by the language suites (tests/shared.py)."""
    return shared_servers.get(sandbox=request.param, sandbox_options=host_options(request.param)).url


def score(url: str, items: list[dict]) -> list[dict]:
    r = httpx.post(url + "/v1/score", json={"items": items}, timeout=300)
    assert r.status_code == 200, r.text
    return r.json()["results"]


def task(lang: str = "typescript", **kw) -> dict:
    return {"type": "code", "language": lang, "tests": {"kind": "stdio", "cases": CASES}, "timeout_s": 4.0,
            "memory_mb": 256, **kw}


def run_code(url: str, code: str, stdin: str = "", **kw) -> dict:
    body = {"code": code, "language": "typescript", "stdin": stdin, "run_timeout": 3, "compile_timeout": 20, **kw}
    r = httpx.post(url + "/run_code", json=body, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()


def test_typescript_toolchain_is_installed():
    """node and the fetched compiler are here (.ci/run: npm + sandbox/fetch_typescript.sh)."""
    assert languages.available()["typescript"], languages.missing_tool(languages.get("typescript"))


def test_six_typescript_programs(url):
    kinds = list(EXPECTED)
    items = [{"id": k, "completion": completion(PROGRAMS[k]), "task": task()} for k in kinds]
    for k, res in zip(kinds, score(url, items)):
        assert res["status"] == "ok", (k, res)
        d = res["detail"]
        assert [t["status"] for t in d["tests"]] == EXPECTED[k], (k, d)
        assert d["extract_mode"] == "last_typescript_fence", d
        assert d["compile"]["ok"] is (k != "compile_error") and d["syntax_ok"] is (k != "compile_error"), d
        if k == "correct":
            assert res["reward"] == pytest.approx(1.0)
        if k == "compile_error":
            assert res["reward"] == 0.0
            assert d["load_message"].startswith("compile error:") and "error TS1005" in d["compile"]["stderr"], d
        if k in ("runtime_error", "time_limit", "memory_limit"):
            assert 0 < res["reward"] < 1


def test_ts_alias_and_cache(url):
    """`ts` means typescript; the same source twice builds once (the second is a hit)."""
    prog = PROGRAMS["correct"] + "// cache probe\n"
    first = score(url, [{"completion": completion(prog), "task": task("ts")}])[0]
    again = score(url, [{"completion": completion(prog), "task": task("typescript")}])[0]
    assert first["reward"] == again["reward"] == 1.0, (first, again)
    assert again["detail"]["compile"]["cache"] in ("hit", "merged", "miss"), again  # miss: the other runner


def test_run_code_typescript(url):
    ok = run_code(url, PROGRAMS["correct"], "20 22\n")
    assert ok["status"] == "Success" and ok["run_result"]["stdout"].strip() == "42", ok
    assert ok["compile_result"]["status"] == "Finished" and ok["compile_result"]["return_code"] == 0, ok
    bad = run_code(url, PROGRAMS["compile_error"], "1 2\n")
    assert bad["status"] == "Failed" and bad["run_result"] is None, bad
    assert bad["compile_result"]["return_code"] != 0 and "error TS" in bad["compile_result"]["stderr"], bad
    crash = run_code(url, PROGRAMS["runtime_error"], "0 1\n")
    assert crash["status"] == "Failed" and crash["run_result"]["return_code"] != 0, crash
    assert "TypeError" in crash["run_result"]["stderr"], crash
    slow = run_code(url, PROGRAMS["time_limit"], "5 1\n", run_timeout=1)
    assert slow["status"] == "Failed" and slow["run_result"]["status"] == "TimeLimitExceeded", slow


def test_typescript_features_strip_faithfully(url):
    out = run_code(url, FEATURES)
    assert out["status"] == "Success", out
    assert out["run_result"]["stdout"] == FEATURES_OUT, out


def test_an_early_error_of_the_stripped_javascript_is_a_compile_error(url):
    """TypeScript's parser takes a redeclared `let` (a checker error); V8's parse of the output
    rejects it: a compile error, as `node --check` makes it for JavaScript."""
    res = score(url, [{"completion": completion(READ + "let a2 = 1;\nlet a2 = 2;\nconsole.log(a + b);\n"),
                       "task": task()}])[0]
    assert [t["status"] for t in res["detail"]["tests"]] == ["compile_error"] * 3, res
    assert "already been declared" in res["detail"]["compile"]["stderr"], res


@pytest.fixture(scope="module")
def secret_file():
    """A file on the host, readable by all: neither the compiler nor the program may see it."""
    d = tempfile.mkdtemp(prefix="vr-ts-secret-")
    os.chmod(d, 0o755)
    path = os.path.join(d, "secret.ts")
    with open(path, "w") as f:
        f.write(f'export const s = "{SECRET}";\n')
    os.chmod(path, 0o644)
    yield path
    os.unlink(path)
    os.rmdir(d)


@pytest.mark.parametrize("target", ["{secret}", "/etc/passwd", "/proc/1/environ"])
def test_compiler_follows_no_reference_or_import_to_host_files(url, secret_file, target, request):
    path = target.format(secret=secret_file)
    prog = (f'/// <reference path="{path}"/>\n/// <reference types="{path}"/>\n'
            f'import * as leak from "{path}";\nimport other = require("{path}");\n'
            "console.log(JSON.stringify([leak, other]));\n")
    out = run_code(url, prog)
    text = repr(out)
    assert SECRET not in text and "root:" not in repr(out["compile_result"]), text[:2000]
    if request.node.callspec.params["url"] == "bwrap":  # a container's own /etc/passwd is the image's
        assert "root:" not in text, text[:2000]
    # the compile step reads nothing it references: it builds; the run finds no such module
    assert out["compile_result"]["return_code"] == 0, out
    assert out["status"] == "Failed" and out["run_result"]["return_code"] != 0, out


def test_a_source_that_crashes_the_compiler_is_a_compile_error(url):
    """Deep nesting overflows the parser's stack: the build fails, the item is judged, the
    runner serves the next item."""
    deep = "const x = " + "(" * 50_000 + "1" + ")" * 50_000 + ";\n"
    res = score(url, [{"completion": completion(deep), "task": task()},
                      {"completion": completion(PROGRAMS["correct"]), "task": task()}])
    assert [t["status"] for t in res[0]["detail"]["tests"]] == ["compile_error"] * 3, res[0]
    assert "compiler failed on it: RangeError" in res[0]["detail"]["compile"]["stderr"], res[0]
    assert res[1]["reward"] == 1.0, res[1]


async def test_a_host_without_the_compiler_answers_a_clear_error_per_item():
    """A bwrap host whose TypeScript compiler is missing (not fetched): each TS item gets the
    reason, /readyz's source leaves it out, javascript still runs."""
    pool = make_pool("bwrap", size=1, per_runner=2, languages=True)
    pool.host.ts_dir = None  # as on a host where sandbox/fetch_typescript.sh never ran
    await pool.start()
    try:
        langs = pool.languages()
        assert "typescript" not in langs and "javascript" in langs, langs
        async with no_runner_lost(pool):
            r = await pool.run(Job(program=PROGRAMS["correct"], language="typescript",
                                   tests={"kind": "stdio", "cases": CASES}, limits=Limits(timeout_s=3.0)))
        assert [t.status for t in r.tests] == ["error"] * 3, r
        assert "typescript toolchain is not installed" in r.tests[0].message, r.tests[0]
    finally:
        await pool.close()
