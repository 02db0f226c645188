"""Programs that belong to the task, not the candidate: checkers and interactors.

A task program is built like any program (compiled.build: the runner's compile cache, its
key HMAC'ed, so the candidate cannot find the binary) and run in the jail every candidate
process gets (a fresh process forked from the spawner: seccomp, Landlock, rlimits, the slot's
memory cgroup), but as the slot's *task uid* (the verdict side's uid, never the candidate's):
the candidate's processes cannot signal it, read its files or write where it reads. Its files
live in a `TaskDir`: a directory root makes in the job's scratch (the slot's own file system
and quota) once the candidate's processes are dead, owned by the task uid, mode 0700,
written from the directory's descriptor; the program is started with that directory as its
cwd and names its files relative to it, so a directory renamed or replaced afterwards changes
nothing it opens. The candidate never sees the answer, the input file or the program.

What a caller must hold to: build before any candidate process of the job runs (`build`);
make a TaskDir only while no candidate code runs (after the candidate's run ended: the run
tail kills the job's uid), or, for a program that runs beside the candidate (an interactor),
start the program (`start`, which waits until it is in its cwd) before the candidate starts.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import stat
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from . import cleanup, limits
from .children import Candidate, Children, InfraFailure, OutputMeter
from .compile_cache import remove_entry_at
from .compiled import Build, build, job_env, run_argv
from .cpuclock import TestClock
from .languages import Language, spec
from .launcher import BLOCKED, Launcher, Limits
from .script import ScriptEnd, _await_end, encode_stdin, feed_stdin

TASK_DIR = ".vr-task"  # the TaskDir's name in the job's scratch
TIMEOUT_S = 5.0  # a task program's CPU limit per run, at least (a Python checker reads 1e6 tokens in ~1 s)
MEMORY_MB = 512  # its memory, at least (RLIMIT_DATA; the job's own when larger)
OUTPUT_BYTES = 1 << 20  # what it may print before it is stopped (its verdict is its exit code)
KEEP_BYTES = 4096  # what of that is kept (the message)
COMPILE_TIMEOUT_S = 60.0  # a task program's compile, at least (testlib.h: ~5 s of CPU, once per cache entry)
INSTALL_BYTES = 64 << 20  # a build the cache would not take, held in memory and installed per run
TESTLIB = "testlib.h"
TESTLIB_INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]testlib\.h[>"]', re.M)

# Python as a task language: the source is the artifact, run by the runner's own interpreter
# (isolated, no site: the standard library only)
PYTHON_TASK = Language(name="python", aliases=("python", "py", "python3"), source="task.py",
                       run=(sys.executable, "-I", "-S", "{art}/task.py"), keep_source=True,
                       tools=(sys.executable,), run_overhead_mb=64, reserve_mb=256)


def language(name: str) -> Language | None:
    """The language of a task program (python, or any compiled one the runner knows)."""
    from . import languages  # noqa: PLC0415 - the package face; spec/table are its parts

    if name.lower() in PYTHON_TASK.aliases:
        return PYTHON_TASK
    return languages.get(name)


def task_uid(ch: Children) -> int | None:
    """The uid task programs run as: the slot's verdict uid (None where uids cannot switch)."""
    return ch.v_uid if limits.can_switch_uid() else None


def needs_testlib(source: str) -> bool:
    return TESTLIB_INCLUDE.search(source) is not None


@dataclass
class TaskProgram:
    """A built task program: `ok`, else `error` says why it cannot run (the task's fault:
    a compile error, testlib.h not configured, an unknown language)."""

    lang: Language | None
    source: str
    built: Build | None = None
    error: str = ""
    files: dict[str, bytes] = field(default_factory=dict)  # a build the cache did not take (installed per run)

    @property
    def ok(self) -> bool:
        return not self.error and self.built is not None and self.built.ok

    def argv(self, tdir: TaskDir, *args: str, memory_mb: int = MEMORY_MB) -> list[str]:
        """The program's argv with `args` after it (names relative to the TaskDir, its cwd)."""
        art = self.built.art if self.built is not None else ""
        if self.files:
            art = tdir.install(self.files)
        return [*run_argv(self.lang, self.source, art, {"memory_mb": memory_mb}), *args]

    def release(self) -> None:
        if self.built is not None:
            self.built.release()


def build_program(ch: Children, spec_: dict, scratch: str, msg: dict, testlib_h: str | None = None) -> TaskProgram:
    """Build a task program ({"language", "source"}) in the job's scratch, before any of the
    job's candidate processes runs. testlib.h, where the source includes it, is the one the
    job carries (the operator's); none there is the task's error, said so."""
    lang = language(str(spec_.get("language", "cpp")))
    source = str(spec_.get("source", ""))
    prog = TaskProgram(lang, source)
    if lang is None:
        prog.error = f"language {spec_.get('language')!r} is not supported"
        return prog
    if (tool := spec.missing_tool(lang)) is not None:
        prog.error = f"the {lang.name} toolchain is not installed here ({tool} not found)"
        return prog
    extra = b""
    if lang.compile is not None and needs_testlib(source):
        if not testlib_h:
            prog.error = ("it includes testlib.h and this server has no testlib header configured "
                          "(REWARD_SERVER_TESTLIB_HEADER names the file)")
            return prog
        header = testlib_h.encode("utf-8", "surrogateescape")
        _write_in(scratch, TESTLIB, header, ch.c_uid if limits.can_switch_uid() else None)
        extra = hashlib.sha256(header).digest()
    lim = dict(msg["limits"], compile_timeout_s=max(COMPILE_TIMEOUT_S, float(msg["limits"].get("compile_timeout_s") or 0)))
    prog.built = build(ch, lang, source, scratch, dict(msg, limits=lim), extra)
    if not prog.built.ok:
        from .compiled import _compile_message  # noqa: PLC0415

        b = prog.built
        if b.status == "timeout" and not b.message.startswith(("CPU time limit", BLOCKED)):
            # out of wall-clock time with CPU to spare: the machine was busy, not the source wrong
            raise InfraFailure(f"a task program's compile ran out of wall-clock time: {b.message}"[:300])

        prog.error = _compile_message(prog.built)
        return prog
    if prog.built.entry is None and prog.built.art.startswith(scratch.rstrip("/") + "/"):
        # not cached: its files leave the scratch (a candidate could reach them there) for memory
        prog.files = _take_files(scratch, os.path.basename(prog.built.art))
        prog.built.art = ""
    return prog


def _write_in(scratch: str, name: str, data: bytes, uid: int | None) -> None:
    fd = os.open(scratch, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        remove_entry_at(fd, name)
        wfd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=fd)
        with os.fdopen(wfd, "wb") as f:
            f.write(data)
            if uid is not None:
                os.fchown(f.fileno(), uid, uid)
    finally:
        os.close(fd)


def _take_files(scratch: str, name: str) -> dict[str, bytes]:
    """A build directory's regular files (made root's by compiled._keep), read and removed."""
    out: dict[str, bytes] = {}
    sfd = os.open(scratch, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        dfd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=sfd)
        try:
            total = 0
            for fname in os.listdir(dfd):
                ffd = os.open(fname, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dfd)
                with os.fdopen(ffd, "rb") as f:
                    if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                        continue
                    out[fname] = f.read(INSTALL_BYTES + 1 - total)
                    total += len(out[fname])
                if total > INSTALL_BYTES:
                    raise OSError("a task program's build is too large")
        finally:
            os.close(dfd)
        remove_entry_at(sfd, name)
    finally:
        os.close(sfd)
    return out


class TaskDir:
    """A directory for a task program's files in the job's scratch, out of the candidate's
    reach: made by root where the job left nothing at its name (a link or a file it planted is
    removed, never followed), owned by the task uid, mode 0700; written only from its
    descriptor. `path` is the program's cwd; names passed to the program are relative to it."""

    def __init__(self, ch: Children, scratch: str, name: str = TASK_DIR) -> None:
        self.uid = task_uid(ch)
        self.name = name  # one per task program that lives at once (the checker's is CHECK_DIR)
        self.path = os.path.join(scratch, name)
        sfd = os.open(scratch, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            remove_entry_at(sfd, name)
            os.mkdir(name, 0o700, dir_fd=sfd)
            self.fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=sfd)
        finally:
            os.close(sfd)
        if self.uid is not None:
            os.fchown(self.fd, self.uid, self.uid)
        self.installed = ""

    def write(self, name: str, data: bytes | int, mode: int = 0o400) -> None:
        """A file `name` holding `data` (bytes, or everything readable from a descriptor at 0)."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=self.fd)
        wfd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=self.fd)
        try:
            if isinstance(data, int):
                os.lseek(data, 0, os.SEEK_SET)
                while chunk := os.read(data, 1 << 20):
                    _write_all(wfd, chunk)
            else:
                _write_all(wfd, data)
            if self.uid is not None:
                os.fchown(wfd, self.uid, self.uid)
            os.fchmod(wfd, mode)
        finally:
            os.close(wfd)

    def install(self, files: dict[str, bytes]) -> str:
        """A build's files under bin/ (once per TaskDir); the directory's name, relative to the
        TaskDir (the program's cwd)."""
        if not self.installed:
            os.mkdir("bin", 0o755, dir_fd=self.fd)
            bfd = os.open("bin", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=self.fd)
            try:
                os.fchmod(bfd, 0o755)
                for fname, content in files.items():
                    wfd = os.open(fname, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o755,
                                  dir_fd=bfd)
                    try:
                        _write_all(wfd, content)
                        os.fchmod(wfd, 0o755)  # whatever the runner's umask: the task uid runs it
                    finally:
                        os.close(wfd)
            finally:
                os.close(bfd)
            # relative to the program's cwd (this directory): the job's scratch above it is the
            # candidate's, 0700, which the task uid cannot search by path
            self.installed = "bin"
        return self.installed

    def intact(self) -> bool:
        """Whether the scratch's entry at its name is still this directory (the candidate can
        rename or, once empty, remove it: it owns the scratch)."""
        try:
            here = os.stat(self.path, follow_symlinks=False)
            mine = os.fstat(self.fd)
        except OSError:
            return False
        return stat.S_ISDIR(here.st_mode) and (here.st_dev, here.st_ino) == (mine.st_dev, mine.st_ino) and mine.st_nlink > 0

    def remove(self) -> None:
        """Gone from the scratch (its entries first: the task uid's files in a root-held fd)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        with contextlib.suppress(OSError):
            sfd = os.open(os.path.dirname(self.path), os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
            try:
                remove_entry_at(sfd, self.name)
            finally:
                os.close(sfd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def task_limits(lang: Language, lim: dict) -> Limits:
    """A task program's limits: its own floor (TIMEOUT_S of CPU, MEMORY_MB), or twice the job's
    time and the job's memory where larger (it reads what the program wrote in its time)."""
    data = max(MEMORY_MB, int(lim.get("memory_mb", 0))) + lang.run_overhead_mb
    return Limits(timeout_s=max(TIMEOUT_S, 2 * float(lim.get("timeout_s", 0))), data_mb=data, as_mb=data + lang.reserve_mb,
                  nproc=max(16, lang.run_nproc), fsize_mb=max(64, int(lim.get("fsize_mb", 0))), nofile=64,
                  stack_mb=lang.stack_mb, wall_factor=2.0)


def budget_s(tests: dict, lim: dict, n_tests: int) -> float:
    """Wall-clock seconds a job's task programs may add (the pool's backstop for the whole job):
    each one's compile, and two runs per test (the reference check and the candidate's) at its
    limit and wall factor."""
    progs = [tests.get(k) for k in ("checker", "interactor") if isinstance(tests.get(k), dict)]
    if not progs:
        return 0.0
    t = max(TIMEOUT_S, 2 * float(lim.get("timeout_s", 0)))
    return len(progs) * (COMPILE_TIMEOUT_S + 5 + n_tests * 2 * t * 2)


def task_env(lang: Language, cwd: str) -> dict[str, str]:
    return job_env(lang, cwd)


def start(ch: Children, meter: OutputMeter, argv: list[str], cwd: str, lim: Limits, stdin: str = "",
          env: dict[str, str] | None = None,
          on_take: Callable[[Candidate], None] | None = None,
          path: str = "") -> tuple[Candidate | None, TestClock, ScriptEnd]:
    """Start `argv` as a jailed process of the task uid, cwd `cwd` (a TaskDir's path), its output
    charged to `meter`; returns once it is in its cwd, about to exec (or (None, ...) where it did
    not start: the ScriptEnd says why). The caller waits for it (`wait`) and ends it (`finish`).
    `on_take` sees the process before it is sent anything (an interactor: its pipes become the
    caller's relay before any byte of it is read). `path`: the file to exec where argv[0] is only
    its name (an interactor's command line is readable to the candidate's uid)."""
    c = ch.take_candidate("script", meter)
    if on_take is not None:
        on_take(c)
    meter.start_unit()
    uid = task_uid(ch)
    clock = TestClock(lim.timeout_s, lim.wall_factor, time.monotonic(), None)
    out = ScriptEnd()
    c.pending_stdin = encode_stdin(stdin)
    msg = ch.load_message(c, "execve", "", cwd, lim.rlimits(lim.timeout_s + 1, cpu_grace_s=1))
    if uid is not None:
        msg["uid"] = uid
    msg.update(argv=argv, env=env if env is not None else {**limits.CANDIDATE_ENV, "HOME": cwd, "TMPDIR": cwd})
    if path:
        msg["path"] = path
    if not ch.send_candidate(c, msg) or not ch.wait_settled(c, time.monotonic() + 10):
        out.status, out.message = "error", "the task program did not start"
        finish(ch, c)
        return None, clock, out
    from .cpuclock import tree_cpu_s  # noqa: PLC0415

    clock.cpu_at_start = tree_cpu_s(c.pid, uid)
    return c, clock, out


def wait(ch: Children, c: Candidate, clock: TestClock, out: ScriptEnd) -> ScriptEnd:
    """Until the task program ended (its exit status in `out`) or a limit cut it."""
    feed_stdin(ch, c)
    _await_end(ch, c, clock, task_uid(ch), out)
    out.time_s = round(time.monotonic() - clock.started, 6)
    return out


def finish(ch: Children, c: Candidate | None) -> None:
    """The task program and every process of the task uid end (the verdict process spared)."""
    if c is not None:
        ch.kill_candidate(c)
    uid = task_uid(ch)
    if uid is not None:
        cleanup.kill_uids({uid}, spare={ch.v.pid} if ch.v is not None else set())


def run(ch: Children, meter: OutputMeter, argv: list[str], cwd: str, lim: Limits, stdin: str = "") -> ScriptEnd:
    """Run a task program to its end: start, wait, finish; its exit status and output."""
    before = {k: len(v) for k, v in meter.kept.items()}
    c, clock, out = start(ch, meter, argv, cwd, lim, stdin)
    if c is not None:
        try:
            wait(ch, c, clock, out)
        finally:
            finish(ch, c)
    out.stdout = bytes(meter.kept["stdout"][before["stdout"]:])
    out.stderr = bytes(meter.kept["stderr"][before["stderr"]:])
    return out


@contextlib.contextmanager
def as_task_uid(ch: Children) -> Iterator[None]:
    """The connection's candidate machinery (load messages, the run tail's uid sweep, pipe
    ownership) aimed at the task uid for the block: a launcher.Launcher started or run inside it
    is the task's. The verdict process (the same uid, idle in a stdio job) is ended first, so the
    sweep of the task uid spares nothing; the next job that needs one forks it afresh."""
    uid = task_uid(ch)
    if uid is None:
        yield
        return
    if ch.v is not None and not ch.v.busy:
        ch.kill_verdict()
    saved, ch.c_uid = ch.c_uid, uid
    try:
        yield
    finally:
        ch.c_uid = saved


class TaskLauncher:
    """A task program started once per test from one jail of the task uid (launcher.Launcher:
    a fork and jail entry per job, an exec per test), cwd a TaskDir kept for the job (in the
    scratch's `keep`: its files are the task uid's, 0700; root writes them by descriptor before
    each run, after the candidate's run ended). A TaskDir the candidate moved or emptied is made
    afresh with a fresh launcher."""

    def __init__(self, ch: Children, scratch: str, keep: set[str], prog: TaskProgram, lim: Limits,
                 args: tuple[str, ...], meter: OutputMeter, name: str = TASK_DIR) -> None:
        self.ch, self.scratch, self.keep, self.prog, self.lim, self.args, self.meter = ch, scratch, keep, prog, lim, args, meter
        self.name = name
        self.tdir: TaskDir | None = None
        self.launcher: Launcher | None = None

    def dir(self) -> TaskDir:
        """The job's TaskDir, made on first use (only while no candidate code runs)."""
        if self.tdir is None or not self.tdir.intact():
            self.close()
            self.keep.add(self.name)
            self.tdir = TaskDir(self.ch, self.scratch, self.name)
        return self.tdir

    def run(self) -> ScriptEnd:
        """One run of the program on the files written in `dir()` (fresh jail where the last one went)."""
        tdir = self.dir()
        with as_task_uid(self.ch):
            if self.launcher is not None and not self.launcher.usable():
                self.launcher.close()
                self.launcher = None
            if self.launcher is None:
                argv = self.prog.argv(tdir, *self.args, memory_mb=self.lim.data_mb - self.prog.lang.run_overhead_mb)
                env = {**limits.CANDIDATE_ENV, "HOME": tdir.path, "TMPDIR": tdir.path}
                self.launcher = Launcher.start(self.ch, self.meter, argv, env, tdir.path, self.lim)
            if self.launcher is None:
                return ScriptEnd(status="error", message="the task program's launcher did not start")
            return self.launcher.run("", self.lim)

    def close(self) -> None:
        if self.launcher is not None:
            with as_task_uid(self.ch):
                self.launcher.close()
            self.launcher = None
        if self.tdir is not None:
            self.tdir.remove()
            self.tdir = None
        self.keep.discard(self.name)


def task_meter() -> OutputMeter:
    """A task program's own output meter (never the candidate's)."""
    return OutputMeter(OUTPUT_BYTES, KEEP_BYTES)
