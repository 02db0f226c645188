"""TypeScript's compiler for a host: where the npm package is, and V8's code cache of it.

The package (sandbox/fetch_typescript.sh) sits at table.TYPESCRIPT_HOME; tsc.js loads it with
V8's code cache when one made by the same node with the same flags is beside it (0.30 -> 0.17 s
CPU per compile), and V8 refuses one that does not match (slower, never wrong). The cache is
made once per node build outside any job: at image build (sandbox/Dockerfile.toolchains) or by
the bwrap host in the host's copy, which it then binds read-only.
"""

from __future__ import annotations

import os
import subprocess

from .spec import missing_tool, resolve
from .table import TSC, TYPESCRIPT, TYPESCRIPT_HOME


def make_cache_argv() -> list[str]:
    """The compile command's node and flags (V8 checks them), running tsc.js --make-cache."""
    node_and_flags = list(TYPESCRIPT.compile[: TYPESCRIPT.compile.index(TSC)])
    node_and_flags[0] = resolve(node_and_flags[0]) or node_and_flags[0]
    return [*node_and_flags, TSC, TYPESCRIPT_HOME, "--make-cache"]


def host_dir() -> str | None:
    """The host's TypeScript directory with a code cache for this node (made when missing or stale),
    or None where node or the package is missing. A failed cache costs speed only."""
    if missing_tool(TYPESCRIPT) is not None:
        return None
    try:
        subprocess.run(make_cache_argv(), check=True, capture_output=True, timeout=120)
    except (OSError, subprocess.SubprocessError):
        pass
    return TYPESCRIPT_HOME if os.path.isdir(TYPESCRIPT_HOME) else None
