"""Runners in long-lived Docker containers made with the docker SDK.

Hardening (each flag and what it buys is listed in README): no network, read-only root,
a small tmpfs for scratch, every capability dropped except the few the runner needs to
drop each job to a uid of its own and clean up after it, no-new-privileges, and pids,
memory and CPU limits. The runner's socket directory is the only bind mount besides the
(read-only) runner code. Each slot's scratch is a tmpfs of its own with byte and inode
quotas, and each runner's uids are a block leased machine-wide (`sandbox.runner.uidlease`).

Runners belong to a pool by a random token (label `verireward.pool`), never by a PID (a
PID means nothing across PID namespaces: a server in a container would take every other
server's runners for orphans). A pool holds an flock on `pool-<token>.lock` in the uid
lease directory for as long as it lives; another pool removes a runner only when it is not
running, or when it sees the same lease directory (same device and inode) and that lock is
free (its owner is gone). Where it cannot tell, it leaves the runner alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import shutil
import tempfile
import uuid

from sandbox.runner import slotns, uidlease
from sandbox.runtimes import table as runtimes

from .base import PACKAGE_DIR, RUNNER_SOCKET, Host, RunnerHandle, RunnerStartError, wait_for_socket

log = logging.getLogger(__name__)

# SETPCAP: the spawner empties the bounding set before it forks any candidate
RUNNER_CAPS = ["SETUID", "SETGID", "KILL", "CHOWN", "DAC_OVERRIDE", "FOWNER", "SETPCAP"]
# only while the runner starts: each slot's keeper mounts a /dev/shm of its own in a mount namespace
# of its own, then every runner process drops it for good (sandbox.runner.slotns)
STARTUP_CAPS = ["SYS_ADMIN"]
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
        scratch_mb: int = 256,
        scratch_inodes: int = 16384,
        shm_mb: int = 64,
        shm_inodes: int = 4096,
        slot_shm: bool | None = None,
        runtime: str = "python",
        mount_source: bool = True,
        start_timeout: float = 60.0,
        session_slots: int = 0,
    ) -> None:
        import docker

        self.client = docker.from_env(timeout=30)
        self.record = runtimes.get(runtime)
        self.runtime = self.record.name
        self.image = image or (self.record.image() if runtime != runtimes.DEFAULT else self.default_image())
        self.slots = slots
        self.session_slots = session_slots  # after the job slots: uids, scratch and /dev/shm of their own
        self.memory_mb = memory_mb
        self.cpus = cpus
        self.pids = pids
        self.tmp_mb = tmp_mb
        self.scratch_mb = scratch_mb
        self.scratch_inodes = scratch_inodes
        self.shm_mb = shm_mb
        if slot_shm is None:
            slot_shm = not self._apparmor()
        self.slot_shm = slotns.ShmSpec(shm_mb, shm_inodes) if slot_shm else None
        self.mount_source = mount_source
        self.start_timeout = start_timeout
        self.pool_id = uuid.uuid4().hex
        self.root = tempfile.mkdtemp(prefix="verireward-docker-")
        os.chmod(self.root, 0o700)
        self.containers: dict[str, object] = {}
        self.leases: dict[str, uidlease.UidLease] = {}
        self.lease_dir = uidlease.lease_dir()
        self.lease_dir_id = _dir_id(self.lease_dir)
        self.owner_lock = os.path.join(self.lease_dir, f"pool-{self.pool_id}.lock")
        self._owner_fd = os.open(self.owner_lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        fcntl.flock(self._owner_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held while this pool lives
        self._remove_orphans()
        uidlease.sweep()

    def _apparmor(self) -> bool:
        """Whether the engine confines containers with AppArmor: its docker-default profile
        denies mount, so a slot's keeper could not mount its own /dev/shm and the runner would
        refuse to start. There the runners keep one /dev/shm each (docs/SANDBOX.md, finding 12)
        unless `slot_shm=True` is asked for (with an unconfined profile of the operator's)."""
        try:
            options = self.client.info().get("SecurityOptions") or []
        except Exception:  # noqa: BLE001
            return False
        if any("name=apparmor" in str(o) for o in options):
            log.warning("docker engine uses AppArmor (docker-default denies mount): each runner keeps one "
                        "/dev/shm for all its slots; pass slot_shm=True with an unconfined profile for one per slot")
            return True
        return False

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
        """Runners of other pools whose owner is gone (see the module docstring)."""
        try:
            found = self.client.containers.list(all=True, filters={"label": LABEL})
        except Exception:  # noqa: BLE001 - best effort
            return
        for c in found:
            if self.orphaned(c.labels, c.status):
                with contextlib.suppress(Exception):
                    c.remove(force=True)

    def orphaned(self, labels: dict, status: str) -> bool:
        """Whether a runner container (by its labels and status) belongs to a dead pool."""
        if labels.get("verireward.pool") == self.pool_id:
            return False
        if status in ("exited", "dead"):
            return True  # stopped: nobody's runner any more (a live pool never keeps one)
        if labels.get("verireward.lease_dir") != self.lease_dir_id:
            return False  # its owner's lock is somewhere we cannot see: not ours to judge
        lock = labels.get("verireward.owner_lock", "")
        if os.path.dirname(lock) != self.lease_dir:
            return False
        return not uidlease.locked(lock)

    def taken_uid_bases(self) -> set[int]:
        """uid blocks of live runner containers (of any pool), to skip when leasing."""
        try:
            found = self.client.containers.list(filters={"label": LABEL})
        except Exception:  # noqa: BLE001
            return set()
        return {int(b) for c in found if (b := c.labels.get("verireward.uid_base", "")).isdigit()}

    def container_options(self, sock_dir: str, index: int, uid_base: int = 20000) -> dict:
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
                "--scratch", "/scratch/sbx", "--hide-prefix", "/opt/verireward", "--uid-base", str(uid_base),
                *(["--slot-shm", self.slot_shm.arg()] if self.slot_shm else []),
                *(["--session-slots", str(self.session_slots)] if self.session_slots else []),
            ],
            "detach": True,
            "name": f"verireward-runner-{self.pool_id}-{index}-{uuid.uuid4().hex[:4]}",
            "hostname": "sandbox",
            "user": "0:0",
            "network_mode": "none",
            "read_only": True,
            # Docker forces a /tmp tmpfs to mode 1777, so scratch lives on its own tmpfs and /tmp
            # stays part of the read-only root; a closed /dev/mqueue. /dev/shm (POSIX semaphores and
            # shared memory: multiprocessing) is a tmpfs of its own, not the IPC namespace's (ipc
            # none), mode 1733: a job finds only the names it made; cleaned after each job. With
            # slot_shm each slot's keeper mounts one of its own over it (the runner's own is unused).
            # Each slot's scratch is a tmpfs of its own: one job filling it (bytes or inodes)
            # gives no other ENOSPC, and its clean-up is bounded by its inode count. exec: a build
            # the compile cache does not take (too large, no room) runs from there, as under bwrap.
            "tmpfs": {
                "/scratch": f"rw,nosuid,nodev,size={self.tmp_mb}m,nr_inodes=4096,mode=755",
                **{
                    f"/scratch/sbx/s{k}": f"rw,exec,nosuid,nodev,size={self.scratch_mb}m,"
                                          f"nr_inodes={self.scratch_inodes},mode=700"
                    for k in range(self.slots + self.session_slots)
                },
                # the runner's compile cache (sandbox/runner/compile_cache.py): root-owned, and the one
                # place built programs are run from (Docker's tmpfs is noexec unless told)
                "/scratch/sbx-cache": "rw,exec,nosuid,nodev,size=128m,mode=711",
                "/dev/mqueue": "rw,nosuid,nodev,noexec,size=4k,mode=755",
                "/dev/shm": f"rw,nosuid,nodev,noexec,size={self.shm_mb}m,mode={slotns.SHM_MODE:o}",
            },
            "ipc_mode": "none",
            "volumes": volumes,
            "cap_drop": ["ALL"],
            "cap_add": RUNNER_CAPS + (STARTUP_CAPS if self.slot_shm else []),
            "security_opt": ["no-new-privileges"],
            "pids_limit": self.pids,
            "mem_limit": f"{self.memory_mb}m",
            "memswap_limit": f"{self.memory_mb}m",
            "nano_cpus": int(self.cpus * 1e9),
            "environment": {"PYTHONDONTWRITEBYTECODE": "1", "LANG": "C.UTF-8", **self.record.runner_env()},
            "labels": {
                LABEL: "1", "verireward.pool": self.pool_id, "verireward.owner_lock": self.owner_lock,
                "verireward.lease_dir": self.lease_dir_id, "verireward.uid_base": str(uid_base),
            },
        }

    async def start_runner(self, index: int) -> RunnerHandle:
        sock_dir = os.path.join(self.root, f"runner-{index}-{uuid.uuid4().hex[:6]}")
        os.makedirs(sock_dir, mode=0o700)
        try:
            lease = uidlease.lease(self.slots + self.session_slots, taken=await asyncio.to_thread(self.taken_uid_bases))
        except OSError as exc:
            shutil.rmtree(sock_dir, ignore_errors=True)
            raise RunnerStartError(f"no uid block for a runner: {exc}") from exc
        try:
            container = await asyncio.to_thread(
                self.client.containers.run, self.image, **self.container_options(sock_dir, index, lease.base)
            )
        except Exception as exc:  # noqa: BLE001 - docker raises many kinds
            shutil.rmtree(sock_dir, ignore_errors=True)
            lease.release()
            raise RunnerStartError(f"docker could not start a runner from {self.image}: {exc}") from exc
        handle = RunnerHandle(index=index, socket_path=os.path.join(sock_dir, RUNNER_SOCKET),
                              ident=container.name, extra={"dir": sock_dir, "id": container.id, "uid_base": lease.base})
        self.containers[handle.ident] = container
        self.leases[handle.ident] = lease
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
        lease = self.leases.pop(handle.ident, None)
        if lease is not None:
            lease.release()  # the container and its processes are gone
        shutil.rmtree(handle.extra.get("dir", ""), ignore_errors=True)

    async def close(self) -> None:
        for ident in list(self.containers):
            await self.stop_runner(RunnerHandle(0, "", ident))
        shutil.rmtree(self.root, ignore_errors=True)
        if self._owner_fd >= 0:
            with contextlib.suppress(OSError):
                os.unlink(self.owner_lock)
            os.close(self._owner_fd)
            self._owner_fd = -1
        with contextlib.suppress(Exception):
            self.client.close()


def _dir_id(path: str) -> str:
    """Which directory this is, the same string wherever it is seen (bind mounts included)."""
    st = os.stat(path)
    return f"{st.st_dev}:{st.st_ino}"


