"""CPU of TypeScript's compile step (sandbox/runner/languages/tsc.js) per program, side by side:
with V8's code cache of the compiler (what runs), without it, and `node --check` of the same
program as JavaScript (the javascript language's build) as the floor. Optionally a sucrase
install to compare (SUCRASE_DIR=<dir with node_modules/sucrase>): cheaper, but it drops
namespaces (FEATURES below), so it is not what runs.

    python bench/typescript_compile.py [--repeat 10]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import tempfile

from sandbox.runner.languages import typescript
from sandbox.runner.languages.table import TSC, TYPESCRIPT, TYPESCRIPT_HOME

# the programs measured: a plain one, and one using what TypeScript adds to JavaScript (the same
# programs that tests/sandbox/test_languages_ts.py runs through the sandbox; a bench imports no tests)
CORRECT = ("import * as fs from 'fs';\nconst [a, b]: number[] = fs.readFileSync(0, 'utf8').trim().split(/\\s+/).map(Number);\n"
           "function add(x: number, y: number): number { return x + y; }\nconsole.log(add(a, b));\n")
FEATURES = """
import { EOL } from "os";
namespace Util { export function dbl(x: number): number { return 2 * x; } }
enum Dir { Up = 1, Down }
const enum Flag { On = 7 }
abstract class Shape { abstract area(): number; }
class Sq extends Shape { constructor(public readonly s: number) { super(); } area(): number { return this.s ** 2; } }
type Pair<T> = [T, T];
declare const notThere: number;
function len<T extends { length: number }>(x: T): number { return x.length; }
const m = new Map<string, number[]>([["k", [1, 2, 3]]]);
const o: { q?: { r: number } } = {};
let d = Dir.Down;
process.stdout.write([Util.dbl(21), new Sq(3).area(), d, Dir[Dir.Up], Flag.On, len<Pair<number>>([1, 2]),
  m.get("k")!.length, o.q?.r ?? "none", <number>(<unknown>5)].join(" ") + EOL);
"""

SUCRASE = ("const {transform} = require(process.argv[1] + '/node_modules/sucrase');"
           "const fs = require('fs');"
           "fs.writeFileSync(process.argv[3], transform(fs.readFileSync(process.argv[2], 'utf8'),"
           " {transforms: ['typescript', 'imports']}).code);")


def cpu_of(argv: list[str], repeat: int) -> float:
    """Mean CPU seconds (user + system) of `argv`'s process over `repeat` runs."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    for _ in range(repeat):
        subprocess.run(argv, capture_output=True, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) / repeat


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=10)
    a = ap.parse_args()
    if typescript.host_dir() is None:
        raise SystemExit("no TypeScript compiler: bash sandbox/fetch_typescript.sh")
    node_flags = list(TYPESCRIPT.compile[: TYPESCRIPT.compile.index(TSC)])
    cache = [f for f in os.listdir(TYPESCRIPT_HOME) if f.startswith("v8-")]
    d = tempfile.mkdtemp(prefix="vr-tsbench-")
    src, js, out = os.path.join(d, "main.ts"), os.path.join(d, "plain.js"), os.path.join(d, "main.js")
    rows = []
    for name, prog in (("correct (6 lines)", CORRECT), ("features (18 lines)", FEATURES)):
        with open(src, "w") as f:
            f.write(prog)
        subprocess.run([*node_flags, TSC, TYPESCRIPT_HOME, src, js], check=True)
        with_cache = cpu_of([*node_flags, TSC, TYPESCRIPT_HOME, src, out], a.repeat)
        hidden = [os.path.join(TYPESCRIPT_HOME, c) for c in cache]
        for c in hidden:
            os.rename(c, c + ".off")
        try:
            no_cache = cpu_of([*node_flags, TSC, TYPESCRIPT_HOME, src, out], a.repeat)
        finally:
            for c in hidden:
                os.rename(c + ".off", c)
        check = cpu_of([node_flags[0], "--check", js], a.repeat)
        row = [name, with_cache, no_cache, check]
        if os.environ.get("SUCRASE_DIR"):
            row.append(cpu_of([node_flags[0], "-e", SUCRASE, os.environ["SUCRASE_DIR"], src, out], a.repeat))
        rows.append(row)
    head = "| program | tsc.js, V8 cache (s CPU) | tsc.js, no cache | `node --check` (JS floor) |"
    print(head + (" sucrase |" if os.environ.get("SUCRASE_DIR") else ""))
    print("|---" * (len(rows[0])) + "|")
    for r in rows:
        print(f"| {r[0]} | " + " | ".join(f"{x:.3f}" for x in r[1:]) + " |")


if __name__ == "__main__":
    main()
