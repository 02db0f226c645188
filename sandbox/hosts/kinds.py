"""Which host kinds exist, which one `auto` means on this machine, what each can run now, and
`make_host`: the one place a host is chosen and made (the pool only sizes itself around it)."""

from __future__ import annotations

import logging
import os
from typing import Any, Literal

from sandbox.runtimes import table as runtimes

from .base import Host

log = logging.getLogger("sandbox.hosts")

HostKind = Literal["auto", "docker", "bwrap", "socketdir"]  # the kinds there are ("auto": see resolve_kind)


def docker_available(timeout: float = 3.0) -> bool:
    """Whether a docker engine answers here."""
    try:
        import docker

        client = docker.from_env(timeout=timeout)
        client.ping()
        client.close()
        return True
    except Exception:  # noqa: BLE001
        return False


def resolve_kind(kind: HostKind | str, image: str | None = None) -> str:
    """The host kind `auto` means here: docker when an engine answers and the image is
    present, else bwrap (any other kind is itself)."""
    if kind != "auto":
        return kind
    from .docker import DockerHost

    image = image or DockerHost.default_image()
    if docker_available() and DockerHost.image_present(image):
        log.info("sandbox host: docker (engine answered, image %s present)", image)
        return "docker"
    log.info("sandbox host: bwrap (no docker engine or no image %s)", image)
    return "bwrap"


def make_host(kind: str, *, per_runner: int, job_memory_mb: int, **options: Any) -> Host:
    """The host of one pool of `kind` (resolved: not `auto`) whose runners take `per_runner`
    jobs each (a few more slots: health probes and the next job's connection)."""
    if kind == "docker":
        from .docker import DockerHost

        # one core per concurrent job, plus one for the supervisors' cleanup and the next
        # candidate's fork that overlap jobs (a quota at exactly the job count throttles them)
        options.setdefault("cpus", float(min(per_runner + 1, os.cpu_count() or 2)))
        # the container's memory is shared by its jobs: the default 2 GiB, or job_memory_mb x 2
        # per job where the runner takes more jobs (default sizing gives it more than two)
        # each session slot's idle interpreter holds some too (a session's own cap is its rlimits)
        options.setdefault("memory_mb", max(2048, 2 * job_memory_mb * per_runner) + 128 * options.get("session_slots", 0))
        return DockerHost(slots=per_runner + 3, **options)
    if kind == "bwrap":
        from .bwrap import BwrapHost

        return BwrapHost(slots=per_runner + 3, **options)
    if kind == "socketdir":
        from .socketdir import SocketDirHost

        return SocketDirHost(**options)
    raise ValueError(f"unknown sandbox kind {kind!r}")


def docker_ready(name: str) -> bool:
    """Whether runtime `name`'s docker image is present here."""
    from .docker import DockerHost

    return DockerHost.image_present(runtimes.get(name).image())


def unavailable_reason(name: str, kind: str, image: str | None = None) -> str | None:
    """Why this host kind cannot run runtime `name` now (None: it can). `image` overrides the
    runtime's docker image (the lean runtime's `image` host option)."""
    rt = runtimes.get(name)
    if kind == "docker":
        from .docker import DockerHost

        image = image or rt.image()
        if not DockerHost.image_present(image):
            return f"docker image {image} is missing: DOCKER=1 bash sandbox/build_runtime.sh {name}" if rt.requirements \
                else f"docker image {image} is missing: bash sandbox/build_images.sh"
    elif kind == "bwrap":
        if not runtimes.bwrap_ready(name):
            return f"not built on this host: bash sandbox/build_runtime.sh {name}"
    elif name != runtimes.DEFAULT:  # socketdir: the runners someone else started decide what they run
        return f"a {kind} host runs the runners someone else started: {runtimes.DEFAULT!r} only"
    return None


def available_runtimes(kind: str) -> dict[str, bool]:
    """Each runtime and whether this host kind can run it now (built and present)."""
    return {name: unavailable_reason(name, kind) is None for name in runtimes.RUNTIMES}
