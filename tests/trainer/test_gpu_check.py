"""bench/gpu_check.sh in its CPU dry mode (what CI can run): arguments, model load, one real
step with ``generate`` per mode, the table; and its argument errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bench" / "gpu_check.sh"


def _run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHON=sys.executable, OMP_NUM_THREADS="1")
    return subprocess.run(["bash", str(SCRIPT), *args], env=env, cwd=REPO, capture_output=True, text=True,
                          timeout=timeout)


def test_dry_run_loads_the_model_and_takes_one_step_per_mode(tiny_model_dir, tmp_path):
    out = tmp_path / "gc.json"
    r = _run("--dry", "--model", str(tiny_model_dir), "--state-dir", str(tmp_path / "runs"), "--json", str(out))
    assert r.returncode == 0, r.stderr[-3000:]
    assert "cpu (dry run)" in r.stdout and "held-out" in r.stdout
    rows = json.loads(out.read_text())["runs"]
    assert [(x["mode"], x["backend"]) for x in rows] == [("lora", "generate"), ("full", "generate")]
    for x in rows:
        assert x["steps"] == 1 and x["updated_steps"] == 1  # a real update, not a filtered step
        assert x["step_s"] > 0 and x["tokens_per_s"] > 0 and x["baseline"] is not None and x["final"] is not None
    assert "vllm" in r.stdout  # says what did not run, and why


def test_bad_arguments_are_named():
    r = _run("--modes", "lora,ppo")
    assert r.returncode == 2 and "ppo" in r.stderr
    r = _run("--steps", "0")
    assert r.returncode == 2 and "--steps" in r.stderr
