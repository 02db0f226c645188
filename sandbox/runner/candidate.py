"""The candidate process: loads the untrusted program and answers calls with plain data.

It never receives test code or expected values: only the program, and for each call the
function name and the arguments. Whatever it sends back is parsed strictly by the
supervisor; nothing it says about itself is trusted.
"""

from __future__ import annotations

import array
import atexit
import builtins
import gc
import marshal
import os
import signal
import socket
import sys
import types
from importlib.machinery import SourceFileLoader  # imported here, once: in a candidate it costs ~1 ms

from . import cgroup, codec, compileview, framing, limits, repl

_template_ready = False
_template_scratch: str | None = None
PROGRAM_NAME = "prog.py"  # the program's file in its scratch directory (its __file__)
RECURSION_LIMIT = 1000  # plain python's default, counted from the program's own first frame
FLUSH_FAILED = 120  # python's exit status when flushing stdout at exit fails
_depth_offset = 0  # frames of ours below the program's first frame (set per run)
_set_limit, _get_limit = sys.setrecursionlimit, sys.getrecursionlimit


def prepare_template(scratch: str | None = None, hide_prefix: str = "\0") -> None:
    """What every candidate starts with: text streams on fds 0-2, the candidates'
    environment, and (when the spawner serves one fixed scratch path) HOME, TMPDIR and
    sys.path pointing there. The spawner makes them once, before it forks any candidate: made
    in each candidate, they cost ~200 page faults (copy-on-write and fresh buffers) per job."""
    global _template_ready, _template_scratch
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
    _script_streams()
    site_dir = os.environ.get("VERIREWARD_RUNTIME_SITE", "")
    warm = [m for m in os.environ.get("VERIREWARD_RUNTIME_WARM", "").split(",") if m]
    os.environ.clear()
    os.environ.update(limits.CANDIDATE_ENV)
    limits.cap_malloc_arenas()
    _script_interpreter()
    if site_dir:
        _add_runtime(site_dir, warm)
    if scratch is not None:
        _point_at_scratch(scratch, hide_prefix)
    _template_scratch = scratch
    _template_ready = True


RUNTIME_ENV = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def _add_runtime(site_dir: str, warm: list[str]) -> None:
    """A runtime's packages (sandbox.runtimes): its site directory on sys.path, as a venv's
    site-packages would be, and its heavy modules imported once here, so a candidate's
    `import numpy` costs nothing. BLAS keeps to one thread: its threads would count against
    the job's process limit (and a forked copy of a thread pool is no pool)."""
    import site

    os.environ.update(RUNTIME_ENV)
    site.addsitedir(site_dir)
    for name in warm:
        try:
            __import__(name)
        except BaseException:  # noqa: BLE001 - a runtime that cannot warm up still serves
            pass


def _script_streams() -> None:
    """sys.stdin/stdout/stderr as `python3 prog.py` makes them on pipes (buffered, stdin
    with a .buffer, stderr line-buffered, PYTHONIOENCODING=utf-8's error handlers). Made
    while a pipe stands on fds 0-2, so each stream caches what a pipe is (not seekable):
    the candidate's own pipes are dup2'ed onto the same fds, and the objects stay valid."""
    saved = [os.dup(fd) for fd in (0, 1, 2)]
    r, w = os.pipe()
    try:
        os.dup2(r, 0)
        os.dup2(w, 1)
        os.dup2(w, 2)
        sys.stdin = open(0, encoding="utf-8", errors="strict", newline="\n", closefd=False)  # noqa: SIM115
        sys.stdout = open(1, "w", encoding="utf-8", errors="strict", newline="\n", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", newline="\n",  # noqa: SIM115
                          closefd=False)
        sys.stderr.reconfigure(line_buffering=True)
        for stream, name in ((sys.stdin, "<stdin>"), (sys.stdout, "<stdout>"), (sys.stderr, "<stderr>")):
            try:
                stream.buffer.raw.name = name
            except (AttributeError, TypeError):
                pass
        sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr
    finally:
        for fd, old in zip((0, 1, 2), saved):
            os.dup2(old, fd)
            os.close(old)
        os.close(r)
        os.close(w)


def _script_interpreter() -> None:
    """What a plain `python3 prog.py` has that a runner started with -I -S has not: the
    site builtins (exit, quit, help, copyright, credits, license), python's signal
    dispositions, no atexit handlers of ours, sys.flags and sys.dont_write_bytecode as the
    candidates' environment gives them, and the recursion limit counted from the program's
    first frame (our few frames below it are not charged to the program)."""
    import site  # with -S, importing site adds nothing to sys.path (site.main() is not run)

    site.setquit()
    site.setcopyright()
    site.sethelper()
    global _BUILTINS
    _BUILTINS = dict(vars(builtins))
    atexit._clear()
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for sig in (signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(sig, signal.SIG_IGN)
    for sig in (signal.SIGTERM, signal.SIGCHLD, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, signal.SIG_DFL)
    sys.dont_write_bytecode = "PYTHONDONTWRITEBYTECODE" in limits.CANDIDATE_ENV
    sys.flags = _script_flags()
    sys.argv = [""]
    sys.orig_argv = ["python3"]
    sys.setrecursionlimit = _setrecursionlimit
    sys.getrecursionlimit = _getrecursionlimit


def _script_flags() -> tuple:
    """sys.flags of `python3 prog.py` in the candidates' environment (the runner's own say
    -I -S). sys.flags' type cannot be instantiated, so this is a tuple with the same fields."""
    names = sys.flags.__match_args__
    plain = {"no_user_site": 0, "no_site": 0, "ignore_environment": 0, "isolated": 0, "safe_path": False,
             "dont_write_bytecode": int(sys.dont_write_bytecode)}
    values = tuple(plain.get(n, getattr(sys.flags, n)) for n in names)

    class flags(tuple):  # noqa: N801 - named as python names it
        __slots__ = ()
        __match_args__ = names

        def __repr__(self) -> str:
            return "sys.flags(" + ", ".join(f"{n}={v!r}" for n, v in zip(names, self)) + ")"

    for i, n in enumerate(names):
        setattr(flags, n, property(lambda self, i=i: tuple.__getitem__(self, i)))
    flags.__module__ = "sys"
    return flags(values)


def _setrecursionlimit(limit: int, /) -> None:
    """sys.setrecursionlimit as the program sees it: its limit counts from its own first frame."""
    if type(limit) is not int:
        _set_limit(limit)  # raises what python raises
    if limit < 1:
        raise ValueError("recursion limit must be greater or equal than 1")
    _set_limit(limit + _depth_offset)


def _getrecursionlimit() -> int:
    """sys.getrecursionlimit as the program sees it."""
    return _get_limit() - _depth_offset


_setrecursionlimit.__name__, _setrecursionlimit.__qualname__ = "setrecursionlimit", "setrecursionlimit"
_getrecursionlimit.__name__, _getrecursionlimit.__qualname__ = "getrecursionlimit", "getrecursionlimit"


def _charge_from_here(extra: int = 0) -> None:
    """The program's first frame comes right above the caller's (`extra` frames more):
    plain python's limit counts from there. The interpreter's own count of our depth (C calls included) is in
    the message of a limit set too low; the frames are counted where it says nothing."""
    global _depth_offset
    depth = 0
    threading = sys.modules.get("threading")
    if threading is None or threading.active_count() == 1:  # else a limit of 1 would hit the other threads
        try:
            _set_limit(1)
        except RecursionError as exc:
            words = str(exc).split("recursion depth ")
            if len(words) == 2 and words[1].split(":")[0].isdigit():
                depth = int(words[1].split(":")[0]) - 1  # this function's frame is not the caller's
    if depth <= 0:
        f = sys._getframe(1)
        while f is not None:
            depth += 1
            f = f.f_back
    _depth_offset = depth + extra
    _set_limit(RECURSION_LIMIT + _depth_offset)


# Dummy task code for warm_up (ours, never a job's): what HumanEval-style calls do with plain data
_WARM_PROGRAM = """
from typing import List


def warm_sort(xs: List[int], k: int = 1) -> List[int]:
    \"\"\" a warm-up function \"\"\"
    return sorted(x + k for x in xs)


def warm_map(s, t=None):
    return {"s": s, "n": len(s), "t": t, "f": 1.5, "ok": True, "none": None}


def warm_fail(x):
    raise ValueError("warm-up")


class Solution:
    def warm_method(self, xs, target):
        return [i for i, x in enumerate(xs) if x == target]
"""
_WARM_CALLS = (
    ("warm_sort", [[3, 1, 2], 2]),
    ("warm_sort", [[5.5, -1.0]]),
    ("warm_map", ["abc", (1, 2)]),
    ("warm_map", [["x", "y"], {"a": [1, 2]}]),
    ("warm_fail", [0]),
    ("warm_missing", []),
    ("warm_method", [[1, 2, 1], 1]),
)
WARM_ROUNDS = 140  # each warm-up call runs 20 times: past 3.11's warm-up count (8) and its specialisation


def warm_up(rounds: int = WARM_ROUNDS) -> None:
    """Run the candidate's per-call path (frames in and out over a socket, the codec both ways,
    `_call`, a failing call, `_bound_names`, `_flush`) on dummy data in the spawner, before it
    forks any candidate. CPython 3.11 counts each function's calls in its code object and
    rewrites its bytecode in place once warm (quickening, then specialisation): done here once,
    every forked candidate inherits code that is already warm, instead of each one writing to
    (copying) those pages and redoing the work. Measured (bench/cpu_per_job.py, docs/SANDBOX.md):
    ~65 fewer page faults per candidate. Only our own dummy code and values run; nothing is kept
    (the caller collects and freezes what is left) and a failure here changes nothing."""
    ours, theirs = socket.socketpair()
    try:
        ns: dict = {"__builtins__": builtins, "__name__": "warm_up"}
        exec(compile(_WARM_PROGRAM, "<warm-up>", "exec", dont_inherit=True), ns)
        for i in range(rounds):
            name, args = _WARM_CALLS[i % len(_WARM_CALLS)]
            framing.send_frame(ours, {"op": "call", "id": i, "name": name, "args": codec.encode(args),
                                      "kwargs": codec.encode({})})
            reply = _call(ns, framing.recv_answer(theirs))
            _flush()
            framing.send_frame(theirs, reply)
            answer = framing.recv_answer(ours)
            if answer.get("ok"):
                codec.decode(answer["value"])
            _bound_names(ns)
    except BaseException:  # noqa: BLE001 - only speed depends on it
        pass
    finally:
        ours.close()
        theirs.close()


_library_path: list[str] | None = None  # sys.path without ours, taken before the first scratch went in


def _point_at_scratch(scratch: str, hide_prefix: str) -> None:
    """HOME and TMPDIR at the scratch directory, which is also sys.path[0]: the program's
    directory, as for `python3 prog.py`."""
    global _library_path
    if _library_path is None:
        _library_path = [p for p in sys.path if p and p != hide_prefix and not p.startswith(hide_prefix + "/")]
    os.environ["HOME"] = scratch
    os.environ["TMPDIR"] = scratch
    sys.path[:] = [scratch] + _library_path


def main(ctrl: socket.socket, stdin_fd: int, stdout_fd: int, stderr_fd: int) -> None:
    """Entry point in the freshly forked child; never returns."""
    code = 70
    try:
        gc.freeze()  # inherited objects are never scanned, so never copied on write
        os.setsid()
        os.dup2(stdin_fd, 0)
        os.dup2(stdout_fd, 1)
        os.dup2(stderr_fd, 2)
        keep = ctrl.fileno()
        os.closerange(3, keep)
        os.closerange(keep + 1, 65536)
        if not _template_ready:
            prepare_template()
        first = framing.recv_frame(ctrl)
        if first is None:
            os._exit(0)
        _enter_jail(first)
        if first["op"] == "execve":
            _execve(ctrl, first)  # a compiler or a compiled program (sandbox/runner/compiled.py)
        if first["op"] == "launch":
            _launch(ctrl, first)  # a compiled program once per test, from this one jail
        if first["op"] == "main":
            code = _run_main(ctrl, first)
        elif first["op"] == "session":
            code = repl.serve(ctrl)  # a session's interpreter, cells until the supervisor hangs up
        else:
            code = _serve(ctrl, first)
    except BaseException:  # noqa: BLE001 - the process ends here whatever happened
        code = 71
    finally:
        os._exit(code)


def _enter_jail(msg: dict) -> None:
    os.chdir(msg["scratch"])
    if msg["scratch"] != _template_scratch:
        _point_at_scratch(msg["scratch"], msg.get("hide_prefix", "\0"))
    lim = msg.get("limits")
    if lim is not None:  # else the supervisor set them on this process already (prlimit)
        limits.Rlimits.from_message(lim).apply()
    cgroup.cap_job_memory()  # bwrap host: the job's processes together, in the slot's cgroup
    limits.give_pipes(msg["uid"])
    limits.drop_privileges(msg["uid"])


def _execve(ctrl: socket.socket, msg: dict) -> None:
    """Become the program `msg["argv"]` names (its limits, RLIMIT_DATA and the stack with the
    rest, are this process's already): the one frame a script run sends (nothing of the
    program has run yet), then exec; the kernel's exit status is what the supervisor reads.
    Returns never."""
    if msg.get("compile_view"):
        try:
            compileview.restrict_reads()  # /dev holds only null, zero and urandom for a compiler
        except OSError as exc:  # the compiler does not run without its view: ours, not the source's
            os.write(2, f"runner: {compileview.FAILED}: {exc}\n".encode())
            os._exit(compileview.FAILED_EXIT)
    framing.send_frame(ctrl, {"syntax_ok": True, "message": ""})
    ctrl.close()
    argv = msg["argv"]
    path = msg.get("path") or argv[0]  # an interactor's: its argv[0] does not name where it lies
    try:
        os.execve(path, argv, msg["env"])
    except OSError as exc:
        os.write(2, f"cannot run {argv[0]}: {exc.strerror}\n".encode())
    os._exit(127)


def _launch(ctrl: socket.socket, msg: dict) -> None:
    """A launcher: this jailed process (the job's uid, limits, Landlock domain, cgroup, seccomp
    filter, scratch as cwd) starts `msg["argv"]` once per request, as a child of its own that
    inherits all of it, through posix_spawn (vfork + exec in C: no Python runs in the child,
    no page of ours is copied), on the three pipe ends the supervisor sends with the request
    (SCM_RIGHTS, received close-on-exec: the child has those three on 0-2 and nothing else). Per
    request it says b"P<pid>\\n" (or b"E<errno>\\n"), then b"X<pid> <code> <signal>\\n" once the
    child ended, from its own waitpid. The supervisor checks that the pid is our child and
    kills the job's other processes between tests. Returns never."""
    framing.send_frame(ctrl, {"syntax_ok": True, "message": ""})
    ctrl.setblocking(True)
    argv, env = msg["argv"], msg["env"]
    dup2 = os.POSIX_SPAWN_DUP2
    while True:
        try:  # not socket.recv_fds: it drops its flags argument (CPython 3.11)
            data, anc, _flags, _addr = ctrl.recvmsg(16, socket.CMSG_LEN(3 * 4), socket.MSG_CMSG_CLOEXEC)
        except OSError:
            os._exit(0)
        fds = array.array("i")
        for level, kind, body in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(body[: len(body) - len(body) % fds.itemsize])
        if not data or len(fds) != 3:
            os._exit(0)
        try:
            pid = os.posix_spawn(msg.get("path") or argv[0], argv, env, setsid=True,
                                 file_actions=[(dup2, fds[0], 0), (dup2, fds[1], 1), (dup2, fds[2], 2)])
            said = b"P%d\n" % pid
        except OSError as exc:
            pid, said = 0, b"E%d\n" % (exc.errno or 0)
        for fd in fds:
            os.close(fd)
        ctrl.sendall(said)
        if pid:
            _, status = os.waitpid(pid, 0)
            if os.WIFSIGNALED(status):
                ctrl.sendall(b"X%d 0 %d\n" % (pid, os.WTERMSIG(status)))
            else:
                ctrl.sendall(b"X%d %d 0\n" % (pid, os.WEXITSTATUS(status)))


def _write_program(scratch: str, program: str) -> str:
    """The program's file in its scratch directory (its __file__, and the source lines its
    tracebacks show), written by the candidate itself, so as the job's uid and within its
    quota. A file of that name the job brought (exec files) is left alone: another name."""
    data = program.encode("utf-8", "surrogatepass")
    stem, ext = os.path.splitext(PROGRAM_NAME)
    for k in range(8):
        path = os.path.join(scratch, PROGRAM_NAME if k == 0 else f"{stem}_{k}{ext}")
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            try:
                with open(path, "rb") as f:
                    if f.read(len(data) + 1) == data:  # ours, from the run before (stdio cases)
                        return path
            except OSError:
                pass
            continue
        except OSError:
            return path  # no room: the name stays, the source lines are missing from tracebacks
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        except OSError:
            pass
        finally:
            os.close(fd)
        return path
    return os.path.join(scratch, PROGRAM_NAME)


def _compile(program: str, path: str) -> tuple[types.CodeType | None, str]:
    try:
        return compile(program, path, "exec", dont_inherit=True), ""
    except (SyntaxError, ValueError, OverflowError, MemoryError, RecursionError) as exc:
        return None, _describe(exc)


def _describe(exc: BaseException) -> str:
    try:
        text = str(exc)
    except BaseException:  # noqa: BLE001 - a hostile __str__
        text = ""
    name = type(exc).__name__
    return (f"{name}: {text}" if text else name)[:500]


def _load(ctrl: socket.socket, msg: dict, name: str) -> tuple[types.CodeType | None, dict]:
    """Compile (reporting syntax first) and make the fresh module the program runs in, with
    what a module run from a file has."""
    program = msg["program"]
    scratch = msg.get("scratch")
    path = _write_program(scratch, program) if scratch else "<solution>"  # no scratch: a test's own loop
    code, err = _compile(program, path)
    framing.send_frame(ctrl, {"syntax_ok": code is not None, "message": err})
    module = types.ModuleType(name)
    ns = module.__dict__
    ns["__builtins__"] = builtins
    ns["__file__"] = path
    ns["__cached__"] = None
    if name == "__main__":
        ns["__annotations__"] = {}
    ns["__loader__"] = SourceFileLoader(name, path)
    sys.modules[name] = module
    sys.argv = [path]
    sys.orig_argv = ["python3", path]
    return code, ns


def _run_main(ctrl: socket.socket, msg: dict | str) -> int:
    """stdio mode: run the program as __main__ on our stdin, ending as `python3 prog.py`
    ends. The control channel is closed before the program's code runs: how it ended is
    what the kernel tells the supervisor (this process's exit status), its output what the
    supervisor read from the pipes."""
    code, ns = _load(ctrl, msg if isinstance(msg, dict) else {"program": msg}, "__main__")
    ctrl.close()
    if code is None:
        return 0
    status, interrupted = 0, False
    _charge_from_here()
    try:
        exec(code, ns)
    except SystemExit as exc:
        status = _exit_code(exc.code)
        if exc.code is not None and not isinstance(exc.code, int):
            _print_exit_message(exc.code)
    except BaseException as exc:  # noqa: BLE001 - its traceback is its stderr, as python prints it
        status, interrupted = 1, isinstance(exc, KeyboardInterrupt)
        _print_uncaught(exc)
    status = _finalize(status, ns)
    if interrupted:  # python ends by SIGINT itself, so its parent sees the signal
        try:
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        except BaseException:  # noqa: BLE001
            pass
    return status


def _print_uncaught(exc: BaseException) -> None:
    """sys.excepthook, as python calls it, on the traceback without our frame."""
    tb = exc.__traceback__
    tb = tb.tb_next if tb is not None else None
    try:
        exc.__traceback__ = tb
        sys.excepthook(type(exc), exc, tb)
    except BaseException:  # noqa: BLE001 - a broken hook: python falls back to its own
        try:
            sys.__excepthook__(type(exc), exc, tb)
        except BaseException:  # noqa: BLE001
            pass


def _finalize(status: int, ns: dict) -> int:
    """Python's shutdown of a script: wait for non-daemon threads, run atexit handlers,
    release __main__ (files left open are flushed), flush stdout and stderr (120 if that fails)."""
    threading = sys.modules.get("threading")
    if threading is not None:
        try:
            threading._shutdown()
        except BaseException:  # noqa: BLE001
            pass
    try:
        atexit._run_exitfuncs()
    except BaseException:  # noqa: BLE001
        pass
    _clear_main(ns)
    for stream in (sys.stdout, sys.stderr):
        if stream is None:
            continue
        try:
            if not stream.closed:
                stream.flush()
        except BaseException:  # noqa: BLE001
            status = FLUSH_FAILED
    for stream in (sys.__stdout__, sys.__stderr__):  # replaced by the program: still flushed at exit
        try:
            if stream is not None and stream is not sys.stdout and stream is not sys.stderr:
                stream.flush()
        except BaseException:  # noqa: BLE001
            pass
    return status


def _clear_main(ns: dict) -> None:
    """As python tears __main__ down at exit: what the program left there is released, so
    files it never closed are flushed and closed, and __del__ methods run (we end with _exit,
    which would skip both). Its cost is the program's, as it is under python."""
    try:
        sys.modules.pop("__main__", None)
        ns.clear()
    except BaseException:  # noqa: BLE001 - a __del__ that raises or exits
        pass


def _print_exit_message(message: object) -> None:
    """What python prints for `sys.exit("text")`."""
    try:
        print(message, file=sys.stderr)
    except BaseException:  # noqa: BLE001
        pass


def _exit_code(code: object) -> int:
    """The exit status of `sys.exit(code)` as python gives it (an int past a C long: 255)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return int(code) & 0xFF if -(1 << 63) <= code < (1 << 63) else 255
    return 1


def _serve(ctrl: socket.socket, msg: dict | str) -> int:
    """function mode: load the program, then answer calls until the supervisor hangs up."""
    code, ns = _load(ctrl, msg if isinstance(msg, dict) else {"program": msg}, "solution")
    if code is None:
        return 0
    # the program's functions are called from _call, a Python frame above this one, where a
    # module's top level is entered from C (one more level): as if called from a top level
    _charge_from_here(extra=-1)
    try:
        exec(code, ns)
    except BaseException as exc:  # noqa: BLE001 - SystemExit included: the module did not run
        _flush()
        framing.send_frame(ctrl, {"runs": False, "message": _describe(exc)})
        return 0
    _flush()
    framing.send_frame(ctrl, {"runs": True, "message": "", "names": _bound_names(ns)})
    while True:
        msg = framing.recv_answer(ctrl)  # the verdict process asks one call at a time
        if msg is None:
            return 0
        reply = _digests(ns, msg) if msg.get("op") == "digest" else _call(ns, msg)
        _flush()
        framing.send_frame(ctrl, reply)


_BUILTINS = dict(vars(builtins))  # as the runner started, before the program ran
_STDLIB = frozenset(getattr(sys, "stdlib_module_names", ()))


def _bound_names(ns: dict) -> list[str]:
    """The names the program bound, for telemetry (names never route by what the program
    defines): a builtin or stdlib module name bound to anything but the genuine builtin or
    module comes first, so a long list cannot hide it; `import math` is not listed."""
    shadows, others = [], []
    for k in list(ns)[:100_000]:
        if type(k) is not str or len(k) > 100 or k.startswith("__"):
            continue
        v = ns.get(k)
        if k in _BUILTINS:
            if v is not _BUILTINS[k]:
                shadows.append(k)
        elif k in _STDLIB:
            if not (type(v) is types.ModuleType and v.__name__ == k):
                shadows.append(k)
        else:
            others.append(k)
    return (shadows + others)[:2000]


def _digests(ns: dict, msg: dict) -> dict:
    names = msg.get("names")
    names = [n for n in names[:100] if type(n) is str] if type(names) is list else []
    return {"id": msg.get("id"), "ok": True, "value": {n: codec.code_digest(ns.get(n)) for n in names}}


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:  # noqa: BLE001
            pass


def _resolve(ns: dict, name: str):
    target = ns.get(name)
    if callable(target):
        return target
    solution = ns.get("Solution")
    if isinstance(solution, type) and callable(getattr(solution, name, None)):
        return getattr(solution(), name)
    raise NameError(f"name {name!r} is not defined by the program")


def _call(ns: dict, msg: dict) -> dict:
    """One call of the program's function on fresh copies of the test's arguments. Only for a
    task declared in-place (`in_place` in the message) does the reply also carry the arguments'
    state after the call, and only where it changed; the verdict side decides whether to take it."""
    call_id = msg.get("id")
    try:
        args = codec.decode(msg["args"])
        kwargs = codec.decode(msg["kwargs"])
        fn = _resolve(ns, msg["name"])
        # only a container can be changed in place; a snapshot says cheaply whether one was
        mutable = msg.get("in_place") is True and (any(type(a) not in _SCALARS for a in args)
                                                   or any(type(v) not in _SCALARS for v in kwargs.values()))
        before = _snapshot([args, kwargs]) if mutable else None
        value = fn(*args, **kwargs)
        reply = {"id": call_id, "ok": True, "value": codec.encode(value)}
    except codec.Unencodable as exc:
        return {"id": call_id, "ok": False, "exc_type": "TypeError", "message": f"return value: {exc}"}
    except BaseException as exc:  # noqa: BLE001 - the candidate's failure, reported by name only
        return {"id": call_id, "ok": False, "exc_type": type(exc).__name__[:100], "message": _describe(exc),
                "base": not isinstance(exc, Exception)}
    if mutable and (before is None or _snapshot([args, kwargs]) != before):
        for key, now, sent in (("args_after", args, msg["args"]), ("kwargs_after", kwargs, msg["kwargs"])):
            try:
                after = codec.encode(now)
                if after != sent:
                    reply[key] = after
            except BaseException:  # noqa: BLE001
                pass
    return reply


def _snapshot(args: list) -> bytes | None:
    """The arguments' bytes in marshal's form (C, exact builtin types only, ~10x faster than
    encoding them again); None when it cannot say, and the full comparison decides. Made and
    compared only here, in the candidate's own process: nothing trusted ever reads it."""
    try:
        return marshal.dumps(args)
    except BaseException:  # noqa: BLE001 - the candidate's own objects, or too deep
        return None


_SCALARS = frozenset({int, float, str, bool, type(None), bytes, complex})
