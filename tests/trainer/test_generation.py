"""Generation backends: the vLLM fallback where vLLM is absent, and the truncated
importance-sampling correction when a sampler reports its own log-probs."""

from __future__ import annotations

import math

import pytest
import torch

from tests.trainer.test_reward_sources import PLAN, _by_text, _fixed_rollouts
from tests.trainer.tiny import digit_reward
from trainer.generation import vllm_available
from trainer.rewards import CallableScorer
from trainer.rollout import fill_logprobs
from trainer.tasks import TaskItem
from trainer.trainer import GRPOTrainer


@pytest.mark.skipif(vllm_available(), reason="vLLM is installed here: the fallback is not taken")
def test_vllm_backend_falls_back_to_generate_and_says_so(tiny_cfg, capsys):
    tr = GRPOTrainer(tiny_cfg(generation_backend="vllm"), scorer=CallableScorer(digit_reward))
    assert tr.generator.name == "generate"
    assert "vLLM is not installed" in capsys.readouterr().err
    rec = tr.train_step()
    assert rec["kept_seqs"] > 0
    tr.close()


def _tis_step(tiny_cfg, tis_cap, shift):
    items = [TaskItem("p0", "P0", {"type": "math", "answer": "0"}), TaskItem("p1", "P1", {"type": "math", "answer": "0"})]
    cfg = tiny_cfg(prompts_per_step=2, group_size=4, kl_coeff=0.0, min_group_std=0.0, tis_cap=tis_cap,
                   loss_type="dapo", generation_batch_size=2)
    tr = GRPOTrainer(cfg, scorer=CallableScorer(_by_text), train_items=items, eval_items=[])
    tr.stream.take = lambda n: items[:n]
    _fixed_rollouts(tr, PLAN)
    fixed = tr._gen

    def gen(part, n, temperature):  # a "sampler" whose log-probs sit `shift` below the trainer's
        seqs = fixed(part, n, temperature)
        fill_logprobs(tr.policy, seqs, "rollout_logp", cfg.temperature, 8, tr.tokenizer.pad_token_id)
        for s in seqs:
            s.rollout_logp = s.rollout_logp - shift
        return seqs

    tr._gen = gen
    rec = tr.train_step()
    tr.close()
    return rec


def test_truncated_importance_sampling_scales_the_surrogate(tiny_cfg):
    base = _tis_step(tiny_cfg, None, math.log(2.0))["loss"]
    # pi_trainer / pi_sampler = 2 on every token: weight 2 under a cap of 3, the cap 1.5 below it
    assert _tis_step(tiny_cfg, 3.0, math.log(2.0))["loss"] == pytest.approx(2.0 * base, rel=1e-4)
    assert _tis_step(tiny_cfg, 1.5, math.log(2.0))["loss"] == pytest.approx(1.5 * base, rel=1e-4)
    assert base != 0.0 and torch.isfinite(torch.tensor(base))
