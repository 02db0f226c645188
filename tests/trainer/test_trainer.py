"""Trainer behaviour with a tiny random-init Llama doing real forward/backward passes."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from tests.trainer.tiny import digit_reward
from trainer.metrics import plot_metrics, read_metrics
from trainer.rewards import CallableScorer
from trainer.tasks import TaskItem
from trainer.trainer import GRPOTrainer

REPO = Path(__file__).resolve().parents[2]


def _items(kinds: list[str]) -> list[TaskItem]:
    return [TaskItem(f"{k}-{i}", f"Say {i}.", {"type": "math", "answer": k}) for i, k in enumerate(kinds)]


def scripted_reward(items):
    """Reward by the task's 'answer' tag: same -> 1.0 for all; var -> alternating; infra -> every
    other item is an infra_error, the rest alternate 0 / 0.5 / 1."""
    out = []
    for it in items:
        kind = it["task"]["answer"]
        k = int(it["id"].rsplit("-", 1)[1])
        if kind == "same":
            out.append({"id": it["id"], "reward": 1.0, "status": "ok"})
        elif kind == "var":
            out.append({"id": it["id"], "reward": float(k % 2), "status": "ok"})
        elif kind == "infra" and k % 2 == 0:
            out.append({"id": it["id"], "reward": None, "status": "infra_error", "detail": {"error": "runner died"}})
        else:
            out.append({"id": it["id"], "reward": (k // 2 % 3) / 2, "status": "ok"})
    return out


def _params(model):
    return {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}


def test_step_trains_and_logs_every_metric(tiny_cfg):
    cfg = tiny_cfg(max_steps=2, gradient_accumulation_steps=2, kl_coeff=0.04, tensorboard=True)
    tr = GRPOTrainer(cfg, scorer=CallableScorer(digit_reward, delay_s=0.05))
    before = _params(tr.policy)
    rec = tr.train_step()
    after = _params(tr.policy)
    assert any(not torch.equal(before[n], after[n]) for n in before), "a step must change the weights"
    assert tr.ref is not None and tr.ref is not tr.policy
    assert all(not p.requires_grad for p in tr.ref.parameters())
    for key in ("reward_mean", "reward_std", "filtered_share", "kl", "clip_fraction", "loss", "completion_len_mean",
                "tokens_per_s", "reward_wait_share", "peak_mem_mb", "truncated_share", "step_time_s",
                "data_position", "grad_norm"):
        assert key in rec and rec[key] is not None, key
    assert 0.0 < rec["reward_wait_share"] < 1.0
    assert rec["data_position"] == cfg.prompts_per_step
    assert rec["kl"] == 0.0  # first step: policy == reference
    rec2 = tr.train_step()
    assert rec2["kl"] > 0.0
    tr.close()
    lines = read_metrics(Path(cfg.state_dir) / "metrics.jsonl")
    assert [r["step"] for r in lines if r["kind"] == "train"] == [1, 2]
    assert list((Path(cfg.state_dir) / "tb").iterdir())
    png = plot_metrics(Path(cfg.state_dir) / "metrics.jsonl", Path(cfg.state_dir) / "p.png")
    assert png.stat().st_size > 1000


def test_kl_off_builds_no_reference(tiny_cfg, monkeypatch):
    import copy

    calls = []
    real = copy.deepcopy
    monkeypatch.setattr(
        copy, "deepcopy", lambda x, *a, **k: (calls.append(x) if isinstance(x, torch.nn.Module) else None) or real(x, *a, **k)
    )
    tr = GRPOTrainer(tiny_cfg(kl_coeff=0.0), scorer=CallableScorer(digit_reward))
    assert tr.ref is None
    assert calls == []  # no copy of the model was made ...
    held = {id(v) for v in vars(tr).values() if isinstance(v, torch.nn.Module)}
    assert held == {id(tr.policy)}  # ... and the trainer holds no module but the policy
    rec = tr.train_step()
    assert rec["kl"] == 0.0
    tr.close()


@pytest.mark.parametrize("kw,calls", [
    (dict(kl_coeff=0.0), [4]),  # nothing to overlap the grading with: the whole batch in one generate call
    (dict(kl_coeff=0.04), [2, 2]),  # the reference pass of the first half runs while the second is graded
    (dict(kl_coeff=0.0, num_iterations=2), [2, 2]),  # the old-policy pass likewise
    (dict(kl_coeff=0.0, generation_batch_size=3), [3, 1]),  # an explicit size always wins
])
def test_generation_calls_per_round_follow_the_overlap_rule(tiny_cfg, kw, calls):
    tr = GRPOTrainer(tiny_cfg(prompts_per_step=4, **kw), scorer=CallableScorer(digit_reward))
    seen: list[int] = []
    real = tr.generator.generate
    tr.generator.generate = lambda prompts, n, t: seen.append(len(prompts)) or real(prompts, n, t)
    tr.train_step()
    assert seen == calls
    tr.close()


def test_lora_reference_is_base_with_adapters_disabled(tiny_cfg):
    cfg = tiny_cfg(kl_coeff=0.1, lora={"enabled": True, "r": 4, "target_modules": ["q_proj", "v_proj"]},
                   learning_rate=5e-2)
    tr = GRPOTrainer(cfg, scorer=CallableScorer(digit_reward))
    assert tr.ref is tr.policy  # no second copy
    trainable = [n for n, p in tr.policy.named_parameters() if p.requires_grad]
    assert trainable and all("lora" in n for n in trainable)
    base = {n: p.detach().clone() for n, p in tr.policy.named_parameters() if not p.requires_grad}
    for _ in range(2):
        rec = tr.train_step()
    assert rec["kl"] > 0.0  # the adapted policy moved away from the adapter-free reference
    for n, p in tr.policy.named_parameters():
        if not p.requires_grad:
            assert torch.equal(base[n], p), n  # base weights stay frozen
    tr.close()


def test_low_variance_filter_and_infra_errors(tiny_cfg):
    # 4 prompts: two all-same (filtered), one varied (kept), one with infra errors (kept, thinned)
    train = _items(["same", "var", "same", "infra"])
    cfg = tiny_cfg(prompts_per_step=4, group_size=4, min_group_std=0.05)
    tr = GRPOTrainer(cfg, scorer=CallableScorer(scripted_reward), train_items=train, eval_items=[])
    tr.stream.take = lambda n: train[:n]  # fixed order for the test
    rec = tr.train_step()
    assert rec["groups"] == 4
    assert rec["filtered_groups"] == 2 and rec["filtered_share"] == 0.5
    assert rec["infra_errors"] == 2  # dropped from their group, not scored 0
    assert rec["kept_groups"] == 2 and rec["kept_seqs"] == 4 + 2
    tr.close()


def test_refill_rounds_top_up_a_filtered_batch(tiny_cfg):
    train = _items(["same", "same", "var", "var", "var", "var"])
    cfg = tiny_cfg(prompts_per_step=2, group_size=4, max_refill_rounds=3)
    tr = GRPOTrainer(cfg, scorer=CallableScorer(scripted_reward), train_items=train, eval_items=[])
    pos = {"i": 0}

    def take(n):
        out = train[pos["i"] : pos["i"] + n]
        pos["i"] += n
        return out

    tr.stream.take = take
    rec = tr.train_step()
    assert rec["refill_rounds"] == 1 and rec["kept_groups"] == 2 and rec["filtered_groups"] == 2
    # without refill the same batch would have nothing to learn from
    cfg0 = tiny_cfg(prompts_per_step=2, group_size=4, max_refill_rounds=0)
    tr0 = GRPOTrainer(cfg0, scorer=CallableScorer(scripted_reward), train_items=train, eval_items=[])
    tr0.stream.take = lambda n: train[:n]
    before = _params(tr0.policy)
    rec0 = tr0.train_step()
    assert rec0["kept_groups"] == 0 and rec0["filtered_share"] == 1.0
    assert all(torch.equal(before[n], p) for n, p in _params(tr0.policy).items())  # no update
    tr.close()
    tr0.close()


@pytest.mark.parametrize("loss_type", ["dr_grpo", "dapo"])
def test_loss_types_and_multiple_iterations(tiny_cfg, loss_type):
    cfg = tiny_cfg(loss_type=loss_type, num_iterations=2, kl_coeff=0.0, learning_rate=5e-2)
    tr = GRPOTrainer(cfg, scorer=CallableScorer(digit_reward))
    rec = tr.train_step()
    # second iteration sees ratio != 1 because the first one moved the policy
    assert rec["ratio_mean"] != pytest.approx(1.0, abs=1e-9)
    assert torch.isfinite(torch.tensor(rec["loss"]))
    tr.close()


def test_eval_baseline_warns_on_uniform_groups(tiny_cfg):
    def zero(items):
        return [{"id": it["id"], "reward": 0.0, "status": "ok"} for it in items]

    cfg = tiny_cfg(max_steps=1, baseline_eval=True, num_eval_tasks=3, eval_group_size=2)
    tr = GRPOTrainer(cfg, scorer=CallableScorer(zero))
    with pytest.warns(UserWarning, match="same reward"):
        res = tr.train()
    assert res["baseline"]["low_variance_share"] == 1.0 and res["final"]["reward_mean"] == 0.0
    tr.close()


def test_cost_cap_stops_the_run(tiny_cfg):
    # $1 per second of training: the cap allows a few steps; the run stops before the step that
    # is expected (at the mean step time so far) to cross it
    cfg = tiny_cfg(max_steps=50, price_per_hour=3600.0, max_cost_usd=4.0)
    tr = GRPOTrainer(cfg, scorer=CallableScorer(digit_reward, delay_s=0.2))
    res = tr.train()
    tr.close()
    assert res["stopped"] == "max_cost_usd" and 1 <= res["step"] < 50
    last = [r for r in read_metrics(Path(cfg.state_dir) / "metrics.jsonl") if r["kind"] == "train"][-1]
    assert last["cost_usd"] == pytest.approx(tr.cost_so_far())
    assert tr.cost_so_far() - last["step_time_s"] < 4.0


def _worker(model_dir, state_dir, out, *extra, env=None):
    e = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1", **(env or {}))
    return [sys.executable, "-m", "tests.trainer.worker", str(model_dir), str(state_dir), str(out), *extra], e


def test_resume_after_kill_reproduces_step_and_data_position(tiny_model_dir, tmp_path):
    # reference: 4 uninterrupted steps
    cmd, env = _worker(tiny_model_dir, tmp_path / "ref", tmp_path / "ref.json", "--steps", "4")
    subprocess.run(cmd, env=env, check=True, cwd=REPO, timeout=240, capture_output=True)
    ref = json.loads((tmp_path / "ref.json").read_text())

    # killed run: hangs inside step 3 (steps 1 and 2 are checkpointed), then SIGKILL
    cmd, env = _worker(tiny_model_dir, tmp_path / "run", tmp_path / "dead.json", "--steps", "4", "--hang-at", "3")
    p = subprocess.Popen(cmd, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        deadline = time.monotonic() + 240
        line = ""
        while "HANG" not in line and time.monotonic() < deadline:
            line = p.stdout.readline()
            if not line and p.poll() is not None:
                break
        assert "HANG" in line, "worker did not reach step 3"
        assert (tmp_path / "run" / "checkpoints" / "step-000002").is_dir()
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    assert not (tmp_path / "dead.json").exists()

    cmd, env = _worker(tiny_model_dir, tmp_path / "run", tmp_path / "res.json", "--steps", "4", "--resume")
    subprocess.run(cmd, env=env, check=True, cwd=REPO, timeout=240, capture_output=True)
    res = json.loads((tmp_path / "res.json").read_text())
    assert res["start_step"] == 2 and res["start_position"] == 2 * 2  # 2 steps x 2 prompts
    assert res["step"] == ref["step"] == 4 and res["data_position"] == ref["data_position"] == 8
    assert res["seen"] == ref["seen"][4:]  # the same prompts, in the same order, as the uninterrupted run
    assert res["digest"] == ref["digest"]  # and bit-identical weights


def test_ddp_two_processes_keep_weights_in_sync(tiny_model_dir, tmp_path):
    pytest.importorskip("torch.distributed.run")
    out = tmp_path / "ddp-RANK.json"
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    with socket.socket() as sk:
        sk.bind(("127.0.0.1", 0))
        port = sk.getsockname()[1]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
           "--master_port", str(port),
           "-m", "tests.trainer.worker", str(tiny_model_dir), str(tmp_path / "ddp"), str(out), "--steps", "2"]
    r = subprocess.run(cmd, env=env, cwd=REPO, timeout=240, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    r0 = json.loads((tmp_path / "ddp-0.json").read_text())
    r1 = json.loads((tmp_path / "ddp-1.json").read_text())
    assert r0["digest"] == r1["digest"]  # in sync ...
    assert r0["digest"] != r0["init_digest"]  # ... after real updates
    assert r0["data_position"] == r1["data_position"] == 2 * 2 * 2  # steps x prompts x ranks
    assert r0["seen"] and not set(r0["seen"]) & set(r1["seen"])  # prompts sharded by rank
    assert (tmp_path / "ddp" / "checkpoints" / "step-000002" / "rng-rank1.pt").exists()


def test_token_logprobs_match_a_plain_forward(tiny_model_dir):
    from transformers import AutoModelForCausalLM

    from trainer.rollout import Sequence, collate, token_logprobs

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    seqs = [Sequence(torch.tensor([5, 6, 7]), torch.tensor([8, 9, 2]), "", False, 0),
            Sequence(torch.tensor([5, 6, 7, 10, 11]), torch.tensor([12]), "", False, 0)]
    b = collate(seqs, pad_id=0, device=torch.device("cpu"))
    lp = token_logprobs(model, b, temperature=0.7)
    for i, s in enumerate(seqs):  # unpadded, one at a time
        ids = torch.cat([s.prompt_ids, s.completion_ids]).unsqueeze(0)
        logits = model(input_ids=ids).logits[0, len(s.prompt_ids) - 1 : -1] / 0.7
        ref = torch.log_softmax(logits, -1).gather(-1, s.completion_ids.unsqueeze(-1)).squeeze(-1)
        n = len(s.completion_ids)
        assert torch.allclose(lp[i, :n], ref, atol=1e-5)
        assert torch.all(lp[i, n:] == 0)


def test_plot_gives_filtered_share_its_own_axis_and_evals_markers():
    import matplotlib.pyplot as plt

    from trainer.metrics import metrics_figure

    recs = [{"kind": "train", "step": s, "reward_mean": 0.1 * s, "filtered_share": 0.5} for s in range(1, 6)]
    recs += [{"kind": "eval", "step": 0, "reward_mean": 0.2}, {"kind": "eval", "step": 5, "reward_mean": 0.4}]
    fig = metrics_figure(recs)
    reward_ax, heldout_ax, share_ax = fig.axes
    assert share_ax.get_ylim() == (0.0, 1.0) and share_ax.get_lines()[0].get_ydata().tolist() == [0.5] * 5
    assert all(line.get_label() != "filtered share" for line in reward_ax.get_lines())
    (held,) = heldout_ax.get_lines()
    assert held.get_linestyle() == "None" and held.get_marker() == "o"  # two points, no line between
    plt.close(fig)


def test_baseline_eval_does_not_shift_the_training_rollouts(tiny_cfg, tmp_path):
    # `demo --seeds 0,1` reuses seed 0's baseline for seed 1; seed 1 must then train exactly as
    # `--seeds 1` does, which ran the baseline itself
    texts = {}
    for with_baseline in (True, False):
        cfg = tiny_cfg(max_steps=1, num_eval_tasks=3, state_dir=str(tmp_path / f"b{with_baseline}"))
        tr = GRPOTrainer(cfg, scorer=CallableScorer(digit_reward))
        if with_baseline:
            tr.baseline = tr.evaluate("baseline", group_check=True)
        rec = tr.train_step()
        texts[with_baseline] = (rec["sample"], rec["loss"], rec["reward_mean"])
        tr.close()
    assert texts[True] == texts[False]


def test_peak_mem_is_the_running_process_peak(tiny_cfg):
    from trainer.memory import max_rss_mb

    tr = GRPOTrainer(tiny_cfg(max_steps=3), scorer=CallableScorer(digit_reward))
    recs = [tr.train_step() for _ in range(3)]
    tr.close()
    peaks = [r["peak_mem_mb"] for r in recs]
    assert peaks == sorted(peaks)  # never goes down, unlike the per-step high-water mark
    assert all(r["peak_mem_mb"] >= r["peak_rss_mb"] for r in recs)
    assert peaks[-1] >= max(r["peak_rss_mb"] for r in recs)
    assert max_rss_mb() > 0


def test_gradient_checkpointing_gives_the_same_step(tiny_cfg, tmp_path):
    out = {}
    for gc_on in (False, True):
        cfg = tiny_cfg(max_steps=1, gradient_checkpointing=gc_on, kl_coeff=0.04, state_dir=str(tmp_path / f"g{gc_on}"))
        tr = GRPOTrainer(cfg, scorer=CallableScorer(digit_reward))
        assert tr.policy.is_activation_checkpointing == gc_on
        out[gc_on] = tr.train_step()
        tr.close()
    assert out[True]["sample"] == out[False]["sample"]
    assert out[True]["loss"] == pytest.approx(out[False]["loss"], rel=1e-5, abs=1e-7)
    assert out[True]["grad_norm"] == pytest.approx(out[False]["grad_norm"], rel=1e-5)


def test_completions_table_and_trackers(tiny_cfg, monkeypatch, capsys):
    import sys
    import types

    try:
        import wandb  # noqa: F401

        pytest.skip("a real wandb is installed: it would try to log in")
    except ImportError:
        pass
    # wandb is not installed here (and needs an account): a stand-in module with its API records calls
    calls: list[tuple] = []
    fake = types.ModuleType("wandb")
    fake.init = lambda **kw: calls.append(("init", kw["project"]))
    fake.log = lambda d, step: calls.append(("log", step, d))
    fake.finish = lambda: calls.append(("finish",))
    fake.Table = lambda columns, data: ("table", columns, data)
    monkeypatch.setitem(sys.modules, "wandb", fake)
    try:
        import trackio  # noqa: F401
        missing = []
    except ImportError:
        missing = ["trackio"]
    cfg = tiny_cfg(max_steps=1, num_eval_tasks=2, completions_table=True, report_to=["wandb", *missing],
                   baseline_eval=True, eval_group_prompts=0)
    tr = GRPOTrainer(cfg, scorer=CallableScorer(digit_reward))
    res = tr.train()
    tr.close()
    if missing:
        assert "trackio is not installed" in capsys.readouterr().err
    table = Path(res["final"]["completions_table"])
    rows = [json.loads(x) for x in table.read_text().splitlines()]
    assert len(rows) == 2 and set(rows[0]) >= {"prompt", "completion", "reward", "sources", "flags"}
    assert rows[0]["reward"] == pytest.approx(digit_reward([{"id": "x", "completion": rows[0]["completion"]}])[0]["reward"])
    assert (Path(cfg.state_dir) / "completions" / "baseline-step000000.jsonl").exists()
    kinds = [c[0] for c in calls]
    assert kinds[0] == "init" and kinds[-1] == "finish"
    logged = {k for c in calls if c[0] == "log" for k in c[2]}
    assert "train/reward_mean" in logged and "eval/final/reward_mean" in logged and "completions/final" in logged
