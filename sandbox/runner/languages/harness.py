"""One JVM / node process serving a job's stdio tests, each with fresh per-test state.

A fresh JVM costs ~70-100 ms of CPU here and a fresh node ~75 ms; a test in a fresh class
loader or `vm` context ~1-3 ms. So for a language with a harness (table.py `shared`), the job's
tests go, one at a time, to one process running our harness (harness/VrHarness.java,
harness/vr_harness.js; built once per runner through the compile cache like any program):

- the supervisor writes a test's input on the process's stdin as `<secret> <bytes>\\n<input>`
  (a fresh random secret per test), and only after the previous test ended;
- the harness runs the program with fresh state on that input; the program's stdout and
  stderr are the process's own, read and compared here exactly as for a process per test;
- a test ends either with one line on stderr (`\\x1evr:<secret>\\n`, cut out of the stderr
  kept), meaning "it ended as a clean exit 0 would", or with the process's end: the kernel's
  exit status, and the harness ends the process exactly where a fresh one would have ended
  otherwise (an uncaught exception, an exit call, a thread or a listener left); the next test
  then gets a fresh process;
- the time limit is the process's CPU time since the test's input was sent (the kernel's
  clock, as for a process per test), the wall clock a backstop; a timeout kills the process.

The harness is not trusted: the candidate runs inside its process. The line only says "this
test ended as exit 0 would", which any program gets by exiting; the verdict is what the
supervisor read and compared, and a line with another secret is the program's own stderr.
What a forged line could buy (ending its own test early) needs the test's secret, which the
harnesses keep out of the program's reach: Java in a local of its loop only (reflection does
not read another frame's locals; programs that name reflection, memory, files or native code
run apart); node in closures, with its realm compiling no strings, a `process` of the
program's own, and every function it calls taken before any program runs (node's vm is no
boundary: docs/LANGUAGES.md says what an escape could still do).

Where sharing is not faithful the job runs a process per test: a program that names what the
harness cannot give it per test (table.py `shared_unsafe`: raw fd 0 or 1, child processes,
shutdown hooks...); from a test where node's harness asked for it (`\\x1evr:<secret>!\\n`: a
builtin or path of that kind reached by a computed name), or that hit the wall-clock backstop
having used almost no CPU (as a program blocked on input the harness does not give it would),
the rest of the job, that test run again as a process (one that used CPU is a timeout as usual).
"""

from __future__ import annotations

import os
import re
import struct
import time

from .. import cleanup, limits
from ..children import WRITE, Candidate, Children, OutputMeter, close_fd
from ..compare import StdoutMatcher
from ..compare_modes import Matcher
from ..cpuclock import TestClock, tree_cpu_s
from ..procfs import run_delay_s
from ..script import ScriptEnd, encode_stdin, judge_exit
from .spec import Language
from .table import get

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "harness")
MAX_TESTS = 64  # a process serves at most this many tests, then a fresh one (bounds any slow leak)
MARK = b"\x1evr:"


def source(lang: Language) -> str:
    """The harness's source for `lang` (read here, by the trusted supervisor)."""
    with open(os.path.join(HERE, lang.harness), encoding="utf-8") as f:
        return f.read()


def built_as(lang: Language) -> Language:
    """The language the harness itself is built as (TypeScript's is JavaScript's harness)."""
    return get({".java": "java", ".js": "javascript"}[os.path.splitext(lang.harness)[1]]) or lang


def shareable(lang: Language, program: str, art: str | None = None) -> bool:
    """Whether `program` may be served by the shared process (else a process per test): its
    source names nothing of `shared_unsafe` as its compiler reads it (Java: after javac's
    unicode escapes), and, given the built classes `art` of a Java program, they reach no
    JDK-wide state (`unsafe_class_refs`). A refused program runs a process per test, faithfully."""
    if not lang.shared:
        return False
    java = lang.harness.endswith(".java")
    text = java_source(program) if java else program
    if lang.shared_unsafe and re.search(lang.shared_unsafe, text):
        return False
    return not (java and art is not None and unsafe_class_refs(art))


_JAVA_ESCAPE = re.compile(r"(\\+)(u+)([0-9A-Fa-f]{4})")


def java_source(program: str) -> str:
    """The source as javac reads it (JLS 3.3): a backslash preceded by an even number of
    backslashes, one or more `u`s and four hex digits is that character, anywhere in the file
    (identifiers, imports, strings, comments), so `\\u0072eflect` is `reflect`."""

    def one(m: re.Match[str]) -> str:
        slashes = m.group(1)
        if len(slashes) % 2 == 0:  # the last backslash is itself escaped: not an escape
            return m.group(0)
        return slashes[:-1] + chr(int(m.group(3), 16))

    return _JAVA_ESCAPE.sub(one, program)


# What a shared JVM cannot give a test of its own, by the internal names in a class's constant
# pool: reflection and method handles (the harness's fields and frames), class loaders, native
# code, processes, files, the network, and the JDK-wide state the harness does not put back
# (security, logging, preferences, the intern pool, other threads and thread groups, the heap's
# size). A class or member of these in any of the program's classes: a JVM per test.
UNSAFE_PACKAGES = ("java/lang/reflect/", "java/lang/invoke/", "java/lang/instrument/", "java/lang/management/",
                   "java/lang/module/", "java/nio/file/", "java/nio/channels/", "java/net/", "java/util/logging/",
                   "java/util/prefs/", "java/security/", "java/rmi/", "java/sql/", "java/beans/", "javax/", "sun/",
                   "jdk/", "com/sun/")
UNSAFE_CLASSES = frozenset({
    "java/lang/ClassLoader", "java/lang/Module", "java/lang/ModuleLayer", "java/lang/Process",
    "java/lang/ProcessBuilder", "java/lang/ThreadGroup", "java/lang/SecurityManager", "java/lang/System$Logger",
    "java/lang/ref/Cleaner", "java/io/File", "java/io/FileDescriptor", "java/io/FileInputStream",
    "java/io/FileOutputStream", "java/io/FileReader", "java/io/FileWriter", "java/io/RandomAccessFile",
    "java/io/Console", "java/util/ServiceLoader", "java/util/ResourceBundle",
})
SAFE_CLASSES = frozenset({"java/security/SecureRandom", "java/security/MessageDigest",
                          "java/security/NoSuchAlgorithmException"})
# Class entries javac writes for any lambda or string concatenation (InnerClasses, bootstraps:
# their methods only as bootstrap methods, which `_class_refs` checks)
BOOTSTRAP_CLASSES = frozenset({"java/lang/invoke/MethodHandles$Lookup", "java/lang/invoke/MethodHandles"})
BOOTSTRAPS = frozenset({"java/lang/invoke/LambdaMetafactory", "java/lang/invoke/StringConcatFactory",
                        "java/lang/runtime/ObjectMethods", "java/lang/runtime/SwitchBootstraps"})
UNSAFE_MEMBERS = {
    "java/lang/System": {"setSecurityManager", "getSecurityManager", "load", "loadLibrary", "inheritedChannel",
                         "console", "getLogger"},
    "java/lang/Runtime": {"exec", "load", "loadLibrary", "addShutdownHook", "removeShutdownHook", "totalMemory",
                          "freeMemory"},
    "java/lang/String": {"intern"},
    "java/lang/Thread": {"getAllStackTraces", "enumerate", "getThreadGroup", "activeCount"},
}
# java/lang/Class: only what reads the class itself (getMethod, forName, getClassLoader... refused)
CLASS_SAFE = frozenset({"getName", "getSimpleName", "getTypeName", "getCanonicalName", "getPackageName", "toString",
                        "hashCode", "equals", "isInstance", "cast", "desiredAssertionStatus", "isArray", "isPrimitive",
                        "isInterface", "isEnum", "isRecord", "getComponentType", "componentType", "arrayType",
                        "isAssignableFrom", "getEnumConstants", "getModifiers", "getSuperclass"})
ACC_NATIVE = 0x0100


def unsafe_class_refs(art: str) -> str:
    """What in the program's compiled classes under `art` (the compile cache's entry, read by
    the supervisor) a shared JVM cannot give it; "" where nothing. Read from what the JVM will
    load, so no spelling of the source (unicode escapes, `var`, a method reference) hides it."""
    found = []
    for root, _dirs, files in os.walk(art):
        for name in files:
            if name.endswith(".class"):
                try:
                    with open(os.path.join(root, name), "rb") as f:
                        why = class_file_refs(f.read())
                except OSError as exc:
                    why = f"unreadable class {name}: {exc}"
                if why:
                    found.append(why)
    return "; ".join(found)


def class_file_refs(data: bytes) -> str:
    """The first reference of one class file that a shared JVM cannot serve, "" where none;
    a class file this cannot read counts as such a reference."""
    try:
        return _class_refs(data)
    except (IndexError, ValueError, struct.error, UnicodeDecodeError) as exc:
        return f"unreadable class file ({type(exc).__name__})"


def _class_refs(data: bytes) -> str:
    if data[:4] != b"\xca\xfe\xba\xbe":
        raise ValueError("not a class file")
    count = struct.unpack_from(">H", data, 8)[0]
    pool: list[tuple] = [()] * count
    at, i = 10, 1
    while i < count:
        tag = data[at]
        if tag == 1:
            n = struct.unpack_from(">H", data, at + 1)[0]
            pool[i] = (1, data[at + 3:at + 3 + n].replace(b"\xc0\x80", b"\0").decode("utf-8", "surrogatepass"))
            at += 3 + n
        elif tag in (3, 4):
            at += 5
        elif tag in (5, 6):
            at += 9
            i += 1
        elif tag in (7, 8, 16, 19, 20):
            pool[i] = (tag, struct.unpack_from(">H", data, at + 1)[0])
            at += 3
        elif tag in (9, 10, 11, 12, 17, 18):
            pool[i] = (tag, *struct.unpack_from(">HH", data, at + 1))
            at += 5
        elif tag == 15:
            pool[i] = (15, data[at + 1], struct.unpack_from(">H", data, at + 2)[0])
            at += 4
        else:
            raise ValueError(f"constant tag {tag}")
        i += 1

    def utf8(k: int) -> str:
        if pool[k][0] != 1:
            raise ValueError("not a name")
        return pool[k][1]

    def class_name(k: int) -> str:
        if pool[k][0] != 7:
            raise ValueError("not a class")
        return utf8(pool[k][1])

    this = class_name(struct.unpack_from(">H", data, at + 2)[0])
    at += 6  # access flags, this class, super class
    at += 2 + 2 * struct.unpack_from(">H", data, at)[0]  # interfaces
    for members in ("field", "method"):
        n = struct.unpack_from(">H", data, at)[0]
        at += 2
        for _ in range(n):
            flags, name, desc, n_attrs = struct.unpack_from(">HHHH", data, at)
            if members == "method" and flags & ACC_NATIVE:
                return f"a native method in {this}"
            if members == "method" and utf8(name) == "finalize" and utf8(desc) == "()V":
                return f"a finalizer in {this}"  # it runs whenever a collection comes: in a later test
            at += 8
            for _ in range(n_attrs):
                at += 6 + struct.unpack_from(">I", data, at + 2)[0]
    bootstraps: list[int] = []
    n_attrs = struct.unpack_from(">H", data, at)[0]
    at += 2
    for _ in range(n_attrs):
        attr, size = struct.unpack_from(">HI", data, at)
        if utf8(attr) == "BootstrapMethods":
            b = at + 8
            for _ in range(struct.unpack_from(">H", data, at + 6)[0]):
                ref, n_args = struct.unpack_from(">HH", data, b)
                bootstraps.append(ref)
                b += 4 + 2 * n_args
        at += 6 + size
    allowed = set()
    for ref in bootstraps:  # a bootstrap method javac uses for lambdas, concatenation, records
        if pool[ref][0] != 15:
            raise ValueError("bootstrap is not a method handle")
        member = pool[ref][2]
        owner = class_name(pool[member][1])
        if owner not in BOOTSTRAPS:
            return f"bootstrap method of {owner}"
        allowed.add(member)
    for k, entry in enumerate(pool):
        if not entry:
            continue
        if entry[0] == 7:
            name = _element(utf8(entry[1]))
            if name not in BOOTSTRAP_CLASSES and name not in BOOTSTRAPS and _unsafe_class(name):
                return name
        elif entry[0] in (9, 10, 11) and k not in allowed:
            owner = _element(class_name(entry[1]))
            member = utf8(pool[entry[2]][1])
            if _unsafe_class(owner):
                return f"{owner}.{member}"
            if member in UNSAFE_MEMBERS.get(owner, ()) or (owner == "java/lang/Class" and member not in CLASS_SAFE):
                return f"{owner}.{member}"
    return ""


def _unsafe_class(name: str) -> bool:
    outer = name.split("$", 1)[0]  # a nested class is its outer class's
    return name not in SAFE_CLASSES and (outer in UNSAFE_CLASSES or name in UNSAFE_CLASSES
                                         or name.startswith(UNSAFE_PACKAGES))


def _element(name: str) -> str:
    """An array class's element class (`[Ljava/io/File;` -> `java/io/File`), else the name."""
    name = name.lstrip("[")
    return name[1:-1] if name.startswith("L") and name.endswith(";") else name


class HarnessMeter(OutputMeter):
    """The job's output meter, with the harness's end lines cut out of stderr (and noted)."""

    def __init__(self, limit: int, keep: int) -> None:
        super().__init__(limit, keep)
        self.head = MARK + os.urandom(8).hex().encode()  # the current test's lines begin so
        self.pending = bytearray()  # stderr held back: it may be the start of an end line
        self.ends: list[str] = []  # the lines seen: "end" (a clean exit 0) or "apart" (run it as a process)
        self.stdout_bytes = 0

    def charge(self, stream: str, data: bytes, index: int | None) -> None:
        if stream == "stdout":
            self.stdout_bytes += len(data)
            super().charge(stream, data, index)
            return
        buf = self.pending + data
        out = bytearray()
        while buf:
            at = buf.find(MARK)
            if at < 0:
                keep = _partial_tail(buf, MARK)
                out += buf[: len(buf) - keep]
                buf = buf[len(buf) - keep:]
                break
            out += buf[:at]
            buf = buf[at:]
            line = self.head + b"\n"
            apart = self.head + b"!\n"
            if buf.startswith(line) or buf.startswith(apart):
                self.ends.append("end" if buf.startswith(line) else "apart")
                buf = buf[len(line) if buf.startswith(line) else len(apart):]
            elif len(buf) < len(apart) and (line.startswith(bytes(buf)) or apart.startswith(bytes(buf))):
                break  # maybe ours: wait for the rest
            else:  # not a line that ends this test: the program's bytes
                out += buf[:1]
                buf = buf[1:]
        self.pending = bytearray(buf)
        if out:
            super().charge("stderr", bytes(out), index)

    def flush_pending(self) -> None:
        """What was held back is the program's (its process ended)."""
        if self.pending:
            data, self.pending = bytes(self.pending), bytearray()
            super().charge("stderr", data, None)


def _idle(clock: TestClock) -> bool:
    """A test that hit the wall clock having used almost no CPU: it slept or blocked."""
    return clock.used is None or clock.used < 0.05 * clock.limit_s + 0.05


def _partial_tail(buf: bytearray, mark: bytes) -> int:
    """How many bytes at the end of `buf` could begin `mark`."""
    for k in range(min(len(mark) - 1, len(buf)), 0, -1):
        if buf.endswith(mark[:k]):
            return k
    return 0


class SharedProcess:
    """The job's harness process, across its tests; `run_case` is one test. Returns None for
    a test to be run as a process of its own instead (and every test after it)."""

    def __init__(self, ch: Children, meter: HarnessMeter, argv: list[str], env: dict[str, str], scratch: str, plim,
                 n_tests: int) -> None:
        self.ch = ch
        self.argv = argv
        self.env = env
        self.scratch = scratch
        self.plim = plim
        self.left = n_tests
        self.meter = meter  # the job's
        self.c: Candidate | None = None
        self.served = 0
        self.started = 0  # processes started (for tests and the report)
        self.off = False  # the rest of the job runs a process per test
        self.unsent = False

    def _start(self) -> bool:
        ch, lim = self.ch, self.plim
        c = ch.take_candidate("script", self.meter)
        self.started += 1
        # RLIMIT_CPU: every test it may serve (each is limited by the clock here)
        msg = ch.load_message(c, "execve", "", self.scratch, lim.rlimits(lim.timeout_s, min(self.left, MAX_TESTS)))
        msg.update(argv=self.argv, env=self.env)
        self.c, self.served = c, 0
        if not ch.send_candidate(c, msg):
            return False
        return ch.wait_settled(c, time.monotonic() + 10)

    def run_case(self, stdin: str) -> ScriptEnd | None:
        ch, meter = self.ch, self.meter
        if self.off:
            return None
        out = ScriptEnd()
        meter.start_unit()  # before a start: the last test's output limit is not this one's
        c = self.c
        if c is None or c.killed or c.pid in ch.exits or self.served >= MAX_TESTS:
            self.stop()
            if not self._start():
                self.stop()
                out.status, out.message = "error", "candidate did not start"
                return out
            c = self.c
        assert c is not None
        self.served += 1
        self.left -= 1
        n_ends = len(meter.ends)
        before = {k: len(v) for k, v in meter.kept.items()}
        uid = ch.c_uid if limits.can_switch_uid() else None
        t0 = time.monotonic()
        clock = TestClock(self.plim.timeout_s, self.plim.wall_factor, t0, tree_cpu_s(c.pid, None))
        data = encode_stdin(stdin)
        secret = os.urandom(8).hex()
        meter.head = MARK + secret.encode()
        pending = f"{secret} {len(data)}\n".encode() + data
        over = self._serve(c, clock, uid, t0, pending, n_ends)
        out.time_s = round(time.monotonic() - t0, 6)
        ended = len(meter.ends) > n_ends
        note = ch.exits.get(c.pid)
        if ended and meter.ends[n_ends] == "apart":  # it needs what sharing cannot give it
            return self._apart(before)
        if meter.over_limit:
            out.status, out.message = "output_limit", f"output exceeded {meter.limit} bytes"
        elif ended:
            out.exit = 0
        elif over or note is None or c.open_pipes > 0:
            if over in ("wall", "hard") and _idle(clock):  # blocked: maybe on what sharing does not give it
                return self._apart(before)
            out.status, out.message = "timeout", clock.message(over or "wall")
        else:
            judge_exit(note, out)
        if not ended or out.status != "finished" or self.unsent:
            self.stop()  # the next test gets a fresh process
        out.stdout = bytes(meter.kept["stdout"][before["stdout"]:])
        out.stderr = bytes(meter.kept["stderr"][before["stderr"]:])
        return out

    def _serve(self, c: Candidate, clock: TestClock, uid: int | None, t0: float, pending: bytes, n_ends: int) -> str:
        """Send the test's input and wait for its end; the limit that passed, if one did."""
        ch, meter = self.ch, self.meter
        watching = False
        wake = clock.first_check
        over = ""
        while not c.killed and not meter.over_limit:
            if pending:
                try:
                    pending = pending[os.write(c.stdin_w, pending[: 1 << 16]):]
                except BlockingIOError:
                    pass
                except OSError:
                    pending = b""
                if pending and not watching:
                    ch.sel.register(c.stdin_w, WRITE, ("hin", c))  # wakes the pump; written here
                    watching = True
                elif not pending and watching:
                    ch.sel.unregister(c.stdin_w)
                    watching = False
            if len(meter.ends) > n_ends:
                self._drain()
                break
            if c.pid in ch.exits and c.open_pipes == 0:
                meter.flush_pending()
                break
            now = time.monotonic()
            if now >= wake:
                alive = c.pid not in ch.exits
                cpu = tree_cpu_s(c.pid, uid, since=t0) if alive else None
                over, wake = clock.check(now, cpu, run_delay_s(c.pid) if alive else None)
                if over:
                    break
                continue
            ch.pump(wake - now)
        if watching:
            ch.sel.unregister(c.stdin_w)
        self.unsent = bool(pending)  # an end line before its input was read: not the harness's
        return over

    def _drain(self) -> None:
        """What the program wrote on stdout before the end line is in the pipe: read it all."""
        ch, meter = self.ch, self.meter
        while True:
            seen = meter.stdout_bytes
            ch.pump(0)
            if meter.stdout_bytes == seen:
                return

    def _apart(self, before: dict[str, int]) -> None:
        """This test and the rest of the job: a process per test (what it printed here is dropped)."""
        self.stop()
        self.off = True
        for k, v in self.meter.kept.items():
            del v[before[k]:]
        matcher = getattr(self.meter.sink, "__self__", None)
        if isinstance(matcher, (StdoutMatcher, Matcher)):
            matcher.restart()

    def stop(self) -> None:
        c, self.c = self.c, None
        if c is not None:
            if c.stdin_w >= 0:
                self.ch.sel.unregister(c.stdin_w)
                close_fd(c, "stdin_w")
            self.ch.kill_candidate(c)
            cleanup.kill_uids({self.ch.c_uid})
            self.meter.flush_pending()
