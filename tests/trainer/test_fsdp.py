"""FSDP2 under torchrun on 2 CPU processes (gloo): the same loss and weights as one process,
sharded checkpoints that resume exactly after SIGKILL. Tiny random-init model, real passes."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
pytest.importorskip("torch.distributed.fsdp")

# fp32 on CPU; the two layouts sum the same terms in a different order (per-rank partial sums,
# then reduce-scatter): measured |loss diff| <= 3e-5 relative, |weight diff| <= 9e-5 after two
# AdamW steps at lr 1e-2 (each step moves a weight by up to ~1e-2)
LOSS_RTOL = 1e-4
WEIGHT_ATOL = 3e-4


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")


def _port() -> int:
    with socket.socket() as sk:
        sk.bind(("127.0.0.1", 0))
        return sk.getsockname()[1]


def _torchrun(*args: str) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
            "--master_port", str(_port()), "-m", "tests.trainer.worker", *args]


def _single(*args: str) -> list[str]:
    return [sys.executable, "-m", "tests.trainer.worker", *args]


def _run(cmd: list[str]) -> None:
    r = subprocess.run(cmd, env=_env(), cwd=REPO, timeout=300, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-4000:]


@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
def test_fsdp_two_processes_match_one_process(tiny_model_dir, tmp_path, lora):
    # the same global batch (4 prompts x 4 fixed completions) as 1 x 4 prompts and 2 x 2 prompts;
    # KL to a sharded reference (full) or the adapter-free base (LoRA), two iterations per batch
    # (old log-probs), micro-batches of 3
    extra = ["--lora"] if lora else []
    _run(_single(str(tiny_model_dir), str(tmp_path / "one"), str(tmp_path / "one-RANK.json"), "--steps", "2",
                 "--fixed", "--prompts", "4", "--dump", str(tmp_path / "one.pt"), *extra))
    _run(_torchrun(str(tiny_model_dir), str(tmp_path / "two"), str(tmp_path / "two-RANK.json"), "--steps", "2",
                   "--fixed", "--prompts", "2", "--fsdp", "--dump", str(tmp_path / "two.pt"), *extra))
    one = json.loads((tmp_path / "one-0.json").read_text())
    two = [json.loads((tmp_path / f"two-{r}.json").read_text()) for r in (0, 1)]
    assert one["init_digest"] == two[0]["init_digest"]
    assert two[0]["digest"] == two[1]["digest"]  # both ranks gather the same whole weights
    assert one["seen"] == [x for pair in zip(two[0]["seen"], two[1]["seen"], strict=True) for x in pair]
    assert two[0]["losses"] == pytest.approx(one["losses"], rel=LOSS_RTOL)
    w1, w2 = torch.load(tmp_path / "one.pt"), torch.load(tmp_path / "two.pt")
    assert set(w1) == set(w2)
    diff = max(float((w1[k] - w2[k]).abs().max()) for k in w1)
    assert diff <= WEIGHT_ATOL, diff
    # not vacuous: the weights moved far more than the tolerance
    from transformers import AutoModelForCausalLM

    if lora:  # adapters start at B = 0: movement is |B| itself
        moved = max(float(w1[k].abs().max()) for k in w1 if "lora_B" in k)
    else:
        init = dict(AutoModelForCausalLM.from_pretrained(tiny_model_dir).named_parameters())
        moved = max(float((w1[k] - init[k].detach()).abs().max()) for k in w1)
    assert moved > 20 * WEIGHT_ATOL, moved
    assert (tmp_path / "two" / "checkpoints" / "step-000002" / "sharded").is_dir()
    metrics = [json.loads(x) for x in (tmp_path / "two" / "metrics.jsonl").read_text().splitlines()]
    assert all(r["grad_norm"] > 0 for r in metrics if r["kind"] == "train")


def test_fsdp_resume_after_sigkill_reproduces_the_step(tiny_model_dir, tmp_path):
    args = ["--steps", "4", "--fsdp"]
    _run(_torchrun(str(tiny_model_dir), str(tmp_path / "ref"), str(tmp_path / "ref-RANK.json"), *args))
    ref = json.loads((tmp_path / "ref-0.json").read_text())

    # real sampling (ranks stop generating at different lengths), killed inside step 3
    p = subprocess.Popen(_torchrun(str(tiny_model_dir), str(tmp_path / "run"), str(tmp_path / "dead-RANK.json"),
                                   *args, "--hang-at", "3"),
                         env=_env(), cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                         start_new_session=True)
    pids: list[int] = []  # the rank workers: torchrun puts each in its own session, so killpg misses them
    try:
        deadline = time.monotonic() + 300
        while len(pids) < 2 and time.monotonic() < deadline:
            line = p.stdout.readline()
            if not line and p.poll() is not None:
                break
            pids += [int(pid) for pid in re.findall(r"HANG (\d+)", line)]
        assert len(pids) == 2, "workers did not reach step 3"
        assert (tmp_path / "run" / "checkpoints" / "step-000002" / "sharded").is_dir()
        for pid in pids:  # both ranks and torchrun, with no chance to clean up
            os.kill(pid, signal.SIGKILL)
        os.killpg(p.pid, signal.SIGKILL)
        p.wait(timeout=30)
    finally:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=30)
    assert not (tmp_path / "dead-0.json").exists()

    _run(_torchrun(str(tiny_model_dir), str(tmp_path / "run"), str(tmp_path / "res-RANK.json"), *args, "--resume"))
    res = [json.loads((tmp_path / f"res-{r}.json").read_text()) for r in (0, 1)]
    assert res[0]["start_step"] == 2 and res[0]["start_position"] == 2 * 2 * 2  # steps x prompts x ranks
    assert res[0]["step"] == ref["step"] == 4
    assert res[0]["seen"] == ref["seen"][4:]  # rank 0's prompts, in order, as uninterrupted
    assert res[0]["digest"] == res[1]["digest"] == ref["digest"]  # bit-identical weights
