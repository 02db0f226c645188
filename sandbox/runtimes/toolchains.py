"""Languages beyond Python where a runner is one view (bwrap): what the `languages` host option
means to `RuntimePools`, which toolchains this host has, and the options of the pool whose
runners see them.

A bwrap runner is one mount namespace: every job it runs sees the same files. With the
toolchains' packages in view a Python job would see ~20k files of /usr instead of the
interpreter's 43, and each runner start costs ~0.6 s more (docs/LANGUAGES.md). So by default
("auto") the Python pools keep the interpreter-only view and the jobs in other languages go to a
pool of their own whose runners see the toolchains, started on the first such job.
"""

from __future__ import annotations

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


def routes(languages: Mode, kind: str) -> bool:
    """Whether jobs are sent to a toolchain pool by their language: "auto" on bwrap (a docker
    runner's view is its image: the image decides what it runs)."""
    return languages == "auto" and kind == "bwrap"


def found() -> list[str]:
    """The languages other than Python whose tools this host has: what a toolchain runner's
    view will hold (it binds the packages of the tools found), checked without starting one
    (a `shutil.which` per tool, no process run; the packages scan waits for the pool's start)."""
    return sorted(k for k, ok in runner_languages.available().items() if ok and k != runner_languages.PYTHON)


def host_options(kind: str, languages: Mode, name: str) -> dict[str, Any]:
    """The `languages` option for the host of pool `name`: on bwrap the toolchain pool sees the
    toolchains, the others as `languages` says ("auto": not); other hosts take no such option."""
    if kind != "bwrap":
        return {}
    return {"languages": name == POOL or languages is True}
