"""A job's tests share no state, through HTTP on a live server on each host (and, for which
process served them, a pool on each host).

Each attack program answers test 2 only from what its run in test 1 left behind: a file in the
job's scratch (every language), a JDK-wide setting or the intern pool in the shared JVM, the
harness's own class map reached by reflection spelled with javac's unicode escapes
(`\\u0072eflect`, `\\uu0072`), a builtin module's property, the harness realm's intrinsics, a
builtin's closure setting, the Buffer pool, an open descriptor or the umask in the shared node.
Test 1 asks for `7`, test 2 for what test 1 was given: with fresh state per test, test 2 cannot
pass. Honest programs still pass every test, and a Java / node program that reaches no shared
state is still served by one process (the shared JVM's speed kept); the Java guard's decision is
also checked on the classes javac makes.
"""

from __future__ import annotations

import shutil
import subprocess

import httpx
import pytest

from sandbox import Job, Limits
from sandbox.runner.languages import get, harness
from tests.sandbox.lang_programs import host_options
from tests.server.conftest import kind_params

CASES = [{"stdin": "7\n", "stdout": "7\n"}, {"stdin": "?\n", "stdout": "7\n"}]
FENCE = {"python": "python", "cpp": "cpp", "java": "java", "go": "go", "rust": "rust", "javascript": "js"}

PY_FILE = """import os
x = input().strip()
if x == '?':
    print(open('state.txt').read() if os.path.exists('state.txt') else 'none')
else:
    open('state.txt', 'w').write(x)
    print(x)
"""
PY_MODULE = """x = input().strip()
if x == '?':
    try:
        import vrstate
        print(vrstate.V)
    except ImportError:
        print('none')
else:
    open('vrstate.py', 'w').write(f'V = {x!r}\\n')
    print(x)
"""
PY_SHARED_DIRS = """import os
x = input().strip()
paths = ['/tmp/vrstate', '/dev/shm/vrstate', '/var/tmp/vrstate', os.path.expanduser('~/.vrstate')]
if x == '?':
    found = 'none'
    for p in paths:
        try:
            found = open(p).read()
            break
        except OSError:
            pass
    print(found)
else:
    for p in paths:
        try:
            open(p, 'w').write(x)
        except OSError:
            pass
    print(x)
"""
PY_MODE = """import os
x = input().strip()
if x == '?':
    print(oct(os.stat('.').st_mode & 0o777)[-1])
else:
    os.chmod('.', 0o770 | int(x))
    print(x)
"""
CPP_FILE = """#include <bits/stdc++.h>
int main() { std::string x; std::cin >> x;
  if (x == "?") { std::ifstream f("state.txt"); std::string s; if (f >> s) std::cout << s << "\\n"; else std::cout << "none\\n"; }
  else { std::ofstream("state.txt") << x; std::cout << x << "\\n"; } }
"""
GO_FILE = """package main
import ("fmt"; "os")
func main() { var x string; fmt.Scan(&x)
  if x == "?" { b, err := os.ReadFile("state.txt"); if err != nil { fmt.Println("none") } else { fmt.Println(string(b)) } } else { os.WriteFile("state.txt", []byte(x), 0600); fmt.Println(x) } }
"""
RUST_FILE = """use std::io::Read;
fn main() { let mut s = String::new(); std::io::stdin().read_to_string(&mut s).unwrap(); let x = s.trim();
  if x == "?" { match std::fs::read_to_string("state.txt") { Ok(v) => println!("{}", v), Err(_) => println!("none") } }
  else { std::fs::write("state.txt", x).unwrap(); println!("{}", x); } }
"""
JAVA_HEAD = "import java.util.*;\npublic class Main { public static void main(String[] a) throws Exception {\n" \
            "  String x = new Scanner(System.in).next();\n"
JAVA = {
    # a file (files run a JVM per test): the scratch is emptied between tests
    "file": JAVA_HEAD + "  java.io.File f = new java.io.File(\"state.txt\");\n"
            "  if (x.equals(\"?\")) System.out.println(f.exists() ? new Scanner(f).next() : \"none\");\n"
            "  else { try (java.io.FileWriter w = new java.io.FileWriter(f)) { w.write(x); } System.out.println(x); } } }\n",
    # the default time zone, a JDK-wide setting (put back between tests)
    "time zone": JAVA_HEAD + "  if (x.equals(\"?\")) { String id = TimeZone.getDefault().getID();\n"
                 "    System.out.println(id.startsWith(\"GMT+0\") ? id.substring(5, 6) : \"none\"); }\n"
                 "  else { TimeZone.setDefault(TimeZone.getTimeZone(\"GMT+0\" + x + \":00\")); System.out.println(x); } } }\n",
    # the intern pool: a string interned in test 1 is found by test 2 (a JVM per test)
    "intern pool": JAVA_HEAD + "  if (x.equals(\"?\")) { String got = \"none\";\n"
                   "    for (int d = 0; d < 10; d++) { String s = new String(\"vrstate\" + d); if (s.intern() != s) got = \"\" + d; }\n"
                   "    System.out.println(got); }\n"
                   "  else { new String(\"vrstate\" + x).intern(); System.out.println(x); } } }\n",
}
# a finalizer: test 1's code, run by the JVM's finalizer thread whenever a collection comes (a
# JVM per test); test 2 makes garbage until it has run
JAVA["finalizer"] = ("import java.util.*;\npublic class Main {\n"
                     "  static String got = \"none\";\n"
                     "  static final class Left { final String x; Left(String x) { this.x = x; }\n"
                     "    @Override protected void finalize() { System.setProperty(\"vr.left\", x); } }\n"
                     "  public static void main(String[] a) throws Exception {\n"
                     "    String x = new Scanner(System.in).next();\n"
                     "    if (x.equals(\"?\")) { for (int i = 0; i < 40 && System.getProperty(\"vr.left\") == null; i++) {\n"
                     "        System.gc(); Thread.sleep(20); }\n"
                     "      System.out.println(System.getProperty(\"vr.left\", \"none\")); }\n"
                     "    else { new Left(x); System.out.println(x); } } }\n")
# the harness's class map (shared by every test's loader), reached by reflection whose words are
# spelled with unicode escapes javac decodes (the source guard read the raw text)
REFLECT = (JAVA_HEAD + "  Object loader = Thread.currentThread().getContextCl\\u0061ssLoader();\n"
           "  java.lang.\\u0072eflect.Field f = loader.getClass().getDecl\\u0061redField(\"classes\");\n"
           "  f.setAcc\\u0065ssible(true);\n"
           "  @SuppressWarnings(\"unchecked\") Map<String, byte[]> m = (Map<String, byte[]>) f.get(loader);\n"
           "  if (x.equals(\"?\")) { String got = \"none\"; for (String k : m.keySet()) if (k.startsWith(\"vrstate\")) got = k.substring(7);\n"
           "    System.out.println(got); }\n"
           "  else { m.put(\"vrstate\" + x, new byte[0]); System.out.println(x); } } }\n")
JAVA["reflection, \\u escapes"] = REFLECT
JAVA["reflection, \\uuu escapes"] = REFLECT.replace("\\u0072", "\\uuu0072").replace("\\u0061", "\\uu0061")
# no reflection word at all, even decoded: `var` and a method looked up by name
JAVA["reflection, var"] = (JAVA_HEAD + "  var intern = String.class.getMethod(\"in\" + \"tern\");\n"
                           "  if (x.equals(\"?\")) { String got = \"none\";\n"
                           "    for (int d = 0; d < 10; d++) { String s = new String(\"vrstate\" + d); if (intern.invoke(s) != s) got = \"\" + d; }\n"
                           "    System.out.println(got); }\n"
                           "  else { intern.invoke(new String(\"vrstate\" + x)); System.out.println(x); } } }\n")

NODE_HEAD = "const fs = require('fs');\nconst x = fs.readFileSync(0, 'utf8').trim();\n"


def node_kept(where: str) -> str:
    """A program that keeps test 1's input at `where` (an expression) and answers test 2 from it."""
    return (NODE_HEAD + f"const o = {where};\n"
            "if (x === '?') console.log(o.vrState === undefined ? 'none' : o.vrState);\n"
            "else { o.vrState = x; console.log(x); }\n")


NODE = {
    "file": NODE_HEAD + "if (x === '?') console.log(fs.existsSync('state.txt') ? fs.readFileSync('state.txt', 'utf8') : 'none');\n"
                        "else { fs.writeFileSync('state.txt', x); console.log(x); }\n",
    "module property": node_kept("require('util')"),
    "nested module object": node_kept("require('util').inspect.styles"),
    "a builtin's prototype": node_kept("require('readline').Interface.prototype"),
    "the realm's Array.prototype": node_kept("Object.getPrototypeOf(fs.readdirSync('.'))"),
    "the realm's Object.prototype": node_kept("Object.getPrototypeOf(Object.getPrototypeOf(Buffer.prototype.__proto__))"),
    "a global": node_kept("Buffer"),
    "process.versions": node_kept("process.versions"),
    "inspect's options": NODE_HEAD + "const u = require('util');\n"
                         "if (x === '?') console.log(u.inspect.defaultOptions.depth === 2 ? 'none' : String(u.inspect.defaultOptions.depth));\n"
                         "else { u.inspect.defaultOptions = { depth: Number(x) }; console.log(x); }\n",
    "a closure setting": NODE_HEAD + "const E = require('events');\n"
                         "if (x === '?') console.log(E.defaultMaxListeners === 10 ? 'none' : String(E.defaultMaxListeners));\n"
                         "else { E.defaultMaxListeners = Number(x); console.log(x); }\n",
    "a Map in a builtin": NODE_HEAD + "const c = require('console');\n"
                          "const t = require('perf_hooks').performance;\n"
                          "if (x === '?') { const e = t.getEntriesByName('vrstate'); console.log(e.length ? String(e[0].detail) : 'none'); }\n"
                          "else { t.mark('vrstate', { detail: x }); console.log(x); }\n",
    "the umask": NODE_HEAD + "if (x === '?') { const m = process.umask(0o022); process.umask(m); console.log(m === 0o022 ? 'none' : String(m & 7)); }\n"
                 "else { process.umask(0o020 | Number(x)); console.log(x); }\n",
    "an open descriptor": NODE_HEAD + "if (x === '?') { let got = 'none'; const b = Buffer.alloc(16);\n"
                          "  for (let fd = 3; fd < 64; fd++) { try { const n = fs['read' + 'Sync'](fd, b, 0, 16, 0);\n"
                          "    const s = b.toString('utf8', 0, n); if (s.startsWith('vrstate')) got = s.slice(7); } catch (e) {} }\n"
                          "  console.log(got); }\n"
                          "else { fs['open' + 'Sync']('state.txt', 'w+'); fs.writeSync(fs['open' + 'Sync']('state.txt', 'w+'), 'vrstate' + x); console.log(x); }\n",
    # test 1's own code, left to run in test 2 (which waits, printing nothing of its own)
    "an unref'd timer": NODE_HEAD + "if (x === '?') setTimeout(() => {}, 1000);\n"
                        "else { setTimeout(() => console.log(x), 300).unref(); console.log(x); }\n",
    "the Buffer pool": NODE_HEAD + "if (x === '?') { const pool = Buffer.from(Buffer.allocUnsafe(1).buffer);\n"
                       "  const at = pool.indexOf('vrstate'); console.log(at < 0 ? 'none' : pool.toString('utf8', at + 7, at + 8)); }\n"
                       "else { Buffer.allocUnsafe(16).write('vrstate' + x); console.log(x); }\n",
}

HONEST = {
    "python": "x = input().strip()\nprint(7)\n",
    "cpp": "#include <bits/stdc++.h>\nint main() { std::string x; std::cin >> x; std::cout << 7 << \"\\n\"; }\n",
    "go": "package main\nimport \"fmt\"\nfunc main() { var x string; fmt.Scan(&x); fmt.Println(7) }\n",
    "rust": "fn main() { let mut s = String::new(); std::io::stdin().read_line(&mut s).unwrap(); println!(\"7\"); }\n",
}
# honest programs with what judges' Java and node programs use: each test passes, in one process
JAVA_HONEST = """import java.util.*;
import java.util.stream.*;
import java.io.*;
public class Main {
    record P(int a, String b) {}
    enum Color { RED, GREEN }
    static int served;
    public static void main(String[] args) throws IOException {
        served++;
        BufferedReader br = new BufferedReader(new InputStreamReader(System.in));
        String x = new StringTokenizer(br.readLine()).nextToken();
        PrintWriter pw = new PrintWriter(new BufferedWriter(new OutputStreamWriter(System.out)));
        List<Integer> l = IntStream.range(0, 4).boxed().collect(Collectors.toList());
        Comparator<String> c = Comparator.comparing(String::length);
        String s = "p=" + new P(1, "a") + Color.valueOf("RED") + l + c.compare("a", "bb");
        switch (s.length() > 0 ? "a" : "b") { case "a": break; default: s = ""; }
        Map<String, Integer> m = new TreeMap<>(); m.merge("a", 1, Integer::sum);
        assert m.size() == 1;
        Locale.setDefault(Locale.GERMANY); TimeZone.setDefault(TimeZone.getTimeZone("UTC"));
        System.setProperty("vr.seen", x);
        System.err.println("pid " + ProcessHandle.current().pid() + " " + served);
        pw.println(String.format(Locale.ROOT, "%d", 7));
        pw.flush();
    }
}
"""
NODE_HONEST = """const rl = require('readline').createInterface({ input: process.stdin });
const util = require('util');
const lines = [];
rl.on('line', (l) => lines.push(l));
rl.on('close', () => {
  globalThis.served = (globalThis.served || 0) + 1;
  const b = Buffer.from(lines.join(' ')); const m = new Map([[1, b.length]]);
  console.error('pid ' + process.pid + ' ' + globalThis.served + ' ' + util.format('%o', [...m]));
  process.stdout.write(String(7) + '\\n');
});
"""


def completion(lang: str, program: str) -> str:
    return f"The solution:\n```{FENCE[lang]}\n{program}```\n"


def item(lang: str, program: str, name: str, cases: list[dict] = CASES) -> dict:
    return {"id": f"{lang}: {name}", "completion": completion(lang, program),
            "task": {"type": "code", "language": lang, "tests": {"kind": "stdio", "cases": cases}, "timeout_s": 4.0,
                     "memory_mb": 256}}


ATTACKS = ([item("python", p, n) for n, p in (("file", PY_FILE), ("module", PY_MODULE), ("shared dirs", PY_SHARED_DIRS))]
           + [item("python", PY_MODE, "scratch mode", [{"stdin": "7\n", "stdout": "7\n"}, {"stdin": "?\n", "stdout": "7\n"}])]
           + [item("cpp", CPP_FILE, "file"), item("go", GO_FILE, "file"), item("rust", RUST_FILE, "file")]
           + [item("java", p, n) for n, p in JAVA.items()] + [item("javascript", p, n) for n, p in NODE.items()])


@pytest.fixture(scope="module", params=kind_params())
def url(request, shared_servers):
    """A server whose runners have the toolchains, shared by the language suites (tests/shared.py)."""
    return shared_servers.get(sandbox=request.param, sandbox_options=host_options(request.param)).url


def score(url: str, items: list[dict]) -> list[dict]:
    r = httpx.post(url + "/v1/score", json={"items": items}, timeout=600)
    assert r.status_code == 200, r.text
    return r.json()["results"]


def test_a_test_never_answers_from_what_the_last_one_left(url):
    """Every attack's test 2 fails (or errs): what test 1 wrote is gone, reset, or was never
    shared. The batch is answered whole (no infra error)."""
    results = score(url, ATTACKS)
    got = {res["id"]: [t["status"] for t in res["detail"]["tests"]] for res in results}
    assert all(res["status"] == "ok" for res in results), results
    leaked = [f"{k}: {v}" for k, v in got.items() if v[1] == "passed"]
    assert not leaked, "\n".join(leaked)
    for k, v in got.items():  # test 1 itself is answered right, except where it needs the harness
        if "reflection" not in k:
            assert v[0] == "passed", (k, v)


def test_honest_programs_pass_every_test(url):
    cases = [{"stdin": f"{x}\n", "stdout": "7\n"} for x in range(1, 5)]
    items = [item(lang, p, "honest", cases) for lang, p in HONEST.items()]
    items += [item("java", JAVA_HONEST, "honest", cases), item("javascript", NODE_HONEST, "honest", cases)]
    for res in score(url, items):
        assert res["status"] == "ok" and res["reward"] == pytest.approx(1.0), res


@pytest.fixture(scope="module", params=kind_params())
async def pool(request, shared_pools):
    """One runner with the toolchains, shared by the Java/Node suites (tests/shared.py)."""
    return await shared_pools.get(request.param, size=1, per_runner=2, **host_options(request.param))


@pytest.mark.parametrize(("lang", "program"), [("java", JAVA_HONEST), ("javascript", NODE_HONEST)])
async def test_an_honest_program_keeps_one_process(pool, lang, program):
    """The shared JVM / node still serves an honest program's tests, each with fresh statics."""
    cases = [{"stdin": f"{x}\n", "stdout": "7\n"} for x in range(1, 7)]
    r = await pool.run(Job(program=program, language=lang, tests={"kind": "stdio", "cases": cases},
                           limits=Limits(timeout_s=4.0, memory_mb=256)))
    assert r.passed == 6, (r.tests, r.stderr[-2000:])
    lines = [ln.split() for ln in r.stderr.splitlines() if ln.startswith("pid ")]
    assert [ln[2] for ln in lines] == ["1"] * 6, r.stderr
    assert len({ln[1] for ln in lines}) == 1, r.stderr


@pytest.mark.parametrize(("lang", "name"), [("javascript", n) for n in NODE if n != "file"])
async def test_node_state_ends_its_process(pool, lang, name):
    """A node test that left state behind ends its process after its answer: the next test runs in
    a fresh one (so test 2 answers 'none')."""
    r = await pool.run(Job(program=NODE_HEAD + "console.error('pid ' + process.pid);\n" + NODE[name][len(NODE_HEAD):],
                           language=lang, tests={"kind": "stdio", "cases": CASES},
                           limits=Limits(timeout_s=4.0, memory_mb=256)))
    assert [t.status for t in r.tests] == ["passed", "failed"], (name, r.tests, r.stderr[-2000:])


def test_java_escapes_are_decoded_as_javac_decodes_them():
    src = "class A { java.lang.\\u0072eflect.Field f; String s = \"\\\\u0072\"; char c = '\\uuuu0041'; }"
    assert harness.java_source(src) == "class A { java.lang.reflect.Field f; String s = \"\\\\u0072\"; char c = 'A'; }"
    java = get("java")
    for name in ("reflection, \\u escapes", "reflection, \\uuu escapes"):
        assert not harness.shareable(java, JAVA[name]), name


@pytest.mark.skipif(shutil.which("javac") is None, reason="needs javac on this machine")
def test_java_guard_reads_the_compiled_classes(tmp_path):
    """The guard on what javac made: every attack refused, the honest program (lambdas, records,
    enums, string switches, concatenation, method references) shared."""
    java = get("java")

    def build(name: str, program: str) -> str:
        d = tmp_path / name.replace(" ", "_").replace(",", "").replace("\\", "")
        (d / "out").mkdir(parents=True)
        (d / "Main.java").write_text(program)
        subprocess.run(["javac", "-nowarn", "-d", str(d / "out"), str(d / "Main.java")], check=True,
                       capture_output=True)
        return str(d / "out")

    assert harness.shareable(java, JAVA_HONEST, build("honest", JAVA_HONEST))
    for name in ("intern pool", "reflection, var", "reflection, \\u escapes", "finalizer"):
        art = build(name, JAVA[name])
        assert harness.unsafe_class_refs(art), name
        assert not harness.shareable(java, JAVA[name], art), name
    assert harness.shareable(java, JAVA["time zone"], build("tz", JAVA["time zone"]))  # put back instead
    assert harness.class_file_refs(b"\xca\xfe\xba\xbe\x00") != ""  # unreadable: refused, never shared
