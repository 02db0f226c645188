"""What a candidate on the bwrap host sees of /usr, side by side: the interpreter's files only
(python-only runners), the toolchains' Debian packages (languages=True, this branch), and all
of /usr (languages=True before it); with the binds each takes and the sandbox's start time.

    sudo python bench/toolchain_view.py [--repeat 3]

Each row starts the runner's own bwrap command (through mountns.py as the host does) with a
probe in place of the runner: it walks /usr and counts the regular files it can read.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

from sandbox.hosts import bwrap

PROBE = ("import os\nn = 0\nfor r, ds, fs in os.walk('/usr'):\n"
         "    n += sum(1 for f in fs if os.path.isfile(os.path.join(r, f)) and not os.path.islink(os.path.join(r, f)))\n"
         "print(n)")


def row(name: str, toolchains: bool, staged: bool, repeat: int) -> tuple[str, int, int, float]:
    base = tempfile.mkdtemp(prefix="vr-view-")
    stage = base + "-usr" if staged else None
    saved = bwrap.toolchain_view
    if toolchains and not staged:  # before this branch: the system directories whole
        bwrap.toolchain_view = lambda: None  # type: ignore[assignment]
    try:
        cmd = bwrap.bwrap_command(base, slots=1, tmp_mb=16, toolchains=toolchains, usr_stage=stage)
    finally:
        bwrap.toolchain_view = saved
    sep = cmd.index("--")
    python = cmd[sep + 1]
    head = [sys.executable, "-I", "-S", str(bwrap.MOUNTNS)]
    if stage:
        head += ["--usr-view", stage + ".spec", stage]
    binds = cmd.count("--ro-bind") - (1 if stage else 0)
    if stage:
        binds += sum(1 for line in open(stage + ".spec") if line.startswith("b\t"))
    walls = []
    for _ in range(repeat):
        t0 = time.monotonic()
        subprocess.run([*head, "--", *cmd[:sep], "--", python, "-I", "-S", "-c", "pass"], check=True)
        walls.append(time.monotonic() - t0)
    out = subprocess.run([*head, "--", *cmd[:sep], "--", python, "-I", "-S", "-c", PROBE], check=True,
                         capture_output=True, text=True).stdout
    return name, int(out.strip()), binds, min(walls)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("run as root (the host's mount namespace for the /usr view needs it)")
    total = int(subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True).stdout)
    rows = [row("python only (languages=False)", False, False, a.repeat),
            row("toolchains' packages (languages=True, this branch)", True, True, a.repeat),
            row("all of /usr (languages=True before)", True, False, a.repeat)]
    print(f"host /usr: {total} regular files")
    print(f"| view | files visible under /usr | binds | sandbox start, best of {a.repeat} (s) |")
    print("|---|---|---|---|")
    for name, n, b, wall in rows:
        print(f"| {name} | {n} ({100 * n / total:.1f} %) | {b} | {wall:.3f} |")


if __name__ == "__main__":
    main()
