"""A precompiled bits/stdc++.h for C++'s default flags: 1.0 s -> 0.27 s CPU per compile.

Made once per toolchain, outside any job: at image build (sandbox/Dockerfile.toolchains) or
by the bwrap host in a cache directory of the host it then binds read-only. g++ checks a
precompiled header against the flags and the compiler and ignores one that does not match,
so a stale one costs speed, never a wrong build. About 100 MB per flag set.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess

from . import resolve, toolchain_id
from .table import CPP, CPP_FLAGS

GCH = os.path.join("bits", "stdc++.h.gch")


def header() -> str | None:
    """Where g++ finds bits/stdc++.h, or None without g++."""
    gxx = resolve("g++")
    if gxx is None:
        return None
    try:
        out = subprocess.run([gxx, "-print-file-name=include"], capture_output=True, text=True, timeout=30).stdout
        version = subprocess.run([gxx, "-dumpversion"], capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    for d in (f"/usr/include/x86_64-linux-gnu/c++/{version}", f"/usr/include/aarch64-linux-gnu/c++/{version}",
              f"/usr/include/c++/{version}", out.strip()):
        path = os.path.join(d, "bits", "stdc++.h")
        if os.path.exists(path):
            return path
    return None


def build(dest: str) -> bool:
    """Make dest/bits/stdc++.h.gch for CPP_FLAGS; False where there is no g++ or it failed."""
    src = header()
    if src is None:
        return False
    if os.path.exists(os.path.join(dest, GCH)):
        return True
    tmp = f"{dest}.tmp-{os.getpid()}"
    os.makedirs(os.path.join(tmp, "bits"), exist_ok=True)
    try:
        subprocess.run([resolve("g++") or "g++", *CPP_FLAGS, "-x", "c++-header", src, "-o", os.path.join(tmp, GCH)],
                       check=True, capture_output=True, timeout=300)
        os.makedirs(os.path.dirname(dest) or ".", exist_ok=True)
        os.chmod(tmp, 0o755)
        os.chmod(os.path.join(tmp, "bits"), 0o755)
        os.chmod(os.path.join(tmp, GCH), 0o644)
        try:
            os.rename(tmp, dest)
        except OSError:  # another process made it meanwhile
            pass
        return os.path.exists(os.path.join(dest, GCH))
    except (OSError, subprocess.SubprocessError):
        return False
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def host_dir(base: str | None = None) -> str | None:
    """A host cache directory holding the PCH for this machine's g++ (made when missing),
    or None where there is no g++. VERIREWARD_PCH_DIR overrides the base (~/.cache/verireward/pch)."""
    if resolve("g++") is None:
        return None
    base = base or os.environ.get("VERIREWARD_PCH_DIR") or os.path.expanduser("~/.cache/verireward/pch")
    ident = hashlib.sha256(f"{toolchain_id(CPP)}|{' '.join(CPP_FLAGS)}".encode()).hexdigest()[:16]
    dest = os.path.join(base, ident)
    return dest if build(dest) else None
