"""Run verl's own SandboxFusion integration tests, unchanged, against our /run_code.

verl's `tests/utils/reward_score/reward_score/test_sandbox_fusion_on_cpu.py` calls a live
SandboxFusion at $SANDBOX_FUSION_URL through `verl.utils.reward_score.sandbox_fusion`. This
starts our server (bwrap host with the toolchains), lays out verl's two files as a package
(verl's __init__ pulls torch and ray; the client module needs only `requests`) and runs the
chosen tests with pytest.

Usage (VERL_SRC or --src: a verl checkout, or a bare mirror of one):
    python bench/verl_languages.py -k "test_integration_compile_error"
    python bench/verl_languages.py -k "integration and not concurrency"
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

FILES = {
    "verl/utils/reward_score/sandbox_fusion/utils.py": "verl/utils/reward_score/sandbox_fusion/utils.py",
    "verl/utils/reward_score/sandbox_fusion/__init__.py": "verl/utils/reward_score/sandbox_fusion/__init__.py",
    "tests/utils/reward_score/reward_score/test_sandbox_fusion_on_cpu.py": "test_sandbox_fusion_on_cpu.py",
}


def read(src: str, path: str) -> str:
    """A file of verl: from a checkout, or from a bare mirror (git show HEAD:path)."""
    if os.path.isdir(os.path.join(src, "verl")):
        return Path(src, path).read_text()
    return subprocess.run(["git", "--git-dir", src, "show", f"HEAD:{path}"], capture_output=True, text=True,
                          check=True).stdout


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("-k", default="test_integration_compile_error")
    ap.add_argument("--src", default=os.environ.get("VERL_SRC"), help="a verl checkout or bare mirror (VERL_SRC)")
    a = ap.parse_args()
    if not a.src:
        ap.error("name verl's source: --src or VERL_SRC")
    from reward_server.local import InProcessServer

    with tempfile.TemporaryDirectory() as d:
        for path, dest in FILES.items():
            out = Path(d, dest)
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(read(a.src, path))
        for pkg in ("verl", "verl/utils", "verl/utils/reward_score"):
            Path(d, pkg, "__init__.py").touch()
        server = InProcessServer.start(sandbox="bwrap", sandbox_options={"languages": True})
        try:
            env = {**os.environ, "SANDBOX_FUSION_URL": server.url + "/run_code", "PYTHONPATH": d}
            return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", a.k,
                                   "test_sandbox_fusion_on_cpu.py"], cwd=d, env=env).returncode
        finally:
            server.stop()


if __name__ == "__main__":
    sys.exit(main())
