"""Attacks on the shared Java / node process (sandbox/runner/languages/harness.py), through a
real pool on both hosts: reaching the harness (threads, reflection, the harness's stderr line,
node's vm escape and the harness realm's builtins), keeping a thread or state alive into the
next test. Each program prints the right answer and then fails (an exception), so a careful
judge says "error" for every test: a forged end line would turn that into "passed". Each must
get the judge's statuses, and the runners must serve the next job."""

from __future__ import annotations

import pytest
import pytest_asyncio

from sandbox import Job, Limits
from sandbox.runner.languages import get, harness
from tests.conftest import kind_params
from tests.sandbox.conftest import no_runner_lost
from tests.sandbox.lang_programs import host_options

CASES = [{"stdin": f"{x}\n", "stdout": f"{2 * x}\n"} for x in (1, 2, 3, 4)]


@pytest_asyncio.fixture(scope="module", params=kind_params())
async def pool(request, shared_pools):
    """One runner with the toolchains, shared by the Java/Node suites (tests/shared.py)."""
    return await shared_pools.get(request.param, size=1, per_runner=2, **host_options(request.param))


def job(lang: str, program: str, cases: list[dict] = CASES) -> Job:
    return Job(program=program, language=lang, tests={"kind": "stdio", "cases": cases},
               limits=Limits(timeout_s=2.0, memory_mb=512, stop_on_timeout=False))


JAVA_HEAD = "import java.util.*;\npublic class Main { public static void main(String[] a) throws Exception {\n" \
            "  int x = new Scanner(System.in).nextInt(); System.out.println(x * 2);\n"
GUESS = ("  String cmd = System.getProperty(\"sun.java.command\", \"\") + \" \" + ProcessHandle.current().info().commandLine().orElse(\"\");\n"
         "  for (String w : (cmd + \" 0000000000000000\").split(\"[ /]\")) System.err.print(\"\\u001evr:\" + w + \"\\n\");\n")

JAVA = {
    # the harness's threads: interrupted, stopped; end lines guessed from the command line
    "threads and guessed end lines": (
        JAVA_HEAD + GUESS
        + "  for (Thread t : Thread.getAllStackTraces().keySet()) if (t != Thread.currentThread()) { t.interrupt(); }\n"
          "  throw new RuntimeException(\"after the answer\"); } }\n", True),
    "stopping the harness's thread": (
        JAVA_HEAD
        + "  for (Thread t : Thread.getAllStackTraces().keySet()) if (t.getName().equals(\"main\") && t != Thread.currentThread()) t.stop();\n"
          "  throw new RuntimeException(\"after the answer\"); } }\n", True),
    # reflection on the harness's classes (found through a thread's class): a process per test
    "reflection on the harness": (
        JAVA_HEAD
        + "  for (Thread t : Thread.getAllStackTraces().keySet()) { Class<?> c = t.getClass();\n"
          "    try { Class<?> h = ClassLoader.getSystemClassLoader().loadClass(\"VrHarness\");\n"
          "      for (java.lang.reflect.Field f : h.getDeclaredFields()) { f.setAccessible(true); System.err.println(f); }\n"
          "    } catch (Throwable e) { } }\n"
          "  throw new RuntimeException(\"after the answer\"); } }\n", False),
    # the process's memory, where the secret lives: a process per test
    "reading /proc/self": (
        JAVA_HEAD
        + "  try { System.err.println(new String(java.nio.file.Files.readAllBytes(java.nio.file.Paths.get(\"/proc/self/cmdline\")))); } catch (Exception e) { }\n"
          "  throw new RuntimeException(\"after the answer\"); } }\n", False),
}

NODE_HEAD = "const x = Number(require('fs').readFileSync(0, 'utf8')); console.log(x * 2);\n"
# Buffer -> Uint8Array -> %TypedArray% -> the harness realm's Function.prototype -> Object.prototype
PATCHES = (
    "const FP = Object.getPrototypeOf(Object.getPrototypeOf(Object.getPrototypeOf(Buffer)));\n"
    "const O = Object.getPrototypeOf(FP).constructor; const SP = Object.getPrototypeOf(O('s'));\n"
    "const AP = Object.getPrototypeOf(Buffer.from('a').toJSON().data); const TA = Object.getPrototypeOf(Uint8Array.prototype);\n"
    "const seen = O.vrSeen || (O.vrSeen = []);\n"
    "const keep = (v) => { if (typeof v === 'string' && /^[0-9a-f]{16}/.test(v)) seen.push(v.slice(0, 16)); };\n"
    "if (!O.vrPatched) { O.vrPatched = true;\n"
    "  const split = SP.split; SP.split = function (...a) { keep(String(this)); return split.apply(this, a); };\n"
    "  const spl = function (s, n) { keep(String(s)); delete SP[Symbol.split];\n"
    "    try { return split.call(s, String(this), n); } finally { SP[Symbol.split] = spl; } }; SP[Symbol.split] = spl;\n"
    "  const it = AP[Symbol.iterator]; AP[Symbol.iterator] = function () { for (let i = 0; i < this.length; i++) keep(this[i]); return it.call(this); };\n"
    "  const bl = Object.getOwnPropertyDescriptor(TA, 'byteLength').get;\n"
    "  Object.defineProperty(TA, 'byteLength', { get() { const n = bl.call(this); if (n === 22 || n === 23) {\n"
    "    let t = ''; for (let i = 4; i < 20; i++) t += String.fromCharCode(this[i]); keep(t); } return n; }, configurable: true }); }\n"
    "process.stderr.write('pid ' + process.pid + ' seen ' + seen.length + '\\n');\n"
)
FORGE = "for (const w of seen) process.stderr.write('\\x1evr:' + w + '\\n');\n"
NODE = {
    # the classic vm escape, then end lines guessed
    "this.constructor.constructor": (
        NODE_HEAD
        + "let p = null; try { p = this.constructor.constructor('return process')(); } catch (e) { }\n"
          "if (p) for (const w of [...p.argv, '0'.repeat(16)]) p.stderr.write('\\x1evr:' + w + '\\n');\n"
          "throw new Error('after the answer');\n", True),
    # the harness realm's builtins (reached from Buffer, without compiling a string), patched to
    # catch the next test's secret where the harness would split, iterate or measure it
    # (the first test ends cleanly, so that the same node reads the next test's secret)
    "patched builtins of the harness's realm": (
        NODE_HEAD + PATCHES + "if (x > 1) {\n" + FORGE + "throw new Error('after the answer'); }\n", True),
    # builtins that reach the harness's memory, by computed names: a process per test
    "v8, inspector and /proc by computed names": (
        NODE_HEAD
        + "try { require(['v', '8'].join('')).getHeapSnapshot(); } catch (e) { }\n"
          "try { require(['insp', 'ector'].join('')).Session; } catch (e) { }\n"
          "try { require('fs').readFileSync(['', 'proc', 'self', 'cmdline'].join('/')); } catch (e) { }\n"
          "throw new Error('after the answer');\n", True),
}


@pytest.mark.parametrize(("lang", "name"), [("java", n) for n in JAVA] + [("javascript", n) for n in NODE])
async def test_reaching_the_harness_forges_nothing(pool, lang, name):
    program, shared = (JAVA if lang == "java" else NODE)[name]
    assert harness.shareable(get(lang), program) is shared
    async with no_runner_lost(pool):
        r = await pool.run(job(lang, program))
    first = "passed" if "x > 1" in program else "error"
    assert [t.status for t in r.tests] == [first] + ["error"] * 3, (name, r.tests, r.stderr[-2000:])


async def test_the_patched_builtins_leave_the_harness_serving(pool):
    """The patches above, by a program that then ends cleanly: every test passes and they caught
    no secret. Patching the harness realm's builtins is state left for the next test, so each
    test's node ends after its answer and the next test gets a fresh one (the patches never
    meet a later test's secret)."""
    async with no_runner_lost(pool):
        r = await pool.run(job("javascript", NODE_HEAD + PATCHES + FORGE))
    assert [t.status for t in r.tests] == ["passed"] * 4, (r.tests, r.stderr[-2000:])
    lines = [ln.split() for ln in r.stderr.splitlines() if ln.startswith("pid ")]
    assert len(lines) == 4 and len({ln[1] for ln in lines}) == 4, r.stderr
    assert {ln[3] for ln in lines} == {"0"}, r.stderr


LEAK = {
    # a daemon thread printing into the next test; a property, a default handler, a locale left set
    "java": "import java.util.*;\npublic class Main { public static void main(String[] a) throws Exception {\n"
            "  int x = new Scanner(System.in).nextInt(); String prev = System.getProperty(\"vr.prev\", \"none\");\n"
            "  System.setProperty(\"vr.prev\", String.valueOf(x)); Locale.setDefault(Locale.GERMANY);\n"
            "  Thread.setDefaultUncaughtExceptionHandler((t, e) -> System.out.println(\"LEAK handler\"));\n"
            "  java.io.PrintStream out = System.out; Thread d = new Thread(() -> { try { Thread.sleep(300); } catch (Exception e) { }\n"
            "    out.println(\"LEAK thread\"); }); d.setDaemon(true); d.start();\n"
            "  System.out.println(x * 2 + \" \" + prev); } }\n",
    # a timer left running, globals, the harness realm's Object.prototype (reached from Buffer)
    "javascript": "const x = Number(require('fs').readFileSync(0, 'utf8'));\n"
                  "const OP = Object.getPrototypeOf(Object.getPrototypeOf(Object.getPrototypeOf(Object.getPrototypeOf(Buffer))));\n"
                  "const prev = OP.vrPrev === undefined ? 'none' : 'LEAK ' + OP.vrPrev; OP.vrPrev = x; globalThis.vrPrev = x;\n"
                  "setTimeout(() => console.log('LEAK timer'), 300).unref();\n"
                  "console.log(x * 2 + ' ' + prev);\n",
}


@pytest.mark.parametrize("lang", list(LEAK))
async def test_state_left_for_the_next_test(pool, lang):
    """What a test leaves behind never reaches the next test's answer as a pass it did not earn:
    Java's threads end with their JVM and its globals are reset; node's timers end with the
    process. Anything left in the harness realm's own objects (node) is the program's own earlier
    input, never an expected output: at worst its next answer is wrong."""
    cases = [{"stdin": f"{x}\n", "stdout": f"{2 * x} none\n"} for x in (1, 2, 3)]
    async with no_runner_lost(pool):
        r = await pool.run(job(lang, LEAK[lang], cases))
    got = [t.status for t in r.tests]
    assert "LEAK thread" not in r.stdout and "LEAK timer" not in r.stdout
    if lang == "java":
        assert got == ["passed"] * 3, r.tests
    else:
        assert got[0] == "passed" and set(got[1:]) <= {"passed", "failed"}, r.tests
