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
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass

from . import languages, limits
from .children import WRITE, Children, OutputMeter, close_fd
from .compile_cache import CompileCache
from .cpuclock import TestClock, tree_cpu_s, wall_factor_of
from .languages import Language, harness
from .script import ExecRun, ScriptEnd, StdioRun, _await_end, encode_stdin

COMPILE_TIMEOUT_S = 20.0
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
    return f"-I {PCH_DIR}" if os.path.exists(os.path.join(PCH_DIR, "bits", "stdc++.h.gch")) else ""


@dataclass
class Limits:
    """One process's limits, as RLIMITs."""

    timeout_s: float
    data_mb: int
    as_mb: int
    nproc: int
    fsize_mb: int
    nofile: int
    stack_mb: int = 0
    wall_factor: float = 1.0  # the wall-clock backstop, as a multiple of timeout_s (CPU time)


def run_process(ch: Children, argv: list[str], env: dict[str, str], stdin: str, scratch: str, lim: Limits) -> ScriptEnd:
    """Start `argv` as a fresh candidate (it execs it once jailed) and wait for its end."""
    meter = ch.meter
    c = ch.take_candidate("script")
    meter.start_unit()
    t0 = time.monotonic()
    # as for Python scripts: the limit is the CPU its processes use, the wall clock a backstop
    uid = ch.c_uid if limits.can_switch_uid() else None
    clock = TestClock(lim.timeout_s, lim.wall_factor, t0, tree_cpu_s(c.pid, uid))
    before = {k: len(v) for k, v in meter.kept.items()}
    out = ScriptEnd()
    c.pending_stdin = encode_stdin(stdin)
    rl = {"timeout_s": lim.timeout_s, "memory_mb": lim.as_mb, "nproc": lim.nproc, "fsize_mb": lim.fsize_mb,
          "nofile": lim.nofile}
    msg = ch.load_message(c, "execve", "", scratch, rl, 0)  # RLIMIT_CPU: the timeout (rounded) + 1 s
    msg.update(argv=argv, env=env, data_mb=lim.data_mb, stack_mb=lim.stack_mb)
    with contextlib.suppress(OSError, ValueError):  # before it joins its memory cgroup (limits.cap_job_memory)
        resource.prlimit(c.pid, resource.RLIMIT_DATA, (lim.data_mb * limits.MB, lim.data_mb * limits.MB))
    if not ch.send_candidate(c, msg):
        out.status, out.message = "error", "candidate did not start"
    else:
        if c.pending_stdin:
            ch.sel.register(c.stdin_w, WRITE, ("cin", c))
        else:
            ch.sel.unregister(c.stdin_w)
            close_fd(c, "stdin_w")
        ch.wait_settled(c, clock.started + clock.hard_s)
        _await_end(ch, c, clock, uid, out)
    ch.kill_candidate(c)
    limits.kill_uids({ch.c_uid})
    out.time_s = round(time.monotonic() - t0, 6)
    out.stdout = bytes(meter.kept["stdout"][before["stdout"]:])
    out.stderr = bytes(meter.kept["stderr"][before["stderr"]:])
    return out


def job_env(lang: Language, scratch: str) -> dict[str, str]:
    env = dict(limits.CANDIDATE_ENV, HOME=scratch, TMPDIR=scratch)
    env.update({k: v.format(scratch=scratch) for k, v in lang.env.items()})
    return env


@dataclass
class Build:
    """How the build went: ok (the artifact is in `art`), else a compile error with output."""

    ok: bool
    art: str = ""
    cache: str = "miss"  # hit | miss | merged | none (nothing to build)
    status: str = "finished"  # of the compiler process: finished | error | timeout | memory | output_limit
    return_code: int | None = 0
    stdout: str = ""
    stderr: str = ""
    time_s: float = 0.0
    message: str = ""

    def frame(self) -> dict:
        return {"ok": self.ok, "cache": self.cache, "status": self.status, "return_code": self.return_code,
                "stdout": self.stdout, "stderr": self.stderr, "time_s": self.time_s}


def build(ch: Children, lang: Language, program: str, scratch: str, msg: dict, extra: bytes = b"") -> Build:
    """The program's artifact, from the cache or compiled now (and cached, errors included)."""
    cache = cache_for(ch.cfg)
    src = lang.source_name(program)
    values = {"src": src, "out": OUT_DIR, "pch": pch_flags(), "main": lang.entry_name(program)}
    argv = lang.argv(lang.compile, **values) if lang.compile else [lang.name]
    key = languages.cache_key(lang, argv, program, extra)
    found = cache.get(key)
    if found is not None:
        return _from_cache(cache, key, found, "hit")
    lim = msg["limits"]
    timeout = float(lim.get("compile_timeout_s") or COMPILE_TIMEOUT_S)
    with cache.building(key, timeout + 5) as waited:
        found = cache.get(key)
        if found is not None:
            return _from_cache(cache, key, found, "merged" if waited else "hit")
        if lang.compile is None:  # the source is what runs
            why = cache.put(key, {"ok": True}, files={src: program.encode("utf-8", "surrogateescape")})
            return Build(ok=not why, art=cache.path(key), cache="none", message=why)
        return _compile(ch, cache, key, lang, argv, program, src, scratch, lim, timeout)


def _from_cache(cache: CompileCache, key: str, found: dict, how: str) -> Build:
    b = Build(ok=bool(found.get("ok")), art=cache.path(key), cache=how)
    for k in ("status", "return_code", "stdout", "stderr", "time_s", "message"):
        if k in found:
            setattr(b, k, found[k])
    return b


def _compile(ch: Children, cache: CompileCache, key: str, lang: Language, argv: list[str], program: str, src: str,
             scratch: str, lim: dict, timeout: float) -> Build:
    uid = ch.c_uid if limits.can_switch_uid() else None
    out_dir = os.path.join(scratch, OUT_DIR)
    with open(os.path.join(scratch, src), "wb") as f:
        f.write(program.encode("utf-8", "surrogateescape"))
    os.mkdir(out_dir, 0o700)
    if uid is not None:
        os.chown(os.path.join(scratch, src), uid, uid)
        os.chown(out_dir, uid, uid)
    data_mb = max(lang.compile_memory_mb, int(lim["memory_mb"]))
    plim = Limits(timeout_s=timeout, data_mb=data_mb, as_mb=data_mb + lang.compile_reserve_mb,
                  nproc=max(lang.compile_nproc, int(lim["nproc"])), fsize_mb=COMPILE_FSIZE_MB, nofile=256,
                  wall_factor=wall_factor_of(lim))
    job_meter = ch.meter
    ch.meter = OutputMeter(COMPILE_OUTPUT_BYTES, COMPILE_KEEP_BYTES)
    try:
        end = run_process(ch, argv, job_env(lang, scratch), "", scratch, plim)
    finally:
        ch.meter = job_meter
    b = Build(ok=end.status == "finished" and end.exit == 0, cache="miss", status=end.status,
              return_code=end.exit, time_s=end.time_s, message=end.message,
              stdout=end.stdout.decode("utf-8", "replace"), stderr=end.stderr.decode("utf-8", "replace"))
    if end.status == "memory" or (not b.ok and _says_oom(lang, end.stderr)):
        b.status = "memory"
    deterministic = b.ok or (end.status in ("finished", "error") and end.exit is not None and end.exit > 0
                             and b.status != "memory")
    result = {"ok": b.ok, "status": b.status, "return_code": b.return_code, "stdout": b.stdout,
              "stderr": b.stderr, "time_s": b.time_s, "message": b.message}
    if b.ok:
        kept = {src: program.encode("utf-8", "surrogateescape")} if lang.keep_source else None
        why = cache.put(key, result, build_dir=out_dir, files=kept)
        if why:
            b.ok, b.status, b.stderr = False, "error", b.stderr + f"[runner] {why}\n"
        b.art = cache.path(key)
    elif deterministic:
        cache.put(key, result)  # a compile error is an answer too: the next identical source gets it
    limits.remove_tree(out_dir)
    return b


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
        self.shared: harness.SharedProcess | None = None

    def prepare(self) -> None:
        if not self.error:
            self.built = build(self.ch, self.lang, self.program, self.scratch, self.msg)
            self.shared = self._shared_process()

    def _shared_process(self) -> harness.SharedProcess | None:
        """One process for the job's tests where the language has a harness and sharing is
        faithful for this program (languages/harness.py); None: a process per test."""
        lang, b = self.lang, self.built
        if b is None or not b.ok or len(self.cases) < 2 or not harness.shareable(lang, self.program):
            return None
        h = build(self.ch, harness.built_as(lang), harness.source(lang), self.scratch, self.msg)
        if not h.ok:
            return None
        mem = str(int(self.lim["memory_mb"]))
        argv = lang.argv(lang.shared, art=b.art, hart=h.art, main=lang.entry_name(self.program), memory_mb=mem,
                         heap_mb=mem)
        return harness.SharedProcess(self.ch, argv, job_env(lang, self.scratch), self.scratch,
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
        if out is None:  # a process of its own
            out = run_process(self.ch, self.argv, self.env, stdin, self.scratch, self.plim)
        return judge_end(self.lang, out)

    def stop(self) -> None:
        if self.shared is not None:
            self.shared.stop()

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
        return "compile error: the compiler ran out of time"
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
            self.ch, run_argv(self.lang, self.msg["program"], b.art, self.lim), job_env(self.lang, self.scratch),
            stdin if isinstance(stdin, str) else "", self.scratch, run_limits(self.lang, self.lim)))
        from . import files  # noqa: PLC0415

        got, self.notes = files.fetch_all(self.scratch, self.msg.get("fetch_files", []), self.ch.meter.keep)
        self.files = {k: base64.b64encode(v).decode("ascii") for k, v in got.items()}

    def answer(self) -> dict:
        done = super().answer()
        if self.built is not None:
            done["compile"] = self.built.frame()
        return done


def _files_digest(msg: dict) -> bytes:
    """What of an exec job's files the compiler could read (an #include of a sent header)."""
    h = hashlib.sha256()
    for f in msg.get("files", []) if isinstance(msg.get("files"), list) else []:
        if isinstance(f, dict):
            h.update(str(f.get("path")).encode("utf-8", "replace") + b"\0")
            h.update(str(f.get("content_b64")).encode("ascii", "replace") + b"\1")
    return h.digest()
