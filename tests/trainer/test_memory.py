"""Memory stays flat over steps and forward/backward passes are bounded in rows (tiny model)."""

from __future__ import annotations

import gc
import warnings

import pytest
import torch

import trainer.trainer as trainer_mod
from tests.trainer.tiny import digit_reward
from trainer.memory import peak_rss_mb, reset_peak_rss, rss_mb, trim_heap
from trainer.rewards import CallableScorer
from trainer.trainer import GRPOTrainer


def _live_tensors() -> tuple[int, int, int]:
    """(count, bytes, how many carry an autograd graph) of the tensors Python can reach."""
    gc.collect()
    n = nbytes = graphs = 0
    with warnings.catch_warnings():  # isinstance() on deprecated module proxies warns
        warnings.simplefilter("ignore")
        for o in gc.get_objects():
            try:
                if isinstance(o, torch.Tensor):
                    n += 1
                    nbytes += o.untyped_storage().nbytes()
                    graphs += o.grad_fn is not None
            except Exception:  # noqa: BLE001 - objects that fail isinstance/introspection
                continue
    return n, nbytes, graphs


def test_memory_does_not_grow_step_over_step(tiny_cfg):
    cfg = tiny_cfg(max_steps=6, prompts_per_step=3, group_size=4, kl_coeff=0.04, num_iterations=2,
                   gradient_accumulation_steps=2, micro_batch_size=2, min_group_std=0.0)
    tr = GRPOTrainer(cfg, scorer=CallableScorer(digit_reward))
    recs = [tr.train_step(), tr.train_step()]  # warm-up: optimizer state, lazily built caches
    base = _live_tensors()
    rss = [recs[-1]["rss_mb"]]
    for _ in range(4):
        recs.append(tr.train_step())
        live = _live_tensors()
        assert live[0] <= base[0], f"live tensors grew: {base} -> {live}"
        assert live[1] <= base[1], f"live tensor bytes grew: {base} -> {live}"
        assert live[2] == 0, "a tensor with an autograd graph outlived the step"
        rss.append(recs[-1]["rss_mb"])
    tr.close()
    for r in recs:
        assert r["kept_seqs"] > 0
        assert r["peak_rss_mb"] > 0 and r["rss_mb"] > 0
        assert r["peak_rss_mb"] >= r["rss_mb"] * 0.5
    # resident memory after each step (heap trimmed) is flat: no step leaves more behind
    assert max(rss) - rss[0] < 64, f"RSS grew over steps: {rss}"


def test_micro_batch_size_bounds_rows_per_pass_and_keeps_the_gradient(tiny_cfg, monkeypatch):
    seen: list[int] = []
    real = trainer_mod.token_logprobs

    def spy(model, batch, *a, **k):
        seen.append(int(batch.input_ids.shape[0]))
        return real(model, batch, *a, **k)

    monkeypatch.setattr(trainer_mod, "token_logprobs", spy)
    out = {}
    for mbs in (0, 2):
        seen.clear()
        cfg = tiny_cfg(max_steps=1, prompts_per_step=3, group_size=4, kl_coeff=0.0, min_group_std=0.0,
                       micro_batch_size=mbs, state_dir=tiny_cfg().state_dir + f"-{mbs}")
        tr = GRPOTrainer(cfg, scorer=CallableScorer(digit_reward))
        rec = tr.train_step()
        tr.close()
        out[mbs] = (rec, list(seen))
    assert out[0][1] == [12], "micro_batch_size=0: one pass per accumulation chunk"
    assert out[2][1] == [2] * 6
    # same rollouts (same seed), same global normalisers: the same loss and gradient
    assert out[2][0]["loss"] == pytest.approx(out[0][0]["loss"], rel=1e-5, abs=1e-7)
    assert out[2][0]["grad_norm"] == pytest.approx(out[0][0]["grad_norm"], rel=1e-4)


def test_trim_and_rss_helpers():
    assert reset_peak_rss() in (True, False)
    big = torch.ones(64 * 2**20 // 4)  # 64 MiB
    big.add_(1)
    peak = peak_rss_mb()
    del big
    trim_heap()
    now = rss_mb()
    if now is not None:  # Linux
        assert peak >= now
