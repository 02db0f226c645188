"""Java and node with one process serving a job's tests (sandbox/runner/languages/harness.py):
faithful to a process per test. Each honest program below runs both ways through a real pool
(as written: the shared harness process; with a comment naming what sharing cannot give it:
a process per test), and both must give the statuses and outputs a careful judge gives, test
by test: statics mutated between tests, System.exit / process.exit mid-output, exceptions,
big outputs, reading all stdin the common ways, threads, timers, exit hooks."""

from __future__ import annotations

import re

import pytest
import pytest_asyncio

from sandbox import Job, Limits
from sandbox.runner.languages import get, harness
from tests.conftest import kind_params
from tests.sandbox.lang_programs import host_options

# a word in a comment that makes sharing unfaithful for the program (table.py shared_unsafe)
PER_TEST = {"java": "// FileDescriptor: a process per test\n", "javascript": "// child_process: a process per test\n"}


@pytest_asyncio.fixture(scope="module", params=kind_params())
async def pool(request, shared_pools):
    """One runner with the toolchains, shared by the Java/Node suites (tests/shared.py)."""
    return await shared_pools.get(request.param, size=1, per_runner=2, **host_options(request.param))


def case(stdin: str, stdout: str) -> dict:
    return {"stdin": stdin, "stdout": stdout}


def big(n: int) -> str:
    return "".join(f"{i * 7}\n" for i in range(n))


BIG_IN = " ".join(str(i % 1000) for i in range(400000)) + "\n"  # ~1.5 MB: more than a pipe holds


J = "import java.util.*;\nimport java.io.*;\n"
JAVA: dict[str, tuple[str, list[dict], list[str]]] = {
    "statics start over": (
        J + "public class Main { static int calls; static List<Long> seen = new ArrayList<>(); static { calls = 100; }\n"
        "  public static void main(String[] a) { long x = new Scanner(System.in).nextLong(); calls++; seen.add(x);\n"
        "    System.out.println(calls + \" \" + seen.size() + \" \" + x * 2); } }\n",
        [case(f"{x}\n", f"101 1 {2 * x}\n") for x in (1, 2, 3, 4)], ["passed"] * 4),
    "System.exit(0) mid-output": (
        J + "public class Main { public static void main(String[] a) { int x = new Scanner(System.in).nextInt();\n"
        "  System.out.println(x); if (x % 2 == 0) System.exit(0); System.out.println(x + 1); } }\n",
        [case("1\n", "1\n2\n"), case("2\n", "2\n"), case("3\n", "3\n4\n"), case("4\n", "4\n")], ["passed"] * 4),
    "System.exit(3) and an exception": (
        J + "class Main { public static void main(String[] a) { int x = new Scanner(System.in).nextInt();\n"
        "  System.out.println(x); if (x == 2) System.exit(3); if (x == 3) throw new IllegalStateException(\"x\"); } }\n",
        [case(f"{x}\n", f"{x}\n") for x in (1, 2, 3, 4)], ["passed", "error", "error", "passed"]),
    "a solver thread with a big stack, one that throws": (
        J + "public class Main implements Runnable { static int x;\n"
        "  public static void main(String[] a) { x = new Scanner(System.in).nextInt();\n"
        "    new Thread(null, new Main(), \"solver\", 1 << 26).start(); }\n"
        "  public void run() { if (x == 3) throw new IllegalStateException(\"x\"); System.out.println(x * 10); } }\n",
        [case(f"{x}\n", f"{x * 10}\n") for x in (1, 2, 3, 4)], ["passed", "passed", "failed", "passed"]),
    "big output through a closed PrintWriter": (
        J + "public class Main { public static void main(String[] a) throws IOException {\n"
        "  BufferedReader r = new BufferedReader(new InputStreamReader(System.in)); int n = Integer.parseInt(r.readLine().trim());\n"
        "  PrintWriter w = new PrintWriter(new BufferedWriter(new OutputStreamWriter(System.out)));\n"
        "  for (int i = 0; i < n; i++) w.println(i * 7L); w.close(); System.out.println(\"after close\"); } }\n",
        [case("100000\n", big(100000)), case("5\n", big(5)), case("80000\n", big(80000))], ["passed"] * 3),
    "all of stdin, no newline at the end": (
        J + "public class Main { public static void main(String[] a) throws IOException {\n"
        "  StreamTokenizer t = new StreamTokenizer(new BufferedInputStream(System.in)); long sum = 0; int n = 0;\n"
        "  while (t.nextToken() != StreamTokenizer.TT_EOF) { sum += (long) t.nval; n++; } System.out.print(n + \" \" + sum); } }\n",
        [case("1 2\n3\n4 5 6\n", "6 21"), case("", "0 0"), case(" ".join(map(str, range(5000))), f"5000 {sum(range(5000))}")],
        ["passed"] * 3),
    "worker threads joined, a daemon left asleep": (
        J + "public class Main { public static void main(String[] a) throws Exception { int x = new Scanner(System.in).nextInt();\n"
        "  Thread d = new Thread(() -> { try { Thread.sleep(100000); } catch (InterruptedException e) { } });\n"
        "  d.setDaemon(true); d.start(); long[] part = new long[4]; Thread[] ts = new Thread[4];\n"
        "  for (int k = 0; k < 4; k++) { final int kk = k; ts[k] = new Thread(() -> { for (int i = kk; i <= x; i += 4) part[kk] += i; });\n"
        "    ts[k].start(); } for (Thread t : ts) t.join(); System.out.println(part[0] + part[1] + part[2] + part[3]); } }\n",
        [case(f"{x}\n", f"{x * (x + 1) // 2}\n") for x in (10, 1000, 7)], ["passed"] * 3),
    "a locale and a property set in one test only": (
        J + "public class Main { public static void main(String[] a) { int x = new Scanner(System.in).nextInt();\n"
        "  if (x == 1) { Locale.setDefault(Locale.GERMANY); System.setProperty(\"vr.seen\", \"yes\"); }\n"
        "  System.out.println(String.format(\"%.2f\", x + 0.5) + \" \" + System.getProperty(\"vr.seen\", \"no\")); } }\n",
        [case("1\n", "1,50 yes\n"), case("2\n", "2.50 no\n"), case("3\n", "3.50 no\n")], ["passed"] * 3),
    "stderr beside stdout, a wrong answer": (
        J + "public class Main { public static void main(String[] a) { int x = new Scanner(System.in).nextInt();\n"
        "  System.err.println(\"debug \" + x); System.out.print(x == 2 ? \"wrong\" : \"v\" + x); System.err.print(\"\\u001evr:x\"); } }\n",
        [case(f"{x}\n", f"v{x}") for x in (1, 2, 3)], ["passed", "failed", "passed"]),
    "a memory limit in the second test, 1.5 MB of input": (
        J + "public class Main { public static void main(String[] a) throws IOException {\n"
        "  StreamTokenizer t = new StreamTokenizer(new BufferedInputStream(System.in)); long sum = 0; int n = 0;\n"
        "  while (t.nextToken() != StreamTokenizer.TT_EOF) { sum += (long) t.nval; n++; }\n"
        "  List<long[]> keep = new ArrayList<>(); while (n == 2) keep.add(new long[1 << 17]); System.out.println(n + \" \" + sum); } }\n",
        [case(BIG_IN, f"400000 {sum(i % 1000 for i in range(400000))}\n"), case("4 5\n", "2 9\n"), case("7\n", "1 7\n")],
        ["passed", "memory", "passed"]),
    "output limit in one test": (
        J + "public class Main { public static void main(String[] a) { int x = new Scanner(System.in).nextInt();\n"
        "  StringBuilder b = new StringBuilder(); for (int i = 0; i < (x == 2 ? 3000 : 1); i++) b.append(\"xx\");\n"
        "  System.out.println(b); } }\n",
        [case(f"{x}\n", "xx\n") for x in (1, 2, 3)], ["passed", "output_limit", "passed"]),
    "time limit in one test": (
        J + "public class Main { public static void main(String[] a) { int x = new Scanner(System.in).nextInt(); long k = 0;\n"
        "  while (x == 2) k++; System.out.println(x); } }\n",
        [case(f"{x}\n", f"{x}\n") for x in (1, 2, 3)], ["passed", "timeout", "passed"]),
}

NODE: dict[str, tuple[str, list[dict], list[str]]] = {
    "globals and builtins start over": (
        "const x = Number(require('fs').readFileSync(0, 'utf8'));\n"
        "const before = typeof [].extra; Array.prototype.extra = 1; globalThis.calls = (globalThis.calls || 0) + 1;\n"
        "var v = (typeof v === 'undefined' ? 0 : v) + 1; console.log(calls, before, v, x * 2);\n",
        [case(f"{x}\n", f"1 undefined 1 {2 * x}\n") for x in (1, 2, 3)], ["passed"] * 3),
    "readline, the answer on close": (
        "const rl = require('readline').createInterface({ input: process.stdin });\n"
        "const lines = []; rl.on('line', (l) => lines.push(l));\n"
        "rl.on('close', () => { const n = Number(lines[0]); console.log(lines.slice(1, n + 1).map(Number).reduce((a, b) => a + b, 0)); });\n",
        [case("3\n1\n2\n3\n", "6\n"), case("1\n10", "10\n"), case("0\n", "0\n")], ["passed"] * 3),
    "process.stdin data events": (
        "let s = ''; process.stdin.setEncoding('utf8'); process.stdin.on('data', (c) => { s += c; });\n"
        "process.stdin.on('end', () => { process.stdout.write(s.split(/\\s+/).filter(Boolean).length + '\\n'); });\n",
        [case("a b c\n", "3\n"), case("", "0\n"), case("x " * 50000, "50000\n")], ["passed"] * 3),
    "process.exit(0) mid-output": (
        "const x = Number(require('fs').readFileSync(0, 'utf8')); console.log(x);\n"
        "if (x % 2 === 0) process.exit(0); console.log(x + 1);\n",
        [case("1\n", "1\n2\n"), case("2\n", "2\n"), case("3\n", "3\n4\n")], ["passed"] * 3),
    "exitCode, a throw, an unhandled rejection": (
        "const x = Number(require('fs').readFileSync(0, 'utf8')); console.log(x);\n"
        "if (x === 2) process.exitCode = 2; if (x === 3) throw new Error('boom');\n"
        "if (x === 4) Promise.reject(new Error('late'));\n",
        [case(f"{x}\n", f"{x}\n") for x in (1, 2, 3, 4, 5)], ["passed", "error", "error", "error", "passed"]),
    "big output in many writes": (
        "const n = Number(require('fs').readFileSync(0, 'utf8'));\n"
        "for (let i = 0; i < n; i++) process.stdout.write(i * 7 + '\\n');\n",
        [case("100000\n", big(100000)), case("3\n", big(3))], ["passed"] * 2),
    "timers, immediates and promises in order": (
        "const x = Number(require('fs').readFileSync(0, 'utf8')); const out = [];\n"
        "setTimeout(() => { out.push('t'); console.log(out.join(',') + ' ' + x); }, 20);\n"
        "setImmediate(() => out.push('i')); Promise.resolve().then(() => out.push('p')); out.push('s');\n",
        [case(f"{x}\n", f"s,p,i,t {x}\n") for x in (1, 2)], ["passed"] * 2),
    "fs.readSync of fd 0 in chunks": (
        "const fs = require('fs'); const b = Buffer.alloc(7); let s = '', k;\n"
        "while ((k = fs.readSync(0, b, 0, b.length, null)) > 0) s += b.toString('utf8', 0, k);\n"
        "console.log(s.trim().split(/\\s+/).map(Number).reduce((a, c) => a + c, 0));\n",
        [case("1 2 3 4 5 6 7 8 9 10\n", "55\n"), case("100\n", "100\n")], ["passed"] * 2),
    "an exit listener, require.main": (
        "process.on('exit', (c) => console.log('bye ' + c));\n"
        "function main() { console.log(Number(require('fs').readFileSync(0, 'utf8')) + 1); }\n"
        "if (require.main === module) main();\n",
        [case(f"{x}\n", f"{x + 1}\nbye 0\n") for x in (1, 2, 3)], ["passed"] * 3),
    "a builtin shared cannot give, by a computed name; eval": (
        "const x = Number(require('fs').readFileSync(0, 'utf8')); const cp = require(['child', 'process'].join('_'));\n"
        "console.log(typeof cp.spawnSync, eval('x * 3'), new Function('a', 'return a + 1')(x));\n",
        [case(f"{x}\n", f"function {3 * x} {x + 1}\n") for x in (1, 2, 3)], ["passed"] * 3),
    "a memory limit in the second test, 1.5 MB of input": (
        "const v = require('fs').readFileSync(0, 'utf8').trim().split(/\\s+/).map(Number);\n"
        "const keep = []; while (v.length === 2) keep.push(new Array(1 << 20).fill(v[0]));\n"
        "console.log(v.length + ' ' + v.reduce((a, b) => a + b, 0));\n",
        [case(BIG_IN, f"400000 {sum(i % 1000 for i in range(400000))}\n"), case("4 5\n", "2 9\n"), case("7\n", "1 7\n")],
        ["passed", "memory", "passed"]),
    "output limit in one test": (
        "const x = Number(require('fs').readFileSync(0, 'utf8')); console.log('xx'.repeat(x === 2 ? 3000 : 1));\n",
        [case(f"{x}\n", "xx\n") for x in (1, 2, 3)], ["passed", "output_limit", "passed"]),
    "time limit in one test": (
        "const x = Number(require('fs').readFileSync(0, 'utf8')); let k = 0; while (x === 2) k++; console.log(x);\n",
        [case(f"{x}\n", f"{x}\n") for x in (1, 2, 3)], ["passed", "timeout", "passed"]),
}

PROGRAMS = {"java": JAVA, "javascript": NODE}
PARAMS = [pytest.param(lang, name, id=f"{lang}-{name}") for lang, progs in PROGRAMS.items() for name in progs]


def run_job(lang: str, program: str, cases: list[dict], timeout_s: float = 2.0, output_bytes: int = 16 << 20) -> Job:
    return Job(program=program, language=lang, tests={"kind": "stdio", "cases": cases},
               limits=Limits(timeout_s=timeout_s, memory_mb=512, stop_on_timeout=False, output_bytes=output_bytes))


def normal(t) -> str:
    """A test's message, less what the machine's load decides (which limit a timeout met first)."""
    return "timeout" if t.status == "timeout" else t.message


@pytest.mark.parametrize(("lang", "name"), PARAMS)
async def test_shared_process_judges_as_a_process_per_test(pool, lang, name):
    program, cases, expected = PROGRAMS[lang][name]
    lang_ = get(lang)
    assert harness.shareable(lang_, program) and not harness.shareable(lang_, PER_TEST[lang] + program)
    lim = {"timeout_s": 1.0 if "time limit" in name else 2.0, "output_bytes": 4096 if "output limit" in name else 16 << 20}
    shared = await pool.run(run_job(lang, program, cases, **lim))
    apart = await pool.run(run_job(lang, PER_TEST[lang] + program, cases, **lim))
    for r in (shared, apart):
        assert [t.status for t in r.tests] == expected, (name, r.tests, r.stderr[-1500:])
    assert [normal(t) for t in shared.tests] == [normal(t) for t in apart.tests]
    assert shared.stdout == apart.stdout
    assert not re.search("\x1evr:[0-9a-f]{16}\n", shared.stderr), shared.stderr  # the end lines are ours


PID = {
    "java": "public class Main { static int n; public static void main(String[] a) { n++;\n"
            "  int x = new java.util.Scanner(System.in).nextInt(); System.err.println(\"pid \" + ProcessHandle.current().pid() + \" \" + n);\n"
            "  System.out.println(x); if (x == 3) System.exit(0); } }\n",
    "javascript": "globalThis.n = (globalThis.n || 0) + 1; const x = Number(require('fs').readFileSync(0, 'utf8'));\n"
                  "console.error('pid ' + process.pid + ' ' + n); console.log(x); if (x === 3) process.exit(0);\n",
}


PID["typescript"] = PID["javascript"]  # TypeScript runs as JavaScript: node's harness serves it too
PER_TEST["typescript"] = PER_TEST["javascript"]


@pytest.mark.parametrize("lang", list(PID))
async def test_one_process_serves_the_tests_until_one_exits(pool, lang):
    """Tests 1-3 in one process (3 exits it), 4-6 in a fresh one; each test sees fresh statics.
    With a process per test, six processes."""
    cases = [case(f"{x}\n", f"{x}\n") for x in range(1, 7)]
    for program, processes in ((PID[lang], 2), (PER_TEST[lang] + PID[lang], 6)):
        r = await pool.run(run_job(lang, program, cases))
        assert r.passed == 6, r.tests
        lines = [ln.split() for ln in r.stderr.splitlines() if ln.startswith("pid ")]
        assert [ln[2] for ln in lines] == ["1"] * 6, r.stderr
        pids = [ln[1] for ln in lines]
        assert len(set(pids)) == processes, pids
        if processes == 2:
            assert len(set(pids[:3])) == 1 and len(set(pids[3:])) == 1, pids


def test_end_lines_are_found_across_reads_and_cut_from_stderr():
    """The supervisor's reading of the harness's lines (HarnessMeter): split anywhere between
    two reads, beside the program's own bytes; a line with another secret is the program's."""
    stream = b"debug\x1e\x1evr:feedfacefeedface\n" + b"\x1evr:0000000000000000\n" + b"tail\x1evr:feedfacefeedface!\n"
    for cut in range(len(stream) + 1):
        m = harness.HarnessMeter(1 << 20, 1 << 20)
        m.head = harness.MARK + b"feedfacefeedface"
        m.charge("stderr", stream[:cut], None)
        m.charge("stderr", stream[cut:], None)
        m.flush_pending()
        assert m.ends == ["end", "apart"], cut
        assert bytes(m.kept["stderr"]) == b"debug\x1e\x1evr:0000000000000000\ntail", cut


async def test_a_process_serves_at_most_max_tests(pool):
    """A long job: a fresh process after harness.MAX_TESTS tests (bounds what one keeps)."""
    n = harness.MAX_TESTS + 6
    r = await pool.run(run_job("javascript", PID["javascript"].replace("x === 3", "x === -1"),
                               [case(f"{x}\n", f"{x}\n") for x in range(1, n + 1)]))
    assert r.passed == n, r.tests
    pids = [ln.split()[1] for ln in r.stderr.splitlines() if ln.startswith("pid ")]
    assert len(pids) == n and pids[0] != pids[-1], pids
    assert len(set(pids[: harness.MAX_TESTS])) == 1 and len(set(pids[harness.MAX_TESTS:])) == 1, pids
