"""Builds across trust lines, through HTTP on a live server on each host: the runner's shared
build cache and the compilers it runs.

- job -> root: code that runs at compile time (a javac annotation processor found on the class
  path the job's own files make) swaps the build directory for a symlink to another job's
  scratch; the root-side store must not copy that directory into the cache (nor may a third
  job find what was stored by recomputing the cache key).
- job -> job: programs with 40 MiB binaries beside honest items must not evict or crowd out the
  honest items' builds (every reward right, big programs included).
- a compile that blocks without CPU (`#include "/dev/ptmx"`, Rust's `include_str!` of it, a
  read of its own stdout pipe) is the candidate's compile failure, answered quickly, and does
  not hold slots an honest item waits for.

One runner per server (pool_size=1), so every job of a test shares one runner's cache and slots.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import threading
import time

import httpx
import pytest

from sandbox.runner import compiled
from sandbox.runner.languages.table import JAVA
from tests.sandbox.lang_programs import host_options
from tests.server.conftest import kind_params

pytestmark = pytest.mark.skipif(shutil.which("javac") is None, reason="needs javac on this machine")


@pytest.fixture(scope="module", params=kind_params())
def url(request, shared_servers):
    """A server of one runner with the toolchains (all jobs of a test meet in its cache)."""
    return shared_servers.get(sandbox=request.param, sandbox_options=host_options(request.param), pool_size=1).url


def run_code(url: str, body: dict, timeout: float = 180) -> dict:
    r = httpx.post(url + "/run_code", json=body, timeout=timeout)
    assert r.status_code == 200, r.text
    return r.json()


def score(url: str, items: list[dict], timeout: float = 300) -> list[dict]:
    r = httpx.post(url + "/v1/score", json={"items": items}, timeout=timeout)
    assert r.status_code == 200, r.text
    return r.json()["results"]


def b64(data: bytes | str) -> str:
    return base64.b64encode(data.encode() if isinstance(data, str) else data).decode()


# ------------------------------------------------------------------ javac: compile-time code + symlink

# An annotation processor (found by ServiceLoader on javac's default class path, the job's
# scratch): at javac's exit it moves the build directory aside and puts a symlink in its place,
# to the directory `d` in the scratch of another slot that has one (the victim's).
PROCESSOR = r"""
import javax.annotation.processing.*;
import javax.lang.model.SourceVersion;
import javax.lang.model.element.TypeElement;
import java.nio.file.*;
import java.util.Set;

@SupportedAnnotationTypes("*")
public class P extends AbstractProcessor {
    public P() { Runtime.getRuntime().addShutdownHook(new Thread(P::swap)); }
    public SourceVersion getSupportedSourceVersion() { return SourceVersion.latestSupported(); }
    public boolean process(Set<? extends TypeElement> a, RoundEnvironment r) { return false; }
    static void swap() {
        try {
            Path here = Paths.get("").toAbsolutePath();
            Path target = null;
            for (int k = 0; k < 64; k++) {
                Path s = here.getParent().resolve("s" + k);
                if (s.equals(here)) continue;
                try {
                    if (((Integer) Files.getAttribute(s, "unix:nlink", LinkOption.NOFOLLOW_LINKS)) > 2) target = s.resolve("d");
                } catch (Exception e) { }
            }
            if (target == null) { System.err.println("PROCESSOR: no victim"); return; }
            Files.move(Paths.get(".vr-build"), Paths.get(".vr-moved"));
            Files.createSymbolicLink(Paths.get(".vr-build"), target);
            System.err.println("PROCESSOR: swapped for " + target);
        } catch (Exception e) { System.err.println("PROCESSOR: " + e); }
    }
}
"""

MAIN_JAVA = "public class Main { public static void main(String[] a) { System.out.println(\"hello\"); } }\n"

# What a third job does: recompute the attacker's cache key as the runner does (its toolchain
# is visible to every job) and read the stored file.
READER = r"""
import hashlib, os, shutil
PATH = os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin")
parts = []
for tool in ("javac", "java"):
    real = os.path.realpath(shutil.which(tool, path=PATH))
    st = os.stat(real)
    parts.append(f"{real}:{st.st_size}:{int(st.st_mtime)}")
argv = [shutil.which("javac", path=PATH)] + ARGV_TAIL
h = hashlib.sha256()
for part in ("java", ";".join(parts), "\0".join(argv), PROGRAM):
    h.update(part.encode("utf-8", "surrogatepass"))
    h.update(b"\0\1")
h.update(bytes.fromhex(EXTRA))
key = h.hexdigest()[:40]
root = os.path.dirname(os.getcwd()) + "-cache"
try:
    print("LEAKED:" + open(os.path.join(root, key, "secret.txt")).read())
except OSError as e:
    print("absent", e.strerror)
"""


def javac_class(tmp_path, source: str, name: str) -> bytes:
    src = tmp_path / f"{name}.java"
    src.write_text(source)
    subprocess.run(["javac", "--release", "11", "-d", str(tmp_path), str(src)], check=True, capture_output=True)
    return (tmp_path / f"{name}.class").read_bytes()


def test_javac_processor_symlinked_build_dir_leaks_nothing(url, tmp_path):
    secret = "victim-secret-" + os.urandom(8).hex()
    victim_body = {"code": "import time\ntime.sleep(10)\nprint('victim done')\n", "language": "python",
                   "run_timeout": 14, "files": {"d/secret.txt": b64(secret)}}
    victim: dict = {}
    th = threading.Thread(target=lambda: victim.update(run_code(url, victim_body)))
    th.start()
    time.sleep(2.0)  # the victim's scratch holds d/secret.txt now
    files = {"META-INF/services/javax.annotation.processing.Processor": b64("P\n"),
             "P.class": b64(javac_class(tmp_path, PROCESSOR, "P"))}
    attack = run_code(url, {"code": MAIN_JAVA, "language": "java", "files": files, "run_timeout": 5,
                            "compile_timeout": 20})
    tail = JAVA.argv(JAVA.compile, src="Main.java", out=compiled.OUT_DIR, pch="", pchlib="",
                               ld="", main="Main")[1:]
    extra = compiled._files_digest({"files": [{"path": k, "content_b64": v} for k, v in files.items()]})
    reader = (f"ARGV_TAIL = {tail!r}\nPROGRAM = {MAIN_JAVA!r}\nEXTRA = {extra.hex()!r}\n") + READER
    read = run_code(url, {"code": reader, "language": "python", "run_timeout": 5})
    th.join(60)
    assert victim.get("status") == "Success", victim
    assert read["status"] == "Success", read
    assert secret not in str(attack), attack
    assert secret not in str(read), read
    assert "LEAKED" not in read["run_result"]["stdout"], read
    # no compile-time code ran at all, and the honest part of the job still built and ran
    assert "PROCESSOR" not in str(attack), attack
    assert attack["status"] == "Success" and attack["run_result"]["stdout"] == "hello\n", attack


def test_fetch_files_through_a_linked_directory_reads_nothing(url):
    """A program links a directory of its scratch to another place; fetching through it gives nothing."""
    code = ("import os\nos.symlink('/etc', 'e')\nos.mkdir('d')\nos.symlink('/etc/hostname', 'd/h')\n"
            "open('ok.txt', 'w').write('fine')\n")
    res = run_code(url, {"code": code, "language": "python", "run_timeout": 5,
                         "fetch_files": ["e/passwd", "e/hostname", "d/h", "ok.txt"]})
    assert res["status"] == "Success", res
    assert res["files"] == {"ok.txt": b64("fine")}, res


# ------------------------------------------------------------------ big builds beside honest ones

CASES = [{"stdin": f"{a} {b}\n", "stdout": f"{a + b}\n"} for a, b in ((1, 2), (5, 6), (0, 7), (40, 2), (9, 9), (3, 4))]


def big_cpp(n: int, mib: int = 40) -> str:
    # an initialised array of `mib` MiB: all of it in the binary's .data
    return ("#include <cstdio>\n"
            f"static int big[{mib} << 18] = {{{n}, 1, 2, 3}};\n"
            "int main() { long long a, b; if (scanf(\"%lld %lld\", &a, &b) != 2) return 1;\n"
            f"  volatile int *p = big; printf(\"%lld\\n\", a + b + p[({mib} << 18) - 1]); }}\n")


def honest_cpp(n: int) -> str:
    return ("#include <bits/stdc++.h>\nusing namespace std;\n"
            f"// honest {n} {os.urandom(4).hex()}\n"
            "int main() { long long a, b; cin >> a >> b; cout << a + b << endl; }\n")


def cpp_task(**kw) -> dict:
    return {"type": "code", "language": "cpp", "tests": {"kind": "stdio", "cases": CASES}, "timeout_s": 4.0,
            "memory_mb": 256, **kw}


def test_big_builds_do_not_evict_or_crowd_out_honest_ones(url):
    items = []
    for n in range(4):  # 40 MiB binaries (over the cache's per-program cap) and 13 MiB ones (under it: they
        # fill the byte cap, 8 x 14 MiB > 96 MiB, while the honest items' tests run from their entries)
        for k, mib in enumerate((40, 13, 13)):
            prog = big_cpp(n * 10 + k + 100 + int.from_bytes(os.urandom(2)), mib)
            items.append({"id": f"big{mib}-{n}-{k}", "completion": "```cpp\n" + prog + "```", "task": cpp_task()})
        items.append({"id": f"honest{n}", "completion": "```cpp\n" + honest_cpp(n) + "```", "task": cpp_task()})
    results = score(url, items)
    for item, res in zip(items, results):
        assert res["status"] == "ok", (item["id"], res)
        d = res["detail"]
        assert res["reward"] == pytest.approx(1.0), (item["id"], d.get("load_message"), d["tests"][:2])


# ------------------------------------------------------------------ compiles that block without CPU

def blocked_items(n: int) -> list[dict]:
    out = []
    for k in range(n):
        nonce = os.urandom(4).hex()
        if k % 2 == 0:
            prog = f'// {nonce}\n#include "/dev/ptmx"\nint main() {{}}\n'
            out.append({"id": f"cpp{k}", "completion": "```cpp\n" + prog + "```", "task": cpp_task()})
        else:
            prog = f'// {nonce}\nconst S: &str = include_str!("/dev/ptmx");\nfn main() {{ println!("{{}}", S.len()); }}\n'
            out.append({"id": f"rust{k}", "completion": "```rust\n" + prog + "```",
                        "task": {**cpp_task(), "language": "rust"}})
    # and one that reads its own stdout pipe (no device at all): the wall-clock cut ends it
    prog = f'// {os.urandom(4).hex()}\n#include "/proc/self/fd/1"\nint main() {{}}\n'
    out.append({"id": "pipe", "completion": "```cpp\n" + prog + "```", "task": cpp_task()})
    return out


def honest_alone(url: str) -> float:
    t0 = time.monotonic()
    [res] = score(url, [{"completion": "```cpp\n" + honest_cpp(99) + "```", "task": cpp_task()}])
    assert res["reward"] == pytest.approx(1.0), res
    return time.monotonic() - t0


def test_blocking_compiles_fail_fast_and_do_not_delay_an_honest_item(url):
    honest_alone(url)  # warm
    alone = honest_alone(url)
    got: dict = {}

    def attack() -> None:
        t0 = time.monotonic()
        got["results"] = score(url, blocked_items(16))
        got["wall"] = time.monotonic() - t0

    th = threading.Thread(target=attack)
    th.start()
    time.sleep(1.0)  # the blocked compiles hold their slots now
    beside = honest_alone(url)
    th.join(300)
    assert beside <= max(2 * alone, alone + 3.0), (alone, beside)
    for res in got["results"]:
        d = res["detail"]
        assert res["status"] == "ok" and res["reward"] == 0.0, res  # the candidate's failure, never infra_error
        assert d["syntax_ok"] is False and d["load_message"].startswith("compile error"), (res["id"], d)
        if res["id"] == "pipe":  # cut once it used no CPU for a few seconds
            assert "ran out of time" in d["load_message"] and "no CPU" in d["load_message"], d
        else:  # the compiler's view of /dev has no pty: refused at once
            assert "Permission denied" in d["load_message"], d
    assert got["wall"] < 30, got["wall"]  # each is cut within seconds, none waits out a 3x backstop


# ------------------------------------------------------------------ the mechanisms, on a real directory

def test_a_build_dir_swapped_for_a_link_is_not_followed(tmp_path):
    """The store reads the directory the supervisor made, by its fd: a link put at its name
    (to a directory the job could not read) is never followed, and the swap is seen."""
    from sandbox.runner.compile_cache import BuildDir, CompileCache

    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "secret.txt").write_text("secret")
    (tmp_path / "scratch").mkdir()
    scratch = os.open(tmp_path / "scratch", os.O_RDONLY | os.O_DIRECTORY)
    build = BuildDir.make(scratch, ".vr-build", None)
    (tmp_path / "scratch" / ".vr-build" / "main").write_bytes(b"program")
    os.rename(tmp_path / "scratch" / ".vr-build", tmp_path / "scratch" / "moved")
    os.symlink(victim, tmp_path / "scratch" / ".vr-build")
    assert not build.intact()
    cache = CompileCache(str(tmp_path / "cache"))
    entry, why = cache.put(cache.key("x"), {"ok": True}, build=build)
    assert why == "" and sorted(os.listdir(entry.path)) == ["main", "result.json"]


def test_held_entries_are_never_evicted_and_a_full_cache_says_so(tmp_path):
    from sandbox.runner.compile_cache import CompileCache

    cache = CompileCache(str(tmp_path / "cache"), max_bytes=3 << 20)
    first, _ = cache.put("a", {"ok": True}, files={"main": b"x" * (1 << 20)})
    second, _ = cache.put("b", {"ok": True}, files={"main": b"y" * (1 << 20)})
    third, why = cache.put("c", {"ok": True}, files={"main": b"z" * (1 << 20)})
    assert third is None and "no room" in why  # both held by running jobs: nothing is evicted
    assert open(os.path.join(first.path, "main"), "rb").read(1) == b"x"
    first.release()
    third, why = cache.put("c", {"ok": True}, files={"main": b"z" * (1 << 20)})
    assert why == "" and cache.get("a") is None and cache.get("b") is not None  # the released one went
    too_big, why = cache.put("d", {"ok": True}, files={"main": b"w" * (17 << 20)})
    assert too_big is None and "per program" in why


def test_cache_keys_are_keyed_per_cache(tmp_path):
    """Two caches (two runners) name one compile differently: a job cannot compute a name."""
    from sandbox.runner.compile_cache import CompileCache

    one, two = CompileCache(str(tmp_path / "a")), CompileCache(str(tmp_path / "b"))
    assert one.key("m") == CompileCache(str(tmp_path / "a")).key("m") != two.key("m")
    assert oct(os.stat(tmp_path / "a" / ".key").st_mode & 0o777) == "0o600"
