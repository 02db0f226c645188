"""The bwrap command line, built from named parts, is byte for byte the one the single
function before them built, for the same inputs: the expected argv comes from that function
itself (the file at BASELINE, loaded from git), not from a copy of its output."""

from __future__ import annotations

import asyncio
import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from sandbox.hosts import bwrap
from sandbox.runner import uidlease
from sandbox.runner.slotns import ShmSpec
from sandbox.runtimes import table as runtimes

REPO = Path(__file__).resolve().parents[2]
BASELINE = "91b3cb2"  # the last commit with bwrap_command as one function


@pytest.fixture(scope="module")
def original(tmp_path_factory) -> ModuleType:
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("needs the git history")
    shown = subprocess.run(["git", "-C", str(REPO), "show", f"{BASELINE}:sandbox/hosts/bwrap.py"],
                           capture_output=True, text=True)
    if shown.returncode != 0:  # a shallow clone holds no baseline to compare with
        pytest.skip(f"needs commit {BASELINE} in the git history")
    src = shown.stdout
    path = tmp_path_factory.mktemp("orig") / "bwrap_orig.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("sandbox.hosts._bwrap_original", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


CASES = {
    "default": {},
    "small": {"slots": 1, "tmp_mb": 16, "uid_base": 30000, "shm_mb": 8},
    "scratch_memcg": {"scratch_dir": "/tmp/sbx-host-scratch", "memcg_dir": "/sys/fs/cgroup/verireward/r0"},
    "slot_shm": {"slot_shm": ShmSpec(8, 64)},
    "python_given": {"python": "PYTHON"},
    "sci": {"runtime": "sci"},
    "toolchains": {"toolchains": True, "pch_dir": "/var/pch", "ts_dir": "/var/ts"},
    "toolchains_no_extras": {"toolchains": True},
    "everything": {"toolchains": True, "pch_dir": "/var/pch", "ts_dir": "/var/ts", "runtime": "sci",
                   "scratch_dir": "/tmp/sbx-host-scratch", "memcg_dir": "/sys/fs/cgroup/x",
                   "slot_shm": ShmSpec(16, 128), "uid_base": 40000, "slots": 3, "tmp_mb": 64},
}


def _kwargs(case: dict) -> dict:
    kw = {"slots": 2, "tmp_mb": 32, **case}
    if kw.get("python") == "PYTHON":
        kw["python"] = sys.executable
    if kw.get("runtime", "python") != "python" and not runtimes.bwrap_ready(kw["runtime"]):
        pytest.skip(f"runtime {kw['runtime']} is not built")
    return kw


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("root", [True, False], ids=["root", "user"])
def test_argv_is_the_original(original, name, root, monkeypatch, tmp_path):
    """Same argv as the original function, as root and (geteuid says otherwise) as a user."""
    if not root:  # both functions ask os.geteuid: the non-root command line, whoever runs this
        monkeypatch.setattr(bwrap.os, "geteuid", lambda: 1000)
    kw = _kwargs(CASES[name])
    sock = str(tmp_path / "sock")
    assert bwrap.bwrap_argv(sock, **kw) == original.bwrap_command(sock, **kw)


@pytest.mark.parametrize("runtime", ["python", "sci"])
def test_staged_usr_argv_and_spec_are_the_original(original, runtime, tmp_path):
    """With the /usr view staged for mountns.py: the same argv and the same spec file."""
    kw = _kwargs({"toolchains": True, "pch_dir": "/var/pch", "ts_dir": "/var/ts", "runtime": runtime,
                  "scratch_dir": "/tmp/s", "memcg_dir": "/tmp/m", "slot_shm": ShmSpec(8, 64)})
    stage = str(tmp_path / "usr")
    sock = str(tmp_path / "sock")
    want = original.bwrap_command(sock, usr_stage=stage, **kw)
    want_spec = Path(stage + ".spec").read_bytes()
    Path(stage + ".spec").unlink()
    got = bwrap.bwrap_argv(sock, usr_stage=stage, **kw)
    assert got == want
    assert Path(stage + ".spec").read_bytes() == want_spec
    assert want_spec  # the toolchains put something below /usr: the spec compared is not empty


def test_the_runner_command_of_a_host_is_the_original(original, tmp_path):
    """What BwrapHost starts (mountns.py in front, the staged view) is built the same way."""
    host = bwrap.BwrapHost(slots=2, languages=True)
    lease = uidlease.lease(2)
    try:
        sock = str(tmp_path / "r")
        got = host.runner_command(sock, lease, sock + "-scratch", "/tmp/memcg")
        got_spec = Path(sock + "-usr.spec").read_bytes() if Path(sock + "-usr.spec").exists() else None
        want = original.BwrapHost.runner_command(host, sock, lease, sock + "-scratch", "/tmp/memcg")
        want_spec = Path(sock + "-usr.spec").read_bytes() if Path(sock + "-usr.spec").exists() else None
        want = [str(bwrap.MOUNTNS) if a == str(original.MOUNTNS) else a for a in want]
        assert got == want
        assert got_spec == want_spec
    finally:
        lease.release()
        asyncio.run(host.close())
