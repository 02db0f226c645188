"""Languages beyond Python: what the `languages` host option means to the router (`sandbox.router`), which
toolchains this host has, and the options of the pool whose runners see them.

A runner is one view: every job it runs sees the same files (a bwrap runner is one mount
namespace, a docker runner one image). With the toolchains' packages in view a Python job on
bwrap would see ~20k files of /usr instead of the interpreter's 43, and each runner start costs
~0.6 s more (docs/LANGUAGES.md); on docker the toolchain image is 1.8 GB beside the lean one's
0.17. So by default ("auto") the Python pools keep the interpreter-only view and the jobs in
other languages go to a pool of their own whose runners see the toolchains (bwrap: the host's
packages; docker: the toolchain image), started on the first such job.
"""

from __future__ import annotations

import os
from typing import Any, Literal

from sandbox.runner import languages as runner_languages

POOL = "toolchains"  # RuntimePools' key of the pool whose runners see the toolchains
Mode = Literal["auto"] | bool
INSTALL = ("apt-get install g++ openjdk-17-jdk-headless golang-go rustc nodejs npm; "
           "bash sandbox/fetch_typescript.sh (docs/LANGUAGES.md)")


def mode(value: Any) -> Mode:
    """The `languages` option: "auto" (default; bwrap: a toolchain pool beside the Python-only
    one), True (every runner sees the toolchains: one view for all jobs, as before) or False
    (Python only: no toolchains in any view, no toolchain pool)."""
    if value is None or value == "auto":
        return "auto"
    if isinstance(value, bool):
        return value
    raise ValueError(f"languages must be true, false or \"auto\", not {value!r}")


def image() -> str:
    """The docker image with the toolchains (`TOOLCHAINS=1 bash sandbox/build_images.sh`)."""
    return os.environ.get("VERIREWARD_TOOLCHAIN_IMAGE", "verireward-sandbox:toolchains")


def routes(languages: Mode, kind: str, options: dict[str, Any]) -> bool:
    """Whether jobs are sent to a toolchain pool by their language: "auto" on bwrap, and on
    docker unless the operator named the image (then that image decides what runs)."""
    return languages == "auto" and (kind == "bwrap" or (kind == "docker" and not options.get("image")))


def found(kind: str) -> tuple[list[str], str | None]:
    """The languages other than Python a toolchain pool here would run, checked without
    starting it, and why there are none. bwrap: whose tools this host has (a `shutil.which`
    per tool, no process; the runner's view binds the packages of the tools found); docker:
    every language of the table where the toolchain image is present (its build checks each
    toolchain, TypeScript's compiler included: sandbox/Dockerfile.toolchains)."""
    if kind == "docker":
        from sandbox.hosts.docker import DockerHost  # noqa: PLC0415 - the docker client is imported on use

        if not DockerHost.image_present(image()):
            return [], f"docker image {image()} is missing: TOOLCHAINS=1 bash sandbox/build_images.sh"
        return sorted(k for k in runner_languages.available() if k != runner_languages.PYTHON), None
    names = sorted(k for k, ok in runner_languages.available().items() if ok and k != runner_languages.PYTHON)
    return names, None if names else f"no toolchain found on this host: {INSTALL}"


def host_options(kind: str, languages: Mode, name: str, options: dict[str, Any]) -> dict[str, Any]:
    """What the host of pool `name` is given beside `options`: on bwrap `languages` (the
    toolchain pool sees the toolchains, the others as `languages` says: "auto", not); on docker
    the toolchain image for the toolchain pool, and with languages true for every pool whose
    image the operator did not name."""
    if kind == "bwrap":
        return {"languages": name == POOL or languages is True}
    if kind == "docker" and (name == POOL or (languages is True and not options.get("image"))):
        return {"image": image()}
    return {}
