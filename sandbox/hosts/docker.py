"""Runners in long-lived Docker containers made with the docker SDK.

Hardening (each flag and what it buys is listed in README): no network, read-only root,
a small tmpfs for scratch, every capability dropped except the few the runner needs to
drop each job to a uid of its own and clean up after it, no-new-privileges, and pids,
memory and CPU limits. The runner's socket directory is the only bind mount besides the
(read-only) runner code.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
import uuid

from .base import PACKAGE_DIR, RUNNER_SOCKET, Host, RunnerHandle, RunnerStartError, wait_for_socket

RUNNER_CAPS = ["SETUID", "SETGID", "KILL", "CHOWN", "DAC_OVERRIDE", "FOWNER"]
DEFAULT_IMAGE = "verireward-sandbox:latest"
LABEL = "verireward.runner"


class DockerHost(Host):
    kind = "docker"

    def __init__(
        self,
        *,
        slots: int = 4,
        image: str | None = None,
        memory_mb: int = 2048,
        cpus: float = 1.0,
        pids: int = 512,
        tmp_mb: int = 256,
        shm_mb: int = 64,
        mount_source: bool = True,
        start_timeout: float = 60.0,
    ) -> None:
        import docker

        self.client = docker.from_env(timeout=30)
        self.image = image or self.default_image()
        self.slots = slots
        self.memory_mb = memory_mb
        self.cpus = cpus
        self.pids = pids
        self.tmp_mb = tmp_mb
        self.shm_mb = shm_mb
        self.mount_source = mount_source
        self.start_timeout = start_timeout
        self.pool_id = uuid.uuid4().hex[:12]
        self.root = tempfile.mkdtemp(prefix="verireward-docker-")
        os.chmod(self.root, 0o700)
        self.containers: dict[str, object] = {}
        self._remove_orphans()

    @staticmethod
    def default_image() -> str:
        return os.environ.get("VERIREWARD_SANDBOX_IMAGE", DEFAULT_IMAGE)

    @staticmethod
    def image_present(image: str) -> bool:
        try:
            import docker

            client = docker.from_env(timeout=5)
            client.images.get(image)
            client.close()
            return True
        except Exception:  # noqa: BLE001
            return False

    def _remove_orphans(self) -> None:
        """Containers left by a server process that no longer exists on this machine."""
        try:
            for c in self.client.containers.list(all=True, filters={"label": LABEL}):
                owner = c.labels.get("verireward.owner_pid", "")
                if owner.isdigit() and not os.path.exists(f"/proc/{owner}"):
                    with contextlib.suppress(Exception):
                        c.remove(force=True)
        except Exception:  # noqa: BLE001 - best effort
            pass

    def container_options(self, sock_dir: str, index: int) -> dict:
        volumes = {sock_dir: {"bind": "/run/sandbox", "mode": "rw"}}
        if self.mount_source:
            volumes[str(PACKAGE_DIR)] = {"bind": "/opt/verireward/sandbox", "mode": "ro"}
        return {
            "entrypoint": [
                "python3", "-I", "-S", "-c",
                "import sys; sys.path.insert(0, '/opt/verireward'); from sandbox.runner.server import main; main()",
            ],
            "command": [
                "--socket", f"/run/sandbox/{RUNNER_SOCKET}", "--slots", str(self.slots),
                "--scratch", "/scratch/sbx", "--hide-prefix", "/opt/verireward",
            ],
            "detach": True,
            "name": f"verireward-runner-{self.pool_id}-{index}-{uuid.uuid4().hex[:4]}",
            "hostname": "sandbox",
            "user": "0:0",
            "network_mode": "none",
            "read_only": True,
            # Docker forces a /tmp tmpfs to mode 1777, so scratch lives on its own tmpfs and /tmp
            # stays part of the read-only root; a closed /dev/mqueue. /dev/shm (POSIX semaphores
            # and shared memory: multiprocessing) is a tmpfs of its own, not the IPC namespace's
            # (ipc none), mode 1733: a job finds only the names it made; cleaned after each job.
            "tmpfs": {
                "/scratch": f"rw,nosuid,nodev,size={self.tmp_mb}m,mode=755",
                "/dev/shm": f"rw,nosuid,nodev,noexec,size={self.shm_mb}m,mode=1733",
                "/dev/mqueue": "rw,nosuid,nodev,noexec,size=4k,mode=755",
            },
            "ipc_mode": "none",
            "volumes": volumes,
            "cap_drop": ["ALL"],
            "cap_add": RUNNER_CAPS,
            "security_opt": ["no-new-privileges"],
            "pids_limit": self.pids,
            "mem_limit": f"{self.memory_mb}m",
            "memswap_limit": f"{self.memory_mb}m",
            "nano_cpus": int(self.cpus * 1e9),
            "environment": {"PYTHONDONTWRITEBYTECODE": "1", "LANG": "C.UTF-8"},
            "labels": {LABEL: "1", "verireward.pool": self.pool_id, "verireward.owner_pid": str(os.getpid())},
        }

    async def start_runner(self, index: int) -> RunnerHandle:
        sock_dir = os.path.join(self.root, f"runner-{index}-{uuid.uuid4().hex[:6]}")
        os.makedirs(sock_dir, mode=0o700)
        try:
            container = await asyncio.to_thread(
                self.client.containers.run, self.image, **self.container_options(sock_dir, index)
            )
        except Exception as exc:  # noqa: BLE001 - docker raises many kinds
            shutil.rmtree(sock_dir, ignore_errors=True)
            raise RunnerStartError(f"docker could not start a runner from {self.image}: {exc}") from exc
        handle = RunnerHandle(index=index, socket_path=os.path.join(sock_dir, RUNNER_SOCKET),
                              ident=container.name, extra={"dir": sock_dir, "id": container.id})
        self.containers[handle.ident] = container
        try:
            await wait_for_socket(handle.socket_path, self.start_timeout, alive=lambda: self.is_alive(handle))
        except RunnerStartError:
            logs = ""
            with contextlib.suppress(Exception):
                logs = (await asyncio.to_thread(container.logs, tail=20)).decode(errors="replace")
            await self.stop_runner(handle)
            raise RunnerStartError(f"runner container {handle.ident} did not become ready: {logs}") from None
        return handle

    async def is_alive(self, handle: RunnerHandle) -> bool:
        container = self.containers.get(handle.ident)
        if container is None:
            return False
        try:
            await asyncio.to_thread(container.reload)
        except Exception:  # noqa: BLE001 - gone, or the engine is down
            return False
        return container.status == "running"

    async def stop_runner(self, handle: RunnerHandle) -> None:
        container = self.containers.pop(handle.ident, None)
        if container is not None:
            with contextlib.suppress(Exception):
                await asyncio.to_thread(container.remove, force=True)
        shutil.rmtree(handle.extra.get("dir", ""), ignore_errors=True)

    async def close(self) -> None:
        for ident in list(self.containers):
            await self.stop_runner(RunnerHandle(0, "", ident))
        shutil.rmtree(self.root, ignore_errors=True)
        with contextlib.suppress(Exception):
            self.client.close()
