"""The bwrap host's view with languages=True holds the toolchains' Debian packages' files, not
the whole host /usr (finding 13 of issue 15): a file of the host's /usr that no toolchain
package owns is not there for a Python job nor for a compiler, the base system (dpkg, a
shell) is not there, the compilers are; the view is the host's cover of dpkg's lists."""

from __future__ import annotations

import os

import pytest
import pytest_asyncio

from sandbox import Job, Limits, make_pool
from sandbox.hosts import bwrap
from sandbox.runner import languages
from sandbox.runner.languages import packages
from sandbox.runner.languages.table import TABLE
from tests.conftest import sandbox_kinds
from tests.sandbox.conftest import no_runner_lost

if "bwrap" not in sandbox_kinds():
    pytest.skip("a bwrap host test", allow_module_level=True)

SECRET = "verireward-usr-secret-" + os.urandom(6).hex()
PROBE = f"/usr/share/verireward-probe-{os.getpid()}.txt"  # in /usr, owned by no package


@pytest.fixture(scope="module")
def probe_file():
    with open(PROBE, "w") as f:
        f.write(SECRET + "\n")
    os.chmod(PROBE, 0o644)
    yield PROBE
    os.unlink(PROBE)


@pytest_asyncio.fixture(scope="module")
async def pool(probe_file):
    p = make_pool("bwrap", size=1, per_runner=2, languages=True)
    await p.start()
    yield p
    await p.close()


def job(lang: str, program: str, stdout: str) -> Job:
    return Job(program=program, language=lang, tests={"kind": "stdio", "cases": [{"stdin": "", "stdout": stdout}]},
               limits=Limits(timeout_s=5.0, compile_timeout_s=30.0))


def test_the_view_is_a_cover_of_the_toolchains_packages():
    view = bwrap.toolchain_view()
    if view is None:
        pytest.skip("no dpkg database on this host")
    for lang in TABLE:  # each found tool's file is in the view
        for tool in lang.tools if languages.missing_tool(lang) is None else ():
            real = os.path.realpath(languages.resolve(tool) or tool)
            assert any(real == b or real.startswith(b + "/") for b in view.binds), (lang.name, real)
    assert "dpkg" not in view.packages and "coreutils" not in view.packages, view.packages
    assert "/usr" not in view.binds and "/usr/bin" not in view.binds and "/usr/share" not in view.binds
    assert not any(b.startswith("/usr/share/doc/") for b in view.binds)
    total = sum(len(fs) for _r, _d, fs in os.walk("/usr"))
    assert view.visible_files() < total / 3, (view.visible_files(), total)


def test_closure_follows_depends_and_alternatives():
    deps = {"a": [["b"], ["c", "d"]], "b": [["e"]], "c": [], "d": [], "e": [], "f": []}
    assert packages.closure({"a"}, deps) == {"a", "b", "c", "d", "e"}
    assert packages.closure({"missing"}, deps) == set()


async def test_a_python_job_sees_the_toolchains_and_not_the_rest_of_usr(pool, probe_file):
    prog = ("import os\n"
            f"print(os.path.exists({probe_file!r}), os.path.exists('/usr/bin/dpkg'), os.path.exists('/bin/sh'),"
            " os.access('/usr/bin/g++', os.X_OK), os.access('/usr/bin/node', os.X_OK))\n")
    async with no_runner_lost(pool):
        r = await pool.run(job("python", prog, "False False False True True\n"))
    assert [t.status for t in r.tests] == ["passed"], (r.tests, r.stdout, r.stderr)


async def test_a_compiler_cannot_include_a_file_of_usr_outside_the_view(pool, probe_file):
    async with no_runner_lost(pool):
        r = await pool.run(job("cpp", f'#include "{probe_file}"\nint main() {{ return 0; }}\n', ""))
    text = "\n".join([r.compile.stdout, r.compile.stderr] if r.compile else []) + r.load_message
    assert SECRET not in text, text
    assert [t.status for t in r.tests] == ["compile_error"], r


async def test_every_language_builds_and_runs_in_the_view(pool):
    progs = {"cpp": '#include <bits/stdc++.h>\nint main() { std::cout << "ok" << std::endl; }\n',
             "java": 'public class Main { public static void main(String[] a) { System.out.println("ok"); } }\n',
             "go": 'package main\nimport "fmt"\nfunc main() { fmt.Println("ok") }\n',
             "rust": 'fn main() { println!("ok"); }\n',
             "javascript": 'console.log("ok");\n',
             "typescript": 'const s: string = "ok";\nconsole.log(s);\n'}
    for lang in [lang for lang in progs if lang in pool.languages()]:
        r = await pool.run(job(lang, progs[lang], "ok\n"))
        assert [t.status for t in r.tests] == ["passed"], (lang, r.load_message, r.compile)


def test_the_staged_view_has_one_entry_per_path(tmp_path):
    """A runtime's library bound at a name the toolchains have as a link (libstdc++.so.6): the
    bind wins, once; a file inside a directory bound whole is not bound again; the rest of the
    binds stay bwrap's, after the stage at /usr."""
    lib = tmp_path / "libx.so.6.0"
    lib.write_text("")
    binds = [(str(lib), "/usr/lib/x86_64-linux-gnu/libx.so.6"), ("/usr/lib/gcc", "/usr/lib/gcc"),
             ("/usr/lib/gcc/x", "/usr/lib/gcc/x"), ("/opt/a", "/opt/a")]
    links = (("/usr/lib/x86_64-linux-gnu/libx.so.6", "libx.so.6.0"), ("/usr/bin/cc", "/etc/alternatives/cc"),
             ("/lib64", "usr/lib64"))
    stage = str(tmp_path / "usr")
    rest, rest_links = bwrap._stage_usr(stage, binds, links)
    assert rest == [(stage, "/usr"), ("/opt/a", "/opt/a")]
    assert rest_links == (("/lib64", "usr/lib64"),)
    spec = [line.rstrip("\n").split("\t") for line in open(stage + ".spec")]
    assert sorted(spec) == sorted([["b", "/usr/lib/gcc", "/usr/lib/gcc"],
                                   ["b", str(lib), "/usr/lib/x86_64-linux-gnu/libx.so.6"],
                                   ["l", "/usr/bin/cc", "/etc/alternatives/cc"]]), spec
