"""A compiled-language job: build once (through the runner's cache), then a process per test.

Both steps are candidates forked from the pristine spawner that exec the tool: the job's own
uid, no network, the scratch as cwd/HOME/TMPDIR, limits of their own (the compiler's memory,
threads and time; the program's per-test CPU time, RLIMIT_DATA = the job's memory plus what
the runtime needs, with an address-space backstop). Compiler output is captured and capped
like any output. A stdio test is judged exactly as for Python (script.StdioRun: same
comparison, exit status from the kernel); only how the process is started differs.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass

from . import compileview, languages, limits
from .children import Children, InfraFailure, OutputMeter
from .compile_cache import BuildDir, CompileCache, Entry, remove_entry_at
from .cpuclock import wall_factor_of
from .languages import Language, harness, pch
from .launcher import BLOCKED, LAUNCHER_MIN_DATA_MB, Launcher, Limits, run_process
from .script import ExecRun, ScriptEnd, StdioRun

COMPILE_TIMEOUT_S = 20.0
COMPILE_WALL_MARGIN_S = 2.0  # a compile's wall-clock limit: its CPU limit plus this
COMPILE_IDLE_S = 4.0  # a compile whose processes use no CPU this long is cut (blocked on a read)
COMPILE_OUTPUT_BYTES = 1 << 20  # what a compiler may print before it is stopped
COMPILE_KEEP_BYTES = 16 << 10  # what of it is kept for the answer
COMPILE_FSIZE_MB = 128
OUT_DIR = ".vr-build"
PCH_DIR = "/opt/verireward/pch"  # a precompiled bits/stdc++.h for CPP's default flags, where built

_caches: dict[str, CompileCache] = {}


def cache_for(cfg: dict) -> CompileCache:
    """The runner's cache (one directory per runner, beside its scratch directories)."""
    root = cfg["scratch_base"].rstrip("/") + "-cache"
    if root not in _caches:
        _caches[root] = CompileCache(root)
    return _caches[root]


def pch_flags() -> str:
    """-I flags that make g++ use the precompiled bits/stdc++.h, when one was built for this
    toolchain (g++ checks it and falls back to the header when it does not match)."""
    return f"-I {PCH_DIR}" if os.path.exists(os.path.join(PCH_DIR, pch.GCH)) else ""


def pch_archive() -> str:
    """The archive of the library templates the precompiled header declares extern (pch.py),
    linked after the program; nothing where the PCH was built without it."""
    path = os.path.join(PCH_DIR, pch.ARCHIVE)
    return path if os.path.exists(path) and os.path.exists(os.path.join(PCH_DIR, pch.GCH)) else ""


def linker_flags() -> str:
    """-fuse-ld=gold where binutils ships gold (Debian's does): a static C++ link costs ~50 ms
    of CPU with it against ~100 ms with ld.bfd, the same binary semantics; none elsewhere.
    No build-id note (~4 ms of hashing the 2 MB binary; nothing reads it)."""
    return "-fuse-ld=gold -Wl,--build-id=none" if languages.resolve("ld.gold") else "-Wl,--build-id=none"


def job_env(lang: Language, scratch: str) -> dict[str, str]:
    env = dict(limits.CANDIDATE_ENV, HOME=scratch, TMPDIR=scratch)
    env.update({k: v.format(scratch=scratch) for k, v in lang.env.items()})
    return env


@dataclass
class Build:
    """How the build went: ok (the artifact is in `art`), else a compile error with output.
    `entry` is the cache entry the job holds while it runs the artifact (None where the
    artifact is in the job's own scratch, or there is none)."""

    ok: bool
    art: str = ""
    cache: str = "miss"  # hit | miss | merged | none (nothing to build)
    status: str = "finished"  # of the compiler process: finished | error | timeout | memory | output_limit
    return_code: int | None = 0
    stdout: str = ""
    stderr: str = ""
    time_s: float = 0.0
    message: str = ""
    entry: Entry | None = None

    def frame(self) -> dict:
        return {"ok": self.ok, "cache": self.cache, "status": self.status, "return_code": self.return_code,
                "stdout": self.stdout, "stderr": self.stderr, "time_s": self.time_s}

    def release(self) -> None:
        """The job's last test has ended: its cache entry may be evicted again."""
        if self.entry is not None:
            self.entry.release()
            self.entry = None


def build(ch: Children, lang: Language, program: str, scratch: str, msg: dict, extra: bytes = b"") -> Build:
    """The program's artifact, from the cache or compiled now (and cached, errors included)."""
    cache = cache_for(ch.cfg)
    src = lang.source_name(program)
    values = {"src": src, "out": OUT_DIR, "pch": pch_flags(), "pchlib": pch_archive(), "ld": linker_flags(),
              "main": lang.entry_name(program)}
    argv = lang.argv(lang.compile, **values) if lang.compile else [lang.name]
    key = cache.key(languages.cache_key(lang, argv, program, extra))
    found = cache.get(key)
    if found is not None:
        return _from_cache(found, "hit")
    lim = msg["limits"]
    timeout = float(lim.get("compile_timeout_s") or COMPILE_TIMEOUT_S)
    with cache.building(key, timeout + COMPILE_WALL_MARGIN_S + 5) as waited:
        found = cache.get(key)
        if found is not None:
            return _from_cache(found, "merged" if waited else "hit")
        scratch_fd = os.open(scratch, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            if lang.compile is None:  # the source is what runs
                b = Build(ok=True, cache="none")
                _keep(cache, key, {"ok": True}, None, {src: program.encode("utf-8", "surrogateescape")}, b,
                      scratch, scratch_fd, _uid(ch))
                return b
            return _compile(ch, cache, key, lang, argv, program, src, scratch, scratch_fd, lim, timeout)
        finally:
            os.close(scratch_fd)


def _from_cache(entry: Entry, how: str) -> Build:
    b = Build(ok=bool(entry.result.get("ok")), art=entry.path, cache=how, entry=entry)
    for k in ("status", "return_code", "stdout", "stderr", "time_s", "message"):
        if k in entry.result:
            setattr(b, k, entry.result[k])
    if not b.ok:  # a stored compile error: nothing of it is run
        b.release()
    return b


def _uid(ch: Children) -> int | None:
    return ch.c_uid if limits.can_switch_uid() else None


def _write_source(scratch_fd: int, src: str, program: str, uid: int | None) -> None:
    """The source, written by root in the job's scratch without following a link the job left."""
    remove_entry_at(scratch_fd, src)
    fd = os.open(src, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=scratch_fd)
    try:
        with os.fdopen(fd, "wb", closefd=False) as f:
            f.write(program.encode("utf-8", "surrogateescape"))
        if uid is not None:
            os.fchown(fd, uid, uid)
    finally:
        os.close(fd)


def _compile(ch: Children, cache: CompileCache, key: str, lang: Language, argv: list[str], program: str, src: str,
             scratch: str, scratch_fd: int, lim: dict, timeout: float) -> Build:
    uid = _uid(ch)
    _write_source(scratch_fd, src, program, uid)
    out = BuildDir.make(scratch_fd, OUT_DIR, uid)
    try:
        data_mb = max(lang.compile_memory_mb, int(lim["memory_mb"]))
        # the wall clock close to the CPU limit, and a compile that uses no CPU for a while is cut:
        # a compiler blocked on a read (a pipe, a device) holds its slot seconds, not a 3x backstop
        plim = Limits(timeout_s=timeout, data_mb=data_mb, as_mb=data_mb + lang.compile_reserve_mb,
                      nproc=max(lang.compile_nproc, int(lim["nproc"])), fsize_mb=COMPILE_FSIZE_MB, nofile=256,
                      wall_margin_s=COMPILE_WALL_MARGIN_S, idle_s=COMPILE_IDLE_S if uid is not None else 0.0,
                      compile_view=True)
        # the compiler's output is its own: counted and kept apart from the program's
        end = run_process(ch, OutputMeter(COMPILE_OUTPUT_BYTES, COMPILE_KEEP_BYTES), argv, job_env(lang, scratch), "",
                          scratch, plim)
        b = Build(ok=end.status == "finished" and end.exit == 0, cache="miss", status=end.status,
                  return_code=end.exit, time_s=end.time_s, message=end.message,
                  stdout=end.stdout.decode("utf-8", "replace"), stderr=end.stderr.decode("utf-8", "replace"))
        if end.status == "memory" or (not b.ok and _says_oom(lang, end.stderr)):
            b.status = "memory"
        # a compile that blocked without CPU is the source's doing (it reads a pipe or a device):
        # stored like a compile error, so identical items waiting on this build do not each block in turn
        blocked = end.status == "timeout" and end.message.startswith(BLOCKED)
        deterministic = b.ok or blocked or (end.status in ("finished", "error") and end.exit is not None
                                            and end.exit > 0 and b.status != "memory")
        if end.exit == compileview.FAILED_EXIT and compileview.FAILED.encode() in end.stderr:
            raise InfraFailure(f"a compiler could not be started: {compileview.FAILED}")
        if b.ok and not out.intact():  # only compile-time code could have done it: never trusted
            b.ok, b.status, deterministic = False, "error", False
            b.stderr += "[runner] the build directory was replaced during the compile\n"
        result = {"ok": b.ok, "status": b.status, "return_code": b.return_code, "stdout": b.stdout,
                  "stderr": b.stderr, "time_s": b.time_s, "message": b.message}
        if b.ok:
            kept = {src: program.encode("utf-8", "surrogateescape")} if lang.keep_source else None
            _keep(cache, key, result, out, kept, b, scratch, scratch_fd, uid)
        elif deterministic:  # a compile error is an answer too: the next identical source gets it
            entry, _why = cache.put(key, result)
            if entry is not None:
                entry.release()
        return b
    finally:
        out.close()
        with contextlib.suppress(OSError):  # gone already where the job runs its build from its scratch
            remove_entry_at(scratch_fd, OUT_DIR)


ART_SUFFIX = ".art"  # the job's own artifact directory, where the cache did not take its build


def _keep(cache: CompileCache, key: str, result: dict, out: BuildDir | None, kept: dict[str, bytes] | None,
          b: Build, scratch: str, scratch_fd: int, uid: int | None) -> None:
    """Store a good build and point `b` at it; where the cache will not take it (too large, no
    room nobody holds), the job runs it from its own scratch instead."""
    entry, why = cache.put(key, result, build=out, files=kept)
    if entry is not None:
        b.art, b.entry = entry.path, entry
        return
    name = OUT_DIR + ART_SUFFIX + "." + key[:16]  # one per build: a job's program and its harness apart
    remove_entry_at(scratch_fd, name)
    if out is None:
        os.mkdir(name, 0o700, dir_fd=scratch_fd)
    else:
        os.rename(out.name, name, src_dir_fd=scratch_fd, dst_dir_fd=scratch_fd)  # checked intact above
    # as a cache entry is: root's, 0755, one level of regular files (the job's processes are gone,
    # and each name is opened from the directory's fd without following a link), so no test of
    # the job can change the program the next test runs
    fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=scratch_fd)
    try:
        for fname, content in (kept or {}).items():
            remove_entry_at(fd, fname)
            wfd = os.open(fname, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=fd)
            with os.fdopen(wfd, "wb") as f:
                f.write(content)
        for fname in os.listdir(fd):
            try:
                ffd = os.open(fname, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=fd)
            except OSError:
                ffd = -1
            try:
                if ffd < 0 or not stat.S_ISREG(os.fstat(ffd).st_mode):
                    remove_entry_at(fd, fname)  # a link, a directory, a device: no part of a build we run
                    continue
                if uid is not None:
                    os.fchown(ffd, os.geteuid(), os.getegid())
                os.fchmod(ffd, 0o755)
            finally:
                if ffd >= 0:
                    os.close(ffd)
        if uid is not None:
            os.fchown(fd, os.geteuid(), os.getegid())
        os.fchmod(fd, 0o755)
    finally:
        os.close(fd)
    b.art = os.path.join(scratch, name)
    b.message = (b.message + "; " if b.message else "") + f"not cached ({why}): run from the job's scratch"


def _says_oom(lang: Language, stderr: bytes) -> bool:
    return any(m.encode() in stderr for m in lang.oom_markers)


def run_limits(lang: Language, lim: dict) -> Limits:
    """A test's limits: RLIMIT_DATA = the job's memory (+ the runtime's own), an address-space
    backstop for what the runtime reserves, enough threads for it."""
    data = int(lim["memory_mb"]) + lang.run_overhead_mb
    return Limits(timeout_s=float(lim["timeout_s"]), data_mb=data, as_mb=data + lang.reserve_mb,
                  nproc=max(int(lim["nproc"]), lang.run_nproc), fsize_mb=int(lim["fsize_mb"]),
                  nofile=int(lim["nofile"]), stack_mb=lang.stack_mb, wall_factor=wall_factor_of(lim))


def run_argv(lang: Language, program: str, art: str, lim: dict) -> list[str]:
    mem = int(lim["memory_mb"])
    return lang.argv(lang.run, art=art, main=lang.entry_name(program), memory_mb=str(mem), heap_mb=str(mem))


def judge_end(lang: Language, out: ScriptEnd) -> ScriptEnd:
    """A run that failed saying it ran out of memory (a runtime's own words on stderr, after
    the kernel said it failed) is a memory-limit verdict; it stays a failed test either way."""
    if out.status == "error" and out.exit not in (None, 0) and _says_oom(lang, out.stderr):
        out.status, out.message = "memory", "memory limit exceeded"
    return out


def _missing(lang: Language | None, name: object) -> str:
    if lang is None:
        return f"language {name!r} is not supported"
    tool = languages.missing_tool(lang)
    return f"the {lang.name} toolchain is not installed here ({tool} not found)" if tool else ""


class CompiledRun(StdioRun):
    """stdio tests of a compiled (or non-Python) program: build, then a process per test."""

    def __init__(self, ch: Children, msg: dict, scratch: str, emit: Callable[[dict], None]) -> None:
        super().__init__(ch, msg, scratch, emit)
        self.lang = languages.get(str(msg.get("language")))
        self.error = _missing(self.lang, msg.get("language"))
        self.msg = msg
        self.built: Build | None = None
        self.launcher: Launcher | None = None
        self.shared: harness.SharedProcess | None = None
        self.harness_built: Build | None = None

    def prepare(self) -> None:
        if not self.error:
            self.built = build(self.ch, self.lang, self.program, self.scratch, self.msg)
            self.keep_in_scratch(self.built.art)
            self.shared = self._shared_process()

    def _shared_process(self) -> harness.SharedProcess | None:
        """One process for the job's tests where the language has a harness and sharing is
        faithful for this program (languages/harness.py); None: a process per test."""
        lang, b = self.lang, self.built
        if self.judge is not None:  # a task program's files sit in the scratch between tests: no candidate code alive then
            return None
        if b is None or not b.ok or len(self.cases) < 2 or not harness.shareable(lang, self.program, b.art):
            return None
        h = self.harness_built = build(self.ch, harness.built_as(lang), harness.source(lang), self.scratch, self.msg)
        if not h.ok:
            return None
        self.keep_in_scratch(h.art)
        mem = str(int(self.lim["memory_mb"]))
        argv = lang.argv(lang.shared, art=b.art, hart=h.art, main=lang.entry_name(self.program), memory_mb=mem,
                         heap_mb=mem)
        # the job's meter becomes one that cuts the harness's end lines out of its output
        self.meter = harness.HarnessMeter(self.meter.limit, self.meter.keep)
        return harness.SharedProcess(self.ch, self.meter, argv, job_env(lang, self.scratch), self.scratch,
                                     run_limits(lang, self.lim), len(self.cases))

    def run(self) -> None:
        b = self.built
        if self.error or b is None or not b.ok:
            why = self.error or _compile_message(b)
            self.syntax_ok = False
            n = len(self.cases)
            self.emit({"event": "load", "syntax_ok": False, "runs": False, "message": why[:300], "total": n})
            status = "error" if self.error else "compile_error"
            for j in range(n):
                r = {"status": status, "time_s": 0.0, "message": why[:300]}
                self.results.append(r)
                self.emit({"event": "test", "index": j, **r})
            return
        self.argv = run_argv(self.lang, self.program, b.art, self.lim)
        self.env = job_env(self.lang, self.scratch)
        self.plim = run_limits(self.lang, self.lim)
        super().run()

    def run_case(self, stdin: str) -> ScriptEnd:
        out = self.shared.run_case(stdin) if self.shared is not None else None
        if out is not None:  # served by the job's harness process (Java, node)
            return judge_end(self.lang, out)
        if self.launcher is not None and not self.launcher.usable():
            self.launcher.close()
            self.launcher = None
        if self.launcher is None and self.plim.data_mb >= LAUNCHER_MIN_DATA_MB:
            self.launcher = Launcher.start(self.ch, self.meter, self.argv, self.env, self.scratch, self.plim)
        if self.launcher is None:  # a fresh candidate that execs the program
            return judge_end(self.lang, run_process(self.ch, self.meter, self.argv, self.env, stdin, self.scratch,
                                                    self.plim))
        return judge_end(self.lang, self.launcher.run(stdin, self.plim))

    def stop(self) -> None:
        super().stop()
        if self.shared is not None:
            self.shared.stop()
        if self.launcher is not None:
            self.launcher.close()
            self.launcher = None
        for b in (self.built, self.harness_built):  # the job's last test has ended
            if b is not None:
                b.release()

    def answer(self) -> dict:
        done = super().answer()
        b = self.built
        if self.error or (b is not None and not b.ok):
            done["message"] = (self.error or _compile_message(b))[:1000]
        if b is not None:
            done["compile"] = b.frame()
        return done


def _compile_message(b: Build | None) -> str:
    if b is None:
        return "not built"
    if b.status == "timeout":
        return "compile error: the compiler ran out of time" + (f" ({b.message})" if b.message else "")
    if b.status == "memory":
        return "compile error: the compiler ran out of memory"
    text = (b.stderr or b.stdout or b.message).strip()
    return "compile error: " + (text or f"the compiler exited with {b.return_code}")


class CompiledExecRun(ExecRun):
    """An exec job (SandboxFusion's run_code) in a compiled language: files in, build, run once."""

    def __init__(self, ch: Children, msg: dict, scratch: str, emit: Callable[[dict], None]) -> None:
        super().__init__(ch, msg, scratch, emit)
        self.lang = languages.get(str(msg.get("language")))
        self.built: Build | None = None

    def prepare(self) -> None:
        self.error = _missing(self.lang, self.msg.get("language"))
        if not self.error:
            super().prepare()
        if not self.error:
            self.built = build(self.ch, self.lang, self.msg["program"], self.scratch, self.msg, _files_digest(self.msg))

    def run(self) -> None:
        b = self.built
        if self.error:
            self.out = ScriptEnd(syntax_ok=False, status="error", message=self.error)
            return
        if b is None or not b.ok:
            self.out = ScriptEnd(syntax_ok=False, status="error", message=_compile_message(b), exit=None)
            return
        stdin = self.msg.get("stdin", "")
        self.out = judge_end(self.lang, run_process(
            self.ch, self.meter, run_argv(self.lang, self.msg["program"], b.art, self.lim), job_env(self.lang, self.scratch),
            stdin if isinstance(stdin, str) else "", self.scratch, run_limits(self.lang, self.lim)))
        from . import files  # noqa: PLC0415

        got, self.notes = files.fetch_all(self.scratch, self.msg.get("fetch_files", []), self.meter.keep)
        self.files = {k: base64.b64encode(v).decode("ascii") for k, v in got.items()}

    def answer(self) -> dict:
        done = super().answer()
        if self.built is not None:
            done["compile"] = self.built.frame()
        return done

    def stop(self) -> None:
        if self.built is not None:
            self.built.release()


def _files_digest(msg: dict) -> bytes:
    """What of an exec job's files the compiler could read (an #include of a sent header)."""
    h = hashlib.sha256()
    for f in msg.get("files", []) if isinstance(msg.get("files"), list) else []:
        if isinstance(f, dict):
            h.update(str(f.get("path")).encode("utf-8", "replace") + b"\0")
            h.update(str(f.get("content_b64")).encode("ascii", "replace") + b"\1")
    return h.digest()
