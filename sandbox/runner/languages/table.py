"""The languages the runner builds and runs besides Python: one entry each (the record: spec.py),
and the lookups over them.

Flags follow what judges use (Codeforces: C++17 -O2, Java 17, Go, Rust 2021 -O, node) and the
traps measured in issue 17: RLIMIT_AS breaks Go, node and the JVM, so memory is RLIMIT_DATA
with an address-space backstop; the JVM's warnings go to stderr (never stdout, which is the
answer) and its threads need an nproc above 16; compilers get a stack, threads and memory of
their own, never the job's run limits.
"""

from __future__ import annotations

import dataclasses
import os

from .spec import PYTHON, Language, missing_tool

# /etc/alternatives holds the links Debian's /usr/bin/{cc,java,javac,...} point through
ALTERNATIVES = "/etc/alternatives"

# CompileThresholdScaling=4: C1 compiles a method after 4x the calls and loop turns. A job's
# methods are compiled afresh in every test (a class loader per test, languages/harness.py),
# mostly for runs over before the code pays back (measured: docs/LANGUAGES.md, "JIT thresholds")
JVM = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:CompileThresholdScaling=4", "-Xss8m",
       "-XX:ReservedCodeCacheSize=32m", "-XX:MaxMetaspaceSize=128m", "-XX:CompressedClassSpaceSize=64m", "-XX:-UsePerfData",
       "-Xlog:disable", "-Xlog:all=warning:stderr", "-XX:ErrorFile=/dev/null", "-Xshare:auto")

CPP_FLAGS = ("-std=c++17", "-O2", "-DONLINE_JUDGE", "-pipe")  # also those of the precompiled header (pch.py)

CPP = Language(
    name="cpp",
    aliases=("cpp", "c++", "cc", "cxx", "c++17"),
    source="main.cpp",
    # -static as Codeforces links: no dynamic loading of libstdc++ in every test (~0.3-0.5 ms each);
    # {ld}: gold where binutils has it, which links that static binary in half of ld.bfd's CPU
    # {pchlib}: the library templates the PCH declares extern (pch.py), after the program
    compile=("g++", *CPP_FLAGS, "{pch}", "-static", "{ld}", "-o", "{out}/main", "{src}", "{pchlib}"),
    run=("{art}/main",),
    tools=("g++",),
    reserve_mb=320,  # the 256 MB stack lives in the address space, not in RLIMIT_DATA
    stack_mb=256,
    oom_markers=("std::bad_alloc",),
)

JAVA = Language(
    name="java",
    aliases=("java", "java17"),
    source="{main}.java",
    entry=r"public\s+(?:final\s+|abstract\s+)*class\s+([A-Za-z_$][\w$]*)",
    main="Main",
    # no code of the job's runs in the compiler: annotation processors off (javac would find them
    # through META-INF/services on its default class path, the job's scratch), an explicit class
    # path (the build's own output); the job's other sources are still found by -sourcepath
    compile=("javac", *(f"-J{f}" for f in JVM if not f.startswith("-Xlog")), "-J-Xmx512m", "-encoding", "UTF-8",
             "-nowarn", "-proc:none", "-cp", "{out}", "-sourcepath", ".", "-d", "{out}", "{src}"),
    run=("java", *JVM, "-Xmx{heap_mb}m", "-Xms8m", "-cp", "{art}", "{main}"),
    # no attach listener: no agent loaded from outside could reach the harness's memory
    shared=("java", *JVM, "-XX:+DisableAttachMechanism", "-Xmx{heap_mb}m", "-Xms8m", "-cp", "{hart}", "VrHarness",
            "{art}", "{main}"),
    harness="VrHarness.java",
    # raw stdin/stdout (the harness's pipes), child processes, hooks that run at exit; and what
    # could reach the harness's memory: reflection, Unsafe, management beans, files, native code
    shared_unsafe=(r"FileDescriptor|addShutdownHook|ProcessBuilder|\.exec\s*\(|/dev/|/proc/|inheritedChannel"
                   r"|reflect|forName|getDeclared|setAccessible|MethodHandle|Unsafe|Management|HotSpot|jdk\.internal"
                   r"|\bFile\b|RandomAccessFile|FileInputStream|FileReader|\bFiles\b|\bPaths?\b|Channel|\bUR[LI]\b"
                   r"|\bload(?:Library)?\s*\(|\bnative\b|ClassLoader|Instrumentation|attach"),
    tools=("javac", "java"),
    host_paths=("/etc/java-17-openjdk",),  # Debian's JDK conf/ links into it
    run_overhead_mb=256,  # metaspace, code cache, GC and thread stacks beside the -Xmx heap
    reserve_mb=2048,
    run_nproc=48,
    compile_reserve_mb=3072,
    oom_markers=("java.lang.OutOfMemoryError", "insufficient memory for the Java Runtime"),
)

GO = Language(
    name="go",
    aliases=("go", "golang"),
    source="main.go",
    # no -trimpath, cgo left on: then the standard library's shipped archives are used as they
    # are (0.17 s CPU); a build of its own would recompile the runtime and fmt (7 s)
    compile=("go", "build", "-o", "{out}/main", "{src}"),
    run=("{art}/main",),
    tools=("go",),
    env={"GOCACHE": "{scratch}/.gocache", "GOPATH": "{scratch}/.gopath", "GO111MODULE": "off",
         "GOTOOLCHAIN": "local", "GOFLAGS": "-buildvcs=false"},
    reserve_mb=1024,  # the runtime reserves its arenas up front
    run_nproc=32,  # threads get RLIMIT_STACK-sized stacks: no big stack here
    oom_markers=("runtime: out of memory", "cannot allocate memory"),
)

RUST = Language(
    name="rust",
    aliases=("rust", "rs"),
    source="main.rs",
    compile=("rustc", "--edition", "2021", "-O", "-o", "{out}/main", "{src}"),
    run=("{art}/main",),
    tools=("rustc", "cc"),  # rustc links with cc
    reserve_mb=320,
    stack_mb=256,
    oom_markers=("memory allocation of",),
)

JAVASCRIPT = Language(
    name="javascript",
    aliases=("javascript", "js", "nodejs", "node"),
    source="main.js",
    compile=("node", "--check", "{src}"),  # a syntax error is a compile error, as for the others
    keep_source=True,
    # node sizes its own thread stacks by RLIMIT_STACK: at 128 MB or more it hangs at start
    run=("node", "--max-old-space-size={heap_mb}", "--stack-size=48000", "{art}/main.js"),
    # the harness's own realm compiles no strings (the program's context still does: eval works);
    # Buffer memory zeroed when allocated: no test's allocUnsafe shows bytes an earlier test freed
    shared=("node", "--max-old-space-size={heap_mb}", "--stack-size=48000", "--disallow-code-generation-from-strings",
            "--zero-fill-buffers", "{hart}/main.js", "{art}/main.js"),
    harness="vr_harness.js",
    # fd 0 other than by fs.readFileSync/readSync/readFile or process.stdin, processes, workers,
    # 'beforeExit' (the harness's end of a test)
    shared_unsafe=(r"child_process|worker_threads|\bcluster\b|beforeExit|process\.binding|inspector|fs/promises"
                   r"|\b(?:openSync|createReadStream|fstatSync|readvSync)\b|/proc/self|/dev/fd/"),
    tools=("node",),
    run_overhead_mb=128,
    reserve_mb=1024,
    run_nproc=32,
    stack_mb=64,
    # node 18 out of RLIMIT_DATA fails a V8 check while granting pages (SIGTRAP), not as OOM
    oom_markers=("heap out of memory", "Fatal process OOM", "Fatal process out of memory",
                 "reservation_.SetPermissions"),
)

# TypeScript: its types stripped by TypeScript's own compiler (tsc.js: transpileModule, no type
# check), then run as JavaScript. The compiler is the npm package sandbox/fetch_typescript.sh
# puts in <code root>/.cache/typescript: the same path here, in the toolchain image and in the
# bwrap view (its host binds the host's copy there; VERIREWARD_TYPESCRIPT_DIR moves it on a host)
TYPESCRIPT_IN_TREE = os.path.join(".cache", "typescript")
TYPESCRIPT_HOME = os.environ.get("VERIREWARD_TYPESCRIPT_DIR") or os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))),
    TYPESCRIPT_IN_TREE)
TSC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tsc.js")

TYPESCRIPT = dataclasses.replace(
    JAVASCRIPT,
    name="typescript",
    aliases=("typescript", "ts"),
    source="main.ts",
    # the compiler's heap is ~80 MB: --max-old-space-size keeps a huge source from growing it unbounded
    compile=("node", "--max-old-space-size=512", TSC, TYPESCRIPT_HOME, "{src}", "{out}/main.js"),
    keep_source=False,
    needs=(TSC, os.path.join(TYPESCRIPT_HOME, "node_modules", "typescript", "lib", "typescript.js")),
)

TABLE: tuple[Language, ...] = (CPP, JAVA, GO, RUST, JAVASCRIPT, TYPESCRIPT)
BY_NAME: dict[str, Language] = {alias: lang for lang in TABLE for alias in (lang.name, *lang.aliases)}


# ---------------------------------------------------------------- lookups over the table
def get(name: str) -> Language | None:
    """The language a client's name means (case-insensitive, aliases included), or None."""
    return BY_NAME.get(name.lower())


def names() -> list[str]:
    """Every name a client may send for a language other than python."""
    return sorted(BY_NAME)


def available() -> dict[str, bool]:
    """Each language's canonical name -> whether its toolchain is here (python always is)."""
    return {PYTHON: True, **{lang.name: missing_tool(lang) is None for lang in TABLE}}


def runnable() -> list[str]:
    """The canonical names of the languages whose toolchains this process sees."""
    return sorted(k for k, ok in available().items() if ok)


def host_paths() -> list[str]:
    """Directories outside the system ones that the toolchains here read, for a host to make
    visible read-only (bwrap: Debian's /etc/alternatives links and the JDK's /etc config)."""
    wanted = [ALTERNATIVES, *(p for lang in TABLE for p in lang.host_paths)]
    return [p for p in dict.fromkeys(wanted) if os.path.isdir(p)]
