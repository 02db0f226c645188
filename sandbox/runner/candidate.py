"""The candidate process: loads the untrusted program and answers calls with plain data.

It never receives test code or expected values: only the program, and for each call the
function name and the arguments. Whatever it sends back is parsed strictly by the
supervisor; nothing it says about itself is trusted.
"""

from __future__ import annotations

import builtins
import gc
import io
import marshal
import os
import resource
import socket
import sys
import types

from . import codec, framing, limits

_template_ready = False
_template_scratch: str | None = None


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
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8", errors="replace")
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8", errors="backslashreplace")
    sys.stderr = io.TextIOWrapper(
        io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="backslashreplace", line_buffering=True
    )
    os.environ.clear()
    os.environ.update(limits.CANDIDATE_ENV)
    if scratch is not None:
        _point_at_scratch(scratch, hide_prefix)
    sys.setrecursionlimit(10_000)
    _template_scratch = scratch
    _template_ready = True


def _point_at_scratch(scratch: str, hide_prefix: str) -> None:
    os.environ["HOME"] = scratch
    os.environ["TMPDIR"] = scratch
    sys.path[:] = [p for p in sys.path if p and not p.startswith(hide_prefix)] + [scratch]


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
        if first["op"] == "main":
            code = _run_main(ctrl, first["program"])
        else:
            code = _serve(ctrl, first["program"])
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
        limits.apply_rlimits(
            memory_mb=lim["memory_mb"],
            nproc=lim["nproc"],
            fsize_mb=lim["fsize_mb"],
            nofile=lim["nofile"],
            cpu_s=lim["cpu_s"],
        )
    limits.cap_job_memory()  # bwrap host: the job's processes together, in the slot's cgroup
    limits.drop_privileges(msg["uid"])


def _execve(ctrl: socket.socket, msg: dict) -> None:
    """Become the program `msg["argv"]` names: the limits the runtime needs (RLIMIT_DATA, a
    stack) on top of the jail's, the one frame a script run sends (nothing of the program has
    run yet), then exec; the kernel's exit status is what the supervisor reads. Returns never."""
    for kind, mb in ((resource.RLIMIT_DATA, msg["data_mb"]), (resource.RLIMIT_STACK, msg["stack_mb"])):
        if mb:
            hard = resource.getrlimit(kind)[1]
            want = mb * limits.MB if hard == resource.RLIM_INFINITY else min(mb * limits.MB, hard)
            resource.setrlimit(kind, (want, want))
    framing.send_frame(ctrl, {"syntax_ok": True, "message": ""})
    ctrl.close()
    argv = msg["argv"]
    try:
        os.execve(argv[0], argv, msg["env"])
    except OSError as exc:
        os.write(2, f"cannot run {argv[0]}: {exc.strerror}\n".encode())
    os._exit(127)


def _compile(program: str) -> tuple[types.CodeType | None, str]:
    try:
        return compile(program, "<solution>", "exec", dont_inherit=True), ""
    except (SyntaxError, ValueError, OverflowError, MemoryError, RecursionError) as exc:
        return None, _describe(exc)


def _describe(exc: BaseException) -> str:
    try:
        text = str(exc)
    except BaseException:  # noqa: BLE001 - a hostile __str__
        text = ""
    name = type(exc).__name__
    return (f"{name}: {text}" if text else name)[:500]


def _load(ctrl: socket.socket, program: str, name: str) -> tuple[types.CodeType | None, dict]:
    """Compile (reporting syntax first) and make the fresh module the program runs in."""
    code, err = _compile(program)
    framing.send_frame(ctrl, {"syntax_ok": code is not None, "message": err})
    module = types.ModuleType(name)
    module.__dict__["__builtins__"] = builtins
    sys.modules[name] = module
    return code, module.__dict__


def _run_main(ctrl: socket.socket, program: str) -> int:
    """stdio mode: run the program as __main__ on our stdin. The control channel is closed
    before the program's code runs: how it ended is what the kernel tells the supervisor
    (this process's exit status), its output what the supervisor read from the pipes."""
    code, ns = _load(ctrl, program, "__main__")
    ctrl.close()
    if code is None:
        return 0
    status = 0
    try:
        exec(code, ns)
    except SystemExit as exc:
        status = _exit_code(exc.code)
        if exc.code is not None and type(exc.code) is not int:
            _print_exit_message(exc.code)
    except BaseException:  # noqa: BLE001 - its traceback is its stderr, as python prints it
        status = 1
        try:
            import traceback

            traceback.print_exc()
        except BaseException:  # noqa: BLE001
            pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:  # noqa: BLE001
            status = status or 1
    return status


def _print_exit_message(message: object) -> None:
    """What python prints for `sys.exit("text")`."""
    try:
        print(message, file=sys.stderr)
    except BaseException:  # noqa: BLE001
        pass


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if type(code) is int:
        return code & 0xFF
    return 1


def _serve(ctrl: socket.socket, program: str) -> int:
    """function mode: load the program, then answer calls until the supervisor hangs up."""
    code, ns = _load(ctrl, program, "solution")
    if code is None:
        return 0
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
    call_id = msg.get("id")
    try:
        args = codec.decode(msg["args"])
        kwargs = codec.decode(msg["kwargs"])
        fn = _resolve(ns, msg["name"])
        # only a container can be changed in place; a snapshot says cheaply whether one was
        mutable = any(type(a) not in _SCALARS for a in args)
        before = _snapshot(args) if mutable else None
        value = fn(*args, **kwargs)
        reply = {"id": call_id, "ok": True, "value": codec.encode(value)}
    except codec.Unencodable as exc:
        return {"id": call_id, "ok": False, "exc_type": "TypeError", "message": f"return value: {exc}"}
    except BaseException as exc:  # noqa: BLE001 - the candidate's failure, reported by name only
        return {"id": call_id, "ok": False, "exc_type": type(exc).__name__[:100], "message": _describe(exc),
                "base": not isinstance(exc, Exception)}
    if mutable and (before is None or _snapshot(args) != before):
        try:
            after = codec.encode(args)
            if after != msg["args"]:
                reply["args_after"] = after
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
