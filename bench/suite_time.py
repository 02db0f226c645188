"""Where the test suite's time goes: sums pytest's `--durations=0` report per directory (or
file) into set-up (fixtures: servers, pools, images) and call time, and prints a table, side by
side with a baseline run when one is given (docs/BENCHMARKS.md, "Test suite time").

    mkdir -p /tmp/suite && for d in math server sandbox reliability trainer deploy; do
      nice -n 10 python -m pytest tests/$d --durations=0 -q -p no:cacheprovider > /tmp/suite/$d.txt; done
    python bench/suite_time.py /tmp/suite/*.txt [--baseline /tmp/base/*.txt] [--by file]

On a shared machine read the shares, not the seconds."""

from __future__ import annotations

import argparse
import collections
import re
from pathlib import Path

LINE = re.compile(r"\s*([\d.]+)s (setup|call|teardown)\s+(\S+?)::")
SUMMARY = re.compile(r" in ([\d.]+)s")

Times = dict[str, collections.Counter]


def parse(paths: list[str], by: str) -> tuple[Times, float]:
    """Seconds per (directory or file) and phase, and the sum of the runs' wall times."""
    out: Times = collections.defaultdict(collections.Counter)
    wall = 0.0
    for p in paths:
        last = None
        for line in Path(p).read_text(errors="replace").splitlines():
            m = LINE.match(line)
            if m:
                name = m.group(3) if by == "file" else str(Path(m.group(3)).parent)
                out[name]["setup" if m.group(2) != "call" else "call"] += float(m.group(1))
            s = SUMMARY.search(line)
            if s and re.search(r"\d+ (passed|failed|error)", line):
                last = float(s.group(1))
        wall += last or 0.0
    return out, wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", help="pytest --durations=0 outputs")
    ap.add_argument("--baseline", nargs="*", default=[], help="the same, of the run to compare with")
    ap.add_argument("--by", choices=["dir", "file"], default="dir")
    ap.add_argument("--top", type=int, default=40)
    a = ap.parse_args()
    now, wall = parse(a.runs, a.by)
    base, bwall = parse(a.baseline, a.by) if a.baseline else ({}, 0.0)
    total = sum(sum(c.values()) for c in now.values()) or 1.0
    head = "| tests | set-up s | call s | total s | share |"
    print(head + (" baseline total s | baseline share |" if base else ""))
    print("|---" * (5 + 2 * bool(base)) + "|")
    btotal = sum(sum(c.values()) for c in base.values()) or 1.0
    for name, c in sorted(now.items(), key=lambda kv: -sum(kv[1].values()))[: a.top]:
        t = sum(c.values())
        row = f"| {name} | {c['setup']:.0f} | {c['call']:.0f} | {t:.0f} | {100 * t / total:.0f}% |"
        if base:
            b = sum(base.get(name, collections.Counter()).values())
            row += f" {b:.0f} | {100 * b / btotal:.0f}% |"
        print(row)
    setup = sum(c["setup"] for c in now.values())
    print(f"| all | {setup:.0f} | {total - setup:.0f} | {total:.0f} | wall {wall:.0f} s |"
          + (f" {btotal:.0f} | wall {bwall:.0f} s |" if base else ""))


if __name__ == "__main__":
    main()
