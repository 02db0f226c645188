"""What one candidate costs, on its own: the real spawner forks N candidates on this machine
(no container, no supervisor, no verdict process), each loads a small program and answers K
calls, and is killed, as in a function job. Prints per candidate: page faults (deterministic:
the copy-on-write and first-touch pages a fresh candidate pays for), CPU (the spawner's reaped
children, clock ticks) and, where this process can make a cpuacct cgroup of its own (root,
cgroup v1), the cgroup's CPU per candidate in blocks of 25 (min and median: the minimum is the
figure that a shared machine's load disturbs least).

Usage (root: candidates drop to a uid of their own):
    PYTHONPATH=TREE python bench/candidate_cost.py --jobs 500
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import tempfile

PROGRAM = '''from typing import List


def f(numbers: List[int]) -> List[int]:
    """ sort them """
    return sorted(numbers)
'''
UID = 61000
BLOCK = 25


def _stat(pid: int) -> tuple[int, int, int]:
    """(children's CPU ticks, children's minor faults, own minor faults) of a live process."""
    with open(f"/proc/{pid}/stat") as fh:
        data = fh.read()
    f = data[data.rindex(")") + 2 :].split()
    return int(f[13]) + int(f[14]), int(f[8]), int(f[7])


def _cgroup() -> str | None:
    """A cpuacct cgroup holding this process (and what it forks), where one can be made."""
    root = "/sys/fs/cgroup/cpuacct"
    if os.geteuid() != 0 or not os.path.isdir(root):
        return None
    path = os.path.join(root, f"vr-candidate-cost-{os.getpid()}")
    try:
        os.mkdir(path)
        with open(os.path.join(path, "tasks"), "w") as fh:
            fh.write(str(os.getpid()))
    except OSError:
        return None
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=500)
    ap.add_argument("--calls", type=int, default=8, help="calls per candidate")
    a = ap.parse_args()
    from sandbox.runner import cleanup, codec, framing, spawner

    cg = _cgroup()
    base = tempfile.mkdtemp(prefix="vr-candidate-cost-")
    os.chmod(base, 0o755)
    scratch = os.path.join(base, "s0")
    pid, sock = spawner.fork_spawner(scratch)

    def note() -> tuple[bytes, list[int]]:
        data, fds, _flags, _addr = socket.recv_fds(sock, 4096, 8)
        return data, fds

    def one() -> None:
        cleanup.make_scratch(base, "s0", UID)
        sock.send(spawner.SPAWN)
        data, fds = note()
        while data[:1] != b"S":
            data, fds = note()
        cpid = int(data[1:])
        ctrl = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, 0, fileno=fds[0])
        framing.send_frame(ctrl, {"op": "load", "program": PROGRAM, "scratch": scratch, "uid": UID,
                                  "hide_prefix": "\0"})
        framing.recv_frame(ctrl)
        framing.recv_frame(ctrl)
        for i in range(a.calls):
            framing.send_frame(ctrl, {"op": "call", "id": i, "name": "f", "args": codec.encode([[3, 1, 2, i]]),
                                      "kwargs": codec.encode({})})
            reply = framing.recv_frame(ctrl)
            if not (isinstance(reply, dict) and reply.get("ok")):
                raise SystemExit(f"candidate answered {reply!r}")
        cleanup.kill_group(cpid)
        ctrl.close()
        for fd in fds[1:]:
            os.close(fd)
        while not (data[:1] == b"X" and int(data[1:].split()[0]) == cpid):
            data, _ = note()

    def usage() -> int:
        if cg is None:
            return 0
        with open(os.path.join(cg, "cpuacct.usage")) as fh:
            return int(fh.read())

    try:
        for _ in range(20):
            one()
        s0 = _stat(pid)
        blocks = []
        for _ in range(max(1, a.jobs // BLOCK)):
            u = usage()
            for _ in range(BLOCK):
                one()
            blocks.append((usage() - u) / BLOCK / 1e6)
        s1 = _stat(pid)
        n = BLOCK * len(blocks)
        tick = os.sysconf("SC_CLK_TCK")
        line = (f"{n} candidates: {(s1[1] - s0[1]) / n:.1f} page faults each, CPU {(s1[0] - s0[0]) / tick / n * 1e3:.3f} ms "
                f"each (ticks); spawner {(s1[2] - s0[2]) / n:.1f} faults per fork")
        if cg is not None:
            blocks.sort()
            line += f"; cgroup CPU per candidate (all processes) min {blocks[0]:.3f} median {blocks[len(blocks) // 2]:.3f} ms"
        print(line)
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        if cg is not None:
            with open("/sys/fs/cgroup/cpuacct/tasks", "w") as fh:
                fh.write(str(os.getpid()))
            os.rmdir(cg)
        cleanup.remove_tree(scratch)
        os.rmdir(scratch) if os.path.isdir(scratch) else None
        os.rmdir(base)


if __name__ == "__main__":
    sys.exit(main())
