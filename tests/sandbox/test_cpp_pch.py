"""The precompiled header's extern templates (sandbox/runner/languages/pch.py, stdcxx_extern.h):
a program calling every library function whose templates it leaves to libvrstdcxx.a (the C++17
special functions, stoi..stold and their wstring forms, to_chars and to_string, futures,
thread join, call_once, u16/u32string, filesystem::path's conversions) builds and prints
exactly what it prints built without the PCH: on the host's g++ directly (where the PCH's
declarations are shown to be active: without the archive the link fails) and through a real
pool on each host (the same program with an include before bits/stdc++.h, which g++ then
compiles without the PCH)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import pytest_asyncio

from sandbox import ExecRequest, Job, Limits, make_pool
from sandbox.runner.languages import pch, resolve
from sandbox.runner.languages.table import CPP_FLAGS
from tests.conftest import kind_params
from tests.sandbox.lang_programs import host_options

PROGRAM = (Path(__file__).parent / "cpp_pch_library.cpp").read_text()
WITHOUT_PCH = "#include <cmath>\n" + PROGRAM  # a PCH is used only as the first include


def _gxx() -> str:
    gxx = resolve("g++")
    if gxx is None:
        if os.environ.get("CI") == "true":
            pytest.fail("g++ is not installed (CI installs it)")
        pytest.skip("no g++ on this host")
    return gxx


def _build_and_run(tmp: Path, name: str, args: list[str]) -> subprocess.CompletedProcess:
    exe = tmp / name
    r = subprocess.run([_gxx(), *CPP_FLAGS, *args, "-static", "-o", str(exe)], capture_output=True, text=True,
                       cwd=tmp, timeout=120)
    if r.returncode != 0:
        return r
    return subprocess.run([str(exe)], capture_output=True, text=True, timeout=30)


def test_archive_holds_what_the_pch_declares_extern(tmp_path):
    d = pch.host_dir()
    assert d and os.path.exists(os.path.join(d, pch.GCH)) and os.path.exists(os.path.join(d, pch.ARCHIVE))
    (tmp_path / "main.cpp").write_text(PROGRAM)
    plain = _build_and_run(tmp_path, "plain", ["main.cpp"])
    assert plain.returncode == 0, plain.stderr[-2000:]
    # the PCH is used and its declarations hold: without the archive those functions are missing
    missing = _build_and_run(tmp_path, "missing", ["-I", d, "main.cpp"])
    assert missing.returncode != 0 and "undefined reference" in missing.stderr, missing.stderr[-2000:]
    linked = _build_and_run(tmp_path, "linked", ["-I", d, "-Winvalid-pch", "main.cpp", os.path.join(d, pch.ARCHIVE)])
    assert linked.returncode == 0, linked.stderr[-2000:]
    assert linked.stdout == plain.stdout and len(plain.stdout.splitlines()) > 80
    assert "call_once 1" in linked.stdout and "sto -42 31 511" in linked.stdout


def test_every_declaration_names_a_library_template_of_library_types():
    """What no program may specialise itself: std's (and __gnu_cxx's) own templates, for
    built-in and std types only, so a program's meaning cannot depend on these lines."""
    decls = pch.declarations()
    assert len(decls) > 100
    for d in decls:
        head = d.removeprefix("extern template ")
        m = re.match(r"class ((?:std)::[\w:]+)<|.+?\s((?:std|__gnu_cxx)::[\w:]+)<", head)
        assert m, d
        words = set(re.findall(r"[A-Za-z_]\w*", re.sub(r"(?:(?:std|__gnu_cxx)|>)::[\w:]*", "", head)))
        assert words <= {"class", "void", "bool", "char", "signed", "unsigned", "short", "int", "long", "float",
                         "double", "wchar_t", "char16_t", "char32_t", "const", "noexcept", "__builtin_va_list"}, (d, words)


def test_declarations_that_do_not_fit_the_compiler_fall_back_to_the_plain_header(tmp_path, monkeypatch):
    """A g++ whose library no longer has what a line names: the PCH is the plain header's and
    there is no archive, so the compile step links nothing extra (compiled.pch_archive)."""
    _gxx()
    bad = tmp_path / "extern.h"
    bad.write_text("extern template int std::__detail::__no_such_helper<int>(int);\n")
    monkeypatch.setattr(pch, "EXTERN_H", str(bad))
    dest = tmp_path / "pch"
    assert pch.build(str(dest))
    assert (dest / pch.GCH).exists() and not (dest / pch.ARCHIVE).exists()
    (tmp_path / "main.cpp").write_text(PROGRAM)
    r = _build_and_run(tmp_path, "plain_pch", ["-I", str(dest), "-Winvalid-pch", "main.cpp"])
    assert r.returncode == 0 and "call_once 1" in r.stdout, r.stderr[-2000:]


@pytest_asyncio.fixture(scope="module", params=kind_params())
async def pool(request):
    p = make_pool(request.param, size=1, per_runner=1, **host_options(request.param))
    await p.start()
    yield p
    await p.close()


async def test_same_output_with_and_without_the_pch_in_the_sandbox(pool):
    lim = Limits(timeout_s=10, memory_mb=512)
    without = await pool.execute(ExecRequest(program=WITHOUT_PCH, language="cpp", limits=lim))
    assert without.status == "finished" and without.return_code == 0, (without.compile, without.stderr[-1000:])
    with_pch = await pool.execute(ExecRequest(program=PROGRAM, language="cpp", limits=lim))
    assert with_pch.status == "finished" and with_pch.return_code == 0, (with_pch.compile, with_pch.stderr[-1000:])
    assert with_pch.stdout == without.stdout and len(without.stdout.splitlines()) > 80
    # and as stdio tests through the launcher, judged against the plain build's output
    r = await pool.run(Job(program=PROGRAM, language="cpp", limits=lim,
                           tests={"kind": "stdio", "cases": [{"stdin": "", "stdout": without.stdout}] * 2}))
    assert [t.status for t in r.tests] == ["passed", "passed"], (r.tests, r.load_message[:1000])
