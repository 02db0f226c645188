"""The spawner on its own: it forks candidates and reports how each ended, with pidfds where
the kernel has them and through SIGCHLD where it does not."""

from __future__ import annotations

import os
import select
import signal
import socket

import pytest

from sandbox.runner import spawner


def _next_note(sock: socket.socket) -> tuple[tuple[str, int, int, int], list[int]]:
    assert select.select([sock], [], [], 10)[0], "spawner did not answer"
    data, fds, _flags, _addr = socket.recv_fds(sock, 4096, 8)
    return spawner.parse_note(data), fds


@pytest.fixture(params=["pidfd", "sigchld"])
def spawner_sock(request, monkeypatch):
    if request.param == "sigchld":
        monkeypatch.setattr(spawner, "_pidfd_open", lambda pid: -1)
    elif spawner._pidfd_open(os.getpid()) < 0:
        pytest.skip("no pidfd_open here")
    pid, sock = spawner.fork_spawner()
    yield sock
    sock.close()
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)


def test_reports_each_candidate_exit_code_and_signal(spawner_sock):
    ended = {}
    for how in ("hang up", "kill"):
        spawner_sock.send(spawner.SPAWN)
        (kind, pid, _, _), fds = _next_note(spawner_sock)
        assert kind == "spawned" and len(fds) == 4
        if how == "kill":
            os.kill(pid, signal.SIGKILL)
        for fd in fds:  # the candidate's control channel closes: it exits cleanly
            os.close(fd)
        while True:
            (kind, got, code, sig), extra = _next_note(spawner_sock)
            assert not extra
            if kind == "exited" and got == pid:
                ended[how] = (code, sig)
                break
    assert ended["hang up"] == (0, 0)
    assert ended["kill"] == (0, signal.SIGKILL)


def test_notes_parse_strictly():
    assert spawner.parse_note(b"S42") == ("spawned", 42, 0, 0)
    assert spawner.parse_note(b"X42 3 0") == ("exited", 42, 3, 0)
    for bad in (b"", b"Q1", b"Sx", b"X1 2"):
        with pytest.raises(ValueError):
            spawner.parse_note(bad)


def _limits_of(pid: int) -> dict[str, str]:
    out = {}
    with open(f"/proc/{pid}/limits") as f:
        for line in f.readlines()[1:]:
            name = line[:26].strip()
            out[name] = line[26:47].strip()
    return out


def test_supervisor_side_limits_land_on_the_child():
    """The supervisor sets a fresh candidate's limits with prlimit before it sends the
    program; check they are the child's own, soft and hard."""
    from sandbox.runner import limits

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(w)
        os.read(r, 1)
        os._exit(0)
    os.close(r)
    try:
        limits.Rlimits(memory_mb=300, nproc=7, fsize_mb=2, nofile=33, cpu_s=9).apply(pid=pid)
        got = _limits_of(pid)
    finally:
        os.close(w)
        os.waitpid(pid, 0)
    assert got["Max open files"] == "33"
    assert got["Max processes"] == "7"
    assert got["Max cpu time"] == "9"
    assert got["Max file size"] == str(2 << 20)
    assert got["Max address space"] == str(300 << 20)
    assert got["Max core file size"] == "0"


def test_candidate_applies_limits_it_is_sent(tmp_path):
    """Where prlimit failed the limits travel in the first frame and the candidate sets them."""
    from sandbox.runner import candidate, framing

    os.chmod(tmp_path, 0o777)
    ours, theirs = socket.socketpair()
    pipes = [os.pipe() for _ in range(3)]
    pid = os.fork()
    if pid == 0:
        ours.close()
        candidate.main(theirs, pipes[0][0], pipes[1][1], pipes[2][1])
    theirs.close()
    try:
        framing.send_frame(ours, {
            "op": "load", "scratch": str(tmp_path), "uid": 20000,
            "program": "import resource\ndef lim():\n    return resource.getrlimit(resource.RLIMIT_NOFILE)\n",
            "limits": {"memory_mb": 512, "nproc": 8, "fsize_mb": 1, "nofile": 21, "cpu_s": 5},
        })
        assert framing.recv_frame(ours)["syntax_ok"] is True
        assert framing.recv_frame(ours)["runs"] is True
        framing.send_frame(ours, {"op": "call", "id": 1, "name": "lim", "args": [], "kwargs": {"$d": []}})
        reply = framing.recv_frame(ours)
    finally:
        ours.close()
        os.waitpid(pid, 0)
    assert reply["ok"] is True and reply["value"] == {"$t": [21, 21]}, reply


def test_remove_tree_empties_locked_directories_as_their_owner():
    """Without root's override, a tree with mode-000 directories is still removed by the
    uid that owns it (runners that cannot switch uids clean up as the jobs' own uid), links
    in it to directories outside included (they are removed, never followed)."""
    import pathlib
    import shutil
    import tempfile

    from sandbox.runner import cleanup

    base = pathlib.Path(tempfile.mkdtemp(dir="/tmp"))  # reachable by the job uid
    os.chmod(base, 0o777)
    target = base / "scratch"
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            if os.geteuid() == 0:
                os.setresgid(20000, 20000, 20000)
                os.setresuid(20000, 20000, 20000)
            os.makedirs(target / "locked" / "deeper")
            (target / "locked" / "deeper" / "f").write_text("x")
            os.symlink("/", target / "to-root")  # a link to a directory is neither followed nor chmodded
            os.symlink(base, target / "locked" / "deeper" / "to-base")
            os.chmod(target / "locked" / "deeper", 0)
            os.chmod(target / "locked", 0)
            cleanup.remove_tree(str(target))
            code = 0 if not os.path.lexists(target) and os.path.isdir(base) else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    shutil.rmtree(base, ignore_errors=True)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status


def test_warm_up_runs_the_call_path_and_leaves_nothing_behind(monkeypatch):
    """The spawner's warm-up (candidate.warm_up) answers real frames through `_call`, and
    what it ran leaves no module, limit, name or object behind for a candidate to find."""
    import gc
    import sys

    from sandbox.runner import candidate

    replies = []
    real_call = candidate._call

    def counting(ns, msg):
        reply = real_call(ns, msg)
        replies.append(reply)
        return reply

    monkeypatch.setattr(candidate, "_call", counting)
    modules, limit, argv = set(sys.modules), sys.getrecursionlimit(), list(sys.argv)
    candidate.warm_up()
    assert len(replies) == candidate.WARM_ROUNDS
    assert {"ok": True, "value": [3, 4, 5]}.items() <= replies[0].items()  # warm_sort([3, 1, 2], 2)
    assert any(r.get("exc_type") == "ValueError" for r in replies) and any(r.get("exc_type") == "NameError"
                                                                             for r in replies)
    assert any(r.get("value") == [0, 2] for r in replies)  # Solution().warm_method
    replies.clear()
    gc.collect()
    assert set(sys.modules) == modules and sys.getrecursionlimit() == limit and sys.argv == argv
    assert not [o for o in gc.get_objects() if type(o) is dict and o.get("__name__") == "warm_up"]
