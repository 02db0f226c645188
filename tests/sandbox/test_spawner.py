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
