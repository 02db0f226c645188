"""Attacks on the compile step and on compiled programs, through a real pool: each fails, the
job gets an honest verdict, and the same runners serve the next job (no infra error)."""

from __future__ import annotations

import os
import tempfile

import pytest
import pytest_asyncio

from sandbox import ExecRequest, Job, Limits, make_pool
from tests.conftest import kind_params
from tests.sandbox.conftest import no_runner_lost
from tests.sandbox.lang_programs import host_options

SECRET = "verireward-host-secret-" + os.urandom(6).hex()


@pytest_asyncio.fixture(scope="module", params=kind_params())
async def pool(request):
    """A pool whose runners have the toolchains (this module's own: the shared one may not)."""
    p = make_pool(request.param, size=2, per_runner=2, **host_options(request.param))
    await p.start()
    yield p
    await p.close()


@pytest.fixture(scope="module")
def secret_file():
    """A file on the host, readable by all: a compiler in the sandbox must not see it."""
    d = tempfile.mkdtemp(prefix="vr-secret-")
    os.chmod(d, 0o755)
    path = os.path.join(d, "secret.txt")
    with open(path, "w") as f:
        f.write(SECRET + "\n")
    os.chmod(path, 0o644)
    yield path
    os.unlink(path)
    os.rmdir(d)


def stdio_job(lang: str, program: str, stdout: str = "ok\n", **lim) -> Job:
    limits = {"timeout_s": 3.0, "memory_mb": 256, "compile_timeout_s": 20.0, **lim}
    return Job(program=program, language=lang, tests={"kind": "stdio", "cases": [{"stdin": "", "stdout": stdout}]},
               limits=Limits(**limits))


def everything(r) -> str:
    c = r.compile
    return "\n".join([r.stdout, r.stderr, r.load_message, *(t.message for t in r.tests),
                      c.stdout if c else "", c.stderr if c else ""])


@pytest.mark.parametrize("path", ["{secret}", "/etc/shadow", "/proc/1/environ", "/etc/passwd"])
async def test_compiler_cannot_include_host_files(pool, secret_file, path):
    target = path.format(secret=secret_file)
    prog = f'#include "{target}"\nint main() {{ return 0; }}\n'
    async with no_runner_lost(pool):
        r = await pool.run(stdio_job("cpp", prog))
    text = everything(r)
    assert SECRET not in text, text[:2000]
    if pool.kind == "bwrap":  # no /etc there; a container's own /etc/passwd is the image's, not the host's
        assert "root:" not in text, text[:2000]
    if path in ("{secret}", "/etc/shadow", "/proc/1/environ"):
        assert r.compile is not None and not r.compile.ok, r
        assert [t.status for t in r.tests] == ["compile_error"]


async def test_rust_include_str_cannot_embed_host_files(pool, secret_file):
    prog = f'fn main() {{ print!("{{}}", include_str!("{secret_file}")); }}\n'
    async with no_runner_lost(pool):
        r = await pool.run(stdio_job("rust", prog))
    assert SECRET not in everything(r)
    assert [t.status for t in r.tests] == ["compile_error"]


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom", "/dev/tty"])
async def test_compiler_reading_a_device_ends_in_a_compile_error(pool, device):
    prog = f'#include "{device}"\nint main() {{ return 0; }}\n'
    async with no_runner_lost(pool):
        r = await pool.run(stdio_job("cpp", prog, compile_timeout_s=6.0))
    assert r.compile is not None and not r.compile.ok, r.compile
    assert [t.status for t in r.tests] == ["compile_error"]
    assert r.wall_s < 15


async def test_compiler_reading_its_stdin_reads_nothing(pool):
    # the compile step's stdin is its own empty pipe (the job's uid owns it, as a program's
    # stdin, so it opens by name): `#include "/dev/stdin"` includes nothing, never blocks
    prog = '#include "/dev/stdin"\n#include <cstdio>\nint main() { std::puts("built"); }\n'
    async with no_runner_lost(pool):
        r = await pool.run(stdio_job("cpp", prog, stdout="built\n", compile_timeout_s=6.0))
    assert r.compile is not None and r.compile.ok, r.compile
    assert [t.status for t in r.tests] == ["passed"], r.tests
    assert r.wall_s < 15


async def test_compiler_output_flood_is_capped(pool):
    prog = "int main() {\n" + 'int x = "a";\n' * 30000 + "}\n"
    async with no_runner_lost(pool):
        r = await pool.run(stdio_job("cpp", prog))
    assert r.compile is not None and not r.compile.ok
    assert len(r.compile.stderr) <= 20000
    assert [t.status for t in r.tests] == ["compile_error"]


CPP_WRITER = r"""
#include <bits/stdc++.h>
#include <unistd.h>
#include <libgen.h>
using namespace std;
int main(int argc, char** argv) {
    char self[4096] = {0};
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    string exe = n > 0 ? string(self, n) : string(argv[0]);
    string art = exe.substr(0, exe.rfind('/'));
    vector<string> paths = {exe, art + "/planted", art + "/../planted", "/tmp/planted", "/tmp/sbx/planted",
        "/opt/verireward/sandbox/planted", "/usr/bin/planted", "/etc/alternatives/planted", "/run/planted",
        "/var/tmp/planted"};  // /dev/shm is writable on purpose (multiprocessing; cleaned per job)
    int wrote = 0;
    for (auto& p : paths) {
        FILE* f = fopen(p.c_str(), "a");
        if (f) { wrote++; fprintf(stderr, "wrote %s\n", p.c_str()); fclose(f); }
    }
    if (rename(exe.c_str(), (art + "/moved").c_str()) == 0) wrote++;
    if (unlink(exe.c_str()) == 0) wrote++;
    FILE* own = fopen("scratch-file", "w");
    printf("%d %s\n", wrote, own ? "scratch-ok" : "scratch-denied");
}
"""


async def test_a_binary_writes_only_its_scratch(pool):
    """Not its own binary, not the compile cache (no planting a binary another job runs),
    not the system: only the job's scratch directory."""
    async with no_runner_lost(pool):
        r = await pool.run(stdio_job("cpp", CPP_WRITER, stdout="0 scratch-ok\n"))
        again = await pool.run(stdio_job("cpp", CPP_WRITER, stdout="0 scratch-ok\n"))
    assert [t.status for t in r.tests] == ["passed"], (r.tests, r.stderr)
    assert again.compile.cache in ("hit", "miss") and [t.status for t in again.tests] == ["passed"]


async def test_cpp_fork_bomb(pool):
    prog = "#include <unistd.h>\nint main() { while (1) fork(); }\n"
    async with no_runner_lost(pool):
        r = await pool.run(stdio_job("cpp", prog, timeout_s=2.0))
    assert r.passed == 0 and r.tests[0].status in ("timeout", "error"), r.tests


JAVA_ESCAPE = """
import java.io.*;
import java.nio.file.*;
public class Main {
  public static void main(String[] a) throws Exception {
    int got = 0;
    for (String p : new String[]{"/tmp/planted", "/usr/bin/planted", "/etc/java-17-openjdk/planted"}) {
      try { Files.write(Paths.get(p), new byte[]{1}); got++; } catch (Exception e) {}
    }
    for (String p : new String[]{"SECRET", "/etc/shadow", "/proc/1/environ"}) {
      try { Files.readAllBytes(Paths.get(p)); got++; } catch (Exception e) {}
    }
    try {
      Process pr = new ProcessBuilder("sh", "-c", "cat SECRET /etc/shadow; touch /tmp/planted2").start();
      got += pr.getInputStream().readAllBytes().length > 0 ? 1 : 0;
      pr.waitFor();
    } catch (Exception e) {}
    System.out.println(got + " done");
  }
}
"""

NODE_ESCAPE = """
const fs = require('fs');
let got = 0;
for (const p of ['/tmp/planted', '/usr/bin/planted', '/etc/alternatives/planted']) {
  try { fs.writeFileSync(p, 'x'); got++; } catch (e) {}
}
for (const p of ['SECRET', '/etc/shadow', '/proc/1/environ']) {
  try { fs.readFileSync(p); got++; } catch (e) {}
}
try {
  const out = require('child_process').execSync('cat SECRET /etc/shadow 2>/dev/null; touch /tmp/planted2; true');
  if (out.length > 0) got++;
} catch (e) {}
try { process.kill(1, 'SIGKILL'); got++; } catch (e) {}
console.log(got + ' done');
"""


@pytest.mark.parametrize("lang,prog", [("java", JAVA_ESCAPE), ("javascript", NODE_ESCAPE)])
async def test_jvm_and_node_escapes(pool, secret_file, lang, prog):
    async with no_runner_lost(pool):
        r = await pool.run(stdio_job(lang, prog.replace("SECRET", secret_file), stdout="0 done\n", timeout_s=5.0))
    assert [t.status for t in r.tests] == ["passed"], (r.tests, r.stderr[:2000])
    assert SECRET not in everything(r)


async def test_exec_job_in_a_compiled_language(pool):
    """run_code's job kind: files in, build (the sent header included), run once, files out."""
    import base64

    prog = '#include <cstdio>\n#include "v.h"\nint main() { FILE* f = fopen("out.txt", "w"); fprintf(f, "%d", V); ' \
           'printf("%d\\n", V + 1); }\n'
    req = ExecRequest(program=prog, language="cpp", files=[{"path": "v.h", "content_b64": base64.b64encode(
        b"#define V 41\n").decode()}], fetch_files=["out.txt"], limits=Limits(timeout_s=3))
    async with no_runner_lost(pool):
        res = await pool.execute(req)
    assert res.status == "finished" and res.return_code == 0 and res.stdout == "42\n", res
    assert base64.b64decode(res.files["out.txt"]) == b"41"
    assert res.compile is not None and res.compile.ok


async def test_unknown_language_is_a_clear_per_test_error_not_a_crash(pool):
    """A job naming a language the runner has no entry (or no toolchain) for is answered with
    that reason on every test, never a lost runner (the message skips the server's validation)."""
    from sandbox.jobs import StdioTests

    job = Job.model_construct(program="x", language="cobol", tests=StdioTests(cases=[{"stdout": ""}] * 2),
                              limits=Limits())
    async with no_runner_lost(pool):
        r = await pool.run(job)
    assert [t.status for t in r.tests] == ["error", "error"]
    assert "not supported" in r.tests[0].message and r.syntax_ok is False
    with pytest.raises(ValueError, match="unknown language"):
        Job(program="x", language="cobol", tests={"kind": "stdio", "cases": [{"stdout": ""}]})
