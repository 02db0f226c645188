"""The verdict process: runs the test code against proxies of the candidate.

No candidate code is ever loaded here. Each name the tests use but do not define is a
proxy that sends the call's arguments (as plain data) through the supervisor to the
candidate process and rebuilds the plain-data answer as fresh builtins. Assertions,
comparisons and exceptions therefore all run on values the candidate cannot reach.
"""

from __future__ import annotations

import builtins
import functools
import importlib
import os
import socket
import time
from collections.abc import Callable
from typing import Any

from . import codec, cpus, flags, framing
from .progress import Progress
from .units import Compiled, compiled, labels

LAST_RETURN: list = []  # the candidate's latest answer, quoted when a bare assert fails


class Aborted(BaseException):
    """The supervisor stopped the candidate (timeout, crash, limits); not catchable by tests."""


Unit = Callable[[], None]  # one test: runs it, raising on failure
DIGEST_WAIT_S = 5.0  # how long the candidate may take to fingerprint its helpers (telemetry)


class Channel:
    """The verdict process's two lines: to the supervisor (new candidates, losses, results)
    and straight to the candidate process (calls and plain-data answers)."""

    def __init__(self, sock: socket.socket, progress: Progress) -> None:
        self.sock = sock
        self.progress = progress
        self.cand: socket.socket | None = None
        self.index = -1
        self.call_id = 0
        self.flags: set[str] = set()  # what the candidate tried during this job (sandbox.runner.flags)

    def send(self, obj: Any) -> None:
        framing.send_frame(self.sock, obj)

    def call(self, name: str, args: Any, kwargs: Any, in_place: bool = False) -> dict:
        msg = {"op": "call", "name": name, "args": args, "kwargs": kwargs}
        if in_place:
            msg["in_place"] = True  # only then does the candidate report its arguments' state after the call
        return self.ask(msg)

    def digests(self, names: list[str], within: float = DIGEST_WAIT_S) -> dict:
        """The candidate's fingerprints of its definitions of these names (telemetry only:
        the candidate may lie, and no verdict depends on the answer). Asked before the
        first test, so it is bounded by its own deadline, not a test's: a candidate that
        does not answer in time is dropped (the supervisor loads a fresh one for the first
        test) and counts as a rewrite. Never raises."""
        if self.cand is None:
            return {}
        self.call_id += 1
        reply = None
        try:
            framing.send_frame(self.cand, {"op": "digest", "names": names, "id": self.call_id})
            reply = _answer_within(self.cand, within)
        except (OSError, EOFError, ValueError, framing.FrameError):
            pass
        if not isinstance(reply, dict) or reply.get("id") != self.call_id:
            self._lose("protocol")
            return {}
        value = reply.get("value") if reply.get("ok") else None
        return value if type(value) is dict else {}

    def ask(self, msg: dict) -> dict:
        """One request to the candidate process and its answer, matched by id."""
        if self.cand is None:
            self._fetch_candidate()
        self.call_id += 1
        why = "eof"
        try:
            framing.send_frame(self.cand, {**msg, "id": self.call_id})
            reply = framing.recv_answer(self.cand)
        except framing.OversizeFrame:
            reply, why = None, "oversize"
        except framing.MalformedFrame:
            reply, why = None, "malformed"
        except (BrokenPipeError, ConnectionResetError):
            # the kernel says the call was never read: the candidate was gone (or going) before
            # it was asked, i.e. its top level ended, whatever its load frame claimed
            reply, why = None, "unread"
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


def _answer_within(sock: socket.socket, seconds: float) -> Any:
    """One answer frame, or TimeoutError once `seconds` have passed; the socket is left
    blocking, as every other read of it expects."""
    deadline = time.monotonic() + seconds
    reader = framing.FrameReader(limit=1 << 20)
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("no answer in time")
            sock.settimeout(remaining)
            chunk = sock.recv(1 << 16)
            if not chunk:
                raise EOFError("candidate gone")
            frames = reader.feed(chunk)
            if frames:
                if len(frames) > 1 or reader.buf:
                    raise framing.FrameError("bad frame: data after an answer")
                return frames[0]
    finally:
        sock.setblocking(True)


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


# Exceptions that steer control flow rather than report an error: raised into the test,
# a StopIteration from the candidate would end the test's own map()/filter()/generator
# early (`all(map(candidate, xs))` passes), a SystemExit would end the test.
CONTROL_FLOW = frozenset({"StopIteration", "StopAsyncIteration", "GeneratorExit", "SystemExit", "KeyboardInterrupt"})


def _exception(chan: Channel, reply: dict) -> BaseException:
    """The candidate's exception rebuilt here by its builtin name (nothing of its own class
    crosses). A control-flow exception, or any BaseException that is not an Exception,
    arrives as RuntimeError, the way PEP 479 turns a StopIteration leaving a generator."""
    name, message = str(reply.get("exc_type", "Exception")), str(reply.get("message", ""))
    cls = getattr(builtins, name, None)
    base = reply.get("base") is True  # the candidate says it was not an Exception
    if name in CONTROL_FLOW or base or (isinstance(cls, type) and issubclass(cls, BaseException)
                                        and not issubclass(cls, Exception)):
        chan.flags.add(flags.CONTROL_FLOW_EXCEPTION)
        return RuntimeError(f"the candidate raised {name}: {message}")
    if isinstance(cls, type) and issubclass(cls, Exception):
        try:
            return cls(message)
        except Exception:  # noqa: BLE001
            pass
    return RuntimeError(f"{name}: {message}")


_NO_KWARGS = codec.encode({})


def make_proxy(chan: Channel, name: str, in_place: bool = False):
    """The test's handle on the candidate's `name`: the candidate gets copies of the arguments
    (plain data, rebuilt in its own process) and the test keeps its own objects. Only where the
    task declares the function in-place are the candidate's changes to list, dict and set
    arguments copied back into them; otherwise none is asked for, and any the reply carries
    anyway (the candidate's process writes the reply) is ignored."""

    def proxy(*args: Any, **kwargs: Any) -> Any:
        try:
            enc_args = codec.encode(list(args))
            enc_kwargs = codec.encode(dict(kwargs)) if kwargs else _NO_KWARGS
        except codec.Unencodable as exc:
            raise TypeError(f"argument for {name} cannot be sent to the candidate: {exc}") from None
        reply = chan.call(name, enc_args, enc_kwargs, in_place)
        if reply.get("exc_type") == "MemoryError":
            raise Aborted("memory")
        if in_place:
            _write_back_reply(args, kwargs, reply)
        if reply.get("ok"):
            value = codec.decode(reply["value"])
            LAST_RETURN[:] = [value]
            return value
        raise _exception(chan, reply)

    proxy.__name__ = proxy.__qualname__ = name
    return proxy


def _write_back_reply(args: tuple, kwargs: dict, reply: dict) -> None:
    """An in-place task's argument changes, as the reply reports them, into the test's objects.
    A malformed report changes nothing (the test then sees its arguments as they were)."""
    try:
        if "args_after" in reply:
            after = codec.decode(reply["args_after"])
            if type(after) is list:
                _write_back(list(args), after)
        if kwargs and "kwargs_after" in reply:
            after = codec.decode(reply["kwargs_after"])
            if type(after) is dict:
                keys = [k for k in kwargs if k in after]
                _write_back([kwargs[k] for k in keys], [after[k] for k in keys])
    except Exception:  # noqa: BLE001 - undecodable: nothing is written
        pass


def _write_back(originals: list, updated: list) -> None:
    """Mirror in-place changes the candidate made to its arguments (declared in-place tasks only):
    each test object takes the new contents when both are the same container type."""
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


def _namespace(chan: Channel, c: Compiled, spec: dict) -> dict:
    """A fresh namespace for one job's tests: proxies for the candidate's names, stdlib
    modules imported here, then the task's helpers run here. Unknown names stay unbound."""
    ns: dict = {"__builtins__": builtins, "__name__": "__tests__"}
    in_place = spec.get("in_place") is True
    proxies = {name: make_proxy(chan, name, in_place) for name in sorted(c.names.candidate)}
    ns.update(proxies)
    for name in sorted(c.names.stdlib):
        try:
            ns[name] = importlib.import_module(name)
        except Exception:  # noqa: BLE001 - not importable here: the test that uses it fails
            pass
    _flag_shadows(chan, c, spec.get("program_names") or ())
    if c.helpers is not None:
        exec(c.helpers, ns)
        ns.update(proxies)  # a name the task declares the candidate's stays the candidate's
    return ns


def _flag_shadows(chan: Channel, c: Compiled, program_names: Any) -> None:
    """SHADOWED_NAME when the program defines a builtin, stdlib module or helper name the
    tests use. The candidate lists only names it binds to something other than the genuine
    builtin or module (`import math` is not a shadow); a helper counts only when the
    program's definition differs from the task's (an honest HumanEval program repeats its
    prompt)."""
    hit = c.names.guarded.intersection(n for n in program_names if type(n) is str)
    if not hit:
        return
    if hit - c.names.helpers:
        chan.flags.add(flags.SHADOWED_NAME)
        return
    theirs = chan.digests(sorted(hit))
    ours = _helper_digests(c)
    if any(theirs.get(n) is None or theirs.get(n) != ours.get(n) for n in hit):
        chan.flags.add(flags.SHADOWED_NAME)


def _helper_digests(c: Compiled) -> dict:
    ns: dict = {"__builtins__": builtins, "__name__": "__helpers__"}
    try:
        exec(c.helpers, ns)
    except Exception:  # noqa: BLE001 - the task's own failure shows in the tests
        return {}
    return {n: codec.code_digest(ns.get(n)) for n in c.names.helpers}


def plan_assert_list(chan: Channel, spec: dict) -> list[Unit]:
    c = compiled(spec)
    ns = _namespace(chan, c, spec)
    if c.setup is not None:
        exec(c.setup, ns)
    return [_explained(c, lambda code=code: exec(code, ns)) for code in c.units]


def plan_assert_check(chan: Channel, spec: dict) -> list[Unit]:
    c = compiled(spec)
    ns = _namespace(chan, c, spec)
    candidate = ns[spec["entry_point"]]
    exec(c.module, ns)
    check = ns.get("check")
    if not callable(check):
        raise ValueError("the test code defines no check(candidate) function")
    if not c.units:
        return [_explained(c, lambda: check(candidate))]
    return [_explained(c, functools.partial(ns[name], candidate)) for name in c.units]


def _explained(c: Compiled, unit: Unit) -> Unit:
    """A unit whose NameError for an unknown name, or TypeError for calling a stdlib module,
    says why the name is not the candidate's."""
    if not c.names.unknown and not c.names.stdlib:
        return unit

    def run() -> None:
        try:
            unit()
        except NameError as exc:
            if exc.name not in c.names.unknown:
                raise
            raise NameError(f"the tests use {exc.name!r}, which is not the candidate's (entry_point, fn_name, "
                            "candidate_names), a builtin, a stdlib module or a helper (pass the task's prompt or "
                            "helpers)") from None
        except TypeError as exc:
            if "'module' object is not callable" not in str(exc):
                raise
            raise TypeError(f"{exc}: the tests call a stdlib module's name ({', '.join(sorted(c.names.stdlib))}); "
                            "a function of the program's so named must be listed in candidate_names") from None

    return run


def plan_call(chan: Channel, spec: dict) -> list[Unit]:
    fn = make_proxy(chan, spec["fn_name"])  # a case never reads its arguments again: nothing to write back
    tol = spec.get("float_tolerance")
    default_unordered = bool(spec.get("unordered", False))
    units = []
    for case in spec["cases"]:
        unordered = case.get("unordered")
        unordered = default_unordered if unordered is None else bool(unordered)
        args, kwargs = codec.from_json(case.get("args", [])), codec.from_json(case.get("kwargs", {}))
        expected = codec.from_json(case.get("expected"))
        also = [codec.from_json(a) for a in case.get("also_expected") or ()]

        def run(args=args, kwargs=kwargs, expected=expected, also=also, unordered=unordered) -> None:
            got = fn(*args, **kwargs)
            if not any(codec.values_equal(got, want, tol, unordered) for want in [expected, *also]):
                raise AssertionError(f"expected {_short(expected)}, got {_short(got)}")

        units.append(run)
    return units


def _short(v: Any) -> str:
    try:
        text = repr(v)
    except ValueError:  # an int past Python's 4300-digit limit on decimal conversion
        return f"<{type(v).__name__} too large to show>"
    return text if len(text) <= 120 else text[:117] + "..."


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
            cpus.pin_cpu(cpu if type(cpu) is int else None)
        spec = job["spec"]
        try:
            n = len(labels(spec))
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
        # what the program binds, for telemetry only: names never route by what it defines
        spec = dict(spec, program_names=go.get("names", []))
        chan.cand, chan.index = cand, -1
        chan.flags = set()
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
    chan.send({"op": "done", "results": results, "flags": sorted(chan.flags)})
