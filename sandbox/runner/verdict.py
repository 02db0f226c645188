"""The verdict process: runs the test code against proxies of the candidate.

No candidate code is ever loaded here. Each name the tests use but do not define is a
proxy that sends the call's arguments (as plain data) through the supervisor to the
candidate process and rebuilds the plain-data answer as fresh builtins. Assertions,
comparisons and exceptions therefore all run on values the candidate cannot reach.
"""

from __future__ import annotations

import ast
import builtins
import functools
import importlib
import os
import socket
import sys
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from . import codec, framing, limits
from .progress import Progress

BUILTIN_NAMES = set(dir(builtins))
STDLIB = set(getattr(sys, "stdlib_module_names", ()))


LAST_RETURN: list = []  # the candidate's latest answer, quoted when a bare assert fails


class Aborted(BaseException):
    """The supervisor stopped the candidate (timeout, crash, limits); not catchable by tests."""


Unit = Callable[[], None]  # one test: runs it, raising on failure


class Channel:
    """The verdict process's two lines: to the supervisor (new candidates, losses, results)
    and straight to the candidate process (calls and plain-data answers)."""

    def __init__(self, sock: socket.socket, progress: Progress) -> None:
        self.sock = sock
        self.progress = progress
        self.cand: socket.socket | None = None
        self.index = -1
        self.call_id = 0

    def send(self, obj: Any) -> None:
        framing.send_frame(self.sock, obj)

    def call(self, name: str, args: Any, kwargs: Any) -> dict:
        if self.cand is None:
            self._fetch_candidate()
        self.call_id += 1
        why = "eof"
        try:
            framing.send_frame(self.cand, {"op": "call", "id": self.call_id, "name": name, "args": args,
                                           "kwargs": kwargs})
            reply = framing.recv_answer(self.cand)
        except framing.OversizeFrame:
            reply, why = None, "oversize"
        except framing.MalformedFrame:
            reply, why = None, "malformed"
        except (framing.FrameError, OSError):  # gone, mid-frame or before
            reply = None
        if not isinstance(reply, dict) or reply.get("id") != self.call_id:
            if reply is not None:
                why = "protocol" if isinstance(reply, dict) else "malformed"  # not this call's answer
            self._lose(why)
            raise Aborted("candidate lost")
        return reply

    def drop(self) -> None:
        if self.cand is not None:
            try:
                self.cand.close()
            except OSError:
                pass
        self.cand = None

    def _lose(self, why: str) -> None:
        self.drop()
        self.send({"op": "lost", "why": why, "index": self.index})

    def _fetch_candidate(self) -> None:
        self.send({"op": "need_candidate", "index": self.index})
        cand = receive_marker(self.sock)[1]
        if cand is None:
            raise Aborted("no candidate")
        self.cand = cand
        if self.index >= 0:
            self.progress.begin(self.index)  # loading a fresh candidate is not the test's time


def receive_marker(sock: socket.socket) -> tuple[bytes, socket.socket | None]:
    """One marker byte from the supervisor: b"C" carries a candidate's channel, b"N" says
    there is none, b"S" skips the job."""
    data, fds, _flags, _addr = socket.recv_fds(sock, 1, 2)
    if not data:
        for fd in fds:
            os.close(fd)
        raise EOFError("supervisor gone")
    if data != b"C" or len(fds) != 1:
        for fd in fds:
            os.close(fd)
        return data, None
    cand = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, 0, fileno=fds[0])
    cand.setblocking(True)
    return data, cand


def _exception(name: str, message: str) -> BaseException:
    cls = getattr(builtins, name, None)
    if isinstance(cls, type) and issubclass(cls, Exception):
        try:
            return cls(message)
        except Exception:  # noqa: BLE001
            pass
    return RuntimeError(f"{name}: {message}")


_NO_KWARGS = codec.encode({})


def make_proxy(chan: Channel, name: str):
    def proxy(*args: Any, **kwargs: Any) -> Any:
        try:
            enc_args = codec.encode(list(args))
            enc_kwargs = codec.encode(dict(kwargs)) if kwargs else _NO_KWARGS
        except codec.Unencodable as exc:
            raise TypeError(f"argument for {name} cannot be sent to the candidate: {exc}") from None
        reply = chan.call(name, enc_args, enc_kwargs)
        if reply.get("exc_type") == "MemoryError":
            raise Aborted("memory")
        if "args_after" in reply:
            _write_back(args, codec.decode(reply["args_after"]))
        if reply.get("ok"):
            value = codec.decode(reply["value"])
            LAST_RETURN[:] = [value]
            return value
        raise _exception(str(reply.get("exc_type", "Exception")), str(reply.get("message", "")))

    proxy.__name__ = proxy.__qualname__ = name
    return proxy


def _write_back(originals: tuple, updated: list) -> None:
    """Mirror in-place changes the candidate made to its arguments (sort-in-place tests)."""
    for orig, new in zip(originals, updated):
        try:
            if type(orig) is list and type(new) is list:
                orig[:] = new
            elif type(orig) is dict and type(new) is dict:
                orig.clear()
                orig.update(new)
            elif type(orig) is set and type(new) is set:
                orig.clear()
                orig.update(new)
        except Exception:  # noqa: BLE001
            pass


_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _nodes(*trees: ast.AST, leaves: frozenset = frozenset({ast.Name})) -> list:
    """Every node of the trees, not looking below a node whose type is a leaf. A loop of our
    own: ast.walk and ast.NodeVisitor go through a generator or a getattr dispatch per node
    and cost ~3x as much (a fifth of compiling a HumanEval check)."""
    out: list = []
    stack: list = list(trees)
    pop, push, keep, AST = stack.pop, stack.append, out.append, ast.AST
    while stack:
        node = pop()
        keep(node)
        if type(node) in leaves:
            continue
        for field in node._fields:
            value = getattr(node, field, None)
            if isinstance(value, list):
                for item in value:
                    if isinstance(item, AST):
                        push(item)
            elif isinstance(value, AST):
                push(value)
    return out


_BINDING_LEAVES = frozenset({ast.Name, ast.arg, ast.alias})


def _raw_free(*trees: ast.AST) -> frozenset[str]:
    """Names loaded but bound nowhere, scopes ignored. An argument's annotation and an alias
    are not looked into."""
    loaded: set[str] = set()
    bound: set[str] = set()
    Name, Load = ast.Name, ast.Load
    for node in _nodes(*trees, leaves=_BINDING_LEAVES):
        kind = type(node)
        if kind is Name:
            (loaded if type(node.ctx) is Load else bound).add(node.id)
        elif kind is ast.arg:
            bound.add(node.arg)
        elif kind is ast.alias:
            bound.add((node.asname or node.name).split(".")[0])
        elif kind in _DEFS or (kind is ast.ExceptHandler and node.name):
            bound.add(node.name)
    return frozenset(loaded - bound)


def _name_ids(tree: ast.AST) -> set[str]:
    return {node.id for node in _nodes(tree) if type(node) is ast.Name}


def _filter_free(raw: frozenset[str], defined: frozenset[str]) -> set[str]:
    return {n for n in raw if n not in BUILTIN_NAMES or n in defined}


def free_names(*trees: ast.AST, defined: frozenset[str] = frozenset()) -> set[str]:
    """Names the tests use but do not bind: the candidate's, unless they are builtins the
    candidate did not redefine (a program may define its own `sum`)."""
    return _filter_free(_raw_free(*trees), defined)


class Compiled:
    """What a test spec compiles to, before any candidate is known: the names it leaves
    free, its code objects, its units' labels. Kept per verdict process, which outlives
    jobs, because a GRPO group's completions share their tests."""

    def __init__(self, raw_free: frozenset[str], labels: list[str], module=None, setup=None,
                 units: list | None = None) -> None:
        self.raw_free = raw_free
        self.labels = labels
        self.module = module  # check(): the whole test module
        self.setup = setup  # assert list: the setup code, if any
        self.units = units  # code objects (assert list) or the module's unit function names (split check)


_COMPILED: dict[tuple, Compiled] = {}
COMPILED_MAX = 256  # specs, and the characters of their sources: the process is long-lived
COMPILED_MAX_CHARS = 32 << 20
_compiled_chars = 0


def compiled(spec: dict) -> Compiled:
    if "asserts" in spec:
        setup = spec.get("setup", "") or ""
        key: tuple = ("list", setup, tuple(spec["asserts"]))
        size = len(setup) + sum(map(len, spec["asserts"]))
    else:
        key = ("check", spec["test"], spec["entry_point"], bool(spec.get("split_asserts", True)))
        size = len(spec["test"])
    c = _COMPILED.get(key)
    if c is None:
        global _compiled_chars
        c = _compile_list(spec) if key[0] == "list" else _compile_check(spec)
        if len(_COMPILED) >= COMPILED_MAX or _compiled_chars + size > COMPILED_MAX_CHARS:
            _COMPILED.clear()
            _compiled_chars = 0
        _COMPILED[key] = c
        _compiled_chars += size
    return c


def _compile_list(spec: dict) -> Compiled:
    setup = spec.get("setup", "") or ""
    trees = [ast.parse(setup)] + [ast.parse(a) for a in spec["asserts"]]
    codes = [compile(tree, f"<test {i}>", "exec") for i, tree in enumerate(trees[1:])]
    return Compiled(_raw_free(*trees), [a.strip()[:200] for a in spec["asserts"]],
                    setup=compile(trees[0], "<setup>", "exec") if setup.strip() else None, units=codes)


def _compile_check(spec: dict) -> Compiled:
    tree = ast.parse(spec["test"])
    raw = _raw_free(tree)
    if spec.get("split_asserts", True):
        # the shape must not depend on the candidate: the same tests whatever it defines
        split = _split_shape(spec["test"], tree, _filter_free(raw, frozenset()) | {spec["entry_point"]})
        if split:
            module = compile(_with_unit_functions(tree, split), "<test>", "exec")
            return Compiled(raw, split.labels, module=module,
                            units=[_unit_name(i) for i in range(len(split.asserts))])
    return Compiled(raw, ["check(candidate)"], module=compile(tree, "<test>", "exec"))


def _unit_name(i: int) -> str:
    return f"<check assert {i}>"  # not an identifier: no test code can name or replace it


def _with_unit_functions(tree: ast.Module, split: _Split) -> ast.Module:
    """The test module, one compile for all: each assert becomes a function of its own,
    `def <check assert i>(candidate): <setup>; <assert>`, i.e. check() holding that assert
    alone, so it runs with check's own scoping. check() itself keeps an empty body when
    nothing but its definition refers to it: its asserts are compiled once, in the units.
    Every statement keeps its parsed location (no fix_missing_locations: a walk of the
    whole tree that cost as much as compiling it)."""
    fn = split.check
    others = [n for n in tree.body if n is not fn]
    body = list(tree.body)
    if not fn.decorator_list and "check" not in _raw_free(*others):
        stub = ast.Pass(lineno=fn.lineno, col_offset=fn.col_offset, end_lineno=fn.lineno,
                        end_col_offset=fn.col_offset)
        body[body.index(fn)] = ast.FunctionDef(
            name="check", args=fn.args, body=[stub], decorator_list=[], returns=None, type_comment=None,
            lineno=fn.lineno, col_offset=fn.col_offset, end_lineno=fn.end_lineno, end_col_offset=fn.end_col_offset)
    for i, stmt in enumerate(split.asserts):
        body.append(ast.FunctionDef(
            name=_unit_name(i), args=fn.args, body=split.setup + [stmt], decorator_list=[], returns=None,
            type_comment=None, lineno=stmt.lineno, col_offset=stmt.col_offset, end_lineno=stmt.end_lineno,
            end_col_offset=stmt.end_col_offset))
    return ast.Module(body=body, type_ignores=[])


def bind_free_names(chan: Channel, names: set[str], ns: dict, defined: frozenset[str] = frozenset()) -> None:
    for name in sorted(names):
        if name in STDLIB and name not in defined:
            try:
                ns[name] = importlib.import_module(name)
                continue
            except Exception:  # noqa: BLE001
                pass
        ns[name] = make_proxy(chan, name)


def plan_assert_list(chan: Channel, spec: dict) -> list[Unit]:
    c = compiled(spec)
    ns: dict = {"__builtins__": builtins, "__name__": "__tests__"}
    defined = frozenset(spec.get("candidate_names", ()))
    bind_free_names(chan, _filter_free(c.raw_free, defined), ns, defined)
    if c.setup is not None:
        exec(c.setup, ns)
    return [lambda code=code: exec(code, ns) for code in c.units]


def plan_assert_check(chan: Channel, spec: dict) -> list[Unit]:
    c = compiled(spec)
    ns: dict = {"__builtins__": builtins, "__name__": "__tests__"}
    defined = frozenset(spec.get("candidate_names", ()))
    bind_free_names(chan, _filter_free(c.raw_free, defined), ns, defined)
    candidate = make_proxy(chan, spec["entry_point"])
    exec(c.module, ns)
    check = ns.get("check")
    if not callable(check):
        raise ValueError("the test code defines no check(candidate) function")
    if not c.units:
        return [lambda: check(candidate)]
    return [functools.partial(ns[name], candidate) for name in c.units]


class _Split(NamedTuple):
    """A flat check() seen as separate tests: each assert that touches the candidate, with
    the imports and assignments before them as the setup every one of them runs first."""

    check: ast.FunctionDef
    setup: list[ast.stmt]
    asserts: list[ast.Assert]
    labels: list[str]


def _split_shape(source: str, tree: ast.Module, cand_names: set[str]) -> _Split | None:
    """Each assert of a flat check() is a test; leading imports and assignments are its setup."""
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "check"), None)
    if fn is None or len(fn.args.args) != 1 or fn.args.vararg or fn.args.kwarg:
        return None
    param = fn.args.args[0].arg
    body = list(fn.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    body = [s for s in body if not isinstance(s, ast.Pass)]
    setup, asserts = [], []
    for stmt in body:
        if isinstance(stmt, ast.Assert):
            asserts.append(stmt)
        elif asserts or not isinstance(stmt, (ast.Import, ast.ImportFrom, ast.Assign)):
            return None
        else:
            setup.append(stmt)
    if len(asserts) < 2:
        return None
    uses = cand_names | {param}
    # an assert that never touches the candidate (`assert True`) tests nothing
    relevant = [a for a in asserts if not uses.isdisjoint(_name_ids(a))]
    if not relevant:
        return None
    lines = source.splitlines()
    return _Split(fn, setup, relevant, [_label(lines, stmt, i) for i, stmt in enumerate(relevant)])


def _label(lines: list[str], stmt: ast.stmt, i: int) -> str:
    """The statement's first source line (ast.get_source_segment re-splits the whole
    source on every call, which is quadratic in the number of asserts)."""
    try:
        text = lines[stmt.lineno - 1][stmt.col_offset :]
    except (IndexError, TypeError):
        text = ""
    return (text.strip() or f"assert #{i}")[:200]


def plan_call(chan: Channel, spec: dict) -> list[Unit]:
    fn = make_proxy(chan, spec["fn_name"])
    tol = spec.get("float_tolerance")
    units = []
    for case in spec["cases"]:
        def run(case=case) -> None:
            got = fn(*case.get("args", []), **case.get("kwargs", {}))
            if not codec.values_equal(got, case.get("expected"), tol):
                raise AssertionError(f"expected {_short(case.get('expected'))}, got {_short(got)}")

        units.append(run)
    return units


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 120 else text[:117] + "..."


def unit_labels(spec: dict) -> list[str]:
    """The tests a spec holds, from its syntax alone (no code runs): the same list the
    plan runs, known before any candidate exists."""
    if spec["kind"] == "call":
        return [f"case {i}" for i in range(len(spec["cases"]))]
    return list(compiled(spec).labels)


def build_plan(chan: Channel, spec: dict) -> list[Unit]:
    if spec["kind"] == "call":
        return plan_call(chan, spec)
    if "asserts" in spec:
        return plan_assert_list(chan, spec)
    return plan_assert_check(chan, spec)


def _bare_failure() -> str:
    if LAST_RETURN:
        return f"assertion failed; the candidate last returned {_short(LAST_RETURN[0])}"
    return "assertion failed"


def serve(sock: socket.socket, progress: Progress) -> None:
    """Run jobs until the supervisor hangs up. The process outlives jobs (a fork per job
    costs more than most jobs' tests), so nothing of a job is kept but caches of parsed
    test code; each job's tests get a fresh namespace.

    Per job: the job arrives; we answer how many tests it holds (from its syntax alone,
    while the supervisor loads the candidate in parallel); then comes the go, with the
    candidate's channel and the names its program defined, or the word to skip the job."""
    chan = Channel(sock, progress)
    cpu: object = "inherited"  # whatever the supervisor had when it forked us: set it on the first job
    while True:
        job = framing.recv_frame(sock)
        if not isinstance(job, dict):
            return
        if job.get("cpu") != cpu:  # beside the candidate it will call
            cpu = job.get("cpu")
            limits.pin_cpu(cpu if type(cpu) is int else None)
        spec = job["spec"]
        try:
            n = len(unit_labels(spec))
        except Exception as exc:  # noqa: BLE001 - malformed tests are the task's fault
            chan.send({"op": "bad_tests", "message": f"{type(exc).__name__}: {exc}"[:300]})
            continue
        chan.send({"op": "plan", "n": n})
        try:
            marker, cand = receive_marker(sock)
        except EOFError:
            return
        if marker == b"S":
            continue
        go = framing.recv_frame(sock)
        if not isinstance(go, dict):
            return
        spec = dict(spec, candidate_names=go.get("names", []))
        chan.cand, chan.index = cand, -1
        try:
            run_job(chan, spec, int(job.get("start", 0)), bool(job.get("stream")))
        finally:
            chan.drop()
            chan.index = -1


def run_job(chan: Channel, spec: dict, start: int, stream: bool) -> None:
    """Run the units from `start` on; progress goes to shared memory, results in one message
    at the end (and one per test when the client streams)."""
    LAST_RETURN.clear()
    try:
        units = build_plan(chan, spec)
    except Aborted:
        chan.send({"op": "plan_error", "message": "the candidate was lost while the test setup ran"})
        return
    except BaseException as exc:  # noqa: BLE001 - bad test code is the task's fault
        chan.send({"op": "plan_error", "message": f"{type(exc).__name__}: {exc}"[:500]})
        return
    results = []
    for i in range(start, len(units)):
        chan.index = i
        chan.progress.begin(i)
        LAST_RETURN.clear()
        status, message = "passed", ""
        t0 = time.monotonic()
        try:
            units[i]()
        except Aborted as exc:
            status, message = ("memory", "MemoryError") if str(exc) == "memory" else ("aborted", str(exc))
        except AssertionError as exc:
            status, message = "failed", (str(exc) or _bare_failure())[:300]
        except BaseException as exc:  # noqa: BLE001
            status, message = "error", f"{type(exc).__name__}: {exc}"[:300]
        chan.progress.finish(i, status)
        result = {"index": i, "status": status, "message": message, "time_s": round(time.monotonic() - t0, 6)}
        if stream:
            chan.send({"op": "end", **result})
        results.append(result)
    chan.index = -1
    chan.send({"op": "done", "results": results})
