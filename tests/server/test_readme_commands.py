"""README's bash blocks, extracted and run as written, top to bottom, in a fresh clone: the front
door cannot drift. A `reward-server serve` line runs in the background until it answers (and stops
the server before it, as the reader's Ctrl-C does); every server is stopped at the end. The few
commands not run here are listed in NOT_RUN with where they are run instead, and must still be
in README (so the list cannot drift either)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PORT = 8000  # the port README uses

# command (a line's start) -> why it is not run here, and where it is
NOT_RUN = {
    "bash .ci/run": "it is CI itself (this test runs inside it)",
    ".venv/bin/pip install torch==2.13.0 --index-url": "a CPU-only install step; CI's .ci/run installs the train extra",
    ".venv/bin/pip install -e '.[train]'": "the train extra, installed by .ci/run; its commands are tests/trainer's",
    ".venv/bin/grpo-train demo": "20 minutes of training; tests/trainer runs the same trainer on a tiny model",
    "WITH_SERVER=1 bash sandbox/build_images.sh": "built by .ci/run; compose is run by tests/deploy/test_compose.py",
    "docker-compose up": "tests/deploy/test_compose.py",
    "docker-compose down": "tests/deploy/test_compose.py",
}


def bash_blocks(text: str) -> list[str]:
    """The bodies of README's ```bash fences, in order (a fence inside a quoted JSON string, as in
    a completion, is text of the command, not a fence: only a line that is exactly ``` closes)."""
    blocks, cur = [], None
    for line in text.splitlines():
        if cur is None:
            if line.strip() == "```bash":
                cur = []
        elif line.strip() == "```" and line.startswith("```"):
            blocks.append("\n".join(cur))
            cur = None
        else:
            cur.append(line)
    return blocks


_SERVE = re.compile(r"^\.venv/bin/reward-server serve\b")


def script(blocks: list[str]) -> str:
    """One bash script: each serve line started in the background and waited for, NOT_RUN lines
    replaced by a note, everything else as written."""
    out = [
        "set -euo pipefail",
        "stop() { for p in $(cat .readme-pids 2>/dev/null); do kill -TERM $p 2>/dev/null || true;"
        " while kill -0 $p 2>/dev/null; do sleep 0.2; done; done; : > .readme-pids; }",
        "trap stop EXIT",
        "ready() { for _ in $(seq 240); do curl -sf localhost:$1/readyz >/dev/null && return 0; sleep 0.5; done;"
        " echo \"server on $1 never ready\"; tail -30 .readme-server.log; return 1; }",
    ]
    for block in blocks:
        for line in block.split("\n"):
            skipped = next((k for k in NOT_RUN if line.startswith(k)), None)
            if skipped:
                out.append("echo " + shlex.quote(f"README (not run here: {NOT_RUN[skipped]}): {skipped}"))
            elif _SERVE.match(line):
                port = re.search(r"--port (\d+)", line)
                out += ["stop", f"(\n{line}\n) >> .readme-server.log 2>&1 &", "echo $! >> .readme-pids",
                        f"ready {port.group(1) if port else 8000}"]
            else:
                out.append(line)
    return "\n".join(out) + "\n"


def test_not_run_commands_are_still_in_readme():
    lines = [ln for b in bash_blocks(README.read_text()) for ln in b.split("\n")]
    for cmd in NOT_RUN:
        assert any(ln.startswith(cmd) for ln in lines), f"NOT_RUN lists {cmd!r}, which README no longer has"


def test_every_server_line_names_its_port_and_one_runs_at_a_time():
    serves = [ln for b in bash_blocks(README.read_text()) for ln in b.split("\n") if "reward-server serve" in ln]
    assert serves and all(_SERVE.match(ln) and f"--port {PORT}" in ln for ln in serves), serves
    text = README.read_text()
    assert text.count("Stop the server started above") == len(serves) - 1  # each later one says so


@pytest.mark.slow
def test_readme_commands_run_as_written_in_a_fresh_clone(tmp_path):
    if shutil.which("git") is None or shutil.which("curl") is None:
        pytest.fail("needs git and curl")
    with socket.socket() as s:
        if s.connect_ex(("127.0.0.1", PORT)) == 0:
            pytest.fail(f"port {PORT} is taken: README's commands need it")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    (clone / "readme.sh").write_text(script(bash_blocks((clone / "README.md").read_text())))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHONPATH"))}
    # the sci runtime's built packages are reused from this tree (a cold build fetches ~100 MB)
    env["VERIREWARD_RUNTIME_CACHE"] = str(ROOT / ".cache" / "runtimes")
    try:
        r = subprocess.run(["bash", "readme.sh"], cwd=clone, env=env, capture_output=True, text=True, timeout=900)
    finally:
        pids = (clone / ".readme-pids").read_text().split() if (clone / ".readme-pids").exists() else []
        for p in pids:  # the script's trap stopped them; a timeout may not have
            subprocess.run(["kill", "-KILL", p], capture_output=True)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-4000:]
    assert "Traceback" not in out, out[-4000:]
    # the quick start's two items and the sci runtime's one each score 1.0
    assert len(re.findall(r'\{"id":null,"reward":1\.0,"status":"ok"', r.stdout)) == 3, r.stdout[-3000:]
    assert "8.2B parameters:" in r.stdout
    with socket.socket() as s:  # every server it started is stopped
        assert s.connect_ex(("127.0.0.1", PORT)) != 0
