"""The comparison modes (sandbox/runner/compare_modes.py) side by side with the peers' own
code, run unchanged, on generated (output, expected) pairs (tests/sandbox/compare_pairs.py):
a table of disagreements per mode. Nothing of the peers is in this repository: pass the
directory their files were copied to (docs/JUDGING.md says how):

    PEERS/livecodebench/testing_util.py    LiveCodeBench lcb_runner/evaluation/testing_util.py
    PEERS/apps/testing_util.py             hendrycks/apps eval/testing_util.py
    PEERS/sandboxfusion/testing.py         bytedance/SandboxFusion sandbox/utils/testing.py
    PEERS/taco/testing_util.py             FlagOpen/TACO metrics/testing_util.py
    PEERS/codecontests/tester_sandboxer.cc google-deepmind/code_contests execution/tester_sandboxer.cc
    PEERS/testlib/testlib.h, PEERS/testlib/checkers/*.cpp   MikeMirzayanov/testlib

verl's prime_code comes from the installed `verl` package (pip install --no-deps verl). The
Python peers each run in a process of their own (APPS and verl call reliability_guard, which
disables os functions); CodeContests' OutputsMatch is compiled from its own source lines with
the system's abseil (libabsl-dev); testlib's checkers are compiled as they are, each pair
judged in a forked child.

    python bench/compare_agreement.py --peers PEERS [--n 10000] [--seed 0] [--only mode,...]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import importlib.util
import json
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "sandbox"))

from compare_pairs import pairs as make_pairs  # noqa: E402

from sandbox.runner import compare_modes  # noqa: E402

TESTLIB = ["wcmp", "lcmp", "fcmp", "ncmp", "uncmp", "yesno", "rcmp4", "rcmp6", "rcmp9", "hcmp"]

# ---- Python peers: a driver per peer, run as `python -c DRIVER PEER_FILE PAIRS RESULTS`

_PRELUDE = """
import importlib.util, json, sys
peer, pairs_path, results_path = sys.argv[1:4]
results = open(results_path, "w")
pairs = json.load(open(pairs_path))
def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
def program(out):
    return "import sys\\nsys.stdout.write(" + repr(out) + ")\\n"
verdicts = []
import builtins, os, shutil, subprocess
_mods = [os, builtins, shutil, subprocess, os.environ.__class__]
_saved = [dict(vars(m)) for m in _mods]
_saved_modules = dict(sys.modules)
def fresh():
    # what reliability_guard disabled, back: each call as in the fresh process the peer runs it in
    for m, d in zip(_mods, _saved):
        for k, v in d.items():
            try:
                setattr(m, k, v)
            except (AttributeError, TypeError):
                pass
    for k in [k for k, v in sys.modules.items() if v is None]:
        if k in _saved_modules:
            sys.modules[k] = _saved_modules[k]
        else:
            del sys.modules[k]
"""

DRIVERS = {
    "livecodebench": _PRELUDE + """
mod = load("lcb_testing_util", peer)
for out, exp in pairs:
    try:
        r = mod.grade_stdio(program(out), [""], [exp], 6)
        verdicts.append(r is not None and r[0] == [True])
    except Exception:
        verdicts.append(False)
results.write(json.dumps(verdicts)); results.close()
""",
    "apps": _PRELUDE + """
import types
pyext = types.ModuleType("pyext")  # pyext (unmaintained, not on this Python): its from_string, as it does it
class RuntimeModule:
    @staticmethod
    def from_string(name, doc, code):
        m = types.ModuleType(name, doc)
        exec(code, m.__dict__)
        return m
pyext.RuntimeModule = RuntimeModule
sys.modules["pyext"] = pyext
mod = load("apps_testing_util", peer)
for out, exp in pairs:
    try:
        r = mod.run_test(problem={"input_output": {"inputs": [""], "outputs": [exp]}}, test=program(out))
        verdicts.append(len(r) == 1 and r[0] is not -1 and bool(r[0] == True))
    except Exception:
        verdicts.append(False)
    fresh()
results.write(json.dumps(verdicts)); results.close()
""",
    "prime_code": _PRELUDE + """
mod = load("verl_prime_testing_util", peer)
for out, exp in pairs:
    try:
        r, _ = mod.run_test({"inputs": [""], "outputs": [exp]}, test=program(out), timeout=6)
        verdicts.append(len(r) == 1 and r[0] is True)
    except Exception:
        verdicts.append(False)
    fresh()
results.write(json.dumps(verdicts)); results.close()
""",
    "taco": _PRELUDE + """
import types
pkg = types.ModuleType("taco_metrics")
pkg.__path__ = []
sys.modules["taco_metrics"] = pkg
pyext2 = types.ModuleType("taco_metrics.pyext2")  # its RuntimeModule runs programs: not used to compare
pyext2.RuntimeModule = object
sys.modules["taco_metrics.pyext2"] = pyext2
mod = load("taco_metrics.testing_util", peer)
for out, exp in pairs:
    try:  # the stdout execute_std_code reads: subprocess.run(..., text=True)'s own decoding
        stdout = subprocess.Popen._translate_newlines(None, out.encode("utf-8", "surrogateescape"), "utf-8", "strict")
        verdicts.append(bool(mod.compare_std_results(stdout, exp)))
    except Exception:
        verdicts.append(False)
results.write(json.dumps(verdicts)); results.close()
""",
    "sandboxfusion": _PRELUDE + """
import asyncio, types
def stub(name, **attrs):
    m = types.ModuleType(name)
    m.__dict__.update(attrs)
    m.__path__ = []
    sys.modules[name] = m
    return m
class Obj:
    def __init__(self, **kw): self.__dict__.update(kw)
    def model_dump(self): return dict(self.__dict__)
class Config:
    @staticmethod
    def get_instance_sync(): return Obj()
class Log:
    def __getattr__(self, name): return lambda *a, **k: None
current = {}
async def run(req):  # the sandbox's answer: the program finished and printed `out`
    return Obj(status="Success", run_result=Obj(stdout=current["out"]))
for pkg in ["sandbox", "sandbox.configs", "sandbox.datasets", "sandbox.runners", "sandbox.utils"]:
    stub(pkg)
stub("structlog", stdlib=Obj(get_logger=lambda: Log()))
stub("sandbox.configs.run_config", RunConfig=Config)
stub("sandbox.datasets.types", EvalTestCase=Obj, GeneralStdioTest=Obj, RunStatus=Obj, TestConfig=Obj)
stub("sandbox.runners.types", compile_languages=["cpp"])
stub("sandbox.utils.common", truncate_str=lambda s: s)
stub("sandbox.utils.execution", max_concurrency=lambda n: (lambda f: f))
stub("sandbox.utils.sandbox_client", RunCodeRequest=Obj, run_code_in_sandbox=run, run_code_in_sandbox_w_retry=run)
mod = load("sandboxfusion_testing", peer)
async def main():
    for out, exp in pairs:
        current["out"] = out
        case = Obj(input={"stdin": ""}, output={"stdout": exp})
        config = Obj(language="python", compile_timeout=None, run_timeout=None, extra={})
        try:
            verdicts.append(bool((await mod.check_stdio_test_case("", case, config)).passed))
        except Exception:
            verdicts.append(False)
asyncio.run(main())
results.write(json.dumps(verdicts)); results.close()
""",
}


def verl_testing_util() -> Path | None:
    """verl's prime_code/testing_util.py where verl is installed (found, not imported: verl's
    own __init__ pulls in torch)."""
    spec = importlib.util.find_spec("verl")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / "utils" / "reward_score" / "prime_code" / "testing_util.py"
    return path if path.is_file() else None


def run_python_peer(mode: str, peer: Path, pairs: list[tuple[str, str]], work: Path) -> list[bool]:
    pairs_path, results_path = work / f"{mode}.pairs.json", work / f"{mode}.results.json"
    pairs_path.write_text(json.dumps(pairs))
    subprocess.run([sys.executable, "-c", DRIVERS[mode], str(peer), str(pairs_path), str(results_path)],
                   cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, timeout=1800)
    return json.loads(results_path.read_text())


# ---- CodeContests: OutputsMatch and its helpers, their own lines, compiled with abseil

_CC_MAIN = r"""
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>
#include <algorithm>
#include <functional>
#include <numeric>
#include <iterator>
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/ascii.h"
#include "absl/strings/string_view.h"
namespace {
%s
}  // namespace
static std::string get(FILE* f) {
  uint32_t n; if (fread(&n, 4, 1, f) != 1) return std::string("\x01EOF");
  std::string s(n, '\0'); if (n && fread(&s[0], 1, n, f) != n) return std::string("\x01EOF");
  return s;
}
int main(int argc, char** argv) {
  FILE* f = fopen(argv[1], "rb");
  for (;;) {
    std::string out = get(f); if (out == "\x01EOF") break;
    std::string exp = get(f);
    putchar(OutputsMatch(out, exp) ? '1' : '0');
  }
  return 0;
}
"""


def _cc_functions(src: str) -> str:
    """SplitAndLowercase, ValuesMatch and OutputsMatch as tester_sandboxer.cc writes them."""
    out = []
    for name in ("std::vector<std::string> SplitAndLowercase(", "bool ValuesMatch(", "bool OutputsMatch("):
        start = src.index(name)
        end = src.index("\n}\n", start) + 3
        out.append(src[start:end])
    return "\n".join(out)


def _pack(pairs: list[tuple[str, str]]) -> bytes:
    buf = bytearray()
    for out, exp in pairs:
        for s in (out, exp):
            b = s.encode("utf-8", "surrogateescape")
            buf += struct.pack("<I", len(b)) + b
    return bytes(buf)


def run_codecontests(peer: Path, pairs: list[tuple[str, str]], work: Path) -> list[bool]:
    src = work / "cc_main.cc"
    src.write_text(_CC_MAIN % _cc_functions(peer.read_text()))
    libs = subprocess.run(["pkg-config", "--libs", "absl_strings", "absl_str_format"], capture_output=True, text=True,
                          check=True).stdout.split()
    exe = work / "cc_main"
    subprocess.run(["g++", "-O1", "-std=c++17", str(src), "-o", str(exe), *libs], check=True)
    data = work / "cc_pairs.bin"
    data.write_bytes(_pack(pairs))
    got = subprocess.run([str(exe), str(data)], capture_output=True, check=True).stdout.decode()
    return [c == "1" for c in got]


# ---- testlib: the checkers compiled as they are (each in a namespace of its own), one fork per pair

_TL_MAIN = r"""
#include "testlib.h"
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>
#include <fcntl.h>
%s
int main(int argc, char** argv) {
  std::string dir = argv[1], which = argv[3];
  int n = atoi(argv[2]);
  std::string in = dir + "/empty.in";
  for (int i = 0; i < n; i++) {
    std::string o = dir + "/" + std::to_string(i) + ".out", a = dir + "/" + std::to_string(i) + ".ans";
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
      int fd = open("/dev/null", O_WRONLY); dup2(fd, 1); dup2(fd, 2);
      char* args[] = {(char*)"checker", (char*)in.c_str(), (char*)o.c_str(), (char*)a.c_str(), NULL};
%s
      _exit(99);
    }
    int st = 0; waitpid(pid, &st, 0);
    printf("%%d\n", WIFEXITED(st) ? WEXITSTATUS(st) : 100 + WTERMSIG(st));
  }
  fflush(stdout);
  _exit(0);  // not testlib's finalizer: this process is no checker
}
"""


def run_testlib(peer: Path, pairs: list[tuple[str, str]], work: Path) -> dict[str, list[int]]:
    """Exit codes per checker (0 ok, 1 wa, 2 pe, 3 fail)."""
    spaces, calls = [], []
    for name in TESTLIB:
        body = (peer / "checkers" / f"{name}.cpp").read_text()
        spaces.append(f"namespace tl_{name} {{\n#line 1 \"{name}.cpp\"\n{body}\n}}")
        calls.append(f'      if (which == "{name}") exit(tl_{name}::main(4, args));')
    src = work / "tl_main.cpp"
    src.write_text(_TL_MAIN % ("\n".join(spaces), "\n".join(calls)))
    exe = work / "tl_main"
    subprocess.run(["g++", "-O1", "-std=c++17", "-I", str(peer), str(src), "-o", str(exe)], check=True,
                   stderr=subprocess.DEVNULL)
    files = work / "tl_pairs"
    files.mkdir(exist_ok=True)
    (files / "empty.in").write_bytes(b"")
    for i, (out, exp) in enumerate(pairs):
        (files / f"{i}.out").write_bytes(out.encode("utf-8", "surrogateescape"))
        (files / f"{i}.ans").write_bytes(exp.encode("utf-8", "surrogateescape"))
    codes = {}
    for name in TESTLIB:
        got = subprocess.run([str(exe), str(files), str(len(pairs)), name], capture_output=True, text=True, check=True)
        codes[name] = [int(x) for x in got.stdout.split()]
    return codes


_TL_CODE = {"ok": 0, "wa": 1, "pe": 2, "fail": 3}


def cost(n: int) -> None:
    """Seconds per mode for one test's output of n integer tokens (equal to the expected), and n
    tokens "1.0000001" against "1" (each pair needs the numeric rule)."""
    equal = " ".join(str(i) for i in range(n)) + "\n"
    near_out, near_exp = " ".join(["1.0000001"] * n) + "\n", " ".join(["1"] * n) + "\n"
    print(f"{'mode':<22} {'equal s':>8} {'near s':>8}   ({n} tokens, {len(equal) / 1e6:.1f} MB equal)")
    for mode in compare_modes.MODES:
        row = []
        for out, exp in ((equal, equal), (near_out, near_exp)):
            data = out.encode()
            t0 = time.process_time()
            m = compare_modes.matcher(mode, exp, None)
            for i in range(0, len(data), 1 << 16):
                m.feed(data[i:i + (1 << 16)])
            m.finish()
            row.append(time.process_time() - t0)
        print(f"{mode:<22} {row[0]:>8.2f} {row[1]:>8.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--peers", required=True, type=Path)
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", default="", help="comma-separated modes (default: every mode with a peer here)")
    ap.add_argument("--show", type=int, default=3, help="disagreements shown per mode")
    ap.add_argument("--jobs", type=int, default=2, help="peers run at once")
    ap.add_argument("--cost", type=int, default=0, help="instead: each mode's seconds on an output of this many "
                    "tokens, fed in 64 KiB pieces (equal, and every token a near miss)")
    args = ap.parse_args()
    if args.cost:
        cost(args.cost)
        return
    pairs = make_pairs(args.n, args.seed)
    only = set(filter(None, args.only.split(",")))
    peers = args.peers.resolve()
    paths = {"livecodebench": peers / "livecodebench" / "testing_util.py", "apps": peers / "apps" / "testing_util.py",
             "sandboxfusion": peers / "sandboxfusion" / "testing.py", "prime_code": verl_testing_util(),
             "taco": peers / "taco" / "testing_util.py",
             "codecontests": peers / "codecontests" / "tester_sandboxer.cc", "testlib": peers / "testlib" / "testlib.h"}
    rows = []
    with tempfile.TemporaryDirectory(prefix="compare-agreement-") as tmp:
        work = Path(tmp)

        def peer_run(mode: str, path: Path) -> tuple[dict[str, list], float]:
            t0 = time.monotonic()
            if mode == "codecontests":
                theirs: dict[str, list] = {mode: run_codecontests(path, pairs, work)}
            elif mode == "testlib":
                theirs = {f"testlib:{k}": v for k, v in run_testlib(path.parent, pairs, work).items()}
            else:
                theirs = {mode: run_python_peer(mode, path, pairs, work)}
            return theirs, time.monotonic() - t0

        wanted = {}
        for mode, path in paths.items():
            if only and mode not in only and not (mode == "testlib" and any(m.startswith("testlib") for m in only)):
                continue
            if path is None or not path.exists():
                rows.append((mode, "peer not found"))
                continue
            wanted[mode] = path
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:  # each peer is a process of its own
            futures = {mode: pool.submit(peer_run, mode, path) for mode, path in wanted.items()}
            results = {mode: f.result() for mode, f in futures.items()}
        for theirs, t_peer in results.values():
            for m, verdicts in theirs.items():
                if only and m not in only and "testlib" not in only:
                    continue
                t1 = time.monotonic()
                if m.startswith("testlib:"):
                    name = m.split(":", 1)[1]
                    ours = [_TL_CODE[compare_modes.testlib_verdict(name, o, e)[0]] for o, e in pairs]
                    mine = [compare_modes.judge(m, o, e) for o, e in pairs]  # the mode: whole-list fast path
                    peer_ok = [c == 0 for c in verdicts]
                    verdict_diff = sum(1 for a, b in zip(ours, verdicts, strict=True) if a != b)
                else:
                    mine = [compare_modes.judge(m, o, e) for o, e in pairs]
                    peer_ok, verdict_diff = verdicts, None
                t_ours = time.monotonic() - t1
                bad = [i for i, (a, b) in enumerate(zip(mine, peer_ok, strict=True)) if a != b]
                rows.append((m, "ok", len(pairs), sum(peer_ok), t_peer, t_ours,
                             [(pairs[i], peer_ok[i], mine[i]) for i in bad[: args.show]], len(bad), verdict_diff))
    print(f"{'mode':<22} {'pairs':>6} {'peer accepts':>12} {'disagree':>8} {'verdicts differ':>15} {'peer s':>7} {'ours s':>7}")
    print(f"(seed {args.seed}; 'verdicts differ': testlib's exit code, ok/wa/pe/fail, against ours)")
    for row in rows:
        if row[1] != "ok":
            print(f"{row[0]:<22} {row[1]}")
            continue
        m, _, n, acc, tp, to, shown, nbad, vdiff = row
        print(f"{m:<22} {n:>6} {acc:>12} {nbad:>8} {'' if vdiff is None else vdiff:>15} {tp:>7.1f} {to:>7.2f}")
        for (o, e), theirs_ok, ours_ok in shown:
            print(f"    output={o!r:.80} expected={e!r:.80} peer={theirs_ok} ours={ours_ok}")


if __name__ == "__main__":
    main()
